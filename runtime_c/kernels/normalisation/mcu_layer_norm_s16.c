/* int16 layer normalisation (w8a16; CMSIS-NN has no int16 layer norm, so this is ours on its conventions:
 * exact int64 sums, a fixed-point reciprocal square root, per-column multipliers). Per row of n = cols int16
 * codes q (zero point 0; mcu/reference/s16_norm.py computes the same bit for bit):
 *
 *   S    = sum q                              (0 for RMS norm)
 *   d_i  = n q_i - S                          (n (x_i - mean) in input steps, |d_i| < 2^28)
 *   W    = n sum q^2 - S^2 + E,  E = round(n^2 eps / s_in^2)   (= n^2 (var + eps) in input steps squared, < 2^62)
 *   so the normalised value is z_i = (x_i - mean) / sqrt(var + eps) = d_i / sqrt(W).
 *
 *   1/sqrt(W): W shifted left by 2k into [2^60, 2^62), r = its integer square root (in [2^30, 2^31)),
 *   R = 2^62 / r (one 64-bit division a row), so that 1/sqrt(W) ~ R 2^(k - 62) to about 2^-30.
 *   u_i  = round(d_i R 2^(k - 38))             (z_i in Q24; d_i^2 <= n W, so |u_i| <= sqrt(n) 2^24 <= 2^30)
 *   a_i  = round(u_i m_c 2^-e_c) + b_c         (output steps in Q8: m_c 2^-e_c = w_c / s_out 2^-16,
 *                                               b_c = round(256 bias_c / s_out), from the compiler)
 *   y_i  = clamp(floor((a_i + 128) / 256), act_min, act_max)
 *
 * round(v 2^-s) is floor((v + 2^(s-1)) / 2^s): halves round up. */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "norm_root.h"
#include "../common/requant_s16.h"

/* floor(2^62 / d) for d in [2^30, 2^31) by shifts and subtracts: a 64-bit division would call the C
 * library's helper, which kernels do not link. The numerator's bits above 32 leave a remainder 2^29 < d,
 * so the quotient has 33 bits and 33 steps make it. */
static uint64_t reciprocal62(uint32_t d)
{
    uint64_t rem = (uint64_t)1 << 29;
    uint64_t q = 0;
    for (int32_t i = 0; i < 33; ++i) {
        rem <<= 1;
        q <<= 1;
        if (rem >= d) {
            rem -= d;
            q |= 1u;
        }
    }
    return q;
}

mcu_status mcu_layer_norm_s16(const mcu_layer_norm_s16_params *p, const int16_t *input, const int32_t *multipliers,
                              const int32_t *shifts, const int32_t *bias, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && multipliers != NULL && shifts != NULL && bias != NULL &&
                    output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rows > 0 && p->cols > 0 && p->cols <= MCU_LAYER_NORM_S16_MAX_COLS &&
                    p->rows <= INT32_MAX / 2 / p->cols,
                MCU_ERR_SHAPE);
    const uint64_t eps = ((uint64_t)(uint32_t)p->eps_hi << 32) | (uint32_t)p->eps_lo;
    MCU_REQUIRE(eps < ((uint64_t)1 << 61) && mcu_act_s16_valid(p->act_min, p->act_max) && (p->rms == 0 || p->rms == 1),
                MCU_ERR_INVALID_ARG);
    for (int32_t c = 0; c < p->cols; ++c) {
        MCU_REQUIRE(shifts[c] >= 1 && shifts[c] <= 62, MCU_ERR_INVALID_ARG);
    }
    const size_t bytes = (size_t)p->rows * (size_t)p->cols * sizeof(int16_t);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    const int32_t n = p->cols;
    for (int32_t r = 0; r < p->rows; ++r) {
        const int16_t *x = input + (size_t)r * (size_t)n;
        int16_t *y = output + (size_t)r * (size_t)n;
        int32_t sum = 0; /* |sum| <= 2^27 */
        int64_t squares = 0;
        for (int32_t c = 0; c < n; ++c) {
            sum += x[c];
            squares += (int32_t)x[c] * x[c];
        }
        if (p->rms) {
            sum = 0;
        }
        /* n sum q^2 - S^2 >= 0 (Cauchy-Schwarz), each term below 2^54 */
        uint64_t w = (uint64_t)((int64_t)n * squares - (int64_t)sum * sum) + eps;
        uint64_t recip = 0; /* W == 0: every d_i is 0 and so is every u_i */
        int32_t k = 0;
        if (w != 0) {
            while (w < ((uint64_t)1 << 60)) {
                w <<= 2;
                ++k;
            }
            recip = reciprocal62(mcu_isqrt64(w)); /* 2^62 / floor(sqrt(W)): in (2^31, 2^32] */
        }
        const int32_t sh = 38 - k; /* k <= 30 */
        for (int32_t c = 0; c < n; ++c) {
            /* (x[c] is read before y[c] is written: in place exactly) */
            const int64_t u = mcu_norm_round_shift((int64_t)(n * (int32_t)x[c] - sum) * (int64_t)recip, sh);
            const int64_t a = mcu_norm_round_shift(u * multipliers[c], shifts[c]) + bias[c];
            const int64_t q = mcu_asr64(a + 128, 8);
            y[c] = (int16_t)(q < p->act_min ? p->act_min : q > p->act_max ? p->act_max : q);
        }
    }
    return MCU_OK;
}
