/* Grouped convolution (groups > 1, not depthwise: ResNeXt/RegNet blocks, grouped Conv1d), int8,
 * the arithmetic of mcu_conv2d_s8 bit for bit. With the DSP extension two output pixels (in memory
 * order) are gathered first, every group's window widened to (x + input_offset) int16 lanes, then
 * each group's output channels run the convolution's dual-MAC matrix loop (common/conv_s8_dsp.h)
 * on that group's lanes; both pixels' reads finish before either is written, which keeps the
 * window overlap contract (mcu/contracts.py). Elsewhere, and for windows over MCU_S8_COL_MAX
 * values, the plain loops of the general kernel. */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "conv_check_s8.h"
#include "../common/conv_s8_dsp.h"
#include "../common/requant.h"
#include "../common/window.h"

int32_t mcu_conv2d_grouped_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_DSP
/* Pixel (oh, ow)'s window, group by group ([g][kh][kw][ic of g]), as widened lanes; taps in the
 * padding are 0. */
static void grouped_column(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow, int8_t *raw,
                           int16_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t icg = in.c / p->groups;
    const int32_t n = p->kernel_h * p->kernel_w * icg;
    const int8_t zero = (int8_t)(-p->input_offset);
    for (int32_t g = 0; g < p->groups; ++g) {
        int8_t *r = raw;
        for (int32_t kh = 0; kh < p->kernel_h; ++kh) {
            const int32_t ih = oh * p->stride_h - p->pad_top + kh * p->dilation_h;
            for (int32_t kw = 0; kw < p->kernel_w; ++kw, r += icg) {
                const int32_t iw = ow * p->stride_w - p->pad_left + kw * p->dilation_w;
                if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                    mcu_fill_s8(r, zero, icg);
                } else {
                    mcu_copy_s8(r, x_n + (ih * in.w + iw) * in.c + g * icg, icg);
                }
            }
        }
        mcu_expand_s8(raw, n, p->input_offset, col + g * n);
    }
}
#endif

mcu_status mcu_conv2d_grouped_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                 const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                 const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_CHECK(mcu_conv2d_s8_check(MCU_CONV_S8_FORWARD, p, q, input, weight, bias, output));
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t icg = in.c / p->groups;
    const int32_t ocg = out.c / p->groups;
    const int32_t n = p->kernel_h * p->kernel_w * icg; /* one group's window */

#if MCU_S8_DSP
    if ((int64_t)n * p->groups <= MCU_S8_COL_MAX) {
        _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
        int8_t raw[MCU_S8_COL_MAX];
        const int32_t hw = out.h * out.w;
        const int32_t total = n * p->groups;
        for (int32_t b = 0; b < in.n; ++b) {
            const int8_t *x_n = input + b * in.h * in.w * in.c;
            int8_t *y_n = output + b * hw * out.c;
            for (int32_t i = 0; i < hw; i += 2) {
                grouped_column(p, x_n, i / out.w, i % out.w, raw, col);
                int8_t *yb = NULL;
                if (i + 1 < hw) {
                    grouped_column(p, x_n, (i + 1) / out.w, (i + 1) % out.w, raw, col + total);
                    yb = y_n + (i + 1) * out.c;
                }
                for (int32_t g = 0; g < p->groups; ++g) {
                    const mcu_per_channel_quant qg = {q->multiplier + g * ocg, q->shift + g * ocg};
                    mcu_matrix_pixels_s8(col + g * n, col + total + g * n, n, ocg, weight + g * ocg * n,
                                         bias != NULL ? bias + g * ocg : NULL, &qg, p->output_offset, p->act_min,
                                         p->act_max, y_n + i * out.c + g * ocg, yb != NULL ? yb + g * ocg : NULL);
                }
            }
        }
        return MCU_OK;
    }
#endif
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + b * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, p->dilation_h, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, p->dilation_w, in.w, &kw_lo, &kw_hi);
                int8_t *y = output + ((b * out.h + oh) * out.w + ow) * out.c;
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const int8_t *x_g = x_n + (oc / ocg) * icg;
                    const int8_t *w_oc = weight + oc * n;
                    uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u; /* modulo 2^32, as on the device */
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                        const int8_t *x_row = x_g + (ih0 + kh * p->dilation_h) * in.w * in.c;
                        for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                            const int8_t *xv = x_row + (iw0 + kw * p->dilation_w) * in.c;
                            const int8_t *wv = w_oc + (kh * p->kernel_w + kw) * icg;
                            for (int32_t ic = 0; ic < icg; ++ic) {
                                acc += (uint32_t)((xv[ic] + p->input_offset) * wv[ic]);
                            }
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
