#include <stddef.h>
#include <string.h>

#include "mcu/kernels_mixed.h"

#include "../common/act_f32.h"
#include "../common/check.h"

/* Weight j (0..7) of a little-endian word of 4 bytes, sign-extended: compiles to one SBFX. */
#define MCU_NIB(word, j) ((float)((int32_t)((((word) >> (4 * (j))) & 0xFu) ^ 0x8u) - 8))

static inline uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

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
                /* Eight weights from one word (an unaligned load is one LDR): a sign extension, a move
                 * and a convert per weight, no byte loads. */
                for (; k + 4 <= gs / 2; k += 4) {
                    const uint32_t word = load_u32(wg + k);
                    const float *xk = xg + 2 * k;
                    part += xk[0] * MCU_NIB(word, 0);
                    part += xk[1] * MCU_NIB(word, 1);
                    part += xk[2] * MCU_NIB(word, 2);
                    part += xk[3] * MCU_NIB(word, 3);
                    part += xk[4] * MCU_NIB(word, 4);
                    part += xk[5] * MCU_NIB(word, 5);
                    part += xk[6] * MCU_NIB(word, 6);
                    part += xk[7] * MCU_NIB(word, 7);
                }
                for (; k < gs / 2; ++k) {
                    const uint32_t byte = wg[k];
                    part += xg[2 * k] * MCU_NIB(byte, 0);
                    part += xg[2 * k + 1] * MCU_NIB(byte, 1);
                }
                acc += part * s[g];
            }
            y[o] = mcu_act_f32(bias != NULL ? acc + bias[o] : acc, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
