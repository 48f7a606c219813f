#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/s4.h"
#include "../common/s4_dsp.h"
#include "mve_fc_s4.h"

int32_t mcu_linear_s4_get_buffer_size(const mcu_linear_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_DSP
/* One row of input (in_features a multiple of 8): its column in the pair order of s4_dsp.h with the sentinel
 * after it, then three output channels per pass (mcu_s4_dot_rows3), the last out_features % 3 by the same
 * rows again (recomputed, stored once more with the same value). */
static __attribute__((noinline)) void linear_s4_rows3(const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                                                      const int8_t *input, const int8_t *weight,
                                                      const int32_t *bias, int8_t *output)
{
    _Alignas(8) int16_t col[MCU_S8_COL_MAX + 4];
    const int32_t nin = p->in_features;
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    int32_t sum = 0;
    for (int32_t i = 0; i < nin; i += 8) {
        mcu_s4_expand8(input + i, off2, col + i);
    }
    for (int32_t i = 0; i < nin; ++i) {
        sum += col[i];
    }
    mcu_store_u32(col + nin, MCU_S4_QUAD_SENTINEL);
    const uint32_t correction = (uint32_t)sum * 8u; /* the weights' nibbles are w + 8 */
    const int32_t stride = nin / 2;
    for (int32_t o = 0; o < p->out_features; o += 3) {
        const int32_t o0 = o + 3 <= p->out_features ? o : p->out_features - 3;
        uint32_t sums[3];
        mcu_s4_dot_rows3(col, weight + o0 * stride, stride, nin / 8, sums);
        for (int32_t r = 0; r < 3; ++r) {
            const int32_t oc = o0 + r;
            const uint32_t acc = (bias != NULL ? (uint32_t)bias[oc] : 0u) + sums[r] - correction;
            output[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc), q->multiplier[oc], q->shift[oc],
                                                   p->output_offset, p->act_min, p->act_max);
        }
    }
}

/* Two batch rows at a time as columns in the pair order of s4_dsp.h (two each when nin is odd); a function of
 * its own, so that its columns are not on the stack while linear_s4_rows3 runs. */
static __attribute__((noinline)) void linear_s4_pairs(const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                                                      const int8_t *input, const int8_t *weight,
                                                      const int32_t *bias, int8_t *output)
{
    const int32_t nin = p->in_features;
    _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
    const int odd = nin & 1;
    const int32_t taps = nin + odd;
    const int32_t step = odd ? MCU_S4_PIXEL_B / 2 : MCU_S4_PIXEL_B; /* row r, column lead: (r + 2 lead) steps */
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    for (int32_t b = 0; b < p->batch; b += 2) {
        const int two = b + 1 < p->batch;
        for (int32_t r = 0; r <= two; ++r) {
            const int8_t *x = input + (b + r) * nin;
            for (int32_t lead = 0; lead <= odd; ++lead) {
                int16_t *c = col + (r + 2 * lead) * step;
                int32_t i = 0;
                if (!odd) {
                    for (; i + 8 <= nin; i += 8) {
                        mcu_s4_expand8(x + i, off2, c + i);
                    }
                } else {
                    c[mcu_s4_col_index(lead != 0 ? 0 : nin, taps)] = 0;
                }
                for (; i < nin; ++i) {
                    c[mcu_s4_col_index(i + lead, taps)] = (int16_t)(x[i] + p->input_offset);
                }
            }
        }
        mcu_s4_matrix_pixels(col, col + 2 * step, nin, p->out_features, weight, bias, q, p->output_offset,
                             p->act_min, p->act_max, output + b * p->out_features,
                             two ? output + (b + 1) * p->out_features : NULL);
    }
}
#endif

mcu_status mcu_linear_s4(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, 1);
    const int32_t w_count = mcu_checked_count(w_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 1);
    MCU_REQUIRE(in_count > 0 && w_count > 0 && out_count > 0 && p->out_features <= INT32_MAX / 4,
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(weight, mcu_s4_bytes(w_count), output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(int32_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t nin = p->in_features;
#if MCU_S8_MVE
    if (mcu_mve_linear_s4(p, q, input, weight, bias, output)) { /* fully_connected/mve_fc_s4.h */
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP
    if (p->batch == 1 && nin % 8 == 0 && nin <= MCU_S8_COL_MAX && p->out_features >= 3) {
        linear_s4_rows3(p, q, input, weight, bias, output);
        return MCU_OK;
    }
    if (nin % 2 == 0 ? nin <= MCU_S8_COL_MAX : nin < MCU_S8_COL_MAX / 2) {
        linear_s4_pairs(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
    for (int32_t b = 0; b < p->batch; ++b) {
        const int8_t *x = input + b * nin;
        int8_t *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const uint32_t acc = mcu_s4_dot(bias != NULL ? (uint32_t)bias[o] : 0u, x, p->input_offset, weight,
                                            o * nin, nin);
            y[o] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[o], q->shift[o], p->output_offset,
                                        p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
