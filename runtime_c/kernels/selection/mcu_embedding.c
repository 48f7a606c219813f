#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_embedding(const mcu_embedding_params *p, int32_t elem_size, const int32_t *indices,
                         const void *table, void *out)
{
    MCU_REQUIRE(p != NULL && indices != NULL && table != NULL && out != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(elem_size > 0, MCU_ERR_INVALID_ARG);
    const int32_t table_dims[2] = {p->rows, p->cols};
    const int32_t out_dims[2] = {p->count, p->cols};
    const int32_t table_count = mcu_checked_count(table_dims, 2, elem_size);
    const int32_t out_count = mcu_checked_count(out_dims, 2, elem_size);
    MCU_REQUIRE(table_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_count * (size_t)elem_size;
    MCU_REQUIRE(!mcu_overlaps(out, out_bytes, table, (size_t)table_count * (size_t)elem_size) &&
                    !mcu_overlaps(out, out_bytes, indices, (size_t)p->count * sizeof(int32_t)),
                MCU_ERR_INVALID_ARG);
    /* A token or position from outside the table would read past it: refuse before writing. */
    for (int32_t j = 0; j < p->count; ++j) {
        MCU_REQUIRE(indices[j] >= 0 && indices[j] < p->rows, MCU_ERR_INVALID_ARG);
    }
    const size_t row = (size_t)p->cols * (size_t)elem_size;
    for (int32_t j = 0; j < p->count; ++j) {
        memcpy((uint8_t *)out + (size_t)j * row, (const uint8_t *)table + (size_t)indices[j] * row, row);
    }
    return MCU_OK;
}
