/* Taps of a transposed convolution, seen from the output (a gather): output
 * coordinate o receives input coordinate i through tap k when
 * o = i * stride - pad + k * dilation. Gathering instead of scattering keeps
 * each output written once, in memory order, with no accumulator scratch;
 * integer sums are the same in any order, so the int8 kernel matches TFLite's
 * scattering TRANSPOSE_CONV bit for bit. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_WINDOW_TRANSPOSED_H
#define MCU_KERNELS_INTERNAL_WINDOW_TRANSPOSED_H

#include <stdint.h>

/* The input coordinate that tap k feeds into output coordinate o, or -1 when
 * none does (between strides, or outside the input). */
static inline int32_t mcu_transposed_source(int32_t o, int32_t k, int32_t stride, int32_t pad, int32_t dilation,
                                            int32_t in)
{
    const int32_t t = o + pad - k * dilation;
    if (t < 0 || t % stride != 0) {
        return -1;
    }
    const int32_t i = t / stride;
    return i < in ? i : -1;
}

/* The taps worth trying for output coordinate o: with dilation 1 only every stride-th tap, from
 * (o + pad) % stride, can land on an input coordinate; otherwise every tap is tried. */
static inline int32_t mcu_transposed_first_tap(int32_t o, int32_t stride, int32_t pad, int32_t dilation)
{
    return dilation == 1 ? (o + pad) % stride : 0;
}

static inline int32_t mcu_transposed_tap_step(int32_t stride, int32_t dilation)
{
    return dilation == 1 ? stride : 1;
}

/* Taps of output phase a along a dim in the phased kernels (weights packed by phase_pack, mcu/reference/conv.py):
 * a, a + stride, ... below kernel. */
static inline int32_t mcu_phase_taps(int32_t a, int32_t kernel, int32_t stride)
{
    return a < kernel ? (kernel - a + stride - 1) / stride : 0;
}

/* Taps k in [0, kernel) with k % stride < a: those of the phases before a along a dim (a < stride; a period of
 * stride taps holds one of each phase). */
static inline int32_t mcu_phase_taps_before(int32_t a, int32_t kernel, int32_t stride)
{
    const int32_t r = kernel % stride;
    return (kernel / stride) * a + (a < r ? a : r);
}

/* Where phase (a, b)'s weights start: the phases before it in (a, b) order, `channels` (out_c * in_c) weights a
 * tap each; in constant time, so that a huge stride costs nothing (at most the weights' count, which the kernels
 * check fits int32; a phase without taps reads none). */
static inline int32_t mcu_phase_offset(int32_t a, int32_t b, int32_t kernel_h, int32_t kernel_w, int32_t stride_h,
                                       int32_t stride_w, int32_t channels)
{
    return (mcu_phase_taps_before(a, kernel_h, stride_h) * kernel_w +
            mcu_phase_taps(a, kernel_h, stride_h) * mcu_phase_taps_before(b, kernel_w, stride_w)) *
           channels;
}

/* The coordinates above stay inside int32_t: o + pad and (k - 1) * dilation. */
static inline int mcu_transposed_fits(int32_t out, int32_t kernel, int32_t dilation, int32_t pad)
{
    return (int64_t)out + pad < INT32_MAX && (int64_t)(kernel - 1) * dilation < INT32_MAX;
}

#endif /* MCU_KERNELS_INTERNAL_WINDOW_TRANSPOSED_H */
