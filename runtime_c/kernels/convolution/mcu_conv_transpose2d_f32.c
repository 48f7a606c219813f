/* Transposed 2-D convolution (ConvTranspose1d/2d), float32, gathered per output pixel
 * (convolution/window_transposed.h). Taps are summed in kernel order on top of the bias. */
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/act_f32.h"
#include "../common/check.h"
#include "window_transposed.h"

mcu_status mcu_conv_transpose2d_f32(const mcu_conv2d_f32_params *p, const float *input, const float *weight,
                                    const float *bias, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && weight != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
                    p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->groups > 0,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_act_bounds_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t in_count = mcu_shape4_count(&in, (int32_t)sizeof(float));
    const int32_t out_count = mcu_shape4_count(&out, (int32_t)sizeof(float));
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(out.n == in.n && in.c % p->groups == 0 && out.c % p->groups == 0, MCU_ERR_SHAPE);
    const int32_t icg = in.c / p->groups;
    const int32_t ocg = out.c / p->groups;
    const int32_t w_dims[4] = {out.c, p->kernel_h, p->kernel_w, icg};
    const int32_t w_count = mcu_checked_count(w_dims, 4, (int32_t)sizeof(float));
    MCU_REQUIRE(w_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_transposed_fits(out.h, p->kernel_h, p->dilation_h, p->pad_top) &&
                    mcu_transposed_fits(out.w, p->kernel_w, p->dilation_w, p->pad_left),
                MCU_ERR_SHAPE);
    /* An output pixel reads input pixels on both sides of its own position: no overlap at all. */
    const size_t out_bytes = (size_t)out_count * sizeof(float);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(float), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count * sizeof(float), output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out.c * sizeof(float), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t w_per_oc = p->kernel_h * p->kernel_w * icg;
    const int32_t kh_step = mcu_transposed_tap_step(p->stride_h, p->dilation_h);
    const int32_t kw_step = mcu_transposed_tap_step(p->stride_w, p->dilation_w);
    for (int32_t n = 0; n < in.n; ++n) {
        const float *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            for (int32_t ow = 0; ow < out.w; ++ow) {
                float *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    y[oc] = bias != NULL ? bias[oc] : 0.0f;
                }
                const int32_t kh0 = mcu_transposed_first_tap(oh, p->stride_h, p->pad_top, p->dilation_h);
                const int32_t kw0 = mcu_transposed_first_tap(ow, p->stride_w, p->pad_left, p->dilation_w);
                for (int32_t kh = kh0; kh < p->kernel_h; kh += kh_step) {
                    const int32_t ih = mcu_transposed_source(oh, kh, p->stride_h, p->pad_top, p->dilation_h, in.h);
                    if (ih < 0) {
                        continue;
                    }
                    for (int32_t kw = kw0; kw < p->kernel_w; kw += kw_step) {
                        const int32_t iw =
                            mcu_transposed_source(ow, kw, p->stride_w, p->pad_left, p->dilation_w, in.w);
                        if (iw < 0) {
                            continue;
                        }
                        const float *xv = x_n + (ih * in.w + iw) * in.c;
                        const int32_t tap = (kh * p->kernel_w + kw) * icg;
                        for (int32_t oc = 0; oc < out.c; ++oc) {
                            const float *xg = xv + (oc / ocg) * icg;
                            const float *wv = weight + oc * w_per_oc + tap;
                            float acc = y[oc];
                            for (int32_t ic = 0; ic < icg; ++ic) {
                                acc += xg[ic] * wv[ic];
                            }
                            y[oc] = acc;
                        }
                    }
                }
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    y[oc] = mcu_act_f32(y[oc], p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
