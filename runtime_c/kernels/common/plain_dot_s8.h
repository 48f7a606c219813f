/* Dot products and requantization for cores with a 32-bit multiply only (the Cortex-M0+: no DSP
 * extension, no SMLAL), where the kernels' plain loops load an input byte again for every output
 * channel and requantize through a 64-bit multiply (a library call there). Internal: static inline
 * only; MCU_S8_PLAIN is 1 where it is compiled (the builds that keep the plain loops: see
 * common/plain_s8.h).
 *
 * A pointwise pixel (or a linear layer's row, or a convolution's window with the taps in the padding
 * as zero words) is read once into a column of 32-bit words (x + input_offset), then two output
 * channels at a time share each column word: per input value one word load (an immediate offset),
 * two weight byte loads, two multiplies and two adds. The column holds the whole pixel before any
 * output byte is written, so a pixel's writes follow all of its reads. */
#ifndef MCU_KERNELS_INTERNAL_PLAIN_DOT_S8_H
#define MCU_KERNELS_INTERNAL_PLAIN_DOT_S8_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "mve_s8.h"
#include "plain_s8.h"
#include "requant.h"
#include "simd_s8.h"

#if !MCU_S8_DSP && !MCU_S8_MVE && !MCU_S8_WIDE
#define MCU_S8_PLAIN 1
#else
#define MCU_S8_PLAIN 0
#endif

#if MCU_S8_PLAIN

/* mcu_requantize_to_s8 without a 64-bit multiply (a library call on the M0+): for shift in [-24, -1]
 * the single rounding of common/rq_s8_dsp.h's mcu_rq_ch (with R = -shift,
 * z = floor((P + K[P < 0]) / 2^(31+R)), K[0] = 2^30 + 2^(R+30) + output_offset 2^(31+R),
 * K[1] = K[0] - 2^31; P < 0 exactly when acc < 0 for a positive multiplier, and a zero multiplier
 * gives output_offset with either K). Only the high word of P + K is needed: P = acc * multiplier
 * from the four 16 x 16-bit products of the halves (each fits 32 bits: the multiplier's high half is
 * below 2^15), summed in 32-bit words with their carries; other shifts take mcu_requantize_to_s8. */
static inline int8_t mcu_plain_rq_s8(int32_t acc, int32_t multiplier, int32_t shift, int32_t output_offset,
                                     int32_t act_min, int32_t act_max)
{
    if (shift > -1 || shift < -24) {
        return mcu_requantize_to_s8(acc, multiplier, shift, output_offset, act_min, act_max);
    }
    const int32_t r = -shift;
    const uint32_t al = (uint32_t)acc & 0xFFFFu, ml = (uint32_t)multiplier & 0xFFFFu;
    const int32_t ah = mcu_asr32(acc, 16), mh = multiplier >> 16; /* multiplier >= 0 */
    const uint32_t p0 = al * ml, p2 = al * (uint32_t)mh; /* p2 < 2^31 */
    const int32_t p1 = ah * (int32_t)ml, p3 = ah * mh;
    /* mid = p1 + p2 in 33 bits: mid_lo and the sign word mid_hi (0 or -1 from p1, plus the carry) */
    const uint32_t mid_lo = (uint32_t)p1 + p2;
    const int32_t mid_hi = (p1 < 0 ? -1 : 0) + (mid_lo < p2 ? 1 : 0);
    /* P = p3 2^32 + mid 2^16 + p0 */
    const uint32_t lo = p0 + (mid_lo << 16);
    int32_t hi = p3 + (int32_t)(((uint32_t)mid_hi << 16) | (mid_lo >> 16)) + (lo < p0 ? 1 : 0);
    /* + K[P < 0]: K[0]'s low word 2^30 (+ 2^31 for R = 1), its high word 2^(R-2) (R >= 2) +
     * output_offset 2^(R-1); K[1] = K[0] - 2^31 borrows from the high word unless R = 1 */
    const int neg = hi < 0;
    const uint32_t klo = (1u << 30) + (r == 1 ? 1u << 31 : 0u) + (neg ? 0x80000000u : 0u);
    const int32_t khi = (r >= 2 ? (int32_t)1 << (r - 2) : 0) + output_offset * ((int32_t)1 << (r - 1)) -
                        (neg && r >= 2 ? 1 : 0);
    const uint32_t sum = lo + klo;
    hi += khi + (sum < lo ? 1 : 0);
    return (int8_t)mcu_clamp_s32(mcu_asr32(hi, r - 1), act_min, act_max);
}

/* Largest input channel count of the column: 1 KiB of stack. */
#define MCU_S8_PLAIN_PW_COL 256

/* s0 += sum col[k] * a[k], s1 += sum col[k] * b[k] over k < n, modulo 2^32. */
static inline void mcu_plain_pw_dot2(const int32_t *col, const int8_t *a, const int8_t *b, int32_t n, uint32_t *s0,
                                     uint32_t *s1)
{
    uint32_t acc0 = *s0, acc1 = *s1;
    int32_t k = 0;
#if defined(__ARM_ARCH_6M__) && defined(__OPTIMIZE__)
    /* Four input channels a step: the weights are read at a register offset counting up from -n4 to 0
     * (ARMv6-M's LDRSB has no immediate form), so its ADDS also ends the loop. Eight operands take all
     * the low registers, r7 among them: unoptimised builds keep r7 for the frame and take the C loop. */
    const int32_t n4 = n & ~3;
    if (n4 > 0) {
        int32_t i = -n4;
        const int32_t *c = col;
        const int8_t *ea = a + n4, *eb = b + n4;
        int32_t xv, t;
#define MCU_PLAIN_PW_TAP(OFF)                                                                                  \
    "ldr %[xv], [%[c], #" OFF "]\n\t"                                                                          \
    "ldrsb %[t], [%[ea], %[i]]\n\t"                                                                            \
    "muls %[t], %[xv], %[t]\n\t"                                                                               \
    "adds %[s0], %[s0], %[t]\n\t"                                                                              \
    "ldrsb %[t], [%[eb], %[i]]\n\t"                                                                            \
    "muls %[t], %[xv], %[t]\n\t"                                                                               \
    "adds %[s1], %[s1], %[t]\n\t"                                                                              \
    "adds %[i], %[i], #1\n\t"
        __asm__ volatile(".syntax unified\n1:\n\t" MCU_PLAIN_PW_TAP("0") MCU_PLAIN_PW_TAP("4") MCU_PLAIN_PW_TAP("8")
                             MCU_PLAIN_PW_TAP("12") "adds %[c], %[c], #16\n\t"
                                                    "cmp %[i], #0\n\t"
                                                    "bne 1b\n\t"
                         : [s0] "+l"(acc0), [s1] "+l"(acc1), [c] "+l"(c), [i] "+l"(i), [xv] "=&l"(xv), [t] "=&l"(t)
                         : [ea] "l"(ea), [eb] "l"(eb)
                         : "cc", "memory");
#undef MCU_PLAIN_PW_TAP
        k = n4;
    }
#endif
    for (; k < n; ++k) {
        acc0 += (uint32_t)(col[k] * a[k]);
        acc1 += (uint32_t)(col[k] * b[k]);
    }
    *s0 = acc0;
    *s1 = acc1;
}

/* cout output bytes at y from a column of n words (the values of one output pixel's window, input
 * offset added) and the weights [cout][n]. */
static inline void mcu_plain_pw_outputs(const int32_t *col, int32_t n, int32_t cout, const int8_t *weight,
                                        const int32_t *bias, const mcu_per_channel_quant *q, int32_t output_offset,
                                        int32_t act_min, int32_t act_max, int8_t *y)
{
    for (int32_t oc = 0; oc < cout; oc += 2) {
        /* an odd last channel runs paired with itself */
        const int32_t o1 = oc + 1 < cout ? oc + 1 : oc;
        uint32_t s0 = bias != NULL ? (uint32_t)bias[oc] : 0u;
        uint32_t s1 = bias != NULL ? (uint32_t)bias[o1] : 0u;
        mcu_plain_pw_dot2(col, weight + oc * n, weight + o1 * n, n, &s0, &s1);
        y[oc] = mcu_plain_rq_s8(mcu_u32_to_s32(s0), q->multiplier[oc], q->shift[oc], output_offset, act_min, act_max);
        y[o1] = mcu_plain_rq_s8(mcu_u32_to_s32(s1), q->multiplier[o1], q->shift[o1], output_offset, act_min, act_max);
    }
}

/* One pixel: cin input bytes at x to cout output bytes at y (which may lie on x: the column is read
 * first). */
static inline void mcu_plain_pw_pixel(const int8_t *x, int32_t cin, int32_t cout, int32_t input_offset,
                                      const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                      int32_t output_offset, int32_t act_min, int32_t act_max, int32_t *col, int8_t *y)
{
    for (int32_t k = 0; k < cin; ++k) {
        col[k] = x[k] + input_offset;
    }
    mcu_plain_pw_outputs(col, cin, cout, weight, bias, q, output_offset, act_min, act_max, y);
}

#endif /* MCU_S8_PLAIN */

#endif /* MCU_KERNELS_INTERNAL_PLAIN_DOT_S8_H */
