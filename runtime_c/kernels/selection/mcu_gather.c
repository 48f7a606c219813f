#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_gather(const mcu_gather_params *p, int32_t elem_size, const int32_t *index, const void *input,
                      void *output)
{
    MCU_REQUIRE(p != NULL && index != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS && p->dim >= 0 && p->dim < p->rank && elem_size > 0,
                MCU_ERR_INVALID_ARG);
    const int32_t rank = p->rank;
    const int32_t in_count = mcu_checked_count(p->in_shape, rank, elem_size);
    const int32_t out_count = mcu_checked_count(p->out_shape, rank, elem_size);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    for (int32_t d = 0; d < rank; ++d) {
        MCU_REQUIRE(d == p->dim || p->out_shape[d] <= p->in_shape[d], MCU_ERR_SHAPE);
    }
    const size_t out_bytes = (size_t)out_count * (size_t)elem_size;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * (size_t)elem_size, output, out_bytes) &&
                    !mcu_overlaps(index, (size_t)out_count * sizeof(int32_t), output, out_bytes),
                MCU_ERR_INVALID_ARG);
    const int32_t size = p->in_shape[p->dim];
    for (int32_t i = 0; i < out_count; ++i) {
        MCU_REQUIRE(index[i] >= 0 && index[i] < size, MCU_ERR_INVALID_ARG);
    }
    int32_t in_stride[MCU_MAX_DIMS]; /* bytes */
    int32_t s = elem_size;
    for (int32_t d = rank - 1; d >= 0; --d) {
        in_stride[d] = s;
        s *= p->in_shape[d];
    }
    const int32_t inner = rank - 1;
    const int32_t inner_n = p->out_shape[inner];
    const int32_t rows = out_count / inner_n;
    const int32_t dim_stride = in_stride[p->dim];
    int32_t idx[MCU_MAX_DIMS] = {0};
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    const int32_t *ix = index;
    for (int32_t row = 0; row < rows; ++row) {
        int32_t base = 0; /* the row's input offset without the gathered coordinate */
        for (int32_t d = 0; d < inner; ++d) {
            base += d == p->dim ? 0 : idx[d] * in_stride[d];
        }
        for (int32_t i = 0; i < inner_n; ++i) {
            const int32_t off = base + *ix++ * dim_stride + (inner == p->dim ? 0 : i * in_stride[inner]);
            memcpy(out, in + off, (size_t)elem_size);
            out += elem_size;
        }
        for (int32_t d = inner - 1; d >= 0; --d) {
            if (++idx[d] < p->out_shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    return MCU_OK;
}
