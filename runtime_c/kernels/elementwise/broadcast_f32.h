/* The strided broadcast loop behind add/sub/mul/div. Internal: static inline
 * only; each operator's file instantiates it with a constant op so the
 * compiler folds the switch out of the inner loop. */
#ifndef MCU_KERNELS_INTERNAL_BROADCAST_F32_H
#define MCU_KERNELS_INTERNAL_BROADCAST_F32_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_f32.h"
#include "../common/act_f32.h"
#include "../common/check.h"

typedef enum {
    MCU_BINARY_ADD,
    MCU_BINARY_MAX,
    MCU_BINARY_MIN,
    MCU_BINARY_SUB,
    MCU_BINARY_MUL,
    MCU_BINARY_DIV
} mcu_binary_op;

static inline float mcu_binary_apply_f32(mcu_binary_op op, float a, float b)
{
    switch (op) {
    case MCU_BINARY_ADD: return a + b;
    case MCU_BINARY_MAX: return (a > b || a != a) ? a : b; /* torch.maximum propagates NaN */
    case MCU_BINARY_MIN: return (a < b || a != a) ? a : b;
    case MCU_BINARY_SUB: return a - b;
    case MCU_BINARY_MUL: return a * b;
    case MCU_BINARY_DIV: return a / b;
    }
    return 0.0f;
}

/* One contiguous output row. The unit/zero stride cases are split out because
 * they cover nearly every real graph (same-shape, per-channel and scalar
 * operands) and let the compiler drop the stride multiplies. */
static inline void mcu_binary_row_f32(mcu_binary_op op, int32_t n, const float *a, int32_t sa,
                                      const float *b, int32_t sb, float *out, float lo, float hi)
{
    if (sa == 1 && sb == 1) {
        for (int32_t i = 0; i < n; ++i) {
            out[i] = mcu_act_f32(mcu_binary_apply_f32(op, a[i], b[i]), lo, hi);
        }
    } else if (sa == 1 && sb == 0) {
        const float bv = b[0];
        for (int32_t i = 0; i < n; ++i) {
            out[i] = mcu_act_f32(mcu_binary_apply_f32(op, a[i], bv), lo, hi);
        }
    } else if (sa == 0 && sb == 1) {
        const float av = a[0];
        for (int32_t i = 0; i < n; ++i) {
            out[i] = mcu_act_f32(mcu_binary_apply_f32(op, av, b[i]), lo, hi);
        }
    } else {
        for (int32_t i = 0; i < n; ++i) {
            out[i] = mcu_act_f32(mcu_binary_apply_f32(op, a[i * sa], b[i * sb]), lo, hi);
        }
    }
}

/* Bytes spanned by an operand with these strides, or -1 if it does not fit
 * int32_t (negative strides are rejected by the caller first). */
static inline int64_t mcu_binary_extent_bytes(const mcu_binary_f32_params *p, const int32_t *strides)
{
    int64_t last = 0;
    for (int32_t i = 0; i < p->rank; ++i) {
        last += (int64_t)(p->out_shape[i] - 1) * strides[i];
    }
    const int64_t bytes = (last + 1) * (int64_t)sizeof(float);
    return bytes > INT32_MAX ? -1 : bytes;
}

static inline mcu_status mcu_binary_f32(mcu_binary_op op, const mcu_binary_f32_params *p,
                                        const float *a, const float *b, float *out)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && out != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_act_bounds_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t total = mcu_checked_count(p->out_shape, p->rank, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    for (int32_t i = 0; i < p->rank; ++i) {
        MCU_REQUIRE(p->a_strides[i] >= 0 && p->b_strides[i] >= 0, MCU_ERR_SHAPE);
    }
    const int64_t a_bytes = mcu_binary_extent_bytes(p, p->a_strides);
    const int64_t b_bytes = mcu_binary_extent_bytes(p, p->b_strides);
    MCU_REQUIRE(a_bytes > 0 && b_bytes > 0, MCU_ERR_SHAPE);
    const int64_t out_bytes = (int64_t)total * (int64_t)sizeof(float);
    MCU_REQUIRE(mcu_strided_alias_ok(p->rank, p->out_shape, p->a_strides, a, (size_t)a_bytes, out,
                                     (size_t)out_bytes) &&
                    mcu_strided_alias_ok(p->rank, p->out_shape, p->b_strides, b, (size_t)b_bytes, out,
                                         (size_t)out_bytes),
                MCU_ERR_INVALID_ARG);

    /* Drop size-1 dims and merge neighbours that both operands traverse
     * contiguously, so the inner row is as long as possible and the
     * odometer below runs rarely. */
    int32_t shape[MCU_MAX_DIMS];
    int32_t sa[MCU_MAX_DIMS];
    int32_t sb[MCU_MAX_DIMS];
    int32_t r = 0;
    for (int32_t i = 0; i < p->rank; ++i) {
        const int32_t n = p->out_shape[i];
        if (n == 1) {
            continue;
        }
        if (r > 0 && sa[r - 1] == p->a_strides[i] * n && sb[r - 1] == p->b_strides[i] * n) {
            shape[r - 1] *= n;
            sa[r - 1] = p->a_strides[i];
            sb[r - 1] = p->b_strides[i];
        } else {
            shape[r] = n;
            sa[r] = p->a_strides[i];
            sb[r] = p->b_strides[i];
            ++r;
        }
    }
    if (r == 0) {
        shape[0] = 1;
        sa[0] = 0;
        sb[0] = 0;
        r = 1;
    }

    const int32_t inner = shape[r - 1];
    const int32_t rows = total / inner;
    int32_t idx[MCU_MAX_DIMS] = {0};
    int32_t a_off = 0;
    int32_t b_off = 0;
    for (int32_t row = 0; row < rows; ++row) {
        mcu_binary_row_f32(op, inner, a + a_off, sa[r - 1], b + b_off, sb[r - 1], out, p->act_min,
                           p->act_max);
        out += inner;
        for (int32_t d = r - 2; d >= 0; --d) {
            a_off += sa[d];
            b_off += sb[d];
            if (++idx[d] < shape[d]) {
                break;
            }
            a_off -= sa[d] * shape[d];
            b_off -= sb[d] * shape[d];
            idx[d] = 0;
        }
    }
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_BROADCAST_F32_H */
