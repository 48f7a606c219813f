/* PReLU with one slope per channel (or one for all): the channel of element i is
 * (i / inner) % channels, which covers channels-first (inner = spatial size) and channels-last
 * (inner = 1) layouts alike. */
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_prelu_f32(const mcu_prelu_f32_params *p, const float *input, const float *weight, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && weight != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size > 0 && p->size <= INT32_MAX / (int32_t)sizeof(float) && p->channels > 0 && p->inner > 0,
                MCU_ERR_SHAPE);
    const size_t bytes = (size_t)p->size * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(!mcu_overlaps(weight, (size_t)p->channels * sizeof(float), output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < p->size; ++i) {
        const float x = input[i];
        output[i] = x > 0.0f ? x : weight[(i / p->inner) % p->channels] * x;
    }
    return MCU_OK;
}
