#include <float.h>
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"

mcu_status mcu_dequantize_s16_f32(int32_t size, float scale, int32_t zero_point, const int16_t *input,
                                  float *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(scale > 0.0f && scale <= FLT_MAX && zero_point >= INT16_MIN && zero_point <= INT16_MAX,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    /* Backwards, output element i only overwrites input bytes that have been read already, so the output
     * may start at the input; no other overlap. */
    MCU_REQUIRE((const void *)input == (const void *)output ||
                    !mcu_overlaps(input, (size_t)size * sizeof(int16_t), output, (size_t)size * sizeof(float)),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = size - 1; i >= 0; --i) {
        output[i] = (float)(input[i] - zero_point) * scale;
    }
    return MCU_OK;
}
