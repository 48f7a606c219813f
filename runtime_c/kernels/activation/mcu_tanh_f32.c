#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_tanh_f32(int32_t size, const float *input, float *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(size > 0 && size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    const size_t bytes = (size_t)size * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = tanhf(input[i]);
    }
    return MCU_OK;
}
