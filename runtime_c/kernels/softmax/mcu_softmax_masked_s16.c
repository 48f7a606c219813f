#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "softmax_row_s16.h"

/* mcu_softmax_s16 over rows (inner 1) where the positions a constant mask hides are minus infinity: they take no
 * part in the row's maximum and sum and output 0 (probability 0). Row r reads mask row r % mask_rows, so one
 * attention mask serves every head. CMSIS-NN's arm_softmax_s16 has no mask; this is its arithmetic on the
 * positions left. */
mcu_status mcu_softmax_masked_s16(const mcu_softmax_masked_s16_params *p, const uint8_t *hidden, const int16_t *input,
                                  int16_t *output)
{
    MCU_REQUIRE(p != NULL && hidden != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[2] = {p->outer, p->axis};
    const int32_t count = mcu_checked_count(dims, 2, 2);
    MCU_REQUIRE(count > 0 && p->inner == 1 && p->axis <= MCU_SOFTMAX_S16_MAX_AXIS && p->mask_rows > 0 &&
                    p->outer % p->mask_rows == 0,
                MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_valid(p->input_multiplier, p->input_shift), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE((const void *)input == (const void *)output || !mcu_overlaps(input, (size_t)count, output, (size_t)count),
                MCU_ERR_INVALID_ARG);
    /* the mask is constant: a row with every position hidden is refused before anything is written */
    const int32_t axis = p->axis;
    for (int32_t r = 0; r < p->mask_rows; ++r) {
        const uint8_t *h = hidden + (size_t)r * (size_t)axis;
        int32_t shown = 0;
        for (int32_t k = 0; k < axis && !shown; ++k) {
            shown = !h[k];
        }
        MCU_REQUIRE(shown, MCU_ERR_INVALID_ARG);
    }
    for (int32_t o = 0; o < p->outer; ++o) {
        const size_t at = (size_t)o * (size_t)axis;
        mcu_softmax_row_s16(input + at, output + at, 1u, axis, hidden + (size_t)(o % p->mask_rows) * (size_t)axis,
                            p->input_multiplier, p->input_shift);
    }
    return MCU_OK;
}
