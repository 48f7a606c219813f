/* Helium (MVE) convolution of layers with few input channels (1 to 4: the first layer of most
 * models), groups 1, dilation 1, windows of at most 48 taps. Internal: static inline only.
 *
 * Why a path of its own: with 9, 27 or 40 taps a window fills a 16-lane VMLADAVA badly and the
 * generic path (mcu_mve_im2col_s8, one fill or copy loop per kernel row per pixel) spends most of
 * its instructions gathering windows. Here:
 *  - a "stripe" holds, for a run of output pixels of one output row, the input columns they read
 *    in column-major order: column pc (input column ow0 * stride_w - pad_left + pc) as kernel_h
 *    rows of c bytes, padded taps holding the zero-point. A window is then kernel_w whole columns,
 *    kw * kh * c contiguous bytes at offset ow * stride_w * kh * c, in the order (kw, kh, c).
 *    Input rows go into the stripe with VSTRB scatters (one per up to 16 bytes), so a stripe costs
 *    a few instructions per kernel row rather than per pixel;
 *  - the weights: when all output channels' rows, padded to whole vectors, fit a stack buffer,
 *    they are reordered once per call to the stripe's (kw, kh, c) order and zero-padded, and the
 *    windows are read straight from the stripe ("stripe mode"; lanes past the taps meet zero
 *    weights). Otherwise ("gather mode") each window's taps are gathered in weight order (one
 *    VLDRB gather per 16, 8-bit offsets: at most 48 taps) into a small buffer, zero past the taps,
 *    and the weight rows are read from a stack copy of them all when it fits (MCU_NARROW_WCOPY),
 *    else in place (the last rows, from which whole vectors would run past the weights, from a
 *    zero-padded copy);
 *  - four output pixels in the lanes of one vector per output channel: four VMLADAVs per 16 taps
 *    share one weight load, and the requantization takes the channel's parameters as scalars from
 *    a per-call table (one pass over all output channels per group of four pixels, in assembly so
 *    that pointers and accumulators stay in registers). In gather mode the groups run across
 *    rows (in memory order), so no group is left partly empty at the end of a row; a partial
 *    group repeats its last pixel in the empty lanes, which store the same byte to the same place.
 * Bit-exactness: the int32 sums are the same products, modulo 2^32, on top of the folded biases
 * bias + input_offset * sum(w) (see mve_s8.h); padded taps hold -input_offset, whose term
 * (x + off) * w is 0; lanes past a window's taps meet zero weights (stripe mode) or hold zero
 * inputs (gather mode); the requantization is mcu_mve_requantize's, and the offset and clamp those of mcu_mve_matrix_block.
 * The window overlap contract: all inputs of a run of pixels are copied into the stripe before any
 * of their outputs is written (and a group that spans two runs has its windows gathered before
 * the second run's stripe is built), so the reads only move earlier. */
#ifndef MCU_KERNELS_INTERNAL_MVE_CONV_NARROW_S8_H
#define MCU_KERNELS_INTERNAL_MVE_CONV_NARROW_S8_H

#include <stdint.h>

#include "../common/mve_s8.h"

#if MCU_S8_MVE

#define MCU_NARROW_C_MAX 4
#define MCU_NARROW_VECS_MAX 3 /* windows of at most 48 taps */
#define MCU_NARROW_OC_MAX 64  /* output channels whose requantization table is on the stack */
/* One stack buffer for the weights (stripe mode: reordered and padded, out_c * 16 * vecs bytes;
 * gather mode: the padded copy of the last rows) and, after them, the stripe: runs of pixels
 * whose input columns take more than the rest go in several stripes. */
#define MCU_NARROW_BUF 1152
#define MCU_NARROW_WBUF 768 /* at most this much of it for weights */
/* Gather mode: all weight rows (out_c * taps bytes) and the whole-vector reads' zero slack past the
 * last one, copied to the stack when they fit, so that the groups read them from there rather than
 * once per four pixels from wherever the model's constants live (a flash with wait states on every
 * access on some boards): DS-CNN's first layer, 64 x 40 taps. */
#define MCU_NARROW_WCOPY (64 * 40 + 16 * MCU_NARROW_VECS_MAX)

/* One output channel as the assembly loop loads it. */
typedef struct {
    const int8_t *w;   /* weight row, 16 * vecs bytes readable */
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

/* All output channels (`channels` > 0, table t) of a group of four pixels whose windows start at
 * x0..x3 (16 * K bytes read from each; lanes past the taps are zero in the window or in the
 * weights): lane j of channel oc goes to y[so[j] + oc]. lo/hi: the clamp minus the output offset,
 * off: the output offset (the offset and clamp of mcu_mve_matrix_block); the requantization is
 * mcu_mve_requantize's, its rounding fixup y + (y >> 31) for negative shifts written as a
 * multiply-accumulate by (neg_right < 0) = neg_right >> 31 (logical). S = 1 when every shift is
 * negative: no left shift (VQSHL by 0) and the fixup always applies (a plain add). One low-overhead
 * loop over the channels. */
#define MCU_NARROW_GROUP_ASM(K, S)                                                                                     \
    __asm__ volatile("   dls lr, %[a0]\n"                                                                              \
                     "1: ldr %[w], [%[t]], #4\n"                                                                       \
                     "   vldrb.u8 q1, [%[w]]\n"                                                                        \
                     "   vldrb.u8 q0, [%[x0]]\n"                                                                       \
                     "   vmladav.s8 %[a0], q0, q1\n"                                                                   \
                     "   vldrb.u8 q0, [%[x1]]\n"                                                                       \
                     "   vmladav.s8 %[a1], q0, q1\n"                                                                   \
                     "   vldrb.u8 q0, [%[x2]]\n"                                                                       \
                     "   vmladav.s8 %[a2], q0, q1\n"                                                                   \
                     "   vldrb.u8 q0, [%[x3]]\n"                                                                       \
                     "   vmladav.s8 %[a3], q0, q1\n"                                                                   \
                     "   .if " #K " >= 2\n"                                                                            \
                     "   vldrb.u8 q1, [%[w], #16]\n"                                                                   \
                     "   vldrb.u8 q0, [%[x0], #16]\n"                                                                  \
                     "   vmladava.s8 %[a0], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x1], #16]\n"                                                                  \
                     "   vmladava.s8 %[a1], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x2], #16]\n"                                                                  \
                     "   vmladava.s8 %[a2], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x3], #16]\n"                                                                  \
                     "   vmladava.s8 %[a3], q0, q1\n"                                                                  \
                     "   .endif\n"                                                                                     \
                     "   .if " #K " >= 3\n"                                                                            \
                     "   vldrb.u8 q1, [%[w], #32]\n"                                                                   \
                     "   vldrb.u8 q0, [%[x0], #32]\n"                                                                  \
                     "   vmladava.s8 %[a0], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x1], #32]\n"                                                                  \
                     "   vmladava.s8 %[a1], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x2], #32]\n"                                                                  \
                     "   vmladava.s8 %[a2], q0, q1\n"                                                                  \
                     "   vldrb.u8 q0, [%[x3], #32]\n"                                                                  \
                     "   vmladava.s8 %[a3], q0, q1\n"                                                                  \
                     "   .endif\n"                                                                                     \
                     "   vmov q2[2], q2[0], %[a0], %[a2]\n"                                                            \
                     "   vmov q2[3], q2[1], %[a1], %[a3]\n"                                                            \
                     "   ldrd %[a0], %[a1], [%[t]], #8\n"                                                              \
                     "   ldrd %[a2], %[a3], [%[t]], #8\n"                                                              \
                     "   vadd.i32 q2, q2, %[a0]\n"                                                                     \
                     "   .if " #S " == 0\n"                                                                            \
                     "   vqshl.s32 q2, %[a2]\n"                                                                        \
                     "   .endif\n"                                                                                     \
                     "   vqrdmulh.s32 q2, q2, %[a1]\n"                                                                 \
                     "   vshr.s32 q3, q2, #31\n"                                                                       \
                     "   .if " #S " == 0\n"                                                                            \
                     "   lsrs %[a0], %[a3], #31\n"                                                                     \
                     "   vmla.s32 q2, q3, %[a0]\n"                                                                     \
                     "   .else\n"                                                                                      \
                     "   vadd.i32 q2, q2, q3\n"                                                                        \
                     "   .endif\n"                                                                                     \
                     "   vrshl.s32 q2, %[a3]\n"                                                                        \
                     "   vmax.s32 q2, q2, %q[lo]\n"                                                                    \
                     "   vmin.s32 q2, q2, %q[hi]\n"                                                                    \
                     "   vadd.i32 q2, q2, %q[off]\n"                                                                   \
                     "   vstrb.32 q2, [%[y], %q[so]]\n"                                                                \
                     "   add %[y], %[y], #1\n"                                                                         \
                     "   le lr, 1b\n"                                                                                  \
                     : [a0] "+Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [w] "=&r"(w), [t] "+r"(t), \
                       [y] "+r"(y)                                                                                     \
                     : [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2), [x3] "r"(x3), [lo] "w"(lo), [hi] "w"(hi),            \
                       [off] "w"(off), [so] "w"(so)                                                                    \
                     : "q0", "q1", "q2", "q3", "lr", "cc", "memory")

static inline __attribute__((always_inline)) void
mcu_narrow_group(int32_t vecs, int simple, const int8_t *x0, const int8_t *x1, const int8_t *x2, const int8_t *x3,
                 int32_t channels, const mcu_narrow_rq *t, int8_t *y, int32x4_t lo, int32x4_t hi, int32x4_t off,
                 uint32x4_t so)
{
    int32_t a0 = channels; /* the loop count, then an accumulator */
    int32_t a1, a2, a3;
    const int8_t *w;
    if (simple && vecs == 1) {
        MCU_NARROW_GROUP_ASM(1, 1);
    } else if (simple && vecs == 2) {
        MCU_NARROW_GROUP_ASM(2, 1);
    } else if (simple) {
        MCU_NARROW_GROUP_ASM(3, 1);
    } else if (vecs == 1) {
        MCU_NARROW_GROUP_ASM(1, 0);
    } else if (vecs == 2) {
        MCU_NARROW_GROUP_ASM(2, 0);
    } else {
        MCU_NARROW_GROUP_ASM(3, 0);
    }
}

/* mcu_narrow_group out of line for `count` (1 to 4) windows xs[0 .. count): the empty lanes repeat
 * the last window and store to its place. */
static __attribute__((noinline)) void mcu_narrow_group_call(int32_t vecs, const int8_t *const *xs, int32_t count,
                                                            int32_t channels, const mcu_narrow_rq *t, int8_t *y,
                                                            int32x4_t lo, int32x4_t hi, int32x4_t off, uint32x4_t so)
{
    if (count < 4) {
        so = vminq_u32(so, vdupq_n_u32((uint32_t)((count - 1) * channels)));
    }
    mcu_narrow_group(vecs, 0, xs[0], xs[count > 1 ? 1 : count - 1], xs[count > 2 ? 2 : count - 1], xs[count - 1],
                     channels, t, y, lo, hi, off, so);
}

/* Copies `pixels` input pixels of c bytes (at src) into stripe columns (kc bytes apart, starting at
 * dst): VSTRB scatters of `per` pixels (step = per * c bytes) each, lane j to byte offset
 * (j / c) * kc + j % c (`so`). `full`: so holds that offset for all 16 lanes (it fits 8 bits), so
 * while 16 bytes remain a chunk goes unpredicated: the lanes past `step` (c == 3: lane 15) write
 * the next chunk's first bytes, which that chunk writes again with the same values. The rest goes
 * predicated. */
static inline void mcu_narrow_scatter_row(int8_t *dst, const int8_t *src, int32_t pixels, int32_t c, int32_t kc,
                                          int32_t per, int full, uint8x16_t so)
{
    const int32_t bytes = pixels * c;
    const int32_t step = per * c;
    const int32_t dstep = per * kc;
    int32_t i = 0;
    if (full && bytes >= 16) {
        const int32_t chunks = (bytes - 16) / step + 1;
        i = chunks * step;
        const int8_t *s = src;
        int8_t *d = dst;
        __asm__ volatile("   dls lr, %[k]\n"
                         "1: vldrb.u8 q0, [%[s]]\n"
                         "   vstrb.8 q0, [%[d], %q[so]]\n"
                         "   add %[s], %[s], %[step]\n"
                         "   add %[d], %[d], %[dstep]\n"
                         "   le lr, 1b\n"
                         : [s] "+r"(s), [d] "+r"(d)
                         : [k] "r"(chunks), [step] "r"(step), [dstep] "r"(dstep), [so] "w"(so)
                         : "q0", "lr", "memory");
        dst += chunks * dstep;
    }
    for (; i < bytes; i += step, dst += dstep) {
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
    /* (and the stripe's slack: stripe mode reads whole vectors from a run's last window, fewer
     * than 16 bytes past its taps) */
    _Alignas(16) int8_t buf[MCU_NARROW_BUF + 16];
    _Alignas(16) int8_t win[4 * 16 * MCU_NARROW_VECS_MAX];
    _Alignas(8) mcu_narrow_rq table[MCU_NARROW_OC_MAX];
    _Alignas(16) uint8_t order[16 * MCU_NARROW_VECS_MAX];
    _Alignas(16) int8_t wcopy[MCU_NARROW_WCOPY];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t c = in.c;
    const int32_t kh = p->kernel_h;
    const int32_t kw = p->kernel_w;
    const int32_t kc = kh * c;           /* bytes of a stripe column */
    const int32_t n = kw * kc;           /* taps of a window */
    const int32_t vecs = (n + 15) / 16;
    const int32_t ps = p->stride_w * kc; /* stripe bytes from one pixel's window to the next */
    const int stripe_mode = out.c * 16 * vecs <= MCU_NARROW_WBUF;
    const int8_t zp = (int8_t)-p->input_offset;
    int8_t *wbuf = buf;
    int8_t *stripe = buf + (stripe_mode ? out.c * 16 * vecs : 2 * 16 * MCU_NARROW_VECS_MAX);
    const int32_t room = (int32_t)(buf + MCU_NARROW_BUF - stripe); /* >= 384 */
    /* Pixels per stripe (>= 1: n <= 48 < room). */
    const int32_t run = (room / kc - kw) / p->stride_w + 1;
    /* Scatter offsets of a copy of input pixels into stripe columns: `per` pixels of c bytes each,
     * per * c <= 16 lanes and every offset <= 255 (kc <= 48). */
    int32_t per = 16 / c;
    while ((per - 1) * kc + c - 1 > 255) {
        --per;
    }
    const int full = per == 16 / c && (15 / c) * kc + 15 % c <= 255;
    _Alignas(16) uint8_t sbytes[16] = {0};
    for (int32_t j = 0; j < (full ? 16 : per * c); ++j) {
        sbytes[j] = (uint8_t)((j / c) * kc + j % c);
    }
    const uint8x16_t so8 = vldrbq_u8(sbytes);
    /* Tap (i, j, ch) is byte (i * kw + j) * c + ch of a weight row and (j * kh + i) * c + ch of a
     * window in the stripe. Stripe mode gathers the weights in stripe order, gather mode the
     * windows in weight order. */
    for (int32_t t = 0; t < 16 * MCU_NARROW_VECS_MAX; ++t) {
        order[t] = 0;
    }
    for (int32_t i = 0; i < kh; ++i) {
        for (int32_t j = 0; j < kw; ++j) {
            for (int32_t ch = 0; ch < c; ++ch) {
                const int32_t wi = (i * kw + j) * c + ch;
                const int32_t si = (j * kh + i) * c + ch;
                order[stripe_mode ? si : wi] = (uint8_t)(stripe_mode ? wi : si);
            }
        }
    }
    const uint8x16_t g0 = vldrbq_u8(order);
    const uint8x16_t g1 = vldrbq_u8(order + 16);
    const uint8x16_t g2 = vldrbq_u8(order + 32);
    const mve_pred16_t p0 = vctp8q((uint32_t)n);
    const mve_pred16_t p1 = vctp8q((uint32_t)(n > 16 ? n - 16 : 0));
    const mve_pred16_t p2 = vctp8q((uint32_t)(n > 32 ? n - 32 : 0));
    /* Gather mode reads 16 * vecs bytes of each weight row in place; the last `tail` rows, from
     * which that would run past the weights, come from a zero-padded copy (in wbuf). */
    const int copied = !stripe_mode && out.c * n + 16 * vecs <= MCU_NARROW_WCOPY;
    if (copied) {
        mcu_mve_copy_s8(wcopy, weight, out.c * n);
        mcu_mve_fill_s8(wcopy + out.c * n, 0, 16 * vecs);
        weight = wcopy;
    }
    int32_t tail = stripe_mode || copied ? 0 : (16 * vecs + n - 1) / n - 1;
    tail = tail < out.c ? tail : out.c;
    if (!stripe_mode && !copied) {
        mcu_mve_fill_s8(wbuf, 0, 2 * 16 * MCU_NARROW_VECS_MAX);
        mcu_mve_copy_s8(wbuf, weight + (out.c - tail) * n, tail * n);
    }
    int simple = 1; /* every shift negative (the usual case): no left shift, the fixup always applies */
    for (int32_t k = 0; k < out.c; ++k) {
        const int8_t *w_oc = weight + k * n;
        int32_t sum = vaddvq_p_s8(vldrbq_z_s8(w_oc, p0), p0);
        sum = vaddvaq_p_s8(sum, vldrbq_z_s8(w_oc + 16, p1), p1);
        sum = vaddvaq_p_s8(sum, vldrbq_z_s8(w_oc + 32, p2), p2);
        if (stripe_mode) {
            int8_t *row = wbuf + k * 16 * vecs;
            vstrbq_s8(row, vldrbq_gather_offset_z_s8(w_oc, g0, p0));
            if (vecs > 1) {
                vstrbq_s8(row + 16, vldrbq_gather_offset_z_s8(w_oc, g1, p1));
            }
            if (vecs > 2) {
                vstrbq_s8(row + 32, vldrbq_gather_offset_z_s8(w_oc, g2, p2));
            }
            table[k].w = row;
        } else {
            table[k].w = k < out.c - tail ? w_oc : wbuf + (k - (out.c - tail)) * n;
        }
        const int32_t s = q->shift[k];
        const uint32_t b = bias != NULL ? (uint32_t)bias[k] : 0u;
        table[k].kb = mcu_u32_to_s32(b + (uint32_t)p->input_offset * (uint32_t)sum);
        table[k].m = q->multiplier[k];
        table[k].left = s > 0 ? s : 0;
        table[k].neg_right = s < 0 ? s : 0;
        simple &= s < 0;
    }
    /* Stripe mode's whole-vector reads past a run's last window meet zero weights; the bytes are
     * set once so that none is uninitialized. */
    mcu_mve_fill_s8(stripe, 0, room + 16);
    const int32x4_t lo = vdupq_n_s32(p->act_min - p->output_offset);
    const int32x4_t hi = vdupq_n_s32(p->act_max - p->output_offset);
    const int32x4_t off = vdupq_n_s32(p->output_offset);
    const uint32x4_t so = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)out.c);
    const int8_t *xs[4];
    int8_t *y = output; /* the first pixel of the group being gathered */
    int32_t filled = 0; /* pixels in it */
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
                                               hi_c - lo_c, c, kc, per, full, so8);
                    }
                }
                if (stripe_mode) {
                    /* The windows live only as long as the stripe: groups within the run. */
                    int8_t *yr = output + ((b * out.h + oh) * out.w + ow0) * out.c;
                    const int8_t *xr = stripe;
                    int32_t g = 0;
                    for (; g + 4 <= pixels; g += 4, xr += 4 * ps, yr += 4 * out.c) {
                        mcu_narrow_group(vecs, simple, xr, xr + ps, xr + 2 * ps, xr + 3 * ps, out.c, table, yr, lo,
                                         hi, off, so);
                    }
                    if (g < pixels) {
                        const int8_t *const xl[3] = {xr, xr + ps, xr + 2 * ps};
                        mcu_narrow_group_call(vecs, xl, pixels - g, out.c, table, yr, lo, hi, off, so);
                    }
                    continue;
                }
                for (int32_t j = 0; j < pixels; ++j) {
                    const int8_t *xw = stripe + j * ps;
                    int8_t *slot = win + 16 * MCU_NARROW_VECS_MAX * filled;
                    vstrbq_s8(slot, vldrbq_gather_offset_z_s8(xw, g0, p0));
                    if (vecs > 1) {
                        vstrbq_s8(slot + 16, vldrbq_gather_offset_z_s8(xw, g1, p1));
                    }
                    if (vecs > 2) {
                        vstrbq_s8(slot + 32, vldrbq_gather_offset_z_s8(xw, g2, p2));
                    }
                    xs[filled++] = slot;
                    if (filled == 4) {
                        mcu_narrow_group_call(vecs, xs, 4, out.c, table, y, lo, hi, off, so);
                        y += 4 * out.c;
                        filled = 0;
                    }
                }
            }
        }
    }
    if (filled > 0) {
        mcu_narrow_group_call(vecs, xs, filled, out.c, table, y, lo, hi, off, so);
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_CONV_NARROW_S8_H */
