#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/s4.h"
#include "../common/mve_s4.h"

/* The weights widened to int8 ([kh][kw][out_c]), for mcu_depthwise_conv2d_s8 and its core's paths. Without
 * this much scratch the kernel runs its own plain loop (the same bits, slower). */
int32_t mcu_depthwise_conv2d_s4_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t dims[3] = {p->kernel_h, p->kernel_w, p->output.c};
    const int32_t count = mcu_checked_count(dims, 3, 1);
    return count > 0 ? count : 0;
}

mcu_status mcu_depthwise_conv2d_s4(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                   const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                   const int32_t *bias, int8_t *output)
{
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 &&
                    p->dilation_h > 0 && p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 &&
                    p->ch_mult > 0,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t in_count = mcu_shape4_count(&in, 1);
    const int32_t out_count = mcu_shape4_count(&out, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(out.n == in.n && (int64_t)in.c * p->ch_mult == out.c, MCU_ERR_SHAPE);
    const int32_t w_dims[3] = {p->kernel_h, p->kernel_w, out.c};
    const int32_t w_count = mcu_checked_count(w_dims, 3, 1);
    MCU_REQUIRE(w_count > 0 && out.c <= INT32_MAX / 4, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                    mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0),
                MCU_ERR_SHAPE);
    for (int32_t oc = 0; oc < out.c; ++oc) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[oc], q->shift[oc]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count;
    /* Both paths (the int8 kernel on widened weights, the plain loop) keep the window contract. */
    MCU_REQUIRE(!mcu_bad_window_overlap(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(weight, mcu_s4_bytes(w_count), output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out.c * sizeof(int32_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    if (ctx != NULL && ctx->buf != NULL && ctx->size >= w_count &&
        !mcu_overlaps(ctx->buf, (size_t)w_count, input, (size_t)in_count) &&
        !mcu_overlaps(ctx->buf, (size_t)w_count, output, out_bytes) &&
        !mcu_overlaps(ctx->buf, (size_t)w_count, weight, mcu_s4_bytes(w_count))) {
        int8_t *wide = (int8_t *)ctx->buf;
#if MCU_S8_MVE
        mcu_mve_s4_widen(weight, w_count, wide); /* common/mve_s4.h */
#else
        for (int32_t k = 0; k < w_count; ++k) {
            wide[k] = (int8_t)mcu_s4_at(weight, k);
        }
#endif
        return mcu_depthwise_conv2d_s8(NULL, p, q, input, wide, bias, output);
    }
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int8_t *y = output + (((int64_t)b * out.h + oh) * out.w + ow) * out.c;
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const int32_t ic = oc / p->ch_mult;
                    uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
                    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t ih = ih0 + ky * p->dilation_h;
                        if (ih < 0 || ih >= in.h) {
                            continue;
                        }
                        for (int32_t kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t iw = iw0 + kx * p->dilation_w;
                            if (iw < 0 || iw >= in.w) {
                                continue;
                            }
                            const int32_t xv = x_n[((int64_t)ih * in.w + iw) * in.c + ic] + p->input_offset;
                            acc += (uint32_t)(xv * mcu_s4_at(weight, (ky * p->kernel_w + kx) * out.c + oc));
                        }
                    }
                    y[oc] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[oc], q->shift[oc],
                                                 p->output_offset, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
