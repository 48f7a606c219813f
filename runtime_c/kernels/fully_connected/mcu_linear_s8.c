#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/conv_s8_dsp.h"
#include "mve_fc_s8.h"
#include "../common/mve_s8.h"
#include "../common/plain_dot_s8.h"
#include "../common/plain_s8.h"
#include "../common/requant.h"

#if MCU_S8_PLAIN
/* Largest row (input features) of the column: 2,560 bytes of stack. */
#define MCU_S8_PLAIN_FC_COL 640
#endif

int32_t mcu_linear_s8_get_buffer_size(const mcu_linear_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_MVE
/* Batches of more than one row: output features in chunks of MCU_S8_MVE_OC_MAX, the chunk's biases
 * folded once (mve_s8.h), then every batch row, four outputs per step. The output does not overlap
 * the input (checked by the caller), so the order of the writes is free. Not inlined, so that its
 * stack buffer does not add to the DSP path's in the caller's frame. */
static __attribute__((noinline)) void linear_mve_chunks(const mcu_linear_s8_params *p,
                                                        const mcu_per_channel_quant *q, const int8_t *input,
                                                        const int8_t *weight, const int32_t *bias, int8_t *output)
{
    const int32_t nin = p->in_features;
    _Alignas(16) int32_t kbias[MCU_S8_MVE_OC_MAX];
    for (int32_t o = 0; o < p->out_features; o += MCU_S8_MVE_OC_MAX) {
        const int32_t rest = p->out_features - o;
        const int32_t chunk = rest < MCU_S8_MVE_OC_MAX ? rest : MCU_S8_MVE_OC_MAX;
        const int8_t *w = weight + o * nin;
        const mcu_per_channel_quant qc = {q->multiplier + o, q->shift + o};
        mcu_mve_fold_bias(w, nin, chunk, bias != NULL ? bias + o : NULL, p->input_offset, kbias);
        for (int32_t b = 0; b < p->batch; ++b) {
            mcu_mve_matrix_pixel(input + b * nin, nin, chunk, w, kbias, &qc, p->output_offset, p->act_min,
                                 p->act_max, output + b * p->out_features + o);
        }
    }
}
#endif

mcu_status mcu_linear_s8(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
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
#if MCU_S8_MVE
    MCU_REQUIRE(mcu_mve_quant_all_valid(q, p->out_features), MCU_ERR_INVALID_ARG); /* four at a time */
#else
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
#endif
    const size_t out_bytes = (size_t)out_count;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count, output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(int32_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t nin = p->in_features;
#if MCU_S8_MVE
    if (p->batch == 1) {
        if (nin <= MCU_S8_MVE_FC_SMALL) { /* fully_connected/mve_fc_s8.h */
            mcu_mve_fc_small(input, nin, p->out_features, weight, bias, p->input_offset, q, p->output_offset,
                             p->act_min, p->act_max, output);
            return MCU_OK;
        }
        /* One row: each weight row is read once, so its sum comes with its dot product. */
        mcu_mve_linear_row(input, nin, p->out_features, weight, bias, p->input_offset, q, p->output_offset,
                           p->act_min, p->act_max, output);
        return MCU_OK;
    }
    linear_mve_chunks(p, q, input, weight, bias, output);
    return MCU_OK;
#endif
#if MCU_S8_DSP
    if (nin <= MCU_S8_COL_MAX) {
        /* One batch row at a time as a 16-bit column, two outputs per step (see conv_s8_dsp.h); the
         * kernel's second pixel is not stored. One row keeps the code small (linear layers here run
         * on batch 1). */
        _Alignas(8) int16_t col[MCU_S8_COL_MAX];
        for (int32_t b = 0; b < p->batch; ++b) {
            mcu_expand_s8(input + b * nin, nin, p->input_offset, col);
            mcu_matrix_pixels_s8(col, col, nin, p->out_features, weight, bias, q, p->output_offset, p->act_min,
                                 p->act_max, output + b * p->out_features, NULL);
        }
        return MCU_OK;
    }
#endif
#if MCU_S8_WIDE
    for (int32_t b = 0; b < p->batch; ++b) {
        mcu_wide_linear_row(input + b * nin, nin, p->input_offset, p->out_features, weight, bias, q,
                            p->output_offset, p->act_min, p->act_max, output + b * p->out_features);
    }
    return MCU_OK;
#endif
#if MCU_S8_PLAIN
    if (nin <= MCU_S8_PLAIN_FC_COL) {
        /* one batch row at a time as a column of words, two outputs per step (common/plain_dot_s8.h) */
        int32_t col[MCU_S8_PLAIN_FC_COL];
        for (int32_t b = 0; b < p->batch; ++b) {
            mcu_plain_pw_pixel(input + b * nin, nin, p->out_features, p->input_offset, weight, bias, q,
                               p->output_offset, p->act_min, p->act_max, col, output + b * p->out_features);
        }
        return MCU_OK;
    }
#endif
    for (int32_t b = 0; b < p->batch; ++b) {
        const int8_t *x = input + b * nin;
        int8_t *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const int8_t *w = weight + o * nin;
            uint32_t acc = bias != NULL ? (uint32_t)bias[o] : 0u; /* modulo 2^32 */
            for (int32_t i = 0; i < nin; ++i) {
                acc += (uint32_t)((x[i] + p->input_offset) * w[i]);
            }
            y[o] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[o], q->shift[o], p->output_offset,
                                        p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
