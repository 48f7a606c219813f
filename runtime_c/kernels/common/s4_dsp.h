/* The dual 16-bit MAC path of the 4-bit weight convolution and fully connected kernels (MCU_S8_DSP:
 * Cortex-M4/M7/M33/M55, emulated on the host). Internal: static inline only.
 *
 * One 32-bit load brings 8 weights of a row (two a byte, low nibble first). Masked with 0xF0F0F0F0,
 * as it is and shifted left by 4, every nibble sits in the top of its own byte, so SXTB16 and SXTB16
 * ror 8 widen them to the 16-bit pairs 16 * (w0, w4), (w1, w5), (w2, w6), (w3, w7), with no shift of a
 * signed value. Columns (the (x + input_offset) values one output reads, padded taps 0) hold each
 * group of 8 taps in that pair order (mcu_s4_col_index); a tail of n % 8 taps stays in natural order
 * and is read one weight at a time. The sums of 16 * w * x are exact (|x| <= 255, |w| <= 8 and at
 * most MCU_S8_COL_MAX taps keep them far inside int32), so an arithmetic shift by 4 returns the sum
 * of w * x. Rows start on a byte (n even). */
#ifndef MCU_KERNELS_INTERNAL_S4_DSP_H
#define MCU_KERNELS_INTERNAL_S4_DSP_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "s4.h"
#include "simd_s8.h"

#if MCU_S8_DSP

/* Where tap i of a window of n taps sits in its column. */
static inline int32_t mcu_s4_col_index(int32_t i, int32_t n)
{
    if (i >= (n & ~7)) {
        return i;
    }
    const int32_t r = i & 7;
    return (i & ~7) + ((r & 3) << 1) + (r >> 2);
}

/* (x + off) of 8 int8 values (off2: off in both halves) as the column group of tap pairs (x0, x4), (x1, x5),
 * (x2, x6), (x3, x7). */
static inline void mcu_s4_expand8(const int8_t *x, uint32_t off2, int16_t *col)
{
    const uint32_t v0 = mcu_load_u32(x), v1 = mcu_load_u32(x + 4);
    const uint32_t e0 = mcu_sxtab16(off2, v0), o0 = mcu_sxtab16_ror8(off2, v0); /* (x0, x2), (x1, x3) */
    const uint32_t e1 = mcu_sxtab16(off2, v1), o1 = mcu_sxtab16_ror8(off2, v1); /* (x4, x6), (x5, x7) */
    mcu_store_u32(col, (e0 & 0xFFFFu) | (e1 << 16));
    mcu_store_u32(col + 2, (o0 & 0xFFFFu) | (o1 << 16));
    mcu_store_u32(col + 4, (e0 >> 16) | (e1 & 0xFFFF0000u));
    mcu_store_u32(col + 6, (o0 >> 16) | (o1 & 0xFFFF0000u));
}

/* A 32-bit load kept in program order on the core: the compiler would otherwise hoist every load of the
 * loop body ahead of the multiply-accumulates and spill what does not fit the registers. */
static inline uint32_t mcu_s4_load(const void *p)
{
#if MCU_S8_DSP_NATIVE
    uint32_t v;
    __asm__ volatile("ldr %0, %1" : "=r"(v) : "m"(*(const uint32_t *)p));
    return v;
#else
    return mcu_load_u32(p);
#endif
}

/* acc[0..1] += (ca.w, cb.w) over n taps; w is a packed row read from a byte. One channel and two pixels
 * a step: the weights are widened once for both pixels, and the loop's values fit the core's registers
 * (not inlined, so that the caller's values do not crowd them out of registers). */
static __attribute__((noinline)) void mcu_s4_dot_2px(const int16_t *ca, const int16_t *cb, const int8_t *w, int32_t n,
                                                     uint32_t acc[2])
{
    uint32_t a0 = 0, a1 = 0; /* 16 times the sums */
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint32_t v = mcu_s4_load(w + (i >> 1));
        const uint32_t lo = 0xF0F0F0F0u & (v << 4), hi = 0xF0F0F0F0u & v;
        const uint32_t w04 = mcu_sxtb16(lo), w15 = mcu_sxtb16(hi);
        a0 = mcu_smlad(mcu_s4_load(ca + i), w04, a0);
        a1 = mcu_smlad(mcu_s4_load(cb + i), w04, a1);
        a0 = mcu_smlad(mcu_s4_load(ca + i + 2), w15, a0);
        a1 = mcu_smlad(mcu_s4_load(cb + i + 2), w15, a1);
        const uint32_t w26 = mcu_sxtb16_ror8(lo), w37 = mcu_sxtb16_ror8(hi);
        a0 = mcu_smlad(mcu_s4_load(ca + i + 4), w26, a0);
        a1 = mcu_smlad(mcu_s4_load(cb + i + 4), w26, a1);
        a0 = mcu_smlad(mcu_s4_load(ca + i + 6), w37, a0);
        a1 = mcu_smlad(mcu_s4_load(cb + i + 6), w37, a1);
    }
    uint32_t t0 = acc[0] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a0), 4);
    uint32_t t1 = acc[1] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a1), 4);
    for (; i < n; ++i) {
        const int32_t k = mcu_s4_at(w, i);
        t0 += (uint32_t)(ca[i] * k);
        t1 += (uint32_t)(cb[i] * k);
    }
    acc[0] = t0;
    acc[1] = t1;
}

/* The row of the channel after a row's: its pixels' columns are MCU_S8_COL_MAX values apart. */
#define MCU_S4_PIXEL_B MCU_S8_COL_MAX

/* acc[0..3] += (ca.wa, ca.wb, cb.wa, cb.wb) over n taps, cb = ca + MCU_S4_PIXEL_B (a constant offset,
 * which leaves a register to the loop); wa and wb are packed rows read from a byte. Two channels times two
 * pixels a step: each column word serves both channels and each widened weight pair both pixels. */
static __attribute__((noinline)) void mcu_s4_dot_2x2(const int16_t *ca, const int8_t *wa, const int8_t *wb,
                                                     int32_t n, uint32_t acc[4])
{
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0; /* 16 times the sums */
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint32_t va = mcu_s4_load(wa + (i >> 1));
        const uint32_t la = 0xF0F0F0F0u & (va << 4), ha = 0xF0F0F0F0u & va;
        const uint32_t vb = mcu_s4_load(wb + (i >> 1));
        const uint32_t lb = 0xF0F0F0F0u & (vb << 4), hb = 0xF0F0F0F0u & vb;
        uint32_t x = mcu_s4_load(ca + i), y = mcu_s4_load(ca + MCU_S4_PIXEL_B + i);
        uint32_t w = mcu_sxtb16(la);
        a0 = mcu_smlad(x, w, a0);
        a2 = mcu_smlad(y, w, a2);
        w = mcu_sxtb16(lb);
        a1 = mcu_smlad(x, w, a1);
        a3 = mcu_smlad(y, w, a3);
        x = mcu_s4_load(ca + i + 2);
        y = mcu_s4_load(ca + MCU_S4_PIXEL_B + i + 2);
        w = mcu_sxtb16(ha);
        a0 = mcu_smlad(x, w, a0);
        a2 = mcu_smlad(y, w, a2);
        w = mcu_sxtb16(hb);
        a1 = mcu_smlad(x, w, a1);
        a3 = mcu_smlad(y, w, a3);
        x = mcu_s4_load(ca + i + 4);
        y = mcu_s4_load(ca + MCU_S4_PIXEL_B + i + 4);
        w = mcu_sxtb16_ror8(la);
        a0 = mcu_smlad(x, w, a0);
        a2 = mcu_smlad(y, w, a2);
        w = mcu_sxtb16_ror8(lb);
        a1 = mcu_smlad(x, w, a1);
        a3 = mcu_smlad(y, w, a3);
        x = mcu_s4_load(ca + i + 6);
        y = mcu_s4_load(ca + MCU_S4_PIXEL_B + i + 6);
        w = mcu_sxtb16_ror8(ha);
        a0 = mcu_smlad(x, w, a0);
        a2 = mcu_smlad(y, w, a2);
        w = mcu_sxtb16_ror8(hb);
        a1 = mcu_smlad(x, w, a1);
        a3 = mcu_smlad(y, w, a3);
    }
    uint32_t t0 = acc[0] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a0), 4);
    uint32_t t1 = acc[1] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a1), 4);
    uint32_t t2 = acc[2] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a2), 4);
    uint32_t t3 = acc[3] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a3), 4);
    const int16_t *cb = ca + MCU_S4_PIXEL_B;
    for (; i < n; ++i) {
        const int32_t ka = mcu_s4_at(wa, i), kb = mcu_s4_at(wb, i);
        t0 += (uint32_t)(ca[i] * ka);
        t1 += (uint32_t)(ca[i] * kb);
        t2 += (uint32_t)(cb[i] * ka);
        t3 += (uint32_t)(cb[i] * kb);
    }
    acc[0] = t0;
    acc[1] = t1;
    acc[2] = t2;
    acc[3] = t3;
}

/* acc[0..1] += (c.wa, c.wb) over n taps: two channels of one pixel (a fully connected layer's single row). */
static __attribute__((noinline)) void mcu_s4_dot_2ch(const int16_t *c, const int8_t *wa, const int8_t *wb,
                                                     int32_t n, uint32_t acc[2])
{
    uint32_t a0 = 0, a1 = 0; /* 16 times the sums */
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint32_t va = mcu_s4_load(wa + (i >> 1));
        const uint32_t la = 0xF0F0F0F0u & (va << 4), ha = 0xF0F0F0F0u & va;
        const uint32_t vb = mcu_s4_load(wb + (i >> 1));
        const uint32_t lb = 0xF0F0F0F0u & (vb << 4), hb = 0xF0F0F0F0u & vb;
        uint32_t x = mcu_s4_load(c + i);
        a0 = mcu_smlad(x, mcu_sxtb16(la), a0);
        a1 = mcu_smlad(x, mcu_sxtb16(lb), a1);
        x = mcu_s4_load(c + i + 2);
        a0 = mcu_smlad(x, mcu_sxtb16(ha), a0);
        a1 = mcu_smlad(x, mcu_sxtb16(hb), a1);
        x = mcu_s4_load(c + i + 4);
        a0 = mcu_smlad(x, mcu_sxtb16_ror8(la), a0);
        a1 = mcu_smlad(x, mcu_sxtb16_ror8(lb), a1);
        x = mcu_s4_load(c + i + 6);
        a0 = mcu_smlad(x, mcu_sxtb16_ror8(ha), a0);
        a1 = mcu_smlad(x, mcu_sxtb16_ror8(hb), a1);
    }
    uint32_t t0 = acc[0] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a0), 4);
    uint32_t t1 = acc[1] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a1), 4);
    for (; i < n; ++i) {
        t0 += (uint32_t)(c[i] * mcu_s4_at(wa, i));
        t1 += (uint32_t)(c[i] * mcu_s4_at(wb, i));
    }
    acc[0] = t0;
    acc[1] = t1;
}

/* One packed row (from a byte, whole groups of 8 taps) against the columns of 4 output pixels interleaved by
 * groups of 8 taps ([group][pixel][8 int16], each group in the pair order above): 16 times the 4 dot
 * products. One load and 7 instructions widen 8 weights for all 4 pixels, and each pixel's 4 column words of
 * the group come in one LDM: 31 instructions per 32 MACs. The columns are followed by the sentinel word
 * 0x80008000, which no column word is (its halves are x + input_offset, within [-255, 255]), and one word
 * the assembly keeps r7 in (every other register holds a value of the loop; a frame pointer in r7 stays
 * untouched outside the assembly, and nothing inside addresses memory through it). groups >= 1. */
#define MCU_S4_QUAD_SENTINEL 0x80008000u
#if MCU_S8_DSP_NATIVE
#define MCU_S4_QUAD_PIXEL(acc)                                                                            \
    "ldmia r4!, {r7, r11, r12, lr}\n\t"                                                                   \
    "smlad " acc ", r7, r6, " acc "\n\t"                                                                  \
    "smlad " acc ", r11, r8, " acc "\n\t"                                                                 \
    "smlad " acc ", r12, r9, " acc "\n\t"                                                                 \
    "smlad " acc ", lr, r10, " acc "\n\t"
#endif
static inline void mcu_s4_dot_quad(const int16_t *col, const int8_t *w, int32_t groups, uint32_t acc[4])
{
#if MCU_S8_DSP_NATIVE
    register uint32_t a0 __asm__("r0") = 0;
    register uint32_t a1 __asm__("r1") = 0;
    register uint32_t a2 __asm__("r2") = 0;
    register uint32_t a3 __asm__("r3") = 0;
    register const int16_t *x __asm__("r4") = col;
    register const int8_t *wp __asm__("r5") = w;
    register uint32_t *keep __asm__("r6") = (uint32_t *)(void *)(col + 32 * groups) + 1;
    __asm__ volatile(
        "str r7, [r6]\n\t"
        "1:\n\t"
        "ldr r10, [r5], #4\n\t"
        "lsl r9, r10, #4\n\t"
        "and r9, r9, #0xF0F0F0F0\n\t"
        "and r10, r10, #0xF0F0F0F0\n\t"
        "sxtb16 r6, r9\n\t"
        "sxtb16 r8, r10\n\t"
        "sxtb16 r9, r9, ror #8\n\t"
        "sxtb16 r10, r10, ror #8\n\t"
        MCU_S4_QUAD_PIXEL("r0") MCU_S4_QUAD_PIXEL("r1") MCU_S4_QUAD_PIXEL("r2") MCU_S4_QUAD_PIXEL("r3")
        "ldr r6, [r4]\n\t"
        "cmp r6, #0x80008000\n\t"
        "bne 1b\n\t"
        "ldr r7, [r4, #4]\n\t"
        : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(x), "+r"(wp), "+r"(keep)
        :
        : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    const uint32_t sums[4] = {a0, a1, a2, a3};
#else
    uint32_t sums[4] = {0, 0, 0, 0};
    for (int32_t g = 0; g < groups; ++g) {
        const uint32_t v = mcu_load_u32(w + 4 * g);
        const uint32_t lo = 0xF0F0F0F0u & (v << 4), hi = 0xF0F0F0F0u & v;
        const uint32_t wk[4] = {mcu_sxtb16(lo), mcu_sxtb16(hi), mcu_sxtb16_ror8(lo), mcu_sxtb16_ror8(hi)};
        for (int32_t px = 0; px < 4; ++px) {
            for (int32_t k = 0; k < 4; ++k) {
                sums[px] = mcu_smlad(mcu_load_u32(col + (4 * g + px) * 8 + 2 * k), wk[k], sums[px]);
            }
        }
    }
#endif
    for (int32_t px = 0; px < 4; ++px) {
        acc[px] += (uint32_t)mcu_asr32(mcu_u32_to_s32(sums[px]), 4);
    }
}

/* Three packed rows (row stride `stride` bytes, from a byte, whole groups of 8 taps) against one column in the
 * pair order above: 4096 times the 3 dot products. AND with 0xF000F000 of the word shifted left by 12, 8, 4 and
 * 0 bits puts the signed nibbles of the pairs (w0, w4), (w1, w5), (w2, w6), (w3, w7) in the tops of the 16-bit
 * lanes, 4096 w each, so a row's 8 taps take a load and 4 AND-SMLAD pairs, with no sign fix-up and no
 * correction term; the column's 4 words of a group come in one LDM for the 3 rows, and the loop runs two
 * groups a turn (an odd count enters at its second half): 58 instructions per 48 MACs. A sum of 4096 w x stays
 * inside int32 for at most MCU_S4_ROWS3_GROUPS groups (256 taps, |x| <= 255, |w| <= 8: 4096 * 522,240 < 2^31),
 * so longer rows are taken in chunks. 1 <= groups <= MCU_S4_ROWS3_GROUPS. Always inlined: with two call sites
 * GCC makes it a function, whose call and register saves cost about 15 instructions a pass. */
#define MCU_S4_ROWS3_GROUPS 32
#if MCU_S8_DSP_NATIVE
#define MCU_S4_ROW3(acc, load)                                                                            \
    load                                                                                                  \
    "and r9, r8, r10, lsl #12\n\t"                                                                        \
    "smlad " acc ", r7, r9, " acc "\n\t"                                                                  \
    "and r9, r8, r10, lsl #8\n\t"                                                                         \
    "smlad " acc ", r11, r9, " acc "\n\t"                                                                 \
    "and r9, r8, r10, lsl #4\n\t"                                                                         \
    "smlad " acc ", r12, r9, " acc "\n\t"                                                                 \
    "and r9, r8, r10\n\t"                                                                                 \
    "smlad " acc ", lr, r9, " acc "\n\t"
#define MCU_S4_GROUP3                                                                                     \
    "ldmia r4!, {r7, r11, r12, lr}\n\t"                                                                   \
    MCU_S4_ROW3("r1", "ldr r10, [r5, r6]\n\t")                                                            \
    MCU_S4_ROW3("r2", "ldr r10, [r5, r6, lsl #1]\n\t")                                                    \
    MCU_S4_ROW3("r0", "ldr r10, [r5], #4\n\t")
#endif
static inline __attribute__((always_inline)) void mcu_s4_dot_rows3(const int16_t *col, const int8_t *w,
                                                                   int32_t stride, int32_t groups, uint32_t sums[3])
{
#if MCU_S8_DSP_NATIVE
    register uint32_t a0 __asm__("r0") = 0;
    register uint32_t a1 __asm__("r1") = 0;
    register uint32_t a2 __asm__("r2") = 0;
    register const int16_t *end __asm__("r3") = col + 8 * groups;
    register const int16_t *x __asm__("r4") = col;
    register const int8_t *wp __asm__("r5") = w;
    register int32_t rs __asm__("r6") = stride;
    register int32_t odd __asm__("r9") = groups & 1;
    /* r7 may be the frame pointer: it is kept on the stack while the loop holds a column word in it (nothing
     * in the assembly addresses memory through sp or r7) */
    __asm__ volatile(
        "push {r7}\n\t"
        "mov r8, #0xF000F000\n\t"
        "cmp r9, #0\n\t"
        "bne 2f\n\t"
        "1:\n\t"
        MCU_S4_GROUP3
        "2:\n\t"
        MCU_S4_GROUP3
        "cmp r4, r3\n\t"
        "bne 1b\n\t"
        "pop {r7}\n\t"
        : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(x), "+r"(wp), "+r"(odd)
        : "r"(end), "r"(rs)
        : "r8", "r10", "r11", "r12", "lr", "cc", "memory");
    sums[0] = a0;
    sums[1] = a1;
    sums[2] = a2;
#else
    for (int32_t r = 0; r < 3; ++r) {
        uint32_t a = 0;
        for (int32_t g = 0; g < groups; ++g) {
            const uint32_t v = mcu_load_u32(w + r * stride + 4 * g);
            for (int32_t k = 0; k < 4; ++k) {
                a = mcu_smlad(mcu_load_u32(col + 8 * g + 2 * k), 0xF000F000u & (v << (12 - 4 * k)), a);
            }
        }
        sums[r] = a;
    }
#endif
}

/* Output pixels ya and yb (yb NULL: ya only) of rows of n weights, every output channel's row at nibble
 * oc * n. Even n: the columns of n taps of pixel a at ca and of pixel b at ca + MCU_S4_PIXEL_B (ca2 unused).
 * Odd n: columns of n + 1 taps, at ca and ca + MCU_S4_PIXEL_B / 2 with a 0 after the window for the even
 * channels' rows, at ca2 and ca2 + MCU_S4_PIXEL_B / 2 with a 0 before it for the odd channels' rows (which
 * start mid-byte and are read from the byte before); the 0 meets the neighbouring row's nibble. */
static inline void mcu_s4_matrix_pixels(const int16_t *ca, const int16_t *ca2, int32_t n, int32_t out_c,
                                        const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *ya,
                                        int8_t *yb)
{
    const int odd = n & 1;
    const int32_t taps = n + odd;
    for (int32_t oc = 0; oc < out_c; oc += 2) {
        const int32_t oc1 = oc + 1 < out_c ? oc + 1 : oc; /* an odd last channel: its row twice */
        const uint32_t b0 = bias != NULL ? (uint32_t)bias[oc] : 0u;
        const uint32_t b1 = bias != NULL ? (uint32_t)bias[oc1] : 0u;
        uint32_t acc[4] = {b0, b1, b0, b1};
        const int8_t *wa = weight + ((oc * n) >> 1), *wb = weight + ((oc1 * n) >> 1);
        if (odd) {
            const int32_t b = yb != NULL ? MCU_S4_PIXEL_B / 2 : 0; /* no pixel b: pixel a twice */
            const int16_t *xb = oc1 != oc ? ca2 : ca;
            uint32_t pa[2] = {b0, b0}, pb[2] = {b1, b1};
            mcu_s4_dot_2px(ca, ca + b, wa, taps, pa);
            mcu_s4_dot_2px(xb, xb + b, wb, taps, pb);
            acc[0] = pa[0];
            acc[2] = pa[1];
            acc[1] = pb[0];
            acc[3] = pb[1];
        } else if (yb != NULL) {
            mcu_s4_dot_2x2(ca, wa, wb, taps, acc);
        } else {
            mcu_s4_dot_2ch(ca, wa, wb, taps, acc);
        }
        const int32_t m0 = q->multiplier[oc], s0 = q->shift[oc];
        const int32_t m1 = q->multiplier[oc1], s1 = q->shift[oc1];
        ya[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[0]), m0, s0, output_offset, act_min, act_max);
        if (oc1 != oc) {
            ya[oc1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[1]), m1, s1, output_offset, act_min, act_max);
        }
        if (yb != NULL) {
            yb[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[2]), m0, s0, output_offset, act_min, act_max);
            if (oc1 != oc) {
                yb[oc1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[3]), m1, s1, output_offset, act_min,
                                                    act_max);
            }
        }
    }
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_S4_DSP_H */
