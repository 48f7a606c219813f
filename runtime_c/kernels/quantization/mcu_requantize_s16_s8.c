#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"

mcu_status mcu_requantize_s16_s8(int32_t size, int32_t multiplier, int32_t shift, int32_t output_offset,
                                 int32_t act_min, int32_t act_max, const int16_t *input, int8_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_quant_valid(multiplier, shift) && mcu_output_offset_valid(output_offset) &&
                    mcu_act_s8_valid(act_min, act_max),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    /* writing a narrower output in place is safe only from the front; the planner keeps them apart anyway */
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)size * sizeof(int16_t), output, (size_t)size), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = mcu_requantize_to_s8(input[i], multiplier, shift, output_offset, act_min, act_max);
    }
    return MCU_OK;
}
