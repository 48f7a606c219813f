#include <stddef.h>

#include "mcu/kernels_mixed.h"

#include "internal/act_f32.h"
#include "internal/check.h"

/* Both weights of a byte as floats, looked up in one 2 KiB table of flash: an add and two loads where the
 * conversion would take a sign extension, a move and a convert per weight. Nibbles 8..15 are -8..-1. */
#define MCU_I4(n) ((float)((int32_t)((n) ^ 0x8u) - 8))
#define MCU_P(b) {MCU_I4((b) & 0xFu), MCU_I4((b) >> 4)}
#define MCU_P4(b) MCU_P(b), MCU_P((b) + 1u), MCU_P((b) + 2u), MCU_P((b) + 3u)
#define MCU_P16(b) MCU_P4(b), MCU_P4((b) + 4u), MCU_P4((b) + 8u), MCU_P4((b) + 12u)
#define MCU_P64(b) MCU_P16(b), MCU_P16((b) + 16u), MCU_P16((b) + 32u), MCU_P16((b) + 48u)
static const float MCU_INT4_PAIRS[256][2] = {MCU_P64(0u), MCU_P64(64u), MCU_P64(128u), MCU_P64(192u)};
#undef MCU_P64
#undef MCU_P16
#undef MCU_P4
#undef MCU_P
#undef MCU_I4

mcu_status mcu_linear_w4_f32(const mcu_linear_w4_params *p, const float *input, const uint8_t *weight,
                             const float *w_scale, const float *bias, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && weight != NULL && w_scale != NULL && output != NULL,
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
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(float), output, (size_t)out_count * sizeof(float)),
                MCU_ERR_INVALID_ARG);
    const int32_t nin = p->in_features;
    const int32_t groups = nin / gs;
    const int32_t row_bytes = nin / 2;
    for (int32_t b = 0; b < p->batch; ++b) {
        const float *x = input + b * nin;
        float *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const uint8_t *w = weight + o * row_bytes;
            const float *s = w_scale + o * groups;
            /* Each group's sum is scaled once: one multiply per group, not per weight. */
            float acc = 0.0f;
            for (int32_t g = 0; g < groups; ++g) {
                const float *xg = x + g * gs;
                const uint8_t *wg = w + g * (gs / 2);
                float part = 0.0f;
                int32_t k = 0;
                for (; k + 2 <= gs / 2; k += 2) { /* two bytes a turn: the loop's own cost halves */
                    const float *p0 = MCU_INT4_PAIRS[wg[k]];
                    const float *p1 = MCU_INT4_PAIRS[wg[k + 1]];
                    part += xg[2 * k] * p0[0];
                    part += xg[2 * k + 1] * p0[1];
                    part += xg[2 * k + 2] * p1[0];
                    part += xg[2 * k + 3] * p1[1];
                }
                if (k < gs / 2) {
                    const float *p0 = MCU_INT4_PAIRS[wg[k]];
                    part += xg[2 * k] * p0[0];
                    part += xg[2 * k + 1] * p0[1];
                }
                acc += part * s[g];
            }
            y[o] = mcu_act_f32(bias != NULL ? acc + bias[o] : acc, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
