#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/check_s16.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"

/* TFLite Micro's 16x8 SUB (CMSIS-NN has no int16 subtraction): mcu_add_s16's arithmetic, each operand shifted
 * left by left_shift (15) and requantized to the common scale, their difference requantized to the output's;
 * zero points are 0. mcu/reference/s16_act.py computes the same. */
mcu_status mcu_sub_s16(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output)
{
    const mcu_status valid = mcu_binary_s16_check(p, a, b, output);
    if (valid != MCU_OK) {
        return valid;
    }
    const int32_t scale = (int32_t)1 << p->left_shift;
    for (int32_t i = 0; i < p->size; ++i) {
        const int32_t a1 = mcu_requantize((int32_t)a[i] * scale, p->a_multiplier, p->a_shift);
        const int32_t b1 = mcu_requantize((int32_t)b[i] * scale, p->b_multiplier, p->b_shift);
        const int32_t diff = mcu_sat_s32((int64_t)a1 - b1);
        output[i] = mcu_clamp_to_s16(mcu_requantize(diff, p->out_multiplier, p->out_shift), p->act_min, p->act_max);
    }
    return MCU_OK;
}
