#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/act_f32.h"
#include "../common/check.h"

mcu_status mcu_clamp_f32(int32_t size, float min, float max, const float *input, float *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(size > 0 && size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_act_bounds_valid(min, max), MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)size * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = mcu_act_f32(input[i], min, max);
    }
    return MCU_OK;
}
