/* Walking an output of up to MCU_MAX_DIMS dims in memory order while up to three broadcasting
 * operands follow with their own strides (size-1 or missing dims have stride 0). Internal: static
 * inline, shared by the selection kernels (compare, where). */
#ifndef MCU_KERNELS_INTERNAL_STRIDED_H
#define MCU_KERNELS_INTERNAL_STRIDED_H

#include <stdint.h>

#include "mcu/tensor.h"

#define MCU_STRIDED_MAX_OPERANDS 3

typedef struct {
    int32_t rank;
    int32_t n;                      /* operands */
    const int32_t *shape;
    const int32_t *strides[MCU_STRIDED_MAX_OPERANDS];
    int32_t idx[MCU_MAX_DIMS];
    int32_t off[MCU_STRIDED_MAX_OPERANDS];
} mcu_strided;

static inline void mcu_strided_init(mcu_strided *w, int32_t rank, const int32_t *shape, int32_t n)
{
    w->rank = rank;
    w->n = n;
    w->shape = shape;
    for (int32_t d = 0; d < MCU_MAX_DIMS; ++d) {
        w->idx[d] = 0;
    }
    for (int32_t k = 0; k < MCU_STRIDED_MAX_OPERANDS; ++k) {
        w->off[k] = 0;
        w->strides[k] = 0;
    }
}

/* Elements operand k spans: its last offset + 1 (strides must be non-negative). */
static inline int64_t mcu_strided_extent(const mcu_strided *w, int32_t k)
{
    int64_t last = 0;
    for (int32_t d = 0; d < w->rank; ++d) {
        last += (int64_t)(w->shape[d] - 1) * w->strides[k][d];
    }
    return last + 1;
}

/* Whether all strides are non-negative and every operand's last element lies within `extent[k]`
 * elements, so that no offset the walk produces can leave its buffer. */
static inline int mcu_strided_in_bounds(const mcu_strided *w, const int32_t *extent)
{
    for (int32_t k = 0; k < w->n; ++k) {
        int64_t last = 0;
        for (int32_t d = 0; d < w->rank; ++d) {
            if (w->strides[k][d] < 0) {
                return 0;
            }
            last += (int64_t)(w->shape[d] - 1) * w->strides[k][d];
        }
        if (last >= extent[k]) {
            return 0;
        }
    }
    return 1;
}

/* Advance to the next output element (the last dim fastest). */
static inline void mcu_strided_next(mcu_strided *w)
{
    for (int32_t d = w->rank - 1; d >= 0; --d) {
        for (int32_t k = 0; k < w->n; ++k) {
            w->off[k] += w->strides[k][d];
        }
        if (++w->idx[d] < w->shape[d]) {
            return;
        }
        for (int32_t k = 0; k < w->n; ++k) {
            w->off[k] -= w->strides[k][d] * w->shape[d];
        }
        w->idx[d] = 0;
    }
}

#endif /* MCU_KERNELS_INTERNAL_STRIDED_H */
