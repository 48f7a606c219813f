/* Flat pointwise layers of small images over a scaled stream (mcu_conv2d_packed_s8's flat pairs, their bytes stored
 * whole): three output pixels by two output channels a register block, the whole layer in one assembly. Internal:
 * static inline only, included by mcu_conv2d_packed_s8.c after gemm_s8_dsp.h.
 *
 * Why: the pairs (2 pixels x 4 channels) leave an odd pixel count's last pixel to the one-pixel path (block_c, 1.4
 * cycles a MAC and its requantization in C: mobilenet_v1's 3 x 3 layers, nine pixels, about a ninth of their MACs)
 * and, where the weights wait behind a flash cache, make a call per part of the stream. Here a tap pair of three
 * pixels and two channels is one run of five single loads (the three pixels' column words, the two channels' weight
 * words: 6 cycles) and six SMLAD, 12 cycles per 12 MACs, the pairs' rate, with 13 registers: the accumulators r0-r5
 * (channel 0 of the half block in r0-r2 for pixels A, B, C, channel 1 in r3-r5), the loads r6-r10, the column r11,
 * the stream r12 and the column's end lr. Every pixel's column is built first (all inputs read before any output is
 * written, so any overlap of input and output is safe, in place either way); then for each half block (two channels)
 * every triple of pixels in turn: a block's lines (8 kp bytes, its halves' words interleaved by tap pair) come from
 * flash once and from the cache for the other triples and the other half, so the stream is read once a layer, in one
 * call. The state lives in FPU registers s0-s13 (a VMOV
 * each way is one cycle; a push would be stack the planned figures cannot see). */
#ifndef MCU_KERNELS_INTERNAL_PW3_S8_DSP_H
#define MCU_KERNELS_INTERNAL_PW3_S8_DSP_H

#include <stdint.h>

#include "gemm_s8_dsp.h"

/* The int16 of the kernel's column buffer this build's triples need at least (specialise.py: the widest such layer's
 * pixels x taps); 0: no layer takes them, no code for them. Unset (an unspecialised build): the code is built and
 * takes the layers whose columns fit the buffer the other paths size. */
#ifndef MCU_PACKED_PW3_TAPS
#define MCU_PW3_TAPS 0
#define MCU_PW3_WANTED 1
#else
#define MCU_PW3_TAPS MCU_PACKED_PW3_TAPS
#define MCU_PW3_WANTED (MCU_PACKED_PW3_TAPS > 0)
#endif
/* The images the triples take: a few pixels, where a pair's per-call costs and a last lone pixel weigh the most;
 * larger ones keep the pairs and their groups (the buffer would hold too few of their columns). */
#define MCU_PW3_PIXELS_MAX 9
/* Tap pairs a pass of the loop, which ends with two ADD, a compare and a taken branch (6 cycles): 64 on Armv8-M Mainline
 * (2,816 bytes of code, which the U575's 8 kB cache holds beside a block of 256 taps; with 32 mobilenet_v1's two 3 x 3
 * layers took 6.2 k cycles more on mps2-an505-u575, with 128 the loop and the blocks outgrew the cache: +249 k), 16
 * elsewhere (704 bytes: the Cortex-M4 builds run on the L4R5, whose ART holds 1 kB). The first pass is entered at any
 * multiple of MCU_PW3_SEG tap pairs, so that whole passes follow. */
#if defined(__ARM_ARCH_8M_MAIN__)
#define MCU_PW3_PASS 64
#else
#define MCU_PW3_PASS 16
#endif
#define MCU_PW3_SEG 16     /* tap pairs between the first pass's entries */
#define MCU_PW3_KP_STEP 32 /* the taps of MCU_PW3_SEG tap pairs: layers of a multiple of them */

typedef struct {
    const int16_t *col;     /* the blocks' columns (three or four pixels'), one after another */
    int32_t col_bytes;      /* a block's: 6 kp (three pixels), 8 kp (four) */
    const int16_t *col_end; /* after the last block's */
    const int32_t *blocks;  /* the stream's first block */
    int32_t block_bytes;    /* 4 mcu_packed_block_words(kp) */
    int32_t rq_off;         /* from a block to its (m, C) words: 16 + 8 kp */
    int8_t *y;              /* the first pixel's outputs */
    int32_t stride;         /* output channels: from a pixel's outputs to the next one's */
    int32_t halves;         /* 2 (output channels / 4) */
    int32_t skip;           /* the first pass's entry, so that whole passes follow: the tap pairs skipped (MCU_PW3_SEG's
                             * multiple; mcu_pw3_blocks) or the tap pair entered after tap pair 0 (mcu_pw4_blocks) */
} mcu_pw3_state;

#define MCU_PW3_STR2(x) #x
#define MCU_PW3_STR(x) MCU_PW3_STR2(x)
/* An output's requantization, the scaled form's SMMLA and SSAT: the triples' and pw4_s8_dsp.h's quads'. */
#define MCU_PW3_RQ(a, m, c)                                                                               \
    "smmla " a ", " a ", " m ", " c "\n\t"                                                                \
    "ssat " a ", #8, " a ", asr #" MCU_PW3_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"

/* The call's state (r0) into s0-s9 and s14 (r7 in s13), then half block n (s8, label 1) set up: its stream
 * (s10, r12), (m, C) words (s11) and first outputs (s12); the column from its start (r11), lr its first block's end.
 * Shared with mcu_pw4_blocks (pw4_s8_dsp.h), whose state has the same layout */
#define MCU_PW3_ENTER                                                                                     \
    "vmov s13, r7\n\t"                                                                                    \
    "ldm r0, {r1, r2, r3, r4, r5, r6, r8, r9, r10, r11}\n\t"                                              \
    "vmov s14, r11\n\t"                                                                                   \
    "vmov s0, r1\n\t"                                                                                     \
    "vmov s1, r2\n\t"                                                                                     \
    "vmov s2, r3\n\t"                                                                                     \
    "vmov s3, r4\n\t"                                                                                     \
    "vmov s4, r5\n\t"                                                                                     \
    "vmov s5, r6\n\t"                                                                                     \
    "vmov s6, r8\n\t"                                                                                     \
    "vmov s7, r9\n\t"                                                                                     \
    "vmov s9, r10\n\t"                                                                                    \
    "movs r6, #0\n\t"                                                                                     \
    "vmov s8, r6\n\t"                                                                                     \
    "1:\n\t"                                                                                              \
    "vmov r6, s8\n\t"                                                                                     \
    "vmov r7, s3\n\t"                                                                                     \
    "vmov r8, s4\n\t"                                                                                     \
    "lsr r9, r6, #1\n\t"                                                                                  \
    "and r10, r6, #1\n\t"                                                                                 \
    "mla r7, r9, r8, r7\n\t"                                                                              \
    "add r7, r7, r10, lsl #3\n\t"                                                                         \
    "add r12, r7, #16\n\t"                                                                                \
    "vmov s10, r12\n\t"                                                                                   \
    "vmov r8, s5\n\t"                                                                                     \
    "add r8, r7, r8\n\t"                                                                                  \
    "add r8, r8, r10, lsl #3\n\t"                                                                         \
    "vmov s11, r8\n\t"                                                                                    \
    "vmov r8, s6\n\t"                                                                                     \
    "add r8, r8, r9, lsl #2\n\t"                                                                          \
    "add r8, r8, r10, lsl #1\n\t"                                                                         \
    "vmov s12, r8\n\t"                                                                                    \
    "vmov r11, s0\n\t"                                                                                    \
    "vmov lr, s1\n\t"                                                                                     \
    "add lr, r11, lr\n\t"
/* The next half block (s8) until the last (s9) */
#define MCU_PW3_HALF_NEXT                                                                                 \
    "vmov r6, s8\n\t"                                                                                     \
    "adds r6, r6, #1\n\t"                                                                                 \
    "vmov s8, r6\n\t"                                                                                     \
    "vmov r7, s9\n\t"                                                                                     \
    "cmp r6, r7\n\t"                                                                                      \
    "bne 1b\n\t"

#if MCU_PW3_WANTED && MCU_PACKED_PW_PAIRS && MCU_PACKED_SCALED && MCU_S8_DSP_NATIVE && defined(__ARM_FP)



/* MCU_PW3_SEG tap pairs: the column's (A, B, C) words at r11 + 12 t, the half block's two words at r12 + 16 t. */
#define MCU_PW3_TAPS_SEG                                                                                  \
    ".rept " MCU_PW3_STR(MCU_PW3_SEG) "\n\t"                                                            \
    "ldr r6, [r11, #12 * .Lpw3_t]\n\t"                                                                  \
    "ldr r7, [r11, #12 * .Lpw3_t + 4]\n\t"                                                              \
    "ldr r8, [r11, #12 * .Lpw3_t + 8]\n\t"                                                              \
    "ldr r9, [r12, #16 * .Lpw3_t]\n\t"                                                                  \
    "ldr r10, [r12, #16 * .Lpw3_t + 4]\n\t"                                                             \
    "smlad r0, r6, r9, r0\n\t"                                                                            \
    "smlad r1, r7, r9, r1\n\t"                                                                            \
    "smlad r2, r8, r9, r2\n\t"                                                                            \
    "smlad r3, r6, r10, r3\n\t"                                                                           \
    "smlad r4, r7, r10, r4\n\t"                                                                           \
    "smlad r5, r8, r10, r5\n\t"                                                                           \
    ".set .Lpw3_t, .Lpw3_t + 1\n\t"                                                                   \
    ".endr\n\t"

/* A pass (labels 40-42 after its first three segments: the entries past its start), and the first pass's entry r6
 * tap pairs in, the pointers moved back by as many so that the immediate offsets meet the column's start. */
#if MCU_PW3_PASS == 4 * MCU_PW3_SEG
#define MCU_PW3_TAPS_PASS                                                                                 \
    MCU_PW3_TAPS_SEG "40:\n\t" MCU_PW3_TAPS_SEG "41:\n\t" MCU_PW3_TAPS_SEG "42:\n\t" MCU_PW3_TAPS_SEG
#define MCU_PW3_SKIP                                                                                      \
    "sub r11, r11, r6, lsl #3\n\t"                                                                        \
    "sub r11, r11, r6, lsl #2\n\t"                                                                        \
    "sub r12, r12, r6, lsl #4\n\t"                                                                        \
    "cmp r6, #" MCU_PW3_STR(MCU_PW3_SEG) "\n\t"                                                           \
    "beq 40b\n\t"                                                                                         \
    "cmp r6, #2 * " MCU_PW3_STR(MCU_PW3_SEG) "\n\t"                                                       \
    "beq 41b\n\t"                                                                                         \
    "b 42b\n\t"
#elif MCU_PW3_PASS == MCU_PW3_SEG
#define MCU_PW3_TAPS_PASS MCU_PW3_TAPS_SEG
#define MCU_PW3_SKIP "b 3b\n\t" /* never taken: the passes are always whole */
#else
#error "MCU_PW3_PASS: one or four segments"
#endif

/* Half block n (s8) of every triple: its stream (s10), (m, C) words (s11) and first outputs (s12) from n, then each
 * triple: the two biases, the tap pairs, SMMLA and SSAT, six byte stores. */
static __attribute__((noinline)) void mcu_pw3_blocks(const mcu_pw3_state *st)
{
    register const mcu_pw3_state *s __asm__("r0") = st;
    __asm__ volatile(
        MCU_PW3_ENTER
        "2:\n\t"
        "vmov r12, s10\n\t"
        "ldr r0, [r12, #-16]\n\t"
        "ldr r3, [r12, #-12]\n\t"
        "mov r1, r0\n\t"
        "mov r2, r0\n\t"
        "mov r4, r3\n\t"
        "mov r5, r3\n\t"
        "vmov r6, s14\n\t"
        "cmp r6, #0\n\t"
        "bne 5f\n\t"
        "3:\n\t"
        ".set .Lpw3_t, 0\n\t"
        MCU_PW3_TAPS_PASS
        "add r11, r11, #12 * " MCU_PW3_STR(MCU_PW3_PASS) "\n\t"
        "add r12, r12, #16 * " MCU_PW3_STR(MCU_PW3_PASS) "\n\t"
        "cmp r11, lr\n\t"
        "bne 3b\n\t"
        "vmov r6, s11\n\t"
        "ldm r6, {r7, r8, r9, r10}\n\t"
        MCU_PW3_RQ("r0", "r7", "r8") MCU_PW3_RQ("r1", "r7", "r8") MCU_PW3_RQ("r2", "r7", "r8")
        MCU_PW3_RQ("r3", "r9", "r10") MCU_PW3_RQ("r4", "r9", "r10") MCU_PW3_RQ("r5", "r9", "r10")
        "vmov r6, s12\n\t"
        "vmov r7, s7\n\t"
        "strb r0, [r6]\n\t"
        "strb r3, [r6, #1]\n\t"
        "add r6, r6, r7\n\t"
        "strb r1, [r6]\n\t"
        "strb r4, [r6, #1]\n\t"
        "add r6, r6, r7\n\t"
        "strb r2, [r6]\n\t"
        "strb r5, [r6, #1]\n\t"
        "add r6, r6, r7\n\t"
        "vmov s12, r6\n\t"
        "vmov r7, s1\n\t"
        "add lr, lr, r7\n\t"
        "vmov r7, s2\n\t"
        "cmp r11, r7\n\t"
        "bne 2b\n\t"
        MCU_PW3_HALF_NEXT
        "b 6f\n\t"
        "5:\n\t"
        MCU_PW3_SKIP
        "6:\n\t"
        "vmov r7, s13\n\t"
        : "+r"(s)
        :
        : "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3", "s4",
          "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14", "cc", "memory");
}

#undef MCU_PW3_SKIP
#undef MCU_PW3_TAPS_PASS
#undef MCU_PW3_TAPS_SEG

/* The interleaved column of three pixels, kp bytes each at x, x + step and x + 2 step (kp a multiple of 4): per 4
 * taps the words (A's taps 0, 2), (B's 0, 2), (C's 0, 2), then the same of taps 1, 3, each tap + off as int16
 * (mcu_column_s8's order per pixel). col3 is word-aligned. */
static inline void mcu_column3_s8(const int8_t *x, int32_t step, int32_t kp, int32_t off, int16_t *col3)
{
    const uint32_t off2 = mcu_offset_pair(off);
    const int8_t *end = x + kp;
    const int32_t step2 = 2 * step;
    uint32_t a, b, c, a0, b0;
    __asm__ volatile("1:\n\t"
                     "ldr %[b], [%[x], %[s1]]\n\t"
                     "ldr %[c], [%[x], %[s2]]\n\t"
                     "ldr %[a], [%[x]], #4\n\t"
                     "sxtab16 %[a0], %[o], %[a]\n\t"
                     "sxtab16 %[b0], %[o], %[b]\n\t"
                     "str %[a0], [%[y]]\n\t"
                     "str %[b0], [%[y], #4]\n\t"
                     "sxtab16 %[a0], %[o], %[c]\n\t"
                     "sxtab16 %[a], %[o], %[a], ror #8\n\t"
                     "sxtab16 %[b], %[o], %[b], ror #8\n\t"
                     "sxtab16 %[c], %[o], %[c], ror #8\n\t"
                     "str %[a0], [%[y], #8]\n\t"
                     "str %[a], [%[y], #12]\n\t"
                     "str %[b], [%[y], #16]\n\t"
                     "str %[c], [%[y], #20]\n\t"
                     "add %[y], %[y], #24\n\t"
                     "cmp %[x], %[e]\n\t"
                     "bne 1b\n\t"
                     : [x] "+r"(x), [y] "+r"(col3), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [a0] "=&r"(a0),
                       [b0] "=&r"(b0)
                     : [o] "r"(off2), [e] "r"(end), [s1] "r"(step), [s2] "r"(step2)
                     : "cc", "memory");
}

#define MCU_PW3_BUILT 1

/* Whether mcu_pw3_layer stands for a flat pointwise layer of kp taps and `pixels` pixels whose pair tail is `tail`
 * (layer_t's px2): a scaled stream (8) whose bytes are stored whole (no clamp, 1), whole passes of the loop, a
 * multiple of 3 pixels up to MCU_PW3_PIXELS_MAX, every column in the buffer's buf_taps int16. */
static inline int mcu_pw3_takes(int tail, int32_t kp, int64_t pixels, int32_t buf_taps)
{
    /* the count's remainder in 32 bits once it is in range (no 64-bit division helper on the core) */
    return (tail & (1 | 8)) == 8 && kp % MCU_PW3_KP_STEP == 0 && pixels >= 3 && pixels <= MCU_PW3_PIXELS_MAX &&
           (int32_t)pixels % 3 == 0 && pixels * kp <= buf_taps;
}

/* The layer: `pixels` pixels of kp bytes in from x, cout out each from y, through the stream's blocks; col: the
 * buffer (pixels x kp int16, word-aligned). */
static inline void mcu_pw3_layer(const int8_t *x, int8_t *y, int32_t pixels, int32_t kp, int32_t cout,
                                 int32_t input_offset, const int32_t *blocks, int16_t *col)
{
    for (int32_t t = 0; t < pixels; t += 3) {
        mcu_column3_s8(x + t * kp, kp, kp, input_offset, col + t * kp);
    }
    const mcu_pw3_state s = {col, 6 * kp, col + pixels * kp, blocks, 4 * mcu_packed_block_words(kp), 16 + 8 * kp,
                             y, cout, 2 * (cout / 4), (MCU_PW3_PASS - (kp / 2) % MCU_PW3_PASS) % MCU_PW3_PASS};
    mcu_pw3_blocks(&s);
}
#endif
#endif /* MCU_KERNELS_INTERNAL_PW3_S8_DSP_H */
