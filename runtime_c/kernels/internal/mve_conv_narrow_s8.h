/* Helium (MVE) convolution of layers with few input channels (1 to 4: the first layer of most
 * models), groups 1, dilation 1, windows of at most 48 taps. Internal: static inline only.
 *
 * Why a path of its own: with 9, 27 or 40 taps a window fills a 16-lane VMLADAVA badly and the
 * generic path (mcu_mve_im2col_s8, one fill or copy loop per kernel row per pixel) spends most of
 * its instructions gathering windows. Here:
 *  - a "stripe" holds, for a run of output pixels of one output row, the input columns they read
 *    in column-major order: column pc (input column ow0 * stride_w - pad_left + pc) as kernel_h
 *    rows of c bytes, padded taps holding the zero-point. A window is then kernel_w whole columns,
 *    kw * kh * c contiguous bytes at offset ow * stride_w * kh * c, and its taps in weight order
 *    (kh, kw, c) are one VLDRB gather per 16 (8-bit offsets: at most 48 taps). Input rows go into
 *    the stripe with VSTRB scatters (one per up to 16 bytes), so a stripe costs a few instructions
 *    per kernel row rather than per pixel;
 *  - four output pixels in the lanes of one vector per output channel: their windows, gathered
 *    once (zero past the window's taps), meet every output channel's weight row in place; four
 *    VMLADAVs per 16 taps share one weight load, and the requantization takes the channel's
 *    parameters as scalars from a per-call table (one pass over all output channels per group of
 *    four pixels, in assembly so that pointers and accumulators stay in registers).
 * Bit-exactness: the int32 sums are the same products, modulo 2^32, on top of the folded biases
 * bias + input_offset * sum(w) (see mve_s8.h); padded taps hold -input_offset, whose term
 * (x + off) * w is 0; lanes past a window's taps hold 0 whatever weight bytes they meet; the
 * requantization is mcu_mve_requantize's, and the offset and clamp those of mcu_mve_matrix_block.
 * The window overlap contract: all inputs of a run of pixels are copied into the stripe before any
 * of their outputs is written. */
#ifndef MCU_KERNELS_INTERNAL_MVE_CONV_NARROW_S8_H
#define MCU_KERNELS_INTERNAL_MVE_CONV_NARROW_S8_H

#include <stdint.h>

#include "check.h"
#include "mve_s8.h"

#if MCU_S8_MVE

#define MCU_NARROW_C_MAX 4
#define MCU_NARROW_VECS_MAX 3 /* windows of at most 48 taps */
#define MCU_NARROW_OC_MAX 96  /* output channels whose requantization table is on the stack */
/* Bytes of input columns in a stripe: runs of pixels whose columns take more go in several. */
#define MCU_NARROW_STRIPE 384

/* Requantization parameters of one output channel as the assembly loop loads them. */
typedef struct {
    int32_t kb;        /* folded bias */
    int32_t m;         /* multiplier */
    int32_t left;      /* max(shift, 0) */
    int32_t neg_right; /* min(shift, 0) */
} mcu_narrow_rq;

static inline int mcu_mve_narrow_applies(const mcu_conv2d_s8_params *p)
{
    return p->groups == 1 && p->input.c <= MCU_NARROW_C_MAX && p->dilation_h == 1 && p->dilation_w == 1 &&
           p->kernel_h * p->kernel_w * p->input.c <= 16 * MCU_NARROW_VECS_MAX && p->output.c <= MCU_NARROW_OC_MAX;
}

/* `channels` (> 0) output channels of a group of four pixels, starting at weight row w (rows of n
 * bytes; 16 * K bytes are read from each: the caller makes sure that the last row read has them)
 * and table entry t: the windows at win, vector v of pixel j at win + (4 * v + j) * 16, in weight
 * order and zero past the window's n taps (so the bytes read past a weight row meet zeros). Lane
 * j of channel oc goes to y[j * out_c + oc] for the lanes in `pred`. lo/hi: the clamp minus the
 * output offset, off: the output offset, so the offset and clamp of mcu_mve_matrix_block; the
 * rounding fixup of mcu_mve_requantize is y + (y >> 31) when the shift is negative, i.e. a
 * multiply-accumulate by (neg_right < 0) = neg_right >> 31 (logical). One low-overhead loop
 * over the channels. */
#define MCU_NARROW_GROUP_ASM(K)                                                                                       \
    __asm__ volatile("   vmsr p0, %[a1]\n"                                                                             \
                     "   dls lr, %[a0]\n"                                                                              \
                     "1: vldrb.u8 q1, [%[w]]\n"                                                                        \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladav.s8 %[a0], q0, q1\n"                                                                   \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladav.s8 %[a1], q0, q1\n"                                                                   \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladav.s8 %[a2], q0, q1\n"                                                                   \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladav.s8 %[a3], q0, q1\n"                                                                   \
                     "   .if " #K " >= 2\n"                                                                            \
                     "   vldrb.u8 q1, [%[w], #16]\n"                                                                   \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a0], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a1], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a2], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a3], q0, q1\n"                                                                  \
                     "   .endif\n"                                                                                     \
                     "   .if " #K " >= 3\n"                                                                            \
                     "   vldrb.u8 q1, [%[w], #32]\n"                                                                   \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a0], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a1], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a2], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x]], #16\n"                                                                   \
                     "   vmladava.s8 %[a3], q0, q1\n"                                                                  \
                     "   .endif\n"                                                                                     \
                     "   vmov q2[2], q2[0], %[a0], %[a2]\n"                                                            \
                     "   vmov q2[3], q2[1], %[a1], %[a3]\n"                                                            \
                     "   ldrd %[a0], %[a1], [%[t]], #8\n"                                                              \
                     "   ldrd %[a2], %[a3], [%[t]], #8\n"                                                              \
                     "   vadd.i32 q2, q2, %[a0]\n"                                                                     \
                     "   vqshl.s32 q2, %[a2]\n"                                                                        \
                     "   vqrdmulh.s32 q2, q2, %[a1]\n"                                                                 \
                     "   lsrs %[a0], %[a3], #31\n"                                                                     \
                     "   vshr.s32 q3, q2, #31\n"                                                                       \
                     "   vmla.s32 q2, q3, %[a0]\n"                                                                     \
                     "   vrshl.s32 q2, %[a3]\n"                                                                        \
                     "   vmax.s32 q2, q2, %q[lo]\n"                                                                    \
                     "   vmin.s32 q2, q2, %q[hi]\n"                                                                    \
                     "   vadd.i32 q2, q2, %q[off]\n"                                                                   \
                     "   vpst\n"                                                                                       \
                     "   vstrbt.32 q2, [%[y], %q[so]]\n"                                                               \
                     "   add %[y], %[y], #1\n"                                                                         \
                     "   add %[w], %[w], %[n]\n"                                                                       \
                     "   sub %[x], %[x], #64 * " #K "\n"                                                               \
                     "   le lr, 1b\n"                                                                                  \
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [w] "+r"(w), [t] "+r"(t),    \
                       [y] "+r"(y), [x] "+r"(x)                                                                        \
                     : [n] "r"(n), [lo] "w"(lo), [hi] "w"(hi), [off] "w"(off), [so] "w"(so)                            \
                     : "q0", "q1", "q2", "q3", "lr", "cc", "memory")

static inline void mcu_narrow_group(int32_t vecs, const int8_t *x, int32_t count, int32_t channels, const int8_t *w,
                                    int32_t n, const mcu_narrow_rq *t, int8_t *y, int32x4_t lo, int32x4_t hi,
                                    int32x4_t off, uint32x4_t so)
{
    int32_t a0 = channels;                                    /* the loop count, then an accumulator */
    int32_t a1 = (int32_t)(uint32_t)vctp32q((uint32_t)count); /* the store predicate, likewise */
    int32_t a2, a3;
    if (vecs == 1) {
        MCU_NARROW_GROUP_ASM(1);
    } else if (vecs == 2) {
        MCU_NARROW_GROUP_ASM(2);
    } else {
        MCU_NARROW_GROUP_ASM(3);
    }
}

/* A group: the channels whose weight rows can be read whole in place, then the last `tail` from
 * their zero-padded copy. */
static inline void mcu_narrow_groups(int32_t vecs, const int8_t *x, int32_t count, int32_t channels, int32_t tail,
                                     const int8_t *weight, const int8_t *last, int32_t n, const mcu_narrow_rq *t,
                                     int8_t *y, int32x4_t lo, int32x4_t hi, int32x4_t off, uint32x4_t so)
{
    if (channels > tail) {
        mcu_narrow_group(vecs, x, count, channels - tail, weight, n, t, y, lo, hi, off, so);
    }
    if (tail > 0) {
        mcu_narrow_group(vecs, x, count, tail, last, n, t + channels - tail, y + channels - tail, lo, hi, off, so);
    }
}

/* Copies `pixels` input pixels of c bytes (at src) into stripe columns (kc bytes apart, starting at
 * dst): VSTRB scatters of `per` pixels each, whose byte offsets (j / c) * kc + j % c are `so`. */
static inline void mcu_narrow_scatter_row(int8_t *dst, const int8_t *src, int32_t pixels, int32_t c, int32_t kc,
                                          int32_t per, uint8x16_t so)
{
    const int32_t bytes = pixels * c;
    const int32_t step = per * c;
    for (int32_t i = 0; i < bytes; i += step, dst += per * kc) {
        const int32_t left = bytes - i;
        const mve_pred16_t pr = vctp8q((uint32_t)(left < step ? left : step));
        vstrbq_scatter_offset_p_s8(dst, so, vldrbq_z_s8(src + i, pr), pr);
    }
}

/* The narrow path (mcu_mve_narrow_applies holds). */
static inline void mcu_mve_conv_narrow(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                       const int8_t *input, const int8_t *weight, const int32_t *bias,
                                       int8_t *output)
{
    _Alignas(16) int8_t stripe[MCU_NARROW_STRIPE];
    _Alignas(16) int8_t win[4 * 16 * MCU_NARROW_VECS_MAX];
    _Alignas(16) int8_t last[2 * 16 * MCU_NARROW_VECS_MAX];
    _Alignas(8) mcu_narrow_rq table[MCU_NARROW_OC_MAX];
    _Alignas(16) uint8_t gather[16 * MCU_NARROW_VECS_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t c = in.c;
    const int32_t kh = p->kernel_h;
    const int32_t kw = p->kernel_w;
    const int32_t kc = kh * c;           /* bytes of a stripe column */
    const int32_t n = kw * kc;           /* taps of a window */
    const int32_t vecs = (n + 15) / 16;
    const int32_t ps = p->stride_w * kc; /* stripe bytes from one pixel's window to the next */
    const int8_t zp = (int8_t)-p->input_offset;
    /* Pixels per stripe (>= 1: n <= 48 < MCU_NARROW_STRIPE). */
    const int32_t run = (MCU_NARROW_STRIPE / kc - kw) / p->stride_w + 1;
    /* Scatter offsets of a copy of input pixels into stripe columns: `per` pixels of c bytes each,
     * per * c <= 16 lanes and every offset <= 255 (kc <= 48). */
    int32_t per = 16 / c;
    while ((per - 1) * kc + c - 1 > 255) {
        --per;
    }
    _Alignas(16) uint8_t sbytes[16] = {0};
    for (int32_t j = 0; j < per * c; ++j) {
        sbytes[j] = (uint8_t)((j / c) * kc + j % c);
    }
    const uint8x16_t so8 = vldrbq_u8(sbytes);
    /* Window gather: tap t = (i * kw + j) * c + ch (weight order) is at (j * kh + i) * c + ch of the
     * window's columns in the stripe. */
    for (int32_t i = 0; i < kh; ++i) {
        for (int32_t j = 0; j < kw; ++j) {
            for (int32_t ch = 0; ch < c; ++ch) {
                gather[(i * kw + j) * c + ch] = (uint8_t)((j * kh + i) * c + ch);
            }
        }
    }
    for (int32_t t = n; t < 16 * MCU_NARROW_VECS_MAX; ++t) {
        gather[t] = 0;
    }
    const uint8x16_t g0 = vldrbq_u8(gather);
    const uint8x16_t g1 = vldrbq_u8(gather + 16);
    const uint8x16_t g2 = vldrbq_u8(gather + 32);
    const mve_pred16_t p0 = vctp8q((uint32_t)n);
    const mve_pred16_t p1 = vctp8q((uint32_t)(n > 16 ? n - 16 : 0));
    const mve_pred16_t p2 = vctp8q((uint32_t)(n > 32 ? n - 32 : 0));
    /* The loop reads 16 * vecs bytes from each weight row: the rows from which that would run past
     * the end of the weights (the last `tail`, fewer than 16 * vecs / n) go from a zero-padded copy. */
    int32_t tail = (16 * vecs + n - 1) / n - 1;
    tail = tail < out.c ? tail : out.c;
    mcu_mve_fill_s8(last, 0, (int32_t)sizeof last);
    mcu_mve_copy_s8(last, weight + (out.c - tail) * n, tail * n);
    for (int32_t k = 0; k < out.c; ++k) {
        const int8_t *w_oc = weight + k * n;
        int32_t sum = vaddvq_p_s8(vldrbq_z_s8(w_oc, p0), p0);
        sum = vaddvaq_p_s8(sum, vldrbq_z_s8(w_oc + 16, p1), p1);
        sum = vaddvaq_p_s8(sum, vldrbq_z_s8(w_oc + 32, p2), p2);
        const int32_t s = q->shift[k];
        const uint32_t b = bias != NULL ? (uint32_t)bias[k] : 0u;
        table[k].kb = mcu_u32_to_s32(b + (uint32_t)p->input_offset * (uint32_t)sum);
        table[k].m = q->multiplier[k];
        table[k].left = s > 0 ? s : 0;
        table[k].neg_right = s < 0 ? s : 0;
    }
    const int32x4_t lo = vdupq_n_s32(p->act_min - p->output_offset);
    const int32x4_t hi = vdupq_n_s32(p->act_max - p->output_offset);
    const int32x4_t off = vdupq_n_s32(p->output_offset);
    const uint32x4_t so = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)out.c);
    int8_t *y = output; /* the first pixel of the group being gathered */
    int32_t filled = 0;  /* pixels in it */
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + b * in.h * in.w * c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            const int rows_out = ih0 < 0 || ih0 + kh > in.h;
            for (int32_t ow0 = 0; ow0 < out.w; ow0 += run) {
                const int32_t pixels = out.w - ow0 < run ? out.w - ow0 : run;
                const int32_t cols = (pixels - 1) * p->stride_w + kw;
                const int32_t iw0 = ow0 * p->stride_w - p->pad_left;
                /* The stripe columns [lo_c, hi_c) lie inside the input row. */
                int32_t lo_c = iw0 < 0 ? -iw0 : 0;
                int32_t hi_c = in.w - iw0 < cols ? in.w - iw0 : cols;
                lo_c = lo_c < cols ? lo_c : cols;
                hi_c = hi_c > lo_c ? hi_c : lo_c;
                if (rows_out || lo_c > 0 || hi_c < cols) {
                    mcu_mve_fill_s8(stripe, zp, cols * kc);
                }
                for (int32_t i = 0; i < kh; ++i) {
                    const int32_t ih = ih0 + i;
                    if (ih >= 0 && ih < in.h && hi_c > lo_c) {
                        mcu_narrow_scatter_row(stripe + lo_c * kc + i * c, x_n + (ih * in.w + iw0 + lo_c) * c,
                                               hi_c - lo_c, c, kc, per, so8);
                    }
                }
                /* Groups of four pixels in memory order, across rows and images: a window is
                 * gathered as soon as its stripe is there, so no group is left partly empty
                 * at the end of a row. */
                for (int32_t j = 0; j < pixels; ++j) {
                    const int8_t *xs = stripe + j * ps;
                    int8_t *slot = win + 16 * filled;
                    vstrbq_s8(slot, vldrbq_gather_offset_z_s8(xs, g0, p0));
                    if (vecs > 1) {
                        vstrbq_s8(slot + 64, vldrbq_gather_offset_z_s8(xs, g1, p1));
                    }
                    if (vecs > 2) {
                        vstrbq_s8(slot + 128, vldrbq_gather_offset_z_s8(xs, g2, p2));
                    }
                    if (++filled == 4) {
                        mcu_narrow_groups(vecs, win, 4, out.c, tail, weight, last, n, table, y, lo, hi, off, so);
                        y += 4 * out.c;
                        filled = 0;
                    }
                }
            }
        }
    }
    if (filled > 0) {
        mcu_narrow_groups(vecs, win, filled, out.c, tail, weight, last, n, table, y, lo, hi, off, so);
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_CONV_NARROW_S8_H */
