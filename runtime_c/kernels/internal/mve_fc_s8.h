/* Helium (MVE) helpers of the int8 fully connected row (mcu_mve_linear_row in mve_s8.h). Included by
 * mve_s8.h inside its MCU_S8_MVE block. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_MVE_FC_S8_H
#define MCU_KERNELS_INTERNAL_MVE_FC_S8_H

#include <arm_mve.h>
#include <stdint.h>

/* Longest input row whose inverted copy the fully connected row keeps on the stack (input offset 128);
 * longer rows take the weight-sum path. */
#define MCU_S8_MVE_FC_INV_MAX 1024

/* inv[i] = ~x[i] = -x[i] - 1 for i < n (n > 0): 16 bytes per step, the last step predicated. With it,
 * (x + 128) . w = -((inv - 127) . w), an offset that fits int8. */
static inline void mcu_mve_fc_invert(const int8_t *x, int32_t n, int8_t *inv)
{
    for (int32_t i = 0; i < n; i += 16) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - i));
        vstrbq_p_s8(inv + i, vmvnq_s8(vldrbq_z_s8(x + i, p)), p);
    }
}

#endif /* MCU_KERNELS_INTERNAL_MVE_FC_S8_H */
