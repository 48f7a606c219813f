/* int8 layer normalisation with integer mean and variance and a requantized output. Per row of
 * n = cols int8 codes q (exact integers throughout; mcu/quant/norm.py computes the same bit for bit):
 *
 *   S    = sum q                                  (the mean times n: no division, the zero-point cancels)
 *   d_i  = n q_i - S                              (n (x_i - mean) in input steps, |d_i| < 2^20)
 *   W    = sum d_i^2 + E,  E = round(n^3 eps / s_in^2)   (n^3 (var + eps) in input steps squared)
 *   so the normalised value is z_i = (x_i - mean) / sqrt(var + eps) = sqrt(n) d_i / sqrt(W).
 *
 *   1/sqrt(W) without 64-bit division: W is shifted left by 2k into [2^60, 2^62), r = isqrt of that
 *   (in [2^30, 2^31)), t = r >> 15 (16 bits), R = (2^32 - 1) / t (a 32-bit division), so that
 *   1/sqrt(W) ~ R 2^(k - 47) with a relative error below 2^-14.
 *   u_i  = round(d_i R 2^(k - 23))                 (d_i / sqrt(W) in Q24; |d_i| <= sqrt(W), so |u_i| <= 2^24)
 *   a_i  = round(u_i m_c 2^-e_c) + b_c             (output steps in Q8: m_c 2^-e_c = sqrt(n) w_c / s_out 2^-16,
 *                                                   b_c = round(256 bias_c / s_out), from the compiler)
 *   y_i  = clamp(floor((a_i + 128) / 256) + zp_out, act_min, act_max)
 *
 * RMS norm (rms = 1) is the same with S = n zp_in: d_i = n (q_i - zp_in) = n x_i / s_in, W = n^3 (mean(x^2) + eps)
 * in input steps squared, z_i = x_i / sqrt(mean(x^2) + eps).
 *
 * round(v 2^-s) is floor((v + 2^(s-1)) / 2^s): halves round up. */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "norm_root.h"

mcu_status mcu_layer_norm_s8(const mcu_layer_norm_s8_params *p, const int8_t *input, const int32_t *multipliers,
                             const int32_t *shifts, const int32_t *bias, int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && multipliers != NULL && shifts != NULL && bias != NULL &&
                    output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rows > 0 && p->cols > 0 && p->cols <= MCU_LAYER_NORM_S8_MAX_COLS && p->rows <= INT32_MAX / p->cols,
                MCU_ERR_SHAPE);
    const uint64_t eps = ((uint64_t)(uint32_t)p->eps_hi << 32) | (uint32_t)p->eps_lo;
    MCU_REQUIRE(eps < ((uint64_t)1 << 61) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max) && (p->rms == 0 || p->rms == 1) &&
                    p->input_zero_point >= -128 && p->input_zero_point <= 127,
                MCU_ERR_INVALID_ARG);
    for (int32_t c = 0; c < p->cols; ++c) {
        MCU_REQUIRE(shifts[c] >= 1 && shifts[c] <= 62, MCU_ERR_INVALID_ARG);
    }
    const size_t bytes = (size_t)p->rows * (size_t)p->cols;
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    const int32_t n = p->cols;
    for (int32_t r = 0; r < p->rows; ++r) {
        const int8_t *x = input + (size_t)r * (size_t)n;
        int8_t *y = output + (size_t)r * (size_t)n;
        int32_t sum = n * p->input_zero_point;
        if (!p->rms) {
            sum = 0;
            for (int32_t c = 0; c < n; ++c) {
                sum += x[c];
            }
        }
        uint64_t w = eps;
        for (int32_t c = 0; c < n; ++c) {
            const int32_t d = n * x[c] - sum;
            w += (uint64_t)((int64_t)d * d); /* < 2^52 in all: n^3 255^2 with n <= 4096 */
        }
        uint32_t recip = 0; /* W == 0: every d_i is 0 and so is every u_i */
        int32_t k = 0;
        if (w != 0) {
            while (w < ((uint64_t)1 << 60)) {
                w <<= 2;
                ++k;
            }
            recip = 0xFFFFFFFFu / (mcu_isqrt64(w) >> 15);
        }
        const int32_t sh = 23 - k; /* k <= 30 */
        for (int32_t c = 0; c < n; ++c) {
            const int64_t zf = (int64_t)(n * x[c] - sum) * (int64_t)recip;
            const int64_t u = sh > 0 ? mcu_norm_round_shift(zf, sh) : zf * ((int64_t)1 << -sh);
            const int64_t a = mcu_norm_round_shift(u * multipliers[c], shifts[c]) + bias[c];
            const int64_t q = mcu_asr64(a + 128, 8) + p->output_offset;
            y[c] = (int8_t)(q < p->act_min ? p->act_min : q > p->act_max ? p->act_max : q);
        }
    }
    return MCU_OK;
}
