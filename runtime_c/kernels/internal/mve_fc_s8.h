/* Helium (MVE) helpers of the int8 fully connected layer: the inverted row for input offset 128 (used
 * by mcu_mve_linear_row) and rows of very few inputs (mcu_linear_s8). Included by mve_s8.h inside its
 * MCU_S8_MVE block, after mcu_mve_requantize. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_MVE_FC_S8_H
#define MCU_KERNELS_INTERNAL_MVE_FC_S8_H

#include <arm_mve.h>
#include <stdint.h>

/* Longest input row whose inverted copy the fully connected row keeps on the stack (input offset 128);
 * longer rows take the weight-sum path. */
#define MCU_S8_MVE_FC_INV_MAX 1024
/* Input rows this short take mcu_mve_fc_small: a dot product of so few taps costs less tap by tap
 * over four outputs than as one VMLADAVA loop per output. */
#define MCU_S8_MVE_FC_SMALL 16

/* mcu_quant_valid for every one of the n > 0 channels of q: four per step (the smallest multiplier and
 * the extremes of the shifts), the last step predicated. */
static inline int mcu_mve_quant_all_valid(const mcu_per_channel_quant *q, int32_t n)
{
    int32_t mmin = 0, smin = 0, smax = 0;
    for (int32_t c = 0; c < n; c += 4) {
        const mve_pred16_t p = vctp32q((uint32_t)(n - c));
        const int32x4_t s = vldrwq_z_s32(q->shift + c, p);
        mmin = vminvq_p_s32(mmin, vldrwq_z_s32(q->multiplier + c, p), p);
        smin = vminvq_p_s32(smin, s, p);
        smax = vmaxvq_p_s32(smax, s, p);
    }
    return mmin >= 0 && smin >= -31 && smax <= 30;
}

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

#endif /* MCU_KERNELS_INTERNAL_MVE_FC_S8_H */
