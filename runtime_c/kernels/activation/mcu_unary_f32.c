/* Elementwise math on float32 with the function chosen by a parameter: the activations and
 * math ops a model may use once or twice (GELU, SiLU, ELU, exp, rsqrt, ...), one loop each, in
 * one kernel so that a model links one file for all of them. */
#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

static float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

static float apply(int32_t fn, float x, float alpha, float beta)
{
    switch ((mcu_unary_fn)fn) {
    case MCU_UNARY_GELU: return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case MCU_UNARY_GELU_TANH: return gelu_tanh(x);
    case MCU_UNARY_SILU: return x / (1.0f + expf(-x));
    case MCU_UNARY_HARDSIGMOID: return fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case MCU_UNARY_LEAKY_RELU: return x > 0.0f ? x : alpha * x;
    case MCU_UNARY_ELU: return x > 0.0f ? x : alpha * expm1f(x);
    case MCU_UNARY_SOFTPLUS: return x * beta > alpha ? x : log1pf(expf(beta * x)) / beta;
    case MCU_UNARY_EXP: return expf(x);
    case MCU_UNARY_LOG: return logf(x);
    case MCU_UNARY_SQRT: return sqrtf(x);
    case MCU_UNARY_RSQRT: return 1.0f / sqrtf(x);
    case MCU_UNARY_ABS: return fabsf(x);
    case MCU_UNARY_NEG: return -x;
    case MCU_UNARY_RECIPROCAL: return 1.0f / x;
    case MCU_UNARY_ERF: return erff(x);
    case MCU_UNARY_POW: return alpha == 2.0f ? x * x : powf(x, alpha);
    case MCU_UNARY_LOG_SIGMOID: return x < 0.0f ? x - log1pf(expf(x)) : -log1pf(expf(-x));
    case MCU_UNARY_AFFINE: return x * alpha + beta;
    case MCU_UNARY_RSUB: return beta - x * alpha;
    case MCU_UNARY_MISH: return x * tanhf(log1pf(expf(x)));
    case MCU_UNARY_COUNT: break;
    }
    return 0.0f;
}

mcu_status mcu_unary_f32(const mcu_unary_f32_params *p, const float *input, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size > 0 && p->size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    MCU_REQUIRE(p->fn >= 0 && p->fn < (int32_t)MCU_UNARY_COUNT, MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < p->size; ++i) {
        output[i] = apply(p->fn, input[i], p->alpha, p->beta);
    }
    return MCU_OK;
}
