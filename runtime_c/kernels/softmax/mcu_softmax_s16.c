#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "softmax_row_s16.h"

/* CMSIS-NN's arm_softmax_s16 (TFLite Micro's int16 SOFTMAX) over any axis, row by row (softmax_row_s16.h). */
mcu_status mcu_softmax_s16(const mcu_softmax_s16_params *p, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    const int32_t count = mcu_checked_count(dims, 3, 2);
    MCU_REQUIRE(count > 0 && p->axis <= MCU_SOFTMAX_S16_MAX_AXIS, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_valid(p->input_multiplier, p->input_shift), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE((const void *)input == (const void *)output || !mcu_overlaps(input, (size_t)count, output, (size_t)count),
                MCU_ERR_INVALID_ARG);
    const int32_t axis = p->axis, inner = p->inner;
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t j = 0; j < inner; ++j) {
            const size_t at = (size_t)o * (size_t)axis * (size_t)inner + (size_t)j;
            mcu_softmax_row_s16(input + at, output + at, (size_t)inner, axis, NULL, p->input_multiplier,
                                p->input_shift);
        }
    }
    return MCU_OK;
}
