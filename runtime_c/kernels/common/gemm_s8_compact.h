/* The dual-MAC loops of the compact-weight kernels (mcu_conv2d_compact_s8, mcu_linear_compact_s8):
 * int8 weight words widened by SXTB16 against int16 columns (convolution/conv_column_s8.h's layout).
 * mcu_conv2d_compact_s8.c explains the stream and the blocking. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_GEMM_S8_COMPACT_H
#define MCU_KERNELS_INTERNAL_GEMM_S8_COMPACT_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "simd_s8.h"

/* Words of one block: 4 biases, kp words of weights (kp / 4 groups of 4 channels), 8 requantization words. */
static inline int32_t mcu_compact_block_words(int32_t kp)
{
    return 4 + kp + 8;
}

static inline int32_t mcu_compact_blocks(int32_t cout)
{
    return (cout + 3) / 4;
}

#if !MCU_S8_DSP_NATIVE
/* One group of 4 column values (taps 0, 2, 1, 3) times one channel's weight word (taps 0..3 in byte
 * order), modulo 2^32: what the two SXTB16 and two SMLAD compute. */
static inline uint32_t mcu_compact_group_dot(const int16_t *c, uint32_t w)
{
    const int32_t t0 = (int8_t)(w & 0xFFu), t1 = (int8_t)((w >> 8) & 0xFFu);
    const int32_t t2 = (int8_t)((w >> 16) & 0xFFu), t3 = (int8_t)(w >> 24);
    return (uint32_t)(c[0] * t0) + (uint32_t)(c[1] * t2) + (uint32_t)(c[2] * t1) + (uint32_t)(c[3] * t3);
}
#endif

#if MCU_S8_DSP_NATIVE
/* The single-pixel loop of mcu_compact_dot1x4 and mcu_compact_block1x4: the column r4 up to r6 against
 * the stream r5 into r0-r3, two groups of 4 taps a pass (entering at the second when the groups are
 * odd: 8 bytes of column each); r7 is the widening temporary (saved by the caller's statement). */
#define MCU_COMPACT_CH(acc, wr)                                                                           \
        "sxtb16 r7, " wr "\n\t"                                                                           \
        "sxtb16 " wr ", " wr ", ror #8\n\t"                                                               \
        "smlad " acc ", r8, r7, " acc "\n\t"                                                              \
        "smlad " acc ", r9, " wr ", " acc "\n\t"
#define MCU_COMPACT_GROUP1X4                                                                              \
        "ldrd r8, r9, [r4], #8\n\t"                                                                      \
        "ldmia r5!, {r10, r11, r12, lr}\n\t"                                                             \
        MCU_COMPACT_CH("r0", "r10") MCU_COMPACT_CH("r1", "r11") MCU_COMPACT_CH("r2", "r12")               \
        MCU_COMPACT_CH("r3", "lr")
#define MCU_COMPACT_LOOP1X4                                                                               \
        "sub r8, r6, r4\n\t"                                                                             \
        "tst r8, #8\n\t"                                                                                 \
        "bne 2f\n\t"                                                                                     \
        "1:\n\t" MCU_COMPACT_GROUP1X4 "2:\n\t" MCU_COMPACT_GROUP1X4                                    \
        "cmp r4, r6\n\t"                                                                                 \
        "bne 1b\n\t"
#endif

/* acc[0..3] (pixel A channel 0, 1, pixel B channel 0, 1) += the interleaved two-pixel column cc (per
 * group of 4 taps: A's two words, B's two words) . the weight words of 2 channels at w (one LDRD
 * per group, the groups 16 bytes apart). kp: a positive multiple of 4. */
static inline void mcu_compact_dot2x2(const int16_t *cc, const int32_t *w, int32_t kp, uint32_t acc[4])
{
#if MCU_S8_DSP_NATIVE
    register uint32_t a0 __asm__("r0") = acc[0];
    register uint32_t a1 __asm__("r1") = acc[1];
    register uint32_t b0 __asm__("r2") = acc[2];
    register uint32_t b1 __asm__("r3") = acc[3];
    register const int16_t *x __asm__("r4") = cc;
    register const int32_t *wp __asm__("r5") = w;
    register const int16_t *e __asm__("r6") = cc + 2 * kp;
    /* r7 may be the frame pointer: saved and restored here, and no operand refers to memory. */
    /* Two groups per pass, entering at the second when the groups are odd (16 bytes of cc each). */
#define MCU_COMPACT_GROUP2X2                                                                              \
        "ldmia r4!, {r8, r9, r10, r11}\n\t"                                                              \
        "ldrd r12, lr, [r5], #16\n\t"                                                                   \
        "sxtb16 r7, r12\n\t"                                                                            \
        "sxtb16 r12, r12, ror #8\n\t"                                                                   \
        "smlad r0, r8, r7, r0\n\t"                                                                      \
        "smlad r0, r9, r12, r0\n\t"                                                                     \
        "smlad r2, r10, r7, r2\n\t"                                                                     \
        "smlad r2, r11, r12, r2\n\t"                                                                    \
        "sxtb16 r7, lr\n\t"                                                                             \
        "sxtb16 lr, lr, ror #8\n\t"                                                                     \
        "smlad r1, r8, r7, r1\n\t"                                                                      \
        "smlad r1, r9, lr, r1\n\t"                                                                      \
        "smlad r3, r10, r7, r3\n\t"                                                                     \
        "smlad r3, r11, lr, r3\n\t"
    __asm__ volatile(
        "push {r7}\n\t"
        "sub r8, r6, r4\n\t"
        "tst r8, #16\n\t"
        "bne 2f\n\t"
        "1:\n\t" MCU_COMPACT_GROUP2X2 "2:\n\t" MCU_COMPACT_GROUP2X2
        "cmp r4, r6\n\t"
        "bne 1b\n\t"
        "pop {r7}\n\t"
        : "+r"(a0), "+r"(a1), "+r"(b0), "+r"(b1), "+r"(x), "+r"(wp), "+r"(e)
        :
        : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
#undef MCU_COMPACT_GROUP2X2
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = b0;
    acc[3] = b1;
#else
    for (int32_t g = 0; g < kp / 4; ++g, cc += 8, w += 4) {
        acc[0] += mcu_compact_group_dot(cc, (uint32_t)w[0]);
        acc[1] += mcu_compact_group_dot(cc, (uint32_t)w[1]);
        acc[2] += mcu_compact_group_dot(cc + 4, (uint32_t)w[0]);
        acc[3] += mcu_compact_group_dot(cc + 4, (uint32_t)w[1]);
    }
#endif
}

/* acc[0..3] += the one-pixel column col . the weight words of 4 channels at w (one LDM per group). */
static inline void mcu_compact_dot1x4(const int16_t *col, const int32_t *w, int32_t kp, uint32_t acc[4])
{
#if MCU_S8_DSP_NATIVE
    register uint32_t a0 __asm__("r0") = acc[0];
    register uint32_t a1 __asm__("r1") = acc[1];
    register uint32_t a2 __asm__("r2") = acc[2];
    register uint32_t a3 __asm__("r3") = acc[3];
    register const int16_t *x __asm__("r4") = col;
    register const int32_t *wp __asm__("r5") = w;
    register const int16_t *e __asm__("r6") = col + kp;
    __asm__ volatile(
        "push {r7}\n\t"
        MCU_COMPACT_LOOP1X4
        "pop {r7}\n\t"
        : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(x), "+r"(wp), "+r"(e)
        :
        : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
#else
    for (int32_t g = 0; g < kp / 4; ++g, col += 4, w += 4) {
        for (int32_t o = 0; o < 4; ++o) {
            acc[o] += mcu_compact_group_dot(col, (uint32_t)w[o]);
        }
    }
#endif
}

/* Four accumulators of one block requantized from the stream's (multiplier, shift) pairs mq, every shift
 * a right shift R in [1, 24], packed as four int8 bytes in memory order (not yet clamped to the
 * activation range). t = 1 + 2 output_offset. The K words of common/rq_s8_dsp.h come from t on the
 * fly: K = 2^30 + 2^(R+30) + output_offset 2^(R+31) = 2^30 + u 2^31 with u = t 2^(R-1) (|u| < 2^31
 * for R <= 24), z = floor((acc m + K - [acc < 0] 2^31) / 2^(31+R)) saturated to int8: what
 * mcu_compact_block1x4 computes on the core in 12 instructions a value, with no table to fill. */
static inline uint32_t mcu_compact_rq4_c(const int32_t *mq, const uint32_t acc[4], int32_t t)
{
    uint32_t packed = 0;
    for (int o = 0; o < 4; ++o) {
        const int32_t a = mcu_u32_to_s32(acc[o]);
        const int32_t r = -mq[2 * o + 1];
        const int64_t u = (int64_t)t * ((int64_t)1 << (r - 1));
        const int64_t sum = ((int64_t)1 << 30) + u * ((int64_t)1 << 31) - (a < 0 ? (int64_t)1 << 31 : 0) +
                            (int64_t)a * mq[2 * o];
        const int32_t z = mcu_clamp_s32((int32_t)mcu_asr64(sum, 31 + r), -128, 127);
        packed |= ((uint32_t)z & 0xFFu) << (8 * o);
    }
    return packed;
}

#if MCU_S8_DSP_NATIVE
/* One whole block of a single row (the core's assembly; mcu_compact_rq4_c elsewhere): its 4 biases (one LDM), the dot product of the
 * column col (kp taps) with the 4 channels' weight words (mcu_compact_dot1x4's loop), then the 4
 * requantizations of mcu_compact_rq4_c from the (multiplier, shift) pairs that follow the weights,
 * packed as four int8 bytes in memory order (not yet clamped to the activation range). Every shift
 * must be a right shift in [1, 24]; t = 1 + 2 output_offset. One statement with fixed registers, so
 * that nothing goes through memory between the loop and the requantization. */
static inline uint32_t mcu_compact_block1x4(const int16_t *col, int32_t kp, const int32_t *blob, int32_t t)
{
    register uint32_t r0 __asm__("r0");
    register const int16_t *x __asm__("r4") = col;
    register const int32_t *w __asm__("r5") = blob;
    register const int16_t *e __asm__("r6") = col + kp;
    register int32_t tt __asm__("r8") = t;
#define MCU_COMPACT_RQ(acc)                                                                               \
        "ldrd r8, r9, [r5], #8\n\t"                                                                      \
        "mvn r9, r9\n\t"                                                                                 \
        "lsl r10, r6, r9\n\t"                                                                            \
        "lsl r11, r10, #31\n\t"                                                                          \
        "orr r11, r11, #0x40000000\n\t"                                                                  \
        "asr r10, r10, #1\n\t"                                                                           \
        "and r12, " acc ", #0x80000000\n\t"                                                              \
        "adds r11, r11, r12\n\t"                                                                         \
        "adc r10, r10, " acc ", asr #31\n\t"                                                             \
        "smlal r11, r10, " acc ", r8\n\t"                                                                \
        "asr r10, r10, r9\n\t"                                                                           \
        "ssat " acc ", #8, r10\n\t"
    __asm__ volatile(
        "push {r7, r8}\n\t"
        "ldmia r5!, {r0, r1, r2, r3}\n\t"
        MCU_COMPACT_LOOP1X4
        "ldr r6, [sp, #4]\n\t" /* t */
        MCU_COMPACT_RQ("r0") MCU_COMPACT_RQ("r1") MCU_COMPACT_RQ("r2") MCU_COMPACT_RQ("r3")
        "pkhbt r0, r0, r2, lsl #16\n\t"
        "pkhbt r1, r1, r3, lsl #16\n\t"
        "and r0, r0, #0x00FF00FF\n\t"
        "and r1, r1, #0x00FF00FF\n\t"
        "orr r0, r0, r1, lsl #8\n\t"
        "pop {r7, r8}\n\t"
        : "=r"(r0), "+r"(x), "+r"(w), "+r"(e), "+r"(tt)
        :
        : "r1", "r2", "r3", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
#undef MCU_COMPACT_RQ
    return r0;
}
#elif MCU_S8_DSP
static inline uint32_t mcu_compact_block1x4(const int16_t *col, int32_t kp, const int32_t *blob, int32_t t)
{
    uint32_t acc[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[2], (uint32_t)blob[3]};
    mcu_compact_dot1x4(col, blob + 4, kp, acc);
    return mcu_compact_rq4_c(blob + 4 + kp, acc, t);
}
#endif

/* The header names the layer the stream was packed for. */
static inline int mcu_compact_header_ok(const int32_t *stream, int32_t cout, int32_t kp)
{
    return stream[0] == MCU_COMPACT_MAGIC && stream[1] == 0 && stream[2] == cout && stream[3] == kp;
}

#if MCU_S8_DSP_NATIVE
#undef MCU_COMPACT_CH
#undef MCU_COMPACT_GROUP1X4
#undef MCU_COMPACT_LOOP1X4
#endif

#endif /* MCU_KERNELS_INTERNAL_GEMM_S8_COMPACT_H */
