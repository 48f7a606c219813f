/* Helium (MVE) helpers of the int8 fully connected layer: the inverted row for input offset 128, rows of
 * very few inputs, and one whole row (mcu_mve_linear_row), built on the blocks of mve_s8.h. Internal:
 * static inline only; empty where MCU_S8_MVE is 0. */
#ifndef MCU_KERNELS_INTERNAL_MVE_FC_S8_H
#define MCU_KERNELS_INTERNAL_MVE_FC_S8_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/mve_s8.h"

#if MCU_S8_MVE

#include <arm_mve.h>

/* Longest input row whose inverted copy the fully connected row keeps on the stack (input offset 128);
 * longer rows take the weight-sum path. */
#define MCU_S8_MVE_FC_INV_MAX 1024
/* Input rows this short take mcu_mve_fc_small: a dot product of so few taps costs less tap by tap
 * over four outputs than as one VMLADAVA loop per output. */
#define MCU_S8_MVE_FC_SMALL 16

/* inv[i] = ~x[i] = -x[i] - 1 for i < n (n > 0): 16 bytes per step, the last step predicated. With it,
 * (x + 128) . w = -((inv - 127) . w), an offset that fits int8. */
static inline void mcu_mve_fc_invert(const int8_t *x, int32_t n, int8_t *inv)
{
    for (int32_t i = 0; i < n; i += 16) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - i));
        vstrbq_p_s8(inv + i, vmvnq_s8(vldrbq_z_s8(x + i, p)), p);
    }
}

/* acc + sum over i < n (n > 0) of w[k * n + i] * xo[i] in lane k (VMLA by a scalar, modulo 2^32): the
 * four weights of a tap gathered n bytes apart (rows: 0, n, 2n, 3n). In assembly because GCC 12
 * spills the loop's pointers around the gather. */
static inline int32x4_t mcu_mve_fc_cols4(int32x4_t acc, const int8_t *w, const int32_t *xo, int32_t n,
                                         uint32x4_t rows)
{
    int32_t t;
    __asm__ volatile("   dls lr, %[n]\n"
                     "1: vldrb.s32 q0, [%[w], %q[rows]]\n"
                     "   ldr %[t], [%[xo]], #4\n"
                     "   adds %[w], #1\n"
                     "   vmla.s32 %q[acc], q0, %[t]\n"
                     "   le lr, 1b\n"
                     : [acc] "+w"(acc), [w] "+r"(w), [xo] "+r"(xo), [t] "=&r"(t)
                     : [n] "r"(n), [rows] "w"(rows)
                     : "q0", "lr", "cc", "memory");
    return acc;
}

/* One row of a fully connected layer with n <= MCU_S8_MVE_FC_SMALL inputs: four outputs per vector,
 * tap by tap acc += w[o .. o + 3][i] * (x[i] + off) (exact products, sums modulo 2^32), the last group
 * predicated, so nothing past the weights, biases or parameters of the last output is read and nothing
 * past y[out - 1] written. */
static inline void mcu_mve_fc_small(const int8_t *x, int32_t n, int32_t out, const int8_t *weight,
                                    const int32_t *bias, int32_t input_offset, const mcu_per_channel_quant *q,
                                    int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y)
{
    int32_t xo[MCU_S8_MVE_FC_SMALL];
    for (int32_t i = 0; i < n; ++i) {
        xo[i] = x[i] + input_offset;
    }
    const uint32x4_t rows = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)n);
    int32_t o = 0;
    for (; o + 4 <= out; o += 4) {
        const int32x4_t acc = mcu_mve_fc_cols4(bias != NULL ? vldrwq_s32(bias + o) : vdupq_n_s32(0), weight + o * n,
                                               xo, n, rows);
        vstrbq_s32(y + o, mcu_mve_requantize(acc, vldrwq_s32(q->multiplier + o), vldrwq_s32(q->shift + o),
                                             output_offset, act_min, act_max));
    }
    if (o < out) {
        const mve_pred16_t p = vctp32q((uint32_t)(out - o));
        int32x4_t acc = bias != NULL ? vldrwq_z_s32(bias + o, p) : vdupq_n_s32(0);
        for (int32_t i = 0; i < n; ++i) {
            acc = vmlaq_n_s32(acc, vldrbq_gather_offset_z_s32(weight + o * n + i, rows, p), xo[i]);
        }
        const int32x4_t r = mcu_mve_requantize(acc, vldrwq_z_s32(q->multiplier + o, p), vldrwq_z_s32(q->shift + o, p),
                                               output_offset, act_min, act_max);
        vstrbq_p_s32(y + o, r, p);
    }
}

/* One row of a fully connected layer (x: n values, weight rows [out][n]), four outputs per
 * requantization, each weight row read once (mcu_mve_dot2_sum). Writes only y[0 .. out). */
static inline __attribute__((always_inline)) void mcu_mve_linear_row(const int8_t *x, int32_t n, int32_t out, const int8_t *weight,
                                      const int32_t *bias, int32_t input_offset, const mcu_per_channel_quant *q,
                                      int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t lo = vdupq_n_s32(act_min);
    const int32x4_t hi = vdupq_n_s32(act_max);
    int32_t o = 0;
    /* Offset 128 (zero-point -128) does not fit the offset vector: (x + 128) . w = -((~x - 127) . w)
     * with ~x = -x - 1 in int8, so the row is inverted once and the sums start from 0 and are
     * subtracted from the biases (mcu_mve_fc_invert above). */
    _Alignas(16) int8_t inv[MCU_S8_MVE_FC_INV_MAX];
    const int neg = input_offset == 128 && n <= MCU_S8_MVE_FC_INV_MAX && out >= 16; /* pays off from 16 outputs */
    if (neg) {
        mcu_mve_fc_invert(x, n, inv);
    }
    if (input_offset <= 127 || neg) {
        const int8x16_t off = vdupq_n_s8((int8_t)(neg ? -127 : input_offset));
        _Alignas(16) const int32_t none[4] = {0, 0, 0, 0};
        const int32x4_t olo = vdupq_n_s32(act_min - output_offset);
        const int32x4_t ohi = vdupq_n_s32(act_max - output_offset);
        for (; o + 4 <= out; o += 4) {
            int32x4_t acc = mcu_mve_dot4_off(neg ? inv : x, weight + o * n, n, off, bias != NULL && !neg ? bias + o : none);
            if (neg) { /* bias - sum, modulo 2^32 */
                acc = vsubq_s32(bias != NULL ? vldrwq_s32(bias + o) : zero, acc);
            }
            /* mcu_mve_requantize; the offset and clamp as in mcu_mve_matrix_block */
            const int32x4_t sh = vldrwq_s32(q->shift + o);
            const int32x4_t right = vminq_s32(sh, zero);
            acc = vqrdmulhq_s32(vqshlq_s32(acc, vmaxq_s32(sh, zero)), vldrwq_s32(q->multiplier + o));
            acc = vrshlq_s32(vqaddq_s32(acc, vshrq_n_s32(vandq_s32(acc, right), 31)), right);
            vstrbq_s32(y + o, vaddq_n_s32(vminq_s32(vmaxq_s32(acc, olo), ohi), output_offset));
        }
    }
    for (; o + 4 <= out; o += 4) {
        /* bias + x . w + off * sum(w) in four lanes, modulo 2^32 as everywhere */
        _Alignas(16) int32_t r[4], sw[4];
        const int8_t *w0 = weight + o * n;
        mcu_mve_dot2_sum(x, w0, w0 + n, n, r, sw);
        mcu_mve_dot2_sum(x, w0 + 2 * n, w0 + 3 * n, n, r + 2, sw + 2);
        int32x4_t acc = vaddq_s32(vldrwq_s32(r), bias != NULL ? vldrwq_s32(bias + o) : zero);
        acc = vmlaq_n_s32(acc, vldrwq_s32(sw), input_offset);
        /* mcu_mve_requantize with the constants kept in registers (as mcu_mve_matrix_pixel) */
        const int32x4_t sh = vldrwq_s32(q->shift + o);
        const int32x4_t right = vminq_s32(sh, zero);
        acc = vqrdmulhq_s32(vqshlq_s32(acc, vmaxq_s32(sh, zero)), vldrwq_s32(q->multiplier + o));
        acc = vrshlq_s32(vqaddq_s32(acc, vshrq_n_s32(vandq_s32(acc, right), 31)), right);
        vstrbq_s32(y + o, vminq_s32(vmaxq_s32(vqaddq_n_s32(acc, output_offset), lo), hi));
    }
    for (; o < out; o += 4) {
        const int32_t rest = out - o < 4 ? out - o : 4;
        _Alignas(16) int32_t acc[4] = {0, 0, 0, 0};
        for (int32_t k = 0; k < rest; k += 2) {
            const int8_t *w0 = weight + (o + k) * n;
            const int8_t *w1 = k + 1 < rest ? w0 + n : w0;
            int32_t r[2], s[2];
            mcu_mve_dot2_sum(x, w0, w1, n, r, s);
            for (int32_t j = 0; j < 2 && k + j < rest; ++j) {
                /* bias + x . w + off * sum(w), modulo 2^32 as everywhere */
                const uint32_t b = bias != NULL ? (uint32_t)bias[o + k + j] : 0u;
                acc[k + j] = mcu_u32_to_s32(b + (uint32_t)r[j] + (uint32_t)input_offset * (uint32_t)s[j]);
            }
        }
        if (rest == 4) {
            mcu_mve_store4(vldrwq_s32(acc), q, o, output_offset, act_min, act_max, y);
        } else {
            mcu_mve_store_tail(vldrwq_s32(acc), q, o, rest, output_offset, act_min, act_max, y);
        }
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_FC_S8_H */
