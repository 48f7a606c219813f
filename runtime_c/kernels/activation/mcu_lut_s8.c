#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"

mcu_status mcu_lut_s8(int32_t size, const int8_t *table, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(table != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(size >= 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_bad_alias(input, (size_t)size, output, (size_t)size) &&
                    !mcu_overlaps(table, 256, output, (size_t)size),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        output[i] = table[input[i] + 128];
    }
    return MCU_OK;
}
