/* Internal: the steps the grouped 16x8 convolutions share (static inline only). Output channels run in blocks
 * of four, two or one that never cross a group's end (a block's channels read one group's inputs); each block's
 * 64-bit accumulators start at the biases, take each tap's dot products and requantize as arm_convolve_s16. */
#ifndef MCU_KERNELS_INTERNAL_GROUPED_S16_H
#define MCU_KERNELS_INTERNAL_GROUPED_S16_H

#include <stdint.h>

#include "mcu/kernels_s16.h"

#include "../common/dot_s16.h"
#include "../common/requant_s16.h"

/* The block starting at output channel o (ocg channels a group): its size, its accumulators at the biases. */
static inline int32_t mcu_grouped_s16_block(int32_t o, int32_t ocg, const int64_t *bias, int64_t acc[4])
{
    const int32_t left = ocg - o % ocg;
    const int32_t k = left >= 4 ? 4 : (left >= 2 ? 2 : 1);
    for (int32_t j = 0; j < 4; ++j) {
        acc[j] = bias != NULL && j < k ? bias[o + j] : 0;
    }
    return k;
}

/* One tap: icg activations against the block's k weight rows (filter values apart). */
static inline void mcu_grouped_s16_tap(const int16_t *x, const int8_t *w, int32_t filter, int32_t icg, int32_t k,
                                       int64_t acc[4])
{
    if (k == 4) {
        mcu_s16_dot4(x, w, filter, icg, acc);
    } else if (k == 2) {
        mcu_s16_dot2(x, w, w + filter, icg, &acc[0], &acc[1]);
    } else {
        mcu_s16_dot1(x, w, icg, &acc[0]);
    }
}

/* The block's outputs y[o, o + k). */
static inline void mcu_grouped_s16_store(const int64_t acc[4], int32_t o, int32_t k, const mcu_per_channel_quant *q,
                                         int32_t act_min, int32_t act_max, int16_t *y)
{
    for (int32_t j = 0; j < k; ++j) {
        y[o + j] = mcu_clamp_to_s16(mcu_requantize_s16_acc(acc[j], q->multiplier[o + j], q->shift[o + j]), act_min,
                                    act_max);
    }
}

#endif /* MCU_KERNELS_INTERNAL_GROUPED_S16_H */
