#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"

/* CMSIS-NN's arm_elementwise_mul_s16 (TFLite Micro's 16x8 MUL): the exact int32 product of two int16 codes
 * (zero points 0; at most 2^30) requantized by s_a s_b / s_out with kernels_s8.h's int32 requantization, then
 * clamped. mcu/reference/s16_act.py computes the same. */
mcu_status mcu_mul_s16(const mcu_mul_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size >= 0 && p->size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_valid(p->out_multiplier, p->out_shift) && mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size * sizeof(int16_t);
    /* Element i is read before it is written: an operand may be the output, exactly; no other overlap. */
    MCU_REQUIRE(((const void *)a == (const void *)output || !mcu_overlaps(a, bytes, output, bytes)) &&
                    ((const void *)b == (const void *)output || !mcu_overlaps(b, bytes, output, bytes)),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < p->size; ++i) {
        const int32_t product = (int32_t)a[i] * b[i];
        output[i] = mcu_clamp_to_s16(mcu_requantize(product, p->out_multiplier, p->out_shift), p->act_min,
                                     p->act_max);
    }
    return MCU_OK;
}
