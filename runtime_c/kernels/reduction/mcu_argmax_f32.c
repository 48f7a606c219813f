/* argmax along the middle axis of [outer, reduce, inner] with torch's rules: the first index of the
 * largest value, and a NaN beats every number (the first NaN wins). Indices are int32 on the device. */
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_argmax_f32(int32_t outer, int32_t reduce, int32_t inner, const float *input, int32_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {outer, reduce, inner};
    const int32_t total = mcu_checked_count(dims, 3, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)total * sizeof(float), output,
                              (size_t)outer * (size_t)inner * sizeof(int32_t)),
                MCU_ERR_INVALID_ARG);
    for (int32_t o = 0; o < outer; ++o) {
        for (int32_t i = 0; i < inner; ++i) {
            const float *x = input + (size_t)o * (size_t)reduce * (size_t)inner + (size_t)i;
            float best = x[0];
            int32_t at = 0;
            for (int32_t r = 1; r < reduce && best == best; ++r) {
                const float v = x[(size_t)r * (size_t)inner];
                if (v > best || v != v) {
                    best = v;
                    at = r;
                }
            }
            output[(size_t)o * (size_t)inner + (size_t)i] = at;
        }
    }
    return MCU_OK;
}
