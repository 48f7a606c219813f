/* Dynamic int8 quantization of float activations, shared by the dynamic-activation linear kernels.
 * Internal: static inline only. The arithmetic is mcu/quant/mixed.py's dynamic_qparams, operation by
 * operation. */
#ifndef MCU_KERNELS_INTERNAL_DYN_QUANT_F32_H
#define MCU_KERNELS_INTERNAL_DYN_QUANT_F32_H

#include <math.h>
#include <stdint.h>

/* NaN (a NaN activation, or one from corrupt weights) has no int8 code; converting it to an integer is
 * undefined in C, so it becomes 0. */
static inline int32_t mcu_dyn_clamp_s8(float v)
{
    return v != v ? 0 : v < -128.0f ? -128 : (v > 127.0f ? 127 : (int32_t)v);
}

/* Scale and zero-point of x[0..count): the range always includes 0 so that 0 is exactly representable
 * (zero padding, ReLU outputs); a zero range gets scale 1. */
static inline void mcu_dyn_qparams(const float *x, int32_t count, float *scale, int32_t *zero_point)
{
    float lo = 0.0f;
    float hi = 0.0f;
    for (int32_t i = 0; i < count; ++i) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    float s = (hi - lo) / 255.0f;
    if (!(s > 0.0f)) {
        s = 1.0f;
    }
    *scale = s;
    *zero_point = mcu_dyn_clamp_s8(rintf(-128.0f - lo / s));
}

/* One value: clamp(rint(x * inv) + zp, -128, 127). */
static inline int32_t mcu_dyn_quantize(float x, float inv, int32_t zero_point)
{
    return mcu_dyn_clamp_s8(rintf(x * inv) + (float)zero_point);
}

#endif /* MCU_KERNELS_INTERNAL_DYN_QUANT_F32_H */
