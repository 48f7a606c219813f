/* Requantization of a 64-bit accumulator to int16 (kernels_s16.h states the arithmetic). */
#ifndef MCU_REQUANT_S16_H
#define MCU_REQUANT_S16_H

#include <stdint.h>

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

static inline int16_t mcu_clamp_to_s16(int32_t v, int32_t lo, int32_t hi)
{
    return (int16_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* MCU_REQUANT_S16_H */
