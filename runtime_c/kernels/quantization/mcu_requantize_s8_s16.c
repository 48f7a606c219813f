#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"

mcu_status mcu_requantize_s8_s16(int32_t size, int32_t input_offset, int32_t multiplier, int32_t shift,
                                 int32_t act_min, int32_t act_max, const int8_t *input, int16_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_input_offset_valid(input_offset) && mcu_quant_valid(multiplier, shift) &&
                    mcu_act_s16_valid(act_min, act_max),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    /* the output is wider than the input: even exact aliasing would overwrite codes not read yet */
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)size, output, (size_t)size * sizeof(int16_t)), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = (int16_t)mcu_clamp_s32(mcu_requantize(input[i] + input_offset, multiplier, shift), act_min,
                                           act_max);
    }
    return MCU_OK;
}
