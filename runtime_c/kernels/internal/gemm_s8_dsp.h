/* The inner loops of mcu_conv2d_packed_s8: one output pixel's column times a block of four output
 * channels of packed int16 weights. Internal: static inline only.
 *
 * Why packed int16 weights: with int8 weights every pair of MACs needs a SXTB16 to widen the
 * weights, and weight rows of different channels need a pointer each. Widened and interleaved
 * ahead of time (mcu/backends/tuned.py), one LDM fetches a tap pair of four channels and each
 * SMLAD is a pair of MACs: per 8 taps x 4 channels, 2 LDRD + 4 LDM + 16 SMLAD + 2 loop
 * instructions, 0.75 instructions per MAC, against about 2 for CMSIS-NN's s8 x s16 kernels.
 * The price is flash: the weights of these layers take twice the bytes.
 *
 * The column holds (x + input_offset) as int16, taps padded with 0 to a multiple of 4 and each
 * group of 4 taps in the order 0, 2, 1, 3 (the order SXTB16 / SXTB16-ROR8 produce), so the
 * column is built with two SXTAB16 per 4 bytes. Products and sums are exact integers modulo 2^32
 * in any order, so every path here gives the bits of the plain reference. */
#ifndef MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H
#define MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H

#include <stdint.h>

#include "requant.h"
#include "simd_s8.h"

/* Words of one block of the packed stream: 4 biases, kp / 2 tap pairs of 4 channels, then
 * (multiplier, right shift, 2^(shift - 1)) of each channel. */
static inline int32_t mcu_packed_block_words(int32_t kp)
{
    return 4 + 2 * kp + 12;
}

#if MCU_S8_DSP_NATIVE
/* Four taps (two pairs) of the column (r4) against four channels of the stream (r5), into r0-r3. */
#define MCU_DOT4_HALF                                                                                     \
    "ldrd r12, lr, [r4], #8\n\t"                                                                          \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlad r0, r12, r8, r0\n\t"                                                                           \
    "smlad r1, r12, r9, r1\n\t"                                                                           \
    "smlad r2, r12, r10, r2\n\t"                                                                          \
    "smlad r3, r12, r11, r3\n\t"                                                                          \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlad r0, lr, r8, r0\n\t"                                                                            \
    "smlad r1, lr, r9, r1\n\t"                                                                            \
    "smlad r2, lr, r10, r2\n\t"                                                                           \
    "smlad r3, lr, r11, r3\n\t"

/* The column r4 up to r6 (a multiple of 4 taps) against the stream at r5: 8 taps per pass,
 * entering at the second half when the taps leave 4 over. */
#define MCU_DOT4_LOOP                                                                                     \
    "sub r8, r6, r4\n\t"                                                                                   \
    "tst r8, #8\n\t"                                                                                       \
    "bne 2f\n\t"                                                                                           \
    "1:\n\t" MCU_DOT4_HALF "2:\n\t" MCU_DOT4_HALF                                                         \
    "cmp r4, r6\n\t"                                                                                       \
    "bne 1b\n\t"
#endif

/* acc[0..3] += col . the block's weight pairs (w: the first pair word), over kp taps (a positive
 * multiple of 4). */
static inline void mcu_dot4_packed(const int16_t *col, const int32_t *w, int32_t kp, uint32_t acc[4])
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
        MCU_DOT4_LOOP
        : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(x), "+r"(wp), "+r"(e)
        :
        : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
#else
    for (int32_t j = 0; j < kp; j += 2) {
        const int32_t x0 = col[j], x1 = col[j + 1];
        for (int32_t o = 0; o < 4; ++o) {
            const uint32_t word = (uint32_t)w[o];
            const int32_t lo = (int32_t)(int16_t)(uint16_t)(word & 0xFFFFu);
            const int32_t hi = (int32_t)(int16_t)(uint16_t)(word >> 16);
            acc[o] += (uint32_t)(x0 * lo) + (uint32_t)(x1 * hi);
        }
        w += 4;
    }
#endif
}

#if MCU_S8_DSP_NATIVE
/* One whole block on the core: biases into the accumulators (one LDM), the dot product (per 8
 * taps 2 LDRD + 4 LDM + 16 SMLAD + compare and branch, entering half-way when kp % 8 == 4), then
 * the four requantizations and one word store. `layer` holds (output_offset, act_min, act_max,
 * act_min in four bytes, act_max in four bytes). Every register is fixed because LDM fills
 * registers in ascending order. Returns the next block.
 *
 * Requantization with (m, s, 2^(s-1)) from the stream, s = -shift in [1, 23], in 10 instructions
 * a channel: mcu_requant_right_s8 computes z = floor((y + 2^(s-1) - [y < 0]) / 2^s) with
 * y = floor((P + 2^30) / 2^31), P = acc * m; nested floors of integer sums merge into
 *   z = floor((P + 2^30 + 2^31 (2^(s-1) - [acc < 0])) / 2^(31+s))
 * ([y < 0] becomes [acc < 0]: they differ only when y == 0, where both give z == 0, as
 * internal/rq_s8_dsp.h shows). With u = 2^(s-1) - [acc < 0] >= 0 (one ADD with ASR #31), the
 * constant 2^30 + 2^31 u is the 64-bit (hi, lo) = (u >> 1, (u << 31) | 2^30); SMLAL adds P and
 * z is hi >> (s - 1). |P| < 2^62, so the sum stays inside int64 and z inside int32 for s >= 1.
 * SSAT to int8 after adding the output offset, then a byte-wise clamp to the activation range of
 * the four packed bytes (the range lies inside int8, so saturating first changes nothing): where
 * mcu_requant_right_s8's QADD saturates, z exceeds 2^8 either way and both give act_max. */
static inline const int32_t *mcu_block4_packed(const int16_t *col, int32_t kp, const int32_t *blob, int8_t *y,
                                               const int32_t *layer)
{
    register const int16_t *x __asm__("r4") = col;
    register const int32_t *w __asm__("r5") = blob;
    register const int16_t *e __asm__("r6") = col + kp;
    register int8_t *yp __asm__("r8") = y;
    register const int32_t *lp __asm__("r9") = layer;
    __asm__ volatile(
        "push {r8, r9}\n\t"
        "ldmia r5!, {r0, r1, r2, r3}\n\t"
        MCU_DOT4_LOOP
        "pop {r4, r6}\n\t" /* r4: y, r6: the layer's five words */
        "ldr lr, [r6]\n\t"  /* output_offset */
#define MCU_RQ(acc)                                                                                   \
        "ldmia r5!, {r8, r9, r10}\n\t"                                                                \
        "add r10, r10, " acc ", asr #31\n\t"                                                          \
        "lsl r11, r10, #31\n\t"                                                                       \
        "orr r11, r11, #0x40000000\n\t"                                                               \
        "asr r12, r10, #1\n\t"                                                                        \
        "smlal r11, r12, " acc ", r8\n\t"                                                             \
        "sub r9, r9, #1\n\t"                                                                          \
        "asr r12, r12, r9\n\t"                                                                        \
        "add r12, r12, lr\n\t"                                                                        \
        "ssat " acc ", #8, r12\n\t"
        MCU_RQ("r0") MCU_RQ("r1") MCU_RQ("r2") MCU_RQ("r3")
#undef MCU_RQ
        "pkhbt r0, r0, r2, lsl #16\n\t"
        "pkhbt r1, r1, r3, lsl #16\n\t"
        "and r0, r0, #0x00FF00FF\n\t"
        "and r1, r1, #0x00FF00FF\n\t"
        "orr r0, r0, r1, lsl #8\n\t"
        "ldrd r8, r9, [r6, #12]\n\t"
        "ssub8 r10, r0, r8\n\t"
        "sel r0, r0, r8\n\t"
        "ssub8 r10, r9, r0\n\t"
        "sel r0, r0, r9\n\t"
        "str r0, [r4]\n\t"
        : [x] "+r"(x), [w] "+r"(w), [e] "+r"(e), [yp] "+r"(yp), [lp] "+r"(lp)
        :
        : "r0", "r1", "r2", "r3", "r10", "r11", "r12", "lr", "cc", "memory");
    return w;
}
#endif

/* mcu_requantize_to_s8 for a validated multiplier and a right shift s = -shift in [1, 23] (real
 * layers: the output scale is larger than input scale x weight scale), with round = 2^(s-1), in
 * about half the instructions. The rounding divide by 2^s (half away from zero) is
 * floor((y + 2^(s-1) - [y < 0]) / 2^s); the addition saturates instead of wrapping, and when it
 * saturates the exact quotient and the saturated one, 2^(31-s) and 2^(31-s) - 1, are both at
 * least 255 for s <= 23, which the int8 clamp (offset >= -128, act_max <= 127) maps to the same
 * act_max. Right shifts of negative values are arithmetic, as GCC and Clang define them (the
 * compilers of these paths); mcu_block4_packed is the same sequence in assembly. */
static inline int8_t mcu_requant_right_s8(int32_t acc, int32_t multiplier, int32_t s, int32_t round,
                                          int32_t output_offset, int32_t act_min, int32_t act_max)
{
    const int64_t prod = (int64_t)acc * multiplier + ((int64_t)1 << 30);
    int32_t y = (int32_t)(prod >> 31);
    y += y >> 31;
    y = mcu_qadd(y, round) >> s;
    y += output_offset;
    y = y < act_min ? act_min : y;
    return (int8_t)(y > act_max ? act_max : y);
}

#endif /* MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H */
