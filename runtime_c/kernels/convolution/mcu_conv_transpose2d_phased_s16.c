/* Transposed convolution, 16x8, dilation 1, by output phase (ours, as mcu_conv_transpose2d_s16; the form of
 * mcu_conv_transpose2d_phased_s8): output pixels with the same (oh + pad_top) % stride_h and
 * (ow + pad_left) % stride_w receive the same taps, every stride-th one, so each phase is an ordinary
 * convolution whose window walks the input backwards. The weights come packed by phase
 * (mcu/reference/conv.py, phase_pack): phase (a, b) holds, per output channel, its taps kh = a, a + s_h, ...;
 * kw = b, b + s_w, ... with in_c values each. A window of up to MCU_CONVT_S16_COL values is gathered into one
 * int16 column (zeros off the input: zero point 0), so each output channel is one contiguous dot product, four
 * channels a step (common/dot_s16.h); a larger one is summed tap by tap from the input. Exact sums, so the result
 * equals mcu_conv_transpose2d_s16's bit for bit. */
#include <stddef.h>
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/check_s16.h"
#include "../common/dot_s16.h"
#include "../common/requant_s16.h"
#include "window_transposed.h"

#define MCU_CONVT_S16_COL 512

int32_t mcu_conv_transpose2d_phased_s16_get_buffer_size(const mcu_conv2d_s16_params *p)
{
    (void)p;
    return 0;
}

/* The phase's window of the pixel whose first tap reads input (ih0, iw0), in weight order, into col. */
static void gather_s16(const mcu_conv2d_s16_params *p, const int16_t *x_n, int32_t ih0, int32_t iw0, int32_t nh,
                       int32_t nw, int16_t *col)
{
    const mcu_shape4 in = p->input;
    for (int32_t j = 0; j < nh; ++j) {
        const int32_t ih = ih0 - j;
        for (int32_t t = 0; t < nw; ++t, col += in.c) {
            const int32_t iw = iw0 - t;
            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                memset(col, 0, (size_t)in.c * sizeof(int16_t));
            } else {
                memcpy(col, x_n + ((size_t)ih * (size_t)in.w + (size_t)iw) * (size_t)in.c,
                       (size_t)in.c * sizeof(int16_t));
            }
        }
    }
}

/* acc[k] += the window . output channel k's phase weights (w, `taps` apart), k < count <= 4, tap by tap from the
 * input: windows too large for the column. */
static void taps_s16(const mcu_conv2d_s16_params *p, const int16_t *x_n, int32_t ih0, int32_t iw0, int32_t nh,
                     int32_t nw, const int8_t *w, int32_t taps, int32_t count, int64_t *acc)
{
    const mcu_shape4 in = p->input;
    for (int32_t j = 0; j < nh; ++j) {
        const int32_t ih = ih0 - j;
        for (int32_t t = 0; t < nw; ++t) {
            const int32_t iw = iw0 - t;
            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                continue;
            }
            const int16_t *xv = x_n + ((size_t)ih * (size_t)in.w + (size_t)iw) * (size_t)in.c;
            const int8_t *wv = w + (size_t)(j * nw + t) * (size_t)in.c;
            for (int32_t k = 0; k < count; ++k) {
                mcu_s16_dot1(xv, wv + (size_t)k * (size_t)taps, in.c, &acc[k]);
            }
        }
    }
}

mcu_status mcu_conv_transpose2d_phased_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
                                           const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                           const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch: the column is on the stack */
    const mcu_status bad = mcu_conv2d_s16_check(p, q, input, weight, 1, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }
    MCU_REQUIRE(p->dilation_h == 1 && p->dilation_w == 1, MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input, out = p->output;
    MCU_REQUIRE(mcu_transposed_fits(out.h, p->kernel_h, 1, p->pad_top) &&
                    mcu_transposed_fits(out.w, p->kernel_w, 1, p->pad_left),
                MCU_ERR_SHAPE);
    _Alignas(4) int16_t col[MCU_CONVT_S16_COL];
    const int small = mcu_s16_small_layer(bias, q->shift, out.c);
    for (int32_t n = 0; n < in.n; ++n) {
        const int16_t *x_n = input + (size_t)n * (size_t)in.h * (size_t)in.w * (size_t)in.c;
        int16_t *y_n = output + (size_t)n * (size_t)out.h * (size_t)out.w * (size_t)out.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t a = (oh + p->pad_top) % p->stride_h;
            const int32_t nh = mcu_phase_taps(a, p->kernel_h, p->stride_h);
            const int32_t ih0 = (oh + p->pad_top - a) / p->stride_h; /* the input row of tap a */
            /* Each phase once: the first stride_w output columns (fewer on a narrower output) start one each, so
             * a huge stride costs no loop over phases no column has. */
            for (int32_t ow0 = 0; ow0 < out.w && ow0 < p->stride_w; ++ow0) {
                const int32_t b = (ow0 + p->pad_left) % p->stride_w;
                const int32_t nw = mcu_phase_taps(b, p->kernel_w, p->stride_w);
                const int64_t window = (int64_t)nh * nw * in.c;
                const int32_t taps = (int32_t)window; /* (at most the weights' count: checked) */
                const int8_t *wp = weight + mcu_phase_offset(a, b, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w,
                                                             out.c * in.c);
                const int column = window <= MCU_CONVT_S16_COL;
                const int short_sums = column && small && window <= MCU_S16_PART;
                /* (the next column of the phase without passing INT32_MAX) */
                for (int32_t ow = ow0; ow < out.w; ow = out.w - ow > p->stride_w ? ow + p->stride_w : out.w) {
                    const int32_t iw0 = (ow + p->pad_left - b) / p->stride_w;
                    int16_t *y = y_n + ((size_t)oh * (size_t)out.w + (size_t)ow) * (size_t)out.c;
                    if (column) {
                        gather_s16(p, x_n, ih0, iw0, nh, nw, col);
                    }
                    int32_t o = 0;
                    if (short_sums) { /* int32 sums and the short requantization (kernels_s16.h) */
                        for (; o + 4 <= out.c; o += 4) {
                            int32_t part[4];
                            mcu_s16_dot4_part(col, wp + (size_t)o * (size_t)taps, taps, taps, part);
                            for (int32_t j = 0; j < 4; ++j) {
                                const int32_t acc = part[j] + (bias != NULL ? (int32_t)bias[o + j] : 0);
                                y[o + j] = mcu_clamp_to_s16(
                                    mcu_requantize_s16_small(acc, q->multiplier[o + j], q->shift[o + j]), p->act_min,
                                    p->act_max);
                            }
                        }
                    }
                    while (o < out.c) {
                        const int32_t k = out.c - o >= 4 ? 4 : (out.c - o >= 2 ? 2 : 1);
                        const int8_t *w = wp + (size_t)o * (size_t)taps;
                        int64_t acc[4] = {0, 0, 0, 0};
                        for (int32_t j = 0; j < k; ++j) {
                            acc[j] = bias != NULL ? bias[o + j] : 0;
                        }
                        if (!column) {
                            taps_s16(p, x_n, ih0, iw0, nh, nw, w, taps, k, acc);
                        } else if (k == 4) {
                            mcu_s16_dot4(col, w, taps, taps, acc);
                        } else if (k == 2) {
                            mcu_s16_dot2(col, w, w + taps, taps, &acc[0], &acc[1]);
                        } else {
                            mcu_s16_dot1(col, w, taps, &acc[0]);
                        }
                        for (int32_t j = 0; j < k; ++j, ++o) {
                            y[o] = mcu_clamp_to_s16(mcu_requantize_s16_acc(acc[j], q->multiplier[o], q->shift[o]),
                                                    p->act_min, p->act_max);
                        }
                    }
                }
            }
        }
    }
    return MCU_OK;
}
