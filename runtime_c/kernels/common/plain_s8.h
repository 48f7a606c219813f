/* Plain-C int8 matrix paths for cores without the DSP extension that multiply-accumulate 32 x 32 ->
 * 64 bits in one instruction (SMLAL: ARMv7-M such as the Cortex-M3, 32-bit Arm, and the host).
 * Internal: static inline only. MCU_S8_WIDE is 1 when these paths are compiled; the Cortex-M0+
 * (ARMv6-M, a 32-bit multiply only) keeps the kernels' plain loops, and so does any build with
 * MCU_S8_NO_WIDE defined (the tests build the kernels that way too).
 *
 * Two output pixels per multiply. A column word holds the (x + input_offset) values of two pixels
 * at one tap, lo + hi * 2^23 (both in [-255, 255], so the word fits int32). One SMLAL of that word
 * and a weight w adds lo * w + hi * w * 2^23 to a 64-bit accumulator: after n taps it holds
 * S_lo + S_hi * 2^23 exactly. With n <= MCU_S8_WIDE_CHUNK taps |S_lo| <= 128 * 255 * 128 < 2^22,
 * so S_lo is the accumulator's low 23 bits sign-extended and S_hi = (acc - S_lo) / 2^23. Longer
 * windows run in chunks whose split sums add into 32-bit accumulators modulo 2^32, which is the
 * reference's accumulation (the same integer sum, in another order).
 *
 * Blocks of four pixels (two column words per tap) are read by one channel at a time: per tap one
 * weight load and two SMLALs serve four multiply-accumulates. */
#ifndef MCU_KERNELS_INTERNAL_PLAIN_S8_H
#define MCU_KERNELS_INTERNAL_PLAIN_S8_H

#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"
#include "mve_s8.h"
#include "requant.h"
#include "simd_s8.h"
#include "window.h"

#if !defined(MCU_S8_NO_WIDE) && !MCU_S8_DSP && !MCU_S8_MVE &&                                         \
    (!defined(__arm__) || defined(__ARM_ARCH_ISA_ARM) || (defined(__ARM_ARCH_ISA_THUMB) && __ARM_ARCH_ISA_THUMB >= 2))
#define MCU_S8_WIDE 1
#else
#define MCU_S8_WIDE 0
#endif

#if MCU_S8_WIDE

#define MCU_S8_WIDE_SHIFT 23
#define MCU_S8_WIDE_CHUNK 128
/* Column words on the stack (2,560 bytes): four-pixel blocks for windows of up to half as many
 * taps, two-pixel blocks up to this many. Larger windows take the kernels' plain loops. */
#define MCU_S8_WIDE_WORDS 640

/* The pair's low lane: the 23 low bits sign-extended, and the high lane from the rest. */
static inline void mcu_wide_split(int64_t acc, uint32_t *lo, uint32_t *hi)
{
    const int32_t s0 = (int32_t)(((uint32_t)acc & 0x7FFFFFu) ^ 0x400000u) - 0x400000;
    *lo += (uint32_t)s0;
    *hi += (uint32_t)(int32_t)mcu_asr64(acc - s0, MCU_S8_WIDE_SHIFT);
}

/* Four taps of a four-pixel block: a += lane words 0 * w, b += lane words 1 * w (on the core one LDRD
 * of both words, one LDRSB and two SMLALs per tap; GCC splits the 64-bit loads otherwise). */
#if defined(__arm__) && defined(__ARM_ARCH_ISA_THUMB) && __ARM_ARCH_ISA_THUMB >= 2
#define MCU_WIDE_TAP4                                                                                   \
    "ldrsb %[w], [%[wk]], #1\n\t"                                                                         \
    "ldrd %[l], %[h], [%[c]], #8\n\t"                                                                     \
    "smlal %Q[a], %R[a], %[l], %[w]\n\t"                                                                  \
    "smlal %Q[b], %R[b], %[h], %[w]\n\t"
static inline void mcu_wide_step4(const int32_t **c, const int8_t **wk, int64_t *a, int64_t *b)
{
    int32_t w, l, h;
    __asm__(MCU_WIDE_TAP4 MCU_WIDE_TAP4 MCU_WIDE_TAP4 MCU_WIDE_TAP4
            : [a] "+r"(*a), [b] "+r"(*b), [c] "+r"(*c), [wk] "+r"(*wk), [w] "=&r"(w), [l] "=&r"(l), [h] "=&r"(h)
            :
            : "memory");
}
#undef MCU_WIDE_TAP4
#else
static inline void mcu_wide_step4(const int32_t **c, const int8_t **wk, int64_t *a, int64_t *b)
{
    const int32_t *cc = *c;
    const int8_t *ww = *wk;
    for (int32_t t = 0; t < 4; ++t) {
        *a += (int64_t)cc[2 * t] * ww[t];
        *b += (int64_t)cc[2 * t + 1] * ww[t];
    }
    *c = cc + 8;
    *wk = ww + 4;
}
#endif

/* acc[0..3] += the dot products of weights w[0..n) with the four pixels of a block column (two
 * words per tap). */
static inline void mcu_wide_dot4(const int32_t *col, const int8_t *w, int32_t n, uint32_t acc[4])
{
    for (int32_t k0 = 0; k0 < n; k0 += MCU_S8_WIDE_CHUNK) {
        const int32_t k1 = n - k0 > MCU_S8_WIDE_CHUNK ? k0 + MCU_S8_WIDE_CHUNK : n;
        const int32_t *c = col + 2 * k0;
        const int8_t *wk = w + k0;
        const int8_t *const end = w + k1;
        int64_t a = 0, b = 0;
        while (wk + 4 <= end) {
            mcu_wide_step4(&c, &wk, &a, &b);
        }
        for (; wk < end; ++wk, c += 2) {
            const int32_t w0 = wk[0];
            a += (int64_t)c[0] * w0;
            b += (int64_t)c[1] * w0;
        }
        mcu_wide_split(a, &acc[0], &acc[1]);
        mcu_wide_split(b, &acc[2], &acc[3]);
    }
}

/* acc[0..1] += the dot products of w[0..n) with the two pixels of a one-word-per-tap column. */
static inline void mcu_wide_dot2(const int32_t *col, const int8_t *w, int32_t n, uint32_t acc[2])
{
    for (int32_t k0 = 0; k0 < n; k0 += MCU_S8_WIDE_CHUNK) {
        const int32_t k1 = n - k0 > MCU_S8_WIDE_CHUNK ? k0 + MCU_S8_WIDE_CHUNK : n;
        const int32_t *c = col + k0;
        const int8_t *wk = w + k0;
        const int8_t *const end = w + k1;
        int64_t a = 0;
        for (; wk + 4 <= end; wk += 4, c += 4) {
            a += (int64_t)c[0] * wk[0];
            a += (int64_t)c[1] * wk[1];
            a += (int64_t)c[2] * wk[2];
            a += (int64_t)c[3] * wk[3];
        }
        for (; wk < end; ++wk, ++c) {
            a += (int64_t)c[0] * wk[0];
        }
        mcu_wide_split(a, &acc[0], &acc[1]);
    }
}

/* --- requantization of one channel ----------------------------------------------------------------
 *
 * For shift in [-24, -1] (R = -shift) mcu_requantize_to_s8_fast's two roundings merge into one:
 * with P = acc * multiplier and y = floor((P + 2^30) / 2^31), rounding_divide_by_pot(y, R) is
 * floor((y + 2^(R-1) - [y < 0]) / 2^R), and nested floors of integer sums merge into
 *   z = floor((P + 2^30 + 2^(R+30) - [y < 0] 2^31) / 2^(31+R)).
 * [y < 0] may be read as [acc < 0]: they differ only when y == 0 (multiplier >= 0), and then both
 * give z == 0. Adding output_offset * 2^(31+R) adds the output offset to z. Every sum stays inside
 * int64 for R <= 24 (|P| < 2^62, |output_offset| 2^(31+R) <= 2^62), and once z is clamped into the
 * activation range (inside int8) the fast function's clamp of y to [-256, 256] changes nothing.
 * Other shifts take mcu_requantize_to_s8_fast itself. */
typedef struct {
    int64_t k; /* 2^30 + 2^(R+30) + output_offset 2^(31+R), for acc >= 0 */
    int32_t multiplier;
    int32_t rshift; /* R - 1 (the high word's shift), or -1: the fast function with `raw_shift` */
    int32_t raw_shift;
    int32_t output_offset, act_min, act_max;
} mcu_wide_rq;

static inline void mcu_wide_rq_init(mcu_wide_rq *t, int32_t multiplier, int32_t shift, int32_t output_offset,
                                    int32_t act_min, int32_t act_max)
{
    t->multiplier = multiplier;
    t->raw_shift = shift;
    t->output_offset = output_offset;
    t->act_min = act_min;
    t->act_max = act_max;
    if (shift > -1 || shift < -24) {
        t->rshift = -1;
        t->k = 0;
        return;
    }
    const int32_t r = -shift;
    t->rshift = r - 1;
    /* K by words, 32-bit arithmetic only: the low word is 2^30 (plus 2^31 for R = 1), the high word
     * 2^(R-2) for R >= 2 plus output_offset 2^(R-1) */
    const uint32_t lo = (1u << 30) | (r == 1 ? 1u << 31 : 0u);
    const int32_t hi = (r >= 2 ? (int32_t)1 << (r - 2) : 0) + output_offset * ((int32_t)1 << (r - 1));
    t->k = (int64_t)hi * 4294967296 + (int64_t)lo;
}

static inline int8_t mcu_wide_rq_apply(const mcu_wide_rq *t, int32_t acc)
{
    if (t->rshift < 0) {
        return mcu_requantize_to_s8_fast(acc, t->multiplier, t->raw_shift, t->output_offset, t->act_min,
                                         t->act_max);
    }
    const int64_t s = t->k - (acc < 0 ? ((int64_t)1 << 31) : 0) + (int64_t)acc * t->multiplier;
    /* floor(s / 2^(31+R)) is the high word shifted by R - 1 */
    const int32_t hi = (int32_t)mcu_asr64(s, 32);
    return (int8_t)mcu_clamp_s32(mcu_asr32(hi, t->rshift), t->act_min, t->act_max);
}

/* --- columns ---------------------------------------------------------------------------------------- */

/* Lane `hi` (0: low, 1: high) of column words col[0], col[stride], ... from the window of output
 * pixel (oh, ow) of image x_n (groups == 1): (x + input_offset) per tap, 0 at padded taps. The low
 * lane is written first (it sets the word), the high lane adds to it. */
static inline void mcu_wide_gather(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow,
                                   int32_t *col, int32_t stride, int hi)
{
    const mcu_shape4 in = p->input;
    const int32_t c = in.c;
    const int32_t off = p->input_offset;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const int32_t row_taps = p->kernel_w * c;
    int32_t *dst = col;
    for (int32_t i = 0; i < p->kernel_h; ++i, dst += row_taps * stride) {
        const int32_t ih = ih0 + i * p->dilation_h;
        int32_t *d = dst;
        if (ih < 0 || ih >= in.h) {
            if (!hi) {
                for (int32_t t = 0; t < row_taps; ++t, d += stride) {
                    *d = 0;
                }
            }
            continue;
        }
        const int8_t *x_row = x_n + ih * in.w * c;
        for (int32_t j = 0; j < p->kernel_w; ++j) {
            const int32_t iw = iw0 + j * p->dilation_w;
            if (iw < 0 || iw >= in.w) {
                if (!hi) {
                    for (int32_t t = 0; t < c; ++t, d += stride) {
                        *d = 0;
                    }
                } else {
                    d += c * stride;
                }
                continue;
            }
            const int8_t *x = x_row + iw * c;
            if (hi) {
                for (int32_t t = 0; t < c; ++t, d += stride) {
                    *d += (x[t] + off) * ((int32_t)1 << MCU_S8_WIDE_SHIFT);
                }
            } else {
                for (int32_t t = 0; t < c; ++t, d += stride) {
                    *d = x[t] + off;
                }
            }
        }
    }
}

/* Zero lane words for a block's missing pixels. */
static inline void mcu_wide_zero(int32_t *col, int32_t stride, int32_t n)
{
    for (int32_t t = 0; t < n; ++t, col += stride) {
        *col = 0;
        __asm__("" ::: "memory"); /* no memset call: the kernels reference no libc function */
    }
}

/* Column words of `count` (1 to 4) consecutive pixels at x (n values each), two words per tap. */
static inline void mcu_wide_pixels4(const int8_t *x, int32_t n, int32_t count, int32_t off, int32_t *col)
{
    if (count == 4) {
        /* both lanes' offsets in one addition */
        const int32_t off2 = off + off * ((int32_t)1 << MCU_S8_WIDE_SHIFT);
        const int8_t *x1 = x + n, *x2 = x + 2 * n, *x3 = x + 3 * n;
        for (int32_t t = 0; t < n; ++t, col += 2) {
            col[0] = x[t] + x1[t] * ((int32_t)1 << MCU_S8_WIDE_SHIFT) + off2;
            col[1] = x2[t] + x3[t] * ((int32_t)1 << MCU_S8_WIDE_SHIFT) + off2;
        }
        return;
    }
    const int8_t *x1 = count > 1 ? x + n : NULL;
    const int8_t *x2 = count > 2 ? x + 2 * n : NULL;
    const int8_t *x3 = count > 3 ? x + 3 * n : NULL;
    for (int32_t t = 0; t < n; ++t) {
        const int32_t v1 = x1 != NULL ? x1[t] + off : 0;
        const int32_t v2 = x2 != NULL ? x2[t] + off : 0;
        const int32_t v3 = x3 != NULL ? x3[t] + off : 0;
        col[2 * t] = x[t] + off + v1 * ((int32_t)1 << MCU_S8_WIDE_SHIFT);
        col[2 * t + 1] = v2 + v3 * ((int32_t)1 << MCU_S8_WIDE_SHIFT);
    }
}

/* Output channels [0, cout) of a block of `count` pixels (y[i * ystride] is pixel i's channel 0)
 * from its column: one channel at a time, four or two pixels per column (`four`). */
static inline void mcu_wide_block(const int32_t *col, int32_t n, int four, int32_t count, int32_t cout,
                                  const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                  int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y,
                                  int32_t ystride)
{
    for (int32_t oc = 0; oc < cout; ++oc) {
        const uint32_t b = bias != NULL ? (uint32_t)bias[oc] : 0u;
        uint32_t acc[4] = {b, b, b, b};
        const int8_t *w = weight + oc * n;
        if (four) {
            mcu_wide_dot4(col, w, n, acc);
        } else {
            mcu_wide_dot2(col, w, n, acc);
        }
        mcu_wide_rq rq;
        mcu_wide_rq_init(&rq, q->multiplier[oc], q->shift[oc], output_offset, act_min, act_max);
        /* constant indices keep the accumulators in registers */
        int8_t *yo = y + oc;
        yo[0] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc[0]));
        if (count > 1) {
            yo[ystride] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc[1]));
        }
        if (count > 2) {
            yo[2 * ystride] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc[2]));
        }
        if (count > 3) {
            yo[3 * ystride] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc[3]));
        }
    }
}

/* One batch row of a fully connected layer: four output features at a time share every input
 * load (each weight is read once, so pairs of pixels have nothing to share here). */
static inline void mcu_wide_linear_row(const int8_t *x, int32_t n, int32_t off, int32_t cout, const int8_t *weight,
                                       const int32_t *bias, const mcu_per_channel_quant *q, int32_t output_offset,
                                       int32_t act_min, int32_t act_max, int8_t *y)
{
    int32_t o = 0;
    for (; o + 4 <= cout; o += 4) {
        const int8_t *w0 = weight + o * n;
        const int8_t *w1 = w0 + n;
        const int8_t *w2 = w1 + n;
        const int8_t *w3 = w2 + n;
        uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        if (bias != NULL) {
            a0 = (uint32_t)bias[o];
            a1 = (uint32_t)bias[o + 1];
            a2 = (uint32_t)bias[o + 2];
            a3 = (uint32_t)bias[o + 3];
        }
        for (int32_t i = 0; i < n; ++i) {
            const int32_t v = x[i] + off;
            a0 += (uint32_t)(v * w0[i]);
            a1 += (uint32_t)(v * w1[i]);
            a2 += (uint32_t)(v * w2[i]);
            a3 += (uint32_t)(v * w3[i]);
        }
        const uint32_t acc[4] = {a0, a1, a2, a3};
        for (int32_t j = 0; j < 4; ++j) {
            mcu_wide_rq rq;
            mcu_wide_rq_init(&rq, q->multiplier[o + j], q->shift[o + j], output_offset, act_min, act_max);
            y[o + j] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc[j]));
        }
    }
    for (; o < cout; ++o) {
        const int8_t *w = weight + o * n;
        uint32_t a = bias != NULL ? (uint32_t)bias[o] : 0u;
        for (int32_t i = 0; i < n; ++i) {
            a += (uint32_t)((x[i] + off) * w[i]);
        }
        mcu_wide_rq rq;
        mcu_wide_rq_init(&rq, q->multiplier[o], q->shift[o], output_offset, act_min, act_max);
        y[o] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(a));
    }
}

/* --- depthwise (ch_mult 1, dilation 1) ---------------------------------------------------------------
 *
 * One output row at a time, one channel at a time: the channel's weights go to a local table once
 * per row, then every pixel of the row reads its window through the kernel rows' pointers (NULL:
 * a padded row). The whole output row is written by the caller's rule (in place: after the input
 * row went to the ring; otherwise straight to the output when it is apart from the input, or
 * through a row buffer). */
#define MCU_S8_WIDE_DW_TAPS 64
#define MCU_S8_WIDE_DW_ROW_BYTES 1024

static inline int mcu_wide_dw_applies(int32_t kh, int32_t kw)
{
    return kh <= MCU_S8_DW_ROWS_MAX && kw <= MCU_S8_WIDE_DW_TAPS && kh * kw <= MCU_S8_WIDE_DW_TAPS;
}

static inline void mcu_wide_dw_row_singles(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t in_w, int32_t out_w,
                                   int32_t stride, int32_t pad_left, int32_t ch, int32_t off, const int8_t *weight,
                                   const int32_t *bias, const mcu_per_channel_quant *q, int32_t output_offset,
                                   int32_t act_min, int32_t act_max, int8_t *y)
{
    int32_t wv[MCU_S8_WIDE_DW_TAPS];
    const int8_t *live[MCU_S8_DW_ROWS_MAX]; /* the kernel rows inside the input, and their weights */
    int32_t live_i[MCU_S8_DW_ROWS_MAX];
    int32_t nl = 0;
    for (int32_t i = 0; i < kh; ++i) {
        if (rows[i] != NULL) {
            live[nl] = rows[i];
            live_i[nl++] = i;
        }
    }
    /* output pixels [ow_lo, ow_hi) have their whole window inside the row */
    const int32_t ow_lo = pad_left <= 0 ? 0 : (pad_left + stride - 1) / stride;
    const int32_t span = in_w + pad_left - kw;
    int32_t ow_hi = span < 0 ? 0 : span / stride + 1;
    ow_hi = ow_hi < out_w ? ow_hi : out_w;
    const int32_t c2 = 2 * ch;
    for (int32_t c = 0; c < ch; ++c) {
        for (int32_t l = 0; l < nl; ++l) {
            const int8_t *w = weight + live_i[l] * kw * ch + c;
            for (int32_t j = 0; j < kw; ++j) {
                wv[l * kw + j] = w[j * ch];
            }
        }
        mcu_wide_rq rq;
        mcu_wide_rq_init(&rq, q->multiplier[c], q->shift[c], output_offset, act_min, act_max);
        const uint32_t b = bias != NULL ? (uint32_t)bias[c] : 0u;
        for (int32_t ow = 0; ow < out_w; ++ow) {
            const int32_t iw0 = ow * stride - pad_left;
            uint32_t acc = b;
            if (ow >= ow_lo && ow < ow_hi && kw == 3) {
                const int32_t *wl = wv;
                for (int32_t l = 0; l < nl; ++l, wl += 3) {
                    const int8_t *x = live[l] + iw0 * ch + c;
                    acc += (uint32_t)((x[0] + off) * wl[0]);
                    acc += (uint32_t)((x[ch] + off) * wl[1]);
                    acc += (uint32_t)((x[c2] + off) * wl[2]);
                }
            } else {
                int32_t j0, j1;
                mcu_window_taps(iw0, kw, 1, in_w, &j0, &j1);
                for (int32_t l = 0; l < nl; ++l) {
                    const int8_t *x = live[l] + iw0 * ch + c;
                    const int32_t *wl = wv + l * kw;
                    for (int32_t j = j0; j < j1; ++j) {
                        acc += (uint32_t)((x[j * ch] + off) * wl[j]);
                    }
                }
            }
            y[ow * ch + c] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc));
        }
    }
}

/* Pairs of output pixels of one channel whose 3-wide windows lie inside the row, from pixel `ow` on
 * while a pair fits before `ow_hi`; returns the first pixel left. x[l] is live row l at the channel's
 * byte of input pixel 0. Two pixels per SMLAL (the column words of mcu_wide_dot4, here of raw x: the
 * offset comes in through `init`, off * the live weights' sum in both lanes). |lane| <= 128 * 128 *
 * 48 taps twice < 2^22: no split within a window. */
static inline int32_t mcu_wide_dw_pairs3(const int8_t *const *x, int32_t nl, const int32_t *wv, int32_t ow,
                                         int32_t ow_hi, int32_t stride, int32_t pad_left, int32_t ch, int64_t init,
                                         uint32_t b, const mcu_wide_rq *rq, int8_t *y)
{
    const int32_t m = (int32_t)1 << MCU_S8_WIDE_SHIFT;
    for (; ow + 2 <= ow_hi; ow += 2) {
        const int32_t base = (ow * stride - pad_left) * ch;
        int64_t acc = init;
        const int32_t *wl = wv;
        for (int32_t l = 0; l < nl; ++l, wl += 3) {
            const int8_t *xl = x[l] + base;
            if (stride == 1) {
                const int32_t x0 = xl[0], x1 = xl[ch], x2 = xl[2 * ch], x3 = xl[3 * ch];
                acc += (int64_t)(x0 + x1 * m) * wl[0];
                acc += (int64_t)(x1 + x2 * m) * wl[1];
                acc += (int64_t)(x2 + x3 * m) * wl[2];
            } else {
                const int32_t x0 = xl[0], x1 = xl[ch], x2 = xl[2 * ch], x3 = xl[3 * ch], x4 = xl[4 * ch];
                acc += (int64_t)(x0 + x2 * m) * wl[0];
                acc += (int64_t)(x1 + x3 * m) * wl[1];
                acc += (int64_t)(x2 + x4 * m) * wl[2];
            }
        }
        uint32_t lo = b, hi = b;
        mcu_wide_split(acc, &lo, &hi);
        y[ow * ch] = mcu_wide_rq_apply(rq, mcu_u32_to_s32(lo));
        y[(ow + 1) * ch] = mcu_wide_rq_apply(rq, mcu_u32_to_s32(hi));
    }
    return ow;
}

/* Rows with at least this many whole 3-wide windows run them in pairs. */
#define MCU_S8_WIDE_DW_PAIRS_MIN 8

/* A row of 3-wide windows, stride 1 or 2, with at least MCU_S8_WIDE_DW_PAIRS_MIN whole windows: the
 * edge pixels one at a time, the rest in pairs. A function of its own: inlined, its registers would
 * crowd the narrow rows' loops. */
static __attribute__((noinline)) void mcu_wide_dw_row_pairs(const int8_t *const *rows, int32_t kh, int32_t in_w,
                                                           int32_t out_w, int32_t stride, int32_t pad_left,
                                                           int32_t ch, int32_t off, const int8_t *weight,
                                                           const int32_t *bias, const mcu_per_channel_quant *q,
                                                           int32_t output_offset, int32_t act_min, int32_t act_max,
                                                           int8_t *y, int32_t ow_lo, int32_t ow_hi)
{
    int32_t wv[MCU_S8_WIDE_DW_TAPS];
    const int8_t *live[MCU_S8_DW_ROWS_MAX];
    int32_t live_i[MCU_S8_DW_ROWS_MAX];
    int32_t nl = 0;
    for (int32_t i = 0; i < kh; ++i) {
        if (rows[i] != NULL) {
            live[nl] = rows[i];
            live_i[nl++] = i;
        }
    }
    for (int32_t c = 0; c < ch; ++c) {
        int32_t sum = 0;
        const int8_t *xc[MCU_S8_DW_ROWS_MAX];
        for (int32_t l = 0; l < nl; ++l) {
            const int8_t *w = weight + live_i[l] * 3 * ch + c;
            for (int32_t j = 0; j < 3; ++j) {
                wv[l * 3 + j] = w[j * ch];
                sum += w[j * ch];
            }
            xc[l] = live[l] + c;
        }
        mcu_wide_rq rq;
        mcu_wide_rq_init(&rq, q->multiplier[c], q->shift[c], output_offset, act_min, act_max);
        const uint32_t b = bias != NULL ? (uint32_t)bias[c] : 0u;
        const int64_t o = (int64_t)off * sum;
        const int64_t init = o + o * ((int64_t)1 << MCU_S8_WIDE_SHIFT);
        const int32_t end = stride == 1 ? mcu_wide_dw_pairs3(xc, nl, wv, ow_lo, ow_hi, 1, pad_left, ch, init, b, &rq,
                                                             y + c)
                                        : mcu_wide_dw_pairs3(xc, nl, wv, ow_lo, ow_hi, 2, pad_left, ch, init, b, &rq,
                                                             y + c);
        for (int32_t ow = 0; ow < out_w; ++ow) {
            if (ow == ow_lo && end > ow_lo) {
                ow = end - 1; /* written in pairs */
                continue;
            }
            const int32_t iw0 = ow * stride - pad_left;
            int32_t j0, j1;
            mcu_window_taps(iw0, 3, 1, in_w, &j0, &j1);
            uint32_t acc = b;
            for (int32_t l = 0; l < nl; ++l) {
                const int8_t *x = xc[l] + iw0 * ch;
                for (int32_t j = j0; j < j1; ++j) {
                    acc += (uint32_t)((x[j * ch] + off) * wv[l * 3 + j]);
                }
            }
            y[ow * ch + c] = mcu_wide_rq_apply(&rq, mcu_u32_to_s32(acc));
        }
    }
}

static inline void mcu_wide_dw_row(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t in_w, int32_t out_w,
                                   int32_t stride, int32_t pad_left, int32_t ch, int32_t off, const int8_t *weight,
                                   const int32_t *bias, const mcu_per_channel_quant *q, int32_t output_offset,
                                   int32_t act_min, int32_t act_max, int8_t *y)
{
    const int32_t ow_lo = pad_left <= 0 ? 0 : (pad_left + stride - 1) / stride;
    const int32_t span = in_w + pad_left - kw;
    int32_t ow_hi = span < 0 ? 0 : span / stride + 1;
    ow_hi = ow_hi < out_w ? ow_hi : out_w;
    if (kw == 3 && (stride == 1 || stride == 2) && ow_hi - ow_lo >= MCU_S8_WIDE_DW_PAIRS_MIN) {
        mcu_wide_dw_row_pairs(rows, kh, in_w, out_w, stride, pad_left, ch, off, weight, bias, q, output_offset,
                              act_min, act_max, y, ow_lo, ow_hi);
        return;
    }
    mcu_wide_dw_row_singles(rows, kh, kw, in_w, out_w, stride, pad_left, ch, off, weight, bias, q, output_offset,
                            act_min, act_max, y);
}

#endif /* MCU_S8_WIDE */

#endif /* MCU_KERNELS_INTERNAL_PLAIN_S8_H */
