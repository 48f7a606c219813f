/* squareplus(x, b) = (x + sqrt(x * x + b)) / 2: a smooth ReLU without exp (So, 2021). The user's own
 * kernels for examples/custom_op.py, in fp32 and int8. Every float operation is one float32 IEEE
 * operation in the order the Python references in custom_op.py take, so int8 results are bit-exact. */
#include <math.h>
#include <stdint.h>

#include "mcu/custom.h"

mcu_status squareplus_f32(const mcu_custom_call *call);
mcu_status squareplus_s8(const mcu_custom_call *call);

static float squareplus(float x, float b)
{
    const float t = x * x;
    return (x + sqrtf(t + b)) * 0.5f;
}

mcu_status squareplus_f32(const mcu_custom_call *call)
{
    const mcu_custom_params *p = call->params;
    if (p->n_inputs != 1 || p->n_args != 1 || p->args[0] < 0.0f) {
        return MCU_ERR_INVALID_ARG;
    }
    const float *x = (const float *)call->inputs[0];
    float *y = (float *)call->output;
    for (int32_t i = 0; i < p->numel; ++i) {
        y[i] = squareplus(x[i], p->args[0]);
    }
    return MCU_OK;
}

/* int8: each of the 256 input codes maps to one output code; the table is built in the scratch buffer
 * (256 bytes, planned by mcu), then the tensor is one lookup per element. */
mcu_status squareplus_s8(const mcu_custom_call *call)
{
    const mcu_custom_params *p = call->params;
    if (p->n_inputs != 1 || p->n_args != 1 || p->args[0] < 0.0f || call->scratch_bytes < 256) {
        return MCU_ERR_INVALID_ARG;
    }
    int8_t *table = (int8_t *)call->scratch;
    const float in_scale = p->input_scale[0];
    const float inv_out = 1.0f / p->output_scale;
    for (int32_t q = -128; q < 128; ++q) {
        const float x = (float)(q - p->input_zero_point[0]) * in_scale;
        const float v = squareplus(x, p->args[0]) * inv_out;
        /* round half away from zero, then the output zero-point, saturated */
        int32_t r = v >= 0.0f ? (int32_t)(v + 0.5f) : -(int32_t)(0.5f - v);
        r += p->output_zero_point;
        table[q + 128] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
    }
    const int8_t *x = (const int8_t *)call->inputs[0];
    int8_t *y = (int8_t *)call->output;
    for (int32_t i = 0; i < p->numel; ++i) {
        y[i] = table[x[i] + 128];
    }
    return MCU_OK;
}
