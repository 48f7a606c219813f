/* Sliding-window helpers shared by convolution and pooling. Internal: static
 * inline only. */
#ifndef MCU_KERNELS_INTERNAL_WINDOW_H
#define MCU_KERNELS_INTERNAL_WINDOW_H

#include <stdint.h>

/* Taps t in [*lo, *hi) of a window starting at input coordinate `start` with
 * `kernel` taps spaced `dilation` apart that land inside [0, size). Computing
 * the range once per output position keeps bounds tests out of the inner
 * loops; the range is empty (lo == hi) when no tap is inside. */
static inline void mcu_window_taps(int32_t start, int32_t kernel, int32_t dilation, int32_t size,
                                   int32_t *lo, int32_t *hi)
{
    /* Written as (x - 1) / d + 1 rather than (x + d - 1) / d so that nothing
     * can pass INT32_MAX for a huge dilation: callers have checked that
     * size + padding fits. */
    int32_t first = start < 0 ? (-start - 1) / dilation + 1 : 0;
    int32_t last = size > start ? (size - start - 1) / dilation + 1 : 0;
    last = last < kernel ? last : kernel;
    first = first < last ? first : last;
    *lo = first;
    *hi = last;
}

/* PyTorch's pooling output size for one spatial dim (pool_output_size): the
 * floor formula, or with ceil_mode one more window unless that window would
 * start inside the bottom/right padding. Returns 0 when the window does not
 * fit the padded input at all. Callers check mcu_window_fits first, so the
 * span fits int32_t and only 32-bit divisions are needed (no libgcc calls). */
static inline int32_t mcu_pool_out_size(int32_t in, int32_t kernel, int32_t stride,
                                        int32_t dilation, int32_t pad_before, int32_t pad_after,
                                        int ceil_mode)
{
    const int32_t span = in + pad_before + pad_after - ((kernel - 1) * dilation + 1);
    if (span < 0) {
        return 0;
    }
    int32_t out = span / stride + 1;
    if (ceil_mode && span % stride != 0 && (int64_t)out * stride < (int64_t)in + pad_before) {
        ++out;
    }
    return out;
}

#endif /* MCU_KERNELS_INTERNAL_WINDOW_H */
