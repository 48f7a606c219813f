/* The integer layer norms' shared arithmetic (int8 and 16x8): the square root of a row's variance sum and
 * a rounding shift of 64-bit products. */
#ifndef MCU_NORM_ROOT_H
#define MCU_NORM_ROOT_H

#include <stdint.h>

#include "../common/requant.h"

/* floor(sqrt(v)) by the bit-pair method: shifts, adds and compares only. */
static inline uint32_t mcu_isqrt64(uint64_t v)
{
    uint64_t root = 0;
    uint64_t bit = (uint64_t)1 << 62;
    while (bit > v) {
        bit >>= 2;
    }
    while (bit != 0) {
        if (v >= root + bit) {
            v -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return (uint32_t)root;
}

/* round(v 2^-s) = floor((v + 2^(s-1)) / 2^s), halves up; s >= 1. */
static inline int64_t mcu_norm_round_shift(int64_t v, int32_t s)
{
    return mcu_asr64(v + ((int64_t)1 << (s - 1)), s);
}

#endif
