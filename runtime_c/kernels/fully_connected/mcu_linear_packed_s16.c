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

    const int32_t nin = p->in_features, nout = p->out_features;
    /* A chunk of channels' requantization constants at a time, for every row of the batch; a chunk with
     * biases or shifts past mcu_s16_small_layer's takes the 64-bit rows. */
    const int32_t whole = nout & ~3;
    const int clamp = mcu_s16p_clamp_kind(p->act_min, p->act_max);
    mcu_s16p_rq t[MCU_S16P_CHUNK / 4];
    for (int32_t o0 = 0; o0 < whole; o0 += MCU_S16P_CHUNK) {
        const int32_t count = whole - o0 < MCU_S16P_CHUNK ? whole - o0 : MCU_S16P_CHUNK;
        const int fast = mcu_s16p_rq_init(t, bias, q, o0, count);
        const int32_t *w = weight + (size_t)o0 * (size_t)nin / 2u;
        const mcu_per_channel_quant qo = {q->multiplier + o0, q->shift + o0};
        for (int32_t b = 0; b < p->batch; ++b) {
            const int16_t *x = input + (size_t)b * (size_t)nin;
            int16_t *y = output + (size_t)b * (size_t)nout + o0;
            if (fast) {
                mcu_s16p_chunk(x, w, nin, t, count, clamp, p->act_min, p->act_max, y);
            } else {
                mcu_s16p_rows(x, w, nin, count, bias != NULL ? bias + o0 : NULL, &qo, p->act_min, p->act_max, y);
            }
        }
    }
    for (int32_t b = 0; b < p->batch && whole < nout; ++b) {
        mcu_s16p_rest_rows(input + (size_t)b * (size_t)nin, weight, nin, whole, nout, bias, q, p->act_min,
                           p->act_max, output + (size_t)b * (size_t)nout);
    }
    return MCU_OK;
}
