#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"

/* out[o][c][r] = in[o][r][c]: each output row gathers one input column, four bytes to a word store (the
 * loads at a stride of cols, the stores in order). */
mcu_status mcu_transpose_s8(int32_t outer, int32_t rows, int32_t cols, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {outer, rows, cols};
    const int32_t count = mcu_checked_count(dims, 3, 1);
    MCU_REQUIRE(count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)count, output, (size_t)count), MCU_ERR_INVALID_ARG);
    const int32_t plane = rows * cols;
    for (int32_t o = 0; o < outer; ++o) {
        const uint8_t *x = (const uint8_t *)input + o * plane;
        uint8_t *y = (uint8_t *)output + o * plane;
        for (int32_t c = 0; c < cols; ++c) {
            const uint8_t *xp = x + c;
            int32_t r = 0;
            for (; r + 4 <= rows; r += 4, xp += 4 * cols, y += 4) {
                const uint32_t word = (uint32_t)xp[0] | (uint32_t)xp[cols] << 8 | (uint32_t)xp[2 * cols] << 16 |
                                      (uint32_t)xp[3 * cols] << 24;
                memcpy(y, &word, sizeof word); /* little-endian: byte k is row r + k */
            }
            for (; r < rows; ++r, xp += cols) {
                *y++ = *xp;
            }
        }
    }
    return MCU_OK;
}
