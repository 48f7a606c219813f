/* The im2col column of one output pixel for the dual-MAC convolutions (mcu_conv2d_packed_s8,
 * mcu_conv2d_compact_s8): (x + input_offset) as int16, window taps padded with 0 to a multiple of 4,
 * each group of 4 in the order 0, 2, 1, 3 that SXTB16 widening of weight words produces. Internal:
 * static inline only. */
#ifndef MCU_KERNELS_INTERNAL_CONV_COLUMN_S8_H
#define MCU_KERNELS_INTERNAL_CONV_COLUMN_S8_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/check.h"
#include "../common/simd_s8.h"
#include "../common/window.h"

/* Taps of one output pixel, padded to a multiple of 4. */
static inline int32_t mcu_conv_column_taps(const mcu_conv2d_s8_params *p)
{
    const int32_t k = p->kernel_h * p->kernel_w * p->input.c;
    return (k + 3) & ~3;
}

/* The window rows are whole 4-byte groups: copy them straight into the column. */
static inline int mcu_conv_column_contiguous(const mcu_conv2d_s8_params *p)
{
    return p->input.c % 4 == 0 && p->dilation_w == 1;
}

/* The column of output pixel (oh, ow): padded taps are 0 (they contribute nothing, as the plain
 * kernels skip them). `raw` (kp bytes) gathers windows whose rows are not whole 4-byte groups. */
static inline void mcu_conv_column_s16(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow, int32_t kp,
                   int16_t *col, int8_t *raw)
{
    const mcu_shape4 in = p->input;
    const int32_t c = in.c;
    const int32_t kw = p->kernel_w;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const int32_t off = p->input_offset;
    const int8_t zp = (int8_t)-off; /* (zp + off) == 0: a padded tap */
    const int32_t kh = p->kernel_h;
    if (p->dilation_w == 1 && ih0 >= 0 && iw0 >= 0 && iw0 + kw <= in.w && ih0 + (kh - 1) * p->dilation_h < in.h) {
        /* The whole window inside the input (every pixel of a pointwise layer, most of the others):
         * kh runs of kw * c bytes, without the per-row bounds of the general paths below. */
        const int8_t *src = x_n + (ih0 * in.w + iw0) * c;
        const int32_t run = kw * c;
        const int32_t step = p->dilation_h * in.w * c;
        if (c % 4 == 0) {
            for (int32_t i = 0; i < kh; ++i, src += step) {
                mcu_column_s8(src, run, off, col + i * run);
            }
            return;
        }
        for (int32_t i = 0; i < kh; ++i, src += step) {
            mcu_copy_run_s8(raw + i * run, src, run);
        }
        mcu_fill_s8(raw + kh * run, zp, kp - kh * run);
        mcu_column_s8(raw, kp, off, col);
        return;
    }
    if (mcu_conv_column_contiguous(p)) {
        mcu_window_rows_s16(p, x_n, ih0, iw0, col);
        return;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < p->kernel_h; ++i) {
        const int32_t ih = ih0 + i * p->dilation_h;
        if (p->dilation_w == 1) { /* the row's taps are one run of bytes: padding, input, padding */
            int32_t lo = 0, hi = 0;
            if (ih >= 0 && ih < in.h) {
                mcu_window_taps(iw0, kw, 1, in.w, &lo, &hi);
            }
            mcu_fill_s8(raw + k, zp, lo * c);
            if (hi > lo) {
                mcu_copy_run_s8(raw + k + lo * c, x_n + (ih * in.w + iw0 + lo) * c, (hi - lo) * c);
            }
            mcu_fill_s8(raw + k + hi * c, zp, (kw - hi) * c);
            k += kw * c;
            continue;
        }
        for (int32_t j = 0; j < kw; ++j) {
            const int32_t iw = iw0 + j * p->dilation_w;
            if (ih >= 0 && ih < in.h && iw >= 0 && iw < in.w) {
                mcu_copy_s8(raw + k, x_n + (ih * in.w + iw) * c, c);
            } else {
                mcu_fill_s8(raw + k, zp, c);
            }
            k += c;
        }
    }
    mcu_fill_s8(raw + k, zp, kp - k);
    mcu_column_s8(raw, kp, off, col);
}

/* The direction a convolution that reads each output pixel's window before writing it must run
 * its pixels in: 0 forward, 1 backward, -1 when no direction is safe. Only a 1x1 stride-1 unpadded
 * layer may overlap its input (either way, as long as the pixels run in the direction that reads a
 * pixel before any write lands on it: the pixel-buffer contract of mcu_conv2d_1x1_s8); any other
 * layer must keep its window reads apart from its writes. */
static inline int mcu_conv_pixel_direction(const mcu_conv2d_s8_params *p, const int8_t *input, int32_t in_count,
                                           const int8_t *output, int32_t out_count)
{
    const mcu_shape4 in = p->input, out = p->output;
    const int pointwise = p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                          p->pad_top == 0 && p->pad_left == 0 && out.h == in.h && out.w == in.w;
    if (!pointwise || !mcu_overlaps(input, (size_t)in_count, output, (size_t)out_count)) {
        return mcu_bad_window_overlap(input, (size_t)in_count, output, (size_t)out_count) ? -1 : 0;
    }
    const int64_t pixels = (int64_t)in.n * in.h * in.w;
    const int64_t bi = in.c, bo = out.c;
    const int64_t d = (int64_t)((intptr_t)output - (intptr_t)input);
    const int64_t fwd = bi - bo < pixels * (bi - bo) ? bi - bo : pixels * (bi - bo);
    const int64_t bwd = (pixels - 1) * (bi - bo) > 0 ? (pixels - 1) * (bi - bo) : 0;
    if (d <= fwd) {
        return 0;
    }
    return d >= bwd ? 1 : -1;
}

#endif /* MCU_KERNELS_INTERNAL_CONV_COLUMN_S8_H */
