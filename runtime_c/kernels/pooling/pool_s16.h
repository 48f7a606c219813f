/* Argument checks shared by the 16x8 max and average pooling. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_POOL_S16_H
#define MCU_KERNELS_INTERNAL_POOL_S16_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s16.h"
#include "../common/check.h"
#include "../common/requant_s16.h"

/* Every window holds at least one tap inside the input (as the int8 pools); the output size implies the
 * bottom and right padding. */
static inline int mcu_pool_s16_dim_ok(int32_t in, int32_t out, int32_t kernel, int32_t stride, int32_t pad)
{
    return mcu_window_fits(in, out, stride, kernel, 1, pad, 0) && pad < kernel &&
           (int64_t)(out - 1) * stride - pad < in;
}

/* The output overlaps not the input. */
static inline mcu_status mcu_pool2d_s16_check(const mcu_pool2d_s16_params *p, const int16_t *input,
                                              const int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->pad_top >= 0 &&
                    p->pad_left >= 0 && mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const int32_t in_count = mcu_shape4_count(&p->input, 2);
    const int32_t out_count = mcu_shape4_count(&p->output, 2);
    MCU_REQUIRE(in_count > 0 && out_count > 0 && p->output.n == p->input.n && p->output.c == p->input.c,
                MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_pool_s16_dim_ok(p->input.h, p->output.h, p->kernel_h, p->stride_h, p->pad_top) &&
                    mcu_pool_s16_dim_ok(p->input.w, p->output.w, p->kernel_w, p->stride_w, p->pad_left),
                MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, (size_t)out_count * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_POOL_S16_H */
