#include <stddef.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_copy(int32_t bytes, const void *input, void *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(bytes >= 0, MCU_ERR_SHAPE);
    /* A planner may place a reshape's output on its input: nothing to move. */
    if (input == output || bytes == 0) {
        return MCU_OK;
    }
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)bytes, output, (size_t)bytes), MCU_ERR_INVALID_ARG);
    memcpy(output, input, (size_t)bytes);
    return MCU_OK;
}
