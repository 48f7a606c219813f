#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/lut.h"
#include "../common/requant.h"

/* The whole weight tensor decoded to int8 ([kh][kw][out_c]), for mcu_depthwise_conv2d_s8 and its core's
 * paths. */
int32_t mcu_depthwise_conv2d_lut_s8_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t dims[3] = {p->kernel_h, p->kernel_w, p->output.c};
    const int32_t count = mcu_checked_count(dims, 3, 1);
    return count > 0 ? count : 0;
}

mcu_status mcu_depthwise_conv2d_lut_s8(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                       const mcu_per_channel_quant *q, int32_t word, const int8_t *input,
                                       const uint8_t *indices, const int8_t *table, const int32_t *bias,
                                       int8_t *output)
{
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && p != NULL && input != NULL && indices != NULL &&
                    table != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_lut_bits_valid(word), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[4] = {p->input.n, p->input.h, p->input.w, p->input.c};
    const int32_t out_dims[4] = {p->output.n, p->output.h, p->output.w, p->output.c};
    const int32_t in_count = mcu_checked_count(in_dims, 4, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 4, 1);
    const int32_t count = mcu_depthwise_conv2d_lut_s8_get_buffer_size(p);
    MCU_REQUIRE(in_count > 0 && out_count > 0 && count > 0 && p->output.c <= INT32_MAX / 16, MCU_ERR_SHAPE);
    MCU_REQUIRE(ctx->size >= count, MCU_ERR_BUFFER_TOO_SMALL);
    const int32_t taps = p->kernel_h * p->kernel_w;
    const int32_t channels = p->output.c;
    const int32_t bits = mcu_lut_width(word);
    const int32_t row_bytes = mcu_lut_row_bytes(taps, bits);
    const size_t idx_bytes = (size_t)row_bytes * (size_t)channels;
    const size_t table_bytes = mcu_lut_table_bytes(word, channels);
    const size_t out_bytes = (size_t)out_count;
    int8_t *wide = (int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(indices, idx_bytes, output, out_bytes) &&
                    !mcu_overlaps(table, table_bytes, output, out_bytes) &&
                    !mcu_overlaps(wide, (size_t)count, input, (size_t)in_count) &&
                    !mcu_overlaps(wide, (size_t)count, output, out_bytes) &&
                    !mcu_overlaps(wide, (size_t)count, indices, idx_bytes) &&
                    !mcu_overlaps(wide, (size_t)count, table, table_bytes),
                MCU_ERR_INVALID_ARG);
    /* Channel o's row holds its kh * kw taps; tap t lands at [t][o] of the int8 kernel's order. The int8
     * kernel checks everything else (and keeps the window contract). */
    for (int32_t o = 0; o < channels; ++o) {
        mcu_lut_decode(indices + (size_t)o * (size_t)row_bytes, mcu_lut_table_of(table, word, o), bits, taps, wide + o,
                       channels);
    }
    return mcu_depthwise_conv2d_s8(NULL, p, q, input, wide, bias, output);
}
