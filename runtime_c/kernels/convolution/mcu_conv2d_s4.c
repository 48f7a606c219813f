#include <stddef.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/s4.h"
#include "../common/s4_dsp.h"
#include "conv_check_s8.h"

int32_t mcu_conv2d_s4_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_DSP
/* The column of output pixel (oh, ow) of a groups == 1 convolution in the pair order of s4_dsp.h: taps
 * moved up by `lead` (0 or 1), over taps = n + (n odd) places, the place no tap takes 0. */
static void conv_s4_column(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow, int32_t n,
                           int32_t lead, int16_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const int32_t taps = n + (n & 1);
    const int groups8 = lead == 0 && in.c % 8 == 0; /* every tap's channels fill whole groups of 8 */
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    if (taps != n) {
        col[mcu_s4_col_index(lead != 0 ? 0 : n, taps)] = 0;
    }
    int32_t i = lead;
    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
        const int32_t ih = ih0 + ky * p->dilation_h;
        for (int32_t kx = 0; kx < p->kernel_w; ++kx, i += in.c) {
            const int32_t iw = iw0 + kx * p->dilation_w;
            const int inside = ih >= 0 && ih < in.h && iw >= 0 && iw < in.w;
            const int8_t *x = x_n + ((int64_t)ih * in.w + iw) * in.c;
            if (groups8) {
                for (int32_t c = 0; c < in.c; c += 8) {
                    if (inside) {
                        mcu_s4_expand8(x + c, off2, col + i + c);
                    } else {
                        memset(col + i + c, 0, 8 * sizeof(int16_t));
                    }
                }
                continue;
            }
            for (int32_t c = 0; c < in.c; ++c) {
                col[mcu_s4_col_index(i + c, taps)] = inside ? (int16_t)(x[c] + p->input_offset) : 0;
            }
        }
    }
}

/* groups == 1 with a window of at most MCU_S8_COL_MAX taps (MCU_S8_COL_MAX / 2 - 1 when odd): two output
 * pixels (in memory order) at a time through mcu_s4_matrix_pixels, with one column each (two when the
 * window is odd). */
static void conv_s4_dsp(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                        const int8_t *weight, const int32_t *bias, int8_t *output)
{
    _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int odd = n & 1;
    /* pixel b's columns MCU_S4_PIXEL_B values after pixel a's (half that for odd windows, two columns each) */
    int16_t *ca = col, *cb = col + (odd ? MCU_S4_PIXEL_B / 2 : MCU_S4_PIXEL_B);
    int16_t *ca2 = col + MCU_S4_PIXEL_B, *cb2 = ca2 + MCU_S4_PIXEL_B / 2;
    const int32_t hw = out.h * out.w;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        int8_t *y_n = output + (int64_t)b * hw * out.c;
        for (int32_t i = 0; i < hw; i += 2) {
            conv_s4_column(p, x_n, i / out.w, i % out.w, n, 0, ca);
            if (odd) {
                conv_s4_column(p, x_n, i / out.w, i % out.w, n, 1, ca2);
            }
            int8_t *yb = NULL;
            if (i + 1 < hw) {
                conv_s4_column(p, x_n, (i + 1) / out.w, (i + 1) % out.w, n, 0, cb);
                if (odd) {
                    conv_s4_column(p, x_n, (i + 1) / out.w, (i + 1) % out.w, n, 1, cb2);
                }
                yb = y_n + (i + 1) * out.c;
            }
            mcu_s4_matrix_pixels(ca, ca2, n, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max,
                                 y_n + i * out.c, yb);
        }
    }
}
#endif

mcu_status mcu_conv2d_s4(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    /* Output pixels are written in memory order after their windows are read (two at a time on the DSP
     * path), so the output may start before the input as far as the window contract allows. */
    const mcu_status status = mcu_conv2d_s8_check(MCU_CONV_S4_FORWARD, p, q, input, weight, bias, output);
    if (status != MCU_OK) {
        return status;
    }
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;

#if MCU_S8_DSP
    const int32_t window = p->kernel_h * p->kernel_w * (in.c / p->groups);
    if (p->groups == 1 && (window % 2 == 0 ? window <= MCU_S8_COL_MAX : window < MCU_S8_COL_MAX / 2)) {
        conv_s4_dsp(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
    const int32_t cg = in.c / p->groups;   /* input channels per group */
    const int32_t og = out.c / p->groups;  /* output channels per group */
    const int32_t taps = p->kernel_h * p->kernel_w * cg;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int8_t *y = output + (((int64_t)b * out.h + oh) * out.w + ow) * out.c;
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const int32_t c0 = (oc / og) * cg;
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
                            const int8_t *x = x_n + ((int64_t)ih * in.w + iw) * in.c + c0;
                            acc = mcu_s4_dot(acc, x, p->input_offset, weight,
                                             oc * taps + (ky * p->kernel_w + kx) * cg, cg);
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
