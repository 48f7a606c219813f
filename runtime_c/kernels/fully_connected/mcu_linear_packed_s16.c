#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/dot_packed_s16.h"
#include "../common/requant_s16.h"

mcu_status mcu_linear_packed_s16(const mcu_context *ctx, const mcu_linear_s16_params *p,
                                 const mcu_per_channel_quant *q, const int16_t *input, const int32_t *weight,
                                 const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_s16_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, 1);
    const int32_t w_count = mcu_checked_count(w_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 1);
    MCU_REQUIRE(in_count > 0 && w_count > 0 && out_count > 0 && out_count <= INT32_MAX / 2 &&
                    in_count <= INT32_MAX / 2 && w_count <= INT32_MAX / 2,
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_s16_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count * sizeof(int16_t), output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(int64_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t nin = p->in_features;
    const int small = nin <= MCU_S16_PART && mcu_s16_small_layer(bias, q->shift, p->out_features);
    for (int32_t b = 0; b < p->batch; ++b) {
        mcu_s16p_rows(input + (size_t)b * (size_t)nin, weight, nin, p->out_features, bias, q, small, p->act_min,
                      p->act_max, output + (size_t)b * (size_t)p->out_features);
    }
    return MCU_OK;
}
