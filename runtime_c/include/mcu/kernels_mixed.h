/**
 * @file kernels_mixed.h
 * @brief Linear layers with int8 weights and float activations: weight-only
 *        (w8a32) and dynamic activation quantization (int8 GEMM, float I/O).
 *
 * Weights are int8 [out][in], symmetric per output row with float scales.
 * Both kernels are specified operation by operation (float32, no FMA
 * contraction, sequential accumulation) so that mcu/quant/mixed.py
 * reproduces them bit for bit.
 */
#ifndef MCU_KERNELS_MIXED_H
#define MCU_KERNELS_MIXED_H

#include <stdint.h>

#include "mcu/kernels_f32.h"
#include "mcu/kernels_s8.h"
#include "mcu/status.h"

/** y[b][o] = clamp(acc * w_scale[o] + bias[o]) with acc = sum_i x[b][i] * (float)w[o][i], summed in order. */
mcu_status mcu_linear_w8_f32(const mcu_linear_f32_params *p, const float *input, const int8_t *weight,
                             const float *w_scale, const float *bias, float *output);

/**
 * Dynamic quantization of the input, then an int8 GEMM:
 *   lo = min(0, min x), hi = max(0, max x), s = (hi - lo) / 255 (1 when 0),
 *   zp = clamp(rint(-128 - lo / s), -128, 127), q = clamp(rint(x * (1 / s)) + zp, -128, 127),
 *   acc[o] = sum_i (q[i] - zp) * w[o][i] (int32),
 *   y[b][o] = clamp((float)acc * (s * w_scale[o]) + bias[o]).
 * The quantized input (batch * in_features bytes) goes to ctx->buf.
 */
mcu_status mcu_linear_dyn_s8(const mcu_context *ctx, const mcu_linear_f32_params *p, const float *input,
                             const int8_t *weight, const float *w_scale, const float *bias, float *output);
int32_t mcu_linear_dyn_s8_get_buffer_size(const mcu_linear_f32_params *p);

#endif /* MCU_KERNELS_MIXED_H */
