#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/lut.h"

/* The whole weight matrix decoded to int8 ([out][in]): the most the kernel uses. It runs with as little as one
 * row (in_features bytes), decoding as many rows as the scratch holds at a time. */
int32_t mcu_linear_lut_s16_get_buffer_size(const mcu_linear_s16_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t dims[2] = {p->out_features, p->in_features};
    const int32_t count = mcu_checked_count(dims, 2, 1);
    return count > 0 ? count : 0;
}

mcu_status mcu_linear_lut_s16(const mcu_context *ctx, const mcu_linear_s16_params *p,
    const mcu_per_channel_quant *q, int32_t word, const int16_t *input, const uint8_t *indices, const int8_t *table,
    const int64_t *bias, int16_t *output)
{
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && p != NULL && q != NULL && input != NULL && indices != NULL &&
                    table != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t in_dims[2] = {p->batch, p->in_features}, out_dims[2] = {p->batch, p->out_features};
    const int32_t in_bytes = mcu_checked_count(in_dims, 2, 2), out_bytes = mcu_checked_count(out_dims, 2, 2);
    const int32_t count = mcu_linear_lut_s16_get_buffer_size(p);
    const int32_t nin = p->in_features;
    /* rows a pass: as many as the scratch holds (checked: at least one) */
    const int32_t rows = count > 0 && ctx->size >= nin ? (ctx->size / nin < p->out_features ? ctx->size / nin
                                                                                            : p->out_features)
                                                       : 1;
    const mcu_status status = mcu_lut_check_s16(ctx, word, p->out_features, count, rows * nin, indices, table, input,
                                                in_bytes, output, out_bytes);
    if (status != MCU_OK) {
        return status;
    }
    const int32_t bits = mcu_lut_width(word);
    const size_t row_bytes = (size_t)mcu_lut_row_bytes(nin, bits);
    int8_t *w = (int8_t *)ctx->buf;
    /* each pass's rows decoded once, then the 16x8 kernel on them for every batch row (it checks the rest) */
    for (int32_t o = 0; o < p->out_features; o += rows) {
        const int32_t k = p->out_features - o < rows ? p->out_features - o : rows;
        for (int32_t r = 0; r < k; ++r) {
            mcu_lut_decode(indices + (size_t)(o + r) * row_bytes, mcu_lut_table_of(table, word, o + r), bits, nin,
                           w + (size_t)r * (size_t)nin, 1);
        }
        const mcu_linear_s16_params part = {1, nin, k, p->act_min, p->act_max};
        const mcu_per_channel_quant part_q = {q->multiplier != NULL ? q->multiplier + o : NULL,
                                              q->shift != NULL ? q->shift + o : NULL};
        for (int32_t b = 0; b < p->batch; ++b) {
            const mcu_status s = mcu_linear_s16(NULL, &part, &part_q, input + (size_t)b * (size_t)nin, w,
                                                bias != NULL ? bias + o : NULL,
                                                output + (size_t)b * (size_t)p->out_features + (size_t)o);
            if (s != MCU_OK) {
                return s;
            }
        }
    }
    return MCU_OK;
}
