/* Fused activation clamp. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_ACT_F32_H
#define MCU_KERNELS_INTERNAL_ACT_F32_H

/* Lower bound first, then upper, as torch.clamp does: with lo > hi every value
 * becomes hi, and a NaN input stays NaN because both comparisons are false. */
static inline float mcu_act_f32(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

#endif /* MCU_KERNELS_INTERNAL_ACT_F32_H */
