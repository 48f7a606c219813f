#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_mixed.h"

#include "../common/act_f32.h"
#include "dyn_quant_f32.h"
#include "linear_mixed.h"

int32_t mcu_linear_dyn_s8_get_buffer_size(const mcu_linear_f32_params *p)
{
    if (p == NULL || p->batch <= 0 || p->in_features <= 0 || (int64_t)p->batch * p->in_features > INT32_MAX) {
        return 0;
    }
    return p->batch * p->in_features;
}

mcu_status mcu_linear_dyn_s8(const mcu_context *ctx, const mcu_linear_f32_params *p, const float *input,
                             const int8_t *weight, const float *w_scale, const float *bias, float *output)
{
    MCU_CHECK(mcu_linear_mixed_check(p, input, weight, w_scale, bias, output));
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->in_features <= 66000, MCU_ERR_UNSUPPORTED); /* keeps the int32 accumulator exact */
    const int32_t count = p->batch * p->in_features;
    MCU_REQUIRE(ctx->size >= count, MCU_ERR_BUFFER_TOO_SMALL);
    int8_t *q = (int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(q, (size_t)count, input, (size_t)count * sizeof(float)) &&
                    !mcu_overlaps(q, (size_t)count, output, (size_t)p->batch * (size_t)p->out_features * sizeof(float)),
                MCU_ERR_INVALID_ARG);

    float scale;
    int32_t zp;
    mcu_dyn_qparams(input, count, &scale, &zp);
    const float inv = 1.0f / scale;
    for (int32_t i = 0; i < count; ++i) {
        q[i] = (int8_t)mcu_dyn_quantize(input[i], inv, zp);
    }
    const int32_t nin = p->in_features;
    for (int32_t b = 0; b < p->batch; ++b) {
        const int8_t *x = q + b * nin;
        float *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const int8_t *w = weight + o * nin;
            int32_t acc = 0; /* |acc| <= 255 * 127 * in_features: no overflow below 66k inputs */
            for (int32_t i = 0; i < nin; ++i) {
                acc += (x[i] - zp) * w[i];
            }
            y[o] = mcu_act_f32((float)acc * (scale * w_scale[o]) + bias[o], p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
