/* Flat pointwise layers of 16 or 32 input channels over a scaled stream (mcu_conv2d_packed_s8's flat pairs, their
 * bytes stored whole, the blocks forward): every pixel pair of a run in one assembly, each block of four output
 * channels straight-line code. Internal: static inline only, included by mcu_conv2d_packed_s8.c after
 * gemm_s8_dsp.h.
 *
 * Why: through mcu_pixel2_packed these layers paid about 13 cycles an output on top of their tap pairs (a call and
 * a C column per pair, the block's entry by BX, its loop's end, the tails' state): mobilenet_v1's 16 -> 32 layer
 * 1.84 cycles per MAC, its 32 -> 32 and 32 -> 64 ones 1.41 and 1.43. Here (the timing model's Cortex-M4 table,
 * which serves the M33) a block of 2 pixels x 4 channels is the biases in the first tap pair's run of eight single
 * loads (20 cycles), 16 cycles for each other tap pair (the two pixels' column words and four weight words in two
 * runs, eight SMLAD), 26 of requantization (the four channels' (m, C) in two runs of four, eight SMMLA, eight SSAT),
 * 12 of byte stores and 6 at the loop's end: 176 cycles for K = 16 (22 an output, 1.38 per MAC), 304 for K = 32
 * (38, 1.19). Each pair's column (K words, the two pixels interleaved by tap pair as mcu_column2_s8 lays them) costs
 * about 3 K cycles, then about 16 for the pair's loop.
 * Registers: y r4, the stream r5, the loads r0-r3, the accumulators r6-r12 and lr (channel c's pixel A in r6 + 2c,
 * pixel B in r7 + 2c; channel 3's in r12 and lr); the column on the stack (K words below the frame, read at
 * immediate offsets from sp: so y needs no VMOV each way a block, 2 cycles); the rest of the state (next input, pairs
 * left, steps, the stream's bounds, the saved r7) in FPU registers s0-s7, s9 and s10 (a VMOV each way is one cycle).
 * The stack analysis (mcu/device/stack.py) counts the assembly's SUB of sp in the function's frame. */
#ifndef MCU_KERNELS_INTERNAL_PW_SMALL_S8_DSP_H
#define MCU_KERNELS_INTERNAL_PW_SMALL_S8_DSP_H

#include <stdint.h>

#include "gemm_s8_dsp.h"

#ifndef MCU_PACKED_PW_SMALL
#define MCU_PACKED_PW_SMALL 1 /* 0: a model's build where no layer takes mcu_pw16_regs / mcu_pw32_regs (specialise.py) */
#endif
#define MCU_PWS_STR2(x) #x
#define MCU_PWS_STR(x) MCU_PWS_STR2(x)

#if MCU_PACKED_PW_SMALL && MCU_PACKED_PW_PAIRS && MCU_PACKED_SCALED && MCU_S8_DSP_NATIVE && defined(__ARM_FP)
#ifndef MCU_PWS_Q16_COUT
/* the output channels whose 16-tap quads store at immediate offsets (specialise.py); 0: any count */
#define MCU_PWS_Q16_COUT 0
#endif
#ifndef MCU_PWS_Q32_COUT
#define MCU_PWS_Q32_COUT 0 /* as MCU_PWS_Q16_COUT, 32 taps */
#endif
#define MCU_PWQ_COUT(K) MCU_PWS_Q##K##_COUT
#ifndef MCU_PWS_QUADS
/* Four pixels by two channels a half block (mcu_pw16_quads, mcu_pw32_quads) for the pairs in twos: each channel's
 * bias, weight words and (m, C) serve four pixels, the requantization's loads a block are 5 cycles fewer, and the
 * stream is read once per four pixels. On the Cortex-M33 (8 kB ICACHE); not on the M4, where the L4R5's 1 kB ART
 * does not hold a pass of two halves (mobilenet_v1 there +368 k cycles). */
#if defined(__ARM_ARCH_8M_MAIN__)
#define MCU_PWS_QUADS 1
#else
#define MCU_PWS_QUADS 0
#endif
#endif

typedef struct {
    const int8_t *x;     /* the first pair's input (pixel A's K bytes, B's after them), word-aligned */
    int32_t pairs;       /* >= 1 */
    int32_t dx;          /* 2 K (forward) or -2 K (backward) */
    int32_t dy;          /* from pixel A's output end to the next pair's pixel A: cout or -3 cout */
    int32_t stride;      /* from pixel A's outputs to B's: the output channels */
    uint32_t off2;       /* the input offset in both halves */
    const int32_t *blocks;
    const int32_t *end;  /* after the last block */
    int8_t *y;           /* the first pair's pixel A outputs */
    int32_t back;        /* MCU_PWS_PASS2 and an odd count: a block's bytes (the pass entered at its second); else 0 */
} mcu_pws_state;

/* Input words j and j + 1 of both pixels (x at r12, pixel B K bytes on; the offset in lr) into four column words
 * each, (A, B) for taps (0, 2) then (1, 3), stored at sp + 16 j onwards (single stores at immediate offsets, a cycle
 * each, where an STM of four took five). */
#define MCU_PWS_COL(K)                                                                                    \
    ".set .Lpws_j, 0\n\t"                                                                               \
    ".rept " #K " / 8\n\t"                                                                                \
    "ldr r0, [r12, #4 * .Lpws_j]\n\t"                                                                   \
    "ldr r1, [r12, #" #K " + 4 * .Lpws_j]\n\t"                                                          \
    "ldr r2, [r12, #4 * .Lpws_j + 4]\n\t"                                                               \
    "ldr r3, [r12, #" #K " + 4 * .Lpws_j + 4]\n\t"                                                      \
    "sxtab16 r6, lr, r0\n\t"                                                                              \
    "sxtab16 r7, lr, r1\n\t"                                                                              \
    "sxtab16 r8, lr, r0, ror #8\n\t"                                                                      \
    "sxtab16 r9, lr, r1, ror #8\n\t"                                                                      \
    "str r6, [sp, #16 * .Lpws_j]\n\t"                                                                   \
    "str r7, [sp, #16 * .Lpws_j + 4]\n\t"                                                               \
    "str r8, [sp, #16 * .Lpws_j + 8]\n\t"                                                               \
    "str r9, [sp, #16 * .Lpws_j + 12]\n\t"                                                              \
    "sxtab16 r6, lr, r2\n\t"                                                                              \
    "sxtab16 r7, lr, r3\n\t"                                                                              \
    "sxtab16 r8, lr, r2, ror #8\n\t"                                                                      \
    "sxtab16 r9, lr, r3, ror #8\n\t"                                                                      \
    "str r6, [sp, #16 * .Lpws_j + 16]\n\t"                                                              \
    "str r7, [sp, #16 * .Lpws_j + 20]\n\t"                                                              \
    "str r8, [sp, #16 * .Lpws_j + 24]\n\t"                                                              \
    "str r9, [sp, #16 * .Lpws_j + 28]\n\t"                                                              \
    ".set .Lpws_j, .Lpws_j + 2\n\t"                                                                   \
    ".endr\n\t"

/* Tap pair 0 with the biases: each channel's bias loaded into pixel A's accumulator, pixel B's SMLAD first (while
 * the register holds the bias alone). */
#define MCU_PWS_TAP0                                                                                      \
    "ldr r0, [sp, #0]\n\t"                                                                                \
    "ldr r1, [sp, #4]\n\t"                                                                                \
    "ldr r2, [r5, #.Lpws_o + 16]\n\t"                                                                               \
    "ldr r3, [r5, #.Lpws_o + 20]\n\t"                                                                               \
    "ldr r6, [r5, #.Lpws_o + 0]\n\t"                                                                                \
    "ldr r8, [r5, #.Lpws_o + 4]\n\t"                                                                                \
    "ldr r10, [r5, #.Lpws_o + 8]\n\t"                                                                               \
    "ldr r12, [r5, #.Lpws_o + 12]\n\t"                                                                              \
    "smlad r7, r1, r2, r6\n\t"                                                                            \
    "smlad r6, r0, r2, r6\n\t"                                                                            \
    "smlad r9, r1, r3, r8\n\t"                                                                            \
    "smlad r8, r0, r3, r8\n\t"                                                                            \
    "ldr r2, [r5, #.Lpws_o + 24]\n\t"                                                                               \
    "ldr r3, [r5, #.Lpws_o + 28]\n\t"                                                                               \
    "smlad r11, r1, r2, r10\n\t"                                                                          \
    "smlad r10, r0, r2, r10\n\t"                                                                          \
    "smlad lr, r1, r3, r12\n\t"                                                                           \
    "smlad r12, r0, r3, r12\n\t"

/* Tap pairs 1 .. K / 2 - 1: the column's (A, B) words at sp + 8 t, the four channels' at r5 + 16 + 16 t. */
#define MCU_PWS_TAPS(K)                                                                                   \
    ".set .Lpws_t, 1\n\t"                                                                               \
    ".rept " #K " / 2 - 1\n\t"                                                                            \
    "ldr r0, [sp, #8 * .Lpws_t]\n\t"                                                                    \
    "ldr r1, [sp, #8 * .Lpws_t + 4]\n\t"                                                                \
    "ldr r2, [r5, #.Lpws_o + 16 + 16 * .Lpws_t]\n\t"                                                              \
    "ldr r3, [r5, #.Lpws_o + 20 + 16 * .Lpws_t]\n\t"                                                              \
    "smlad r6, r0, r2, r6\n\t"                                                                            \
    "smlad r7, r1, r2, r7\n\t"                                                                            \
    "smlad r8, r0, r3, r8\n\t"                                                                            \
    "smlad r9, r1, r3, r9\n\t"                                                                            \
    "ldr r2, [r5, #.Lpws_o + 24 + 16 * .Lpws_t]\n\t"                                                              \
    "ldr r3, [r5, #.Lpws_o + 28 + 16 * .Lpws_t]\n\t"                                                              \
    "smlad r10, r0, r2, r10\n\t"                                                                          \
    "smlad r11, r1, r2, r11\n\t"                                                                          \
    "smlad r12, r0, r3, r12\n\t"                                                                          \
    "smlad lr, r1, r3, lr\n\t"                                                                            \
    ".set .Lpws_t, .Lpws_t + 1\n\t"                                                                   \
    ".endr\n\t"

/* The eight accumulators to bytes: the scaled layout's shift, saturated to int8. */
#define MCU_PWS_SSAT8                                                                                     \
    "ssat r6, #8, r6, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r7, #8, r7, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r8, #8, r8, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r9, #8, r9, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r10, #8, r10, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r11, #8, r11, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r12, #8, r12, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat lr, #8, lr, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"

/* The block's (m, C) per channel after its 2 K weight words (at r5 + 16 + 8 K): SMMLA and SSAT. */
#define MCU_PWS_RQ(K)                                                                                     \
    "ldr r0, [r5, #.Lpws_o + 16 + 8 * " #K "]\n\t"                                                                  \
    "ldr r1, [r5, #.Lpws_o + 20 + 8 * " #K "]\n\t"                                                                  \
    "ldr r2, [r5, #.Lpws_o + 24 + 8 * " #K "]\n\t"                                                                  \
    "ldr r3, [r5, #.Lpws_o + 28 + 8 * " #K "]\n\t"                                                                  \
    "smmla r6, r6, r0, r1\n\t"                                                                            \
    "smmla r7, r7, r0, r1\n\t"                                                                            \
    "smmla r8, r8, r2, r3\n\t"                                                                            \
    "smmla r9, r9, r2, r3\n\t"                                                                            \
    "ldr r0, [r5, #.Lpws_o + 32 + 8 * " #K "]\n\t"                                                                  \
    "ldr r1, [r5, #.Lpws_o + 36 + 8 * " #K "]\n\t"                                                                  \
    "ldr r2, [r5, #.Lpws_o + 40 + 8 * " #K "]\n\t"                                                                  \
    "ldr r3, [r5, #.Lpws_o + 44 + 8 * " #K "]\n\t"                                                                  \
    "smmla r10, r10, r0, r1\n\t"                                                                          \
    "smmla r11, r11, r0, r1\n\t"                                                                          \
    "smmla r12, r12, r2, r3\n\t"                                                                          \
    "smmla lr, lr, r2, r3\n\t"                                                                            \
    MCU_PWS_SSAT8

/* The block's eight bytes, pixel A's at y (r4) by `stores_a` and B's a stride (s4) after y + b. */
#define MCU_PWS_STORE(stores_a, b)                                                                        \
    "vmov r1, s4\n\t"                                                                                     \
    "add r1, r1, r4\n\t" stores_a                                                                         \
    "strb r7, [r1, #" b "]\n\t"                                                                           \
    "strb r9, [r1, #" b " + 1]\n\t"                                                                       \
    "strb r11, [r1, #" b " + 2]\n\t"                                                                      \
    "strb lr, [r1, #" b " + 3]\n\t"
/* Pixel A's four bytes at y, y then on by 4 (a pass's last block). */
#define MCU_PWS_A_NEXT                                                                                    \
    "strb r8, [r4, #1]\n\t"                                                                               \
    "strb r10, [r4, #2]\n\t"                                                                              \
    "strb r12, [r4, #3]\n\t"                                                                              \
    "strb r6, [r4], #4\n\t"

/* The pass's end: the stream on by `ds`, the next pass unless the stream's end (s7). */
#define MCU_PWS_NEXT(ds)                                                                                  \
    "add r5, r5, #" ds "\n\t"                                                                             \
    "vmov r0, s7\n\t"                                                                                     \
    "cmp r5, r0\n\t"                                                                                      \
    "bne 2b\n\t"

/* A block at the stream's offset o, its bytes stored as MCU_PWS_STORE's. */
#define MCU_PWS_BLOCK(K, o, stores_a, b)                                                                  \
    ".set .Lpws_o, " o "\n\t" MCU_PWS_TAP0 MCU_PWS_TAPS(K) MCU_PWS_RQ(K) MCU_PWS_STORE(stores_a, b)

/* Blocks a pass: MCU_PWS_PASS1 one, MCU_PWS_PASS2 two (the pass's end once per 8 outputs: 3 cycles a block less), an
 * odd count entering at the second (MCU_PWS_ODD; r0 the stream's step back, s9). Two for 16 taps on the Cortex-M33
 * (1.5 kB of code in its 8 kB ICACHE); for 32 taps the 2.6 kB of code and mobilenet_v1's 32 -> 64 layer's 4.9 kB
 * stream took 19 k cycles of misses there for 7 k saved in its 32 -> 32 layer. One on the M4 (the L4R5's ART holds
 * 1 kB). */
#define MCU_PWS_PASS1(K) "2:\n\t" MCU_PWS_BLOCK(K, "0", MCU_PWS_A_NEXT, "0") MCU_PWS_NEXT("80 + 8 * " #K)
#if defined(__ARM_ARCH_8M_MAIN__)
/* Pixel A's four bytes at y + a, y left. */
#define MCU_PWS_A_AT(a)                                                                                   \
    "strb r6, [r4, #" a "]\n\t"                                                                            \
    "strb r8, [r4, #" a " + 1]\n\t"                                                                        \
    "strb r10, [r4, #" a " + 2]\n\t"                                                                       \
    "strb r12, [r4, #" a " + 3]\n\t"
#define MCU_PWS_PASS2(K)                                                                                  \
    "vmov r0, s9\n\t"                                                                                     \
    "cmp r0, #0\n\t"                                                                                      \
    "bne 4f\n\t"                                                                                          \
    "2:\n\t" MCU_PWS_BLOCK(K, "0", MCU_PWS_A_AT("0"), "0")                                                 \
    "3:\n\t" MCU_PWS_BLOCK(K, "80 + 8 * " #K, MCU_PWS_A_AT("4"), "4")                                       \
    "add r4, r4, #8\n\t" MCU_PWS_NEXT("160 + 16 * " #K)
#define MCU_PWS_ODD                                                                                       \
    "4:\n\t"                                                                                              \
    "sub r5, r5, r0\n\t"                                                                                  \
    "sub r4, r4, #4\n\t"                                                                                  \
    "b 3b\n\t"
#define MCU_PWS_TWO 1
#else
#define MCU_PWS_PASS2 MCU_PWS_PASS1
#define MCU_PWS_ODD ""
#define MCU_PWS_TWO 0
#endif

/* Quads (MCU_PWS_QUADS): four pixels by two channels a half block. Input words j of the four pixels (x at r12, each
 * pixel K bytes on; the offset in lr) into the column words (A, B, C, D) of tap pairs 2 j and 2 j + 1 at sp + 32 j. */
#define MCU_PWQ_COL(K)                                                                                    \
    ".set .Lpwq_j, 0\n\t"                                                                               \
    ".rept " #K " / 4\n\t"                                                                                \
    "ldr r0, [r12, #4 * .Lpwq_j]\n\t"                                                                   \
    "ldr r1, [r12, #" #K " + 4 * .Lpwq_j]\n\t"                                                          \
    "ldr r2, [r12, #2 * " #K " + 4 * .Lpwq_j]\n\t"                                                      \
    "ldr r3, [r12, #3 * " #K " + 4 * .Lpwq_j]\n\t"                                                      \
    "sxtab16 r6, lr, r0\n\t"                                                                              \
    "sxtab16 r7, lr, r1\n\t"                                                                              \
    "sxtab16 r8, lr, r2\n\t"                                                                              \
    "sxtab16 r9, lr, r3\n\t"                                                                              \
    "str r6, [sp, #32 * .Lpwq_j]\n\t"                                                                   \
    "str r7, [sp, #32 * .Lpwq_j + 4]\n\t"                                                               \
    "str r8, [sp, #32 * .Lpwq_j + 8]\n\t"                                                               \
    "str r9, [sp, #32 * .Lpwq_j + 12]\n\t"                                                              \
    "sxtab16 r6, lr, r0, ror #8\n\t"                                                                      \
    "sxtab16 r7, lr, r1, ror #8\n\t"                                                                      \
    "sxtab16 r8, lr, r2, ror #8\n\t"                                                                      \
    "sxtab16 r9, lr, r3, ror #8\n\t"                                                                      \
    "str r6, [sp, #32 * .Lpwq_j + 16]\n\t"                                                              \
    "str r7, [sp, #32 * .Lpwq_j + 20]\n\t"                                                              \
    "str r8, [sp, #32 * .Lpwq_j + 24]\n\t"                                                              \
    "str r9, [sp, #32 * .Lpwq_j + 28]\n\t"                                                              \
    ".set .Lpwq_j, .Lpwq_j + 1\n\t"                                                                   \
    ".endr\n\t"

/* A half block (channels .Lpwq_c and .Lpwq_c + 1 of the block at the stream's offset .Lpws_o) for four pixels:
 * channel 0's pixels A-D in r6-r9, channel 1's in r10-r12 and lr. Tap pair 0 with the biases (C and D's SMLAD
 * first, then B's, A's last, while the registers hold the biases alone); each other tap pair is the four pixels'
 * column words and the two channels' weight words in two runs, eight SMLAD, as a pair's block; the requantization
 * loads two channels' (m, C) in one run of four where a pair's block loads four in two (5 cycles a block less). */
#define MCU_PWQ_HALF(K)                                                                                   \
    "ldr r2, [r5, #.Lpws_o + 16 + 4 * .Lpwq_c]\n\t"                                                      \
    "ldr r3, [r5, #.Lpws_o + 20 + 4 * .Lpwq_c]\n\t"                                                      \
    "ldr r6, [r5, #.Lpws_o + 4 * .Lpwq_c]\n\t"                                                           \
    "ldr r10, [r5, #.Lpws_o + 4 + 4 * .Lpwq_c]\n\t"                                                      \
    "ldr r0, [sp, #8]\n\t"                                                                               \
    "ldr r1, [sp, #12]\n\t"                                                                              \
    "smlad r8, r0, r2, r6\n\t"                                                                            \
    "smlad r12, r0, r3, r10\n\t"                                                                          \
    "smlad r9, r1, r2, r6\n\t"                                                                            \
    "smlad lr, r1, r3, r10\n\t"                                                                           \
    "ldr r0, [sp, #0]\n\t"                                                                               \
    "ldr r1, [sp, #4]\n\t"                                                                               \
    "smlad r7, r1, r2, r6\n\t"                                                                            \
    "smlad r11, r1, r3, r10\n\t"                                                                          \
    "smlad r6, r0, r2, r6\n\t"                                                                            \
    "smlad r10, r0, r3, r10\n\t"                                                                          \
    ".set .Lpwq_t, 1\n\t"                                                                               \
    ".rept " #K " / 2 - 1\n\t"                                                                            \
    "ldr r0, [sp, #16 * .Lpwq_t]\n\t"                                                                   \
    "ldr r1, [sp, #16 * .Lpwq_t + 4]\n\t"                                                               \
    "ldr r2, [r5, #.Lpws_o + 16 + 16 * .Lpwq_t + 4 * .Lpwq_c]\n\t"                                       \
    "ldr r3, [r5, #.Lpws_o + 20 + 16 * .Lpwq_t + 4 * .Lpwq_c]\n\t"                                       \
    "smlad r6, r0, r2, r6\n\t"                                                                            \
    "smlad r10, r0, r3, r10\n\t"                                                                          \
    "smlad r7, r1, r2, r7\n\t"                                                                            \
    "smlad r11, r1, r3, r11\n\t"                                                                          \
    "ldr r0, [sp, #16 * .Lpwq_t + 8]\n\t"                                                               \
    "ldr r1, [sp, #16 * .Lpwq_t + 12]\n\t"                                                              \
    "smlad r8, r0, r2, r8\n\t"                                                                            \
    "smlad r12, r0, r3, r12\n\t"                                                                          \
    "smlad r9, r1, r2, r9\n\t"                                                                            \
    "smlad lr, r1, r3, lr\n\t"                                                                            \
    ".set .Lpwq_t, .Lpwq_t + 1\n\t"                                                                   \
    ".endr\n\t"                                                                                          \
    "ldr r0, [r5, #.Lpws_o + 16 + 8 * " #K " + 8 * .Lpwq_c]\n\t"                                          \
    "ldr r1, [r5, #.Lpws_o + 20 + 8 * " #K " + 8 * .Lpwq_c]\n\t"                                          \
    "ldr r2, [r5, #.Lpws_o + 24 + 8 * " #K " + 8 * .Lpwq_c]\n\t"                                          \
    "ldr r3, [r5, #.Lpws_o + 28 + 8 * " #K " + 8 * .Lpwq_c]\n\t"                                          \
    "smmla r6, r6, r0, r1\n\t"                                                                            \
    "smmla r7, r7, r0, r1\n\t"                                                                            \
    "smmla r8, r8, r0, r1\n\t"                                                                            \
    "smmla r9, r9, r0, r1\n\t"                                                                            \
    "smmla r10, r10, r2, r3\n\t"                                                                          \
    "smmla r11, r11, r2, r3\n\t"                                                                          \
    "smmla r12, r12, r2, r3\n\t"                                                                          \
    "smmla lr, lr, r2, r3\n\t"                                                                            \
    MCU_PWS_SSAT8                                                                                          \
    ".if .Lpwq_s\n\t"                                                                                     \
    "strb r7, [r4, #.Lpwq_s + .Lpwq_a]\n\t"                                                              \
    "strb r11, [r4, #.Lpwq_s + .Lpwq_a + 1]\n\t"                                                         \
    "strb r8, [r4, #2 * .Lpwq_s + .Lpwq_a]\n\t"                                                          \
    "strb r12, [r4, #2 * .Lpwq_s + .Lpwq_a + 1]\n\t"                                                     \
    "strb r9, [r4, #3 * .Lpwq_s + .Lpwq_a]\n\t"                                                          \
    "strb lr, [r4, #3 * .Lpwq_s + .Lpwq_a + 1]\n\t"                                                      \
    ".else\n\t"                                                                                           \
    "vmov r0, s4\n\t"                                                                                     \
    "add r1, r4, r0\n\t"                                                                                  \
    "add r2, r1, r0\n\t"                                                                                  \
    "add r3, r2, r0\n\t"                                                                                  \
    "strb r7, [r1, #.Lpwq_a]\n\t"                                                                        \
    "strb r11, [r1, #.Lpwq_a + 1]\n\t"                                                                   \
    "strb r8, [r2, #.Lpwq_a]\n\t"                                                                        \
    "strb r12, [r2, #.Lpwq_a + 1]\n\t"                                                                   \
    "strb r9, [r3, #.Lpwq_a]\n\t"                                                                        \
    "strb lr, [r3, #.Lpwq_a + 1]\n\t"                                                                    \
    ".endif\n\t"                                                                                          \
    "strb r10, [r4, #.Lpwq_a + 1]\n\t"

/* A pass: one block of four channels as two halves, y on by 4 at the first half's last store (the second's bytes
 * then 2 back from y), the stream on by a block. Pixels B-D's bytes at immediate offsets from y where the output
 * channels are known (the gas symbol .Lpwq_s, MCU_PWS_Q16_COUT / MCU_PWS_Q32_COUT: 4 cycles a half block less),
 * else from three addresses a stride (s4) apart. */
#define MCU_PWQ_PASS(K)                                                                                   \
    ".set .Lpwq_s, " MCU_PWS_STR(MCU_PWQ_COUT(K)) "\n\t"                                                  \
    "2:\n\t"                                                                                              \
    ".set .Lpws_o, 0\n\t"                                                                               \
    ".set .Lpwq_c, 0\n\t"                                                                               \
    ".set .Lpwq_a, 0\n\t" MCU_PWQ_HALF(K) "strb r6, [r4], #4\n\t"                                       \
    ".set .Lpwq_c, 2\n\t"                                                                               \
    ".set .Lpwq_a, -2\n\t" MCU_PWQ_HALF(K) "strb r6, [r4, #-2]\n\t" MCU_PWS_NEXT("80 + 8 * " #K)

/* Every pair (quad) of the run: its column (W words), then every block; y then stands at pixel A's output end. */
#define MCU_PWS_BODY(K, W, COL, PASS, ODD)                                                                \
    "vmov s10, r7\n\t"                                                                                    \
    "ldm r4, {r0, r1, r2, r3, r5, r6, r8, r9, r10, r12}\n\t"                                              \
    "vmov s0, r0\n\t"                                                                                     \
    "vmov s1, r1\n\t"                                                                                     \
    "vmov s2, r2\n\t"                                                                                     \
    "vmov s3, r3\n\t"                                                                                     \
    "vmov s4, r5\n\t"                                                                                     \
    "vmov s5, r6\n\t"                                                                                     \
    "vmov s6, r8\n\t"                                                                                     \
    "vmov s7, r9\n\t"                                                                                     \
    "vmov s9, r12\n\t"                                                                                    \
    "mov r4, r10\n\t"                                                                                     \
    "sub sp, sp, #4 * " #W "\n\t" /* the column, below the frame */                                      \
    "1:\n\t"                                                                                              \
    "vmov r12, s0\n\t"                                                                                    \
    "vmov lr, s2\n\t"                                                                                     \
    "add lr, r12, lr\n\t"                                                                                 \
    "vmov s0, lr\n\t"                                                                                     \
    "vmov lr, s5\n\t"                                                                                     \
    COL(K)                                                                                                \
    "vmov r5, s6\n\t"                                                                                     \
    PASS(K)                                                                                               \
    "vmov r12, s1\n\t"                                                                                    \
    "subs r12, r12, #1\n\t"                                                                               \
    "beq 9f\n\t"                                                                                          \
    "vmov s1, r12\n\t"                                                                                    \
    "vmov lr, s3\n\t"                                                                                     \
    "add r4, r4, lr\n\t"                                                                                  \
    "b 1b\n\t"                                                                                            \
    ODD                                                                                                   \
    "9:\n\t"                                                                                              \
    "add sp, sp, #4 * " #W "\n\t"                                                                          \
    "vmov r7, s10\n\t"

#define MCU_PWS_CLOBBERS                                                                                  \
    "r0", "r1", "r2", "r3", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3", "s4", "s5", \
        "s6", "s7", "s9", "s10", "cc", "memory"

static __attribute__((noinline)) void mcu_pw16_regs(const mcu_pws_state *st)
{
    register const mcu_pws_state *s __asm__("r4") = st;
    __asm__ volatile(MCU_PWS_BODY(16, 16, MCU_PWS_COL, MCU_PWS_PASS2, MCU_PWS_ODD) : "+r"(s) : : MCU_PWS_CLOBBERS);
}

static __attribute__((noinline)) void mcu_pw32_regs(const mcu_pws_state *st)
{
    register const mcu_pws_state *s __asm__("r4") = st;
    __asm__ volatile(MCU_PWS_BODY(32, 32, MCU_PWS_COL, MCU_PWS_PASS1, "") : "+r"(s) : : MCU_PWS_CLOBBERS);
}

#if MCU_PWS_QUADS
static __attribute__((noinline)) void mcu_pw16_quads(const mcu_pws_state *st)
{
    register const mcu_pws_state *s __asm__("r4") = st;
    __asm__ volatile(MCU_PWS_BODY(16, 32, MCU_PWQ_COL, MCU_PWQ_PASS, "") : "+r"(s) : : MCU_PWS_CLOBBERS);
}

static __attribute__((noinline)) void mcu_pw32_quads(const mcu_pws_state *st)
{
    register const mcu_pws_state *s __asm__("r4") = st;
    __asm__ volatile(MCU_PWS_BODY(32, 64, MCU_PWQ_COL, MCU_PWQ_PASS, "") : "+r"(s) : : MCU_PWS_CLOBBERS);
}
#endif

#undef MCU_PWQ_PASS
#undef MCU_PWQ_HALF
#undef MCU_PWQ_COL
#undef MCU_PWS_BODY
#undef MCU_PWS_PASS1
#undef MCU_PWS_PASS2
#undef MCU_PWS_ODD
#undef MCU_PWS_BLOCK
#undef MCU_PWS_NEXT
#undef MCU_PWS_STORE
#undef MCU_PWS_A_NEXT
#undef MCU_PWS_A_AT
#undef MCU_PWS_RQ
#undef MCU_PWS_SSAT8
#undef MCU_PWS_TAPS
#undef MCU_PWS_TAP0
#undef MCU_PWS_COL
#undef MCU_PWS_CLOBBERS
#define MCU_PW_SMALL_BUILT 1

/* Whether mcu_pw16_regs / mcu_pw32_regs stand for the flat pairs of a layer of kp taps whose pair tail is `tail`
 * (layer_t's px2): a scaled stream (8) whose bytes are stored whole (no clamp, 1: the range all of int8). */
static inline int mcu_pw_small_takes(int tail, int32_t kp)
{
    return (tail & (1 | 8)) == 8 && (kp == 16 || kp == 32);
}

/* `pairs` (>= 1) pixel pairs from x and y (pixel A's), the next ones 2 pixels on (step 1) or back (step -1). */
static inline void mcu_pw_small_run(const int8_t *x, int8_t *y, int32_t pairs, int step, int32_t kp, int32_t cout,
                                    int32_t input_offset, const int32_t *blocks)
{
#if MCU_PWS_QUADS
    const int32_t known = kp == 16 ? MCU_PWS_Q16_COUT : MCU_PWS_Q32_COUT;
    if (pairs >= 2 && (known == 0 || known == cout)) { /* pairs of pairs as quads from the run's first, a pair left */
        const int32_t quads = pairs / 2;
        const int32_t back = step > 0 ? 0 : 1; /* backward, a quad's lowest pixel is its second pair's */
        const mcu_pws_state q = {x - back * 2 * kp,
                                 quads,
                                 4 * kp * step,
                                 step > 0 ? 3 * cout : -5 * cout,
                                 cout,
                                 ((uint32_t)input_offset & 0xFFFFu) * 0x10001u,
                                 blocks,
                                 blocks + (cout / 4) * mcu_packed_block_words(kp),
                                 y - back * 2 * cout,
                                 0};
        if (kp == 16) {
            mcu_pw16_quads(&q);
        } else {
            mcu_pw32_quads(&q);
        }
        if (pairs % 2 == 0) {
            return;
        }
        x += 4 * kp * step * quads;
        y += 4 * cout * step * quads;
        pairs = 1;
    }
#endif
    const mcu_pws_state s = {x,
                             pairs,
                             2 * kp * step,
                             step > 0 ? cout : -3 * cout,
                             cout,
                             ((uint32_t)input_offset & 0xFFFFu) * 0x10001u,
                             blocks,
                             blocks + (cout / 4) * mcu_packed_block_words(kp),
                             y,
                             MCU_PWS_TWO && kp == 16 && (cout / 4) % 2 ? 4 * mcu_packed_block_words(kp) : 0};
    if (kp == 16) {
        mcu_pw16_regs(&s);
    } else {
        mcu_pw32_regs(&s);
    }
}
#endif
#ifndef MCU_PACKED_PW8_16
#define MCU_PACKED_PW8_16 1 /* 0: a model's build where no layer takes mcu_pw8_16_regs (specialise.py) */
#endif
#if MCU_PACKED_PW8_16 && MCU_PACKED_PW8 && MCU_PACKED_PW_PAIRS && MCU_PACKED_SCALED && MCU_S8_DSP_NATIVE &&         \
    defined(__ARM_FP)
/* Flat pointwise layers of 8 input channels and 16 output channels (mobilenet_v1's 8 -> 16 layer at 48 x 48) over a
 * scaled stream stored whole, blocks forward: mcu_pw8_regs with all 16 channels straight-line. With the output
 * channels known, both pixels' bytes are stored at immediate offsets from pixel A's outputs (STRB 1 cycle each,
 * where the register offset to pixel B cost 2 and a VMOV of the stride 1 more) and the blocks need no loop (its end's
 * compare and branch, 6 cycles a block): each channel of a pair is its bias and first two weight words in one run of
 * three loads, eight SMLAD between the other two weight words and its (m, C), two SMMLA, two SSAT and two STRB, 24
 * cycles where mcu_pw8_regs took 26 plus the loop's share. Registers as mcu_pw8_regs': the column r0-r3 (pixel A)
 * and r8-r11 (B), y r4, the stream r5 (fixed for the layer), the accumulators r6 and r7, the loads r12 and lr; the
 * input, its step, y's step, the offset and y's end in s0-s4. */
typedef struct {
    const int8_t *x;      /* the first pair's input (pixel A's 8 bytes, B's after them), word-aligned */
    int32_t dx;           /* 16 (forward) or -16 (backward) */
    int32_t dy;           /* from pixel A's outputs as the passes leave y to the next pair's */
    uint32_t off2;        /* the input offset in both halves */
    const int32_t *blocks;
    int8_t *y;            /* the first pair's pixel A outputs */
    int8_t *y_end;        /* y after the last pair's step */
} mcu_pw8_16_state;

/* Output channels a pass: all 16 on the Cortex-M33 (its 8 kB ICACHE holds the 1.4 kB of code), 8 on the M4 (the
 * L4R5's ART holds 1 kB: the whole straight-line body took 812 k cycles of mobilenet_v1's layer there where
 * mcu_pw8_regs took 621 k). */
#if defined(__ARM_ARCH_8M_MAIN__)
#define MCU_PW8_16_PASS 16
#else
#define MCU_PW8_16_PASS 8
#endif
#define MCU_PW8_16_STR2(x) #x
#define MCU_PW8_16_STR(x) MCU_PW8_16_STR2(x)

/* Output channel .Lp8_c of a pass: block c / 4 (36 words: 4 biases, 16 weight words by tap pair, (m, C) per channel);
 * its bias and weights into both pixels' sums... */
#define MCU_PW8_16_DOT                                                                                     \
    ".set .Lp8_o, (.Lp8_c / 4) * 144 + (.Lp8_c %% 4) * 4\n\t"                                             \
    "ldr r6, [r5, #.Lp8_o]\n\t"                                                                           \
    "ldr r12, [r5, #.Lp8_o + 16]\n\t"                                                                     \
    "ldr lr, [r5, #.Lp8_o + 32]\n\t"                                                                      \
    "smlad r7, r8, r12, r6\n\t"                                                                           \
    "smlad r6, r0, r12, r6\n\t"                                                                           \
    "smlad r7, r9, lr, r7\n\t"                                                                            \
    "smlad r6, r1, lr, r6\n\t"                                                                            \
    "ldr r12, [r5, #.Lp8_o + 48]\n\t"                                                                     \
    "ldr lr, [r5, #.Lp8_o + 64]\n\t"                                                                      \
    "smlad r7, r10, r12, r7\n\t"                                                                          \
    "smlad r6, r2, r12, r6\n\t"                                                                           \
    "smlad r7, r11, lr, r7\n\t"                                                                           \
    "smlad r6, r3, lr, r6\n\t"
/* ... its (m, C) in r12 and lr to its two bytes. */
#define MCU_PW8_16_OUT                                                                                     \
    "smmla r6, r6, r12, lr\n\t"                                                                           \
    "smmla r7, r7, r12, lr\n\t"                                                                           \
    "ssat r6, #8, r6, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "ssat r7, #8, r7, asr #" MCU_PWS_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"                                  \
    "strb r6, [r4, #.Lp8_c]\n\t"                                                                          \
    "strb r7, [r4, #16 + .Lp8_c]\n\t"
/* The channel with its (m, C) from the stream. */
#define MCU_PW8_16_CH                                                                                      \
    MCU_PW8_16_DOT                                                                                         \
    "ldr r12, [r5, #.Lp8_o + 80 + (.Lp8_c %% 4) * 4]\n\t"                                                 \
    "ldr lr, [r5, #.Lp8_o + 84 + (.Lp8_c %% 4) * 4]\n\t" MCU_PW8_16_OUT

/* The pair's input words (A's in r6, r7; B's in r11, r12) widened with the offset (lr) into the column: pixel A's
 * r0-r3, B's r8-r11, taps (0,2), (1,3), (4,6), (5,7) as the weight words. */
#define MCU_PW8_16_WIDEN                                                                                   \
    "sxtab16 r0, lr, r6\n\t"                                                                               \
    "sxtab16 r1, lr, r6, ror #8\n\t"                                                                       \
    "sxtab16 r2, lr, r7\n\t"                                                                               \
    "sxtab16 r3, lr, r7, ror #8\n\t"                                                                       \
    "sxtab16 r8, lr, r11\n\t"                                                                              \
    "sxtab16 r9, lr, r11, ror #8\n\t"                                                                      \
    "sxtab16 r10, lr, r12\n\t"                                                                             \
    "sxtab16 r11, lr, r12, ror #8\n\t"

#if MCU_PW8_16_PASS == 16
/* On the Cortex-M33 the 16 channels' (m, C) wait in s0-s31 for the call (four VLDM), two VMOV a channel of a pair
 * where a third run of two loads took 3 cycles: 16 cycles a pair less for 2 more at the loop's ends (the call's state
 * on the stack, 24 bytes below the frame, instead of in s0-s5). */
#define MCU_PW8_16_CH_S(c, m, k)                                                                           \
    ".set .Lp8_c, " #c "\n\t" MCU_PW8_16_DOT "vmov r12, s" #m "\n\t"                                     \
    "vmov lr, s" #k "\n\t" MCU_PW8_16_OUT

static __attribute__((noinline)) void mcu_pw8_16_regs(const mcu_pw8_16_state *st)
{
    register const mcu_pw8_16_state *s __asm__("r4") = st;
    __asm__ volatile(
        "ldm r4, {r0, r1, r2, r3, r5, r6, r8}\n\t"
        "sub sp, sp, #24\n\t" /* x, dx, dy, the offset, y's end, the saved r7 */
        "str r0, [sp]\n\t"
        "str r1, [sp, #4]\n\t"
        "str r2, [sp, #8]\n\t"
        "str r3, [sp, #12]\n\t"
        "str r8, [sp, #16]\n\t"
        "str r7, [sp, #20]\n\t"
        "mov r4, r6\n\t"
        "add r0, r5, #80\n\t"
        "vldm r0, {s0-s7}\n\t"
        "add r0, r5, #224\n\t"
        "vldm r0, {s8-s15}\n\t"
        "add r0, r5, #368\n\t"
        "vldm r0, {s16-s23}\n\t"
        "add r0, r5, #512\n\t"
        "vldm r0, {s24-s31}\n\t"
        "1:\n\t" /* the pair's column, its offset added: taps (0,2), (1,3), (4,6), (5,7) as the weight words */
        "ldr r12, [sp]\n\t"
        "ldr lr, [sp, #4]\n\t"
        "add lr, r12, lr\n\t"
        "str lr, [sp]\n\t"
        "ldr r6, [r12]\n\t"
        "ldr r7, [r12, #4]\n\t"
        "ldr r11, [r12, #8]\n\t"
        "ldr lr, [sp, #12]\n\t"
        "ldr r12, [r12, #12]\n\t"
        MCU_PW8_16_WIDEN
        MCU_PW8_16_CH_S(0, 0, 1) MCU_PW8_16_CH_S(1, 2, 3) MCU_PW8_16_CH_S(2, 4, 5) MCU_PW8_16_CH_S(3, 6, 7)
        MCU_PW8_16_CH_S(4, 8, 9) MCU_PW8_16_CH_S(5, 10, 11) MCU_PW8_16_CH_S(6, 12, 13) MCU_PW8_16_CH_S(7, 14, 15)
        MCU_PW8_16_CH_S(8, 16, 17) MCU_PW8_16_CH_S(9, 18, 19) MCU_PW8_16_CH_S(10, 20, 21)
        MCU_PW8_16_CH_S(11, 22, 23) MCU_PW8_16_CH_S(12, 24, 25) MCU_PW8_16_CH_S(13, 26, 27)
        MCU_PW8_16_CH_S(14, 28, 29) MCU_PW8_16_CH_S(15, 30, 31)
        "ldr r12, [sp, #8]\n\t"
        "ldr lr, [sp, #16]\n\t"
        "add r4, r4, r12\n\t"
        "cmp r4, lr\n\t"
        "bne 1b\n\t"
        "ldr r7, [sp, #20]\n\t"
        "add sp, sp, #24\n\t"
        : "+r"(s)
        :
        : "r0", "r1", "r2", "r3", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3", "s4",
          "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20",
          "s21", "s22", "s23", "s24", "s25", "s26", "s27", "s28", "s29", "s30", "s31", "cc", "memory");
}
#undef MCU_PW8_16_CH_S
#else
static __attribute__((noinline)) void mcu_pw8_16_regs(const mcu_pw8_16_state *st)
{
    register const mcu_pw8_16_state *s __asm__("r4") = st;
    __asm__ volatile(
        "vmov s5, r7\n\t"
        "ldm r4, {r0, r1, r2, r3, r5, r6, r8}\n\t"
        "vmov s0, r0\n\t"
        "vmov s1, r1\n\t"
        "vmov s2, r2\n\t"
        "vmov s3, r3\n\t"
        "vmov s4, r8\n\t"
        "mov r4, r6\n\t"
#if MCU_PW8_16_PASS < 16
        "vmov s7, r5\n\t"
        "add r6, r5, #576\n\t"
        "vmov s6, r6\n\t"
#endif
        "1:\n\t" /* the pair's column, its offset added: taps (0,2), (1,3), (4,6), (5,7) as the weight words */
        "vmov r12, s0\n\t"
        "vmov lr, s1\n\t"
        "add lr, r12, lr\n\t"
        "vmov s0, lr\n\t"
        "ldr r6, [r12]\n\t"
        "ldr r7, [r12, #4]\n\t"
        "ldr r11, [r12, #8]\n\t"
        "ldr r12, [r12, #12]\n\t"
        "vmov lr, s3\n\t"
        MCU_PW8_16_WIDEN
        "2:\n\t"
        ".set .Lp8_c, 0\n\t"
        ".rept " MCU_PW8_16_STR(MCU_PW8_16_PASS) "\n\t" MCU_PW8_16_CH ".set .Lp8_c, .Lp8_c + 1\n\t"
        ".endr\n\t"
#if MCU_PW8_16_PASS < 16 /* the next pass, y and the stream on; the stream back after the last */
        "add r4, r4, #" MCU_PW8_16_STR(MCU_PW8_16_PASS) "\n\t"
        "add r5, r5, #36 * " MCU_PW8_16_STR(MCU_PW8_16_PASS) "\n\t"
        "vmov r12, s6\n\t"
        "cmp r5, r12\n\t"
        "bne 2b\n\t"
        "vmov r5, s7\n\t"
#endif
        "vmov r12, s2\n\t"
        "add r4, r4, r12\n\t"
        "vmov r12, s4\n\t"
        "cmp r4, r12\n\t"
        "bne 1b\n\t"
        "vmov r7, s5\n\t"
        : "+r"(s)
        :
        : "r0", "r1", "r2", "r3", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3", "s4",
          "s5", "s6", "s7", "cc", "memory");
}
#endif
#undef MCU_PW8_16_CH
#undef MCU_PW8_16_DOT
#undef MCU_PW8_16_OUT
#undef MCU_PW8_16_WIDEN
#undef MCU_PW8_16_STR
#undef MCU_PW8_16_STR2
#define MCU_PW8_16_BUILT 1

/* Whether mcu_pw8_16_regs stands for the flat pairs' tail (mcu_px2_tail_flat) of a layer of 8 taps and `cout` output
 * channels (as mcu_pw8_regs_takes, 16 channels; 16 is gemm_s8_dsp.h's MCU_PX2_FWD, the blocks forward, which that
 * header undefines at its end). */
static inline int mcu_pw8_16_takes(int tail, int32_t cout)
{
    return (tail & (1 | 8 | 16)) == (8 | 16) && cout == 16;
}

/* `pairs` (>= 1) pixel pairs from x and y (pixel A's), the next ones 2 pixels on (step 1) or back (step -1). */
static inline void mcu_pw8_16_run(const int8_t *x, int8_t *y, int32_t pairs, int step, int32_t input_offset,
                                  const int32_t *blocks)
{
    const mcu_pw8_16_state s = {x,
                                16 * step,
                                32 * step - (MCU_PW8_16_PASS < 16 ? 16 : 0), /* the passes moved y on by 16 */
                                ((uint32_t)input_offset & 0xFFFFu) * 0x10001u,
                                blocks,
                                y,
                                y + 32 * step * pairs};
    mcu_pw8_16_regs(&s);
}
#endif
#undef MCU_PWS_STR
#undef MCU_PWS_STR2
#endif /* MCU_KERNELS_INTERNAL_PW_SMALL_S8_DSP_H */
