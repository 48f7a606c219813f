#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"
#include "strided.h"

mcu_status mcu_where(const mcu_where_params *p, int32_t elem_size, const uint8_t *cond, const void *a,
                     const void *b, void *out)
{
    MCU_REQUIRE(p != NULL && cond != NULL && a != NULL && b != NULL && out != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(elem_size == 1 || elem_size == 2 || elem_size == 4, MCU_ERR_INVALID_ARG);
    const int32_t total = mcu_checked_count(p->out_shape, p->rank, elem_size);
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    mcu_strided w;
    mcu_strided_init(&w, p->rank, p->out_shape, 3);
    w.strides[0] = p->c_strides;
    w.strides[1] = p->a_strides;
    w.strides[2] = p->b_strides;
    const int32_t extent[3] = {total, total, total};
    MCU_REQUIRE(mcu_strided_in_bounds(&w, extent), MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)total * (size_t)elem_size;
    const size_t size = (size_t)elem_size;
    MCU_REQUIRE(!mcu_overlaps(cond, (size_t)mcu_strided_extent(&w, 0), out, out_bytes) &&
                    mcu_strided_alias_ok(p->rank, p->out_shape, p->a_strides, a,
                                         (size_t)mcu_strided_extent(&w, 1) * size, out, out_bytes) &&
                    mcu_strided_alias_ok(p->rank, p->out_shape, p->b_strides, b,
                                         (size_t)mcu_strided_extent(&w, 2) * size, out, out_bytes),
                MCU_ERR_INVALID_ARG);
    uint8_t *dst = (uint8_t *)out;
    for (int32_t i = 0; i < total; ++i) {
        const uint8_t *src = cond[w.off[0]] ? (const uint8_t *)a + (size_t)w.off[1] * size
                                            : (const uint8_t *)b + (size_t)w.off[2] * size;
        memcpy(dst + (size_t)i * size, src, size);
        mcu_strided_next(&w);
    }
    return MCU_OK;
}
