/* Grouped transposed 2-D convolution, 16x8 (ours: CMSIS-NN has no 16x8 transposed convolution, and its int8 one
 * takes one group): TFLite's TRANSPOSE_CONV on int16 codes of zero point 0, output channel oc of group g gathering
 * the taps that reach its output pixel from input channels [g * icg, (g + 1) * icg), the exact 64-bit sum plus the
 * int64 bias, requantized as arm_convolve_s16 (mcu_conv_transpose2d_s16's arithmetic group by group). Gathered per
 * output pixel (convolution/window_transposed.h), four channels of a group against each tap's input at once. */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/check_s16.h"
#include "grouped_s16.h"
#include "window_transposed.h"

int32_t mcu_conv_transpose2d_grouped_s16_get_buffer_size(const mcu_conv2d_grouped_s16_params *p)
{
    (void)p;
    return 0;
}

/* Output pixel (oh, ow)'s channels [o, o + k) of one group (inputs x_g) from the taps that reach it, on acc. */
static void convt_grouped_pixel(const mcu_conv2d_s16_params *c, int32_t icg, const int16_t *x_g, const int8_t *w,
                                int32_t oh, int32_t ow, int32_t k, int64_t *acc)
{
    const mcu_shape4 in = c->input;
    const int32_t filter = c->kernel_h * c->kernel_w * icg;
    const int32_t kh_step = mcu_transposed_tap_step(c->stride_h, c->dilation_h);
    const int32_t kw_step = mcu_transposed_tap_step(c->stride_w, c->dilation_w);
    for (int32_t kh = mcu_transposed_first_tap(oh, c->stride_h, c->pad_top, c->dilation_h); kh < c->kernel_h;
         kh = c->kernel_h - kh > kh_step ? kh + kh_step : c->kernel_h) {
        const int32_t ih = mcu_transposed_source(oh, kh, c->stride_h, c->pad_top, c->dilation_h, in.h);
        if (ih < 0) {
            continue;
        }
        for (int32_t kw = mcu_transposed_first_tap(ow, c->stride_w, c->pad_left, c->dilation_w); kw < c->kernel_w;
             kw = c->kernel_w - kw > kw_step ? kw + kw_step : c->kernel_w) {
            const int32_t iw = mcu_transposed_source(ow, kw, c->stride_w, c->pad_left, c->dilation_w, in.w);
            if (iw < 0) {
                continue;
            }
            mcu_grouped_s16_tap(x_g + ((size_t)ih * (size_t)in.w + (size_t)iw) * (size_t)in.c,
                                w + (size_t)(kh * c->kernel_w + kw) * (size_t)icg, filter, icg, k, acc);
        }
    }
}

mcu_status mcu_conv_transpose2d_grouped_s16(const mcu_context *ctx, const mcu_conv2d_grouped_s16_params *p,
                                            const mcu_per_channel_quant *q, const int16_t *input,
                                            const int8_t *weight, const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch */
    const mcu_status bad = mcu_conv2d_grouped_s16_check(p, q, input, weight, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }
    const mcu_conv2d_s16_params *c = &p->conv;
    const mcu_shape4 in = c->input, out = c->output;
    MCU_REQUIRE(mcu_transposed_fits(out.h, c->kernel_h, c->dilation_h, c->pad_top) &&
                    mcu_transposed_fits(out.w, c->kernel_w, c->dilation_w, c->pad_left),
                MCU_ERR_SHAPE);
    const int32_t icg = in.c / p->groups, ocg = out.c / p->groups;
    const int32_t filter = c->kernel_h * c->kernel_w * icg;
    int16_t *y = output;
    for (int32_t n = 0; n < in.n; ++n) {
        const int16_t *x_n = input + (size_t)n * (size_t)in.h * (size_t)in.w * (size_t)in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            for (int32_t ow = 0; ow < out.w; ++ow, y += out.c) {
                for (int32_t o = 0; o < out.c;) {
                    int64_t acc[4];
                    const int32_t k = mcu_grouped_s16_block(o, ocg, bias, acc);
                    convt_grouped_pixel(c, icg, x_n + (size_t)(o / ocg) * (size_t)icg,
                                        weight + (size_t)o * (size_t)filter, oh, ow, k, acc);
                    mcu_grouped_s16_store(acc, o, k, q, c->act_min, c->act_max, y);
                    o += k;
                }
            }
        }
    }
    return MCU_OK;
}
