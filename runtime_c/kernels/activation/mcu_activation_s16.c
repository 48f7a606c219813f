#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"

/* CMSIS-NN's arm_nn_activation_s16 (TFLite Micro's int16 LOGISTIC and TANH) with TFLite's general input
 * multiplier: v = (x * input_multiplier + rounding) >> input_shift is the input in steps of 1/(3 * 2^12); |v|
 * reads the table below at |v| >> 9 for sigmoid (at |v| >> 8 for tanh, as 2 sigmoid(2x) - 1), interpolated
 * on the bits below and saturated from entry 255; the result is in Q0.15. A power-of-two input scale gives
 * CMSIS-NN's 3 << left_shift exactly. mcu/reference/s16_act.py computes the same. */

/* sigmoid(k / 24) in 0.16, each entry lowered by half its chord's error at the segment's midpoint, 65535 at
 * the end: mcu/reference/lstm_s16.py derives it (the tests check this copy against it and CMSIS-NN's). */
static const uint16_t mcu_sigmoid_s16_table[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535
};

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
