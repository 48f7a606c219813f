#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/act_f32.h"
#include "pool_f32.h"
#include "../common/window.h"

mcu_status mcu_max_pool2d_f32(const mcu_pool2d_f32_params *p, const float *input, float *output)
{
    MCU_CHECK(mcu_pool2d_check_f32(p, input, output));
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t c = in.c;
    for (int32_t n = 0; n < in.n; ++n) {
        const float *x_n = input + n * in.h * in.w * c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, p->dilation_h, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, p->dilation_w, in.w, &kw_lo, &kw_hi);
                float *y = output + ((n * out.h + oh) * out.w + ow) * c;
                /* Only real input positions take part, so padding never
                 * wins; a window with no real tap (possible with dilation)
                 * yields -inf, as PyTorch's does. */
                for (int32_t ch = 0; ch < c; ++ch) {
                    y[ch] = -INFINITY;
                }
                for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                    const float *x_row = x_n + (ih0 + kh * p->dilation_h) * in.w * c;
                    for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                        const float *xv = x_row + (iw0 + kw * p->dilation_w) * c;
                        for (int32_t ch = 0; ch < c; ++ch) {
                            const float v = xv[ch];
                            /* NaN propagates like PyTorch's max pooling. */
                            if (v > y[ch] || isnan(v)) {
                                y[ch] = v;
                            }
                        }
                    }
                }
                for (int32_t ch = 0; ch < c; ++ch) {
                    y[ch] = mcu_act_f32(y[ch], p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
