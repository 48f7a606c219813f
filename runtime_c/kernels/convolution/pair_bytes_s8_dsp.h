/* The byte-weight stream of mcu_conv2d_packed_s8 (the stream's MCU_PACKED_FLAG_BYTES; fully connected
 * layers whose weights sit in memory with wait states): half the bytes of the int16 pairs, for the
 * same instructions per multiply-accumulate.
 *
 * Each weight word holds two channels A and B of one block for two taps ta, tb of the column (the
 * 0, 2, 1, 3 order of mcu_column_s8): its halves are the int16 values 256 wB + wA. With x the
 * column word of ta and tb, SMLAD(word, x) accumulates 256 DB + DA and SMLAD(SXTB16(word), x)
 * (the low bytes, wA sign-extended) accumulates DA: DB is their difference shifted right by 8.
 * Per four taps of four channels: one LDRD of the column, one LDM of four weight words, four
 * SXTB16 and eight SMLAD, where the int16 pairs take two LDM of four words and eight SMLAD; the
 * SXTB16 instead of CMSIS-NN's two per weight word (SXTB16 and SXTB16 ROR 8, one channel per word)
 * is what keeps the count.
 *
 * The packer (mcu/backends/optimized/tuned.py, pack_layer_bytes) takes the layout only where it is
 * exact: 256 wB + wA fits int16 (not wB = -128 with wA < 0), and max |x| sum |wB| < 2^23, so that DB
 * survives the shift whatever the input (max |x| from the layer's input offset: 255 at worst, int8 plus an
 * offset in [-127, 128]);
 * the sums wrap modulo 2^32 on the way, which the difference undoes. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_PAIR_BYTES_S8_DSP_H
#define MCU_KERNELS_INTERNAL_PAIR_BYTES_S8_DSP_H

#include <stdint.h>

#include "../common/requant.h"
#include "../common/simd_s8.h"

/* Words of one block of the byte stream: the accumulators' start (bias 0, bias 0, bias 2, bias 2: one
 * LDM), kp weight words (two per column word: channels 0 and 1, then 2 and 3), biases 1 and 3 (added
 * once B's sums are out), four requantization words per channel (as the int16 stream's). */
static inline int32_t mcu_bytes_block_words(int32_t kp)
{
    return 4 + kp + 2 + 16;
}

#if MCU_S8_DSP_NATIVE
/* Four taps (two column words, r4) against the block's four weight words (r5): r0 DA of channels 0
 * and 1, r1 their 256 DB + DA, r2 and r3 the same of channels 2 and 3. */
#define MCU_PB_UNIT                                                                                       \
    "ldrd r12, lr, [r4], #8\n\t"                                                                          \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlad r1, r12, r8, r1\n\t"                                                                           \
    "sxtb16 r8, r8\n\t"                                                                                   \
    "smlad r0, r12, r8, r0\n\t"                                                                           \
    "smlad r3, r12, r9, r3\n\t"                                                                           \
    "sxtb16 r9, r9\n\t"                                                                                   \
    "smlad r2, r12, r9, r2\n\t"                                                                           \
    "smlad r1, lr, r10, r1\n\t"                                                                           \
    "sxtb16 r10, r10\n\t"                                                                                 \
    "smlad r0, lr, r10, r0\n\t"                                                                           \
    "smlad r3, lr, r11, r3\n\t"                                                                           \
    "sxtb16 r11, r11\n\t"                                                                                 \
    "smlad r2, lr, r11, r2\n\t"

/* One channel's requantization from its words (K low, K high, multiplier, R - 1) at r5: gemm_s8_dsp.h's
 * MCU_RQ_PACKED (mcu_packed_rq_s8 derives it), which that header keeps to itself. */
#define MCU_PB_RQ(acc)                                                                                    \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlal r8, r9, " acc ", r10\n\t"                                                                      \
    "bic r12, " acc ", r8\n\t"                                                                            \
    "add r9, r9, r12, asr #31\n\t"                                                                        \
    "asr r9, r9, r11\n\t"                                                                                 \
    "ssat " acc ", #8, r9\n\t"

/* The column r4 up to r6 in passes of 64 taps, the first entering through a TBH on (column bytes /
 * 8) mod 16 so that whole passes follow (as gemm_s8_dsp.h's MCU_DOT4_LOOP64). */
#define MCU_PB_LOOP64                                                                                     \
    "sub r8, r6, r4\n\t"                                                                                   \
    "ubfx r8, r8, #3, #4\n\t"                                                                             \
    "tbh [pc, r8, lsl #1]\n\t"                                                                            \
    "0:\n\t"                                                                                              \
    ".hword (10f - 0b) / 2, (25f - 0b) / 2, (24f - 0b) / 2, (23f - 0b) / 2\n\t"                             \
    ".hword (22f - 0b) / 2, (21f - 0b) / 2, (20f - 0b) / 2, (19f - 0b) / 2\n\t"                             \
    ".hword (18f - 0b) / 2, (17f - 0b) / 2, (16f - 0b) / 2, (15f - 0b) / 2\n\t"                             \
    ".hword (14f - 0b) / 2, (13f - 0b) / 2, (12f - 0b) / 2, (11f - 0b) / 2\n\t"                             \
    "10:\n\t" MCU_PB_UNIT "11:\n\t" MCU_PB_UNIT "12:\n\t" MCU_PB_UNIT "13:\n\t" MCU_PB_UNIT             \
    "14:\n\t" MCU_PB_UNIT "15:\n\t" MCU_PB_UNIT "16:\n\t" MCU_PB_UNIT "17:\n\t" MCU_PB_UNIT             \
    "18:\n\t" MCU_PB_UNIT "19:\n\t" MCU_PB_UNIT "20:\n\t" MCU_PB_UNIT "21:\n\t" MCU_PB_UNIT             \
    "22:\n\t" MCU_PB_UNIT "23:\n\t" MCU_PB_UNIT "24:\n\t" MCU_PB_UNIT "25:\n\t" MCU_PB_UNIT             \
    "cmp r4, r6\n\t"                                                                                      \
    "bne 10b\n\t"
#endif

/* The four accumulators of one block over kp taps (a positive multiple of 4) of the column, biases
 * included (the C paths: the host, the emulated build, and streams whose shifts are not all right
 * shifts). */
static inline void mcu_pair_bytes_dot(const int16_t *col, const int32_t *blob, int32_t kp, int32_t acc[4])
{
    uint32_t a0 = (uint32_t)blob[0], a1 = (uint32_t)blob[1], a2 = (uint32_t)blob[2], a3 = (uint32_t)blob[3];
    const int32_t *wp = blob + 4;
    for (int32_t j = 0; j < kp; j += 2, wp += 2) {
        const int32_t x0 = col[j], x1 = col[j + 1];
        const uint32_t w01 = (uint32_t)wp[0], w23 = (uint32_t)wp[1];
        /* SMLAD of the word's int16 halves, and of their low bytes (SXTB16) */
        a1 += (uint32_t)(x0 * (int32_t)(int16_t)(w01 & 0xFFFFu)) + (uint32_t)(x1 * (int32_t)(int16_t)(w01 >> 16));
        a0 += (uint32_t)(x0 * (int32_t)(int8_t)(w01 & 0xFFu)) + (uint32_t)(x1 * (int32_t)(int8_t)((w01 >> 16) & 0xFFu));
        a3 += (uint32_t)(x0 * (int32_t)(int16_t)(w23 & 0xFFFFu)) + (uint32_t)(x1 * (int32_t)(int16_t)(w23 >> 16));
        a2 += (uint32_t)(x0 * (int32_t)(int8_t)(w23 & 0xFFu)) + (uint32_t)(x1 * (int32_t)(int8_t)((w23 >> 16) & 0xFFu));
    }
    /* (a1 - a0) is 256 DB modulo 2^32: the arithmetic shift recovers DB (|DB| < 2^23) */
    acc[0] = mcu_u32_to_s32(a0);
    acc[1] = mcu_u32_to_s32((uint32_t)mcu_asr32(mcu_u32_to_s32(a1 - a0), 8) + (uint32_t)wp[0]);
    acc[2] = mcu_u32_to_s32(a2);
    acc[3] = mcu_u32_to_s32((uint32_t)mcu_asr32(mcu_u32_to_s32(a3 - a2), 8) + (uint32_t)wp[1]);
}

#if MCU_S8_DSP_NATIVE
/* One whole block on the core, for streams whose shifts are all right shifts (FLAG_RIGHT): the
 * accumulators (one LDM), the dot product (MCU_PB_LOOP64), B's sums out and their biases in, the
 * four requantizations (MCU_PB_RQ) and the four bytes packed into one word
 * (saturated to int8, not yet clamped to the activation range). *blob moves to the next block. */
static inline uint32_t mcu_pair_bytes_block(const int16_t *col, const int32_t **blob, int32_t kp)
{
    register uint32_t a0 __asm__("r0");
    register uint32_t a1 __asm__("r1");
    register uint32_t a2 __asm__("r2");
    register uint32_t a3 __asm__("r3");
    register const int16_t *x __asm__("r4") = col;
    register const int32_t *wp __asm__("r5") = *blob;
    register const int16_t *e __asm__("r6") = col + kp;
    __asm__ volatile(
        "ldmia r5!, {r0, r1, r2, r3}\n\t"
        MCU_PB_LOOP64
        "ldmia r5!, {r8, r9}\n\t"
        "sub r1, r1, r0\n\t"
        "add r1, r8, r1, asr #8\n\t"
        "sub r3, r3, r2\n\t"
        "add r3, r9, r3, asr #8\n\t"
        MCU_PB_RQ("r0") MCU_PB_RQ("r1") MCU_PB_RQ("r2") MCU_PB_RQ("r3")
        "pkhbt r0, r0, r2, lsl #16\n\t"
        "pkhbt r1, r1, r3, lsl #16\n\t"
        "and r0, r0, #0x00FF00FF\n\t"
        "and r1, r1, #0x00FF00FF\n\t"
        "orr r0, r0, r1, lsl #8\n\t"
        : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3), "+r"(x), "+r"(wp), "+r"(e)
        :
        : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    (void)a1;
    (void)a2;
    (void)a3;
    *blob = wp;
    return a0;
}

/* The bytes of v clamped byte-wise to [min4, max4] (SSUB8 sets GE where the value is at least the
 * bound, SEL keeps it). */
static inline uint32_t mcu_pair_bytes_clamp(uint32_t v, uint32_t min4, uint32_t max4)
{
    uint32_t t;
    __asm__("ssub8 %[t], %[v], %[lo]\n\t"
            "sel %[v], %[v], %[lo]\n\t"
            "ssub8 %[t], %[hi], %[v]\n\t"
            "sel %[v], %[v], %[hi]\n\t"
            : [v] "+r"(v), [t] "=&r"(t)
            : [lo] "r"(min4), [hi] "r"(max4)
            : "cc");
    return v;
}
#endif

#endif /* MCU_KERNELS_INTERNAL_PAIR_BYTES_S8_DSP_H */
