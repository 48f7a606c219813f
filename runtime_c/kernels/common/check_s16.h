/* The argument checks the 16x8 convolution and fully connected kernels make before they touch memory, for
 * int8 weights (elem 1) and for the same weights prepacked as int16 (elem 2). Internal: static inline. */
#ifndef MCU_KERNELS_INTERNAL_CHECK_S16_H
#define MCU_KERNELS_INTERNAL_CHECK_S16_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s16.h"
#include "check.h"
#include "requant_s16.h"

/* w_in_c: the weights' input channels (in.c, or one group's). */
static inline mcu_status mcu_conv2d_s16_check_weights(const mcu_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                                                      const int16_t *input, const void *weight, int32_t elem,
                                                      int32_t w_in_c, const int64_t *bias, const int16_t *output)
{
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
                    p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 &&
                    mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const int32_t in_count = mcu_shape4_count(in, 2);
    const int32_t out_count = mcu_shape4_count(out, 2);
    const int32_t w_dims[4] = {out->c, p->kernel_h, p->kernel_w, w_in_c};
    const int32_t w_count = mcu_checked_count(w_dims, 4, elem);
    MCU_REQUIRE(in_count > 0 && out_count > 0 && w_count > 0 && in->n == out->n &&
                    mcu_window_fits(in->h, out->h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                    mcu_window_fits(in->w, out->w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0),
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < out->c; ++o) {
        MCU_REQUIRE(mcu_quant_s16_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count * (size_t)elem, output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out->c * sizeof(int64_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

static inline mcu_status mcu_conv2d_s16_check(const mcu_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                                              const int16_t *input, const void *weight, int32_t elem,
                                              const int64_t *bias, const int16_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    return mcu_conv2d_s16_check_weights(p, q, input, weight, elem, p->input.c, bias, output);
}

/* The grouped kernels': groups dividing both channel counts, weights [out_c][kh][kw][in_c / groups]. */
static inline mcu_status mcu_conv2d_grouped_s16_check(const mcu_conv2d_grouped_s16_params *p,
                                                      const mcu_per_channel_quant *q, const int16_t *input,
                                                      const int8_t *weight, const int64_t *bias,
                                                      const int16_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->groups > 0 && p->conv.input.c % p->groups == 0 && p->conv.output.c % p->groups == 0,
                MCU_ERR_SHAPE);
    return mcu_conv2d_s16_check_weights(&p->conv, q, input, weight, 1, p->conv.input.c / p->groups, bias, output);
}

static inline mcu_status mcu_linear_s16_check(const mcu_linear_s16_params *p, const mcu_per_channel_quant *q,
                                              const int16_t *input, const void *weight, int32_t elem,
                                              const int64_t *bias, const int16_t *output)
{
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_s16_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, 1);
    const int32_t w_count = mcu_checked_count(w_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 1);
    MCU_REQUIRE(in_count > 0 && w_count > 0 && out_count > 0 && out_count <= INT32_MAX / 2 &&
                    in_count <= INT32_MAX / 2 && w_count <= INT32_MAX / elem,
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_s16_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count * (size_t)elem, output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(int64_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

/* The checks of the 16x8 two-operand kernels on mcu_add_s16_params (add, sub, maximum, minimum): same-shape
 * operands, each may be the output exactly. */
static inline mcu_status mcu_binary_s16_check(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b,
                                              const int16_t *output)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size >= 0 && p->size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_valid(p->a_multiplier, p->a_shift) && mcu_quant_valid(p->b_multiplier, p->b_shift) &&
                    mcu_quant_valid(p->out_multiplier, p->out_shift) && p->left_shift >= 0 && p->left_shift <= 15 &&
                    mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size * sizeof(int16_t);
    /* Element i is read before it is written: an operand may be the output, exactly; no other overlap. */
    MCU_REQUIRE(((const void *)a == (const void *)output || !mcu_overlaps(a, bytes, output, bytes)) &&
                    ((const void *)b == (const void *)output || !mcu_overlaps(b, bytes, output, bytes)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif
