#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"

mcu_status mcu_embedding_s8_f32(const mcu_embedding_params *p, const int32_t *indices, const int8_t *table,
                                const float *scales, float *out)
{
    MCU_REQUIRE(p != NULL && indices != NULL && table != NULL && scales != NULL && out != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t table_dims[2] = {p->rows, p->cols};
    const int32_t out_dims[2] = {p->count, p->cols};
    const int32_t table_count = mcu_checked_count(table_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, (int32_t)sizeof(float));
    MCU_REQUIRE(table_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_count * sizeof(float);
    MCU_REQUIRE(!mcu_overlaps(out, out_bytes, indices, (size_t)p->count * sizeof(int32_t)) &&
                    !mcu_overlaps(out, out_bytes, scales, (size_t)p->rows * sizeof(float)) &&
                    !mcu_overlaps(out, out_bytes, table, (size_t)table_count),
                MCU_ERR_INVALID_ARG);
    for (int32_t j = 0; j < p->count; ++j) {
        MCU_REQUIRE(indices[j] >= 0 && indices[j] < p->rows, MCU_ERR_INVALID_ARG);
    }
    for (int32_t j = 0; j < p->count; ++j) {
        const int8_t *row = table + (size_t)indices[j] * (size_t)p->cols;
        const float scale = scales[indices[j]];
        float *dst = out + (size_t)j * (size_t)p->cols;
        for (int32_t c = 0; c < p->cols; ++c) {
            dst[c] = (float)row[c] * scale;
        }
    }
    return MCU_OK;
}
