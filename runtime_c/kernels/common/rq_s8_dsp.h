/* Requantization of int32 accumulators in one 64-bit multiply-accumulate, and four-byte SIMD
 * helpers, for the DSP paths (MCU_S8_DSP, see simd_s8.h) of the depthwise, add and pooling kernels.
 * Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_RQ_S8_DSP_H
#define MCU_KERNELS_INTERNAL_RQ_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "requant.h"
#include "simd_s8.h"

#if MCU_S8_DSP

/* --- requantization of one channel for shift in [-24, -1] ---------------------------------------
 *
 * With R = -shift >= 1 and P = acc * multiplier, mcu_requantize_to_s8_fast computes
 *   y = floor((P + 2^30) / 2^31),  z = rounding_divide_by_pot(y, R) = floor((y + 2^(R-1) - [y < 0]) / 2^R)
 * and nested floors of integer additions merge:  z = floor((P + 2^30 + 2^(R+30) - [y < 0] 2^31) / 2^(31+R)).
 * [y < 0] may be replaced by [acc < 0]: they differ only when y == 0 (multiplier >= 0), where both
 * give z == 0 (0 <= 2^(R-1) - 1 < 2^R). Adding output_offset * 2^(31+R) adds output_offset to z.
 * So z + output_offset is the high word of K[acc < 0] + P shifted right by R - 1, with
 * K[0] = 2^30 + 2^(R+30) + output_offset 2^(31+R) and K[1] = K[0] - 2^31: one SMLAL and an ASR.
 * R <= 24 keeps every sum inside int64 (|P| < 2^62, |output_offset 2^(31+R)| <= 2^62, and the sum
 * stays above -2^63), and the result fits int32 (|sum| < 2^63 = 2^(31+R) 2^(32-R)). The clamp to
 * [-256, 256] of the fast function changes nothing once the result is clamped into int8.
 *
 * On the core K[1] is not loaded: K[1] + P = (K[0] + P) - 2^31 borrows from the high word exactly when
 * bit 31 of the low word of K[0] + P is clear, so BIC (acc AND NOT low) and an ADD of its sign (ASR
 * #31) give the high word of K[acc < 0] + P. Both table loads then take fixed offsets: choosing the
 * pair by acc's sign computed the address in the instruction before the load, which waits a cycle
 * for it on the Cortex-M4/M33 pipeline (no forwarding to the address generator), with as many
 * instructions. */
typedef struct {
    int64_t k[2]; /* K[0], K[1]: for acc >= 0 and acc < 0 */
    int32_t multiplier;
    int32_t rshift; /* R - 1 */
} mcu_rq_ch;

/* The native mcu_rq_ch_apply and mcu_rq4_pack_s8 load the table at these offsets. */
_Static_assert(offsetof(mcu_rq_ch, multiplier) == 16 && offsetof(mcu_rq_ch, rshift) == 20 && sizeof(mcu_rq_ch) == 24,
               "mcu_rq_ch layout");

/* 1 and *t set when shift is in [-24, -1] (multiplier validated by the caller), else 0. */
static inline int mcu_rq_ch_init(mcu_rq_ch *t, int32_t multiplier, int32_t shift, int32_t output_offset)
{
    if (shift > -1 || shift < -24) {
        return 0;
    }
    const int32_t r = -shift;
    /* K[0] by words: 2^30 + 2^(R+30) (bit 31 of the low word for R = 1, else 2^(R-2) in the high
     * word) + output_offset 2^(R-1) in the high word; 32-bit arithmetic only */
    const uint32_t lo = (1u << 30) | (r == 1 ? 1u << 31 : 0u);
    const int32_t hi = (r >= 2 ? (int32_t)1 << (r - 2) : 0) + output_offset * ((int32_t)1 << (r - 1));
    t->k[0] = (int64_t)hi * 4294967296 + (int64_t)lo;
    t->k[1] = t->k[0] - ((int64_t)1 << 31);
    t->multiplier = multiplier;
    t->rshift = r - 1;
    return 1;
}

/* Requantized acc plus the output offset, saturated to int8 (not yet clamped to the activation). */
static inline int32_t mcu_rq_ch_apply(const mcu_rq_ch *t, int32_t acc)
{
#if MCU_S8_DSP_NATIVE
    /* One statement, so that GCC keeps the table in memory and loads it with two LDRDs. */
    uint32_t lo, hi, m, sh, bw;
    int32_t z;
    __asm__("ldrd %[lo], %[hi], [%[t]]\n\t"
            "ldrd %[m], %[sh], [%[t], #16]\n\t"
            "smlal %[lo], %[hi], %[acc], %[m]\n\t"
            "bic %[bw], %[acc], %[lo]\n\t"
            "add %[hi], %[hi], %[bw], asr #31\n\t"
            "asr %[hi], %[hi], %[sh]\n\t"
            "ssat %[z], #8, %[hi]"
            : [z] "=r"(z), [lo] "=&r"(lo), [hi] "=&r"(hi), [m] "=&r"(m), [sh] "=&r"(sh), [bw] "=&r"(bw)
            : [acc] "r"(acc), [t] "r"(t)
            : "memory");
    return z;
#else
    const int64_t s = t->k[acc < 0 ? 1 : 0] + (int64_t)acc * t->multiplier;
    return mcu_clamp_s32((int32_t)mcu_asr64(s, t->rshift + 32), -128, 127);
#endif
}

/* Four accumulators requantized with rq[0..3] (mcu_rq_ch_apply) and packed as four int8 bytes in
 * memory order, not yet clamped to the activation range. */
static inline uint32_t mcu_rq4_pack_s8(const mcu_rq_ch *rq, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3)
{
#if MCU_S8_DSP_NATIVE
    /* One statement with the table at fixed offsets (mcu_rq_ch is 24 bytes): 7 instructions per
     * value and 5 to pack. */
    uint32_t lo, hi, m, sh, bw;
#define MCU_RQ_LANE(a, k, m_ofs)                                                              \
    "ldrd %[lo], %[hi], [%[t], #" k "]\n\t"                                                   \
    "ldrd %[m], %[sh], [%[t], #" m_ofs "]\n\t"                                                \
    "smlal %[lo], %[hi], %[" a "], %[m]\n\t"                                                  \
    "bic %[bw], %[" a "], %[lo]\n\t"                                                          \
    "add %[hi], %[hi], %[bw], asr #31\n\t"                                                    \
    "asr %[hi], %[hi], %[sh]\n\t"                                                             \
    "ssat %[" a "], #8, %[hi]\n\t"
    __asm__(MCU_RQ_LANE("a0", "0", "16") MCU_RQ_LANE("a1", "24", "40") MCU_RQ_LANE("a2", "48", "64")
                MCU_RQ_LANE("a3", "72", "88")
            "pkhbt %[a0], %[a0], %[a2], lsl #16\n\t"
            "pkhbt %[a1], %[a1], %[a3], lsl #16\n\t"
            "and %[a0], %[a0], #0x00FF00FF\n\t"
            "and %[a1], %[a1], #0x00FF00FF\n\t"
            "orr %[a0], %[a0], %[a1], lsl #8"
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [lo] "=&r"(lo), [hi] "=&r"(hi),
              [m] "=&r"(m), [sh] "=&r"(sh), [bw] "=&r"(bw)
            : [t] "r"(rq)
            : "memory");
#undef MCU_RQ_LANE
    return a0;
#else
    return ((uint32_t)mcu_rq_ch_apply(&rq[0], mcu_u32_to_s32(a0)) & 0xFFu) |
           (((uint32_t)mcu_rq_ch_apply(&rq[1], mcu_u32_to_s32(a1)) & 0xFFu) << 8) |
           (((uint32_t)mcu_rq_ch_apply(&rq[2], mcu_u32_to_s32(a2)) & 0xFFu) << 16) |
           (((uint32_t)mcu_rq_ch_apply(&rq[3], mcu_u32_to_s32(a3)) & 0xFFu) << 24);
#endif
}

/* Four int8 bytes clamped to [min, max] (min4/max4: the bounds in all four bytes). */
static inline uint32_t mcu_clamp4_s8(uint32_t v, uint32_t min4, uint32_t max4)
{
#if MCU_S8_DSP_NATIVE
    uint32_t tmp;
    /* Per byte: SSUB8 sets GE where v >= min (signed), SEL keeps v there and min elsewhere; then
     * the same against max. GE lives in the flags, so both pairs stay in one asm statement. */
    __asm__("ssub8 %1, %0, %2\n\t"
            "sel %0, %0, %2\n\t"
            "ssub8 %1, %3, %0\n\t"
            "sel %0, %0, %3"
            : "+r"(v), "=&r"(tmp)
            : "r"(min4), "r"(max4)
            : "cc");
    return v;
#else
    const int32_t lo = mcu_lane_s8(min4, 0), hi = mcu_lane_s8(max4, 0);
    uint32_t r = 0;
    for (int k = 0; k < 4; ++k) {
        r |= ((uint32_t)mcu_clamp_s32(mcu_lane_s8(v, k), lo, hi) & 0xFFu) << (8 * k);
    }
    return r;
#endif
}

/* The int8 value v in all four bytes. */
static inline uint32_t mcu_splat4_s8(int32_t v)
{
    return ((uint32_t)v & 0xFFu) * 0x01010101u;
}

/* Per byte the larger of a and b (signed). */
static inline uint32_t mcu_max4_s8(uint32_t a, uint32_t b)
{
#if MCU_S8_DSP_NATIVE
    uint32_t r, tmp;
    /* SSUB8 sets GE where a >= b, SEL takes a there and b elsewhere (GE in the flags: one statement) */
    __asm__("ssub8 %1, %2, %3\n\t"
            "sel %0, %2, %3"
            : "=r"(r), "=&r"(tmp)
            : "r"(a), "r"(b)
            : "cc");
    return r;
#else
    uint32_t r = 0;
    for (int k = 0; k < 4; ++k) {
        const int32_t x = mcu_lane_s8(a, k), y = mcu_lane_s8(b, k);
        r |= ((uint32_t)(x > y ? x : y) & 0xFFu) << (8 * k);
    }
    return r;
#endif
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_RQ_S8_DSP_H */
