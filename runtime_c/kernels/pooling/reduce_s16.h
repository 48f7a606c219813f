/* The argument checks the 16x8 reductions along the middle axis of [outer][axis][inner] share
 * (mcu_mean_s16, and mcu_amax_s16 / mcu_amin_s16 through extreme_s16.h). Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_REDUCE_S16_H
#define MCU_KERNELS_INTERNAL_REDUCE_S16_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s16.h"
#include "../common/check.h"
#include "../common/requant_s16.h"

static inline mcu_status mcu_reduce_s16_check(const mcu_mean_s16_params *p, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_s16_valid(p->act_min, p->act_max) && mcu_quant_s16_valid(p->multiplier, p->shift),
                MCU_ERR_INVALID_ARG);
    const int32_t in_dims[3] = {p->outer, p->axis, p->inner};
    const int32_t out_dims[2] = {p->outer, p->inner};
    const int32_t in_count = mcu_checked_count(in_dims, 3, 2);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 2);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, (size_t)out_count * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif
