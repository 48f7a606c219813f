/* Helium (MVE) path of the 4-bit-weight convolution (groups == 1). With scratch for every weight as int8, the
 * weights are widened there once per call (mcu_mve_s4_widen, 32 a step) and mcu_conv2d_s8 runs the layer on
 * its Helium paths (pointwise, narrow, three-pixel and im2col blocks), which read each weight row once per
 * block of output pixels (the three-pixel path in place, see below): the widening costs a fraction of an
 * instruction per weight, once. Without that scratch, each output pixel's im2col column is split once for the
 * nibbles and run against the packed rows as they are stored (common/mve_s4.h). Internal: static inline
 * only; empty where MCU_S8_MVE is 0. */
#ifndef MCU_KERNELS_INTERNAL_MVE_CONV_S4_H
#define MCU_KERNELS_INTERNAL_MVE_CONV_S4_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/check.h"
#include "../common/mve_s4.h"
#include "mve_conv3_s8.h"
#include "mve_pw_s8.h"

#if MCU_S8_MVE

#ifndef MCU_S4_WIDE
#define MCU_S4_WIDE 1 /* 0: a build none of whose 4-bit convolutions has scratch, without mcu_conv2d_s8 */
#endif

/* The layer (validated by mcu_conv2d_s4) on its packed weights, in memory order, each pixel's window gathered
 * before its output is written (the window contract): two pixels at a time when the window's length is even
 * (each weight byte read once for both), else one; groups == 1 and a window of at most MCU_S8_MVE_COL_MAX
 * taps. */
static __attribute__((noinline)) void mcu_mve_conv_s4_direct(const mcu_conv2d_s8_params *p,
                                                             const mcu_per_channel_quant *q, const int8_t *input,
                                                             const int8_t *weight, const int32_t *bias,
                                                             int8_t *output)
{
    _Alignas(16) int8_t col[2][MCU_S8_MVE_COL_MAX];
    /* the first pixel's split copies; the second's, of an even length, need only the one from element 0 */
    _Alignas(16) int8_t split0[2 * MCU_S4_MVE_ROW_MAX];
    _Alignas(16) int8_t split1[MCU_S4_MVE_ROW_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int32_t hw = out.h * out.w;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        int8_t *y = output + (int64_t)b * hw * out.c;
        int32_t i = 0;
        /* windows of an even length: two pixels at a time, both gathered before either is written */
        for (; n % 2 == 0 && i + 2 <= hw; i += 2, y += 2 * out.c) {
            mcu_mve_im2col_s8(p, x_n, i / out.w, i % out.w, col[0]);
            mcu_mve_im2col_s8(p, x_n, (i + 1) / out.w, (i + 1) % out.w, col[1]);
            const mcu_mve_s4_input xa = mcu_mve_s4_input_make(col[0], n, p->input_offset, split0);
            const mcu_mve_s4_input xb = mcu_mve_s4_input_make(col[1], n, p->input_offset, split1);
            mcu_mve_s4_matrix_rows2(&xa, &xb, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max, y,
                                    y + out.c);
        }
        for (; i < hw; ++i, y += out.c) {
            mcu_mve_im2col_s8(p, x_n, i / out.w, i % out.w, col[0]);
            const mcu_mve_s4_input x = mcu_mve_s4_input_make(col[0], n, p->input_offset, split0);
            mcu_mve_s4_matrix_row(&x, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max, y);
        }
    }
}

/* 1 when the layer ran here: one group, and scratch for the widened weights apart from the operands (in a
 * build with MCU_S4_WIDE, which links mcu_conv2d_s8) or a window the direct path gathers. */
static inline int mcu_mve_conv2d_s4(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                    const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                    const int32_t *bias, int8_t *output)
{
    if (p->groups != 1) {
        return 0;
    }
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int64_t w_count = (int64_t)out.c * n;
#if MCU_S4_WIDE
    if (ctx != NULL && ctx->buf != NULL && (int64_t)ctx->size >= w_count) {
        const size_t bytes = (size_t)w_count;
        int8_t *wide = (int8_t *)ctx->buf;
        if (!mcu_overlaps(wide, bytes, input, (size_t)mcu_shape4_count(&in, 1)) &&
            !mcu_overlaps(wide, bytes, output, (size_t)mcu_shape4_count(&out, 1)) &&
            !mcu_overlaps(wide, bytes, weight, mcu_s4_bytes((int32_t)w_count)) &&
            (bias == NULL || !mcu_overlaps(wide, bytes, bias, (size_t)out.c * sizeof(int32_t)))) {
            mcu_mve_s4_widen(weight, (int32_t)w_count, wide);
            if (p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
                p->pad_left == 0 && in.h == out.h && in.w == out.w && in.c <= MCU_MVE_PW_N_MAX &&
                out.c <= MCU_S8_MVE_OC_MAX) {
                /* the int8 kernels' pointwise path on contiguous pixels (mcu_conv2d_s8 addresses every pixel
                 * through its strided geometry); forward: the window contract, as there */
                mcu_mve_pointwise(input, (int64_t)in.n * in.h * in.w, in.c, out.c, wide, bias, p->input_offset, q,
                                  p->output_offset, p->act_min, p->act_max, output, 1, NULL);
                return 1;
            }
            /* The three-pixel path (the only one of mcu_conv2d_s8 that takes scratch) copies its weights into
             * scratch that holds them all and reads them there: given the widened weights as that scratch, its
             * copy is onto itself and every weight is read in place, from RAM, once per call. Without it, it
             * would copy blocks of rows to its stack once per few groups of pixels. */
            const mcu_context same = {wide, (int32_t)w_count};
            const mcu_context *inner = mcu_mve_conv3_applies(p, q) ? &same : NULL;
            if (mcu_conv2d_s8(inner, p, q, input, wide, bias, output) == MCU_OK) {
                return 1;
            }
        }
    }
#else
    (void)ctx;
    (void)w_count;
#endif
    if (n > MCU_S8_MVE_COL_MAX) {
        return 0;
    }
    mcu_mve_conv_s4_direct(p, q, input, weight, bias, output);
    return 1;
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_CONV_S4_H */
