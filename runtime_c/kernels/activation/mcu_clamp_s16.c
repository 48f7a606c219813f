#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"

mcu_status mcu_clamp_s16(int32_t size, int32_t act_min, int32_t act_max, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_s16_valid(act_min, act_max), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_bad_alias(input, (size_t)size * sizeof(int16_t), output, (size_t)size * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = mcu_clamp_to_s16(input[i], act_min, act_max);
    }
    return MCU_OK;
}
