/* Helium (MVE) table path of the int8 add and subtract (elementwise/binary_s8.h): 16 elements per loop
 * iteration for contiguous rows. Internal: static inline only; defines nothing unless MCU_S8_MVE.
 *
 * Each operand's rescale requantize((q + offset) 2^left_shift, m, shift) has 256 possible values: a
 * table of them (indexed by the byte's unsigned value) replaces the arithmetic with a byte gather of
 * the indices and a word gather from the table. The sum saturates (VQADD = mcu_sat_s32; the
 * subtract negates its second table, which cannot overflow: a rescaled value is > INT32_MIN because
 * the multiplier is < 2^31). The output requantization, for out_shift in [-31, -1] (right = -shift):
 *  - y = rounding_doubling_high_mul(acc, m) and the round-half-away fixup in one VQRDMLAH:
 *    it returns fix + y exactly (sat(fix 2^32 + 2 acc m + 2^31) >> 32), with fix = acc >> 31 (-1 when
 *    acc < 0). mcu_requantize's fixup is -1 when y < 0; acc < 0 gives y <= 0, and where y == 0
 *    the extra -1 still rounds to 0 (VRSHL of -1 by right >= 1), so the result is the same;
 *  - VRSHL by -right: (z + 2^(right - 1)) >> right, the rounding_divide_by_pot;
 *  - the narrowing: VQMOVN saturates to int16, the offset is added on 16-bit lanes with saturation,
 *    VQMOVN saturates to int8 (a narrower activation range is a byte clamp pass afterwards). That is
 *    clamp(sat32(y + offset)) per lane: the bounds lie in [-128, 127] and |offset| <= 128, so a value
 *    that saturates on 16 bits lands beyond the bounds with or without the offset.
 * The narrowing interleaves even and odd lanes (VQMOVNB/VQMOVNT, twice), so the sixteen results come
 * out in the order of mcu_mve_add_perm and one byte scatter stores them in memory order. */
#ifndef MCU_KERNELS_INTERNAL_MVE_ADD_S8_H
#define MCU_KERNELS_INTERNAL_MVE_ADD_S8_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/mve_s8.h"

#if MCU_S8_MVE

/* Element (0..15) of a 16-element step held by each byte lane after the loop's narrowing: the four
 * word vectors hold elements 0-3, 4-7, 8-11, 12-15; VQMOVNB/VQMOVNT of the first two give 16-bit
 * lanes 0, 4, 1, 5, 2, 6, 3, 7 (the last two 8, 12, 9, ...), and the byte narrowing interleaves those. */
static inline uint8x16_t mcu_mve_add_perm(void)
{
    _Alignas(16) static const uint8_t perm[16] = {0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15};
    return vldrbq_u8(perm);
}

/* lut[u] = +-requantize(((int8_t)u + offset) 2^left_shift, multiplier, shift) for u in [0, 256), as
 * mcu_binary_s8_apply computes each operand's rescale (the lanes as in mcu_mve_binary_lanes). */
static inline void mcu_mve_add_lut(int32_t *lut, int32_t offset, int32_t left_shift, int32_t multiplier,
                                   int32_t shift, int negate)
{
    const mcu_mve_rq1 r = mcu_mve_rq1_make(multiplier, shift);
    const int32x4_t scale = vdupq_n_s32((int32_t)1 << left_shift);
    const int32_t add = offset * ((int32_t)1 << left_shift);
    for (int32_t u = 0; u < 256; u += 4) {
        const int32x4_t v = vsubq_n_s32(vreinterpretq_s32_u32(vidupq_n_u32((uint32_t)u, 1)), u < 128 ? 0 : 256);
        int32x4_t y = mcu_mve_requantize_1(vmlasq_n_s32(v, scale, add), &r);
        if (negate) {
            y = vnegq_s32(y);
        }
        vstrwq_s32(lut + u, y);
    }
}

/* The output parameters of the table loop: multiplier, -right (in [-31, -1]), offset, clamp. */
typedef struct {
    int32_t m, neg_right, offset, act_min, act_max;
} mcu_mve_add_out;

/* 1 when the table loop's output requantization applies (a right shift of at least 1). */
static inline int mcu_mve_add_out_make(const mcu_binary_s8_params *p, mcu_mve_add_out *o)
{
    o->m = p->out_multiplier;
    o->neg_right = p->out_shift;
    o->offset = p->output_offset;
    o->act_min = p->act_min;
    o->act_max = p->act_max;
    return p->out_shift < 0;
}

/* One quarter of a step: elements 4k .. 4k + 3 (a and b move on by 4) requantized into q3, then
 * narrowed into q4 or q5 by `nar`. */
#define MCU_MVE_ADD_QUARTER(nar)                                                                                     \
    "   vldrb.u32 q0, [%[a]], #4\n"                                                                                  \
    "   vldrb.u32 q1, [%[b]], #4\n"                                                                                  \
    "   vldrw.u32 q2, [%[la], q0, uxtw #2]\n"                                                                        \
    "   vldrw.u32 q3, [%[lb], q1, uxtw #2]\n"                                                                        \
    "   vqadd.s32 q2, q2, q3\n"                                                                                      \
    "   vshr.s32 q3, q2, #31\n"                                                                                      \
    "   vqrdmlah.s32 q3, q2, %[m]\n"                                                                                 \
    "   vrshl.s32 q3, %[nr]\n"                                                                                       \
    "   " nar " q3\n"

/* out[i] = requantize(sat(la[(uint8_t)a[i]] + lb[(uint8_t)b[i]])) for i in [0, 16 * steps), steps
 * >= 1, clamped to the full int8 range (the caller clamps a narrower activation range afterwards).
 * Each step reads its 16 elements of a and b before it writes those of out, so an operand may be
 * the output itself. One assembly loop (see mve_s8.h for why), in a function of its own so that
 * its nine registers are free. */
static __attribute__((noinline, unused)) void mcu_mve_add_lut_rows(const int32_t *la, const int32_t *lb,
                                                                   const mcu_mve_add_out *o, const int8_t *a,
                                                                   const int8_t *b, int8_t *out, int32_t steps)
{
    const uint8x16_t perm = mcu_mve_add_perm();
    const int16x8_t off = vdupq_n_s16((int16_t)o->offset);
    __asm__ volatile("   dls lr, %[steps]\n"
                     "1:\n" MCU_MVE_ADD_QUARTER("vqmovnb.s32 q4,") MCU_MVE_ADD_QUARTER("vqmovnt.s32 q4,")
                         MCU_MVE_ADD_QUARTER("vqmovnb.s32 q5,") MCU_MVE_ADD_QUARTER("vqmovnt.s32 q5,")
                     "   vqadd.s16 q4, q4, %q[off]\n"
                     "   vqadd.s16 q5, q5, %q[off]\n"
                     "   vqmovnb.s16 q0, q4\n"
                     "   vqmovnt.s16 q0, q5\n"
                     "   vstrb.8 q0, [%[y], %q[perm]]\n"
                     "   add %[y], %[y], #16\n"
                     "   le lr, 1b\n"
                     : [a] "+l"(a), [b] "+l"(b), [y] "+r"(out)
                     : [la] "r"(la), [lb] "r"(lb), [m] "r"(o->m), [nr] "r"(o->neg_right), [steps] "r"(steps),
                       [off] "w"(off), [perm] "w"(perm)
                     : "q0", "q1", "q2", "q3", "q4", "q5", "lr", "memory");
}
#undef MCU_MVE_ADD_QUARTER

/* y[0 .. n) = clamp(y, lo, hi), 16 bytes per step (tail-predicated as mcu_mve_copy_s8). */
static inline void mcu_mve_clamp_s8(int8_t *y, int32_t n, int32_t lo, int32_t hi)
{
    const int8x16_t vlo = vdupq_n_s8((int8_t)lo);
    const int8x16_t vhi = vdupq_n_s8((int8_t)hi);
    __asm__ volatile("   wlstp.8 lr, %[n], 2f\n"
                     "1: vldrb.8 q0, [%[y]]\n"
                     "   vmax.s8 q0, q0, %q[lo]\n"
                     "   vmin.s8 q0, q0, %q[hi]\n"
                     "   vstrb.8 q0, [%[y]], #16\n"
                     "   letp lr, 1b\n"
                     "2:\n"
                     : [y] "+r"(y)
                     : [n] "r"(n), [lo] "w"(vlo), [hi] "w"(vhi)
                     : "q0", "lr", "memory");
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_ADD_S8_H */
