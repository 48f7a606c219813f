#include <stddef.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"
#include "elem.h"

mcu_status mcu_permute(const mcu_permute_params *p, int32_t elem_size, const void *input, void *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(elem_size > 0 && p->rank >= 1 && p->rank <= MCU_MAX_DIMS, MCU_ERR_INVALID_ARG);
    int32_t seen = 0;
    for (int32_t i = 0; i < p->rank; ++i) {
        const int32_t d = p->perm[i];
        MCU_REQUIRE(d >= 0 && d < p->rank && (seen & (1 << d)) == 0, MCU_ERR_INVALID_ARG);
        seen |= 1 << d;
    }
    const int32_t total = mcu_checked_count(p->in_shape, p->rank, elem_size);
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    const size_t bytes = (size_t)total * (size_t)elem_size;
    MCU_REQUIRE(!mcu_overlaps(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);

    int32_t in_stride[MCU_MAX_DIMS];
    int32_t s = 1;
    for (int32_t i = p->rank - 1; i >= 0; --i) {
        in_stride[i] = s;
        s *= p->in_shape[i];
    }

    /* Walk the output in memory order. Size-1 dims are dropped and output
     * neighbours that are also neighbours in the input are merged, so e.g. an
     * NCHW->NHWC permute becomes a 2-D transpose of [C][H*W]. */
    int32_t dim[MCU_MAX_DIMS];
    int32_t stride[MCU_MAX_DIMS];
    int32_t r = 0;
    for (int32_t i = 0; i < p->rank; ++i) {
        const int32_t n = p->in_shape[p->perm[i]];
        const int32_t st = in_stride[p->perm[i]];
        if (n == 1) {
            continue;
        }
        if (r > 0 && stride[r - 1] == st * n) {
            dim[r - 1] *= n;
            stride[r - 1] = st;
        } else {
            dim[r] = n;
            stride[r] = st;
            ++r;
        }
    }
    if (r == 0) {
        dim[0] = 1;
        stride[0] = 1;
        r = 1;
    }

    const uint8_t *src = (const uint8_t *)input;
    uint8_t *dst = (uint8_t *)output;
    const int32_t inner = dim[r - 1];
    const int32_t row_bytes = inner * elem_size;
    const int32_t rows = total / inner;
    int32_t idx[MCU_MAX_DIMS] = {0};
    int32_t off = 0;
    for (int32_t row = 0; row < rows; ++row) {
        if (stride[r - 1] == 1) {
            memcpy(dst, src + off * elem_size, (size_t)row_bytes);
        } else {
            mcu_gather_elems(dst, src + off * elem_size, inner, stride[r - 1] * elem_size, elem_size);
        }
        dst += row_bytes;
        for (int32_t d = r - 2; d >= 0; --d) {
            off += stride[d];
            if (++idx[d] < dim[d]) {
                break;
            }
            off -= stride[d] * dim[d];
            idx[d] = 0;
        }
    }
    return MCU_OK;
}
