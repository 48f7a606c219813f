#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"

mcu_status mcu_clamp_s8(int32_t size, int32_t act_min, int32_t act_max, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_s8_valid(act_min, act_max), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_bad_alias(input, (size_t)size, output, (size_t)size), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = (int8_t)mcu_clamp_s32(input[i], act_min, act_max);
    }
    return MCU_OK;
}
