/* The narrow path's 3x3 windows of 3 channels at stride 2 across (first layers on RGB images, mobilenet_v1's
 * 96 x 96 one), whose activation range is all of int8: from widened input rows, two output channels of four
 * pixels a pass. Internal: static inline only; the layer's stream is convolution/gemm_s8_dsp.h's.
 *
 * Why: by threes (mcu_narrow_x3) each pixel's column of 28 int16 was built from its window, about 77
 * cycles of the pixel's 413 on mps2-an505-u575. Here each input row becomes (x + input_offset) as int16 in
 * natural order once, in a row slot, and the three slots of a row of outputs are their windows: window ow of
 * row slot r is 9 int16 at 6 ow, pixel p + 1's 12 bytes after pixel p's, so every tap of four pixels is at a
 * fixed offset from the first one's. With stride 2 down, an output row's first input row is the previous
 * one's last: neither widened again nor copied, the slots taken in the other order (2, 1, 0) with weights whose
 * window rows are reversed. The first two slots' window rows give taps 0 to 7 as 4 words each and their taps 8
 * one word of a fourth slot, the lone taps' (built per row of outputs, about 6 cycles a pixel, for 16 a pixel
 * saved); the third's 9 taps are 5 words, the fifth paired with the next pixel's first (its weight 0): 14 words a
 * window, the fewest 27 taps take, and no column at all. The weights in that order, both
 * row orders, come packed ahead of time after the stream's blocks (MCU_PACKED_FLAG_ROWS: tuned.rows_section,
 * scaled to one shift like the pointwise pairs' scaled streams); a stream without them (mcu_conv2d_s4 widens its
 * weights at run time) is repacked here once per call, one order, the shared row copied.
 *
 * The pass: per tap word two weight words and two pixels' column words, four SMLAD, then the other two
 * pixels' column words and four SMLAD (16 cycles for 8; the eight accumulators, four operands and two
 * pointers take every register but sp and pc), the biases entering with the first tap; the constants
 * (m, C) of a channel serve its four pixels, SMMLA and SSAT an output (mcu_packed_rq_scaled). */
#ifndef MCU_KERNELS_INTERNAL_CONV_K3C3_ROWS_S8_DSP_H
#define MCU_KERNELS_INTERNAL_CONV_K3C3_ROWS_S8_DSP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"
#include "conv_narrow_s8_dsp.h"
#include "gemm_s8_dsp.h"
#include "../common/dot_s16.h"
#include "../common/simd_s8.h"

#ifndef MCU_PACKED_NARROW_ROWS
#define MCU_PACKED_NARROW_ROWS 1 /* 0: a model's build without such layers (mcu/backends/optimized/specialise.py) */
#endif
#ifndef MCU_PACKED_ROWS_COUT
#define MCU_PACKED_ROWS_COUT 0 /* the one output depth of a model's rows layers (specialise.py), 0: any */
#endif

#if MCU_S8_DSP && MCU_PACKED_NARROW && MCU_PACKED_NARROW_K3C3 && MCU_PACKED_NARROW_ROWS

#define MCU_K3C3_ROW_TAPS 320 /* int16 of a row slot: rows of up to 104 pixels of 3 channels */
#define MCU_K3C3_ROW_BYTES_S "640"
#define MCU_K3C3_COUT_MAX 16 /* the spare four pixels' outputs, the pairs repacked at run time */
#define MCU_K3C3_WORDS 14    /* tap words a window: 4, 4 and 5 of the row slots, 1 of the lone taps' slot */
#define MCU_K3C3_PAIR_BYTES 136 /* a pair's words: MCU_PACKED_ROWS_PAIR_WORDS */
/* The buffer of mcu_k3c3_rows_layer: three row slots and the lone taps' slot, a spare four pixels' outputs, then
 * for a stream without its rows section (MCU_PACKED_FLAG_ROWS) the pairs repacked at run time. */
#define MCU_K3C3_BUF_TAPS (4 * MCU_K3C3_ROW_TAPS + 2 * MCU_K3C3_COUT_MAX)
#define MCU_K3C3_REPACK_TAPS (MCU_K3C3_BUF_TAPS + MCU_K3C3_COUT_MAX / 2 * MCU_PACKED_ROWS_PAIR_WORDS * 2)
_Static_assert(MCU_K3C3_ROW_TAPS * 2 == 640, "MCU_K3C3_ROW_BYTES_S");
_Static_assert(MCU_PACKED_ROWS_PAIR_WORDS == 2 + 2 * MCU_K3C3_WORDS + 4, "a pair: biases, tap words, constants");
_Static_assert(MCU_K3C3_PAIR_BYTES == 4 * MCU_PACKED_ROWS_PAIR_WORDS, "MCU_K3C3_PAIR_BYTES");

/* The slots' int16 a layer needs: its left padding and input row, or its windows by whole fours (the last
 * four's pixels past the row read zeros, and each window row's fifth word one int16 more). */
static inline int32_t mcu_k3c3_rows_taps(const mcu_conv2d_s8_params *p)
{
    const int32_t row = 3 * (p->pad_left + p->input.w);
    const int32_t windows = 24 * ((p->output.w + 3) / 4) + 4;
    return row > windows ? row : windows;
}

/* 1 when a layer the narrow path takes (mcu_narrow_applies) would run by threes (mcu_narrow_x3: 3x3 windows of
 * 3 channels, dilation_w 1, the range all of int8) and takes the rows instead: stride 2 across, few enough
 * channels for the spare, rows that fit a slot, and a buffer for the slots (and the pairs, for a stream without
 * its rows section: `section`). */
static inline int mcu_k3c3_rows_applies(const mcu_conv2d_s8_params *p, int32_t buf_taps, int section)
{
    if (buf_taps < (section ? MCU_K3C3_BUF_TAPS : MCU_K3C3_REPACK_TAPS)) {
        return 0;
    }
    if (MCU_PACKED_ROWS_COUT != 0 && p->output.c != MCU_PACKED_ROWS_COUT) {
        return 0;
    }
    return p->kernel_h == 3 && p->kernel_w == 3 && p->input.c == 3 && p->dilation_w == 1 && p->stride_w == 2 &&
           p->act_min == -128 && p->act_max == 127 && p->output.c <= MCU_K3C3_COUT_MAX && p->pad_left >= 0 &&
           mcu_k3c3_rows_taps(p) <= MCU_K3C3_ROW_TAPS;
}

/* The pass's state, read by the assembly at fixed offsets. */
typedef struct {
    const int16_t *col;      /* the run's first four's first window in slot 0 */
    const int16_t *col_stop; /* the first window after the run's last four */
    int8_t *y;               /* the pass's first output (the four's first pixel, the pair's first channel) */
    int32_t cout;            /* between the pixels' outputs */
    int8_t *y0;              /* the pair's first output in the run (its first four's first pixel) */
    const int32_t *pairs;    /* the pair's words (MCU_PACKED_FLAG_ROWS's layout) */
    const int32_t *pairs_end; /* past the last pair's words */
} mcu_k3c3_rows_state;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_k3c3_rows_state, col) == 0 && offsetof(mcu_k3c3_rows_state, col_stop) == 4 &&
                   offsetof(mcu_k3c3_rows_state, y) == 8 && offsetof(mcu_k3c3_rows_state, cout) == 12 &&
                   offsetof(mcu_k3c3_rows_state, y0) == 16 && offsetof(mcu_k3c3_rows_state, pairs) == 20 &&
                   offsetof(mcu_k3c3_rows_state, pairs_end) == 24,
               "mcu_k3c3_rows_state layout");
#endif

/* Tap word u's slot (0 to 2: the row slots; 3: the lone taps') and its first int16 in a window there: slots 0 and
 * 1 give their window row's taps 0 to 7 (4 words), slot 2 its 9 and a 0 (5), slot 3 taps 8 of slots 0 and 1. */
static inline int32_t mcu_k3c3_word_slot(int32_t u)
{
    return u < 4 ? 0 : u < 8 ? 1 : u < 13 ? 2 : 3;
}

static inline int32_t mcu_k3c3_word_at(int32_t u)
{
    return u < 4 ? 2 * u : u < 8 ? 2 * (u - 4) : u < 13 ? 2 * (u - 8) : 0;
}

/* Lane i of tap word u as a tap of the window (9 row + tap, the row that of the slot), -1 for none. */
static inline int32_t mcu_k3c3_word_tap(int32_t u, int32_t i)
{
    const int32_t slot = mcu_k3c3_word_slot(u), t = mcu_k3c3_word_at(u) + i;
    return slot == 3 ? 9 * i + 8 : t < 9 ? 9 * slot + t : -1;
}

/* Tap word u's weights of channel ch from a block of the stream, whose words pair the taps of each group of 4 as
 * 0, 2 and 1, 3, each times 2^e. */
static inline uint32_t mcu_k3c3_weight_word(const int32_t *blob, int32_t ch, int32_t u, int32_t e)
{
    uint32_t w = 0;
    for (int32_t i = 0; i < 2 && mcu_k3c3_word_tap(u, i) >= 0; ++i) {
        const int32_t tap = mcu_k3c3_word_tap(u, i), t = 2 * (tap / 4) + (tap & 1), lane = (tap & 3) >> 1;
        const int32_t half = (int16_t)(((uint32_t)blob[4 + 4 * t + ch] >> (16 * lane)) & 0xFFFFu);
        w |= ((uint32_t)(half * (1 << e)) & 0xFFFFu) << (16 * i);
    }
    return w;
}

/* The pairs of MCU_PACKED_FLAG_ROWS's layout from a stream without them (mcu_conv2d_s4's, widened at run time),
 * what tuned.rows_section packs ahead of time: 1, or 0 where that layout is not exact for the layer (a right
 * shift R outside [MCU_PACKED_SCALED_SHIFT - 7, MCU_PACKED_SCALED_SHIFT - 1], or an accumulator times 2^e, e = 1 +
 * MCU_PACKED_SCALED_SHIFT - R, outside int32 for some input: tuned.scaled_fit). */
static inline int mcu_k3c3_repack(const int32_t *blocks, const mcu_conv2d_s8_params *p, int32_t *pairs)
{
    const int32_t words = mcu_packed_block_words(28);
    const int64_t xmax = p->input_offset >= 0 ? 127 + (int64_t)p->input_offset : 128 - (int64_t)p->input_offset;
    for (int32_t a = 0; a < p->output.c; a += 2, pairs += MCU_PACKED_ROWS_PAIR_WORDS) {
        const int32_t *blob = blocks + (a / 4) * words;
        for (int32_t j = 0; j < 2; ++j) {
            const int32_t ch = a % 4 + j;
            const int32_t *rq = blob + 4 + 2 * 28 + 4 * ch; /* K low, K high, m, R - 1 */
            const int32_t r = rq[3] + 1, e = 1 + MCU_PACKED_SCALED_SHIFT - r;
            if (r < MCU_PACKED_SCALED_SHIFT - 7 || r > MCU_PACKED_SCALED_SHIFT - 1) {
                return 0;
            }
            int64_t sum = 0;
            for (int32_t u = 0; u < MCU_K3C3_WORDS; ++u) {
                const uint32_t w = mcu_k3c3_weight_word(blob, ch, u, 0);
                const int32_t lo = (int16_t)(w & 0xFFFFu), hi = (int16_t)(w >> 16);
                sum += (lo < 0 ? -lo : lo) + (hi < 0 ? -hi : hi);
            }
            const int64_t bias = blob[ch], bound = xmax * sum + (bias < 0 ? -bias : bias);
            if (bound * ((int64_t)1 << e) >= ((int64_t)1 << 31)) {
                return 0;
            }
            pairs[j] = (int32_t)((uint32_t)blob[ch] << e);
            for (int32_t u = 0; u < MCU_K3C3_WORDS; ++u) {
                pairs[2 + 2 * u + j] = (int32_t)mcu_k3c3_weight_word(blob, ch, u, e);
            }
            pairs[2 + 2 * MCU_K3C3_WORDS + 2 * j] = rq[2];
            pairs[3 + 2 * MCU_K3C3_WORDS + 2 * j] =
                (1 << (e - 2)) + (1 << (MCU_PACKED_SCALED_SHIFT - 1)) +
                p->output_offset * (1 << MCU_PACKED_SCALED_SHIFT);
        }
    }
    return 1;
}

/* A word of four bytes as (x + off) int16 in natural order at dst (off2: the offset in both halves). */
static inline void mcu_k3c3_widen_word(uint32_t v, uint32_t off2, int16_t *dst)
{
    const uint32_t lo = mcu_sxtab16(off2, v), hi = mcu_sxtab16_ror8(off2, v);
    mcu_store_u32(dst, mcu_s16_pair_low(lo, hi));
    mcu_store_u32(dst + 2, mcu_s16_pair_high(lo, hi));
}

#if MCU_S8_DSP_NATIVE
/* Four words at byte offset sb of src widened to eight at byte offset db of dst (r0 src, r2 off2, r3 dst): four
 * loads in a row (pipelined), each word's halves then paired in natural order, the stores last. */
#define MCU_KW_FOUR(sb, db)                                                                               \
    "ldr r4, [r0, #" sb "]\n\t"                                                                            \
    "ldr r5, [r0, #" sb " + 4]\n\t"                                                                        \
    "ldr r6, [r0, #" sb " + 8]\n\t"                                                                        \
    "ldr r10, [r0, #" sb " + 12]\n\t"                                                                       \
    "sxtab16 r8, r2, r4\n\t"                                                                               \
    "sxtab16 r4, r2, r4, ror #8\n\t"                                                                       \
    "sxtab16 r9, r2, r5\n\t"                                                                               \
    "sxtab16 r5, r2, r5, ror #8\n\t"                                                                       \
    "pkhbt r12, r8, r4, lsl #16\n\t"                                                                       \
    "pkhtb r4, r4, r8, asr #16\n\t"                                                                        \
    "pkhbt lr, r9, r5, lsl #16\n\t"                                                                        \
    "pkhtb r5, r5, r9, asr #16\n\t"                                                                        \
    "str r12, [r3, #" db "]\n\t"                                                                           \
    "str r4, [r3, #" db " + 4]\n\t"                                                                        \
    "str lr, [r3, #" db " + 8]\n\t"                                                                        \
    "str r5, [r3, #" db " + 12]\n\t"                                                                       \
    "sxtab16 r8, r2, r6\n\t"                                                                               \
    "sxtab16 r6, r2, r6, ror #8\n\t"                                                                       \
    "sxtab16 r9, r2, r10\n\t"                                                                               \
    "sxtab16 r10, r2, r10, ror #8\n\t"                                                                       \
    "pkhbt r12, r8, r6, lsl #16\n\t"                                                                       \
    "pkhtb r6, r6, r8, asr #16\n\t"                                                                        \
    "pkhbt lr, r9, r10, lsl #16\n\t"                                                                        \
    "pkhtb r10, r10, r9, asr #16\n\t"                                                                        \
    "str r12, [r3, #" db " + 16]\n\t"                                                                      \
    "str r6, [r3, #" db " + 20]\n\t"                                                                       \
    "str lr, [r3, #" db " + 24]\n\t"                                                                       \
    "str r10, [r3, #" db " + 28]\n\t"
#endif

/* n bytes of an input row as (x + off) int16 in natural order at dst (4-byte aligned), off2 the offset in
 * both halves. One function for every row (the rows' choice of slots stays small); on the DSP cores its whole
 * 32 bytes in assembly, whose eight registers of words and halves the compiler's version spilled around. */
static __attribute__((noinline)) void mcu_k3c3_widen(const int8_t *src, int32_t n, int32_t off, uint32_t off2,
                                                     int16_t *dst)
{
    const int8_t *const end = src + n;
#if MCU_S8_DSP_NATIVE
    if (n >= 32) {
        register const int8_t *s __asm__("r0") = src;
        register const int8_t *e __asm__("r1") = src + (n & ~31);
        register uint32_t o __asm__("r2") = off2;
        register int16_t *d __asm__("r3") = dst;
        __asm__ volatile("1:\n\t"
                         MCU_KW_FOUR("0", "0")
                         MCU_KW_FOUR("16", "32")
                         "adds r0, r0, #32\n\t"
                         "adds r3, r3, #64\n\t"
                         "cmp r0, r1\n\t"
                         "bne 1b\n\t"
                         : "+r"(s), "+r"(d)
                         : "r"(e), "r"(o)
                         : "r4", "r5", "r6", "r8", "r9", "r10", "r12", "lr", "cc", "memory");
        src = s;
        dst = d;
    }
#else
    for (; src + 32 <= end; src += 32, dst += 32) { /* eight words a pass, the loop's steps amortised */
        for (int32_t k = 0; k < 32; k += 4) {
            mcu_k3c3_widen_word(mcu_load_u32(src + k), off2, dst + k);
        }
    }
#endif
    for (; src + 4 <= end; src += 4, dst += 4) {
        mcu_k3c3_widen_word(mcu_load_u32(src), off2, dst);
    }
    for (; src != end; ++src, ++dst) {
        *dst = (int16_t)(*src + off);
    }
}
#if MCU_S8_DSP_NATIVE
#undef MCU_KW_FOUR
#endif

#define MCU_K3C3_STR2(x) #x
#define MCU_K3C3_STR(x) MCU_K3C3_STR2(x)

#if MCU_S8_DSP_NATIVE
/* Tap word u (its column words at byte offset cb of the four's first window), the pair's weight words from
 * r7. Accumulators: channel A of pixels 0-3 in r0, r2, r4, r6, channel B in r1, r3, r5, r8. */
#define MCU_KR_TAP(u, cb)                                                                                 \
    "ldr r9, [r7, #(8 + 8 * " u ")]\n\t"                                                                  \
    "ldr r10, [r7, #(12 + 8 * " u ")]\n\t"                                                                \
    "ldr r11, [r12, #(" cb ")]\n\t"                                                                       \
    "ldr lr, [r12, #(" cb " + 12)]\n\t"                                                                   \
    "smlad r0, r11, r9, r0\n\t"                                                                           \
    "smlad r1, r11, r10, r1\n\t"                                                                          \
    "smlad r2, lr, r9, r2\n\t"                                                                            \
    "smlad r3, lr, r10, r3\n\t"                                                                           \
    "ldr r11, [r12, #(" cb " + 24)]\n\t"                                                                  \
    "ldr lr, [r12, #(" cb " + 36)]\n\t"                                                                   \
    "smlad r4, r11, r9, r4\n\t"                                                                           \
    "smlad r5, r11, r10, r5\n\t"                                                                          \
    "smlad r6, lr, r9, r6\n\t"                                                                            \
    "smlad r8, lr, r10, r8\n\t"

/* The first tap word: the biases (r6 channel A, r8 channel B) enter every accumulator. */
#define MCU_KR_TAP0                                                                                       \
    "ldr r6, [r7]\n\t"                                                                                    \
    "ldr r8, [r7, #4]\n\t"                                                                                \
    "ldr r9, [r7, #8]\n\t"                                                                                \
    "ldr r10, [r7, #12]\n\t"                                                                              \
    "ldr r11, [r12]\n\t"                                                                                  \
    "ldr lr, [r12, #12]\n\t"                                                                              \
    "smlad r0, r11, r9, r6\n\t"                                                                           \
    "smlad r1, r11, r10, r8\n\t"                                                                          \
    "smlad r2, lr, r9, r6\n\t"                                                                            \
    "smlad r3, lr, r10, r8\n\t"                                                                           \
    "ldr r11, [r12, #24]\n\t"                                                                             \
    "ldr lr, [r12, #36]\n\t"                                                                              \
    "smlad r4, r11, r9, r6\n\t"                                                                           \
    "smlad r5, r11, r10, r8\n\t"                                                                          \
    "smlad r6, lr, r9, r6\n\t"                                                                            \
    "smlad r8, lr, r10, r8\n\t"

#define MCU_KR_ROW(r, u0, u1, u2, u3)                                                                     \
    MCU_KR_TAP(u0, r " * " MCU_K3C3_ROW_BYTES_S) MCU_KR_TAP(u1, r " * " MCU_K3C3_ROW_BYTES_S " + 4")     \
    MCU_KR_TAP(u2, r " * " MCU_K3C3_ROW_BYTES_S " + 8") MCU_KR_TAP(u3, r " * " MCU_K3C3_ROW_BYTES_S " + 12")

/* One output of channel A (acc, m r9, C r10) or B (m r11, C lr): SMMLA and SSAT (mcu_packed_rq_scaled). */
#define MCU_KR_RQ(acc, m, c)                                                                              \
    "smmla " acc ", " acc ", " m ", " c "\n\t"                                                              \
    "ssat " acc ", #8, " acc ", asr #" MCU_K3C3_STR(MCU_PACKED_SCALED_SHIFT) "\n\t"

/* A pass's 14 tap words (the biases with the first) and its eight outputs requantized (constants in r9 to r11, lr). */
#define MCU_KR_TAPS                                                                                       \
    MCU_KR_TAP0                                                                                           \
    MCU_KR_TAP("1", "4") MCU_KR_TAP("2", "8") MCU_KR_TAP("3", "12")                                        \
    MCU_KR_ROW("1", "4", "5", "6", "7")                                                                   \
    MCU_KR_ROW("2", "8", "9", "10", "11") MCU_KR_TAP("12", "2 * " MCU_K3C3_ROW_BYTES_S " + 16")            \
    MCU_KR_TAP("13", "3 * " MCU_K3C3_ROW_BYTES_S)
#define MCU_KR_RQS                                                                                        \
    MCU_KR_RQ("r0", "r9", "r10") MCU_KR_RQ("r2", "r9", "r10") MCU_KR_RQ("r4", "r9", "r10")                 \
    MCU_KR_RQ("r6", "r9", "r10")                                                                          \
    MCU_KR_RQ("r1", "r11", "lr") MCU_KR_RQ("r3", "r11", "lr") MCU_KR_RQ("r5", "r11", "lr")                 \
    MCU_KR_RQ("r8", "r11", "lr")

#if MCU_PACKED_ROWS_COUT
/* A four's outputs but its first at fixed offsets from y (r9): the build's one output depth of such layers. */
#define MCU_KR_STORES_AT                                                                                  \
    "strb r1, [r9, #1]\n\t"                                                                                \
    "strb r2, [r9, #(" MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) ")]\n\t"                                           \
    "strb r3, [r9, #(" MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) " + 1)]\n\t"                                       \
    "strb r4, [r9, #(2 * " MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) ")]\n\t"                                       \
    "strb r5, [r9, #(2 * " MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) " + 1)]\n\t"                                   \
    "strb r6, [r9, #(3 * " MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) ")]\n\t"                                       \
    "strb r8, [r9, #(3 * " MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) " + 1)]\n\t"

/* The four's outputs at fixed offsets (the build's one output depth of such layers): y and col_stop by two pipelined
 * loads, the pixels' outputs from y by immediate offsets, one step of y. */
#define MCU_KR_STORES                                                                                     \
    "ldr r9, [sp, #8]\n\t"                                                                                 \
    "ldr r11, [sp, #4]\n\t"                                                                                \
    "add r12, r12, #48\n\t"                                                                                \
    "strb r0, [r9]\n\t"                                                                                    \
    MCU_KR_STORES_AT                                                                                      \
    "add r9, r9, #(4 * " MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) ")\n\t"                                          \
    "cmp r12, r11\n\t"                                                                                     \
    "str r9, [sp, #8]\n\t"
#else
/* y, cout and col_stop by three pipelined loads; no store's address from the instruction before it. */
#define MCU_KR_STORES                                                                                     \
    "ldr r9, [sp, #8]\n\t"                                                                                 \
    "ldr r10, [sp, #12]\n\t"                                                                               \
    "ldr r11, [sp, #4]\n\t"                                                                                \
    "strb r0, [r9]\n\t"                                                                                    \
    "strb r1, [r9, #1]\n\t"                                                                                \
    "add lr, r9, r10\n\t"                                                                                  \
    "add r9, lr, r10\n\t"                                                                                  \
    "strb r2, [lr]\n\t"                                                                                    \
    "strb r3, [lr, #1]\n\t"                                                                                \
    "add lr, r9, r10\n\t"                                                                                  \
    "add r12, r12, #48\n\t"                                                                                \
    "strb r4, [r9]\n\t"                                                                                    \
    "strb r5, [r9, #1]\n\t"                                                                                \
    "add r9, lr, r10\n\t"                                                                                  \
    "cmp r12, r11\n\t"                                                                                     \
    "strb r6, [lr]\n\t"                                                                                    \
    "strb r8, [lr, #1]\n\t"                                                                                \
    "str r9, [sp, #8]\n\t"
#endif

#if MCU_PACKED_ROWS_COUT && defined(__ARM_FP)
/* The four's outputs at fixed offsets, y and col_stop from s2 and s1 by one VMOV (2 cycles where two loads took 3), the
 * first pixel's first output last, its store stepping y (no ADD), y back to s2 by VMOV. */
#define MCU_KR_STORES_FP                                                                                  \
    "vmov r11, r9, s1, s2\n\t"                                                                             \
    "add r12, r12, #48\n\t"                                                                                \
    MCU_KR_STORES_AT                                                                                      \
    "strb r0, [r9], #(4 * " MCU_K3C3_STR(MCU_PACKED_ROWS_COUT) ")\n\t"                                       \
    "cmp r12, r11\n\t"                                                                                     \
    "vmov s2, r9\n\t"

/* As below, the state in FPU registers instead of the stack (s0 to s6: col, col_stop, y, cout, y0, pairs,
 * pairs_end) and the pair's constants (m, C of channels A and B) in s8 to s11, loaded once a pair run: a pass takes
 * them by two VMOV (4 cycles where four loads took 5). */
static __attribute__((noinline)) void mcu_k3c3_rows_run(mcu_k3c3_rows_state *st)
{
    register mcu_k3c3_rows_state *s __asm__("r7") = st;
    __asm__ volatile(
        "vldmia r7, {s0-s6}\n\t"
        "vmov r12, s0\n\t"
        "vmov r7, s5\n\t"
        "2:\n\t"
        "add lr, r7, #120\n\t"
        "vldmia lr, {s8-s11}\n\t"
        "1:\n\t"
        MCU_KR_TAPS
        "vmov r9, r10, s8, s9\n\t"
        "vmov r11, lr, s10, s11\n\t"
        MCU_KR_RQS
        MCU_KR_STORES_FP
        "bne 1b\n\t"
        /* the pair done: the next one from the run's first four, its outputs 2 on from this one's */
        "vmov r9, s4\n\t"
        "vmov r11, s6\n\t"
        "vmov r12, s0\n\t"
        "add r7, r7, #" MCU_K3C3_STR(MCU_K3C3_PAIR_BYTES) "\n\t"
        "add r9, r9, #2\n\t"
        "cmp r7, r11\n\t"
        "vmov s4, r9\n\t"
        "vmov s2, r9\n\t"
        "bne 2b\n\t"
        : "+r"(s)
        :
        : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "s0", "s1", "s2", "s3",
          "s4", "s5", "s6", "s8", "s9", "s10", "s11", "cc", "memory");
}
#undef MCU_KR_STORES_FP
#else
/* Per channel pair (a run of passes over the same 136 bytes of weights, which a small data cache then keeps: the
 * L4R5's ART holds 256 B, all four pairs' 544 B missed on every four) every four of pixels while col != col_stop,
 * the outputs 4 cout on after each four, the next pair's 2 on from this one's. The state is copied to the stack
 * (col, col_stop, y, cout, y0, pairs, pairs_end from sp on, each one load away: r7 takes the weights, r12 the
 * four's windows) and the state pointer pushed above it. */
static __attribute__((noinline)) void mcu_k3c3_rows_run(mcu_k3c3_rows_state *st)
{
    register mcu_k3c3_rows_state *s __asm__("r7") = st;
    __asm__ volatile(
        "ldmia r7, {r0, r1, r2, r3, r4, r5, r6}\n\t"
        "push {r0, r1, r2, r3, r4, r5, r6, r7}\n\t"
        "mov r12, r0\n\t"
        "mov r7, r5\n\t"
        "1:\n\t"
        MCU_KR_TAPS
        /* the constants by four pipelined loads; r7 stays on the pair for its next four */
        "ldr r9, [r7, #120]\n\t"
        "ldr r10, [r7, #124]\n\t"
        "ldr r11, [r7, #128]\n\t"
        "ldr lr, [r7, #132]\n\t"
        MCU_KR_RQS
        MCU_KR_STORES
        "bne 1b\n\t"
        /* the pair done: the next one from the run's first four, its outputs 2 on from this one's */
        "ldr r9, [sp, #16]\n\t"
        "ldr r11, [sp, #24]\n\t"
        "ldr r12, [sp]\n\t"
        "add r7, r7, #" MCU_K3C3_STR(MCU_K3C3_PAIR_BYTES) "\n\t"
        "add r9, r9, #2\n\t"
        "str r9, [sp, #16]\n\t"
        "str r9, [sp, #8]\n\t"
        "cmp r7, r11\n\t"
        "bne 1b\n\t"
        "add sp, sp, #28\n\t"
        "pop {r7}\n\t"
        : "+r"(s)
        :
        : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}
#endif
#undef MCU_KR_TAP
#undef MCU_KR_TAP0
#undef MCU_KR_ROW
#undef MCU_KR_RQ
#undef MCU_KR_TAPS
#undef MCU_KR_RQS
#undef MCU_KR_STORES
#undef MCU_KR_STORES_AT
#undef MCU_K3C3_STR
#undef MCU_K3C3_STR2
#else
/* The passes in C, with the same state and steps. */
static void mcu_k3c3_rows_run(mcu_k3c3_rows_state *st)
{
    for (const int32_t *pair = st->pairs; pair != st->pairs_end; pair += MCU_PACKED_ROWS_PAIR_WORDS) {
        for (const int16_t *col = st->col; col != st->col_stop; col += 24, st->y += 4 * st->cout) {
            for (int32_t px = 0; px < 4; ++px) {
                for (int32_t ch = 0; ch < 2; ++ch) {
                    uint32_t acc = (uint32_t)pair[ch];
                    for (int32_t u = 0; u < MCU_K3C3_WORDS; ++u) {
                        const int16_t *c =
                            col + mcu_k3c3_word_slot(u) * MCU_K3C3_ROW_TAPS + mcu_k3c3_word_at(u) + 6 * px;
                        acc = mcu_smlad(mcu_load_u32(c), (uint32_t)pair[2 + 2 * u + ch], acc);
                    }
                    const int32_t *rq = pair + 2 + 2 * MCU_K3C3_WORDS + 2 * ch; /* m, C */
                    st->y[px * st->cout + ch] = (int8_t)mcu_packed_rq_scaled(mcu_u32_to_s32(acc), rq[0], rq[1]);
                }
            }
        }
        st->y0 += 2;
        st->y = st->y0;
    }
}
#endif

/* The lone taps' slot (slot 3) of `windows` windows: window ow's tap 8 of slots 0 and 1 as one word at 6 ow. */
static inline void mcu_k3c3_lone(int16_t *slots, int32_t windows)
{
    const int16_t *a = slots + 8, *b = slots + MCU_K3C3_ROW_TAPS + 8;
    int16_t *lone = slots + 3 * MCU_K3C3_ROW_TAPS;
    for (int32_t i = 0; i < 6 * windows; i += 24) { /* whole fours: four windows a pass, written out (no inner loop) */
        mcu_store_u32(lone + i, (uint32_t)(uint16_t)a[i] | ((uint32_t)(uint16_t)b[i] << 16));
        mcu_store_u32(lone + i + 6, (uint32_t)(uint16_t)a[i + 6] | ((uint32_t)(uint16_t)b[i + 6] << 16));
        mcu_store_u32(lone + i + 12, (uint32_t)(uint16_t)a[i + 12] | ((uint32_t)(uint16_t)b[i + 12] << 16));
        mcu_store_u32(lone + i + 18, (uint32_t)(uint16_t)a[i + 18] | ((uint32_t)(uint16_t)b[i + 18] << 16));
    }
}

/* The lone taps' slot's high halves alone (slot 1's taps 8), where slot 0 kept its row and its halves since the slot
 * was last built in full: four windows a pass, their loads pipelined. */
static inline void mcu_k3c3_lone_high(int16_t *slots, int32_t windows)
{
    const int16_t *b = slots + MCU_K3C3_ROW_TAPS + 8;
    int16_t *lone = slots + 3 * MCU_K3C3_ROW_TAPS + 1;
    for (int32_t i = 0; i < 6 * windows; i += 24) {
        int32_t t0 = b[i], t1 = b[i + 6], t2 = b[i + 12], t3 = b[i + 18];
        __asm__("" : "+r"(t0), "+r"(t1), "+r"(t2), "+r"(t3)); /* the four loads in a row, before any store */
        lone[i] = (int16_t)t0;
        lone[i + 6] = (int16_t)t1;
        lone[i + 12] = (int16_t)t2;
        lone[i + 18] = (int16_t)t3;
    }
}

/* The layer (mcu_k3c3_rows_applies, pixels forward), `blocks` after the stream's header, `section` its rows
 * section (MCU_PACKED_FLAG_ROWS) or NULL: each row of outputs from its three row slots and their lone taps' slot,
 * by fours, a last partial four into a spare and copied. The slots, the spare and the pairs repacked from a stream
 * without the section take buf (MCU_K3C3_BUF_TAPS int16, MCU_K3C3_REPACK_TAPS without the section, 8-byte aligned:
 * the kernel's column buffer, whose frame is there anyway). 0 (nothing written) where the repacked layout would not
 * be exact. */
static __attribute__((noinline)) int mcu_k3c3_rows_layer(const mcu_conv2d_s8_params *p, const int8_t *input,
                                                         const int32_t *blocks, const int32_t *section,
                                                         int8_t *output, int16_t *buf)
{
    int16_t *slots = buf;
    int8_t *spare = (int8_t *)(void *)(buf + 4 * MCU_K3C3_ROW_TAPS);
    const mcu_shape4 in = p->input, out = p->output;
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    const int32_t lead = 3 * p->pad_left, n = 3 * in.w, row = 3 * in.w;
    const int32_t fours = out.w / 4, rest = out.w % 4;
    const int32_t *pairs = section;
    if (pairs == NULL) {
        int32_t *repacked = (int32_t *)(void *)(buf + MCU_K3C3_BUF_TAPS);
        if (!mcu_k3c3_repack(blocks, p, repacked)) {
            return 0;
        }
        pairs = repacked;
    }
    memset(slots, 0, 3 * MCU_K3C3_ROW_TAPS * sizeof(int16_t)); /* the padding either side of each input row: zeros */
    mcu_k3c3_rows_state st;
    st.cout = out.c;
    /* The section's second half has the window rows reversed: an output row whose first input row is the previous
     * one's last (stride 2 down) takes its slots in the other order, that row already in place. */
    const int32_t *reversed = section != NULL ? pairs + out.c / 2 * MCU_PACKED_ROWS_PAIR_WORDS : NULL;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * row;
        int8_t *y = output + (int64_t)b * out.h * out.w * out.c;
        int32_t last = INT32_MIN; /* the input row (or row of padding) of the last window row: none yet */
        int rev = 0;              /* the window rows in slots 2, 1, 0 (the reversed pairs) */
        for (int32_t oh = 0; oh < out.h; ++oh, y += out.w * out.c) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            const int shared = ih0 == last;
            rev ^= shared && reversed != NULL;
            const int32_t dh = p->dilation_h;
            /* most rows: the first one in place, two new ones in the input */
            const int inside = shared && reversed != NULL && ih0 + dh >= 0 && ih0 + 2 * dh < in.h;
            if (inside) {
                mcu_k3c3_widen(x_n + (int64_t)(ih0 + dh) * row, n, p->input_offset, off2,
                               slots + MCU_K3C3_ROW_TAPS + lead);
                mcu_k3c3_widen(x_n + (int64_t)(ih0 + 2 * dh) * row, n, p->input_offset, off2,
                               slots + (rev ? 0 : 2) * MCU_K3C3_ROW_TAPS + lead);
            }
            for (int32_t r = 0; r < 3 && !inside; ++r) {
                const int32_t ih = ih0 + r * dh;
                int16_t *slot = slots + (rev ? 2 - r : r) * MCU_K3C3_ROW_TAPS + lead;
                if (r == 0 && shared) {
                    if (reversed == NULL) {
                        memcpy(slot, slots + 2 * MCU_K3C3_ROW_TAPS + lead, (size_t)n * sizeof(int16_t));
                    }
                } else if (ih < 0 || ih >= in.h) {
                    memset(slot, 0, (size_t)n * sizeof(int16_t));
                } else {
                    mcu_k3c3_widen(x_n + (int64_t)ih * row, n, p->input_offset, off2, slot);
                }
            }
            st.pairs = rev ? reversed : pairs;
            st.pairs_end = st.pairs + out.c / 2 * MCU_PACKED_ROWS_PAIR_WORDS;
            if (shared && reversed != NULL && !rev) { /* slot 0 held over from the last row, which built it in full */
                mcu_k3c3_lone_high(slots, 4 * (fours + (rest > 0)));
            } else {
                mcu_k3c3_lone(slots, 4 * (fours + (rest > 0)));
            }
            last = ih0 + 2 * p->dilation_h;
            st.col = slots;
            if (fours > 0) {
                st.col_stop = slots + 24 * fours;
                st.y = st.y0 = y;
                mcu_k3c3_rows_run(&st);
            }
            if (rest > 0) { /* the row's last pixels: a whole four from zeros past the row, the rest dropped */
                st.col = slots + 24 * fours;
                st.col_stop = st.col + 24;
                st.y = st.y0 = spare;
                mcu_k3c3_rows_run(&st);
                memcpy(y + 4 * fours * out.c, spare, (size_t)(rest * out.c));
            }
        }
    }
    return 1;
}

#endif /* MCU_S8_DSP && MCU_PACKED_NARROW && MCU_PACKED_NARROW_K3C3 && MCU_PACKED_NARROW_ROWS */

#endif /* MCU_KERNELS_INTERNAL_CONV_K3C3_ROWS_S8_DSP_H */
