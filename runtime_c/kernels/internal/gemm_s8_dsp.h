/* The inner loops of mcu_conv2d_packed_s8: one output pixel's column times a block of four output
 * channels of packed int16 weights. Internal: static inline only.
 *
 * Why packed int16 weights: with int8 weights every pair of MACs needs a SXTB16 to widen the
 * weights, and weight rows of different channels need a pointer each. Widened and interleaved
 * ahead of time (mcu/backends/tuned.py), one LDM fetches a tap pair of four channels and each
 * SMLAD is a pair of MACs: per 8 taps x 4 channels, 2 LDRD + 4 LDM + 16 SMLAD + 2 loop
 * instructions, 0.75 instructions per MAC, against about 2 for CMSIS-NN's s8 x s16 kernels.
 * The price is flash: the weights of these layers take twice the bytes.
 *
 * The column holds (x + input_offset) as int16, taps padded with 0 to a multiple of 4 and each
 * group of 4 taps in the order 0, 2, 1, 3 (the order SXTB16 / SXTB16-ROR8 produce), so the
 * column is built with two SXTAB16 per 4 bytes. Products and sums are exact integers modulo 2^32
 * in any order, so every path here gives the bits of the plain reference. */
#ifndef MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H
#define MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H

#include <stdint.h>

#include "simd_s8.h"

/* acc[0..3] += col . packed block, over kp taps (kp a positive multiple of 4); returns the
 * weights after the block. */
static inline const int16_t *mcu_dot4_packed(const int16_t *col, const int16_t *w, int32_t kp, uint32_t acc[4])
{
#if MCU_S8_DSP_NATIVE
    uint32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    const int16_t *x = col;
    if (kp & 4) {
        __asm__ volatile("ldrd r12, lr, [%[x]], #8\n\t"
                         "ldmia %[w]!, {r8, r9, r10, r11}\n\t"
                         "smlad %[a0], r12, r8, %[a0]\n\t"
                         "smlad %[a1], r12, r9, %[a1]\n\t"
                         "smlad %[a2], r12, r10, %[a2]\n\t"
                         "smlad %[a3], r12, r11, %[a3]\n\t"
                         "ldmia %[w]!, {r8, r9, r10, r11}\n\t"
                         "smlad %[a0], lr, r8, %[a0]\n\t"
                         "smlad %[a1], lr, r9, %[a1]\n\t"
                         "smlad %[a2], lr, r10, %[a2]\n\t"
                         "smlad %[a3], lr, r11, %[a3]\n\t"
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w)
                         :
                         : "r8", "r9", "r10", "r11", "r12", "lr", "memory");
    }
    const int16_t *end = col + kp;
    if (x != end) {
        __asm__ volatile("1:\n\t"
                         "ldrd r12, lr, [%[x]], #8\n\t"
                         "ldmia %[w]!, {r8, r9, r10, r11}\n\t"
                         "smlad %[a0], r12, r8, %[a0]\n\t"
                         "smlad %[a1], r12, r9, %[a1]\n\t"
                         "smlad %[a2], r12, r10, %[a2]\n\t"
                         "smlad %[a3], r12, r11, %[a3]\n\t"
                         "ldmia %[w]!, {r8, r9, r10, r11}\n\t"
                         "smlad %[a0], lr, r8, %[a0]\n\t"
                         "smlad %[a1], lr, r9, %[a1]\n\t"
                         "smlad %[a2], lr, r10, %[a2]\n\t"
                         "smlad %[a3], lr, r11, %[a3]\n\t"
                         "ldrd r12, lr, [%[x]], #8\n\t"
                         "ldmia %[w]!, {r8, r9, r10, r11}\n\t"
                         "smlad %[a0], r12, r8, %[a0]\n\t"
                         "smlad %[a1], r12, r9, %[a1]\n\t"
                         "smlad %[a2], r12, r10, %[a2]\n\t"
                         "smlad %[a3], r12, r11, %[a3]\n\t"
                         "ldmia %[w]!, {r8, r9, r10, r11}\n\t"
                         "smlad %[a0], lr, r8, %[a0]\n\t"
                         "smlad %[a1], lr, r9, %[a1]\n\t"
                         "smlad %[a2], lr, r10, %[a2]\n\t"
                         "smlad %[a3], lr, r11, %[a3]\n\t"
                         "cmp %[x], %[end]\n\t"
                         "bne 1b\n\t"
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w)
                         : [end] "r"(end)
                         : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    return w;
#else
    for (int32_t j = 0; j < kp; j += 2) {
        const int32_t x0 = col[j], x1 = col[j + 1];
        for (int32_t o = 0; o < 4; ++o) {
            acc[o] += (uint32_t)(x0 * w[2 * o]) + (uint32_t)(x1 * w[2 * o + 1]);
        }
        w += 8;
    }
    return w;
#endif
}

/* col[0..kp) from kp bytes (kp a multiple of 4): (x + off) in the 0, 2, 1, 3 order per group. */
static inline void mcu_column_s8(const int8_t *x, int32_t kp, int32_t off, int16_t *col)
{
#if MCU_S8_DSP
    const uint32_t off2 = mcu_offset_pair(off);
    for (int32_t i = 0; i < kp; i += 4) {
        const uint32_t v = mcu_load_u32(x + i);
        mcu_store_u32(col + i, mcu_sxtab16(off2, v));
        mcu_store_u32(col + i + 2, mcu_sxtab16_ror8(off2, v));
    }
#else
    for (int32_t i = 0; i < kp; i += 4) {
        col[i] = (int16_t)(x[i] + off);
        col[i + 1] = (int16_t)(x[i + 2] + off);
        col[i + 2] = (int16_t)(x[i + 1] + off);
        col[i + 3] = (int16_t)(x[i + 3] + off);
    }
#endif
}

#if MCU_S8_DSP
static inline int32_t mcu_qadd(int32_t a, int32_t b)
{
#if MCU_S8_DSP_NATIVE
    int32_t r;
    __asm__("qadd %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    return mcu_sat_s32((int64_t)a + b);
#endif
}

/* Whether every channel's shift is in [-23, -1], the range of mcu_requant_right_s8. */
static inline int mcu_shifts_right(const int32_t *shift, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        if (shift[i] < -23 || shift[i] > -1) {
            return 0;
        }
    }
    return 1;
}

/* mcu_requantize_to_s8 for a validated multiplier and a right shift s = -shift in [1, 23] (real
 * layers: the output scale is larger than input scale x weight scale), in about half the
 * instructions. The rounding divide by 2^s (half away from zero) is floor((y + 2^(s-1) - [y < 0])
 * / 2^s); the addition saturates instead of wrapping, and when it saturates the exact quotient
 * and the saturated one, 2^(31-s) and 2^(31-s) - 1, are both at least 255 for s <= 23, which the
 * int8 clamp (offset >= -128, act_max <= 127) maps to the same act_max. Right shifts of negative
 * values are arithmetic, as GCC and Clang define them (the only compilers of these paths). */
static inline int8_t mcu_requant_right_s8(int32_t acc, int32_t multiplier, int32_t s, int32_t output_offset,
                                          int32_t act_min, int32_t act_max)
{
    const int64_t prod = (int64_t)acc * multiplier + ((int64_t)1 << 30);
    int32_t y = (int32_t)(prod >> 31);
    y += y >> 31;
    y = mcu_qadd(y, (int32_t)1 << (s - 1)) >> s;
    y += output_offset;
    y = y < act_min ? act_min : y;
    return (int8_t)(y > act_max ? act_max : y);
}
#endif

#endif /* MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H */
