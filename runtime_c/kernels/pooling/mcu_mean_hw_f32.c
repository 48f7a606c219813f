#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_mean_hw_f32(const mcu_shape4 *input_shape, const float *input, float *output)
{
    MCU_REQUIRE(input_shape != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t in_count = mcu_shape4_count(input_shape, (int32_t)sizeof(float));
    MCU_REQUIRE(in_count > 0, MCU_ERR_SHAPE);
    const int32_t c = input_shape->c;
    const int32_t hw = input_shape->h * input_shape->w;
    const size_t out_bytes = (size_t)input_shape->n * (size_t)c * sizeof(float);
    /* The output doubles as the accumulator, so it must not overlap the input. */
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(float), output, out_bytes),
                MCU_ERR_INVALID_ARG);

    /* NHWC keeps channels innermost: sweep pixels in memory order and
     * accumulate a whole channel row at a time. */
    /* Divide rather than multiply by a rounded reciprocal, so a constant
     * input comes back exactly, as with torch.mean. */
    const float count = (float)hw;
    for (int32_t n = 0; n < input_shape->n; ++n) {
        float *acc = output + n * c;
        const float *x = input + n * hw * c;
        for (int32_t ch = 0; ch < c; ++ch) {
            acc[ch] = 0.0f;
        }
        for (int32_t px = 0; px < hw; ++px) {
            for (int32_t ch = 0; ch < c; ++ch) {
                acc[ch] += x[px * c + ch];
            }
        }
        for (int32_t ch = 0; ch < c; ++ch) {
            acc[ch] /= count;
        }
    }
    return MCU_OK;
}
