/* RMS normalisation of each row of `cols` values, as torch's rms_norm computes it in float32:
 * x * rsqrt(mean(x^2) + eps), then * weight. The mean is the sum in index order divided by cols. */
#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_rms_norm_f32(const mcu_layer_norm_f32_params *p, const float *input, const float *weight,
                            float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rows > 0 && p->cols > 0 && p->rows <= INT32_MAX / p->cols &&
                    p->rows * p->cols <= INT32_MAX / (int32_t)sizeof(float),
                MCU_ERR_SHAPE);
    MCU_REQUIRE(p->eps >= 0.0f, MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->rows * (size_t)p->cols * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    if (weight != NULL) {
        MCU_REQUIRE(!mcu_overlaps(weight, (size_t)p->cols * sizeof(float), output, bytes), MCU_ERR_INVALID_ARG);
    }
    for (int32_t r = 0; r < p->rows; ++r) {
        const float *x = input + (size_t)r * (size_t)p->cols;
        float *y = output + (size_t)r * (size_t)p->cols;
        float sq = 0.0f;
        for (int32_t c = 0; c < p->cols; ++c) {
            sq += x[c] * x[c];
        }
        const float rstd = 1.0f / sqrtf(sq / (float)p->cols + p->eps);
        for (int32_t c = 0; c < p->cols; ++c) {
            const float v = x[c] * rstd;
            y[c] = weight != NULL ? v * weight[c] : v;
        }
    }
    return MCU_OK;
}
