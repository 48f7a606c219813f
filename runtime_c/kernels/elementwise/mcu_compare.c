#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_generic.h"

#include "../common/check.h"
#include "strided.h"

static int32_t type_size(int32_t type)
{
    switch (type) {
    case MCU_CMP_FLOAT32: return 4;
    case MCU_CMP_INT32: return 4;
    case MCU_CMP_INT8: return 1;
    case MCU_CMP_UINT8: return 1;
    default: return 0;
    }
}

/* One loop per operand type, so that floats compare as floats (NaN: every comparison but != is
 * false, as in C and PyTorch) and integers as integers, with no widening on cores without a
 * double-precision FPU. */
#define MCU_COMPARE_LOOP(NAME, T)                                                                   \
    static void NAME(int32_t cmp, int32_t total, mcu_strided *w, const T *a, const T *b, uint8_t *out) \
    {                                                                                               \
        for (int32_t i = 0; i < total; ++i) {                                                       \
            const T x = a[w->off[0]];                                                               \
            const T y = b[w->off[1]];                                                               \
            uint8_t r;                                                                              \
            switch (cmp) {                                                                          \
            case MCU_CMP_EQ: r = x == y; break;                                                     \
            case MCU_CMP_NE: r = x != y; break;                                                     \
            case MCU_CMP_LT: r = x < y; break;                                                      \
            case MCU_CMP_LE: r = x <= y; break;                                                     \
            case MCU_CMP_GT: r = x > y; break;                                                      \
            default: r = x >= y; break;                                                             \
            }                                                                                       \
            out[i] = r;                                                                             \
            mcu_strided_next(w);                                                                    \
        }                                                                                           \
    }

MCU_COMPARE_LOOP(compare_f32, float)
MCU_COMPARE_LOOP(compare_i32, int32_t)
MCU_COMPARE_LOOP(compare_i8, int8_t)
MCU_COMPARE_LOOP(compare_u8, uint8_t)

mcu_status mcu_compare(const mcu_compare_params *p, const void *a, const void *b, uint8_t *out)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && out != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(p->cmp >= MCU_CMP_EQ && p->cmp <= MCU_CMP_GE, MCU_ERR_INVALID_ARG);
    const int32_t size = type_size(p->type);
    MCU_REQUIRE(size > 0, MCU_ERR_INVALID_ARG);
    const int32_t total = mcu_checked_count(p->out_shape, p->rank, size);
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    mcu_strided w;
    mcu_strided_init(&w, p->rank, p->out_shape, 2);
    w.strides[0] = p->a_strides;
    w.strides[1] = p->b_strides;
    /* An operand never spans more elements than the output (it broadcasts, it does not grow). */
    const int32_t extent[2] = {total, total};
    MCU_REQUIRE(mcu_strided_in_bounds(&w, extent), MCU_ERR_SHAPE);
    /* The byte output would overwrite wider operands it overlaps before they are read. */
    MCU_REQUIRE(!mcu_overlaps(out, (size_t)total, a, (size_t)mcu_strided_extent(&w, 0) * (size_t)size) &&
                    !mcu_overlaps(out, (size_t)total, b, (size_t)mcu_strided_extent(&w, 1) * (size_t)size),
                MCU_ERR_INVALID_ARG);
    switch (p->type) {
    case MCU_CMP_FLOAT32: compare_f32(p->cmp, total, &w, (const float *)a, (const float *)b, out); break;
    case MCU_CMP_INT32: compare_i32(p->cmp, total, &w, (const int32_t *)a, (const int32_t *)b, out); break;
    case MCU_CMP_INT8: compare_i8(p->cmp, total, &w, (const int8_t *)a, (const int8_t *)b, out); break;
    default: compare_u8(p->cmp, total, &w, (const uint8_t *)a, (const uint8_t *)b, out); break;
    }
    return MCU_OK;
}
