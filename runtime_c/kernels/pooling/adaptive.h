/* Adaptive pooling windows (aten._adaptive_avg_pool2d): output cell i of `out` covers inputs
 * [floor(i * in / out), ceil((i + 1) * in / out)). Int32 arithmetic only (no 64-bit division on the
 * device), valid when mcu_adaptive_fits holds. Internal: static inline. */
#ifndef MCU_KERNELS_INTERNAL_ADAPTIVE_H
#define MCU_KERNELS_INTERNAL_ADAPTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/status.h"
#include "../common/check.h"

/* (out + 1) * in stays below 2^31 along both axes. */
static inline int mcu_adaptive_fits(int32_t in_h, int32_t in_w, int32_t out_h, int32_t out_w)
{
    return (int64_t)(out_h + 1) * in_h <= INT32_MAX && (int64_t)(out_w + 1) * in_w <= INT32_MAX;
}

/* The most values a window holds: fewer than in / out + 2 along each axis (valid when mcu_adaptive_fits). */
static inline int64_t mcu_adaptive_window_max(int32_t in_h, int32_t in_w, int32_t out_h, int32_t out_w)
{
    return (int64_t)(in_h / out_h + 2) * (in_w / out_w + 2);
}

/* 16-bit windows: 65,534 values of magnitude up to 32,768, with half of their count added, stay inside int32. */
#define MCU_ADAPTIVE_S16_WINDOW_MAX 65534

static inline int32_t mcu_adaptive_start(int32_t i, int32_t in, int32_t out)
{
    return i * in / out;
}

static inline int32_t mcu_adaptive_end(int32_t i, int32_t in, int32_t out)
{
    return ((i + 1) * in + out - 1) / out;
}

/* What every adaptive pool checks before it reads: its input [outer, in_h, in_w, inner] and output
 * [outer, out_h, out_w, inner] of `elem` bytes a value count inside int32, do not overlap (a cell reads
 * inputs past the one it writes over), and their windows fit int32 arithmetic. */
static inline mcu_status mcu_adaptive_check(const int32_t in_dims[4], int32_t out_h, int32_t out_w, const void *input,
                                            const void *output, int32_t elem)
{
    const int32_t out_dims[4] = {in_dims[0], out_h, out_w, in_dims[3]};
    const int32_t in_count = mcu_checked_count(in_dims, 4, elem);
    const int32_t out_count = mcu_checked_count(out_dims, 4, elem);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * (size_t)elem, output, (size_t)out_count * (size_t)elem),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_adaptive_fits(in_dims[1], in_dims[2], out_h, out_w), MCU_ERR_SHAPE);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_ADAPTIVE_H */
