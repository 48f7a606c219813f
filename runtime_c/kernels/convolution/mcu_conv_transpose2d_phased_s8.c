/* Transposed convolution, int8, dilation 1 and one group, by output phase: output pixels with the
 * same (oh + pad_top) % stride_h and (ow + pad_left) % stride_w receive the same taps, every
 * stride-th one, so each phase is an ordinary convolution whose window walks the input backwards.
 * The weights come packed by phase (mcu/quant/reference_conv.py, phase_pack): phase (a, b) holds,
 * per output channel, its taps kh = a, a + s_h, ...; kw = b, b + s_w, ... with in_c values each, so
 * one output pixel is one contiguous dot product per channel. With the DSP extension two pixels of
 * a phase go through the convolution's dual-MAC matrix loop (common/conv_s8_dsp.h); integer sums
 * are order-free, so the result equals mcu_conv_transpose2d_s8's (and TFLite's) bit for bit. */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "conv_check_s8.h"
#include "../common/conv_s8_dsp.h"
#include "../common/requant.h"
#include "window_transposed.h"

int32_t mcu_conv_transpose2d_phased_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_DSP
/* The phase's window of output pixel (oh, ow) as bytes in weight order, taps off the input as the
 * zero-point (so that x + input_offset is 0 there). */
static void gather(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t ih0, int32_t iw0, int32_t nh,
                   int32_t nw, int8_t *raw)
{
    const mcu_shape4 in = p->input;
    const int8_t zero = (int8_t)(-p->input_offset);
    for (int32_t j = 0; j < nh; ++j) {
        const int32_t ih = ih0 - j;
        for (int32_t t = 0; t < nw; ++t, raw += in.c) {
            const int32_t iw = iw0 - t;
            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                mcu_fill_s8(raw, zero, in.c);
            } else {
                mcu_copy_s8(raw, x_n + (ih * in.w + iw) * in.c, in.c);
            }
        }
    }
}
#endif

mcu_status mcu_conv_transpose2d_phased_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                          const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                          const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_CHECK(mcu_conv2d_s8_check(MCU_CONV_S8_PHASED, p, q, input, weight, bias, output));
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;

#if MCU_S8_DSP
    _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
    int8_t raw[MCU_S8_COL_MAX];
#endif
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        int8_t *y_n = output + n * out.h * out.w * out.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t a = (oh + p->pad_top) % p->stride_h;
            const int32_t nh = mcu_phase_taps(a, p->kernel_h, p->stride_h);
            const int32_t ih0 = (oh + p->pad_top - a) / p->stride_h; /* the input row of tap a */
            for (int32_t b = 0; b < p->stride_w; ++b) {
                const int32_t nw = mcu_phase_taps(b, p->kernel_w, p->stride_w);
                const int32_t taps = nh * nw * in.c;
                const int8_t *wp = weight + mcu_phase_offset(a, b, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w,
                                                             p->output.c * p->input.c);
                /* the first ow of this phase: (ow + pad_left) % stride_w == b */
                const int32_t ow0 = ((b - p->pad_left) % p->stride_w + p->stride_w) % p->stride_w;
                for (int32_t ow = ow0; ow < out.w; ow += p->stride_w) {
                    const int32_t iw0 = (ow + p->pad_left - b) / p->stride_w;
                    int8_t *y = y_n + (oh * out.w + ow) * out.c;
#if MCU_S8_DSP
                    if (taps > 0 && taps <= MCU_S8_COL_MAX) {
                        const int32_t ow1 = ow + p->stride_w; /* the next pixel of the phase, if any */
                        gather(p, x_n, ih0, iw0, nh, nw, raw);
                        mcu_expand_s8(raw, taps, p->input_offset, col);
                        int8_t *y1 = NULL;
                        if (ow1 < out.w) {
                            gather(p, x_n, ih0, iw0 + 1, nh, nw, raw);
                            mcu_expand_s8(raw, taps, p->input_offset, col + MCU_S8_COL_MAX);
                            y1 = y + p->stride_w * out.c;
                            ow = ow1;
                        }
                        mcu_matrix_pixels_s8(col, col + MCU_S8_COL_MAX, taps, out.c, wp, bias, q, p->output_offset,
                                             p->act_min, p->act_max, y, y1);
                        continue;
                    }
#endif
                    for (int32_t oc = 0; oc < out.c; ++oc) {
                        const int8_t *w_oc = wp + oc * taps;
                        uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
                        for (int32_t j = 0; j < nh; ++j) {
                            const int32_t ih = ih0 - j;
                            if (ih < 0 || ih >= in.h) {
                                continue;
                            }
                            for (int32_t t = 0; t < nw; ++t) {
                                const int32_t iw = iw0 - t;
                                if (iw < 0 || iw >= in.w) {
                                    continue;
                                }
                                const int8_t *xv = x_n + (ih * in.w + iw) * in.c;
                                const int8_t *wv = w_oc + (j * nw + t) * in.c;
                                for (int32_t ic = 0; ic < in.c; ++ic) {
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
    }
    return MCU_OK;
}
