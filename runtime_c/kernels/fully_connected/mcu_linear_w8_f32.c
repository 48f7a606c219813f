#include <stddef.h>

#include "mcu/kernels_mixed.h"

#include "../common/act_f32.h"
#include "linear_mixed.h"

mcu_status mcu_linear_w8_f32(const mcu_linear_f32_params *p, const float *input, const int8_t *weight,
                             const float *w_scale, const float *bias, float *output)
{
    MCU_CHECK(mcu_linear_mixed_check(p, input, weight, w_scale, bias, output));
    const int32_t nin = p->in_features;
    for (int32_t b = 0; b < p->batch; ++b) {
        const float *x = input + b * nin;
        float *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const int8_t *w = weight + o * nin;
            /* The row's scale is applied once after the sum: a quarter of the weight bytes of fp32,
             * and no per-element dequantization. */
            float acc = 0.0f;
            for (int32_t i = 0; i < nin; ++i) {
                acc += x[i] * (float)w[i];
            }
            y[o] = mcu_act_f32(acc * w_scale[o] + bias[o], p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
