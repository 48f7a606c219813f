#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_index_select(const mcu_index_select_params *p, int32_t elem_size, const int32_t *indices,
                            const void *input, void *output)
{
    MCU_REQUIRE(p != NULL && indices != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(elem_size > 0, MCU_ERR_INVALID_ARG);
    const int32_t in_dims[3] = {p->outer, p->axis, p->inner};
    const int32_t out_dims[3] = {p->outer, p->count, p->inner};
    const int32_t in_count = mcu_checked_count(in_dims, 3, elem_size);
    const int32_t out_count = mcu_checked_count(out_dims, 3, elem_size);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_count * (size_t)elem_size;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * (size_t)elem_size, output, out_bytes) &&
                    !mcu_overlaps(indices, (size_t)p->count * sizeof(int32_t), output, out_bytes),
                MCU_ERR_INVALID_ARG);
    /* Every index is checked first: a bad one leaves the output as it was. */
    for (int32_t j = 0; j < p->count; ++j) {
        MCU_REQUIRE(indices[j] >= 0 && indices[j] < p->axis, MCU_ERR_INVALID_ARG);
    }
    const size_t row = (size_t)p->inner * (size_t)elem_size;
    const uint8_t *src = (const uint8_t *)input;
    uint8_t *dst = (uint8_t *)output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const uint8_t *plane = src + (size_t)o * (size_t)p->axis * row;
        for (int32_t j = 0; j < p->count; ++j) {
            memcpy(dst, plane + (size_t)indices[j] * row, row);
            dst += row;
        }
    }
    return MCU_OK;
}
