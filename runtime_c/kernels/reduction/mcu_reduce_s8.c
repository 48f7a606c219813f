/* Reduction of the middle axis of [outer, reduce, inner] int8 codes: sum and mean add (q + input_offset)
 * in int32 (the mean's 1/reduce is folded into the multiplier), max and min take the extreme code plus
 * input_offset; then one requantization to the output (mcu_requantize_to_s8). Dequantization is
 * increasing, so max and min of the codes are those of the real values. */
#include <stddef.h>

#include "mcu/kernels_f32.h"
#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"

mcu_status mcu_reduce_s8(const mcu_reduce_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {p->outer, p->reduce, p->inner};
    const int32_t total = mcu_checked_count(dims, 3, 1);
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->reduce <= INT32_MAX / 256, MCU_ERR_UNSUPPORTED); /* the int32 sum of reduce values */
    MCU_REQUIRE(p->op >= 0 && p->op < (int32_t)MCU_REDUCE_COUNT && mcu_input_offset_valid(p->input_offset) &&
                    mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max) &&
                    mcu_quant_valid(p->multiplier, p->shift),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)total, output, (size_t)p->outer * (size_t)p->inner),
                MCU_ERR_INVALID_ARG);
    const int extreme = p->op == (int32_t)MCU_REDUCE_MAX || p->op == (int32_t)MCU_REDUCE_MIN;
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t i = 0; i < p->inner; ++i) {
            const int8_t *x = input + (size_t)o * (size_t)p->reduce * (size_t)p->inner + (size_t)i;
            int32_t acc = x[0];
            for (int32_t r = 1; r < p->reduce; ++r) {
                const int32_t v = x[(size_t)r * (size_t)p->inner];
                if (!extreme) {
                    acc += v;
                } else if (p->op == (int32_t)MCU_REDUCE_MAX ? v > acc : v < acc) {
                    acc = v;
                }
            }
            acc += (extreme ? 1 : p->reduce) * p->input_offset;
            output[(size_t)o * (size_t)p->inner + (size_t)i] =
                mcu_requantize_to_s8(acc, p->multiplier, p->shift, p->output_offset, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
