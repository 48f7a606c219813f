#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/act_f32.h"
#include "../common/check.h"

mcu_status mcu_linear_f32(const mcu_linear_f32_params *p, const float *input,
                          const float *weight, const float *bias, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_bounds_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, (int32_t)sizeof(float));
    const int32_t out_count = mcu_checked_count(out_dims, 2, (int32_t)sizeof(float));
    const int32_t w_count = mcu_checked_count(w_dims, 2, (int32_t)sizeof(float));
    MCU_REQUIRE(in_count > 0 && out_count > 0 && w_count > 0, MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_count * sizeof(float);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(float), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count * sizeof(float), output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(float), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t nin = p->in_features;
    for (int32_t b = 0; b < p->batch; ++b) {
        const float *x = input + b * nin;
        float *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const float *w = weight + o * nin;
            float acc = bias != NULL ? bias[o] : 0.0f;
            for (int32_t i = 0; i < nin; ++i) {
                acc += x[i] * w[i];
            }
            y[o] = mcu_act_f32(acc, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
