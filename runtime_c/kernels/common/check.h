/* Argument checks shared by the kernels. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_CHECK_H
#define MCU_KERNELS_INTERNAL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "mcu/tensor.h"

#include "requant.h"

/* Element count of `rank` dims, or -1 when a dim is not positive or the
 * tensor would not fit in INT32_MAX bytes. Kernels index with int32_t, so
 * rejecting such shapes up front keeps every later offset in range. */
static inline int32_t mcu_checked_count(const int32_t *dims, int32_t rank, int32_t elem_size)
{
    int64_t count = 1;
    for (int32_t i = 0; i < rank; ++i) {
        if (dims[i] <= 0) {
            return -1;
        }
        count *= dims[i];
        if (count * elem_size > INT32_MAX) {
            return -1;
        }
    }
    return (int32_t)count;
}

static inline int32_t mcu_shape4_count(const mcu_shape4 *s, int32_t elem_size)
{
    const int32_t dims[4] = {s->n, s->h, s->w, s->c};
    return mcu_checked_count(dims, 4, elem_size);
}

/* Whether byte ranges [a, a+na) and [b, b+nb) overlap. Compared as integers
 * because relational comparison of pointers into different objects is
 * undefined behaviour in C. */
static inline int mcu_overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    const uintptr_t pa = (uintptr_t)a;
    const uintptr_t pb = (uintptr_t)b;
    return na != 0 && nb != 0 && pa < pb + nb && pb < pa + na;
}

/* Window kernels (convolution, depthwise, pooling) write output pixels in
 * memory order, each after reading its window, so an output that starts at or
 * before its input may overlap it by as much as the memory planner's overlap
 * contract (mcu/contracts.py) allows. The kernel cannot afford to re-derive
 * that bound; it refuses the overlaps no contract ever allows: an output that
 * starts at or after its input. */
static inline int mcu_bad_window_overlap(const void *in, size_t in_bytes, const void *out, size_t out_bytes)
{
    return mcu_overlaps(in, in_bytes, out, out_bytes) && (uintptr_t)out >= (uintptr_t)in;
}

/* Elementwise kernels read each element before writing the same index, so
 * exact aliasing is safe; a shifted overlap would read already-written data. */
static inline int mcu_bad_alias(const void *in, size_t in_bytes, const void *out, size_t out_bytes)
{
    return in != out && mcu_overlaps(in, in_bytes, out, out_bytes);
}

/* A broadcasting operand may share memory with the output only when it is the output itself laid out
 * contiguously over `shape` (in the output's memory order): then every element is read just before the
 * same element is written. Size-1 dims never move, so their stride is free. */
static inline int mcu_strided_alias_ok(int32_t rank, const int32_t *shape, const int32_t *strides,
                                       const void *operand, size_t operand_bytes, const void *out, size_t out_bytes)
{
    if (!mcu_overlaps(operand, operand_bytes, out, out_bytes)) {
        return 1;
    }
    if (operand != out) {
        return 0;
    }
    int64_t contiguous = 1;
    for (int32_t i = rank - 1; i >= 0; --i) {
        if (shape[i] != 1 && strides[i] != contiguous) {
            return 0;
        }
        contiguous *= shape[i];
    }
    return 1;
}

/* A sliding window over `in` positions padded by pad_before/pad_after must
 * keep every coordinate the kernel computes ((out-1)*stride + (k-1)*dilation,
 * in + pads) inside int32_t; absurd parameters would otherwise overflow
 * silently. Expects out >= 1 and non-negative pads. */
static inline int mcu_window_fits(int32_t in, int32_t out, int32_t stride, int32_t kernel,
                                  int32_t dilation, int32_t pad_before, int32_t pad_after)
{
    const int64_t last = (int64_t)(out - 1) * stride + (int64_t)(kernel - 1) * dilation;
    return last < INT32_MAX && (int64_t)in + pad_before + pad_after < INT32_MAX;
}

/* NaN bounds would make the clamp a silent no-op; reject them instead. Bounds
 * with min > max are allowed and behave like torch.clamp (everything -> max). */
static inline int mcu_act_bounds_valid(float lo, float hi)
{
    return lo == lo && hi == hi;
}

/* The fields of an int8 convolution's params that every convolution kernel requires: a real
 * window (positive kernel, stride, dilation, groups; padding not negative), offsets of int8
 * zero-points and an activation range inside int8. */
static inline int mcu_conv2d_s8_params_valid(const mcu_conv2d_s8_params *p)
{
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
           p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->groups > 0 &&
           mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max);
}

#endif /* MCU_KERNELS_INTERNAL_CHECK_H */
