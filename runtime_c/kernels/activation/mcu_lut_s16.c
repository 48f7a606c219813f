#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"

/* TFLite's int16 LUT read (the one CMSIS-NN's arm_softmax_s16 makes of its tables): entry 256 + (x >> 7) and
 * the next, interpolated on x's low 7 bits. The slope is an int32 (TFLite narrows it to int16, which wraps
 * where adjacent entries differ by more than int16 holds); the result lies between the two entries, so it is
 * an int16. mcu/reference/s16_act.py computes the same and derives the table. */
mcu_status mcu_lut_s16(int32_t size, const int16_t *table, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(table != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    const size_t bytes = (size_t)size * sizeof(int16_t);
    MCU_REQUIRE(((const void *)input == (const void *)output || !mcu_overlaps(input, bytes, output, bytes)) &&
                    !mcu_overlaps(table, MCU_LUT_S16_ENTRIES * sizeof(int16_t), output, bytes),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        const int32_t v = input[i];
        const int32_t index = 256 + mcu_asr32(v, 7);
        const int32_t base = table[index];
        output[i] = (int16_t)(base + mcu_asr32((table[index + 1] - base) * (v & 0x7F) + 64, 7));
    }
    return MCU_OK;
}
