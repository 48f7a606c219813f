#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"

/* TFLite's int16-to-int16 QUANTIZE: each code times s_in / s_out by the int32 requantization of kernels_s8.h
 * (a code times 2^shift saturates before the multiply, as in every int32 requantization here), clamped.
 * mcu/reference/s16_act.py computes the same. */
mcu_status mcu_requantize_s16(const mcu_requantize_s16_params *p, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size >= 0 && p->size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_valid(p->multiplier, p->shift) && mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size * sizeof(int16_t);
    MCU_REQUIRE((const void *)input == (const void *)output || !mcu_overlaps(input, bytes, output, bytes),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < p->size; ++i) {
        output[i] = mcu_clamp_to_s16(mcu_requantize(input[i], p->multiplier, p->shift), p->act_min, p->act_max);
    }
    return MCU_OK;
}
