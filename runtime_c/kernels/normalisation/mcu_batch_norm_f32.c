#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_batch_norm_f32(int32_t outer, int32_t channels, int32_t inner, const float *scale,
                              const float *shift, const float *input, float *output)
{
    MCU_REQUIRE(scale != NULL && shift != NULL && input != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {outer, channels, inner};
    const int32_t total = mcu_checked_count(dims, 3, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    const size_t bytes = (size_t)total * sizeof(float);
    const size_t param_bytes = (size_t)channels * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes) &&
                    !mcu_overlaps(scale, param_bytes, output, bytes) &&
                    !mcu_overlaps(shift, param_bytes, output, bytes),
                MCU_ERR_INVALID_ARG);
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t c = 0; c < channels; ++c) {
            const float s = scale[c];
            const float b = shift[c];
            const int32_t base = (o * channels + c) * inner;
            for (int32_t i = 0; i < inner; ++i) {
                output[base + i] = input[base + i] * s + b;
            }
        }
    }
    return MCU_OK;
}
