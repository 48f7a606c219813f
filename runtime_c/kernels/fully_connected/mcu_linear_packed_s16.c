#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check_s16.h"
#include "../common/dot_packed_s16.h"
#include "../common/requant_s16.h"

mcu_status mcu_linear_packed_s16(const mcu_context *ctx, const mcu_linear_s16_params *p,
                                 const mcu_per_channel_quant *q, const int16_t *input, const int32_t *weight,
                                 const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch needed */
    const mcu_status bad = mcu_linear_s16_check(p, q, input, weight, 2, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }

    const int32_t nin = p->in_features;
    const int small = nin <= MCU_S16_PART && mcu_s16_small_layer(bias, q->shift, p->out_features);
    for (int32_t b = 0; b < p->batch; ++b) {
        mcu_s16p_rows(input + (size_t)b * (size_t)nin, weight, nin, p->out_features, bias, q, small, p->act_min,
                      p->act_max, output + (size_t)b * (size_t)p->out_features);
    }
    return MCU_OK;
}
