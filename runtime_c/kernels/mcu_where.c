#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_generic.h"

#include "internal/check.h"
#include "internal/strided.h"

/* Exact aliasing (operand == out, same strides as a contiguous output) is safe: each element is read
 * before the same element is written. Anything else that overlaps is refused. */
static int alias_ok(const mcu_where_params *p, const void *operand, const int32_t *strides, size_t bytes,
                    const void *out, size_t out_bytes)
{
    if (!mcu_overlaps(operand, bytes, out, out_bytes)) {
        return 1;
    }
    if (operand != out) {
        return 0;
    }
    int64_t contiguous = 1;
    for (int32_t d = p->rank - 1; d >= 0; --d) {
        if (p->out_shape[d] != 1 && strides[d] != contiguous) {
            return 0;
        }
        contiguous *= p->out_shape[d];
    }
    return 1;
}

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
                    alias_ok(p, a, p->a_strides, (size_t)mcu_strided_extent(&w, 1) * size, out, out_bytes) &&
                    alias_ok(p, b, p->b_strides, (size_t)mcu_strided_extent(&w, 2) * size, out, out_bytes),
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
