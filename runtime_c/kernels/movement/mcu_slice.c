#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_slice(const mcu_slice_params *p, int32_t elem_size, const void *input, void *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS && elem_size > 0, MCU_ERR_INVALID_ARG);
    const int32_t rank = p->rank;
    const int32_t in_count = mcu_checked_count(p->in_shape, rank, elem_size);
    const int32_t out_count = mcu_checked_count(p->out_shape, rank, elem_size);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    for (int32_t d = 0; d < rank; ++d) {
        MCU_REQUIRE(p->step[d] >= 1 && p->start[d] >= 0, MCU_ERR_INVALID_ARG);
        /* The last index read along d must lie inside the input. */
        const int64_t last = (int64_t)p->start[d] + (int64_t)(p->out_shape[d] - 1) * p->step[d];
        MCU_REQUIRE(last < p->in_shape[d], MCU_ERR_SHAPE);
    }
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * (size_t)elem_size, output,
                              (size_t)out_count * (size_t)elem_size),
                MCU_ERR_INVALID_ARG);

    int64_t in_stride[MCU_MAX_DIMS];
    int64_t s = elem_size;
    for (int32_t d = rank - 1; d >= 0; --d) {
        in_stride[d] = s;
        s *= p->in_shape[d];
    }
    /* The innermost dim is copied as one run when it is contiguous (step 1). */
    const int32_t inner = rank - 1;
    const int contiguous = p->step[inner] == 1;
    const size_t run = contiguous ? (size_t)p->out_shape[inner] * (size_t)elem_size : (size_t)elem_size;
    const int32_t inner_count = contiguous ? 1 : p->out_shape[inner];
    int32_t idx[MCU_MAX_DIMS] = {0};
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    const int32_t rows = out_count / p->out_shape[inner]; /* mcu_checked_count counts elements */
    for (int32_t r = 0; r < rows; ++r) {
        int64_t base = 0;
        for (int32_t d = 0; d < inner; ++d) {
            base += ((int64_t)p->start[d] + (int64_t)idx[d] * p->step[d]) * in_stride[d];
        }
        base += (int64_t)p->start[inner] * in_stride[inner];
        for (int32_t i = 0; i < inner_count; ++i) {
            memcpy(out, in + base + (int64_t)i * p->step[inner] * in_stride[inner], run);
            out += run;
        }
        for (int32_t d = inner - 1; d >= 0; --d) {  /* odometer over the outer dims */
            if (++idx[d] < p->out_shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    return MCU_OK;
}
