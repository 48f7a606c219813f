/* argmax of int16 codes along the middle axis of [outer, reduce, inner], the first index on ties (ours, as
 * CMSIS-NN has no argmax: mcu_argmax_s8's form). Dequantization (scale > 0) is increasing, so this is the argmax
 * of the real values: a w8a16 model takes its argmax without leaving int16. */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"

mcu_status mcu_argmax_s16(int32_t outer, int32_t reduce, int32_t inner, const int16_t *input, int32_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {outer, reduce, inner};
    const int32_t total = mcu_checked_count(dims, 3, 1);
    MCU_REQUIRE(total > 0 && outer <= INT32_MAX / 4 / inner, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)total * sizeof(int16_t), output,
                              (size_t)outer * (size_t)inner * sizeof(int32_t)),
                MCU_ERR_INVALID_ARG);
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t i = 0; i < inner; ++i) {
            const int16_t *x = input + (size_t)o * (size_t)reduce * (size_t)inner + (size_t)i;
            int16_t best = x[0];
            int32_t at = 0;
            for (int32_t r = 1; r < reduce; ++r) {
                const int16_t v = x[(size_t)r * (size_t)inner];
                if (v > best) {
                    best = v;
                    at = r;
                }
            }
            output[(size_t)o * (size_t)inner + (size_t)i] = at;
        }
    }
    return MCU_OK;
}
