/* TFLite's int8 PRELU: x - zp_in >= 0 is requantized by the positive multiplier, a negative one is
 * multiplied by its channel's int8 slope first and requantized by the negative multiplier. The channel of
 * element i is (i / inner) % channels, as mcu_prelu_f32 (channels first or last alike). */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"

mcu_status mcu_prelu_s8(const mcu_prelu_s8_params *p, const int8_t *input, const int8_t *alpha, int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && alpha != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size > 0 && p->channels > 0 && p->inner > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->pos_multiplier, p->pos_shift) &&
                    mcu_quant_valid(p->neg_multiplier, p->neg_shift),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size;
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(!mcu_overlaps(alpha, (size_t)p->channels, output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < p->size; ++i) {
        const int32_t x = input[i] + p->input_offset;
        const int32_t y = x >= 0 ? mcu_requantize(x, p->pos_multiplier, p->pos_shift)
                                 : mcu_requantize(x * alpha[(i / p->inner) % p->channels], p->neg_multiplier,
                                                  p->neg_shift);
        const int32_t v = y + p->output_offset;
        output[i] = (int8_t)(v < p->act_min ? p->act_min : v > p->act_max ? p->act_max : v);
    }
    return MCU_OK;
}
