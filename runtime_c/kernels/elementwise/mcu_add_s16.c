#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/check_s16.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"
#include "../common/simd_s8.h"

/* CMSIS-NN's arm_elementwise_add_s16 (TFLite Micro's 16x8 ADD): each operand shifted left by left_shift (15)
 * and requantized to the common scale, the sum requantized to the output's; zero points are 0. The int32
 * requantization is kernels_s8.h's (saturating left shift, rounding doubling high multiply); within the
 * parameters the lowering derives (input shifts <= 0, |operand| * 2^15 < 2^31) it is CMSIS-NN's. */
mcu_status mcu_add_s16(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output)
{
    const mcu_status valid = mcu_binary_s16_check(p, a, b, output);
    if (valid != MCU_OK) {
        return valid;
    }
    const int32_t scale = (int32_t)1 << p->left_shift;
    mcu_rq_s32 ra, rb, ro;
    if (mcu_rq_s32_init(&ra, p->a_multiplier, p->a_shift) && mcu_rq_s32_init(&rb, p->b_multiplier, p->b_shift) &&
        mcu_rq_s32_init(&ro, p->out_multiplier, p->out_shift)) {
        /* the shifts the lowering derives (all right shifts): each requantization one multiply-add */
        for (int32_t i = 0; i < p->size; ++i) {
            const int32_t a1 = mcu_rq_s32_apply(&ra, (int32_t)a[i] * scale);
            const int32_t b1 = mcu_rq_s32_apply(&rb, (int32_t)b[i] * scale);
#if MCU_S8_DSP_NATIVE
            int32_t sum;
            __asm__("qadd %0, %1, %2" : "=r"(sum) : "r"(a1), "r"(b1));
#else
            const int32_t sum = mcu_sat_s32((int64_t)a1 + b1);
#endif
            output[i] = mcu_clamp_to_s16(mcu_rq_s32_apply(&ro, sum), p->act_min, p->act_max);
        }
        return MCU_OK;
    }
    for (int32_t i = 0; i < p->size; ++i) {
        const int32_t a1 = mcu_requantize((int32_t)a[i] * scale, p->a_multiplier, p->a_shift);
        const int32_t b1 = mcu_requantize((int32_t)b[i] * scale, p->b_multiplier, p->b_shift);
        const int32_t sum = mcu_sat_s32((int64_t)a1 + b1);
        output[i] = mcu_clamp_to_s16(mcu_requantize(sum, p->out_multiplier, p->out_shift), p->act_min, p->act_max);
    }
    return MCU_OK;
}
