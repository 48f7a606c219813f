#include <stddef.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_concat(int32_t outer, int32_t n_inputs, const int32_t *chunk_bytes,
                      const void *const *inputs, void *output)
{
    MCU_REQUIRE(chunk_bytes != NULL && inputs != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(n_inputs > 0, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(outer > 0, MCU_ERR_SHAPE);
    int64_t row_bytes = 0;
    for (int32_t i = 0; i < n_inputs; ++i) {
        MCU_REQUIRE(inputs[i] != NULL, MCU_ERR_NULL_POINTER);
        MCU_REQUIRE(chunk_bytes[i] >= 0, MCU_ERR_SHAPE);
        row_bytes += chunk_bytes[i];
    }
    MCU_REQUIRE(row_bytes * outer <= INT32_MAX, MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)(row_bytes * outer);
    for (int32_t i = 0; i < n_inputs; ++i) {
        MCU_REQUIRE(!mcu_overlaps(inputs[i], (size_t)chunk_bytes[i] * (size_t)outer, output, out_bytes),
                    MCU_ERR_INVALID_ARG);
    }

    uint8_t *dst = (uint8_t *)output;
    for (int32_t r = 0; r < outer; ++r) {
        for (int32_t i = 0; i < n_inputs; ++i) {
            const int32_t n = chunk_bytes[i];
            /* Skipped rather than passed to memcpy: a zero-size input is
             * legal in a concat, and its pointer need not be dereferenceable. */
            if (n == 0) {
                continue;
            }
            memcpy(dst, (const uint8_t *)inputs[i] + r * n, (size_t)n);
            dst += n;
        }
    }
    return MCU_OK;
}
