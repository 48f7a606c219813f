/* The argument checks every int8 convolution kernel with mcu_conv2d_s8's params makes before it
 * touches memory (plain, grouped, transposed, phased transposed). Internal: static inline. */
#ifndef MCU_KERNELS_INTERNAL_CONV_CHECK_S8_H
#define MCU_KERNELS_INTERNAL_CONV_CHECK_S8_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/check.h"
#include "../common/requant.h"
#include "../common/window.h"
#include "window_transposed.h"

typedef enum {
    MCU_CONV_S8_FORWARD,    /* windows over the input; the output may trail it (window contract) */
    MCU_CONV_S8_TRANSPOSED, /* windows over the output; no overlap with the input at all */
    MCU_CONV_S8_PHASED,     /* transposed, dilation 1 and one group only */
    MCU_CONV_S4_FORWARD,    /* as FORWARD, with 4-bit weights two a byte (mcu_conv2d_s4) */
    MCU_CONV_LUT_FORWARD    /* as FORWARD; the caller checks the look-up-table weights (mcu_conv2d_lut_s8) */
} mcu_conv_s8_kind;

static inline mcu_status mcu_conv2d_s8_check(mcu_conv_s8_kind kind, const mcu_conv2d_s8_params *p,
                                             const mcu_per_channel_quant *q, const int8_t *input,
                                             const int8_t *weight, const int32_t *bias, const int8_t *output)
{
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_conv2d_s8_params_valid(p) &&
                    (kind != MCU_CONV_S8_PHASED || (p->dilation_h == 1 && p->dilation_w == 1 && p->groups == 1)),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t in_count = mcu_shape4_count(&in, 1);
    const int32_t out_count = mcu_shape4_count(&out, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(out.n == in.n && in.c % p->groups == 0 && out.c % p->groups == 0, MCU_ERR_SHAPE);
    const int32_t w_dims[4] = {out.c, p->kernel_h, p->kernel_w, in.c / p->groups};
    const int32_t w_count = mcu_checked_count(w_dims, 4, 1);
    MCU_REQUIRE(w_count > 0 && out.c <= INT32_MAX / 4, MCU_ERR_SHAPE);
    /* The output size implies the bottom/right padding; windows past the
     * input read the zero-point (contribute nothing). */
    const int forward = kind == MCU_CONV_S8_FORWARD || kind == MCU_CONV_S4_FORWARD || kind == MCU_CONV_LUT_FORWARD;
    MCU_REQUIRE(forward
                    ? mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                          mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0)
                    : mcu_transposed_fits(out.h, p->kernel_h, p->dilation_h, p->pad_top) &&
                          mcu_transposed_fits(out.w, p->kernel_w, p->dilation_w, p->pad_left),
                MCU_ERR_SHAPE);
    for (int32_t oc = 0; oc < out.c; ++oc) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[oc], q->shift[oc]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count;
    const size_t w_bytes = kind == MCU_CONV_S4_FORWARD    ? ((size_t)w_count + 1u) / 2u
                           : kind == MCU_CONV_LUT_FORWARD ? 0u
                                                          : (size_t)w_count;
    const int input_ok = forward ? !mcu_bad_window_overlap(input, (size_t)in_count, output, out_bytes)
                                 : !mcu_overlaps(input, (size_t)in_count, output, out_bytes);
    MCU_REQUIRE(input_ok &&
                    !mcu_overlaps(weight, w_bytes, output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out.c * sizeof(int32_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_CONV_CHECK_S8_H */
