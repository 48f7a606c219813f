#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_index_put(const mcu_index_put_params *p, int32_t elem_size, const int32_t *indices,
                         const void *values, void *state)
{
    MCU_REQUIRE(p != NULL && indices != NULL && values != NULL && state != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(elem_size > 0, MCU_ERR_INVALID_ARG);
    const int32_t state_dims[3] = {p->outer, p->axis, p->inner};
    const int32_t value_dims[3] = {p->outer, p->count, p->inner};
    const int32_t state_count = mcu_checked_count(state_dims, 3, elem_size);
    const int32_t value_count = mcu_checked_count(value_dims, 3, elem_size);
    MCU_REQUIRE(state_count > 0 && value_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(values, (size_t)value_count * (size_t)elem_size, state,
                              (size_t)state_count * (size_t)elem_size) &&
                    !mcu_overlaps(indices, (size_t)p->count * sizeof(int32_t), state,
                                  (size_t)state_count * (size_t)elem_size),
                MCU_ERR_INVALID_ARG);
    /* Every position is checked first: a bad one leaves the state as it was. */
    for (int32_t j = 0; j < p->count; ++j) {
        MCU_REQUIRE(indices[j] >= -p->axis && indices[j] < p->axis, MCU_ERR_INVALID_ARG);
    }
    const size_t row = (size_t)p->inner * (size_t)elem_size;
    const uint8_t *src = (const uint8_t *)values;
    uint8_t *dst = (uint8_t *)state;
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t j = 0; j < p->count; ++j) {
            const int32_t pos = indices[j] < 0 ? indices[j] + p->axis : indices[j];
            memcpy(dst + ((size_t)o * (size_t)p->axis + (size_t)pos) * row, src + ((size_t)o * (size_t)p->count +
                                                                                    (size_t)j) * row, row);
        }
    }
    return MCU_OK;
}
