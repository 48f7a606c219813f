#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"
#include "reduce_s16.h"

/* Ours: CMSIS-NN and TFLite Micro have no 16x8 mean. The 16x8 conventions of the other s16 kernels: the
 * exact 64-bit sum, requantized once by s_in / (s_out * count) with the Q15 multiplier of kernels_s16.h. */
mcu_status mcu_mean_s16(const mcu_mean_s16_params *p, const int16_t *input, int16_t *output)
{
    const mcu_status status = mcu_reduce_s16_check(p, input, output);
    if (status != MCU_OK) {
        return status;
    }
    const int32_t m15 = mcu_reduce_multiplier_q15(p->multiplier);
    for (int32_t o = 0; o < p->outer; ++o) {
        const int16_t *x = input + (size_t)o * (size_t)p->axis * (size_t)p->inner;
        for (int32_t i = 0; i < p->inner; ++i) {
            int64_t sum = 0;
            const int16_t *xi = x + i;
            for (int32_t a = 0; a < p->axis; ++a, xi += p->inner) {
                sum += *xi;
            }
            output[(size_t)o * (size_t)p->inner + (size_t)i] =
                mcu_clamp_to_s16(mcu_requantize_s64(sum, m15, p->shift), p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
