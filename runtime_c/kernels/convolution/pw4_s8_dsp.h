/* Flat pointwise layers of small images over a scaled stream (mcu_conv2d_packed_s8's flat pairs, their bytes stored
 * whole): four output pixels by two output channels a register block, the whole layer in one assembly (Armv8-M
 * Mainline). Internal: static inline only, included by mcu_conv2d_packed_s8.c after pw3_s8_dsp.h.
 *
 * Why: the pairs (2 pixels x 4 channels) spend about 64 cycles per 8 outputs beside their tap pairs (requantization
 * words for four channels, stores at a computed address, a call per part of the stream). Here a tap pair of four
 * pixels and two channels is two runs of loads (pixels A, B and the two weight words: 5 cycles; C, D: 3) and eight
 * SMLAD, 16 cycles per 16 MACs, the pairs' rate, with the accumulators r0-r7 (channel 0 for pixels A-D in r0-r3,
 * channel 1 in r4-r7), the loads r8-r10 and lr, the column r11 and the stream r12; a half block's (m, C) serve four
 * pixels and, where the output channels are known (MCU_PW4_COUT), the eight bytes go to immediate offsets from one
 * pointer. As in pw3_s8_dsp.h every pixel's column is built first (in place is safe) and the stream is read once a
 * layer; the state lives in FPU registers. */
#ifndef MCU_KERNELS_INTERNAL_PW4_S8_DSP_H
#define MCU_KERNELS_INTERNAL_PW4_S8_DSP_H

#include <stdint.h>

#include "gemm_s8_dsp.h"
#include "pw3_s8_dsp.h"

/* The int16 of the kernel's column buffer this build's quads need at least (specialise.py: the widest such layer's
 * pixels x taps); 0: no layer takes them, no code for them. Unset: the code is built and takes the layers whose
 * columns fit the buffer the other paths size. Armv8-M Mainline only: a pass of 64 tap pairs is 3 kB of code, past
 * the L4R5's 1 kB ART. */
#if !defined(__ARM_ARCH_8M_MAIN__)
#define MCU_PW4_TAPS 0
#define MCU_PW4_WANTED 0
#elif !defined(MCU_PACKED_PW4_TAPS)
#define MCU_PW4_TAPS 0
#define MCU_PW4_WANTED 1
#else
#define MCU_PW4_TAPS MCU_PACKED_PW4_TAPS
#define MCU_PW4_WANTED (MCU_PACKED_PW4_TAPS > 0)
#endif
#ifndef MCU_PW4_COUT
#define MCU_PW4_COUT 0 /* the output channels whose quads store at immediate offsets (specialise.py); 0: any count */
#endif
/* The images the quads take: a 6 x 6 image's 36 pixels (9 quads) fill the pairs' group buffer at 128 taps. */
#define MCU_PW4_PIXELS_MIN 12
#define MCU_PW4_PIXELS_MAX 36

#if MCU_PW4_WANTED && MCU_PACKED_PW_PAIRS && MCU_PACKED_SCALED && MCU_S8_DSP_NATIVE && defined(__ARM_FP) &&         \
    MCU_PW3_PASS == 4 * MCU_PW3_SEG


#define MCU_PW4_STR2(x) #x
#define MCU_PW4_STR(x) MCU_PW4_STR2(x)

/* A tap pair: the column's (A, B, C, D) words at r11 + 16 t, the half block's two words at r12 + 16 t. */
#define MCU_PW4_TAP                                                                                       \
    "ldr r8, [r11, #16 * .Lpw4_t]\n\t"                                                                  \
    "ldr r9, [r11, #16 * .Lpw4_t + 4]\n\t"                                                              \
    "ldr r10, [r12, #16 * .Lpw4_t]\n\t"                                                                 \
    "ldr lr, [r12, #16 * .Lpw4_t + 4]\n\t"                                                              \
    "smlad r0, r8, r10, r0\n\t"                                                                           \
    "smlad r4, r8, lr, r4\n\t"                                                                            \
    "smlad r1, r9, r10, r1\n\t"                                                                           \
    "smlad r5, r9, lr, r5\n\t"                                                                            \
    "ldr r8, [r11, #16 * .Lpw4_t + 8]\n\t"                                                              \
    "ldr r9, [r11, #16 * .Lpw4_t + 12]\n\t"                                                             \
    "smlad r2, r8, r10, r2\n\t"                                                                           \
    "smlad r6, r8, lr, r6\n\t"                                                                            \
    "smlad r3, r9, r10, r3\n\t"                                                                           \
    "smlad r7, r9, lr, r7\n\t"                                                                            \
    ".set .Lpw4_t, .Lpw4_t + 1\n\t"
/* MCU_PW3_SEG tap pairs, entry label `e` after the first (the first pass's entry where tap pair 1 of a quad falls on
 * it) */
#define MCU_PW4_SEG(e)                                                                                    \
    MCU_PW4_TAP e ":\n\t"                                                                                 \
    ".rept " MCU_PW4_STR(MCU_PW3_SEG) " - 1\n\t" MCU_PW4_TAP ".endr\n\t"
#define MCU_PW4_TAPS_PASS                                                                                 \
    ".set .Lpw4_t, 0\n\t" MCU_PW4_SEG("40") MCU_PW4_SEG("41") MCU_PW4_SEG("42") MCU_PW4_SEG("43")
/* The first pass's entry at tap pair e (s14 in r8; 1 and 33, 128 and 64 taps, next to the quad's head, the others out
 * of line) but 1: the pointers back by e - 1 tap pairs, so that the immediate offsets meet the column's and stream's
 * starts; the SUBS leaves Z clear (r12 an address), as the half block's test against 1 left it (see MCU_PW4_HEAD). */
#define MCU_PW4_ENTRY(e, label)                                                                           \
    "cmp r8, #" e "\n\t"                                                                                  \
    "bne 8f\n\t"                                                                                          \
    "sub r11, r11, #16 * (" e " - 1)\n\t"                                                                 \
    "subs r12, r12, #16 * (" e " - 1)\n\t"                                                                \
    "b " label "\n\t"                                                                                     \
    "8:\n\t"

/* A quad's head: tap pair 0 with the two biases in one run of eight loads (the biases' registers are pixel A's
 * accumulators, so B-D's SMLAD come first), then the first pass entered at tap pair 1 (s14 names the entry: the
 * passes then end with the stream). `dir` is the direction of the pass's labels 40-43 from this copy; `test` compares
 * the entry with 1 (MCU_PW4_TEST) or is empty where Z still holds that test's answer: nothing between sets the flags
 * (a pass with no test of its end, SMMLA, SSAT, the stores, the quad loop's CBZ). */
#define MCU_PW4_TEST                                                                                      \
    "vmov r8, s14\n\t"                                                                                    \
    "cmp r8, #1\n\t"
#define MCU_PW4_HEAD(dir, test)                                                                           \
    "vmov r12, s10\n\t"                                                                                   \
    "ldr r0, [r12, #-16]\n\t"                                                                             \
    "ldr r4, [r12, #-12]\n\t"                                                                             \
    "ldr r10, [r12]\n\t"                                                                                  \
    "ldr lr, [r12, #4]\n\t"                                                                               \
    "ldr r8, [r11]\n\t"                                                                                   \
    "ldr r9, [r11, #4]\n\t"                                                                               \
    "ldr r2, [r11, #8]\n\t"                                                                               \
    "ldr r3, [r11, #12]\n\t"                                                                              \
    "smlad r1, r9, r10, r0\n\t"                                                                           \
    "smlad r5, r9, lr, r4\n\t"                                                                            \
    "smlad r6, r2, lr, r4\n\t"                                                                            \
    "smlad r2, r2, r10, r0\n\t"                                                                           \
    "smlad r7, r3, lr, r4\n\t"                                                                            \
    "smlad r3, r3, r10, r0\n\t"                                                                           \
    "smlad r0, r8, r10, r0\n\t"                                                                           \
    "smlad r4, r8, lr, r4\n\t" test "beq 40" dir "\n\t"                                                   \
    "vmov r8, s14\n\t" MCU_PW4_ENTRY("33", "42" dir) "b 5f\n\t"

/* Whether every layer the quads take runs its column in the first pass (MCU_PW4_KP_MAX, specialise.py: the widest
 * such layer's taps; at most 2 MCU_PW3_PASS + 2 leaves at most MCU_PW3_PASS tap pairs after tap pair 0): the pass
 * then ends with no test of the stream (4 cycles a half block of a quad). 0: any taps, the passes in a loop. */
#ifndef MCU_PW4_KP_MAX
#define MCU_PW4_KP_MAX 0
#endif
#if MCU_PW4_KP_MAX > 0 && MCU_PW4_KP_MAX <= 2 * MCU_PW3_PASS + 2
#define MCU_PW4_RETEST ""
#define MCU_PW4_PASS_SET ""
#define MCU_PW4_PASS_END "add r11, r11, #16 * " MCU_PW4_STR(MCU_PW3_PASS) "\n\t"
#else
#define MCU_PW4_RETEST MCU_PW4_TEST /* the passes' test of their end leaves Z set */
#define MCU_PW4_PASS_SET                                                                                  \
    "vmov r8, s1\n\t"                                                                                     \
    "add r8, r12, r8\n\t"                                                                                 \
    "vmov s15, r8\n\t"
#define MCU_PW4_PASS_END                                                                                  \
    "add r11, r11, #16 * " MCU_PW4_STR(MCU_PW3_PASS) "\n\t"                                              \
    "add r12, r12, #16 * " MCU_PW4_STR(MCU_PW3_PASS) "\n\t"                                              \
    "vmov r8, s15\n\t"                                                                                    \
    "cmp r12, r8\n\t"                                                                                     \
    "bne 3b\n\t"
#endif

/* Half block n (s8) of every quad: its stream (s10) and its end (s15), (m, C) words (s16-s19, read once a half
 * block where each quad loaded them) and first outputs (s12) from n, then each quad: the head, the passes, SMMLA and
 * SSAT, eight byte stores. The quad loop is rotated: a second copy of the head follows the stores, so a quad's only
 * taken branch is its entry into the pass (the loop's test falls through but at a half block's last quad). */
static __attribute__((noinline)) void mcu_pw4_blocks(const mcu_pw3_state *st)
{
    register const mcu_pw3_state *s __asm__("r0") = st;
    __asm__ volatile(
        ".set .Lpw4_s, " MCU_PW4_STR(MCU_PW4_COUT) "\n\t"
        MCU_PW3_ENTER
        "vmov r8, s11\n\t"
        "vldm r8, {s16-s19}\n\t"
        MCU_PW4_PASS_SET
        MCU_PW4_HEAD("f", MCU_PW4_TEST)
        ".balign 4\n\t" /* the entries 40-43 on fetch words: a taken branch to an unaligned wide target costs a cycle more */
        "3:\n\t"
        MCU_PW4_TAPS_PASS
        MCU_PW4_PASS_END
        "vmov r8, r9, s16, s17\n\t"
        "vmov r10, lr, s18, s19\n\t"
        MCU_PW3_RQ("r0", "r8", "r9") MCU_PW3_RQ("r1", "r8", "r9") MCU_PW3_RQ("r2", "r8", "r9")
        MCU_PW3_RQ("r3", "r8", "r9") MCU_PW3_RQ("r4", "r10", "lr") MCU_PW3_RQ("r5", "r10", "lr")
        MCU_PW3_RQ("r6", "r10", "lr") MCU_PW3_RQ("r7", "r10", "lr")
        "vmov r8, s12\n\t"
        "strb r0, [r8]\n\t"
        "strb r4, [r8, #1]\n\t"
        ".if .Lpw4_s\n\t"
        "strb r1, [r8, #.Lpw4_s]\n\t"
        "strb r5, [r8, #.Lpw4_s + 1]\n\t"
        "strb r2, [r8, #2 * .Lpw4_s]\n\t"
        "strb r6, [r8, #2 * .Lpw4_s + 1]\n\t"
        "strb r3, [r8, #3 * .Lpw4_s]\n\t"
        "strb r7, [r8, #3 * .Lpw4_s + 1]\n\t"
        "add r8, r8, #4 * .Lpw4_s\n\t"
        ".else\n\t"
        "vmov r9, s7\n\t"
        "add r8, r8, r9\n\t"
        "strb r1, [r8]\n\t"
        "strb r5, [r8, #1]\n\t"
        "add r8, r8, r9\n\t"
        "strb r2, [r8]\n\t"
        "strb r6, [r8, #1]\n\t"
        "add r8, r8, r9\n\t"
        "strb r3, [r8]\n\t"
        "strb r7, [r8, #1]\n\t"
        "add r8, r8, r9\n\t"
        ".endif\n\t"
        "vmov s12, r8\n\t"
        "vmov r9, s2\n\t"
        "sub r1, r11, r9\n\t"
        "cbz r1, 7f\n\t"
        MCU_PW4_HEAD("b", MCU_PW4_RETEST)
        "7:\n\t"
        MCU_PW3_HALF_NEXT
        "b 6f\n\t"
        "5:\n\t" MCU_PW4_ENTRY("17", "41b") MCU_PW4_ENTRY("49", "43b")
        "6:\n\t"
        "vmov r7, s13\n\t"
        : "+r"(s)
        :
        : "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3", "s4",
          "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "cc",
          "memory");
}

#undef MCU_PW4_HEAD
#undef MCU_PW4_TEST
#undef MCU_PW4_RETEST
#undef MCU_PW4_PASS_SET
#undef MCU_PW4_PASS_END
#undef MCU_PW4_TAPS_PASS
#undef MCU_PW4_ENTRY
#undef MCU_PW4_SEG
#undef MCU_PW4_TAP

/* Every quad's four columns: pixels of kp bytes from x (kp a multiple of 16, pixels of 4), the quads' columns one
 * after another at col (word-aligned). Per 4 taps of a quad the words of taps (0, 2) of A, B, C, D, then of taps (1,
 * 3), each tap + off as int16. The four loads run back to back and each widened word is stored as it is made, so one
 * scratch register serves all eight; four such steps a pass of the loop (its end's compare and taken branch once per
 * 16 taps) and every quad in one assembly (pixels C and D through a second pointer, so the registers hold both
 * loops' ends). */
static inline void mcu_column4_s8(const int8_t *x, int32_t kp, int32_t pixels, int32_t off, int16_t *col)
{
    const uint32_t off2 = mcu_offset_pair(off);
    const int8_t *last = x + pixels * kp;
    const int8_t *x2 = x + 2 * kp;
    const int8_t *end;
    uint32_t a, b, c, d, t;
    __asm__ volatile("1:\n\t"
                     "add %[e], %[x], %[k]\n\t"
                     "2:\n\t"
                     ".set .Lc4_i, 0\n\t"
                     ".rept 4\n\t"
                     "ldr %[b], [%[x], %[k]]\n\t"
                     "ldr %[d], [%[x2], %[k]]\n\t"
                     "ldr %[c], [%[x2]], #4\n\t"
                     "ldr %[a], [%[x]], #4\n\t"
                     "sxtab16 %[t], %[o], %[a]\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i]\n\t"
                     "sxtab16 %[t], %[o], %[b]\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 4]\n\t"
                     "sxtab16 %[t], %[o], %[c]\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 8]\n\t"
                     "sxtab16 %[t], %[o], %[d]\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 12]\n\t"
                     "sxtab16 %[t], %[o], %[a], ror #8\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 16]\n\t"
                     "sxtab16 %[t], %[o], %[b], ror #8\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 20]\n\t"
                     "sxtab16 %[t], %[o], %[c], ror #8\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 24]\n\t"
                     "sxtab16 %[t], %[o], %[d], ror #8\n\t"
                     "str %[t], [%[y], #32 * .Lc4_i + 28]\n\t"
                     ".set .Lc4_i, .Lc4_i + 1\n\t"
                     ".endr\n\t"
                     "add %[y], %[y], #128\n\t"
                     "cmp %[x], %[e]\n\t"
                     "bne 2b\n\t"
                     "add %[x], %[x2], %[k]\n\t"
                     "add %[x2], %[x], %[k], lsl #1\n\t"
                     "cmp %[x], %[l]\n\t"
                     "bne 1b\n\t"
                     : [x] "+r"(x), [x2] "+r"(x2), [y] "+r"(col), [e] "=&r"(end), [a] "=&r"(a), [b] "=&r"(b),
                       [c] "=&r"(c), [d] "=&r"(d), [t] "=&r"(t)
                     : [o] "r"(off2), [k] "r"(kp), [l] "r"(last)
                     : "cc", "memory");
}

#define MCU_PW4_BUILT 1

/* Whether mcu_pw4_layer stands for a flat pointwise layer of kp taps and `pixels` pixels whose pair tail is `tail`
 * (layer_t's px2): as mcu_pw3_takes, a multiple of 4 pixels from MCU_PW4_PIXELS_MIN to MCU_PW4_PIXELS_MAX, the
 * output channels MCU_PW4_COUT and at most MCU_PW4_KP_MAX taps where they are set. */
static inline int mcu_pw4_takes(int tail, int32_t kp, int64_t pixels, int32_t cout, int32_t buf_taps)
{
    return (tail & (1 | 8)) == 8 && kp % MCU_PW3_KP_STEP == 0 && pixels >= MCU_PW4_PIXELS_MIN &&
           pixels <= MCU_PW4_PIXELS_MAX && (int32_t)pixels % 4 == 0 && pixels * kp <= buf_taps &&
           (MCU_PW4_COUT == 0 || cout == MCU_PW4_COUT) && (MCU_PW4_KP_MAX == 0 || kp <= MCU_PW4_KP_MAX);
}

/* The layer: `pixels` pixels of kp bytes in from x, cout out each from y, through the stream's blocks; col: the
 * buffer (pixels x kp int16, word-aligned). */
static inline void mcu_pw4_layer(const int8_t *x, int8_t *y, int32_t pixels, int32_t kp, int32_t cout,
                                 int32_t input_offset, const int32_t *blocks, int16_t *col)
{
    mcu_column4_s8(x, kp, pixels, input_offset, col);
    const mcu_pw3_state s = {col, 8 * kp, col + pixels * kp, blocks, 4 * mcu_packed_block_words(kp), 16 + 8 * kp,
                             y, cout, 2 * (cout / 4), MCU_PW3_PASS - (kp / 2 - 1) % MCU_PW3_PASS};
    mcu_pw4_blocks(&s);
}
#endif
#endif /* MCU_KERNELS_INTERNAL_PW4_S8_DSP_H */
