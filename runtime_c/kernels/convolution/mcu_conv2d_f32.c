#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/act_f32.h"
#include "../common/check.h"
#include "../common/window.h"

mcu_status mcu_conv2d_f32(const mcu_conv2d_f32_params *p, const float *input,
                          const float *weight, const float *bias, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 &&
                    p->dilation_h > 0 && p->dilation_w > 0 && p->pad_top >= 0 &&
                    p->pad_left >= 0 && p->groups > 0,
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
    /* The output size implies the bottom/right padding, so any output size
     * is well defined (windows past the input read zeros); it only has to
     * keep the coordinates in range. */
    MCU_REQUIRE(mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                    mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0),
                MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_count * sizeof(float);
    MCU_REQUIRE(!mcu_bad_window_overlap(input, (size_t)in_count * sizeof(float), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count * sizeof(float), output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)out.c * sizeof(float), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t w_per_oc = p->kernel_h * p->kernel_w * icg;
    for (int32_t n = 0; n < in.n; ++n) {
        const float *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, p->dilation_h, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, p->dilation_w, in.w, &kw_lo, &kw_hi);
                float *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t g = 0; g < p->groups; ++g) {
                    const float *x_g = x_n + g * icg;
                    for (int32_t m = 0; m < ocg; ++m) {
                        const int32_t oc = g * ocg + m;
                        const float *w_oc = weight + oc * w_per_oc;
                        /* Padded taps contribute exact zeros, so skipping
                         * them leaves the PyTorch result unchanged. */
                        float acc = bias != NULL ? bias[oc] : 0.0f;
                        for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                            const int32_t ih = ih0 + kh * p->dilation_h;
                            const float *x_row = x_g + ih * in.w * in.c;
                            const float *w_row = w_oc + kh * p->kernel_w * icg;
                            for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                                const int32_t iw = iw0 + kw * p->dilation_w;
                                const float *xv = x_row + iw * in.c;
                                const float *wv = w_row + kw * icg;
                                for (int32_t ic = 0; ic < icg; ++ic) {
                                    acc += xv[ic] * wv[ic];
                                }
                            }
                        }
                        y[oc] = mcu_act_f32(acc, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
