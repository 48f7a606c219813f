/* Fixed-point arithmetic of the int8 kernels (TFLite / CMSIS-NN / gemmlowp).
 * Internal: static inline only. mcu/quant/arith.py mirrors every function
 * here exactly; keep the two in step.
 *
 * No signed overflow anywhere: 64-bit products go through int64_t, left
 * shifts of possibly negative values are multiplications that cannot
 * overflow, and right shifts of negative values are written so that only
 * non-negative values are shifted (C leaves the negative case to the
 * implementation). */
#ifndef MCU_KERNELS_INTERNAL_REQUANT_H
#define MCU_KERNELS_INTERNAL_REQUANT_H

#include <stdint.h>

#define MCU_Q31_MIN INT32_MIN
#define MCU_Q31_MAX INT32_MAX

static inline int32_t mcu_sat_s32(int64_t x)
{
    return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
}

static inline int32_t mcu_clamp_s32(int32_t x, int32_t lo, int32_t hi)
{
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

/* floor(x / 2^n), n in [0, 31]. */
static inline int32_t mcu_asr32(int32_t x, int32_t n)
{
    return x >= 0 ? x >> n : ~(~x >> n);
}

/* floor(x / 2^n), n in [0, 63]. */
static inline int64_t mcu_asr64(int64_t x, int32_t n)
{
    return x >= 0 ? x >> n : ~(~x >> n);
}

/* The int32_t with the bits of u (what a two's-complement cast does, written
 * without the implementation-defined conversion; compilers emit nothing). */
static inline int32_t mcu_u32_to_s32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 0x80000000u) + INT32_MIN;
}

/* saturate_int32(x * 2^n), n in [0, 31]; only 32-bit operations. */
static inline int32_t mcu_sat_shl32(int32_t x, int32_t n)
{
    const int32_t lim = INT32_MAX >> n; /* x * 2^n fits iff -lim - 1 <= x <= lim */
    if (x > lim) {
        return INT32_MAX;
    }
    if (x < -lim - 1) {
        return INT32_MIN;
    }
    if (n == 31) {
        return x == 0 ? 0 : INT32_MIN; /* x is 0 or -1 here */
    }
    return x * ((int32_t)1 << n);
}

/* CMSIS-NN arm_nn_doubling_high_mult_no_sat plus the one saturating case:
 * (a*b + 2^30) >> 31 with a floor shift (ties round up). */
static inline int32_t mcu_rounding_doubling_high_mul(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    const int64_t ab = (int64_t)a * (int64_t)b + ((int64_t)1 << 30);
    return (int32_t)mcu_asr64(ab, 31);
}

/* gemmlowp SaturatingRoundingDoublingHighMul (CMSIS-NN arm_nn_doubling_high_mult):
 * (a*b +- 2^30) / 2^31 truncated toward zero. That equals the floor form
 * above for every input (ties go toward +infinity in both), so it is the
 * same function under gemmlowp's name. */
static inline int32_t mcu_saturating_rounding_doubling_high_mul(int32_t a, int32_t b)
{
    return mcu_rounding_doubling_high_mul(a, b);
}

/* gemmlowp RoundingDivideByPOT: x / 2^exponent rounded half away from zero,
 * exponent in [0, 31]. */
static inline int32_t mcu_rounding_divide_by_pot(int32_t x, int32_t exponent)
{
    const uint32_t mask = exponent == 0 ? 0u : 0xFFFFFFFFu >> (32 - exponent);
    const uint32_t remainder = (uint32_t)x & mask;
    const uint32_t threshold = (mask >> 1) + (x < 0 ? 1u : 0u);
    return mcu_asr32(x, exponent) + (remainder > threshold ? 1 : 0);
}

/* Apply a Q31 multiplier and shift (see kernels_s8.h):
 * rounding_divide_by_pot(rounding_doubling_high_mul(saturate(x * 2^left), m), right). */
static inline int32_t mcu_requantize(int32_t x, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    return mcu_rounding_divide_by_pot(mcu_rounding_doubling_high_mul(mcu_sat_shl32(x, left), multiplier),
                                      right);
}

/* The requantization parameters every kernel accepts. */
static inline int mcu_quant_valid(int32_t multiplier, int32_t shift)
{
    return multiplier >= 0 && shift >= -31 && shift <= 30;
}

/* input_offset = -zero_point of an int8 tensor. */
static inline int mcu_input_offset_valid(int32_t offset)
{
    return offset >= -127 && offset <= 128;
}

/* output_offset = +zero_point of an int8 tensor. */
static inline int mcu_output_offset_valid(int32_t offset)
{
    return offset >= -128 && offset <= 127;
}

static inline int mcu_act_s8_valid(int32_t act_min, int32_t act_max)
{
    return act_min >= -128 && act_min <= act_max && act_max <= 127;
}

/* Final step of most kernels: requantize, add the output zero-point, clamp. */
static inline int8_t mcu_requantize_to_s8(int32_t acc, int32_t multiplier, int32_t shift, int32_t output_offset,
                                          int32_t act_min, int32_t act_max)
{
    const int32_t y = mcu_requantize(acc, multiplier, shift);
    /* y may be near INT32_MAX for extreme multipliers; saturating the sum
     * gives the same clamped result as exact arithmetic. */
    const int32_t z = mcu_sat_s32((int64_t)y + output_offset);
    return (int8_t)mcu_clamp_s32(z, act_min, act_max);
}

#endif /* MCU_KERNELS_INTERNAL_REQUANT_H */
