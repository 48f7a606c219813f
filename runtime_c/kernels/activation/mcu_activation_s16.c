#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"
#include "../common/sigmoid_s16.h"

/* CMSIS-NN's arm_nn_activation_s16 (TFLite Micro's int16 LOGISTIC and TANH) with TFLite's general input
 * multiplier: v = (x * input_multiplier + rounding) >> input_shift is the input in steps of 1/(3 * 2^12); |v|
 * reads the int16 sigmoid table (common/sigmoid_s16.h) at |v| >> 9 for sigmoid (at |v| >> 8 for tanh, as
 * 2 sigmoid(2x) - 1), interpolated on the bits below and saturated from entry 255; the result is in Q0.15.
 * A power-of-two input scale gives CMSIS-NN's 3 << left_shift exactly. mcu/reference/s16_act.py computes the same. */

mcu_status mcu_activation_s16(const mcu_activation_s16_params *p, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size >= 0 && p->size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    /* multiplier <= 32767: an int16 code times it, plus the rounding, stays inside int32 */
    MCU_REQUIRE(p->input_multiplier > 0 && p->input_multiplier <= INT16_MAX && p->input_shift >= 0 &&
                    p->input_shift <= 31 && (p->kind == MCU_ACT_S16_SIGMOID || p->kind == MCU_ACT_S16_TANH),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size * sizeof(int16_t);
    MCU_REQUIRE((const void *)input == (const void *)output || !mcu_overlaps(input, bytes, output, bytes),
                MCU_ERR_INVALID_ARG);
    const int sigmoid = p->kind == MCU_ACT_S16_SIGMOID;
    const uint32_t idx_shift = sigmoid ? 9u : 8u;
    const uint32_t frac = (1u << idx_shift) - 1u;
    const uint32_t top = sigmoid ? 0x7FFFu << 10 : 0xFFFFu << 8;
    const int32_t rounding = p->input_shift > 0 ? (int32_t)1 << (p->input_shift - 1) : 0;
    for (int32_t i = 0; i < p->size; ++i) {
        const int32_t v = mcu_asr32(input[i] * p->input_multiplier + rounding, p->input_shift);
        const uint32_t a = v >= 0 ? (uint32_t)v : 0u - (uint32_t)v;
        const uint32_t uh = a >> idx_shift;
        uint32_t r = top;
        if (uh < 255u) {
            const uint32_t ua = mcu_sigmoid_s16_table[uh];
            const uint32_t ub = mcu_sigmoid_s16_table[uh + 1u];
            /* (the table rises: ub >= ua) */
            r = (ua << idx_shift) + (a & frac) * (ub - ua);
        }
        int32_t y;
        if (sigmoid) {
            y = (int32_t)((v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u) >> 10);
        } else {
            /* 2^23 <= r: the result is in [-2^15, 2^15) before the shift's rounding */
            y = v >= 0 ? (int32_t)(r - (1u << 23) + (1u << 7)) >> 8
                       : mcu_asr32((int32_t)(1u << 23) - (int32_t)r + (1 << 7) - 1, 8);
        }
        output[i] = (int16_t)mcu_clamp_s32(y, INT16_MIN, INT16_MAX);
    }
    return MCU_OK;
}
