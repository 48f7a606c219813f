/* Variance along the middle axis of [outer, reduce, inner] (aten.var.correction): the mean, then the
 * sum of squared differences (stabler than E[x^2] - E[x]^2) divided by max(0, N - correction), which
 * the compiler passes as `divisor` (0 gives inf or NaN, as in torch). */
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_var_f32(const mcu_var_f32_params *p, const float *input, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {p->outer, p->reduce, p->inner};
    const int32_t total = mcu_checked_count(dims, 3, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->divisor >= 0.0f, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)total * sizeof(float), output,
                              (size_t)p->outer * (size_t)p->inner * sizeof(float)),
                MCU_ERR_INVALID_ARG);
    const float inv_n = 1.0f / (float)p->reduce;
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t i = 0; i < p->inner; ++i) {
            const float *x = input + (size_t)o * (size_t)p->reduce * (size_t)p->inner + (size_t)i;
            float sum = 0.0f;
            for (int32_t r = 0; r < p->reduce; ++r) {
                sum += x[(size_t)r * (size_t)p->inner];
            }
            const float mean = sum * inv_n;
            float sq = 0.0f;
            for (int32_t r = 0; r < p->reduce; ++r) {
                const float d = x[(size_t)r * (size_t)p->inner] - mean;
                sq += d * d;
            }
            output[(size_t)o * (size_t)p->inner + (size_t)i] = sq / p->divisor;
        }
    }
    return MCU_OK;
}
