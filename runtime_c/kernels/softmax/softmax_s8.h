/* gemmlowp fixed-point exp and reciprocal used by the int8 softmax (as in
 * TFLite's reference int8 softmax and CMSIS-NN's arm_softmax_s8). Internal:
 * static inline only; mirrored by mcu/quant/reference.py. */
#ifndef MCU_KERNELS_INTERNAL_SOFTMAX_S8_H
#define MCU_KERNELS_INTERNAL_SOFTMAX_S8_H

#include <stdint.h>

#include "../common/requant.h"

#define MCU_SRDHM mcu_saturating_rounding_doubling_high_mul

/* exp(a) for a in [-1/4, 0) in Q0.31: Taylor expansion around -1/8. */
static inline int32_t mcu_exp_on_interval_between_negative_one_quarter_and_0_excl(int32_t a)
{
    const int32_t constant_term = 1895147668; /* exp(-1/8) */
    const int32_t constant_1_over_3 = 715827883;
    const int32_t x = a + (1 << 28);
    const int32_t x2 = MCU_SRDHM(x, x);
    const int32_t x3 = MCU_SRDHM(x2, x);
    const int32_t x4 = MCU_SRDHM(x2, x2);
    const int32_t x4_over_4 = mcu_rounding_divide_by_pot(x4, 2);
    const int32_t poly =
        mcu_rounding_divide_by_pot(MCU_SRDHM(x4_over_4 + x3, constant_1_over_3) + x2, 1);
    return constant_term + MCU_SRDHM(constant_term, x + poly);
}

/* exp(a) for a <= 0 in Q5.26, result in Q0.31. */
static inline int32_t mcu_exp_on_negative_values_q5(int32_t a)
{
    if (a == 0) {
        return INT32_MAX;
    }
    const int32_t one_quarter = 1 << 24;
    const int32_t a_mod_quarter_minus_one_quarter = (a & (one_quarter - 1)) - one_quarter;
    int32_t result = mcu_exp_on_interval_between_negative_one_quarter_and_0_excl(
        mcu_sat_shl32(a_mod_quarter_minus_one_quarter, 5));
    const int32_t remainder = a_mod_quarter_minus_one_quarter - a;
    /* Barrel shifter over the integer part: exp(-2^k) for k = -2..4, Q0.31. */
    if (remainder & (1 << 24)) {
        result = MCU_SRDHM(result, 1672461947);
    }
    if (remainder & (1 << 25)) {
        result = MCU_SRDHM(result, 1302514674);
    }
    if (remainder & (1 << 26)) {
        result = MCU_SRDHM(result, 790015084);
    }
    if (remainder & (1 << 27)) {
        result = MCU_SRDHM(result, 290630308);
    }
    if (remainder & (1 << 28)) {
        result = MCU_SRDHM(result, 39332535);
    }
    if (remainder & (1 << 29)) {
        result = MCU_SRDHM(result, 720401);
    }
    if (remainder & (1 << 30)) {
        result = MCU_SRDHM(result, 242);
    }
    return result;
}

/* 1 / (1 + a) for a in [0, 1) in Q0.31: Newton-Raphson in Q2.29. */
static inline int32_t mcu_one_over_one_plus_x_for_x_in_0_1(int32_t a)
{
    const int64_t s = (int64_t)a + INT32_MAX;
    const int32_t half_denominator = (int32_t)(s >= 0 ? (s + 1) >> 1 : -((-s + 1) >> 1));
    int32_t x = 1515870810 + MCU_SRDHM(half_denominator, -1010580540); /* 48/17 - 32/17 d */
    for (int i = 0; i < 3; ++i) {
        const int32_t one_minus_half_denominator_times_x = (1 << 29) - MCU_SRDHM(half_denominator, x);
        x = x + mcu_sat_shl32(MCU_SRDHM(x, one_minus_half_denominator_times_x), 2);
    }
    return mcu_sat_shl32(x, 1);
}

/* Leading zero bits of a non-zero value. */
static inline int32_t mcu_clz32(uint32_t x)
{
#if defined(__GNUC__)
    return (int32_t)__builtin_clz(x);
#else
    int32_t n = 0;
    while ((x & 0x80000000u) == 0u) {
        x <<= 1;
        ++n;
    }
    return n;
#endif
}

#undef MCU_SRDHM

#endif /* MCU_KERNELS_INTERNAL_SOFTMAX_S8_H */
