#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

/* One element of `size` bytes; 1 and 4 are the int8 and float32 cases and avoid a memcpy call each. */
static inline void copy_elem(uint8_t *dst, const uint8_t *src, int32_t size)
{
    if (size == 4) {
        memcpy(dst, src, 4); /* a single word move once inlined */
    } else if (size == 1) {
        *dst = *src;
    } else {
        memcpy(dst, src, (size_t)size);
    }
}

mcu_status mcu_remap(const mcu_remap_params *p, int32_t elem_size, const int32_t *tables, const void *input,
                     void *output)
{
    MCU_REQUIRE(p != NULL && tables != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS && elem_size > 0, MCU_ERR_INVALID_ARG);
    const int32_t rank = p->rank;
    const int32_t in_count = mcu_checked_count(p->in_shape, rank, elem_size);
    const int32_t out_count = mcu_checked_count(p->out_shape, rank, elem_size);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * (size_t)elem_size, output,
                              (size_t)out_count * (size_t)elem_size),
                MCU_ERR_INVALID_ARG);

    const int32_t *table[MCU_MAX_DIMS];
    int32_t in_stride[MCU_MAX_DIMS]; /* bytes; in_count * elem_size fits int32 (checked) */
    int32_t s = elem_size;
    const int32_t *t = tables;
    for (int32_t d = 0; d < rank; ++d) {
        table[d] = t;
        for (int32_t i = 0; i < p->out_shape[d]; ++i) {
            MCU_REQUIRE(t[i] >= 0 && t[i] < p->in_shape[d], MCU_ERR_INVALID_ARG);
        }
        t += p->out_shape[d];
    }
    for (int32_t d = rank - 1; d >= 0; --d) {
        in_stride[d] = s;
        s *= p->in_shape[d];
    }
    /* Trailing dims the tables leave as they are (same size, identity) are copied as one run:
     * upsampling H and W of an NHWC tensor moves whole pixels. */
    int32_t r = rank;
    size_t run = (size_t)elem_size;
    while (r > 1 && p->in_shape[r - 1] == p->out_shape[r - 1]) {
        int identity = 1;
        for (int32_t i = 0; i < p->out_shape[r - 1] && identity; ++i) {
            identity = table[r - 1][i] == i;
        }
        if (!identity) {
            break;
        }
        run *= (size_t)p->out_shape[r - 1];
        --r;
    }
    const int32_t inner = r - 1;
    const int32_t inner_n = p->out_shape[inner];
    const int32_t *inner_t = table[inner];
    const int32_t inner_s = in_stride[inner];
    int32_t rows = 1;
    for (int32_t d = 0; d < inner; ++d) {
        rows *= p->out_shape[d];
    }
    int32_t idx[MCU_MAX_DIMS] = {0};
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    for (int32_t row = 0; row < rows; ++row) {
        int32_t base = 0;
        for (int32_t d = 0; d < inner; ++d) {
            base += table[d][idx[d]] * in_stride[d];
        }
        const uint8_t *src = in + base;
        if (run == (size_t)elem_size) {
            for (int32_t i = 0; i < inner_n; ++i) {
                copy_elem(out, src + inner_t[i] * inner_s, elem_size);
                out += elem_size;
            }
        } else {
            for (int32_t i = 0; i < inner_n; ++i) {
                memcpy(out, src + inner_t[i] * inner_s, run);
                out += run;
            }
        }
        for (int32_t d = inner - 1; d >= 0; --d) { /* odometer over the outer dims */
            if (++idx[d] < p->out_shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    return MCU_OK;
}
