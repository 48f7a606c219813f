/* The inner loops of mcu_conv2d_packed_s8: one output pixel's column times a block of four output
 * channels of packed int16 weights. Internal: static inline only.
 *
 * Why packed int16 weights: with int8 weights every pair of MACs needs a SXTB16 to widen the
 * weights, and weight rows of different channels need a pointer each. Widened and interleaved
 * ahead of time (mcu/backends/tuned.py), one LDM fetches a tap pair of four channels and each
 * SMLAD is a pair of MACs: per 8 taps x 4 channels, 2 LDRD + 4 LDM + 16 SMLAD + 1 loop
 * instructions, 0.75 instructions per MAC, against about 2 for CMSIS-NN's s8 x s16 kernels.
 * The price is flash: the weights of these layers take twice the bytes.
 *
 * The column holds (x + input_offset) as int16, taps padded with 0 to a multiple of 4 and each
 * group of 4 taps in the order 0, 2, 1, 3 (the order SXTB16 / SXTB16-ROR8 produce), so the
 * column is built with two SXTAB16 per 4 bytes. Products and sums are exact integers modulo 2^32
 * in any order, so every path here gives the bits of the plain reference. */
#ifndef MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H
#define MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/requant.h"
#include "../common/simd_s8.h"

#ifndef MCU_PACKED_SCALED
#define MCU_PACKED_SCALED 1 /* 0: a model's build without scaled streams (specialise.py): no code for them */
#endif

/* Words of one block of the packed stream: 4 biases, kp / 2 tap pairs of 4 channels, then four
 * requantization words per channel (mcu_packed_rq_s8). */
static inline int32_t mcu_packed_block_words(int32_t kp)
{
    return 4 + 2 * kp + 16;
}

/* 4 (the pair loops' tail bit for MCU_PX2_RQ_DIFF) when no bias of the stream's blocks (`blocks` after the
 * header, cout channels of kp taps) can take an accumulator out of int32: the taps' sum is at most
 * kp 255 128 in magnitude ((x + input_offset) in [-255, 255], int8 weights), so each pixel's accumulator is
 * then the exact sum and two pixels' differ by at most 2 kp 255 128, an int32 too; else 0. One pass over
 * the biases per call, one compare each. */
static inline int mcu_px2_diff_ok(const int32_t *blocks, int32_t cout, int32_t kp)
{
    const int64_t room = INT32_MAX - (int64_t)kp * 255 * 128;
    if (room < 0) {
        return 0;
    }
    const uint32_t r = (uint32_t)room, span = 2u * r; /* b in [-room, room]: b + room in [0, 2 room] */
    const int32_t words = mcu_packed_block_words(kp);
    for (int32_t oc = 0; oc < cout; oc += 4, blocks += words) {
        if ((uint32_t)blocks[0] + r > span || (uint32_t)blocks[1] + r > span || (uint32_t)blocks[2] + r > span ||
            (uint32_t)blocks[3] + r > span) {
            return 0;
        }
    }
    return 4;
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

/* The column r4 up to r6 (a multiple of 4 taps) against the stream at r5: 16 taps per pass (one
 * compare and branch per 16), the first pass entering at the quarter that leaves whole passes after
 * it, through a TBB on (column bytes / 8) mod 4: 0 all four quarters, 1 the last, 2 the last two,
 * 3 the last three. */
#define MCU_DOT4_LOOP                                                                                     \
    "sub r8, r6, r4\n\t"                                                                                   \
    "ubfx r8, r8, #3, #2\n\t"                                                                             \
    "tbb [pc, r8]\n\t"                                                                                    \
    "0:\n\t"                                                                                              \
    ".byte (1f - 0b) / 2, (4f - 0b) / 2, (3f - 0b) / 2, (2f - 0b) / 2\n\t"                                 \
    "1:\n\t" MCU_DOT4_HALF "2:\n\t" MCU_DOT4_HALF "3:\n\t" MCU_DOT4_HALF "4:\n\t" MCU_DOT4_HALF         \
    "cmp r4, r6\n\t"                                                                                      \
    "bne 1b\n\t"

/* MCU_DOT4_LOOP with 64 taps per pass for mcu_pixel_packed: the compare and branch once per 64 taps
 * and the entry through a TBH on (column bytes / 8) mod 16 (the 16 quarters are too far apart for
 * TBB's byte offsets). About 0.7 KB of code per copy; the loop of the partial blocks keeps 16. */
#define MCU_DOT4_LOOP64                                                                                   \
    "sub r8, r6, r4\n\t"                                                                                   \
    "ubfx r8, r8, #3, #4\n\t"                                                                             \
    "tbh [pc, r8, lsl #1]\n\t"                                                                            \
    "0:\n\t"                                                                                              \
    ".hword (10f - 0b) / 2, (25f - 0b) / 2, (24f - 0b) / 2, (23f - 0b) / 2\n\t"                             \
    ".hword (22f - 0b) / 2, (21f - 0b) / 2, (20f - 0b) / 2, (19f - 0b) / 2\n\t"                             \
    ".hword (18f - 0b) / 2, (17f - 0b) / 2, (16f - 0b) / 2, (15f - 0b) / 2\n\t"                             \
    ".hword (14f - 0b) / 2, (13f - 0b) / 2, (12f - 0b) / 2, (11f - 0b) / 2\n\t"                             \
    "10:\n\t" MCU_DOT4_HALF "11:\n\t" MCU_DOT4_HALF "12:\n\t" MCU_DOT4_HALF "13:\n\t" MCU_DOT4_HALF     \
    "14:\n\t" MCU_DOT4_HALF "15:\n\t" MCU_DOT4_HALF "16:\n\t" MCU_DOT4_HALF "17:\n\t" MCU_DOT4_HALF     \
    "18:\n\t" MCU_DOT4_HALF "19:\n\t" MCU_DOT4_HALF "20:\n\t" MCU_DOT4_HALF "21:\n\t" MCU_DOT4_HALF     \
    "22:\n\t" MCU_DOT4_HALF "23:\n\t" MCU_DOT4_HALF "24:\n\t" MCU_DOT4_HALF "25:\n\t" MCU_DOT4_HALF     \
    "cmp r4, r6\n\t"                                                                                      \
    "bne 10b\n\t"
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

/* Requantization of one channel of a stream whose shifts are all right shifts R = -shift in [1, 23]
 * (the stream's FLAG_RIGHT), from the channel's words (klo, khi, m, R - 1) and the output offset
 * folded into K = khi:klo by the packer (mcu/backends/tuned.py):
 *   K = 2^30 + 2^(R+30) + output_offset 2^(31+R),  z = floor((acc m + K - [acc < 0] 2^31) / 2^(31+R))
 * is mcu_requantize_to_s8_fast's rounding high multiply, rounding divide by 2^R (half away from
 * zero) and offset in one 64-bit sum (common/rq_s8_dsp.h derives it: mcu_rq_ch, whose K[0] this
 * is). On the core: SMLAL adds the product to K; taking 2^31 away when acc < 0 borrows from the
 * high word exactly when bit 31 of the low word is clear, so BIC (acc AND NOT low) and an ADD of its
 * sign (ASR #31) finish the high word; ASR by R - 1 leaves z: 5 instructions with SSAT and one LDM
 * per channel. |acc m| < 2^62 and R <= 23 keep the sum inside int64. Returns z + the
 * offset saturated to int8 (not yet clamped to the activation range). */
static inline int32_t mcu_packed_rq_s8(int32_t acc, const int32_t *rq)
{
    const int64_t k = (int64_t)(((uint64_t)(uint32_t)rq[1] << 32) | (uint32_t)rq[0]);
    const int64_t sum = k - (acc < 0 ? (int64_t)1 << 31 : 0) + (int64_t)acc * rq[2];
    return mcu_clamp_s32((int32_t)mcu_asr64(sum, 32 + rq[3]), -128, 127);
}

/* Requantization of one channel of a scaled stream (MCU_PACKED_FLAG_SCALED) from its accumulator acc 2^e, its
 * multiplier m and C: what SMMLA (C + the high word of the product) and SSAT with ASR #MCU_PACKED_SCALED_SHIFT
 * give, the ReLU form of mcu_packed_rq_s8 (tuned.pack_layer_scaled derives it), saturated to int8. */
static inline int32_t mcu_packed_rq_scaled(int32_t acc, int32_t m, int32_t c)
{
    const int32_t hi = (int32_t)mcu_asr64((int64_t)acc * m, 32) + c;
    return mcu_clamp_s32(mcu_asr32(hi, MCU_PACKED_SCALED_SHIFT), -128, 127);
}

#if MCU_S8_DSP_NATIVE
/* One whole block on the core (a pass of mcu_pixel_packed_loop): biases into the accumulators (one
 * LDM), the dot product (per 64 taps 16 LDRD + 32 LDM + 128 SMLAD + compare and branch,
 * MCU_DOT4_LOOP64), then the four requantizations (mcu_packed_rq_s8 in 6 instructions each, SSAT to
 * int8 and the LDM included) and the stores: four STRB when the activation range is all of int8
 * (clamp 0), else the bytes packed into a word, clamped byte-wise to [min4, max4] (SSUB8 sets GE where the value is at least the bound, SEL
 * keeps it) and one STR. `bounds` holds (min4, max4): the activation bounds in four bytes each; the
 * range lies inside int8, so saturating first changes nothing. Every register is fixed because LDM
 * fills registers in ascending order. */
#define MCU_RQ_PACKED(acc)                                                                                \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlal r8, r9, " acc ", r10\n\t"                                                                      \
    "bic r12, " acc ", r8\n\t"                                                                            \
    "add r9, r9, r12, asr #31\n\t"                                                                        \
    "asr r9, r9, r11\n\t"                                                                                 \
    "ssat " acc ", #8, r9\n\t"

/* Every whole block of one output pixel in one loop on the core, y to y_end (4 channels per block)
 * from the column col[0..kp); a C loop around one block per call reloaded its state around every
 * block. The loop keeps its state in six words (y, y_end, min4, max4, col, the store's label: one
 * copy of the loop for both stores, chosen by LDR PC per block) right after the column's kp taps,
 * so the column needs MCU_PIXEL_PACKED_SPARE more int16 of room: the dot product and the
 * requantization take every other register, and a push inside the assembly would be stack
 * that the compiler's stack-usage figures (the planned stack) cannot see. Returns the stream after
 * the last block. */
#define MCU_PIXEL_PACKED_SPARE 20 /* the state of mcu_pixel_packed_wide: 10 words */
/* The block's two stores (state at r6: y, y_end, min4, max4; conv_narrow_s8_dsp.h's engine stores
 * through them too). */
#define MCU_PX_STORE_CLAMP                                                                                \
    "pkhbt r0, r0, r2, lsl #16\n\t"                                                                       \
    "pkhbt r1, r1, r3, lsl #16\n\t"                                                                       \
    "and r0, r0, #0x00FF00FF\n\t"                                                                         \
    "and r1, r1, #0x00FF00FF\n\t"                                                                         \
    "orr r0, r0, r1, lsl #8\n\t"                                                                          \
    "ldrd r8, r9, [r6, #8]\n\t"                                                                           \
    "ssub8 r10, r0, r8\n\t"                                                                               \
    "sel r0, r0, r8\n\t"                                                                                  \
    "ssub8 r10, r9, r0\n\t"                                                                               \
    "sel r0, r0, r9\n\t"                                                                                  \
    "ldrd r4, r8, [r6]\n\t"                                                                               \
    "str r0, [r4], #4\n\t"
#define MCU_PX_STORE_BYTES                                                                                \
    "ldrd r4, r8, [r6]\n\t"                                                                               \
    "strb r1, [r4, #1]\n\t"                                                                               \
    "strb r2, [r4, #2]\n\t"                                                                               \
    "strb r3, [r4, #3]\n\t"                                                                               \
    "strb r0, [r4], #4\n\t"
/* The assembly takes the addresses of its two tails with ADR, which adds to the PC rounded down to a
 * word an offset the assembler fixes against the start of the function's section: right only when
 * that section starts on a word boundary. GCC aligns functions to 4 bytes at -O2 and -O3 but only to
 * 2 at -Os and -O1 (or with -fno-align-functions), so a function the linker placed at 2 mod 4
 * stored tail addresses 2 bytes off, and the first block's store ran from the middle of an
 * instruction (a BusFault in mcu_pixel_packed_wide, or wrong bytes). A .balign in the section raises
 * its alignment to a word (the assembler records the largest alignment a section asks for); this one
 * sits after an unconditional branch, so its padding never runs. */
#define MCU_PX_WORD_SECTION ".balign 4\n\t"
#define MCU_PX_BLOCKS                                                                                     \
    "strd r8, r9, [r6]\n\t"                                                                               \
    "strd r10, r11, [r6, #8]\n\t"                                                                         \
    "str r12, [r6, #16]\n\t"                                                                              \
    "adr.w lr, 30f\n\t"                                                                                   \
    "adr.w r1, 31f\n\t"                                                                                   \
    "cmp r0, #0\n\t"                                                                                      \
    "it ne\n\t"                                                                                           \
    "movne lr, r1\n\t"                                                                                    \
    "orr lr, lr, #1\n\t"                                                                                  \
    "str lr, [r6, #20]\n\t"                                                                               \
    "5:\n\t"                                                                                              \
    "ldr r4, [r6, #16]\n\t"                                                                               \
    "ldmia r5!, {r0, r1, r2, r3}\n\t"                                                                     \
    MCU_DOT4_LOOP64                                                                                       \
    MCU_RQ_PACKED("r0") MCU_RQ_PACKED("r1") MCU_RQ_PACKED("r2") MCU_RQ_PACKED("r3")                       \
    "ldr pc, [r6, #20]\n\t"                                                                               \
    "30:\n\t" MCU_PX_STORE_BYTES                                                                          \
    "str r4, [r6]\n\t"                                                                                    \
    "cmp r4, r8\n\t"                                                                                      \
    "bne 5b\n\t"                                                                                          \
    "b 8f\n\t"                                                                                            \
    MCU_PX_WORD_SECTION                                                                                   \
    "31:\n\t" MCU_PX_STORE_CLAMP                                                                          \
    "str r4, [r6]\n\t"                                                                                    \
    "cmp r4, r8\n\t"                                                                                      \
    "bne 5b\n\t"                                                                                          \
    "8:\n\t"

#ifndef MCU_PACKED_LOOP
#define MCU_PACKED_LOOP 1 /* 0: a model's build whose windows all fit MCU_PIXEL_WIDE_TAPS */
#endif
#if MCU_PACKED_LOOP
static inline const int32_t *mcu_pixel_packed_loop(const int16_t *col, int32_t kp, const int32_t *blob,
                                                   int8_t *y, int8_t *y_end, const uint32_t *bounds, int clamp)
{
    register int32_t tail __asm__("r0") = clamp;
    register const int16_t *x __asm__("r4") = col;
    register const int32_t *w __asm__("r5") = blob;
    register const int16_t *e __asm__("r6") = col + kp;
    register int8_t *yp __asm__("r8") = y;
    register int8_t *ye __asm__("r9") = y_end;
    register uint32_t lo __asm__("r10") = bounds[0];
    register uint32_t hi __asm__("r11") = bounds[1];
    register const int16_t *c0 __asm__("r12") = col;
    __asm__ volatile(MCU_PX_BLOCKS
                     : "+r"(tail), "+r"(x), "+r"(w), "+r"(e), "+r"(yp), "+r"(ye), "+r"(lo), "+r"(hi), "+r"(c0)
                     :
                     : "r1", "r2", "r3", "lr", "cc", "memory");
    return w;
}

#endif /* MCU_PACKED_LOOP */

/* mcu_pixel_packed for windows of at most MCU_PIXEL_WIDE_TAPS taps (every pointwise layer of the
 * reference models but the widest): the dot product straight-line, 8 taps per group of one LDM of
 * four column words and, per word, one LDM of the four channels' pair and four SMLAD. That is 21
 * instructions per 64 MACs where MCU_DOT4_HALF's LDRD + 2 LDM take 11 per 32, and it needs eight
 * data registers: r7 is saved in the state and restored at the end (a frame pointer in r7 stays
 * untouched outside the assembly and nothing inside addresses memory through it), and no register
 * holds the column's end, since the code for the taps after the entry point runs exactly once.
 *
 * The entry: a TBH into the group that leaves kp / 8 groups before the requantization (label 9),
 * its index loaded with the column start by one LDM; when kp is 4 more than a multiple of 8, a stub
 * loads the last two column words of a group first and enters it at its third pair (a second TBH).
 * The requantization takes two channels per LDM (eight registers are free then). The store is one
 * of two tails, chosen once per call (LDR PC from the state, to a label of this assembly: a branch
 * within it, not a call, so mcu/stack.py's bound holds): four STRB, or the bytes packed, clamped
 * byte-wise (as MCU_PX_STORE_CLAMP) and one STR.
 *
 * The state, 10 words right after the column (r4 points there between blocks): column start,
 * entry index, third-pair index, y, y_end, min4, max4, store tail, saved r7, and a flag: the first call
 * of a layer (mcu_pixel_packed_start cleared the flag) writes the words that stay the same for all
 * its pixels, the others only y, y_end and r7. */
#ifndef MCU_PIXEL_WIDE_TAPS
#define MCU_PIXEL_WIDE_TAPS 256 /* a model's build sets its widest window (mcu/backends/specialise.py) */
#endif
#if MCU_PIXEL_WIDE_TAPS < 8 || MCU_PIXEL_WIDE_TAPS > 256 || MCU_PIXEL_WIDE_TAPS % 8 != 0
#error "MCU_PIXEL_WIDE_TAPS is a multiple of 8 from 8 to 256"
#endif
/* The group count as assembler text: the tables and the .rept take it as an expression, so any
 * multiple of 8 works without a list per size. */
#define MCU_PXW_STR2(x) #x
#define MCU_PXW_STR(x) MCU_PXW_STR2(x)
#define MCU_PXW_G "(" MCU_PXW_STR(MCU_PIXEL_WIDE_TAPS) " / 8)"
#define MCU_PXW_G1 "(" MCU_PXW_STR(MCU_PIXEL_WIDE_TAPS) " / 8 - 1)"
#define MCU_PXW_BYTES "(84 * " MCU_PXW_G ")" /* groups * MCU_PXW_GROUP_BYTES */
#define MCU_PXW_PAIR(x)                                                                                   \
    "ldmia.w r5!, {r10, r11, r12, lr}\n\t"                                                                \
    "smlad r0, " x ", r10, r0\n\t"                                                                        \
    "smlad r1, " x ", r11, r1\n\t"                                                                        \
    "smlad r2, " x ", r12, r2\n\t"                                                                        \
    "smlad r3, " x ", lr, r3\n\t"
#define MCU_PXW_GROUP                                                                                     \
    "ldmia.w r4!, {r6, r7, r8, r9}\n\t" MCU_PXW_PAIR("r6") MCU_PXW_PAIR("r7") MCU_PXW_PAIR("r8")           \
        MCU_PXW_PAIR("r9")
#define MCU_PXW_GROUP_BYTES 84 /* 21 wide instructions */
#define MCU_PXW_RQ2(a, b)                                                                                 \
    "ldmia.w r5!, {r6, r7, r8, r9, r10, r11, r12, lr}\n\t"                                                \
    "smlal r6, r7, " a ", r8\n\t"                                                                         \
    "bic r8, " a ", r6\n\t"                                                                               \
    "add r7, r7, r8, asr #31\n\t"                                                                         \
    "asr r7, r7, r9\n\t"                                                                                  \
    "ssat " a ", #8, r7\n\t"                                                                              \
    "smlal r10, r11, " b ", r12\n\t"                                                                      \
    "bic r12, " b ", r10\n\t"                                                                             \
    "add r11, r11, r12, asr #31\n\t"                                                                      \
    "asr r11, r11, lr\n\t"                                                                                \
    "ssat " b ", #8, r11\n\t"

static inline const int32_t *mcu_pixel_packed_wide(const int16_t *col, int32_t kp, const int32_t *blob,
                                                   int8_t *y, int8_t *y_end, const uint32_t *bounds,
                                                   int clamp)
{
    register const int16_t *c0 __asm__("r0") = col;
    register int8_t *yp __asm__("r1") = y;
    register int8_t *ye __asm__("r2") = y_end;
    register int32_t tail __asm__("r3") = clamp;
    register const int16_t *st __asm__("r4") = col + kp;
    register const int32_t *w __asm__("r5") = blob;
    register const uint32_t *b __asm__("r6") = bounds;
    register int32_t taps __asm__("r8") = kp;
    __asm__ volatile(
        "str r7, [r4, #32]\n\t"
        "strd r1, r2, [r4, #12]\n\t"
        "ldr r7, [r4, #36]\n\t"
        "cbnz r7, 5f\n\t"
        "str r0, [r4]\n\t"
        "ldrd r9, r10, [r6]\n\t"
        "strd r9, r10, [r4, #20]\n\t"
        /* the TBH indices: the group that leaves kp / 8 groups (the group count: the stub), and the group whose
         * third pair the stub enters */
        "lsr r9, r8, #3\n\t"
        "rsb r10, r9, #" MCU_PXW_G1 "\n\t"
        "rsb r9, r9, #" MCU_PXW_G "\n\t"
        "tst r8, #4\n\t"
        "it ne\n\t"
        "movne r9, #" MCU_PXW_G "\n\t"
        "strd r9, r10, [r4, #4]\n\t"
        "adr.w r6, 30f\n\t"
        "adr.w r7, 31f\n\t"
        "cmp r3, #0\n\t"
        "it ne\n\t"
        "movne r6, r7\n\t"
        "orr r6, r6, #1\n\t"
        "str r6, [r4, #28]\n\t"
        "mov r7, #1\n\t"
        "str r7, [r4, #36]\n\t"
        "5:\n\t"
        "ldm r4, {r4, r6, r7}\n\t"
        "ldmia r5!, {r0, r1, r2, r3}\n\t"
        "tbh [pc, r6, lsl #1]\n\t"
        "40:\n\t"
        ".rept " MCU_PXW_G "\n\t.hword (6f - 40b + 42 * (. - 40b)) / 2\n\t.endr\n\t"
        ".hword (7f - 40b) / 2\n\t"
        "7:\n\t"
        "ldrd r8, r9, [r4], #8\n\t"
        "tbh [pc, r7, lsl #1]\n\t"
        "41:\n\t"
        ".rept " MCU_PXW_G "\n\t.hword (6f + 44 - 41b + 42 * (. - 41b)) / 2\n\t.endr\n\t"
        "6:\n\t.rept " MCU_PXW_G "\n\t" MCU_PXW_GROUP ".endr\n\t"
        "9:\n\t"
        ".if (9b - 6b) - " MCU_PXW_BYTES "\n\t"
        ".error \"mcu_pixel_packed_wide: the groups are not all wide instructions\"\n\t"
        ".endif\n\t"
        MCU_PXW_RQ2("r0", "r1") MCU_PXW_RQ2("r2", "r3")
        "ldr pc, [r4, #28]\n\t"
        "30:\n\t"
        "ldrd r6, r7, [r4, #12]\n\t"
        "strb r1, [r6, #1]\n\t"
        "strb r2, [r6, #2]\n\t"
        "strb r3, [r6, #3]\n\t"
        "strb r0, [r6], #4\n\t"
        "str r6, [r4, #12]\n\t"
        "cmp r6, r7\n\t"
        "bne 5b\n\t"
        "b 8f\n\t"
        MCU_PX_WORD_SECTION
        "31:\n\t"
        "pkhbt r0, r0, r2, lsl #16\n\t"
        "pkhbt r1, r1, r3, lsl #16\n\t"
        "and r0, r0, #0x00FF00FF\n\t"
        "and r1, r1, #0x00FF00FF\n\t"
        "orr r0, r0, r1, lsl #8\n\t"
        "ldrd r8, r9, [r4, #20]\n\t"
        "ssub8 r10, r0, r8\n\t"
        "sel r0, r0, r8\n\t"
        "ssub8 r10, r9, r0\n\t"
        "sel r0, r0, r9\n\t"
        "ldrd r6, r7, [r4, #12]\n\t"
        "str r0, [r6], #4\n\t"
        "str r6, [r4, #12]\n\t"
        "cmp r6, r7\n\t"
        "bne 5b\n\t"
        "8:\n\t"
        "ldr r7, [r4, #32]\n\t"
        : "+r"(c0), "+r"(yp), "+r"(ye), "+r"(tail), "+r"(st), "+r"(w), "+r"(b), "+r"(taps)
        :
        : "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    return w;
}
#undef MCU_PXW_RQ2
#undef MCU_PXW_STR
#undef MCU_PXW_STR2
#undef MCU_PXW_BYTES
#undef MCU_PXW_G1
#undef MCU_PXW_G
#undef MCU_PXW_GROUP
#undef MCU_PXW_PAIR

/* The column of a window wholly inside the input (mcu_conv_column_s16's first case, for the
 * windowed pixel loops): kh runs of `run` bytes (a positive multiple of 16), `step` bytes apart from
 * src, as (x + offset) int16 in mcu_column_s8's order, one assembly for all of them. Per 16 bytes four
 * LDR (pipelined: 5 cycles), eight SXTAB16 and eight STR with immediate offsets (1 cycle each, where
 * mcu_column_s8's STRD takes 3): 21 cycles and the loop where mcu_column_s8 takes 28, and no call, no
 * parameter loads and no bounds per run (mcu_conv_column_s16 took about 3.6 cycles per tap of
 * resnet8's 16-channel windows, this about 1.6). */
static inline void mcu_window_column_s16(const int8_t *src, int32_t run, int32_t step, int32_t kh, uint32_t off2,
                                         int16_t *col)
{
    const int32_t skip = step - run;
    uint32_t a, b, c, d, a1, b1;
    const int8_t *e;
    __asm__ volatile("1:\n\t"
                     "add %[e], %[x], %[run]\n\t"
                     "2:\n\t"
                     "ldr %[a], [%[x]], #4\n\t"
                     "ldr %[b], [%[x]], #4\n\t"
                     "ldr %[c], [%[x]], #4\n\t"
                     "ldr %[d], [%[x]], #4\n\t"
                     "sxtab16 %[a1], %[o], %[a], ror #8\n\t"
                     "sxtab16 %[a], %[o], %[a]\n\t"
                     "sxtab16 %[b1], %[o], %[b], ror #8\n\t"
                     "sxtab16 %[b], %[o], %[b]\n\t"
                     "str %[a], [%[y]], #32\n\t"
                     "str %[a1], [%[y], #-28]\n\t"
                     "str %[b], [%[y], #-24]\n\t"
                     "str %[b1], [%[y], #-20]\n\t"
                     "sxtab16 %[a1], %[o], %[c], ror #8\n\t"
                     "sxtab16 %[a], %[o], %[c]\n\t"
                     "sxtab16 %[b1], %[o], %[d], ror #8\n\t"
                     "sxtab16 %[b], %[o], %[d]\n\t"
                     "str %[a], [%[y], #-16]\n\t"
                     "str %[a1], [%[y], #-12]\n\t"
                     "str %[b], [%[y], #-8]\n\t"
                     "str %[b1], [%[y], #-4]\n\t"
                     "cmp %[x], %[e]\n\t"
                     "bne 2b\n\t"
                     "add %[x], %[x], %[skip]\n\t"
                     "subs %[k], %[k], #1\n\t"
                     "bne 1b\n\t"
                     : [x] "+r"(src), [y] "+r"(col), [k] "+r"(kh), [e] "=&r"(e), [a] "=&r"(a), [b] "=&r"(b),
                       [c] "=&r"(c), [d] "=&r"(d), [a1] "=&r"(a1), [b1] "=&r"(b1)
                     : [o] "r"(off2), [run] "r"(run), [skip] "r"(skip)
                     : "cc", "memory");
}

/* The interleaved column of two pixels for mcu_pixel2_packed_wide, from kp bytes at xa and at xb (kp a
 * multiple of 4): per 4 taps the words (xa's taps 0, 2), (xb's 0, 2), (xa's 1, 3), (xb's 1, 3), each
 * tap + off as int16 (mcu_column_s8's order per pixel). col2 is word-aligned. Four STR with immediate
 * offsets take 4 cycles where two STRD took 6 (docs/cycles.md). */
static inline void mcu_column2_s8(const int8_t *xa, const int8_t *xb, int32_t kp, int32_t off, int16_t *col2)
{
    const uint32_t off2 = mcu_offset_pair(off);
    const int8_t *end = xa + kp;
    uint32_t a, b, a0, b0;
    if (kp & 4) {
        __asm__ volatile("ldr %[a], [%[xa]], #4\n\t"
                         "ldr %[b], [%[xb]], #4\n\t"
                         "sxtab16 %[a0], %[o], %[a]\n\t"
                         "sxtab16 %[b0], %[o], %[b]\n\t"
                         "sxtab16 %[a], %[o], %[a], ror #8\n\t"
                         "sxtab16 %[b], %[o], %[b], ror #8\n\t"
                         "str %[a], [%[y], #8]\n\t"
                         "str %[b], [%[y], #12]\n\t"
                         "str %[b0], [%[y], #4]\n\t"
                         "str %[a0], [%[y]], #16\n\t"
                         : [xa] "+r"(xa), [xb] "+r"(xb), [y] "+r"(col2), [a] "=&r"(a), [b] "=&r"(b),
                           [a0] "=&r"(a0), [b0] "=&r"(b0)
                         : [o] "r"(off2)
                         : "memory");
    }
    if (xa != end) {
        __asm__ volatile("1:\n\t"
                         "ldr %[a], [%[xa]], #4\n\t"
                         "ldr %[b], [%[xb]], #4\n\t"
                         "sxtab16 %[a0], %[o], %[a]\n\t"
                         "sxtab16 %[b0], %[o], %[b]\n\t"
                         "sxtab16 %[a], %[o], %[a], ror #8\n\t"
                         "sxtab16 %[b], %[o], %[b], ror #8\n\t"
                         "str %[a], [%[y], #8]\n\t"
                         "str %[b], [%[y], #12]\n\t"
                         "str %[b0], [%[y], #4]\n\t"
                         "str %[a0], [%[y]], #16\n\t"
                         "ldr %[a], [%[xa]], #4\n\t"
                         "ldr %[b], [%[xb]], #4\n\t"
                         "sxtab16 %[a0], %[o], %[a]\n\t"
                         "sxtab16 %[b0], %[o], %[b]\n\t"
                         "sxtab16 %[a], %[o], %[a], ror #8\n\t"
                         "sxtab16 %[b], %[o], %[b], ror #8\n\t"
                         "str %[a], [%[y], #8]\n\t"
                         "str %[b], [%[y], #12]\n\t"
                         "str %[b0], [%[y], #4]\n\t"
                         "str %[a0], [%[y]], #16\n\t"
                         "cmp %[xa], %[e]\n\t"
                         "bne 1b\n\t"
                         : [xa] "+r"(xa), [xb] "+r"(xb), [y] "+r"(col2), [a] "=&r"(a), [b] "=&r"(b),
                           [a0] "=&r"(a0), [b0] "=&r"(b0)
                         : [o] "r"(off2), [e] "r"(end)
                         : "cc", "memory");
    }
}

/* The order the pixel-pair and four-pixel loops walk a layer's blocks of four channels in: from the
 * first block on (steps 0), or from the last one back (stream_step: minus two blocks' bytes, y_step
 * -8: after a block the stream and y have moved one block on). The kernel alternates them pass by
 * pass: a stream larger than a flash cache (mps2-an505-u575's 8 kB ICACHE, LRU) then starts each
 * pass on the lines the previous pass fetched last, still cached, where the same order every pass
 * evicts each line just before its next use. */
typedef struct {
    int32_t stream_step; /* bytes added to the stream pointer after each block */
    int32_t y_step;      /* bytes added to y after each block */
} mcu_block_order;

/* Two output pixels per weight load (register blocking), for the pointwise layers' flat loop: the
 * packed stream is read once per pair of pixels, so each loaded weight word feeds two SMLAD. The
 * column holds both pixels' columns interleaved by tap pair (mcu_column2_s8: word 2j is pixel A's
 * pair j, word 2j + 1 pixel B's). Per tap pair and block of four channels: the two column words and
 * the four channels' weight words as six single LDR (MCU_PX2_MACS: in two runs that pipeline, 8
 * cycles) and eight SMLAD, 14 instructions and 16 cycles per 16 MACs, where mcu_pixel_packed_wide
 * takes 21 instructions and 41 cycles per 32 but loads every weight word once per pixel: the loads
 * are the multi-cycle part, and the pair streams the weights from flash half as often.
 *
 * Eight accumulators (r0-r3 pixel A, r8-r11 pixel B), the column and stream pointers and four operand
 * registers take every register but r7 (saved in the state) and sp, so no register holds the
 * column's end: the loop (MCU_PX2_PASS tap pairs per pass, entered at the pair that leaves whole
 * passes after it) ends when the word after the last pass is the sentinel 0x80008000, the first
 * word of the state. No column word is: its halves are x + input_offset, within [-255, 255], never
 * -32768. A loop, not straight-line code as mcu_pixel_packed_wide's, keeps the hot code small enough
 * for a flash accelerator's instruction cache (the STM32L4R5's ART holds 1 kB). The entry and the
 * store tail are chosen by LDR PC from the state (a branch to a label of this assembly, not a call:
 * mcu/stack.py's bound holds).
 *
 * The state, 12 words right after the 2 kp column taps (r4 points there after the dot product):
 * sentinel, column start, entry address, y (pixel A), y_end, min4, max4, store tail, saved r7, the
 * distance from pixel A's outputs to pixel B's, and the block order's two steps (mcu_block_order). The requantization reads each channel's four
 * words with one LDM for pixel A and K again (LDRD, with write-back) for pixel B: SMLAL overwrites
 * K, and there are no registers for both copies; the multiplier and shift stay (the BIC works in the
 * accumulator, dead by then). */
#define MCU_PIXEL2_SPARE 24 /* the state of mcu_pixel2_packed: 12 words */
/* The state's words as the C side writes them (a chain's pairs, mcu_conv2d_packed_s8.c); in a chain the block
 * order's two words hold the part's start in the stream and the next pair's state (0 after the last). */
enum {
    MCU_PX2_ST_SENTINEL = 0,
    MCU_PX2_ST_COL = 1,
    MCU_PX2_ST_Y = 3,
    MCU_PX2_ST_Y_END = 4,
    MCU_PX2_ST_MIN4 = 5,
    MCU_PX2_ST_MAX4 = 6,
    MCU_PX2_ST_DY = 9,
    MCU_PX2_ST_ORDER = 10,
    MCU_PX2_ST_NEXT = 11,
    /* a chain's last pair in a call over every part of a group (MCU_PX2_CHAIN): the stream's end and a part's bytes */
    MCU_PX2_ST_GROUP_END = 5,
    MCU_PX2_ST_PART_BYTES = 6,
};
/* Tap pairs per pass: each pass ends with a compare and a taken branch (4 cycles). 16 on Armv8-M
 * Mainline (Cortex-M33: 912 bytes of loop, which the U575's 8 kB cache holds beside the weights' parts;
 * mobilenet_v1 -0.7 %, ds_cnn -0.7 %, resnet8 -0.6 % on mps2-an505-u575), 8 elsewhere (464 bytes: the
 * Cortex-M4 builds run on the L4R5, whose 1 kB ART instruction cache the longer loop and its tails would
 * outgrow). The flat pointwise pairs (mcu_pixel2_packed) take 32 on the M33 (1,808 bytes): on
 * mps2-an505-u575 mobilenet_v1 -0.3 % and ds_cnn -0.5 %, where the windowed loops' 32 cost resnet8 +0.5 %
 * (their parts of 74 kB streams share the cache with them). */
#if defined(__ARM_ARCH_8M_MAIN__)
#define MCU_PX2_PASS 16
#define MCU_PX2_PW_PASS 32
#else
#define MCU_PX2_PASS 8
#define MCU_PX2_PW_PASS 8
#endif
#define MCU_PX2_STR2(x) #x
#define MCU_PX2_STR(x) MCU_PX2_STR2(x)
/* The tap pair's eight SMLAD, A's word in r6 and B's in r7, the first two channels' weight words in r12
 * and lr (the other two loaded between). Every load is a single LDR: a run of them pipelines (the
 * first 2 cycles, the others 1; docs/cycles.md), so the unit's six words cost 8 cycles where two
 * LDRD and the column's LDRD (or two LDR) took 9: 16 cycles per 16 MACs. */
#define MCU_PX2_MACS                                                                                      \
    "smlad r0, r6, r12, r0\n\t"                                                                           \
    "smlad r8, r7, r12, r8\n\t"                                                                           \
    "smlad r1, r6, lr, r1\n\t"                                                                            \
    "smlad r9, r7, lr, r9\n\t"                                                                            \
    "ldr.w r12, [r5], #4\n\t"                                                                             \
    "ldr.w lr, [r5], #4\n\t"                                                                              \
    "smlad r2, r6, r12, r2\n\t"                                                                           \
    "smlad r10, r7, r12, r10\n\t"                                                                         \
    "smlad r3, r6, lr, r3\n\t"                                                                            \
    "smlad r11, r7, lr, r11\n\t"
#define MCU_PX2_LOADS                                                                                     \
    "ldr.w r6, [r4], #4\n\t"                                                                              \
    "ldr.w r7, [r4], #4\n\t"                                                                              \
    "ldr.w r12, [r5], #4\n\t"                                                                             \
    "ldr.w lr, [r5], #4\n\t"
#define MCU_PX2_UNIT MCU_PX2_LOADS MCU_PX2_MACS
#define MCU_PX2_UNIT_BYTES 56 /* 14 wide instructions */
/* One channel's requantization (mcu_packed_rq_s8) for both pixels: a and b are its accumulators. */
#define MCU_PX2_RQ(a, b)                                                                                  \
    "ldm r5, {r6, r7, r12, lr}\n\t"                                                                       \
    "smlal r6, r7, " a ", r12\n\t"                                                                        \
    "bic " a ", " a ", r6\n\t"                                                                            \
    "add r7, r7, " a ", asr #31\n\t"                                                                      \
    "asr r7, r7, lr\n\t"                                                                                  \
    "ssat " a ", #8, r7\n\t"                                                                              \
    "ldrd r6, r7, [r5], #16\n\t"                                                                          \
    "smlal r6, r7, " b ", r12\n\t"                                                                        \
    "bic " b ", " b ", r6\n\t"                                                                            \
    "add r7, r7, " b ", asr #31\n\t"                                                                      \
    "asr r7, r7, lr\n\t"                                                                                  \
    "ssat " b ", #8, r7\n\t"
/* MCU_PX2_RQ without the sign's correction (BIC, ADD), for layers whose activation range starts at or
 * above the output offset (a folded ReLU): for acc < 0 both forms give at most the output offset, which
 * the range (or SSAT, the range being all of int8 from -128) turns into act_min (conv_narrow_s8_dsp.h
 * derives it). 14 cycles a channel of both pixels instead of 18. */
#define MCU_PX2_RQ_RELU(a, b)                                                                             \
    "ldm r5, {r6, r7, r12, lr}\n\t"                                                                       \
    "smlal r6, r7, " a ", r12\n\t"                                                                        \
    "asr r7, r7, lr\n\t"                                                                                  \
    "ssat " a ", #8, r7\n\t"                                                                              \
    "ldrd r6, r7, [r5], #16\n\t"                                                                          \
    "smlal r6, r7, " b ", r12\n\t"                                                                        \
    "asr r7, r7, lr\n\t"                                                                                  \
    "ssat " b ", #8, r7\n\t"
/* Channel 0 of a block: every tail is entered with its K already in r12 (low) and lr (high), its
 * multiplier and shift in r6, r7 and r5 at channel 1 (the pair loops' last loads read K, as the first tap
 * pair of a next pass would, and an LDRD the rest between the loop's SUB and LDR PC, where the LDR PC
 * would wait a cycle for its address): 3 cycles less than the LDM the other channels take. */
#define MCU_PX2_RQ0(a, b)                                                                                 \
    "smlal r12, lr, " a ", r6\n\t"                                                                       \
    "bic " a ", " a ", r12\n\t"                                                                          \
    "add lr, lr, " a ", asr #31\n\t"                                                                     \
    "asr lr, lr, r7\n\t"                                                                                 \
    "ssat " a ", #8, lr\n\t"                                                                             \
    "ldrd r12, lr, [r5, #-16]\n\t"                                                                       \
    "smlal r12, lr, " b ", r6\n\t"                                                                       \
    "bic " b ", " b ", r12\n\t"                                                                          \
    "add lr, lr, " b ", asr #31\n\t"                                                                     \
    "asr lr, lr, r7\n\t"                                                                                 \
    "ssat " b ", #8, lr\n\t"
#define MCU_PX2_RQ0_RELU(a, b)                                                                            \
    "smlal r12, lr, " a ", r6\n\t"                                                                       \
    "asr lr, lr, r7\n\t"                                                                                 \
    "ssat " a ", #8, lr\n\t"                                                                             \
    "ldrd r12, lr, [r5, #-16]\n\t"                                                                       \
    "smlal r12, lr, " b ", r6\n\t"                                                                       \
    "asr lr, lr, r7\n\t"                                                                                 \
    "ssat " b ", #8, lr\n\t"
/* MCU_PX2_RQ_RELU without reloading K for pixel B: K + a m is still in the register pair after pixel A,
 * and adding (b - a) m to it gives K + b m, exact while a + (b - a) is b, which holds where no bias takes
 * an accumulator out of int32 (mcu_px2_diff_ok; the difference is then the bias-free sums', at most
 * 2 kp 255 128). 12 cycles a channel of both pixels instead of 14 (channel 0: 7 in the tail). */
#define MCU_PX2_RQ_DIFF(a, b)                                                                             \
    "ldm r5!, {r6, r7, r12, lr}\n\t"                                                                     \
    "sub " b ", " b ", " a "\n\t"                                                                        \
    "smlal r6, r7, " a ", r12\n\t"                                                                       \
    "asr " a ", r7, lr\n\t"                                                                              \
    "ssat " a ", #8, " a "\n\t"                                                                          \
    "smlal r6, r7, " b ", r12\n\t"                                                                       \
    "asr " b ", r7, lr\n\t"                                                                              \
    "ssat " b ", #8, " b "\n\t"
#define MCU_PX2_RQ0_DIFF(a, b)                                                                            \
    "sub " b ", " b ", " a "\n\t"                                                                        \
    "smlal r12, lr, " a ", r6\n\t"                                                                       \
    "asr " a ", lr, r7\n\t"                                                                              \
    "ssat " a ", #8, " a "\n\t"                                                                          \
    "smlal r12, lr, " b ", r6\n\t"                                                                       \
    "asr " b ", lr, r7\n\t"                                                                              \
    "ssat " b ", #8, " b "\n\t"
/* One channel of one pixel of a scaled stream (mcu_packed_rq_scaled): the multiplier in m, C in c. */
#define MCU_PX2_RQ_MM(a, m, c)                                                                            \
    "smmla " a ", " a ", " m ", " c "\n\t"                                                                  \
    "ssat " a ", #8, " a ", asr #" MCU_PX2_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"
/* A scaled stream's block (both pixels): channel 0's (multiplier, C) in r12, lr from the loop's last loads,
 * channel 1's in r6, r7 from the LDRD after it, channels 2 and 3's by one LDM: 21 cycles for eight outputs
 * where MCU_PX2_RQ4_DIFF takes 43. The stream pointer stops 8 words before the next block (the block order's
 * stream step adds them). */
#define MCU_PX2_RQ4_SCALED_WITH(loads)                                                                    \
    MCU_PX2_RQ_MM("r0", "r12", "lr") MCU_PX2_RQ_MM("r8", "r12", "lr")                                     \
    MCU_PX2_RQ_MM("r1", "r6", "r7") MCU_PX2_RQ_MM("r9", "r6", "r7")                                       \
    loads                                                                                                 \
    MCU_PX2_RQ_MM("r2", "r6", "r7") MCU_PX2_RQ_MM("r10", "r6", "r7")                                      \
    MCU_PX2_RQ_MM("r3", "r12", "lr") MCU_PX2_RQ_MM("r11", "r12", "lr")
#define MCU_PX2_RQ4_SCALED MCU_PX2_RQ4_SCALED_WITH("ldm r5!, {r6, r7, r12, lr}\n\t")
/* A block's four channels of both pixels. */
#define MCU_PX2_RQ4                                                                                       \
    MCU_PX2_RQ0("r0", "r8") MCU_PX2_RQ("r1", "r9") MCU_PX2_RQ("r2", "r10")                                \
    MCU_PX2_RQ("r3", "r11")
#define MCU_PX2_RQ4_RELU                                                                                  \
    MCU_PX2_RQ0_RELU("r0", "r8") MCU_PX2_RQ_RELU("r1", "r9") MCU_PX2_RQ_RELU("r2", "r10")                 \
    MCU_PX2_RQ_RELU("r3", "r11")
#define MCU_PX2_RQ4_DIFF                                                                                  \
    MCU_PX2_RQ0_DIFF("r0", "r8") MCU_PX2_RQ_DIFF("r1", "r9") MCU_PX2_RQ_DIFF("r2", "r10")                 \
    MCU_PX2_RQ_DIFF("r3", "r11")
/* Four results of one pixel (r0-r3 or r8-r11) packed into the first register's word. */
#define MCU_PX2_PACK(r0, r1, r2, r3)                                                                      \
    "pkhbt " r0 ", " r0 ", " r2 ", lsl #16\n\t"                                                           \
    "pkhbt " r1 ", " r1 ", " r3 ", lsl #16\n\t"                                                           \
    "and " r0 ", " r0 ", #0x00FF00FF\n\t"                                                                 \
    "and " r1 ", " r1 ", #0x00FF00FF\n\t"                                                                 \
    "orr " r0 ", " r0 ", " r1 ", lsl #8\n\t"
/* The packed word r clamped byte-wise to [min4 (r6), max4 (r7)] as MCU_PX_STORE_CLAMP does. */
#define MCU_PX2_CLAMP(r)                                                                                  \
    "ssub8 r12, " r ", r6\n\t"                                                                            \
    "sel " r ", " r ", r6\n\t"                                                                            \
    "ssub8 r12, r7, " r "\n\t"                                                                            \
    "sel " r ", " r ", r7\n\t"
/* Both pixels' four results packed (r0, r8) and clamped byte-wise to the state's min4, max4 (r4 + 20). */
#define MCU_PX2_PACK_CLAMP                                                                                \
    MCU_PX2_PACK("r0", "r1", "r2", "r3")                                                                  \
    MCU_PX2_PACK("r8", "r9", "r10", "r11")                                                                \
    "ldrd r6, r7, [r4, #20]\n\t"                                                                          \
    MCU_PX2_CLAMP("r0")                                                                                   \
    MCU_PX2_CLAMP("r8")
/* Both pixels' four bytes (pixel A's at r6, which moves on by 4; pixel B's at lr). */
#define MCU_PX2_STRB8                                                                                     \
    "strb r1, [r6, #1]\n\t"                                                                             \
    "strb r2, [r6, #2]\n\t"                                                                             \
    "strb r3, [r6, #3]\n\t"                                                                             \
    "strb r0, [r6], #4\n\t"                                                                             \
    "strb r9, [lr, #1]\n\t"                                                                             \
    "strb r10, [lr, #2]\n\t"                                                                            \
    "strb r11, [lr, #3]\n\t"                                                                            \
    "strb r8, [lr]\n\t"
/* A block's stores, both pixels (the state at r4: y, y_end, min4, max4, ..., the pixels' distance, the
 * block order's steps): four STRB a pixel where the range is all of int8, else the bytes packed, clamped
 * byte-wise and one STR a pixel; then the stream and y move to the next block, and `next` branches on
 * y == y_end. */
#define MCU_PX2_STORE_BYTES(next)                                                                       \
    /* four single loads pipeline: 5 cycles, and the steps need no LDRD later */                        \
    "ldr r6, [r4, #12]\n\t"                                                                             \
    "ldr r7, [r4, #16]\n\t"                                                                             \
    "ldr r12, [r4, #36]\n\t"                                                                            \
    "ldr lr, [r4, #40]\n\t"                                                                             \
    "add r5, r5, lr\n\t"                                                                                \
    "add lr, r6, r12\n\t"                                                                               \
    MCU_PX2_STRB8                                                                                       \
    "ldr r12, [r4, #44]\n\t"                                                                            \
    "add r6, r6, r12\n\t"                                                                               \
    "str r6, [r4, #12]\n\t"                                                                             \
    "cmp r6, r7\n\t" next
#define MCU_PX2_STORE_CLAMP(next)                                                                         \
    MCU_PX2_PACK_CLAMP                                                                                    \
    "ldrd r6, r7, [r4, #12]\n\t"                                                                          \
    "ldr r12, [r4, #36]\n\t"                                                                              \
    "str r8, [r6, r12]\n\t"                                                                               \
    "str r0, [r6], #4\n\t"                                                                                \
    "ldrd r12, lr, [r4, #40]\n\t"                                                                         \
    "add r5, r5, r12\n\t"                                                                                 \
    "add r6, r6, lr\n\t"                                                                                  \
    "str r6, [r4, #12]\n\t"                                                                               \
    "cmp r6, r7\n\t" next
/* The block's tail, chosen once per call by r3 (bit 0 the clamped store, bit 1 MCU_PX2_RQ_RELU, bit 2
 * with bit 1 MCU_PX2_RQ_DIFF) among the labels 30 (full, bytes), 31 (full, clamped), 32 (ReLU, bytes),
 * 33 (ReLU, clamped), 34 (ReLU by difference, bytes), 35 (the same, clamped) through the
 * table MCU_PX2_TAIL_TABLE (at label 29, where no instruction runs), into the state (r4 + 28) for LDR PC.
 * The ReLU tail by difference with the bytes stored whole (a folded ReLU, or ReLU6 whose range is all of
 * int8: ds_cnn's and mobilenet_v1's layers) comes last, before the block's entry (label 5), so that tail
 * alone falls through to the next block; the others branch. Each tail starts on a word (its
 * first instruction is 32-bit: the LDR PC's refill is shorter; the padding follows an unconditional
 * branch and never runs). */
#define MCU_PX2_TAIL_CHOICE                                                                               \
    "adr.w r7, 29f\n\t"                                                                                   \
    "ldrh r6, [r7, r3, lsl #1]\n\t"                                                                       \
    "add r6, r6, r7\n\t"                                                                                  \
    "orr r6, r6, #1\n\t"                                                                                  \
    "str r6, [r4, #28]\n\t"
#define MCU_PX2_TAIL_TABLE                                                                                \
    "29:\n\t.hword 30f - 29b, 31f - 29b, 32f - 29b, 33f - 29b, 30f - 29b, 31f - 29b, 34f - 29b, 35f - 29b\n\t"
/* The flat pairs' table: bit 3 a scaled stream (MCU_PX2_RQ4_SCALED; the kernel takes it for ReLU layers
 * only), 36 its bytes' tail, 37 the clamped one. */
#define MCU_PX2_TAIL_TABLE_FLAT                                                                           \
    MCU_PX2_TAIL_TABLE                                                                                    \
    ".hword 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b\n\t"
#define MCU_PX2_NEXT "bne 5f\n\tb 8f\n\t" /* every tail but the last before the loop's entry (5) */
/* The six tails, the one that falls through to the entry (5) last. */
#define MCU_PX2_TAILS                                                                                     \
    "30:\n\t" MCU_PX2_RQ4 MCU_PX2_STORE_BYTES(MCU_PX2_NEXT)                                               \
    ".balign 4\n\t31:\n\t" MCU_PX2_RQ4 MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                                   \
    ".balign 4\n\t33:\n\t" MCU_PX2_RQ4_RELU MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                              \
    ".balign 4\n\t32:\n\t" MCU_PX2_RQ4_RELU MCU_PX2_STORE_BYTES(MCU_PX2_NEXT)                              \
    ".balign 4\n\t35:\n\t" MCU_PX2_RQ4_DIFF MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                              \
    ".balign 4\n\t34:\n\t" MCU_PX2_RQ4_DIFF MCU_PX2_STORE_BYTES("beq 8f\n\t")
#if !MCU_PACKED_SCALED
#undef MCU_PX2_TAIL_TABLE_FLAT
#define MCU_PX2_TAIL_TABLE_FLAT MCU_PX2_TAIL_TABLE
#define MCU_PX2_TAILS_FLAT MCU_PX2_TAILS
#define MCU_PX2_TAIL_TABLE_DIRECT MCU_PX2_TAIL_TABLE
#define MCU_PX2_DIRECT_ENTRY ""
#define MCU_PX2_DIRECT_PICK ""
#define MCU_PX2_DIRECT_GO ""
#else
/* Bit 4 of the flat pairs' tail: the blocks run forward over a scaled stream (steps 32 and 0, mcu_px2_tail_flat),
 * so its bytes' tail (38) adds the stream's step as an immediate and leaves y as its stores moved it, without
 * loading either step: 4 cycles less a block. */
#define MCU_PX2_FWD 16
#undef MCU_PX2_TAIL_TABLE_FLAT
#define MCU_PX2_TAIL_TABLE_FLAT                                                                           \
    MCU_PX2_TAIL_TABLE                                                                                    \
    ".hword 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b\n\t"        \
    ".hword 30f - 29b, 31f - 29b, 32f - 29b, 33f - 29b, 30f - 29b, 31f - 29b, 34f - 29b, 35f - 29b\n\t"        \
    ".hword 38f - 29b, 37f - 29b, 38f - 29b, 37f - 29b, 38f - 29b, 37f - 29b, 38f - 29b, 37f - 29b\n\t"
/* The flat pairs' table's rows for bit 5 (the passes start at the loop's first tap pair, MCU_PX2_DIRECT_ENTRY):
 * tail 39 for 38, the others as without it. */
#define MCU_PX2_TAIL_ROWS_DIRECT                                                                          \
    ".hword 30f - 29b, 31f - 29b, 32f - 29b, 33f - 29b, 30f - 29b, 31f - 29b, 34f - 29b, 35f - 29b\n\t"        \
    ".hword 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b, 36f - 29b, 37f - 29b\n\t"        \
    ".hword 30f - 29b, 31f - 29b, 32f - 29b, 33f - 29b, 30f - 29b, 31f - 29b, 34f - 29b, 35f - 29b\n\t"        \
    ".hword 39f - 29b, 37f - 29b, 39f - 29b, 37f - 29b, 39f - 29b, 37f - 29b, 39f - 29b, 37f - 29b\n\t"
/* MCU_PX2_STORE_BYTES for blocks forward over a scaled stream: y's step 0, the stream's 32 (its 8 spare words). */
#define MCU_PX2_STORE_BYTES_STEP(step, next)                                                            \
    "ldr r6, [r4, #12]\n\t"                                                                             \
    "ldr r7, [r4, #16]\n\t"                                                                             \
    "ldr r12, [r4, #36]\n\t"                                                                            \
    step                                                                                                \
    "add lr, r6, r12\n\t"                                                                               \
    MCU_PX2_STRB8                                                                                       \
    "str r6, [r4, #12]\n\t"                                                                             \
    "cmp r6, r7\n\t" next
#define MCU_PX2_STORE_BYTES_FWD(next) MCU_PX2_STORE_BYTES_STEP("add r5, r5, #32\n\t", next)
/* The flat pairs' nine tails, the scaled stream's bytes forward last (mobilenet_v1's and ds_cnn's layers). */
#define MCU_PX2_TAILS_FLAT                                                                                \
    "30:\n\t" MCU_PX2_RQ4 MCU_PX2_STORE_BYTES(MCU_PX2_NEXT)                                               \
    ".balign 4\n\t31:\n\t" MCU_PX2_RQ4 MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                                   \
    ".balign 4\n\t33:\n\t" MCU_PX2_RQ4_RELU MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                              \
    ".balign 4\n\t32:\n\t" MCU_PX2_RQ4_RELU MCU_PX2_STORE_BYTES(MCU_PX2_NEXT)                              \
    ".balign 4\n\t35:\n\t" MCU_PX2_RQ4_DIFF MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                              \
    ".balign 4\n\t34:\n\t" MCU_PX2_RQ4_DIFF MCU_PX2_STORE_BYTES(MCU_PX2_NEXT)                              \
    ".balign 4\n\t37:\n\t" MCU_PX2_RQ4_SCALED MCU_PX2_STORE_CLAMP(MCU_PX2_NEXT)                            \
    ".balign 4\n\t36:\n\t" MCU_PX2_RQ4_SCALED MCU_PX2_STORE_BYTES(MCU_PX2_NEXT)                            \
    ".balign 4\n\t38:\n\t" MCU_PX2_RQ4_SCALED MCU_PX2_STORE_BYTES_FWD("beq 8f\n\t")
/* Tail 38 again (39), for calls whose passes start at the loop's first tap pair (kp / 2 a multiple of the pass:
 * mobilenet_v1's and ds_cnn's layers from 64 channels on): it falls through to an entry that needs no entry
 * address and no BX (4: the column start, the biases), placed right before the loop: 4 cycles less a block. The
 * prologue sets bit 5 of the tail (the table's last rows) where the entry index is 0 and then enters there too,
 * and a chained pair's step goes there (MCU_PX2_CHAIN). Tail 39 (124 bytes) and the entry (12) keep the loop's
 * first tap pair on a word with no padding before it (the assembler cannot check it here, the tail's far branch
 * being relaxable: the disassembly shows it). Armv8-M Mainline only: on the Cortex-M4 the same code cost
 * ds_cnn 4 k cycles on mps2-an386-l4r5 (its 1 kB ART holds the loop with fewer of the tails' lines). */
#if defined(__ARM_ARCH_8M_MAIN__)
/* Tail 39's requantization and stores: channels 2 and 3's words as four single loads, the last one moving the
 * stream on to the next block (its 8 spare words included): 5 cycles as the LDM, and no ADD after it. Its blocks
 * end where the stream reaches the state's word 4 (mcu_pixel2_packed passes the stream's end there, not y_end),
 * which is the same for every pair of a group's part: a chain carries it from pair to pair. */
#define MCU_PX2_RQ4_SCALED_DIRECT                                                                         \
    MCU_PX2_RQ4_SCALED_WITH("ldr r7, [r5, #4]\n\t"                                                       \
                            "ldr.w r12, [r5, #8]\n\t"                                                    \
                            "ldr.w lr, [r5, #12]\n\t"                                                    \
                            "ldr r6, [r5], #48\n\t")                                                     \
    "ldr r6, [r4, #12]\n\t"                                                                             \
    "ldr r7, [r4, #16]\n\t"                                                                             \
    "ldr r12, [r4, #36]\n\t"                                                                            \
    "add lr, r6, r12\n\t"                                                                               \
    MCU_PX2_STRB8                                                                                       \
    "str r6, [r4, #12]\n\t"                                                                             \
    "cmp r5, r7\n\t"
#define MCU_PX2_DIRECT_ENTRY                                                                              \
    ".balign 4\n\t39:\n\t" MCU_PX2_RQ4_SCALED_DIRECT MCU_PX2_END39                                      \
    "4:\n\t"                                                                                            \
    "ldr r4, [r4, #4]\n\t"                                                                              \
    "ldmia r5!, {r0, r1, r2, r3}\n\t"                                                                   \
    "mov r8, r0\n\t"                                                                                    \
    "mov r9, r1\n\t"                                                                                    \
    "mov r10, r2\n\t"                                                                                   \
    "mov r11, r3\n\t"
/* on the flags of the entry index's ANDS (nothing between sets them) */
#define MCU_PX2_DIRECT_PICK                                                                               \
    "it eq\n\t"                                                                                         \
    "orreq r3, r3, #32\n\t"
/* the first block by the direct entry too, on the same flags (the tail's choice in between keeps them) */
#define MCU_PX2_DIRECT_GO "beq 4f\n\t"
#define MCU_PX2_TAIL_TABLE_DIRECT MCU_PX2_TAIL_TABLE_FLAT MCU_PX2_TAIL_ROWS_DIRECT
#else
#define MCU_PX2_DIRECT_ENTRY ""
#define MCU_PX2_DIRECT_PICK ""
#define MCU_PX2_DIRECT_GO ""
#define MCU_PX2_TAIL_TABLE_DIRECT MCU_PX2_TAIL_TABLE_FLAT
#endif
#endif
/* The flat pairs' tail for blocks in `order` (MCU_PX2_FWD where it applies), for the kernel to take once a layer:
 * tested in each call, a call's few blocks (a part of a stream, or 8 of 32 channels) did not pay it back. */
static inline int mcu_px2_tail_flat(int tail, const mcu_block_order *order)
{
#if MCU_PACKED_SCALED
    return tail | ((tail & 8) && order->stream_step == 32 && order->y_step == 0 ? MCU_PX2_FWD : 0);
#else
    (void)order;
    return tail;
#endif
}

/* Tail 39's end, a pair's blocks done (mcu_pixel2_packed): the next pair of a chain (word 11 of the state: the
 * next pair's state, whose column start, outputs, stride and bounds the kernel wrote) takes this one's tail, saved
 * r7, the part's stream start (word 10) and end (word 4) and runs the same blocks from the part's start by the
 * direct entry; word 11 zero (every call whose order has y_step 0) ends the call. One call for a group's part where
 * one per pair cost about 140 cycles; the step takes 17. Word 11 odd (the first pair's state + 1) in the last
 * pair of a chain over every part of a group (forward: each part starts where the last one ended, so every
 * pair's y is where its last part left it): the first pair's state takes the next part (its start the last
 * part's end, its end a part's bytes on, words 6 and 5 of the last pair's state: at most the group's end), or
 * the call ends at the group's end; about 17 cycles a part where a call and the kernel's per pair writes took
 * about 400. Armv8-M Mainline only, as tail 39: its check costs a call that does not chain 5 cycles, which the
 * direct entry pays back from two blocks on. */
#if MCU_PACKED_SCALED && defined(__ARM_ARCH_8M_MAIN__)
#define MCU_PX2_CHAIN                                                                                     \
    "3:\n\t"                                                                                            \
    "ldr r0, [r4, #44]\n\t"                                                                             \
    "ldr r1, [r4, #16]\n\t"                                                                             \
    "ldr r2, [r4, #28]\n\t"                                                                             \
    "ldr r3, [r4, #32]\n\t"                                                                             \
    "ldr r5, [r4, #40]\n\t"                                                                             \
    "cbz r0, 8f\n\t"                                                                                    \
    "lsrs r6, r0, #1\n\t"                                                                               \
    "bcs 7f\n\t"                                                                                        \
    "str r1, [r0, #16]\n\t"                                                                             \
    "str r2, [r0, #28]\n\t"                                                                             \
    "str r3, [r0, #32]\n\t"                                                                             \
    "str r5, [r0, #40]\n\t"                                                                             \
    "mov r4, r0\n\t"                                                                                    \
    "b 4b\n\t"                                                                                          \
    "7:\n\t"                                                                                            \
    "ldrd r2, r3, [r4, #20]\n\t"                                                                        \
    "sub r0, r0, #1\n\t"                                                                                \
    "cmp r1, r2\n\t"                                                                                    \
    "beq 8f\n\t"                                                                                        \
    "mov r5, r1\n\t"                                                                                    \
    "add r1, r1, r3\n\t"                                                                                \
    "cmp r1, r2\n\t"                                                                                    \
    "it hi\n\t"                                                                                         \
    "movhi r1, r2\n\t"                                                                                  \
    "str r1, [r0, #16]\n\t"                                                                             \
    "str r5, [r0, #40]\n\t"                                                                             \
    "mov r4, r0\n\t"                                                                                    \
    "b 4b\n\t"
#define MCU_PX2_END39 "beq 3f\n\t"
#else
#define MCU_PX2_CHAIN ""
#define MCU_PX2_END39 "beq 8f\n\t"
#endif

/* Whether the flat pairs of kp taps with a tail of mcu_px2_tail_flat's chain (MCU_PX2_CHAIN): tail 39's, a
 * scaled stream's bytes forward whose passes start at the loop's first tap pair. */
static inline int mcu_px2_chains(int tail, int32_t kp)
{
#if MCU_PACKED_SCALED && defined(__ARM_ARCH_8M_MAIN__)
    return (tail & (1 | 8 | MCU_PX2_FWD)) == (8 | MCU_PX2_FWD) && (kp / 2) % MCU_PX2_PW_PASS == 0;
#else
    (void)tail, (void)kp;
    return 0;
#endif
}

#define MCU_PX2_ASM(loads, unit, bytes, col_back, pass, table, tails, chain, pick, go, direct)                                        \
        "strd r10, r11, [r4, #40]\n\t"                                                                  \
        "str r7, [r4, #32]\n\t"                                                                         \
        "mov r7, #0x80008000\n\t"                                                                       \
        "strd r7, r0, [r4]\n\t"                                                                         \
        "strd r1, r2, [r4, #12]\n\t"                                                                    \
        "str r9, [r4, #36]\n\t"                                                                         \
        "ldrd r10, r11, [r6]\n\t"                                                                       \
        "strd r10, r11, [r4, #20]\n\t"                                                                  \
        /* the entry: the pair that leaves whole passes after it, (-kp / 2) mod pass */                 \
        "lsr r8, r8, #1\n\t"                                                                            \
        "rsb r8, r8, #0\n\t"                                                                            \
        "ands r8, r8, #(" MCU_PX2_STR(pass) " - 1)\n\t"                                                 \
        "mov r10, #" bytes "\n\t"                                                                       \
        "adr.w r6, 12f\n\t"                                                                             \
        "mla r6, r8, r10, r6\n\t"                                                                       \
        "orr r6, r6, #1\n\t"                                                                            \
        "str r6, [r4, #8]\n\t"                                                                          \
        /* the tail: bit 0 of r3 the clamped store, bit 1 the requantization without the sign's           \
         * correction (MCU_PX2_RQ_RELU); each tail ends the block */                                      \
        pick                                                                                              \
        MCU_PX2_TAIL_CHOICE                                                                               \
        go                                                                                                \
        "b 5f\n\t"                                                                                        \
        MCU_PX_WORD_SECTION                                                                               \
        table                                                                                             \
        tails                                                                                             \
        /* the block: the entry and the column start as one run of two single loads (3 cycles), the        \
         * biases for both pixels, and BX to the entry (3, where LDR PC takes 5): 15 cycles in the 18 bytes \
         * of the 17 the state's address in a register and LDR PC took (a longer run of single loads is 3  \
         * cycles less but 14 bytes more, which moved ds_cnn's and resnet8's code in the flash caches) */   \
        "5:\n\t"                                                                                         \
        "ldr lr, [r4, #8]\n\t"                                                                          \
        "ldr r4, [r4, #4]\n\t"                                                                          \
        "ldmia r5!, {r0, r1, r2, r3}\n\t"                                                               \
        "mov r8, r0\n\t"                                                                                \
        "mov r9, r1\n\t"                                                                                \
        "mov r10, r2\n\t"                                                                               \
        "mov r11, r3\n\t"                                                                               \
        "bx lr\n\t"                                                                                     \
        direct                                                                                            \
        /* the passes' first instruction, a branch target, is 32-bit: on a word it takes no longer      \
         * refill (docs/cycles.md); the padding follows an unconditional branch and never runs. The     \
         * loop is rotated: each pass ends with the first tap pair's loads of the next, whose first     \
         * word is the sentinel after the last pass (no load of its own: 2 cycles less per pass); the   \
         * first pass enters at a copy of those loads (12) or further on */                             \
        ".balign 4\n\t"                                                                                 \
        "12:\n\t" loads                                                                            \
        "6:\n\t" MCU_PX2_MACS ".rept " MCU_PX2_STR(pass) " - 1\n\t" unit ".endr\n\t" loads             \
        "9:\n\t"                                                                                        \
        ".if (9b - 12b) - " bytes " * " MCU_PX2_STR(pass) " - 16\n\t"                                   \
        ".error \"mcu_pixel2_packed: the tap pairs are not all wide instructions\"\n\t"                 \
        ".endif\n\t"                                                                                    \
        "cmp r6, #0x80008000\n\t"                                                                       \
        "bne 6b\n\t"                                                                                    \
        /* back to the sentinel and the block's requantization: the last loads left channel 0's K in     \
         * r12, lr; its multiplier and shift into r6, r7, as the tails take them (MCU_PX2_RQ0) */         \
        "sub r4, r4, #" col_back "\n\t"                                                                 \
        "ldrd r6, r7, [r5], #8\n\t"                                                                     \
        "ldr pc, [r4, #28]\n\t"                                                                         \
        chain                                                                                           \
        "8:\n\t"                                                                                        \
        "ldr r7, [r4, #32]\n\t"

/* Every whole block of output pixels A (y to y_end) and B (y + stride on) from the interleaved column
 * col2 of kp taps (a positive multiple of 4) and MCU_PIXEL2_SPARE more int16; `tail`: bit 0 the
 * activation range is narrower than int8 (the clamped store), bit 1 it starts at or above the output
 * offset (MCU_PX2_RQ_RELU), bit 2 with it mcu_px2_diff_ok's (MCU_PX2_RQ_DIFF). Bit 3 a scaled stream, bit 4
 * (MCU_PX2_FWD) with it blocks forward: mcu_px2_tail_flat of `order`. */
static inline void mcu_pixel2_packed(const int16_t *col2, int32_t kp, const int32_t *blob, int8_t *y, int8_t *y_end,
                                     int32_t stride, const uint32_t *bounds, int tail, const mcu_block_order *order)
{
    if (mcu_px2_chains(tail, kp)) { /* tail 39: its blocks end at the stream's end, not y_end */
        const uint32_t blocks = ((uintptr_t)y_end - (uintptr_t)y) / 4u;
        y_end = (int8_t *)(uintptr_t)(blob + blocks * (uint32_t)mcu_packed_block_words(kp));
    }
    register const int16_t *c0 __asm__("r0") = col2;
    register int8_t *yp __asm__("r1") = y;
    register int8_t *ye __asm__("r2") = y_end;
    register int32_t t __asm__("r3") = tail;
    register const int16_t *st __asm__("r4") = col2 + 2 * kp;
    register const int32_t *w __asm__("r5") = blob;
    register const uint32_t *b __asm__("r6") = bounds;
    register int32_t taps __asm__("r8") = kp;
    register int32_t dist __asm__("r9") = stride;
    register int32_t wstep __asm__("r10") = order->stream_step;
    register int32_t ystep __asm__("r11") = order->y_step;
    __asm__ volatile(MCU_PX2_ASM(MCU_PX2_LOADS, MCU_PX2_UNIT, MCU_PX2_STR(MCU_PX2_UNIT_BYTES), "8", MCU_PX2_PW_PASS,
                                 MCU_PX2_TAIL_TABLE_DIRECT, MCU_PX2_TAILS_FLAT, MCU_PX2_CHAIN,
                                 MCU_PX2_DIRECT_PICK, MCU_PX2_DIRECT_GO, MCU_PX2_DIRECT_ENTRY)
                     : "+r"(c0), "+r"(yp), "+r"(ye), "+r"(t), "+r"(st), "+r"(w), "+r"(b), "+r"(taps), "+r"(dist),
                       "+r"(wstep), "+r"(ystep)
                     :
                     : "r12", "lr", "cc", "memory");
}

/* mcu_pixel2_packed with the two pixels' columns apart (windowed layers, whose columns
 * mcu_conv_column_s16 builds one pixel at a time): pixel A's kp taps at col, its state after them,
 * pixel B's taps at col + MCU_PIXEL2_B. The unit loads B's column word at a fixed offset, A's with
 * write-back: the same 14 instructions and 16 cycles per 16 MACs. */
/* Pixel B's column follows the widest window the build runs in pairs: a model whose windows all fit
 * the straight-line dot product (MCU_PACKED_LOOP 0) needs at most MCU_PIXEL_WIDE_TAPS, else every
 * window up to MCU_CONV_PACKED_TAPS_MAX pairs (resnet8's 64-channel 3x3 layers, 576 taps, streamed
 * their 74 kB of weights once per pixel through the U575's 8 kB cache: 1.93 cycles per MAC, 1.5 in
 * pairs) at 1,280 B more stack in the kernel's frame; the four-pixel loop's columns take 4 x 668
 * int16, 5.3 kB, in such builds. */
#ifndef MCU_PACKED_WINDOWS
#define MCU_PACKED_WINDOWS 1 /* 0: a model's build whose layers are all flat pointwise or narrow (specialise.py) */
#endif
#if !MCU_PACKED_WINDOWS
#define MCU_PIXEL2_SPLIT_TAPS 0 /* no windowed layer: no second column, nor the stack for it */
#elif MCU_PACKED_LOOP
#define MCU_PIXEL2_SPLIT_TAPS MCU_CONV_PACKED_TAPS_MAX
#else
#define MCU_PIXEL2_SPLIT_TAPS MCU_PIXEL_WIDE_TAPS
#endif
#define MCU_PIXEL2_B (MCU_PIXEL2_SPLIT_TAPS + MCU_PIXEL2_SPARE) /* int16 */

#define MCU_PX2_LOADS_SPLIT                                                                               \
    "ldr.w r6, [r4], #4\n\t"                                                                              \
    "ldr.w r7, [r4, #(2 * " MCU_PX2_STR(MCU_PIXEL2_B) " - 4)]\n\t"                                         \
    "ldr.w r12, [r5], #4\n\t"                                                                             \
    "ldr.w lr, [r5], #4\n\t"
#define MCU_PX2_UNIT_SPLIT MCU_PX2_LOADS_SPLIT MCU_PX2_MACS
static inline const int32_t *mcu_pixel2_packed_split(const int16_t *col, int32_t kp, const int32_t *blob, int8_t *y,
                                                     int8_t *y_end, int32_t stride, const uint32_t *bounds,
                                                     int tail, const mcu_block_order *order)
{
    register const int16_t *c0 __asm__("r0") = col;
    register int8_t *yp __asm__("r1") = y;
    register int8_t *ye __asm__("r2") = y_end;
    register int32_t t __asm__("r3") = tail;
    register const int16_t *st __asm__("r4") = col + kp;
    register const int32_t *w __asm__("r5") = blob;
    register const uint32_t *b __asm__("r6") = bounds;
    register int32_t taps __asm__("r8") = kp;
    register int32_t dist __asm__("r9") = stride;
    register int32_t wstep __asm__("r10") = order->stream_step;
    register int32_t ystep __asm__("r11") = order->y_step;
    __asm__ volatile(MCU_PX2_ASM(MCU_PX2_LOADS_SPLIT, MCU_PX2_UNIT_SPLIT, MCU_PX2_STR(MCU_PX2_UNIT_BYTES), "4",
                                 MCU_PX2_PASS, MCU_PX2_TAIL_TABLE, MCU_PX2_TAILS, "", "", "", "")
                     : "+r"(c0), "+r"(yp), "+r"(ye), "+r"(t), "+r"(st), "+r"(w), "+r"(b), "+r"(taps), "+r"(dist),
                       "+r"(wstep), "+r"(ystep)
                     :
                     : "r12", "lr", "cc", "memory");
    return w;
}

/* Four output pixels of a row per weight load, two channels at a time (windowed layers whose weight
 * stream exceeds a flash cache: each line of it is fetched once per four pixels, not two). The four
 * columns lie MCU_PIXEL4_B int16 apart (pixel A's state after its kp taps); eight accumulators (r0,
 * r1 pixel A, r2, r3 B, r8, r9 C, r10, r11 D: channels j and j + 1 of a block). Per tap pair: four
 * LDR of B's and C's column words and the two channels' weight words (the stream's 16 bytes of the
 * tap pair hold four channels; the block's second pass reads the other two, from the cache), four
 * SMLAD, two LDR of D's and A's words and four SMLAD: 14 instructions and 16 cycles per 16 MACs
 * (single loads pipeline), as mcu_pixel2_packed_split's. The requantization keeps each channel's
 * multiplier and shift in registers and reloads only K (LDRD) for the next pixel; each pixel's two
 * bytes are stored with STRH, clamped byte-wise as MCU_PX2_CLAMP does (a full int8 range clamps
 * nothing). (14 instructions per tap pair, MCU_PX2_PASS of them a pass.) Every window the pairs take runs
 * here too (resnet8's 576-tap layers: 74 kB of weights, once per four pixels instead of two).
 *
 * The state, 15 words right after pixel A's kp taps: sentinel, column start, entry address, y (pixel
 * A's next outputs), y_end, min4, max4, the pixels' distance, the current tail, the tails of the
 * first and second channel pair, the block's start, saved r7, the block order's two steps. */
#define MCU_PIXEL4_SPARE 32 /* int16: 15 words of state, rounded up to keep the columns 8-byte apart */
#define MCU_PIXEL4_TAPS MCU_PIXEL2_SPLIT_TAPS
#define MCU_PIXEL4_B (MCU_PIXEL4_TAPS + MCU_PIXEL4_SPARE) /* int16 */
#ifndef MCU_PIXEL4_STREAM_MIN
#define MCU_PIXEL4_STREAM_MIN 8192 /* bytes of a layer's stream from which four pixels run per pass */
#endif
#define MCU_PX4_LOADS                                                                                     \
    "ldr.w r6, [r4], #4\n\t"                                                                              \
    "ldr.w r7, [r4, #(2 * " MCU_PX2_STR(MCU_PIXEL4_B) " - 4)]\n\t"                                         \
    "ldr.w lr, [r5, #4]\n\t"                                                                              \
    "ldr.w r12, [r5], #16\n\t"
#define MCU_PX4_MACS                                                                                      \
    "smlad r0, r6, r12, r0\n\t"                                                                           \
    "smlad r1, r6, lr, r1\n\t"                                                                            \
    "smlad r2, r7, r12, r2\n\t"                                                                           \
    "smlad r3, r7, lr, r3\n\t"                                                                            \
    "ldr.w r6, [r4, #(4 * " MCU_PX2_STR(MCU_PIXEL4_B) " - 4)]\n\t"                                         \
    "ldr.w r7, [r4, #(6 * " MCU_PX2_STR(MCU_PIXEL4_B) " - 4)]\n\t"                                         \
    "smlad r8, r6, r12, r8\n\t"                                                                           \
    "smlad r9, r6, lr, r9\n\t"                                                                            \
    "smlad r10, r7, r12, r10\n\t"                                                                         \
    "smlad r11, r7, lr, r11\n\t"
#define MCU_PX4_UNIT MCU_PX4_LOADS MCU_PX4_MACS
/* One channel's requantization for the four pixels (a, b, c, d its accumulators): the first LDM
 * loads K, the multiplier and the shift; the other pixels reload K alone (SMLAL overwrites it). */
#define MCU_PX4_RQ1(a, k)                                                                                 \
    "smlal r6, r7, " a ", r12\n\t"                                                                        \
    "bic " a ", " a ", r6\n\t"                                                                            \
    "add r7, r7, " a ", asr #31\n\t"                                                                      \
    "asr r7, r7, lr\n\t"                                                                                  \
    "ssat " a ", #8, r7\n\t" k
#define MCU_PX4_RQ(a, b, c, d)                                                                            \
    "ldm r5, {r6, r7, r12, lr}\n\t"                                                                       \
    MCU_PX4_RQ1(a, "ldrd r6, r7, [r5]\n\t") MCU_PX4_RQ1(b, "ldrd r6, r7, [r5]\n\t")                      \
    MCU_PX4_RQ1(c, "ldrd r6, r7, [r5], #16\n\t") MCU_PX4_RQ1(d, "")
/* Both channels requantized, packed ([A_j, A_j+1, B_j, B_j+1] and the same of C, D), clamped and
 * stored; y moves on by two channels. */
#define MCU_PX4_TAIL                                                                                      \
    MCU_PX4_RQ("r0", "r2", "r8", "r10") MCU_PX4_RQ("r1", "r3", "r9", "r11")                              \
    MCU_PX2_PACK_CLAMP                                                                                    \
    "ldrd r6, r7, [r4, #12]\n\t"                                                                          \
    "ldr r12, [r4, #28]\n\t"                                                                              \
    "strh r0, [r6]\n\t"                                                                                   \
    "lsr r0, r0, #16\n\t"                                                                                 \
    "strh r0, [r6, r12]\n\t"                                                                              \
    "add lr, r6, r12, lsl #1\n\t"                                                                         \
    "strh r8, [lr]\n\t"                                                                                   \
    "lsr r8, r8, #16\n\t"                                                                                 \
    "strh r8, [lr, r12]\n\t"                                                                              \
    "add r6, r6, #2\n\t"                                                                                  \
    "str r6, [r4, #12]\n\t"

/* Every whole block of output pixels A (y to y_end), B, C and D (y + stride, 2 stride, 3 stride) from
 * their columns (kp taps each, a positive multiple of 4, MCU_PIXEL4_B int16 apart from col); returns
 * the stream after the last block. */
static inline const int32_t *mcu_pixel4_packed_split(const int16_t *col, int32_t kp, const int32_t *blob, int8_t *y,
                                                     int8_t *y_end, int32_t stride, const uint32_t *bounds,
                                                     const mcu_block_order *order)
{
    register const int16_t *c0 __asm__("r0") = col;
    register int8_t *yp __asm__("r1") = y;
    register int8_t *ye __asm__("r2") = y_end;
    register const int16_t *st __asm__("r4") = col + kp;
    register const int32_t *w __asm__("r5") = blob;
    register const uint32_t *b __asm__("r6") = bounds;
    register int32_t taps __asm__("r8") = kp;
    register int32_t dist __asm__("r9") = stride;
    register int32_t wstep __asm__("r10") = order->stream_step;
    register int32_t ystep __asm__("r11") = order->y_step;
    __asm__ volatile(
        "strd r10, r11, [r4, #52]\n\t"
        "str r7, [r4, #48]\n\t"
        "mov r7, #0x80008000\n\t"
        "str r7, [r4]\n\t"
        "str r0, [r4, #4]\n\t"
        "strd r1, r2, [r4, #12]\n\t"
        "ldrd r10, r11, [r6]\n\t"
        "strd r10, r11, [r4, #20]\n\t"
        "str r9, [r4, #28]\n\t"
        /* the entry: the pair that leaves whole passes after it, (-kp / 2) mod MCU_PX2_PASS */
        "lsr r8, r8, #1\n\t"
        "rsb r8, r8, #0\n\t"
        "and r8, r8, #(" MCU_PX2_STR(MCU_PX2_PASS) " - 1)\n\t"
        "mov r10, #56\n\t"
        "adr.w r6, 12f\n\t"
        "mla r6, r8, r10, r6\n\t"
        "orr r6, r6, #1\n\t"
        "str r6, [r4, #8]\n\t"
        "adr.w r6, 30f\n\t"
        "orr r6, r6, #1\n\t"
        "adr.w r7, 31f\n\t"
        "orr r7, r7, #1\n\t"
        "strd r6, r7, [r4, #36]\n\t"
        "b 5f\n\t"
        MCU_PX_WORD_SECTION
        "30:\n\t" /* after the first channel pair: the second pair of the block */
        MCU_PX4_TAIL
        "ldr r5, [r4, #44]\n\t"
        "ldrd r0, r1, [r5, #8]\n\t"
        "add r5, r5, #24\n\t"
        "ldr r6, [r4, #40]\n\t"
        "b 7f\n\t"
        "31:\n\t" /* after the second: the next block, or the end */
        "add r5, r5, #24\n\t"
        MCU_PX4_TAIL
        "ldrd r12, lr, [r4, #52]\n\t"
        "add r5, r5, r12\n\t"
        "add r6, r6, lr\n\t"
        "str r6, [r4, #12]\n\t"
        "cmp r6, r7\n\t"
        "beq 8f\n\t"
        "5:\n\t"
        "str r5, [r4, #44]\n\t"
        "ldrd r0, r1, [r5], #16\n\t"
        "ldr r6, [r4, #36]\n\t"
        "7:\n\t"
        "str r6, [r4, #32]\n\t"
        "mov r2, r0\n\t"
        "mov r3, r1\n\t"
        "mov r8, r0\n\t"
        "mov r9, r1\n\t"
        "mov r10, r0\n\t"
        "mov r11, r1\n\t"
        "mov r6, r4\n\t"
        "ldr r4, [r6, #4]\n\t"
        "ldr pc, [r6, #8]\n\t"
        ".balign 4\n\t" /* rotated as mcu_pixel2_packed's loop */
        "12:\n\t" MCU_PX4_LOADS
        "6:\n\t" MCU_PX4_MACS ".rept " MCU_PX2_STR(MCU_PX2_PASS) " - 1\n\t" MCU_PX4_UNIT ".endr\n\t" MCU_PX4_LOADS
        "9:\n\t"
        ".if (9b - 12b) - 56 * " MCU_PX2_STR(MCU_PX2_PASS) " - 16\n\t"
        ".error \"mcu_pixel4_packed_split: the tap pairs are not all wide instructions\"\n\t"
        ".endif\n\t"
        "cmp r6, #0x80008000\n\t"
        "bne 6b\n\t"
        "sub r4, r4, #4\n\t"
        "sub r5, r5, #16\n\t"
        "ldr pc, [r4, #32]\n\t"
        "8:\n\t"
        "ldr r7, [r4, #48]\n\t"
        : "+r"(c0), "+r"(yp), "+r"(ye), "+r"(st), "+r"(w), "+r"(b), "+r"(taps), "+r"(dist), "+r"(wstep),
          "+r"(ystep)
        :
        : "r3", "r12", "lr", "cc", "memory");
    return w;
}
#ifndef MCU_PACKED_PW8
#define MCU_PACKED_PW8 1 /* 0: a model's build without a flat pointwise layer of 8 taps (specialise.py) */
#endif
/* Speed paths a model's build may leave out (specialise.py), its layers then exact one pixel (or two) at a time:
 * 0 leaves out the flat pointwise pairs (mcu_pixel2_packed, its groups, mcu_pw8_pairs) where no layer has two
 * pixels of whole input words to pair, or the four-pixel loop (mcu_pixel4_packed_split) where no windowed
 * layer's stream outgrows MCU_PIXEL4_STREAM_MIN. */
#ifndef MCU_PACKED_PW_PAIRS
#define MCU_PACKED_PW_PAIRS 1
#endif
#ifndef MCU_PACKED_QUADS
#define MCU_PACKED_QUADS 1
#endif
#if MCU_PACKED_PW8 && MCU_PACKED_PW_PAIRS
/* Flat pointwise layers of 8 input channels (mobilenet_v1's 8 -> 16 layer at 48 x 48): every pixel pair
 * of a run in one assembly. Through mcu_pixel2_packed each pair cost a call that wrote its whole state
 * (about 45 cycles), the column's C loop and a pass loop entered at its middle, for 4 tap pairs a block:
 * about 900 cycles a pair of mobilenet_v1's layer. Here the pair's column is 8 words the loop builds
 * (two LDRD of the pixels' 16 bytes, eight SXTAB16, two STM) before the state, the tap pairs are
 * straight-line with the column words at fixed offsets (MCU_PX2_MACS, 16 cycles per 16 MACs), and the
 * requantizations and stores are the pair loop's tails (MCU_PX2_RQ4, MCU_PX2_STORE_*): blocks forward,
 * pairs forward or backward (in place, last pair first: both pixels' inputs are in the column before
 * either output is written, as in the C's pair loops). */
typedef struct {
    uint32_t col[8];      /* the pair's column: A(0,2), B(0,2), A(1,3), B(1,3), then taps 4..7 alike */
    uint32_t unused[3];   /* the state's offsets are mcu_pixel2_packed's, so its tails serve */
    int8_t *y;            /* pixel A's next outputs */
    int8_t *y_end;        /* pixel A's last output + 1 */
    uint32_t min4, max4;  /* the activation bounds in four bytes each */
    uint32_t tail;        /* the assembly's */
    uint32_t r7;          /* the assembly's */
    int32_t stride;       /* from pixel A's outputs to B's: the output channels */
    int32_t stream_step;  /* 0: the blocks forward */
    int32_t y_step;       /* 0 */
    const int8_t *x;      /* the next pair's input (pixel A's 8 bytes, B's after them), word-aligned */
    int32_t dx;           /* 16 (forward) or -16 (backward) */
    int32_t pairs;        /* pairs left, this one included */
    int32_t dy;           /* from pixel A's output end to the next pair's pixel A: cout or -3 cout */
    uint32_t off2;        /* the input offset in both halves */
    const int32_t *blocks;
} mcu_pw8_state;

_Static_assert(offsetof(mcu_pw8_state, y) == 44 && offsetof(mcu_pw8_state, tail) == 60 &&
                   offsetof(mcu_pw8_state, stride) == 68 && offsetof(mcu_pw8_state, x) == 80 &&
                   offsetof(mcu_pw8_state, pairs) == 88 && offsetof(mcu_pw8_state, off2) == 96 &&
                   offsetof(mcu_pw8_state, blocks) == 100,
               "mcu_pw8_state layout");

/* One tap pair of both pixels: the column's two words at offsets a, b from the state (r4). */
#define MCU_PW8_UNIT(a, b)                                                                                \
    "ldr.w r6, [r4, #" a "]\n\t"                                                                          \
    "ldr.w r7, [r4, #" b "]\n\t"                                                                          \
    "ldr.w r12, [r5], #4\n\t"                                                                             \
    "ldr.w lr, [r5], #4\n\t" MCU_PX2_MACS

/* st->pairs >= 1 pairs from st (its fields but tail and r7 set); `tail` as mcu_pixel2_packed's. */
static __attribute__((noinline)) void mcu_pw8_pairs(mcu_pw8_state *st, int tail)
{
    register uint32_t *s __asm__("r4") = &st->unused[0]; /* the state: pixel A's column word 0 at -32 */
    register int32_t t __asm__("r3") = tail;
    __asm__ volatile(
        "str r7, [r4, #32]\n\t"
        MCU_PX2_TAIL_CHOICE
        "b 20f\n\t"
        MCU_PX_WORD_SECTION
        MCU_PX2_TAIL_TABLE_FLAT
        MCU_PX2_TAILS_FLAT
        /* a block: the biases and the first tap pair's words in one run of eight single loads (9 cycles), the
         * first pair's SMLAD adding each channel's bias to both pixels' products (pixel B's first, while the
         * register still holds the bias alone), the other 3 tap pairs, then its tail: where LDM, four MOV and
         * the pair's own loads took 14 */
        "5:\n\t"
        "ldr r0, [r5], #4\n\t"
        "ldr r1, [r5], #4\n\t"
        "ldr r2, [r5], #4\n\t"
        "ldr r3, [r5], #4\n\t"
        "ldr.w r6, [r4, #-32]\n\t"
        "ldr.w r7, [r4, #-28]\n\t"
        "ldr.w r12, [r5], #4\n\t"
        "ldr.w lr, [r5], #4\n\t"
        "smlad r8, r7, r12, r0\n\t"
        "smlad r0, r6, r12, r0\n\t"
        "smlad r9, r7, lr, r1\n\t"
        "smlad r1, r6, lr, r1\n\t"
        "ldr.w r12, [r5], #4\n\t"
        "ldr.w lr, [r5], #4\n\t"
        "smlad r10, r7, r12, r2\n\t"
        "smlad r2, r6, r12, r2\n\t"
        "smlad r11, r7, lr, r3\n\t"
        "smlad r3, r6, lr, r3\n\t"
        MCU_PW8_UNIT("-24", "-20") MCU_PW8_UNIT("-16", "-12") MCU_PW8_UNIT("-8", "-4")
        /* channel 0's K, multiplier and shift, as the tails take them (MCU_PX2_RQ0; a scaled stream's channels 0
         * and 1, MCU_PX2_RQ4_SCALED): four pipelined loads */
        "ldr.w r12, [r5], #4\n\t"
        "ldr.w lr, [r5], #4\n\t"
        "ldr.w r6, [r5], #4\n\t"
        "ldr.w r7, [r5], #4\n\t"
        "ldr pc, [r4, #28]\n\t"
        "8:\n\t" /* the pair's last block stored: r6 is pixel A's output end */
        "ldr r0, [r4, #56]\n\t"
        "subs r0, r0, #1\n\t"
        "beq 9f\n\t"
        "str r0, [r4, #56]\n\t"
        "ldr r1, [r4, #60]\n\t"
        "add r6, r6, r1\n\t"
        "ldr r2, [r4, #36]\n\t"
        "add r7, r6, r2\n\t"
        "strd r6, r7, [r4, #12]\n\t"
        "20:\n\t" /* the pair's column */
        "ldrd r0, r1, [r4, #48]\n\t"
        "add r2, r0, r1\n\t"
        "str r2, [r4, #48]\n\t"
        "ldr r12, [r4, #64]\n\t"
        "ldrd r2, r3, [r0, #8]\n\t"
        "ldrd r0, r1, [r0]\n\t"
        "sxtab16 r8, r12, r0\n\t"
        "sxtab16 r9, r12, r2\n\t"
        "sxtab16 r10, r12, r0, ror #8\n\t"
        "sxtab16 r11, r12, r2, ror #8\n\t"
        "sub r6, r4, #32\n\t"
        "stmia r6!, {r8, r9, r10, r11}\n\t"
        "sxtab16 r8, r12, r1\n\t"
        "sxtab16 r9, r12, r3\n\t"
        "sxtab16 r10, r12, r1, ror #8\n\t"
        "sxtab16 r11, r12, r3, ror #8\n\t"
        "stmia r6, {r8, r9, r10, r11}\n\t"
        "ldr r5, [r4, #68]\n\t"
        "b 5b\n\t"
        "9:\n\t"
        "ldr r7, [r4, #32]\n\t"
        : "+r"(s), "+r"(t)
        :
        : "r0", "r1", "r2", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}
#undef MCU_PW8_UNIT
#ifndef MCU_PACKED_PW8_REGS
#define MCU_PACKED_PW8_REGS 1 /* 0: a model's build where no such layer takes mcu_pw8_regs (specialise.py) */
#endif
#if MCU_PACKED_PW8_REGS && MCU_PACKED_SCALED && defined(__ARM_FP)
/* mcu_pw8_pairs for a scaled stream whose bytes are stored whole, blocks forward (its tail 38): each pixel pair's
 * column stays in eight registers (pixel A's in r0-r3, B's in r8-r11), and each output channel of the pair is
 * its bias, four weight words, eight SMLAD, (multiplier, C), two SMMLA and SSAT and two STRB: 26 cycles, two
 * blocks a pass (output channels a multiple of 8). mobilenet_v1's 8 -> 16 layer: 28.7 cycles a channel of a pair
 * with the pair's column and loops, where mcu_pw8_pairs (the column in memory, re-read by every tap pair of a
 * block, and the block's tails) took 32.5 (599,408 -> 529,206 on mps2-an505-u575).
 * The stream, y, the two accumulators and two loads' registers take the other six: the pair's state (input,
 * pairs left, the steps, y_end, the distance to pixel B's outputs) lives in FPU registers s0-s8 (a VMOV each
 * way is one cycle, as a load that pipelines; a push would be stack the planned figures cannot see). */
typedef struct {
    const int8_t *x;      /* the first pair's input (pixel A's 8 bytes, B's after them), word-aligned */
    int32_t pairs;        /* >= 1 */
    int32_t dx;           /* 16 (forward) or -16 (backward) */
    int32_t dy;           /* from pixel A's output end to the next pair's pixel A: cout or -3 cout */
    int32_t stride;       /* from pixel A's outputs to B's: the output channels */
    uint32_t off2;        /* the input offset in both halves */
    const int32_t *blocks;
    int8_t *y;            /* the first pair's pixel A outputs */
} mcu_pw8r_state;

/* Channel j of a block (the stream at r5: 4 biases, 16 weight words by tap pair, then (m, C) per channel). */
#define MCU_PW8R_CH(bias, w0, w1, w2, w3, m, c)                                                           \
    "ldr r6, [r5, #" bias "]\n\t"                                                                         \
    "ldr r12, [r5, #" w0 "]\n\t"                                                                          \
    "ldr lr, [r5, #" w1 "]\n\t"                                                                           \
    "smlad r7, r8, r12, r6\n\t"                                                                           \
    "smlad r6, r0, r12, r6\n\t"                                                                           \
    "smlad r7, r9, lr, r7\n\t"                                                                            \
    "smlad r6, r1, lr, r6\n\t"                                                                            \
    "ldr r12, [r5, #" w2 "]\n\t"                                                                          \
    "ldr lr, [r5, #" w3 "]\n\t"                                                                           \
    "smlad r7, r10, r12, r7\n\t"                                                                          \
    "smlad r6, r2, r12, r6\n\t"                                                                           \
    "smlad r7, r11, lr, r7\n\t"                                                                           \
    "smlad r6, r3, lr, r6\n\t"                                                                            \
    "ldr r12, [r5, #" m "]\n\t"                                                                           \
    "ldr lr, [r5, #" c "]\n\t"                                                                            \
    "smmla r6, r6, r12, lr\n\t"                                                                           \
    "smmla r7, r7, r12, lr\n\t"                                                                           \
    "vmov r12, s4\n\t"                                                                                    \
    "ssat r6, #8, r6, asr #" MCU_PX2_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r7, #8, r7, asr #" MCU_PX2_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "strb r7, [r4, r12]\n\t"                                                                              \
    "strb r6, [r4], #1\n\t"

static __attribute__((noinline)) void mcu_pw8_regs(const mcu_pw8r_state *st)
{
    register const mcu_pw8r_state *s __asm__("r4") = st;
    __asm__ volatile(
        "vmov s8, r7\n\t"
        "ldm r4, {r0, r1, r2, r3, r5, r6, r8, r9}\n\t"
        "vmov s0, r0\n\t"
        "vmov s1, r1\n\t"
        "vmov s2, r2\n\t"
        "vmov s3, r3\n\t"
        "vmov s4, r5\n\t"
        "vmov s5, r6\n\t"
        "vmov s6, r8\n\t"
        "mov r4, r9\n\t"
        "1:\n\t" /* the pair's column, its offset added: taps (0,2), (1,3), (4,6), (5,7) as the weight words */
        "vmov r12, s0\n\t"
        "vmov lr, s2\n\t"
        "add lr, r12, lr\n\t"
        "vmov s0, lr\n\t"
        "ldrd r6, r7, [r12]\n\t"
        "ldrd r5, r12, [r12, #8]\n\t"
        "vmov lr, s5\n\t"
        "sxtab16 r0, lr, r6\n\t"
        "sxtab16 r1, lr, r6, ror #8\n\t"
        "sxtab16 r2, lr, r7\n\t"
        "sxtab16 r3, lr, r7, ror #8\n\t"
        "sxtab16 r8, lr, r5\n\t"
        "sxtab16 r9, lr, r5, ror #8\n\t"
        "sxtab16 r10, lr, r12\n\t"
        "sxtab16 r11, lr, r12, ror #8\n\t"
        "vmov r12, s4\n\t"
        "add r12, r4, r12\n\t"
        "vmov s7, r12\n\t"
        "vmov r5, s6\n\t"
        "2:\n\t" /* two blocks of four channels; a block's stream is 36 words */
        MCU_PW8R_CH("0", "16", "32", "48", "64", "80", "84")
        MCU_PW8R_CH("4", "20", "36", "52", "68", "88", "92")
        MCU_PW8R_CH("8", "24", "40", "56", "72", "96", "100")
        MCU_PW8R_CH("12", "28", "44", "60", "76", "104", "108")
        MCU_PW8R_CH("144", "160", "176", "192", "208", "224", "228")
        MCU_PW8R_CH("148", "164", "180", "196", "212", "232", "236")
        MCU_PW8R_CH("152", "168", "184", "200", "216", "240", "244")
        MCU_PW8R_CH("156", "172", "188", "204", "220", "248", "252")
        "add r5, r5, #288\n\t"
        "vmov r12, s7\n\t"
        "cmp r4, r12\n\t"
        "bne 2b\n\t"
        "vmov r12, s1\n\t"
        "subs r12, r12, #1\n\t"
        "beq 9f\n\t"
        "vmov s1, r12\n\t"
        "vmov r12, s3\n\t"
        "add r4, r4, r12\n\t"
        "b 1b\n\t"
        "9:\n\t"
        "vmov r7, s8\n\t"
        : "+r"(s)
        :
        : "r0", "r1", "r2", "r3", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3", "s4",
          "s5", "s6", "s7", "s8", "cc", "memory");
}
#undef MCU_PW8R_CH
#define MCU_PW8_REGS_BUILT 1
/* Whether mcu_pw8_regs stands for the flat pairs' tail (mcu_px2_tail_flat) over `cout` output channels. */
static inline int mcu_pw8_regs_takes(int tail, int32_t cout)
{
    return (tail & (1 | 8 | MCU_PX2_FWD)) == (8 | MCU_PX2_FWD) && cout % 8 == 0;
}
#endif
#endif /* MCU_PACKED_PW8 */
#undef MCU_PX4_TAIL
/* The column buffer of mcu_conv2d_packed_s8: one pixel's window and its state, two windows apart or
 * four. */
#define MCU_PACKED_COL_TAPS2                                                                              \
    (MCU_PIXEL2_B + MCU_PIXEL2_SPLIT_TAPS > MCU_CONV_PACKED_TAPS_MAX + MCU_PIXEL_PACKED_SPARE               \
         ? MCU_PIXEL2_B + MCU_PIXEL2_SPLIT_TAPS                                                           \
         : MCU_CONV_PACKED_TAPS_MAX + MCU_PIXEL_PACKED_SPARE)
#define MCU_PACKED_COL_TAPS                                                                               \
    (3 * MCU_PIXEL4_B + MCU_PIXEL4_TAPS > MCU_PACKED_COL_TAPS2 ? 3 * MCU_PIXEL4_B + MCU_PIXEL4_TAPS        \
                                                               : MCU_PACKED_COL_TAPS2)
#undef MCU_PX4_RQ
#undef MCU_PX4_RQ1
#undef MCU_PX4_UNIT
#undef MCU_PX4_MACS
#undef MCU_PX4_LOADS
#undef MCU_PX2_UNIT_SPLIT
#undef MCU_PX2_LOADS_SPLIT
#undef MCU_PX2_LOADS
#undef MCU_PX2_MACS
#undef MCU_PX2_ASM
#undef MCU_PX2_CLAMP
#undef MCU_PX2_PACK
#undef MCU_PX2_RQ
#undef MCU_PX2_RQ_RELU
#undef MCU_PX2_RQ4
#undef MCU_PX2_RQ4_RELU
#undef MCU_PX2_RQ0
#undef MCU_PX2_RQ0_RELU
#undef MCU_PX2_RQ_DIFF
#undef MCU_PX2_RQ0_DIFF
#undef MCU_PX2_RQ4_DIFF
#undef MCU_PX2_TAILS
#undef MCU_PX2_CHAIN
#undef MCU_PX2_END39
#undef MCU_PX2_DIRECT_GO
#undef MCU_PX2_TAIL_TABLE_DIRECT
#undef MCU_PX2_DIRECT_ENTRY
#undef MCU_PX2_TAIL_ROWS_DIRECT
#undef MCU_PX2_RQ4_SCALED_DIRECT
#undef MCU_PX2_RQ4_SCALED_WITH
#undef MCU_PX2_STORE_BYTES_STEP
#undef MCU_PX2_DIRECT_PICK
#undef MCU_PX2_TAILS_FLAT
#undef MCU_PX2_TAIL_TABLE_FLAT
#undef MCU_PX2_RQ_MM
#undef MCU_PX2_RQ4_SCALED
#undef MCU_PX2_STORE_BYTES
#undef MCU_PX2_STORE_BYTES_FWD
#undef MCU_PX2_STRB8
#undef MCU_PX2_FWD
#undef MCU_PX2_STORE_CLAMP
#undef MCU_PX2_NEXT
#undef MCU_PX2_TAIL_CHOICE
#undef MCU_PX2_TAIL_TABLE
#undef MCU_PX2_PACK_CLAMP
#undef MCU_PX2_UNIT_BYTES
#undef MCU_PX2_UNIT
#undef MCU_PX2_PASS
#undef MCU_PX2_PW_PASS
#undef MCU_PX2_STR
#undef MCU_PX2_STR2

/* Before the first mcu_pixel_packed of a layer (of each kernel call), with the column `col` of kp
 * taps and MCU_PIXEL_PACKED_SPARE more int16: the state after it is not yet the layer's. */
static inline void mcu_pixel_packed_start(int16_t *col, int32_t kp)
{
    col[kp + 18] = 0;
    col[kp + 19] = 0;
}

/* Every whole block of one output pixel (see mcu_pixel_packed_loop and mcu_pixel_packed_wide). */
static inline const int32_t *mcu_pixel_packed(const int16_t *col, int32_t kp, const int32_t *blob, int8_t *y,
                                              int8_t *y_end, const uint32_t *bounds, int clamp)
{
    if (kp <= MCU_PIXEL_WIDE_TAPS) {
        return mcu_pixel_packed_wide(col, kp, blob, y, y_end, bounds, clamp);
    }
#if MCU_PACKED_LOOP
    return mcu_pixel_packed_loop(col, kp, blob, y, y_end, bounds, clamp);
#else
    return blob; /* not reached: mcu_conv2d_packed_s8 refuses the layer (MCU_ERR_UNSUPPORTED) */
#endif
}
#undef MCU_PX_BLOCKS
#undef MCU_PX_WORD_SECTION
#undef MCU_RQ_PACKED
#endif

#endif /* MCU_KERNELS_INTERNAL_GEMM_S8_DSP_H */
