#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/lut.h"

/* The whole weight tensor decoded to int8 ([kh][kw][out_c]) for mcu_depthwise_conv2d_s16. */
int32_t mcu_depthwise_conv2d_lut_s16_get_buffer_size(const mcu_depthwise_conv2d_s16_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t dims[3] = {p->kernel_h, p->kernel_w, p->output.c};
    const int32_t count = mcu_checked_count(dims, 3, 1);
    return count > 0 ? count : 0;
}

mcu_status mcu_depthwise_conv2d_lut_s16(const mcu_context *ctx, const mcu_depthwise_conv2d_s16_params *p,
    const mcu_per_channel_quant *q, int32_t word, const int16_t *input, const uint8_t *indices, const int8_t *table,
    const int64_t *bias, int16_t *output)
{
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && p != NULL && input != NULL && indices != NULL && table != NULL &&
                    output != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t in_bytes = mcu_shape4_count(&p->input, 2), out_bytes = mcu_shape4_count(&p->output, 2);
    const int32_t count = mcu_depthwise_conv2d_lut_s16_get_buffer_size(p);
    const mcu_status status = mcu_lut_decode_s16(ctx, word, p->output.c, count, indices, table, 1, input,
                                                 in_bytes, output, out_bytes);
    if (status != MCU_OK) {
        return status;
    }
    int8_t *w = (int8_t *)ctx->buf;
    /* the 16x8 kernel checks the rest (given no scratch: the decoded weights hold it) */
    return mcu_depthwise_conv2d_s16(NULL, p, q, input, w, bias, output);
}
