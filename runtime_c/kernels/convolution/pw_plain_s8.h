/* Pointwise convolution pixels for cores with a 32-bit multiply only (the Cortex-M0+), where the
 * kernel's plain loop loads the input byte again for every output channel and requantizes through a
 * 64-bit multiply (a library call there). Internal: static inline only; compiled where
 * MCU_S8_PLAIN_DW is 1 (convolution/dw_plain_s8.h).
 *
 * The pixel's input is read once into a column of 32-bit words (x + input_offset), then two output
 * channels at a time share each column word: per input channel one word load (an immediate offset),
 * two weight byte loads, two multiplies and two adds. Requantization is dw_plain_s8.h's 32-bit one.
 * The column holds the whole pixel before any output byte is written, so a pixel's writes follow all
 * of its reads, as the kernel's pixel buffer guarantees. A convolution's window (taps in the padding
 * as zero words) makes the same column for its weights [cout][kh][kw][cin]. */
#ifndef MCU_KERNELS_INTERNAL_PW_PLAIN_S8_H
#define MCU_KERNELS_INTERNAL_PW_PLAIN_S8_H

#include <stdint.h>

#include "dw_plain_s8.h"

#if MCU_S8_PLAIN_DW

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

#endif /* MCU_S8_PLAIN_DW */

#endif /* MCU_KERNELS_INTERNAL_PW_PLAIN_S8_H */
