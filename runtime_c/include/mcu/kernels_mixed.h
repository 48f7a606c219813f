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

/* --- 4-bit groupwise weights --------------------------------------------------------------- */

/** Shape of a linear layer with 4-bit groupwise weights. */
typedef struct {
    int32_t batch;
    int32_t in_features;  /**< a multiple of group_size */
    int32_t out_features;
    int32_t group_size;   /**< inputs per scale; even, so a group starts on a byte */
    float act_min, act_max;
} mcu_linear_w4_params;

/**
 * Weight-only 4-bit linear layer (w4a32). weight: signed 4-bit values in [-8, 7], two per byte
 * (element 2k in the low nibble, 2k+1 in the high one), rows of in_features / 2 bytes; w_scale:
 * one float per group of group_size inputs, [out][in / group_size]; bias may be NULL.
 *   part[g] = sum_{i in g} x[b][i] * (float)w[o][i], summed in order from 0,
 *   acc = sum_g part[g] * w_scale[o][g], summed in order from 0,
 *   y[b][o] = clamp(acc + bias[o]) (clamp(acc) without a bias).
 */
mcu_status mcu_linear_w4_f32(const mcu_linear_w4_params *p, const float *input, const uint8_t *weight,
                             const float *w_scale, const float *bias, float *output);

/**
 * 4-bit weights with dynamically quantized int8 activations (w4a8), one input row at a time:
 *   lo = min(0, min x[b]), hi = max(0, max x[b]), s = (hi - lo) / 255 (1 when 0),
 *   zp = clamp(rint(-128 - lo / s), -128, 127), q[i] = clamp(rint(x[b][i] * (1 / s)) + zp, -128, 127),
 *   isum[g] = sum_{i in g} (q[i] - zp) * w[o][i] (int32, exact),
 *   acc = sum_g (float)isum[g] * w_scale[o][g], summed in order from 0,
 *   y[b][o] = clamp(acc * s + bias[o]) (clamp(acc * s) without a bias).
 * Weights, scales and bias as mcu_linear_w4_f32. ctx->buf holds the row's q - zp as int16
 * (mcu_linear_w4_s8_get_buffer_size bytes, 4-byte aligned).
 */
mcu_status mcu_linear_w4_s8(const mcu_context *ctx, const mcu_linear_w4_params *p, const float *input,
                            const uint8_t *weight, const float *w_scale, const float *bias, float *output);
int32_t mcu_linear_w4_s8_get_buffer_size(const mcu_linear_w4_params *p);

#endif /* MCU_KERNELS_MIXED_H */
