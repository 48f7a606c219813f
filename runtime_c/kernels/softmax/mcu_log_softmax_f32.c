/* log_softmax along the middle axis of [outer, axis, inner]: x - max - log(sum(exp(x - max))), the
 * max subtracted first so no exponent overflows and the largest term is exactly 1. */
#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_log_softmax_f32(int32_t outer, int32_t axis, int32_t inner, const float *input, float *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {outer, axis, inner};
    const int32_t total = mcu_checked_count(dims, 3, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    const size_t bytes = (size_t)total * sizeof(float);
    /* Each line is read whole (max, sum) before any of it is written. */
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t j = 0; j < inner; ++j) {
            const size_t base = (size_t)o * (size_t)axis * (size_t)inner + (size_t)j;
            const float *x = input + base;
            float *y = output + base;
            float m = x[0];
            for (int32_t k = 1; k < axis; ++k) {
                const float v = x[(size_t)k * (size_t)inner];
                m = v > m ? v : m;
            }
            float sum = 0.0f;
            for (int32_t k = 0; k < axis; ++k) {
                sum += expf(x[(size_t)k * (size_t)inner] - m);
            }
            const float shift = m + logf(sum);
            for (int32_t k = 0; k < axis; ++k) {
                y[(size_t)k * (size_t)inner] = x[(size_t)k * (size_t)inner] - shift;
            }
        }
    }
    return MCU_OK;
}
