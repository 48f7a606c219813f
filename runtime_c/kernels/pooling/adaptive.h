/* Adaptive pooling windows (aten._adaptive_avg_pool2d): output cell i of `out` covers inputs
 * [floor(i * in / out), ceil((i + 1) * in / out)). Int32 arithmetic only (no 64-bit division on the
 * device), valid when mcu_adaptive_fits holds. Internal: static inline. */
#ifndef MCU_KERNELS_INTERNAL_ADAPTIVE_H
#define MCU_KERNELS_INTERNAL_ADAPTIVE_H

#include <stdint.h>

/* (out + 1) * in stays below 2^31 along both axes. */
static inline int mcu_adaptive_fits(int32_t in_h, int32_t in_w, int32_t out_h, int32_t out_w)
{
    return (int64_t)(out_h + 1) * in_h <= INT32_MAX && (int64_t)(out_w + 1) * in_w <= INT32_MAX;
}

static inline int32_t mcu_adaptive_start(int32_t i, int32_t in, int32_t out)
{
    return i * in / out;
}

static inline int32_t mcu_adaptive_end(int32_t i, int32_t in, int32_t out)
{
    return ((i + 1) * in + out - 1) / out;
}

#endif /* MCU_KERNELS_INTERNAL_ADAPTIVE_H */
