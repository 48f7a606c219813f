/* Requantization of a 64-bit accumulator to int16 (kernels_s16.h states the arithmetic). */
#ifndef MCU_REQUANT_S16_H
#define MCU_REQUANT_S16_H

#include <stdint.h>

#include "requant.h"

static inline int mcu_quant_s16_valid(int32_t multiplier, int32_t shift)
{
    return multiplier >= 0 && shift >= -31 && shift <= 14;
}

static inline int mcu_act_s16_valid(int32_t act_min, int32_t act_max)
{
    return act_min >= INT16_MIN && act_max <= INT16_MAX && act_min <= act_max;
}

static inline int32_t mcu_reduce_multiplier_q15(int32_t multiplier)
{
    return multiplier < 0x7FFF0000 ? (multiplier + (1 << 15)) >> 16 : 0x7FFF;
}

/* The product wraps modulo 2^64 and the shifted value modulo 2^32 (as unsigned arithmetic, so without
 * undefined behaviour); within a layer's real range neither happens. The final +1 is taken in 64 bits
 * so that INT32_MAX rounds without overflow. */
static inline int32_t mcu_requantize_s64(int64_t acc, int32_t reduced_multiplier, int32_t shift)
{
    const int64_t prod = (int64_t)((uint64_t)acc * (uint64_t)(int64_t)reduced_multiplier);
    const int32_t y = (int32_t)(uint32_t)(uint64_t)(prod >> (14 - shift));
    return (int32_t)(((int64_t)y + 1) >> 1);
}

/* mcu_requantize (requant.h) of x by a multiplier >= 0 and a shift of -r, r in [0, 31], in one 64-bit
 * multiply-add: the rounding doubling high multiply and the rounding right shift merge into
 *   floor((x m + 2^30 + [r > 0] (2^(r+30) - [x < 0] 2^31)) / 2^(31+r))
 * (rq_s8_dsp.h derives it; with m >= 0 the sign of x stands for the sign of the product's high part, and
 * every sum stays inside int64: |x m| < 2^62). k[0], k[1]: the constant for x >= 0 and x < 0. */
typedef struct {
    int64_t k[2];
    int32_t multiplier;
    int32_t rshift; /* r - 1: the shift of the sum's high word; -1 for r = 0 */
} mcu_rq_s32;

/* 1 and *t set when shift is in [-31, 0], else 0. */
static inline int mcu_rq_s32_init(mcu_rq_s32 *t, int32_t multiplier, int32_t shift)
{
    if (shift > 0 || shift < -31) {
        return 0;
    }
    const int32_t r = -shift;
    t->k[0] = ((int64_t)1 << 30) + (r > 0 ? ((int64_t)1 << (r + 30)) : 0);
    t->k[1] = t->k[0] - (r > 0 ? ((int64_t)1 << 31) : 0);
    t->multiplier = multiplier;
    t->rshift = r - 1;
    return 1;
}

/* (always inlined: a call per element cost more than the arithmetic) */
static inline __attribute__((always_inline)) int32_t mcu_rq_s32_apply(const mcu_rq_s32 *t, int32_t x)
{
    const int64_t s = t->k[x < 0 ? 1 : 0] + (int64_t)x * t->multiplier;
    const uint64_t u = (uint64_t)s;
    /* floor(s / 2^32) as an int32 (two's complement words) */
    const int32_t hi = mcu_u32_to_s32((uint32_t)(u >> 32));
    if (t->rshift < 0) { /* floor(s / 2^31), which fits int32 for r = 0 (|s| < 2^62) */
        return mcu_u32_to_s32(((uint32_t)(u >> 32) << 1) | (uint32_t)((u >> 31) & 1u));
    }
    return mcu_asr32(hi, t->rshift); /* floor(s / 2^(31+r)), which fits int32 */
}

/* mcu_requantize_s64(acc, mcu_reduce_multiplier_q15(multiplier), shift) for an int32 accumulator and a
 * shift in [-31, -2], the common case: with m15 < 2^15 the product is below 2^46 and needs no wrap,
 * t = floor(acc m15 / 2^16) is SMULWB's, and the two rounding steps merge into floor((t + 2^(k-1)) / 2^k)
 * with k = -1 - shift. */
static inline int32_t mcu_requantize_s16_small(int32_t acc, int32_t multiplier, int32_t shift)
{
    const int32_t m15 = mcu_reduce_multiplier_q15(multiplier);
    const int32_t k = -1 - shift;
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t t;
    __asm__("smulwb %0, %1, %2" : "=r"(t) : "r"(acc), "r"(m15));
#else
    const int32_t t = (int32_t)mcu_asr64((int64_t)acc * m15, 16);
#endif
    return mcu_asr32(t + ((int32_t)1 << (k - 1)), k);
}

/* mcu_requantize_s64(acc, mcu_reduce_multiplier_q15(multiplier), shift), the short way when it applies. */
static inline int32_t mcu_requantize_s16_acc(int64_t acc, int32_t multiplier, int32_t shift)
{
    if (shift <= -2 && acc >= INT32_MIN && acc <= INT32_MAX) {
        return mcu_requantize_s16_small((int32_t)acc, multiplier, shift);
    }
    return mcu_requantize_s64(acc, mcu_reduce_multiplier_q15(multiplier), shift);
}

/* Bias bound of the layers whose accumulators stay int32: a bias below 2^30 in magnitude plus one int32
 * partial sum (at most 256 products of at most 2^22) cannot leave int32. */
#define MCU_S16_SMALL_BIAS ((int64_t)1 << 30)

/* 1 when every channel's shift is in [-31, -2] and every bias (or none) below MCU_S16_SMALL_BIAS: then
 * a window of at most 256 products requantizes with mcu_requantize_s16_small. */
static inline int mcu_s16_small_layer(const int64_t *bias, const int32_t *shift, int32_t channels)
{
    for (int32_t o = 0; o < channels; ++o) {
        if (shift[o] > -2 ||
            (bias != NULL && (bias[o] >= MCU_S16_SMALL_BIAS || bias[o] <= -MCU_S16_SMALL_BIAS))) {
            return 0;
        }
    }
    return 1;
}

static inline int16_t mcu_clamp_to_s16(int32_t v, int32_t lo, int32_t hi)
{
    return (int16_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* MCU_REQUANT_S16_H */
