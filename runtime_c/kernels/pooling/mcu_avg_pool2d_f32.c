#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/act_f32.h"
#include "pool_f32.h"

mcu_status mcu_avg_pool2d_f32(const mcu_pool2d_f32_params *p, const float *input, float *output)
{
    MCU_CHECK(mcu_pool2d_check_f32(p, input, output));
    MCU_REQUIRE(p->dilation_h == 1 && p->dilation_w == 1 && p->divisor_override >= 0,
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t c = in.c;
    for (int32_t n = 0; n < in.n; ++n) {
        const float *x_n = input + n * in.h * in.w * c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            /* PyTorch's window arithmetic: the count_include_pad divisor
             * covers the window clipped to the padded input (a ceil_mode
             * window may run past the bottom padding and that overhang is
             * not counted); the sum and the other divisor cover only the
             * real input. */
            const int32_t h_start = oh * p->stride_h - p->pad_top;
            const int32_t h_end_raw = h_start + p->kernel_h;
            const int32_t h_end_pad = h_end_raw < in.h + p->pad_bottom ? h_end_raw : in.h + p->pad_bottom;
            const int32_t h0 = h_start > 0 ? h_start : 0;
            const int32_t h1 = h_end_raw < in.h ? h_end_raw : in.h;
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t w_start = ow * p->stride_w - p->pad_left;
                const int32_t w_end_raw = w_start + p->kernel_w;
                const int32_t w_end_pad = w_end_raw < in.w + p->pad_right ? w_end_raw : in.w + p->pad_right;
                const int32_t w0 = w_start > 0 ? w_start : 0;
                const int32_t w1 = w_end_raw < in.w ? w_end_raw : in.w;

                int32_t divisor;
                if (p->divisor_override != 0) {
                    divisor = p->divisor_override;
                } else if (p->count_include_pad) {
                    divisor = (h_end_pad - h_start) * (w_end_pad - w_start);
                } else {
                    divisor = (h1 - h0) * (w1 - w0);
                }
                const float div = (float)divisor;

                float *y = output + ((n * out.h + oh) * out.w + ow) * c;
                for (int32_t ch = 0; ch < c; ++ch) {
                    y[ch] = 0.0f;
                }
                for (int32_t ih = h0; ih < h1; ++ih) {
                    const float *x_row = x_n + ih * in.w * c;
                    for (int32_t iw = w0; iw < w1; ++iw) {
                        const float *xv = x_row + iw * c;
                        for (int32_t ch = 0; ch < c; ++ch) {
                            y[ch] += xv[ch];
                        }
                    }
                }
                for (int32_t ch = 0; ch < c; ++ch) {
                    y[ch] = mcu_act_f32(y[ch] / div, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
