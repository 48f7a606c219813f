/* Argument checks shared by the mixed-precision linear kernels. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_LINEAR_MIXED_H
#define MCU_KERNELS_INTERNAL_LINEAR_MIXED_H

#include <stddef.h>

#include "mcu/kernels_mixed.h"

#include "../common/check.h"

static inline mcu_status mcu_linear_mixed_check(const mcu_linear_f32_params *p, const float *input,
                                                const int8_t *weight, const float *w_scale, const float *bias,
                                                const float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && weight != NULL && w_scale != NULL && bias != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_bounds_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, (int32_t)sizeof(float));
    const int32_t out_count = mcu_checked_count(out_dims, 2, (int32_t)sizeof(float));
    MCU_REQUIRE(in_count > 0 && out_count > 0 && mcu_checked_count(w_dims, 2, 1) > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(float), output, (size_t)out_count * sizeof(float)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_LINEAR_MIXED_H */
