/* Depthwise convolution (ch_mult 1, dilation 1) for cores with a 32-bit multiply only (the
 * Cortex-M0+: no DSP extension, no SMLAL), where the kernel's plain loop spends most of its
 * instructions on index arithmetic and window bounds per tap. Internal: static inline only;
 * MCU_S8_PLAIN_DW is 1 where it is compiled (common/plain_dot_s8.h's MCU_S8_PLAIN).
 *
 * A pixel whose window lies inside the input reads its taps at offsets that are the same for every
 * such pixel of an output row: a table built once per row holds, per tap, the input's and the weight's
 * byte offset from the window's first element of a channel, so a tap is two offset loads, two byte
 * loads, the input offset's add, a multiply and an add (the dot product unrolled by five). A pixel
 * near the left or right border gets a table of its taps inside the input, built once for all of its
 * channels. The row's input rows need not be one buffer, so the in-place kernel (upper rows in its
 * ring) runs the same rows. Pixels are computed in memory order, all channels of one before the next,
 * each written after its own reads: the window contract of the plain loop. */
#ifndef MCU_KERNELS_INTERNAL_DW_PLAIN_S8_H
#define MCU_KERNELS_INTERNAL_DW_PLAIN_S8_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/mve_s8.h"
#include "../common/plain_dot_s8.h"
#include "../common/plain_s8.h"
#include "../common/requant.h"
#include "../common/simd_s8.h"
#include "../common/window.h"

#define MCU_S8_PLAIN_DW MCU_S8_PLAIN

#if MCU_S8_PLAIN_DW

/* Largest window (kernel_h * kernel_w taps) of the table: 400 bytes of stack. */
#define MCU_S8_PLAIN_DW_TAPS 50

static inline int mcu_plain_dw_applies(int32_t kh, int32_t kw)
{
    return kh * kw <= MCU_S8_PLAIN_DW_TAPS;
}

/* sum over the table's taps of (x[tab[2t]] + off) * w[tab[2t + 1]], added to acc modulo 2^32. */
static inline uint32_t mcu_plain_dw_dot(const intptr_t *tab, int32_t taps, const int8_t *x, const int8_t *w,
                                        int32_t off, uint32_t acc)
{
#if defined(__ARM_ARCH_6M__) && defined(__OPTIMIZE__)
    /* Written in C, GCC runs short of low registers and moves every product through the high ones
     * (11 instructions a tap); here a tap is LDM of its two offsets, two LDRSB, the offset's ADDS, MULS
     * and ADDS, five taps a step. r4 and r5 are the temporaries, the operands take the other six low
     * registers, r7 among them: unoptimised builds keep r7 for the frame, so they take the C loop.
     * GCC hands ARMv6-M inline assembly over in divided syntax: the blocks say unified. */
    int32_t n5 = taps / 5, n1 = taps - 5 * (taps / 5);
#define MCU_PLAIN_DW_TAP                                                                      \
    "ldm %[t]!, {r4, r5}\n\t"                                                                  \
    "ldrsb r4, [%[x], r4]\n\t"                                                                \
    "ldrsb r5, [%[w], r5]\n\t"                                                                \
    "adds r4, r4, %[off]\n\t"                                                                 \
    "muls r4, r5, r4\n\t"                                                                     \
    "adds %[acc], %[acc], r4\n\t"
    if (n5 > 0) {
        __asm__ volatile(".syntax unified\n1:\n\t" MCU_PLAIN_DW_TAP MCU_PLAIN_DW_TAP MCU_PLAIN_DW_TAP MCU_PLAIN_DW_TAP
                             MCU_PLAIN_DW_TAP "subs %[n], %[n], #1\n\t"
                                              "bne 1b\n\t"
                         : [acc] "+l"(acc), [t] "+l"(tab), [n] "+l"(n5)
                         : [x] "l"(x), [w] "l"(w), [off] "l"(off)
                         : "r4", "r5", "cc", "memory");
    }
    if (n1 > 0) {
        __asm__ volatile(".syntax unified\n1:\n\t" MCU_PLAIN_DW_TAP "subs %[n], %[n], #1\n\t"
                                                    "bne 1b\n\t"
                         : [acc] "+l"(acc), [t] "+l"(tab), [n] "+l"(n1)
                         : [x] "l"(x), [w] "l"(w), [off] "l"(off)
                         : "r4", "r5", "cc", "memory");
    }
#undef MCU_PLAIN_DW_TAP
    return acc;
#else
    int32_t t = 0;
    for (; t + 5 <= taps; t += 5, tab += 10) {
        acc += (uint32_t)((x[tab[0]] + off) * w[tab[1]]);
        acc += (uint32_t)((x[tab[2]] + off) * w[tab[3]]);
        acc += (uint32_t)((x[tab[4]] + off) * w[tab[5]]);
        acc += (uint32_t)((x[tab[6]] + off) * w[tab[7]]);
        acc += (uint32_t)((x[tab[8]] + off) * w[tab[9]]);
    }
    for (; t < taps; ++t, tab += 2) {
        acc += (uint32_t)((x[tab[0]] + off) * w[tab[1]]);
    }
    return acc;
#endif
}

/* The table of kernel rows [i0, i1) and columns [j0, j1) of a window whose kernel row i starts at
 * rows[i] (the input row it reads, at the window's first column): per tap its input offset from tap
 * (i0, j0) and its weight offset; returns the number of taps. The rows need not be one buffer (the
 * in-place kernel reads its upper rows from a ring): a row's offset is the distance of the addresses,
 * which intptr_t holds on every target. */
static inline int32_t mcu_plain_dw_table(intptr_t *tab, const int8_t *const *rows, int32_t i0, int32_t i1, int32_t j0,
                                         int32_t j1, int32_t kw, int32_t ch)
{
    int32_t t = 0;
    for (int32_t i = i0; i < i1; ++i) {
        const intptr_t row = (intptr_t)((uintptr_t)rows[i] - (uintptr_t)rows[i0]);
        for (int32_t j = j0; j < j1; ++j, t += 2) {
            tab[t] = row + (intptr_t)((j - j0) * ch);
            tab[t + 1] = (intptr_t)((i * kw + j) * ch);
        }
    }
    return t / 2;
}

/* One output row of ch_mult 1, dilation 1 depthwise: rows[i] is the input row kernel row i reads (NULL
 * outside the image; the rows inside are consecutive kernel rows), out_w pixels at the given stride.
 * The table of the rows' whole windows is built once for the row; a pixel whose window crosses the
 * left or right border gets a table of its columns inside, built once for all of its channels. Pixels
 * in memory order, each pixel's channels in order, each output byte written after its own reads. */
static inline void mcu_plain_dw_row(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t in_w, int32_t out_w,
                                    int32_t stride, int32_t pad_left, int32_t ch, int32_t off, const int8_t *weight,
                                    const int32_t *bias, const mcu_per_channel_quant *q, int32_t output_offset,
                                    int32_t act_min, int32_t act_max, int8_t *y)
{
    intptr_t full[2 * MCU_S8_PLAIN_DW_TAPS], edge[2 * MCU_S8_PLAIN_DW_TAPS];
    int32_t i0 = 0, i1 = kh;
    while (i0 < kh && rows[i0] == NULL) {
        ++i0;
    }
    while (i1 > i0 && rows[i1 - 1] == NULL) {
        --i1;
    }
    const int32_t taps = mcu_plain_dw_table(full, rows, i0, i1, 0, kw, kw, ch);
    for (int32_t ow = 0; ow < out_w; ++ow, y += ch) {
        const int32_t iw0 = ow * stride - pad_left;
        int32_t kw_lo, kw_hi;
        mcu_window_taps(iw0, kw, 1, in_w, &kw_lo, &kw_hi);
        const int whole = kw_hi - kw_lo == kw;
        const int32_t nt = whole ? taps : mcu_plain_dw_table(edge, rows, i0, i1, kw_lo, kw_hi, kw, ch);
        const intptr_t *tab = whole ? full : edge;
        /* no taps: the dot product reads nothing, any pointer serves */
        const int8_t *x = nt > 0 ? rows[i0] + (iw0 + kw_lo) * ch : (const int8_t *)y;
        for (int32_t c = 0; c < ch; ++c) {
            const uint32_t acc =
                mcu_plain_dw_dot(tab, nt, x + c, weight + c, off, bias != NULL ? (uint32_t)bias[c] : 0u);
            y[c] = mcu_plain_rq_s8(mcu_u32_to_s32(acc), q->multiplier[c], q->shift[c], output_offset, act_min,
                                   act_max);
        }
    }
}

static inline void mcu_plain_dw_layer(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                      const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t kh = p->kernel_h, ch = in.c, row_bytes = in.w * in.c;
    const int8_t *rows[MCU_S8_PLAIN_DW_TAPS];
    int8_t *y = output;
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * row_bytes;
        for (int32_t oh = 0; oh < out.h; ++oh, y += out.w * ch) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t i = 0; i < kh; ++i) {
                const int32_t ih = ih0 + i;
                rows[i] = ih < 0 || ih >= in.h ? NULL : x_n + ih * row_bytes;
            }
            mcu_plain_dw_row(rows, kh, p->kernel_w, in.w, out.w, p->stride_w, p->pad_left, ch, p->input_offset, weight,
                             bias, q, p->output_offset, p->act_min, p->act_max, y);
        }
    }
}

#endif /* MCU_S8_PLAIN_DW */

#endif /* MCU_KERNELS_INTERNAL_DW_PLAIN_S8_H */
