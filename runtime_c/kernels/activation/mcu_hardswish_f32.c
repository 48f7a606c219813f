#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_hardswish_f32(int32_t size, const float *input, float *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(size > 0 && size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    const size_t bytes = (size_t)size * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        const float x = input[i];
        /* Same operation order as PyTorch (x * relu6(x + 3), then / 6) so the
         * rounding matches; NaN falls through both comparisons and stays NaN. */
        float t = x + 3.0f;
        t = t < 0.0f ? 0.0f : t;
        t = t > 6.0f ? 6.0f : t;
        output[i] = x * t / 6.0f;
    }
    return MCU_OK;
}
