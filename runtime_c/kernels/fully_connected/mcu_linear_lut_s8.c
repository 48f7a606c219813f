#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/lut.h"
#include "../common/requant.h"

/* One output feature's decoded row of weights. */
int32_t mcu_linear_lut_s8_get_buffer_size(const mcu_linear_s8_params *p)
{
    return p != NULL && p->in_features > 0 ? p->in_features : 0;
}

mcu_status mcu_linear_lut_s8(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                             int32_t word, const int8_t *input, const uint8_t *indices, const int8_t *table,
                             const int32_t *bias, int8_t *output)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL &&
                    input != NULL && indices != NULL && table != NULL && output != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_lut_bits_valid(word) && mcu_input_offset_valid(p->input_offset) &&
                    mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, 1);
    const int32_t w_count = mcu_checked_count(w_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 1);
    MCU_REQUIRE(in_count > 0 && w_count > 0 && out_count > 0 && p->out_features <= INT32_MAX / 16,
                MCU_ERR_SHAPE);
    MCU_REQUIRE(ctx->size >= p->in_features, MCU_ERR_BUFFER_TOO_SMALL);
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const int32_t nin = p->in_features;
    const int32_t bits = mcu_lut_width(word);
    const int32_t row_bytes = mcu_lut_row_bytes(nin, bits);
    const size_t idx_bytes = (size_t)row_bytes * (size_t)p->out_features;
    const size_t table_bytes = mcu_lut_table_bytes(word, p->out_features);
    const size_t out_bytes = (size_t)out_count;
    const size_t bias_bytes = bias != NULL ? (size_t)p->out_features * sizeof(int32_t) : 0u;
    int8_t *row = (int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(indices, idx_bytes, output, out_bytes) &&
                    !mcu_overlaps(table, table_bytes, output, out_bytes) &&
                    !mcu_overlaps(bias, bias_bytes, output, out_bytes) &&
                    !mcu_overlaps(row, (size_t)nin, input, (size_t)in_count) &&
                    !mcu_overlaps(row, (size_t)nin, output, out_bytes) &&
                    !mcu_overlaps(row, (size_t)nin, indices, idx_bytes) &&
                    !mcu_overlaps(row, (size_t)nin, table, table_bytes),
                MCU_ERR_INVALID_ARG);

    /* Each row decoded once, then its dot with every batch row. */
    for (int32_t o = 0; o < p->out_features; ++o) {
        mcu_lut_decode(indices + (size_t)o * (size_t)row_bytes, mcu_lut_table_of(table, word, o), bits, nin, row, 1);
        const uint32_t b0 = bias != NULL ? (uint32_t)bias[o] : 0u;
        for (int32_t b = 0; b < p->batch; ++b) {
            const uint32_t acc = mcu_lut_dot(input + (size_t)b * (size_t)nin, row, nin, p->input_offset, b0);
            output[(size_t)b * (size_t)p->out_features + (size_t)o] =
                mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[o], q->shift[o], p->output_offset,
                                     p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
