/* Helium (MVE) path of the 4-bit-weight fully connected layer: each batch row split once for the nibbles and
 * run against every packed weight row as it is stored (common/mve_s4.h), so each weight byte is loaded once
 * and never widened into memory. Internal: static inline only; empty where MCU_S8_MVE is 0. */
#ifndef MCU_KERNELS_INTERNAL_MVE_FC_S4_H
#define MCU_KERNELS_INTERNAL_MVE_FC_S4_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/mve_s4.h"

#if MCU_S8_MVE

/* The layer (parameters validated by mcu_linear_s4) when its rows fit the split copies: 1 when done, 0 when
 * in_features is over MCU_S4_MVE_ROW_MAX (nothing written). */
static inline int mcu_mve_linear_s4(const mcu_linear_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                                    const int8_t *weight, const int32_t *bias, int8_t *output)
{
    const int32_t nin = p->in_features;
    if (nin > MCU_S4_MVE_ROW_MAX) {
        return 0;
    }
    _Alignas(16) int8_t split[2 * MCU_S4_MVE_ROW_MAX];
    for (int32_t b = 0; b < p->batch; ++b) {
        const mcu_mve_s4_input in = mcu_mve_s4_input_make(input + (int64_t)b * nin, nin, p->input_offset, split);
        mcu_mve_s4_matrix_row(&in, p->out_features, weight, bias, q, p->output_offset, p->act_min, p->act_max,
                              output + (int64_t)b * p->out_features);
    }
    return 1;
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_FC_S4_H */
