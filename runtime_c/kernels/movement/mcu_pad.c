#include <stddef.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"
#include "elem.h"

mcu_status mcu_pad(const mcu_pad_params *p, int32_t elem_size, const void *fill, const void *input,
                   void *output)
{
    MCU_REQUIRE(p != NULL && fill != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(elem_size > 0 && p->rank >= 1 && p->rank <= MCU_MAX_DIMS, MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < p->rank; ++i) {
        MCU_REQUIRE(p->pad_before[i] >= 0 && p->pad_after[i] >= 0, MCU_ERR_INVALID_ARG);
    }
    const int32_t in_total = mcu_checked_count(p->in_shape, p->rank, elem_size);
    MCU_REQUIRE(in_total > 0, MCU_ERR_SHAPE);
    int32_t in_dim[MCU_MAX_DIMS];
    int32_t before[MCU_MAX_DIMS];
    int32_t after[MCU_MAX_DIMS];
    int32_t out_dim[MCU_MAX_DIMS];
    for (int32_t i = 0; i < p->rank; ++i) {
        const int64_t n = (int64_t)p->in_shape[i] + p->pad_before[i] + p->pad_after[i];
        MCU_REQUIRE(n <= INT32_MAX, MCU_ERR_SHAPE);
        in_dim[i] = p->in_shape[i];
        before[i] = p->pad_before[i];
        after[i] = p->pad_after[i];
        out_dim[i] = (int32_t)n;
    }
    const int32_t out_total = mcu_checked_count(out_dim, p->rank, elem_size);
    MCU_REQUIRE(out_total > 0, MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_total * (size_t)elem_size;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_total * (size_t)elem_size, output, out_bytes) &&
                    !mcu_overlaps(fill, (size_t)elem_size, output, out_bytes),
                MCU_ERR_INVALID_ARG);

    /* Trailing dims without padding fold into the innermost row, so padding
     * H and W of an NHWC tensor copies whole W*C runs at a time. */
    int32_t r = p->rank;
    while (r > 1 && before[r - 1] == 0 && after[r - 1] == 0) {
        const int32_t n = in_dim[r - 1];
        in_dim[r - 2] *= n;
        before[r - 2] *= n;
        after[r - 2] *= n;
        out_dim[r - 2] *= n;
        --r;
    }

    int32_t in_stride[MCU_MAX_DIMS];
    int32_t s = 1;
    for (int32_t i = r - 1; i >= 0; --i) {
        in_stride[i] = s;
        s *= in_dim[i];
    }

    const uint8_t *fill_elem = (const uint8_t *)fill;
    const int byte_pattern = mcu_elem_is_byte_pattern(fill_elem, elem_size);
    const uint8_t *src = (const uint8_t *)input;
    uint8_t *dst = (uint8_t *)output;
    const int32_t last = r - 1;
    const int32_t out_row = out_dim[last];
    const int32_t rows = out_total / out_row;
    int32_t idx[MCU_MAX_DIMS] = {0};
    for (int32_t row = 0; row < rows; ++row) {
        int inside = 1;
        int32_t in_off = 0;
        for (int32_t d = 0; d < last; ++d) {
            const int32_t i = idx[d] - before[d];
            if (i < 0 || i >= in_dim[d]) {
                inside = 0;
                break;
            }
            in_off += i * in_stride[d];
        }
        if (inside) {
            mcu_fill_elems(dst, before[last], fill_elem, elem_size, byte_pattern);
            memcpy(dst + before[last] * elem_size, src + in_off * elem_size,
                   (size_t)in_dim[last] * (size_t)elem_size);
            mcu_fill_elems(dst + (before[last] + in_dim[last]) * elem_size, after[last], fill_elem,
                           elem_size, byte_pattern);
        } else {
            mcu_fill_elems(dst, out_row, fill_elem, elem_size, byte_pattern);
        }
        dst += out_row * elem_size;
        for (int32_t d = last - 1; d >= 0; --d) {
            if (++idx[d] < out_dim[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    return MCU_OK;
}
