#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_mixed.h"

#include "../common/act_f32.h"
#include "../common/check.h"
#include "dyn_quant_f32.h"
#include "../common/simd_s8.h"

int32_t mcu_linear_w4_s8_get_buffer_size(const mcu_linear_w4_params *p)
{
    if (p == NULL || p->in_features <= 0 || p->in_features > INT32_MAX / 2) {
        return 0;
    }
    return 2 * p->in_features;
}

/* The DSP path takes eight weights (one word of packed nibbles) at a time. With every nibble moved to the top
 * of its byte, SXTB16 sign-extends two bytes into 16-bit lanes holding 16 * weight: from the low nibbles
 * the weights (0, 4) and, rotated, (2, 6); from the high ones (1, 5) and (3, 7). The activations of each
 * block of eight are stored in that lane order, x0 x4 x2 x6 x1 x5 x3 x7, so four SMLADs take the block;
 * the sum of 16 * products is divided by 16 exactly at the end of the group. */
static inline int use_dsp(int32_t group_size)
{
    return MCU_S8_DSP && group_size % 8 == 0;
}

static void store_row(int16_t *q, const float *x, int32_t n, float inv, int32_t zp, int dsp)
{
    /* Nibble j of 0x73516240 is where element j of a block of eight goes: 0 4 2 6 1 5 3 7. */
    for (int32_t i = 0; i < n; ++i) {
        const int32_t at = dsp ? (i & ~7) + (int32_t)((0x73516240u >> (4 * (i & 7))) & 0xFu) : i;
        q[at] = (int16_t)(mcu_dyn_quantize(x[i], inv, zp) - zp); /* in [-255, 255] */
    }
}

/* sum over one group of (q - zp) * w: exact in int32 (|term| <= 255 * 8). */
static inline int32_t group_dot(const int16_t *x, const uint8_t *w, int32_t bytes, int dsp)
{
#if MCU_S8_DSP
    if (dsp) {
        uint32_t acc = 0;
        for (int32_t k = 0; k < bytes; k += 4) {
            const uint32_t word = mcu_load_u32(w + k);
            const uint32_t lo = (word << 4) & 0xF0F0F0F0u;
            const uint32_t hi = word & 0xF0F0F0F0u;
            const int16_t *xk = x + 2 * k;
            acc = mcu_smlad(mcu_load_u32(xk), mcu_sxtb16(lo), acc);
            acc = mcu_smlad(mcu_load_u32(xk + 2), mcu_sxtb16_ror8(lo), acc);
            acc = mcu_smlad(mcu_load_u32(xk + 4), mcu_sxtb16(hi), acc);
            acc = mcu_smlad(mcu_load_u32(xk + 6), mcu_sxtb16_ror8(hi), acc);
        }
        return (int32_t)acc / 16;
    }
#endif
    (void)dsp;
    int32_t acc = 0;
    for (int32_t k = 0; k < bytes; ++k) {
        const uint32_t b = w[k];
        acc += x[2 * k] * ((int32_t)((b & 0xFu) ^ 0x8u) - 8) + x[2 * k + 1] * ((int32_t)((b >> 4) ^ 0x8u) - 8);
    }
    return acc;
}

mcu_status mcu_linear_w4_s8(const mcu_context *ctx, const mcu_linear_w4_params *p, const float *input,
                            const uint8_t *weight, const float *w_scale, const float *bias, float *output)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && input != NULL && weight != NULL && w_scale != NULL && output != NULL &&
                    ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_bounds_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t gs = p->group_size;
    MCU_REQUIRE(gs > 0 && gs % 2 == 0 && p->in_features > 0 && p->in_features % gs == 0, MCU_ERR_SHAPE);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, (int32_t)sizeof(float));
    const int32_t out_count = mcu_checked_count(out_dims, 2, (int32_t)sizeof(float));
    MCU_REQUIRE(in_count > 0 && out_count > 0 && mcu_checked_count(w_dims, 2, 1) > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->in_features <= 1000000, MCU_ERR_UNSUPPORTED); /* keeps the int32 group sums exact */
    const int32_t need = mcu_linear_w4_s8_get_buffer_size(p);
    MCU_REQUIRE(ctx->size >= need, MCU_ERR_BUFFER_TOO_SMALL);
    MCU_REQUIRE(((uintptr_t)ctx->buf & 3u) == 0, MCU_ERR_INVALID_ARG);
    int16_t *q = (int16_t *)ctx->buf;
    const size_t in_bytes = (size_t)in_count * sizeof(float);
    const size_t out_bytes = (size_t)out_count * sizeof(float);
    MCU_REQUIRE(!mcu_overlaps(input, in_bytes, output, out_bytes) && !mcu_overlaps(q, (size_t)need, input, in_bytes) &&
                    !mcu_overlaps(q, (size_t)need, output, out_bytes),
                MCU_ERR_INVALID_ARG);
    const int32_t nin = p->in_features;
    const int32_t groups = nin / gs;
    const int dsp = use_dsp(gs);
    for (int32_t b = 0; b < p->batch; ++b) {
        const float *x = input + b * nin;
        float *y = output + b * p->out_features;
        float scale;
        int32_t zp;
        mcu_dyn_qparams(x, nin, &scale, &zp);
        store_row(q, x, nin, 1.0f / scale, zp, dsp);
        for (int32_t o = 0; o < p->out_features; ++o) {
            const uint8_t *w = weight + o * (nin / 2);
            const float *s = w_scale + o * groups;
            float acc = 0.0f;
            for (int32_t g = 0; g < groups; ++g) {
                acc += (float)group_dot(q + g * gs, w + g * (gs / 2), gs / 2, dsp) * s[g];
            }
            const float v = acc * scale;
            y[o] = mcu_act_f32(bias != NULL ? v + bias[o] : v, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
