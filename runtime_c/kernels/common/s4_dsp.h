/* The dual 16-bit MAC path of the 4-bit weight convolution and fully connected kernels (MCU_S8_DSP:
 * Cortex-M4/M7/M33/M55, emulated on the host). Internal: static inline only.
 *
 * One 32-bit load brings 8 weights of a row (two a byte, low nibble first). Masked with 0xF0F0F0F0,
 * as it is and shifted left by 4, every nibble sits in the top of its own byte, so SXTB16 and SXTB16
 * ror 8 widen them to the 16-bit pairs 16 * (w0, w4), (w1, w5), (w2, w6), (w3, w7), with no shift of a
 * signed value. Columns (the (x + input_offset) values one output reads, padded taps 0) hold each
 * group of 8 taps in that pair order (mcu_s4_col_index); a tail of n % 8 taps stays in natural order
 * and is read one weight at a time. The sums of 16 * w * x are exact (|x| <= 255, |w| <= 8 and at
 * most MCU_S8_COL_MAX taps keep them far inside int32), so an arithmetic shift by 4 returns the sum
 * of w * x. Rows start on a byte (n even). */
#ifndef MCU_KERNELS_INTERNAL_S4_DSP_H
#define MCU_KERNELS_INTERNAL_S4_DSP_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "s4.h"
#include "simd_s8.h"

#if MCU_S8_DSP

/* Where tap i of a window of n taps sits in its column. */
static inline int32_t mcu_s4_col_index(int32_t i, int32_t n)
{
    if (i >= (n & ~7)) {
        return i;
    }
    const int32_t r = i & 7;
    return (i & ~7) + ((r & 3) << 1) + (r >> 2);
}

/* acc[0..3] += (ca.wa, ca.wb, cb.wa, cb.wb) over n taps; wa and wb are packed rows starting on a byte. */
static inline void mcu_s4_dot_2x2(const int16_t *ca, const int16_t *cb, const int8_t *wa, const int8_t *wb,
                                  int32_t n, uint32_t acc[4])
{
    const uint32_t mask = 0xF0F0F0F0u;
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0; /* 16 times the sums */
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint32_t va = mcu_load_u32(wa + (i >> 1));
        const uint32_t vb = mcu_load_u32(wb + (i >> 1));
        const uint32_t xa0 = mcu_load_u32(ca + i), xa1 = mcu_load_u32(ca + i + 2);
        const uint32_t xa2 = mcu_load_u32(ca + i + 4), xa3 = mcu_load_u32(ca + i + 6);
        const uint32_t xb0 = mcu_load_u32(cb + i), xb1 = mcu_load_u32(cb + i + 2);
        const uint32_t xb2 = mcu_load_u32(cb + i + 4), xb3 = mcu_load_u32(cb + i + 6);
        const uint32_t la = mask & (va << 4), ha = mask & va;
        const uint32_t w04 = mcu_sxtb16(la), w15 = mcu_sxtb16(ha);
        const uint32_t w26 = mcu_sxtb16_ror8(la), w37 = mcu_sxtb16_ror8(ha);
        a0 = mcu_smlad(xa0, w04, a0);
        a0 = mcu_smlad(xa1, w15, a0);
        a0 = mcu_smlad(xa2, w26, a0);
        a0 = mcu_smlad(xa3, w37, a0);
        a2 = mcu_smlad(xb0, w04, a2);
        a2 = mcu_smlad(xb1, w15, a2);
        a2 = mcu_smlad(xb2, w26, a2);
        a2 = mcu_smlad(xb3, w37, a2);
        const uint32_t lb = mask & (vb << 4), hb = mask & vb;
        const uint32_t v04 = mcu_sxtb16(lb), v15 = mcu_sxtb16(hb);
        const uint32_t v26 = mcu_sxtb16_ror8(lb), v37 = mcu_sxtb16_ror8(hb);
        a1 = mcu_smlad(xa0, v04, a1);
        a1 = mcu_smlad(xa1, v15, a1);
        a1 = mcu_smlad(xa2, v26, a1);
        a1 = mcu_smlad(xa3, v37, a1);
        a3 = mcu_smlad(xb0, v04, a3);
        a3 = mcu_smlad(xb1, v15, a3);
        a3 = mcu_smlad(xb2, v26, a3);
        a3 = mcu_smlad(xb3, v37, a3);
    }
    uint32_t t0 = acc[0] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a0), 4);
    uint32_t t1 = acc[1] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a1), 4);
    uint32_t t2 = acc[2] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a2), 4);
    uint32_t t3 = acc[3] + (uint32_t)mcu_asr32(mcu_u32_to_s32(a3), 4);
    for (; i < n; ++i) {
        const int32_t ka = mcu_s4_at(wa, i), kb = mcu_s4_at(wb, i);
        t0 += (uint32_t)(ca[i] * ka);
        t1 += (uint32_t)(ca[i] * kb);
        t2 += (uint32_t)(cb[i] * ka);
        t3 += (uint32_t)(cb[i] * kb);
    }
    acc[0] = t0;
    acc[1] = t1;
    acc[2] = t2;
    acc[3] = t3;
}

/* Output pixels ya and yb (yb NULL: ya only, cb unused) from columns ca and cb of n taps, every output
 * channel's row at weight + oc * n / 2. */
static inline void mcu_s4_matrix_pixels(const int16_t *ca, const int16_t *cb, int32_t n, int32_t out_c,
                                        const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *ya,
                                        int8_t *yb)
{
    const int16_t *cb_or_a = yb != NULL ? cb : ca;
    const int32_t row = n >> 1;
    for (int32_t oc = 0; oc < out_c; oc += 2) {
        const int32_t oc1 = oc + 1 < out_c ? oc + 1 : oc; /* an odd last channel: its row twice */
        const uint32_t b0 = bias != NULL ? (uint32_t)bias[oc] : 0u;
        const uint32_t b1 = bias != NULL ? (uint32_t)bias[oc1] : 0u;
        uint32_t acc[4] = {b0, b1, b0, b1};
        mcu_s4_dot_2x2(ca, cb_or_a, weight + oc * row, weight + oc1 * row, n, acc);
        const int32_t m0 = q->multiplier[oc], s0 = q->shift[oc];
        const int32_t m1 = q->multiplier[oc1], s1 = q->shift[oc1];
        ya[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[0]), m0, s0, output_offset, act_min, act_max);
        if (oc1 != oc) {
            ya[oc1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[1]), m1, s1, output_offset, act_min, act_max);
        }
        if (yb != NULL) {
            yb[oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[2]), m0, s0, output_offset, act_min, act_max);
            if (oc1 != oc) {
                yb[oc1] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[3]), m1, s1, output_offset, act_min,
                                                    act_max);
            }
        }
    }
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_S4_DSP_H */
