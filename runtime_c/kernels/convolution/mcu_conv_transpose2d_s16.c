/* Transposed 2-D convolution, 16x8 (ours: CMSIS-NN has arm_transpose_conv_s8 but no int16 form): TFLite's
 * TRANSPOSE_CONV on int16 codes of zero point 0 with int8 weights, per output channel the exact sum of the
 * taps that reach the output pixel plus the int64 bias, requantized as arm_convolve_s16 (kernels_s16.h).
 * Gathered per output pixel as the int8 kernel (convolution/window_transposed.h), MCU_CONVT_S16_BLOCK output
 * channels at a time with their 64-bit accumulators on the stack; each tap's input pixel runs against four
 * channels' weights at once (common/dot_s16.h: int32 partial sums of at most MCU_S16_PART products). */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/check_s16.h"
#include "../common/dot_s16.h"
#include "../common/requant_s16.h"
#include "window_transposed.h"

#define MCU_CONVT_S16_BLOCK 32

int32_t mcu_conv_transpose2d_s16_get_buffer_size(const mcu_conv2d_s16_params *p)
{
    (void)p;
    return 0;
}

/* One output pixel's channels [oc0, oc0 + block) from the taps that reach it, on top of acc. */
static void convt_pixel_s16(const mcu_conv2d_s16_params *p, const int16_t *x_n, const int8_t *weight, int32_t oh,
                            int32_t ow, int32_t oc0, int32_t block, int64_t *acc)
{
    const mcu_shape4 in = p->input;
    const int32_t w_per_oc = p->kernel_h * p->kernel_w * in.c;
    const int32_t kh_step = mcu_transposed_tap_step(p->stride_h, p->dilation_h);
    const int32_t kw_step = mcu_transposed_tap_step(p->stride_w, p->dilation_w);
    /* (steps that stop at the kernel's end rather than pass INT32_MAX with a huge stride) */
    for (int32_t kh = mcu_transposed_first_tap(oh, p->stride_h, p->pad_top, p->dilation_h); kh < p->kernel_h;
         kh = p->kernel_h - kh > kh_step ? kh + kh_step : p->kernel_h) {
        const int32_t ih = mcu_transposed_source(oh, kh, p->stride_h, p->pad_top, p->dilation_h, in.h);
        if (ih < 0) {
            continue;
        }
        for (int32_t kw = mcu_transposed_first_tap(ow, p->stride_w, p->pad_left, p->dilation_w); kw < p->kernel_w;
             kw = p->kernel_w - kw > kw_step ? kw + kw_step : p->kernel_w) {
            const int32_t iw = mcu_transposed_source(ow, kw, p->stride_w, p->pad_left, p->dilation_w, in.w);
            if (iw < 0) {
                continue;
            }
            const int16_t *xv = x_n + ((size_t)ih * (size_t)in.w + (size_t)iw) * (size_t)in.c;
            const int8_t *w = weight + (size_t)oc0 * (size_t)w_per_oc + (size_t)(kh * p->kernel_w + kw) * (size_t)in.c;
            int32_t j = 0;
            for (; j + 4 <= block; j += 4) {
                mcu_s16_dot4(xv, w + (size_t)j * (size_t)w_per_oc, w_per_oc, in.c, &acc[j]);
            }
            for (; j < block; ++j) {
                mcu_s16_dot1(xv, w + (size_t)j * (size_t)w_per_oc, in.c, &acc[j]);
            }
        }
    }
}

mcu_status mcu_conv_transpose2d_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
                                    const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                    const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch */
    const mcu_status bad = mcu_conv2d_s16_check(p, q, input, weight, 1, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }
    const mcu_shape4 in = p->input, out = p->output;
    MCU_REQUIRE(mcu_transposed_fits(out.h, p->kernel_h, p->dilation_h, p->pad_top) &&
                    mcu_transposed_fits(out.w, p->kernel_w, p->dilation_w, p->pad_left),
                MCU_ERR_SHAPE);
    int64_t acc[MCU_CONVT_S16_BLOCK];
    int16_t *y = output;
    for (int32_t n = 0; n < in.n; ++n) {
        const int16_t *x_n = input + (size_t)n * (size_t)in.h * (size_t)in.w * (size_t)in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            for (int32_t ow = 0; ow < out.w; ++ow, y += out.c) {
                for (int32_t oc0 = 0; oc0 < out.c; oc0 += MCU_CONVT_S16_BLOCK) {
                    const int32_t block = out.c - oc0 < MCU_CONVT_S16_BLOCK ? out.c - oc0 : MCU_CONVT_S16_BLOCK;
                    for (int32_t j = 0; j < block; ++j) {
                        acc[j] = bias != NULL ? bias[oc0 + j] : 0;
                    }
                    convt_pixel_s16(p, x_n, weight, oh, ow, oc0, block, acc);
                    for (int32_t j = 0; j < block; ++j) {
                        const int32_t oc = oc0 + j;
                        y[oc] = mcu_clamp_to_s16(mcu_requantize_s16_acc(acc[j], q->multiplier[oc], q->shift[oc]),
                                                 p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
