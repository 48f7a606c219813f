#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_softmax_f32(int32_t outer, int32_t axis, int32_t inner, const float *input, float *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {outer, axis, inner};
    const int32_t total = mcu_checked_count(dims, 3, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    const size_t bytes = (size_t)total * sizeof(float);
    /* Each line reads its input (max, then exp) before writing that same
     * position, so running exactly in place is safe as well. */
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t j = 0; j < inner; ++j) {
            const int32_t base = o * axis * inner + j;
            const float *x = input + base;
            float *y = output + base;
            /* Subtracting the max keeps every exponent <= 0, so nothing
             * overflows and the largest term is exactly 1. */
            float m = x[0];
            for (int32_t k = 1; k < axis; ++k) {
                const float v = x[k * inner];
                m = v > m ? v : m;
            }
            float sum = 0.0f;
            for (int32_t k = 0; k < axis; ++k) {
                const float e = expf(x[k * inner] - m);
                y[k * inner] = e;
                sum += e;
            }
            const float inv = 1.0f / sum;
            for (int32_t k = 0; k < axis; ++k) {
                y[k * inner] *= inv;
            }
        }
    }
    return MCU_OK;
}
