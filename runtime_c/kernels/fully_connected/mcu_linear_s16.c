#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check_s16.h"
#include "../common/requant_s16.h"
#include "../common/dot_s16.h"

int32_t mcu_linear_s16_get_buffer_size(const mcu_linear_s16_params *p)
{
    (void)p;
    return 0;
}

mcu_status mcu_linear_s16(const mcu_context *ctx, const mcu_linear_s16_params *p, const mcu_per_channel_quant *q,
                          const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch needed */
    const mcu_status bad = mcu_linear_s16_check(p, q, input, weight, 1, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }

    const int32_t nin = p->in_features;
    /* One int32 partial sum a row, the bias added in int32 and the short requantization (the common case). */
    const int small = nin <= MCU_S16_PART && mcu_s16_small_layer(bias, q->shift, p->out_features);
    for (int32_t b = 0; b < p->batch; ++b) {
        const int16_t *x = input + (size_t)b * (size_t)nin;
        int16_t *y = output + (size_t)b * (size_t)p->out_features;
        const int8_t *w = weight;
        int32_t o = 0;
        /* Four rows, then two, at a time share each activation load (the DSP cores' dual multiply-accumulate). */
        for (; small && o + 4 <= p->out_features; o += 4, w += 4 * nin) {
            int32_t part[4];
            mcu_s16_dot4_part(x, w, nin, nin, part);
            for (int32_t j = 0; j < 4; ++j) {
                const int32_t acc = part[j] + (bias != NULL ? (int32_t)bias[o + j] : 0);
                y[o + j] = mcu_clamp_to_s16(mcu_requantize_s16_small(acc, q->multiplier[o + j], q->shift[o + j]),
                                            p->act_min, p->act_max);
            }
        }
        for (; o + 4 <= p->out_features; o += 4, w += 4 * nin) {
            int64_t acc[4];
            for (int32_t j = 0; j < 4; ++j) {
                acc[j] = bias != NULL ? bias[o + j] : 0;
            }
            mcu_s16_dot4(x, w, nin, nin, acc);
            for (int32_t j = 0; j < 4; ++j) {
                const int32_t v =
                    mcu_requantize_s16_acc(acc[j], q->multiplier[o + j], q->shift[o + j]);
                y[o + j] = mcu_clamp_to_s16(v, p->act_min, p->act_max);
            }
        }
        for (; o + 2 <= p->out_features; o += 2, w += 2 * nin) {
            int64_t acc0 = bias != NULL ? bias[o] : 0;
            int64_t acc1 = bias != NULL ? bias[o + 1] : 0;
            mcu_s16_dot2(x, w, w + nin, nin, &acc0, &acc1);
            const int32_t v0 = mcu_requantize_s16_acc(acc0, q->multiplier[o], q->shift[o]);
            const int32_t v1 =
                mcu_requantize_s16_acc(acc1, q->multiplier[o + 1], q->shift[o + 1]);
            y[o] = mcu_clamp_to_s16(v0, p->act_min, p->act_max);
            y[o + 1] = mcu_clamp_to_s16(v1, p->act_min, p->act_max);
        }
        for (; o < p->out_features; ++o, w += nin) {
            int64_t acc = bias != NULL ? bias[o] : 0;
            mcu_s16_dot1(x, w, nin, &acc);
            const int32_t v = mcu_requantize_s16_acc(acc, q->multiplier[o], q->shift[o]);
            y[o] = mcu_clamp_to_s16(v, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
