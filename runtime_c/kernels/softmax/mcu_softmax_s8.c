#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "softmax_s8.h"

/* Integer bits of the Q12.19 sum of exponentials. */
#define MCU_SOFTMAX_ACCUM_BITS 12
/* MCU_SOFTMAX_MAX_AXIS (kernels_s8.h): each term is at most 2^19 (exp(0) in Q12.19), so the int32 sum
 * holds 4095 of them. */

/* exp(diff * beta * s_in) in Q0.31 for diff <= 0. */
static inline int32_t mcu_softmax_exp(int32_t diff, const mcu_softmax_s8_params *p)
{
    const int32_t scaled = mcu_saturating_rounding_doubling_high_mul(mcu_sat_shl32(diff, p->input_left_shift),
                                                                     p->input_multiplier);
    return mcu_exp_on_negative_values_q5(scaled);
}

mcu_status mcu_softmax_s8(const mcu_softmax_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->input_multiplier >= 0 && p->input_left_shift >= 0 && p->input_left_shift <= 31 &&
                    p->diff_min <= 0,
                MCU_ERR_INVALID_ARG);
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    const int32_t count = mcu_checked_count(dims, 3, 1);
    MCU_REQUIRE(count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->axis <= MCU_SOFTMAX_MAX_AXIS, MCU_ERR_UNSUPPORTED);
    /* Each column is read in full before any of it is written, so exact
     * aliasing is safe. */
    MCU_REQUIRE(!mcu_bad_alias(input, (size_t)count, output, (size_t)count), MCU_ERR_INVALID_ARG);

    const int32_t axis = p->axis;
    const int32_t inner = p->inner;
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t i = 0; i < inner; ++i) {
            const int8_t *x = input + o * axis * inner + i;
            int8_t *y = output + o * axis * inner + i;
            int32_t max = x[0];
            for (int32_t k = 1; k < axis; ++k) {
                max = x[k * inner] > max ? x[k * inner] : max;
            }
            int32_t sum = 0; /* Q12.19; >= 2^19 because the maximum always counts */
            for (int32_t k = 0; k < axis; ++k) {
                const int32_t diff = x[k * inner] - max;
                if (diff >= p->diff_min) {
                    sum += mcu_rounding_divide_by_pot(mcu_softmax_exp(diff, p), MCU_SOFTMAX_ACCUM_BITS);
                }
            }
            const int32_t headroom = mcu_clz32((uint32_t)sum);
            const int32_t shifted_scale = mcu_one_over_one_plus_x_for_x_in_0_1(
                mcu_u32_to_s32(((uint32_t)sum << headroom) - 0x80000000u));
            /* Output scale 1/256: divide by 2^(bits over unit + 31 - 8). Above
             * 31 the Q0.31 product (non-negative, below 2^31) rounds to 0. */
            const int32_t out_shift = MCU_SOFTMAX_ACCUM_BITS - headroom + 31 - 8;
            for (int32_t k = 0; k < axis; ++k) {
                const int32_t diff = x[k * inner] - max;
                int32_t v = INT8_MIN;
                if (diff >= p->diff_min) {
                    const int32_t prod =
                        mcu_saturating_rounding_doubling_high_mul(shifted_scale, mcu_softmax_exp(diff, p));
                    const int32_t r = out_shift > 31 ? 0 : mcu_rounding_divide_by_pot(prod, out_shift);
                    v = mcu_clamp_s32(r + INT8_MIN, INT8_MIN, INT8_MAX);
                }
                y[k * inner] = (int8_t)v;
            }
        }
    }
    return MCU_OK;
}
