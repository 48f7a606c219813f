/* Layer normalisation over the last `cols` elements of each of `rows` rows (PyTorch's
 * native_layer_norm, biased variance), then the optional elementwise affine. Two passes over a
 * row: the mean, then the variance of the differences (stabler than E[x^2] - E[x]^2). */
#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_layer_norm_f32(const mcu_layer_norm_f32_params *p, const float *input, const float *weight,
                              const float *bias, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rows > 0 && p->cols > 0 && p->rows <= INT32_MAX / p->cols &&
                    p->rows * p->cols <= INT32_MAX / (int32_t)sizeof(float),
                MCU_ERR_SHAPE);
    MCU_REQUIRE(p->eps >= 0.0f, MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->rows * (size_t)p->cols * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    const float inv_n = 1.0f / (float)p->cols;
    for (int32_t r = 0; r < p->rows; ++r) {
        const float *x = input + (size_t)r * (size_t)p->cols;
        float *y = output + (size_t)r * (size_t)p->cols;
        float sum = 0.0f;
        for (int32_t c = 0; c < p->cols; ++c) {
            sum += x[c];
        }
        const float mean = sum * inv_n;
        float sq = 0.0f;
        for (int32_t c = 0; c < p->cols; ++c) {
            const float d = x[c] - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / sqrtf(sq * inv_n + p->eps);
        for (int32_t c = 0; c < p->cols; ++c) {
            float v = (x[c] - mean) * rstd;
            if (weight != NULL) {
                v *= weight[c];
            }
            if (bias != NULL) {
                v += bias[c];
            }
            y[c] = v;
        }
    }
    return MCU_OK;
}
