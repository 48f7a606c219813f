/* The largest or smallest int16 code along the middle axis of [outer][axis][inner], requantized once to the
 * output's scale with mcu_mean_s16's 16x8 arithmetic (the Q31 multiplier reduced to Q15, one rounding step).
 * Dequantization is increasing (zero points 0), so the extreme code is the extreme value. Internal: static
 * inline only; mcu_amax_s16.c and mcu_amin_s16.c instantiate it. */
#ifndef MCU_KERNELS_INTERNAL_EXTREME_S16_H
#define MCU_KERNELS_INTERNAL_EXTREME_S16_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s16.h"
#include "../common/check.h"
#include "../common/requant_s16.h"
#include "reduce_s16.h"

static inline mcu_status mcu_extreme_s16(int largest, const mcu_mean_s16_params *p, const int16_t *input,
                                         int16_t *output)
{
    const mcu_status status = mcu_reduce_s16_check(p, input, output);
    if (status != MCU_OK) {
        return status;
    }
    const int32_t m15 = mcu_reduce_multiplier_q15(p->multiplier);
    for (int32_t o = 0; o < p->outer; ++o) {
        const int16_t *x = input + (size_t)o * (size_t)p->axis * (size_t)p->inner;
        for (int32_t i = 0; i < p->inner; ++i) {
            const int16_t *xi = x + i;
            int32_t acc = *xi;
            for (int32_t a = 1; a < p->axis; ++a) {
                xi += p->inner;
                if (largest ? *xi > acc : *xi < acc) {
                    acc = *xi;
                }
            }
            output[(size_t)o * (size_t)p->inner + (size_t)i] =
                mcu_clamp_to_s16(mcu_requantize_s64(acc, m15, p->shift), p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_EXTREME_S16_H */
