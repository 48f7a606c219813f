#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "softmax_s8.h"

/* Integer bits of the Q12.19 sum of exponentials, as in mcu_softmax_s8. */
#define MCU_SOFTMAX_ACCUM_BITS 12

/* exp(diff * beta * s_in) in Q0.31 for diff <= 0. */
static inline int32_t mcu_masked_softmax_exp(int32_t diff, const mcu_softmax_masked_s8_params *p)
{
    const int32_t scaled = mcu_saturating_rounding_doubling_high_mul(mcu_sat_shl32(diff, p->input_left_shift),
                                                                     p->input_multiplier);
    return mcu_exp_on_negative_values_q5(scaled);
}

/* mcu_softmax_s8 over rows (inner 1) where the positions a constant mask hides are minus infinity: they take
 * no part in the row's maximum and sum and output -128 (probability 0). Row r reads mask row r % mask_rows,
 * so one attention mask serves every head. */
mcu_status mcu_softmax_masked_s8(const mcu_softmax_masked_s8_params *p, const uint8_t *hidden, const int8_t *input,
                                 int8_t *output)
{
    MCU_REQUIRE(p != NULL && hidden != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->input_multiplier >= 0 && p->input_left_shift >= 0 && p->input_left_shift <= 31 &&
                    p->diff_min <= 0 && p->inner == 1 && p->mask_rows > 0,
                MCU_ERR_INVALID_ARG);
    const int32_t dims[2] = {p->outer, p->axis};
    const int32_t count = mcu_checked_count(dims, 2, 1);
    MCU_REQUIRE(count > 0 && p->outer % p->mask_rows == 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->axis <= MCU_SOFTMAX_MAX_AXIS, MCU_ERR_UNSUPPORTED);
    /* Each row is read in full before any of it is written, so exact aliasing is safe. */
    MCU_REQUIRE(!mcu_bad_alias(input, (size_t)count, output, (size_t)count), MCU_ERR_INVALID_ARG);

    const int32_t axis = p->axis;
    for (int32_t o = 0; o < p->outer; ++o) {
        const int8_t *x = input + o * axis;
        const uint8_t *h = hidden + (o % p->mask_rows) * axis;
        int8_t *y = output + o * axis;
        int32_t max = INT32_MIN;
        for (int32_t k = 0; k < axis; ++k) {
            max = !h[k] && x[k] > max ? x[k] : max;
        }
        MCU_REQUIRE(max != INT32_MIN, MCU_ERR_INVALID_ARG); /* a row with every position hidden */
        int32_t sum = 0; /* Q12.19; >= 2^19 because the maximum always counts */
        for (int32_t k = 0; k < axis; ++k) {
            const int32_t diff = x[k] - max;
            if (!h[k] && diff >= p->diff_min) {
                sum += mcu_rounding_divide_by_pot(mcu_masked_softmax_exp(diff, p), MCU_SOFTMAX_ACCUM_BITS);
            }
        }
        const int32_t headroom = mcu_clz32((uint32_t)sum);
        const int32_t shifted_scale =
            mcu_one_over_one_plus_x_for_x_in_0_1(mcu_u32_to_s32(((uint32_t)sum << headroom) - 0x80000000u));
        /* Output scale 1/256: divide by 2^(bits over unit + 31 - 8); above 31 the product rounds to 0. */
        const int32_t out_shift = MCU_SOFTMAX_ACCUM_BITS - headroom + 31 - 8;
        for (int32_t k = 0; k < axis; ++k) {
            const int32_t diff = x[k] - max;
            int32_t v = INT8_MIN;
            if (!h[k] && diff >= p->diff_min) {
                const int32_t prod =
                    mcu_saturating_rounding_doubling_high_mul(shifted_scale, mcu_masked_softmax_exp(diff, p));
                const int32_t r = out_shift > 31 ? 0 : mcu_rounding_divide_by_pot(prod, out_shift);
                v = mcu_clamp_s32(r + INT8_MIN, INT8_MIN, INT8_MAX);
            }
            y[k] = (int8_t)v;
        }
    }
    return MCU_OK;
}
