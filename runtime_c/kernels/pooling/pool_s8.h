/* Argument checks shared by int8 max and average pooling. Internal: static
 * inline only. */
#ifndef MCU_KERNELS_INTERNAL_POOL_S8_H
#define MCU_KERNELS_INTERNAL_POOL_S8_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/check.h"
#include "../common/requant.h"

/* Every window must hold at least one real input position: the first starts
 * before its last tap (pad < kernel) and the last starts inside the input.
 * The output size implies the bottom/right padding. */
static inline int mcu_pool_s8_dim_ok(int32_t in, int32_t out, int32_t kernel, int32_t stride, int32_t pad)
{
    return mcu_window_fits(in, out, stride, kernel, 1, pad, 0) && pad < kernel &&
           (int64_t)(out - 1) * stride - pad < in;
}

static inline mcu_status mcu_pool2d_check_s8(const mcu_pool2d_s8_params *p, const int8_t *input,
                                             const int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->pad_top >= 0 &&
                    p->pad_left >= 0,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_act_s8_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_count = mcu_shape4_count(&p->input, 1);
    const int32_t out_count = mcu_shape4_count(&p->output, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->output.n == p->input.n && p->output.c == p->input.c, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_pool_s8_dim_ok(p->input.h, p->output.h, p->kernel_h, p->stride_h, p->pad_top) &&
                    mcu_pool_s8_dim_ok(p->input.w, p->output.w, p->kernel_w, p->stride_w, p->pad_left),
                MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_bad_window_overlap(input, (size_t)in_count, output, (size_t)out_count), MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_POOL_S8_H */
