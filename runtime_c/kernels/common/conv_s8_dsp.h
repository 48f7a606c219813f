/* SIMD (dual 16-bit MAC) paths shared by the int8 convolution, 1x1
 * convolution, depthwise and fully connected kernels. Internal: static inline
 * only; compiled when MCU_S8_DSP (see simd_s8.h).
 *
 * Matrix kernels work on "columns": the (x + input_offset) values one output
 * pixel reads, as 16-bit lanes in the reordered groups of mcu_expand_s8, with
 * padded taps as 0 (a padded tap contributes nothing, exactly as the plain
 * kernels skip it). Weights stay int8 in their stored layout and are widened
 * with SXTB16 in the loop. Two pixels times two output channels share every
 * load. */
#ifndef MCU_KERNELS_INTERNAL_CONV_S8_DSP_H
#define MCU_KERNELS_INTERNAL_CONV_S8_DSP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "dw_s8_dsp.h"
#include "simd_s8.h"

#if MCU_S8_DSP

/* acc[0..3] += (ca.wa, ca.wb, cb.wa, cb.wb) over n values. */
static inline void mcu_dot_2x2(const int16_t *ca, const int16_t *cb, const int8_t *wa, const int8_t *wb, int32_t n,
                               uint32_t acc[4])
{
    uint32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t va = mcu_load_u32(wa + i);
        const uint32_t vb = mcu_load_u32(wb + i);
        const uint32_t xa02 = mcu_load_u32(ca + i);
        const uint32_t xa13 = mcu_load_u32(ca + i + 2);
        const uint32_t xb02 = mcu_load_u32(cb + i);
        const uint32_t xb13 = mcu_load_u32(cb + i + 2);
        const uint32_t wa02 = mcu_sxtb16(va);
        const uint32_t wa13 = mcu_sxtb16_ror8(va);
        a0 = mcu_smlad(xa02, wa02, a0);
        a0 = mcu_smlad(xa13, wa13, a0);
        a2 = mcu_smlad(xb02, wa02, a2);
        a2 = mcu_smlad(xb13, wa13, a2);
        const uint32_t wb02 = mcu_sxtb16(vb);
        const uint32_t wb13 = mcu_sxtb16_ror8(vb);
        a1 = mcu_smlad(xa02, wb02, a1);
        a1 = mcu_smlad(xa13, wb13, a1);
        a3 = mcu_smlad(xb02, wb02, a3);
        a3 = mcu_smlad(xb13, wb13, a3);
    }
    for (; i < n; ++i) {
        a0 += (uint32_t)(ca[i] * wa[i]);
        a1 += (uint32_t)(ca[i] * wb[i]);
        a2 += (uint32_t)(cb[i] * wa[i]);
        a3 += (uint32_t)(cb[i] * wb[i]);
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* acc[0..1] += (c.wa, c.wb) over n values. */
static inline void mcu_dot_1x2(const int16_t *c, const int8_t *wa, const int8_t *wb, int32_t n, uint32_t acc[2])
{
    uint32_t a0 = acc[0], a1 = acc[1];
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t va = mcu_load_u32(wa + i);
        const uint32_t vb = mcu_load_u32(wb + i);
        const uint32_t x02 = mcu_load_u32(c + i);
        const uint32_t x13 = mcu_load_u32(c + i + 2);
        a0 = mcu_smlad(x02, mcu_sxtb16(va), a0);
        a0 = mcu_smlad(x13, mcu_sxtb16_ror8(va), a0);
        a1 = mcu_smlad(x02, mcu_sxtb16(vb), a1);
        a1 = mcu_smlad(x13, mcu_sxtb16_ror8(vb), a1);
    }
    for (; i < n; ++i) {
        a0 += (uint32_t)(c[i] * wa[i]);
        a1 += (uint32_t)(c[i] * wb[i]);
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* c.w over n values, added to acc. */
static inline uint32_t mcu_dot_1x1(const int16_t *c, const int8_t *w, int32_t n, uint32_t acc)
{
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t v = mcu_load_u32(w + i);
        acc = mcu_smlad(mcu_load_u32(c + i), mcu_sxtb16(v), acc);
        acc = mcu_smlad(mcu_load_u32(c + i + 2), mcu_sxtb16_ror8(v), acc);
    }
    for (; i < n; ++i) {
        acc += (uint32_t)(c[i] * w[i]);
    }
    return acc;
}

/* Output pixels ya (and yb when not NULL) from columns ca/cb of n values: every output channel's
 * weight row is weight + oc * n. All reads of both pixels are done before this writes. */
static inline void mcu_matrix_pixels_s8(const int16_t *ca, const int16_t *cb, int32_t n, int32_t out_c,
                                        const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *ya,
                                        int8_t *yb)
{
    int32_t oc = 0;
    if (yb != NULL) {
        for (; oc + 2 <= out_c; oc += 2) {
            const uint32_t b0 = bias != NULL ? (uint32_t)bias[oc] : 0u;
            const uint32_t b1 = bias != NULL ? (uint32_t)bias[oc + 1] : 0u;
            uint32_t acc[4] = {b0, b1, b0, b1};
            mcu_dot_2x2(ca, cb, weight + oc * n, weight + (oc + 1) * n, n, acc);
            const int32_t m0 = q->multiplier[oc], s0 = q->shift[oc];
            const int32_t m1 = q->multiplier[oc + 1], s1 = q->shift[oc + 1];
            ya[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[0]), m0, s0, output_offset, act_min, act_max);
            ya[oc + 1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[1]), m1, s1, output_offset, act_min, act_max);
            yb[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[2]), m0, s0, output_offset, act_min, act_max);
            yb[oc + 1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[3]), m1, s1, output_offset, act_min, act_max);
        }
        if (oc < out_c) {
            const uint32_t b0 = bias != NULL ? (uint32_t)bias[oc] : 0u;
            const int8_t *w = weight + oc * n;
            const int32_t m0 = q->multiplier[oc], s0 = q->shift[oc];
            ya[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(mcu_dot_1x1(ca, w, n, b0)), m0, s0, output_offset,
                                               act_min, act_max);
            yb[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(mcu_dot_1x1(cb, w, n, b0)), m0, s0, output_offset,
                                               act_min, act_max);
        }
        return;
    }
    for (; oc + 2 <= out_c; oc += 2) {
        uint32_t acc[2] = {bias != NULL ? (uint32_t)bias[oc] : 0u, bias != NULL ? (uint32_t)bias[oc + 1] : 0u};
        mcu_dot_1x2(ca, weight + oc * n, weight + (oc + 1) * n, n, acc);
        ya[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[0]), q->multiplier[oc], q->shift[oc], output_offset,
                                           act_min, act_max);
        ya[oc + 1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[1]), q->multiplier[oc + 1], q->shift[oc + 1],
                                               output_offset, act_min, act_max);
    }
    if (oc < out_c) {
        const uint32_t b0 = bias != NULL ? (uint32_t)bias[oc] : 0u;
        ya[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(mcu_dot_1x1(ca, weight + oc * n, n, b0)),
                                           q->multiplier[oc], q->shift[oc], output_offset, act_min, act_max);
    }
}

/* The column of one output pixel of a groups == 1 convolution: the window's taps in weight order
 * (kh, kw, ic), padded taps 0. `raw` is a scratch row of n bytes for channel counts that are not a
 * multiple of 4 (the window is gathered as bytes, padded with the zero-point, then widened). */
static inline void mcu_im2col_s8(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow,
                                 int16_t *col, int8_t *raw)
{
    const mcu_shape4 in = p->input;
    const int32_t c = in.c;
    const int32_t kw = p->kernel_w;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const int32_t off = p->input_offset;
    if (c % 4 == 0 && p->dilation_w == 1) {
        mcu_window_rows_s16(p, x_n, ih0, iw0, col);
        return;
    }
    const int8_t zp = (int8_t)-off; /* (zp + off) == 0: a padded tap */
    for (int32_t i = 0; i < p->kernel_h; ++i) {
        const int32_t ih = ih0 + i * p->dilation_h;
        for (int32_t j = 0; j < kw; ++j) {
            const int32_t iw = iw0 + j * p->dilation_w;
            int8_t *dst = raw + (i * kw + j) * c;
            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                mcu_fill_s8(dst, zp, c);
            } else {
                mcu_copy_s8(dst, x_n + (ih * in.w + iw) * c, c);
            }
        }
    }
    mcu_expand_s8(raw, p->kernel_h * kw * c, off, col);
}

/* One tap of four channels in mcu_depthwise_pixel_s8. */
#define MCU_DW_TAP(at)                                                                            \
    do {                                                                                          \
        const uint32_t xv = mcu_load_u32(xp + (at));                                              \
        const uint32_t wv = mcu_load_u32(wp + (at));                                              \
        const uint32_t x02 = mcu_sxtab16(off2, xv);                                               \
        const uint32_t w02 = mcu_sxtb16(wv);                                                      \
        const uint32_t x13 = mcu_sxtab16_ror8(off2, xv);                                          \
        const uint32_t w13 = mcu_sxtb16_ror8(wv);                                                 \
        a0 = mcu_smlabb(x02, w02, a0);                                                            \
        a2 = mcu_smlatt(x02, w02, a2);                                                            \
        a1 = mcu_smlabb(x13, w13, a1);                                                            \
        a3 = mcu_smlatt(x13, w13, a3);                                                            \
    } while (0)

/* Depthwise convolution (ch_mult 1) of one output pixel from row pointers: rows[i] is the input
 * row of tap row i (NULL when outside the input), taps kw_lo <= j < kw_hi start at column iw0.
 * Four channels at a time: per tap one load of input and weights, per-lane multiply-accumulate. */
static inline void mcu_depthwise_pixel_s8(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t iw0,
                                          int32_t kw_lo, int32_t kw_hi, int32_t channels, int32_t input_offset,
                                          const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                          int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y)
{
    const uint32_t off2 = mcu_offset_pair(input_offset);
    int32_t c = 0;
    for (; c + 4 <= channels; c += 4) {
        uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (bias != NULL) {
            a0 = (uint32_t)bias[c];
            a1 = (uint32_t)bias[c + 1];
            a2 = (uint32_t)bias[c + 2];
            a3 = (uint32_t)bias[c + 3];
        }
        for (int32_t i = 0; i < kh; ++i) {
            if (rows[i] == NULL) {
                continue;
            }
            const int8_t *xp = rows[i] + (iw0 + kw_lo) * channels + c;
            const int8_t *wp = weight + (i * kw + kw_lo) * channels + c;
            if (kw_hi - kw_lo == 3) { /* the interior of a 3-wide kernel, unrolled */
                MCU_DW_TAP(0);
                MCU_DW_TAP(channels);
                MCU_DW_TAP(2 * channels);
                continue;
            }
            for (int32_t j = kw_lo; j < kw_hi; ++j) {
                const uint32_t xv = mcu_load_u32(xp);
                const uint32_t wv = mcu_load_u32(wp);
                const uint32_t x02 = mcu_sxtab16(off2, xv);
                const uint32_t w02 = mcu_sxtb16(wv);
                const uint32_t x13 = mcu_sxtab16_ror8(off2, xv);
                const uint32_t w13 = mcu_sxtb16_ror8(wv);
                a0 = mcu_smlabb(x02, w02, a0);
                a2 = mcu_smlatt(x02, w02, a2);
                a1 = mcu_smlabb(x13, w13, a1);
                a3 = mcu_smlatt(x13, w13, a3);
                xp += channels;
                wp += channels;
            }
        }
        y[c] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(a0), q->multiplier[c], q->shift[c], output_offset, act_min,
                                         act_max);
        y[c + 1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(a1), q->multiplier[c + 1], q->shift[c + 1],
                                             output_offset, act_min, act_max);
        y[c + 2] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(a2), q->multiplier[c + 2], q->shift[c + 2],
                                             output_offset, act_min, act_max);
        y[c + 3] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(a3), q->multiplier[c + 3], q->shift[c + 3],
                                             output_offset, act_min, act_max);
    }
    mcu_dw_pixel_tail_s8(rows, kh, kw, iw0, kw_lo, kw_hi, channels, c, channels, input_offset, weight, bias, q,
                         output_offset, act_min, act_max, y);
}

#undef MCU_DW_TAP

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_CONV_S8_DSP_H */
