#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/lut.h"

/* The whole weight matrix decoded to int8 ([out][in]) for mcu_linear_s16. */
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
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && p != NULL && input != NULL && indices != NULL && table != NULL &&
                    output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_lut_bits_valid(word), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features}, out_dims[2] = {p->batch, p->out_features};
    const int32_t in_bytes = mcu_checked_count(in_dims, 2, 2), out_bytes = mcu_checked_count(out_dims, 2, 2);
    const int32_t count = mcu_linear_lut_s16_get_buffer_size(p);
    const int32_t channels = p->out_features;
    MCU_REQUIRE(count > 0 && in_bytes > 0 && out_bytes > 0 && channels > 0 && channels <= INT32_MAX / 16,
                MCU_ERR_SHAPE);
    MCU_REQUIRE(ctx->size >= count, MCU_ERR_BUFFER_TOO_SMALL);
    const int32_t taps = count / channels;
    const size_t idx_bytes = (size_t)mcu_lut_row_bytes(taps, mcu_lut_width(word)) * (size_t)channels;
    const size_t table_bytes = mcu_lut_table_bytes(word, channels);
    int8_t *w = (int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(w, (size_t)count, input, (size_t)in_bytes) &&
                    !mcu_overlaps(w, (size_t)count, output, (size_t)out_bytes) &&
                    !mcu_overlaps(w, (size_t)count, indices, idx_bytes) &&
                    !mcu_overlaps(w, (size_t)count, table, table_bytes) &&
                    !mcu_overlaps(indices, idx_bytes, output, (size_t)out_bytes) &&
                    !mcu_overlaps(table, table_bytes, output, (size_t)out_bytes),
                MCU_ERR_INVALID_ARG);
    mcu_lut_decode_all(indices, table, word, channels, taps, w, 0);
    /* the 16x8 kernel checks the rest (given no scratch: the decoded weights hold it) */
    return mcu_linear_s16(NULL, p, q, input, w, bias, output);
}
