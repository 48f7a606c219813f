#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/lut.h"

/* The weights decoded to int8 (OHWI): the least scratch the kernel runs with. */
static int32_t mcu_conv2d_lut_s16_weights(const mcu_conv2d_s16_params *p)
{
    const int32_t dims[4] = {p->output.c, p->kernel_h, p->kernel_w, p->input.c};
    const int32_t count = mcu_checked_count(dims, 4, 1);
    return count > 0 ? count : 0;
}

/* The decoded weights, word aligned, then mcu_conv2d_s16's window column (a kernel larger than 1x1), which it
 * gathers each window into when the scratch holds both. */
int32_t mcu_conv2d_lut_s16_get_buffer_size(const mcu_conv2d_s16_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t weights = mcu_conv2d_lut_s16_weights(p);
    const int32_t column = mcu_conv2d_s16_get_buffer_size(p);
    const int64_t total = column > 0 ? (((int64_t)weights + 3) & ~(int64_t)3) + column : weights;
    return weights > 0 && total <= INT32_MAX ? (int32_t)total : 0;
}

mcu_status mcu_conv2d_lut_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
    const mcu_per_channel_quant *q, int32_t word, const int16_t *input, const uint8_t *indices, const int8_t *table,
    const int64_t *bias, int16_t *output)
{
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && p != NULL && input != NULL && indices != NULL && table != NULL &&
                    output != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t in_bytes = mcu_shape4_count(&p->input, 2), out_bytes = mcu_shape4_count(&p->output, 2);
    const int32_t count = mcu_conv2d_lut_s16_weights(p);
    const mcu_status status = mcu_lut_decode_s16(ctx, word, p->output.c, count, indices, table, 0, input,
                                                 in_bytes, output, out_bytes);
    if (status != MCU_OK) {
        return status;
    }
    int8_t *w = (int8_t *)ctx->buf;
    /* the 16x8 kernel checks the rest, the column's overlaps too */
    const int64_t at = ((int64_t)count + 3) & ~(int64_t)3;
    const int with_column = mcu_conv2d_s16_get_buffer_size(p) > 0 && ctx->size > at &&
                            ctx->size >= mcu_conv2d_lut_s16_get_buffer_size(p);
    const mcu_context column = {w + (with_column ? at : 0), with_column ? (int32_t)(ctx->size - at) : 0};
    return mcu_conv2d_s16(with_column ? &column : NULL, p, q, input, w, bias, output);
}
