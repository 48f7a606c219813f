/* Argument checks shared by max and average pooling. Internal: static inline
 * only. */
#ifndef MCU_KERNELS_INTERNAL_POOL_F32_H
#define MCU_KERNELS_INTERNAL_POOL_F32_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_f32.h"
#include "../common/check.h"
#include "../common/window.h"

/* Output size along one dim must be one PyTorch could produce from these
 * pads: the floor size or the ceil_mode size. Anything else means the planner
 * and the kernel disagree about the window positions. */
static inline int mcu_pool_dim_ok(int32_t in, int32_t out, int32_t kernel, int32_t stride,
                                  int32_t dilation, int32_t pad_before, int32_t pad_after)
{
    if (!mcu_window_fits(in, out, stride, kernel, dilation, pad_before, pad_after)) {
        return 0;
    }
    const int32_t floor_out = mcu_pool_out_size(in, kernel, stride, dilation, pad_before, pad_after, 0);
    const int32_t ceil_out = mcu_pool_out_size(in, kernel, stride, dilation, pad_before, pad_after, 1);
    return floor_out > 0 && (out == floor_out || out == ceil_out);
}

static inline mcu_status mcu_pool2d_check_f32(const mcu_pool2d_f32_params *p, const float *input,
                                              const float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 &&
                    p->dilation_h > 0 && p->dilation_w > 0,
                MCU_ERR_INVALID_ARG);
    /* PyTorch's own limit (pad <= kernel / 2). It guarantees that every
     * average-pool window holds a real input element, so the exclude-pad
     * divisor is never zero. */
    MCU_REQUIRE(p->pad_top >= 0 && p->pad_bottom >= 0 && p->pad_left >= 0 && p->pad_right >= 0 &&
                    p->pad_top <= p->kernel_h / 2 && p->pad_bottom <= p->kernel_h / 2 &&
                    p->pad_left <= p->kernel_w / 2 && p->pad_right <= p->kernel_w / 2,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_act_bounds_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_count = mcu_shape4_count(&p->input, (int32_t)sizeof(float));
    const int32_t out_count = mcu_shape4_count(&p->output, (int32_t)sizeof(float));
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->output.n == p->input.n && p->output.c == p->input.c, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_pool_dim_ok(p->input.h, p->output.h, p->kernel_h, p->stride_h, p->dilation_h,
                                p->pad_top, p->pad_bottom) &&
                    mcu_pool_dim_ok(p->input.w, p->output.w, p->kernel_w, p->stride_w,
                                    p->dilation_w, p->pad_left, p->pad_right),
                MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_bad_window_overlap(input, (size_t)in_count * sizeof(float), output,
                              (size_t)out_count * sizeof(float)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_POOL_F32_H */
