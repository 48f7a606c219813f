/* 3x3 depthwise convolution (ch_mult 1, dilation 1) one channel at a time over planes of 16-bit
 * inputs, for the DSP paths (MCU_S8_DSP, see simd_s8.h): stride 1 in the in-place kernel and, on bands
 * of rows of a taller image (a streamed prefix's row calls: mobilenet_v1's 8 x 48 and 32 x 24 rows,
 * 9,731,895 -> 9,624,583 instructions on mps2-an505), in the other kernel; stride 2 in the other kernel
 * from MCU_DWPL_S2_MIN_PIXELS outputs (the end of this file). Internal: static inline only.
 *
 * Why planes: with the channels interleaved (NHWC) every tap of a pixel needs its own input and
 * weight loads and one single MAC (SMLABB/SMLATT) per product, about 2.5 cycles per MAC on the
 * M4/M33 in the pixel path (dw_px_s8_dsp.h). Here a group of four channels is first copied into
 * four planes, one per channel, of (x + input_offset) as int16 with zero borders (a zero adds
 * nothing: the padding needs no test and no bias correction). In a plane two neighbouring pixels of
 * one row are one word, so two output pixels of a kernel row take two words (x0 x1) and (x2 x3)
 * and four MAC instructions for six products, with the channel's weights as the lane pairs
 * (w0 w1) and (w1 w2) of each kernel row:
 *   pixel 0: SMLAD (x0 x1)(w0 w1) + SMLABT x2 w2      pixel 1: SMLATB x1 w0 + SMLAD (x2 x3)(w1 w2)
 * One assembly loop runs all lines of a channel, four output pixels a step (a quad: 24 MACs for 36
 * products), the weights not held in registers but loaded with each kernel row's plane words in one
 * chain of single loads (on the M4/M33 a load after a load takes one cycle: the six words of a row in
 * 7 cycles), which leaves the registers for four accumulators: about 80 cycles a quad against 104 for
 * the two pairs of the loop that held the weights (mobilenet_v1 on mps2-an505-u575: the 48 x 48 x 8
 * layer 588,414 -> 465,233 estimated cycles with the changes below). Sums are modulo 2^32 in any
 * order: the bits of the plain kernel.
 *
 * Every input of the group's channels is in the planes before the first of their outputs is
 * written, so the output may be the input itself (the in-place kernel); other channels' bytes are
 * never written. */
#ifndef MCU_KERNELS_INTERNAL_DW_PLANE_S8_DSP_H
#define MCU_KERNELS_INTERNAL_DW_PLANE_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/rq_s8_dsp.h"
#include "../common/simd_s8.h"

#if MCU_S8_DSP

/* The four planes of a group on the stack (int16): a layer whose planes do not fit is left to the
 * other paths (the pixel path's ring and tables take about as much). */
/* Fewest output lines of a band (an image with more lines than a band of this many holds runs
 * another path: every band pays the copy of two lines again). */
#if MCU_S8_DSP_NATIVE
#define MCU_DWPL_BYTES 3584
/* The stride-2 planes' bytes: thirteen lines of four planes of 50 columns, so that mobilenet_v1's 48 x 48 x 16 ->
 * 24 x 24 layer runs bands of six output lines (four bands, not six: every band fills its first plane line again
 * and pays a group's calls) and its 24 x 24 x 32 -> 12 x 12 layer one band (two at 3600 bytes): mobilenet_v1
 * 9,626,431 -> 9,615,592 estimated cycles on mps2-an505-u575, mobilenet_v2 18,764,412 -> 18,735,872, the models'
 * deepest stack unchanged. 6800 bytes (bands of eight) gave 2.8 k and 10 k more but, with the row buffer, a frame
 * past a board's default 8 kB stack (the kernel tests' firmware faulted). Only the stride-2 function's frame
 * grows: raising MCU_DWPL_BYTES with it put the stride-1 functions' locals past an immediate offset's reach (about
 * 250 cycles more a 6 x 6 layer). */
#define MCU_DWPL_S2_BYTES 5200
#define MCU_DWPL_BAND_MIN 4
/* Shortest row of a stride-2 call of one or two output rows that takes the planes (mcu_depthwise_conv2d_s8.c):
 * shorter ones stay on the direct path. */
#define MCU_DWPL_S2_ROW_CALL_W 12
#else
/* The emulated build's planes hold few lines, so that the host tests' small images run in bands. */
#define MCU_DWPL_BYTES 512
#define MCU_DWPL_S2_BYTES 512
#define MCU_DWPL_BAND_MIN 2
#define MCU_DWPL_S2_ROW_CALL_W 4 /* the host tests' short rows reach the row calls' planes */
#endif
/* Shortest line (pixels) of the quad loop. Lines of three pixels take a step of their own (3 x 3
 * images: mobilenet_v1's last depthwise layer 162,676 -> 127,328 estimated cycles on mps2-an505-u575
 * against the pixel path, with the group's constants set up in one pass; with pairs and the channel's
 * set-up the planes had lost there, 161,125 -> 181,577); lines of four keep the other paths (not
 * measured). */
#define MCU_DWPL_LEN_MIN 5
/* The stride-1 loop of a layer's lines: one step a line for three pixels, and for six without the clamp
 * (MCU_DWPL_CHANNEL6 has no register for it); six pixels a step along longer lines without the clamp (12),
 * then a pair and a pixel alone when what is left after the sixes is at most three pixels (13; MCU_DWPL_SIXES);
 * else quads and their tail (0). */
#define MCU_DWPL_KIND(len, finish)                                                                         \
    ((len) == 3                                     ? 3                                                    \
     : (finish) == MCU_DWPL_CLAMP || (len) % 6 > 3 ? 0                                                    \
     : (len) == 6                                   ? 6                                                    \
     : (len) % 6 == 0                               ? 12                                                   \
                                                    : 13)
/* Lines of whole sixes whose plane line's bytes the scaled loop takes as an immediate (MCU_DWPL_SIXES_AT): 12, 24 and
 * 48 pixels, the 96 x 96 models' 48 x 48, 24 x 24 and 12 x 12 images. */
static inline int mcu_dwpl_len_at(int32_t len)
{
    return len == 12 || len == 24 || len == 48;
}
/* How a layer's outputs are finished after the requantization: saturated to int8 (SAT), then clamped to the
 * activation range (CLAMP), or, when the range is all of int8 and the output offset -128 (a ReLU folded
 * into the range), saturated with the requantization's sign correction left out (RELU: one instruction
 * fewer per output). There, for acc < 0 (m >= 0: acc m <= 0) the high word without the correction is at
 * most C, so the output at most floor(C / 2^R) = output_offset = -128, as is the exact one: SSAT makes
 * both -128. mobilenet_v1 on mps2-an505-u575: its thirteen depthwise layers about 90 k fewer estimated
 * cycles. */
enum { MCU_DWPL_SAT, MCU_DWPL_CLAMP, MCU_DWPL_RELU, MCU_DWPL_SCALED, MCU_DWPL_PACKED };
/* MCU_DWPL_PACKED: MCU_DWPL_SCALED's requantization with MCU_DWPL_PACKED_SCALE (mcu/kernels_s8.h) for the packed
 * one-step lines (mcu_dwpl_layer_packed), whose weights the packer scaled: one shift less, so that R from 6 on fits
 * (e <= 8), as in mobilenet_v1's first 6 x 6 layer. */
/* MCU_DWPL_SCALED: a RELU layer whose channels' accumulators are scaled by 2^e, e = MCU_DWPL_SCALE - R (R the
 * channel's right shift), in the weights and the bias of its group (mcu_dwpl_group_init_s1), so that every
 * channel's requantization is SMMLA and SSAT with one shift, MCU_DWPL_SCALE - 1, in the SSAT (the pointwise
 * pairs' scaled streams, docs/cycles.md): per output an ASR fewer, per step the load of R. In-place layers of
 * lines of sixes (MCU_DWPL_KIND 12 and 13) take it where mcu_dwpl_quant_ok_scaled's bounds hold for every
 * channel (mcu_dwpl_layer). */
#define MCU_DWPL_SCALE 15

static inline int mcu_dwpl_finish(int32_t act_min, int32_t act_max, int32_t output_offset)
{
    if (act_min > -128 || act_max < 127) {
        return MCU_DWPL_CLAMP;
    }
    return output_offset == -128 ? MCU_DWPL_RELU : MCU_DWPL_SAT;
}
_Static_assert(MCU_DWPL_LEN_MIN >= 4, "a line of the stride-1 planes holds one quad at least (MCU_DWPL_CHANNEL)");
/* int16 of a stride-1 plane line of len pixels: the padding's two zeros either side, even. */
#define MCU_DWPL_COLS(len) (((len) + 4) & ~1)
/* Longest line (pixels): the planes' bound keeps lines far shorter anyway. */
#define MCU_DWPL_ROW_MAX 128

#if !MCU_S8_DSP_NATIVE
/* SMLABT and SMLATB for the emulated build (the assembly issues them itself). */
static inline uint32_t mcu_dwpl_smlabt(uint32_t a, uint32_t b, uint32_t acc)
{
    return acc + (uint32_t)(mcu_lane_s16(a, 0) * mcu_lane_s16(b, 1));
}

static inline uint32_t mcu_dwpl_smlatb(uint32_t a, uint32_t b, uint32_t acc)
{
    return acc + (uint32_t)(mcu_lane_s16(a, 1) * mcu_lane_s16(b, 0));
}

#endif

/* A plane holds a band of one channel's image with a zero border, its lines along the image's longer
 * side (transposed when the image is taller than wide: the per-line set-up then serves more pixels,
 * and DS-CNN's 25 x 5 images sweep lines of 25). A band is up to `band` output lines and the two
 * input lines more that they read; an image of more lines runs band after band, each starting with
 * the previous band's last two input lines (already overwritten in the image by then). */
typedef struct {
    int transposed;     /* lines are the image's columns */
    int32_t lines, len; /* output lines and pixels per line */
    int32_t cols;       /* int16 per plane line: an even count >= len + 3 */
    int32_t band;       /* output lines per band */
    int32_t plane;      /* int16 per plane: (band + 2) x cols */
    int scaled;         /* every channel within the scaled requantization's bounds (mcu_dwpl_quant_ok_scaled) */
} mcu_dwpl_geom;

/* Largest |sum of a 3x3 window's products|: |x + input_offset| <= 255, |w| <= 128. */
#define MCU_DWPL_WINDOW_MAX (9 * 255 * 128)

/* Whether every channel's requantization fits the plane loop's: shift in [-24, -1] (R = -shift), and
 * with A = |bias| + MCU_DWPL_WINDOW_MAX bounding |acc| (no wrap: acc is the exact sum), 2 A < 2^31
 * (the doubled accumulator) and A + |C| + 1 < 2^31 (C = 2^(R-1) + output_offset 2^R: the high word
 * of mcu_dwpl_rq never wraps). The multiplier is checked too (non-negative, mcu_quant_valid's other
 * half): a layer the planes take needs no second pass over its channels to validate them. scaled: the
 * scaled form's bounds in the same pass (3 where they hold). Called out of line (the two functions below):
 * inlined into the kernels' dispatch, GCC kept the bias pointer on the stack and reloaded it per channel. */
static inline __attribute__((always_inline)) int mcu_dwpl_quant_as(const mcu_per_channel_quant *q, const int32_t *bias,
                                                                   int32_t ch, int32_t output_offset, int scaled)
{
    /* In 32-bit arithmetic (it runs per channel before every plane layer): with output_offset an int8
     * offset (the kernels' requirement, checked here too), |C| = |2 output_offset + 1| 2^(R-1) <= 255 2^23,
     * and the test of A bounds |bias| below 2^30, so no sum below wraps. */
    if (output_offset < -128 || output_offset > 127) {
        return 0;
    }
    const uint32_t k = (uint32_t)(output_offset < 0 ? -(2 * output_offset + 1) : 2 * output_offset + 1);
    const int32_t *multiplier = q->multiplier, *shift = q->shift;
    /* The four tests of a channel ORed into one word, without a branch each (the early exits cost taken
     * branches a channel: about 30 cycles a channel, 37 k estimated cycles of mobilenet_v1's inference on
     * mps2-an505-u575). v = shift + 24 lies in [0, 23] exactly when neither v nor 23 - v has bit 31 set
     * (modulo 2^32); a bad shift or |bias| (a >= 2^30) is flagged by its own test, so the last test's
     * shift (R - 1 = ~shift, taken modulo 32) and sum (a < 2^30 + 2^31 when it matters) need no care.
     * A layer without bias reads one zero throughout. */
    const int32_t no_bias = 0;
    const int32_t *b = bias != NULL ? bias : &no_bias;
    const int32_t b_step = bias != NULL ? 1 : 0;
    uint32_t bad = 0, sbad = 0;
    for (int32_t c = 0; c < ch; ++c, b += b_step) {
        const uint32_t v = (uint32_t)shift[c] + 24u;
        const uint32_t sign = (uint32_t)(*b >> 31);
        const uint32_t a = (((uint32_t)*b ^ sign) - sign) + MCU_DWPL_WINDOW_MAX; /* |bias| + window */
        const uint32_t hi = a + (k << (~(uint32_t)shift[c] & 31u)) + 1u;
        bad |= ((v | (23u - v) | (uint32_t)multiplier[c] | hi) >> 31) | (a >> 30);
        if (!scaled) {
            continue;
        }
        /* the scaled form (MCU_DWPL_SCALED): R in [7, 13] (e = 15 - R in [2, 8]: the weights times 2^e stay
         * int16, the rounding term 2^(e-2) an integer) and 2^e a < 2^31, a >> (31 - e) == 0 with
         * 31 - e = 16 + shift's negation; a bad shift is flagged by the range test, whatever the other's amount */
        const uint32_t u = (uint32_t)shift[c] + 13u;
        sbad |= ((u | (6u - u)) >> 31) | (a >> ((16u - (uint32_t)shift[c]) & 31u));
    }
    /* 1: the planes' requantization; 3: the scaled one's too (asked for) */
    return bad != 0 ? 0 : sbad != 0 || !scaled ? 1 : 3;
}

static __attribute__((noinline, unused)) int mcu_dwpl_quant_ok(const mcu_per_channel_quant *q, const int32_t *bias,
                                                             int32_t ch, int32_t output_offset)
{
    return mcu_dwpl_quant_as(q, bias, ch, output_offset, 0);
}

/* The same, 3 where the scaled form's bounds hold too (MCU_DWPL_SCALED): about 6 instructions a channel more. */
static __attribute__((noinline, unused)) int mcu_dwpl_quant_ok_scaled(const mcu_per_channel_quant *q,
                                                                    const int32_t *bias, int32_t ch,
                                                                    int32_t output_offset)
{
    return mcu_dwpl_quant_as(q, bias, ch, output_offset, 1);
}

/* Whether the plane path serves a 3x3 stride-1 layer of same-size output (in-place kernel's shapes):
 * channels a multiple of 4, every requantization within mcu_dwpl_quant_ok's, lines of MCU_DWPL_LEN_MIN to
 * MCU_DWPL_ROW_MAX pixels, four planes of at least MCU_DWPL_BAND_MIN lines within MCU_DWPL_BYTES. */
/* The geometry of mcu_dwpl_plan alone (the requantization not checked, g->scaled 0). */
static inline int mcu_dwpl_geometry(mcu_dwpl_geom *g, int32_t kh, int32_t kw, int32_t ch, int32_t h, int32_t w)
{
    const int transposed = h > w;
    const int32_t lines = transposed ? w : h, len = transposed ? h : w;
    if (kh != 3 || kw != 3 || ch % 4 != 0 || (len < MCU_DWPL_LEN_MIN && len != 3) || len > MCU_DWPL_ROW_MAX) {
        return 0;
    }
    const int32_t cols = MCU_DWPL_COLS(len);
    const int32_t fit = MCU_DWPL_BYTES / (4 * cols * 2) - 2; /* output lines a band of four planes holds */
    if (fit < MCU_DWPL_BAND_MIN && fit < lines) {
        return 0;
    }
    g->scaled = 0;
    g->transposed = transposed;
    g->lines = lines;
    g->len = len;
    g->cols = cols;
    g->band = fit < lines ? fit : lines;
    g->plane = (g->band + 2) * cols;
    return 1;
}

static inline int mcu_dwpl_plan(mcu_dwpl_geom *g, int32_t kh, int32_t kw, int32_t ch, int32_t h, int32_t w,
                                const mcu_per_channel_quant *q, const int32_t *bias, int32_t output_offset)
{
    if (!mcu_dwpl_geometry(g, kh, kw, ch, h, w)) {
        return 0;
    }
    /* the scaled form's bounds only where mcu_dwpl_layer takes it: a ReLU range (output_offset -128; the layer
     * checks the rest) on lines of sixes (MCU_DWPL_KIND 12 and 13) */
    const int sixes = output_offset == -128 && g->len > 6 && g->len % 6 <= 3;
    const int ok = sixes ? mcu_dwpl_quant_ok_scaled(q, bias, ch, output_offset)
                         : mcu_dwpl_quant_ok(q, bias, ch, output_offset);
    g->scaled = ok >> 1;
    return ok != 0;
}

/* (lo(a), lo(b)) and (hi(a), hi(b)): PKHBT and PKHTB. */
#if MCU_S8_DSP_NATIVE
static inline uint32_t mcu_dwpl_lows(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline uint32_t mcu_dwpl_highs(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %2, %1, asr #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
#else
static inline uint32_t mcu_dwpl_lows(uint32_t a, uint32_t b)
{
    return (a & 0xFFFFu) | (b << 16);
}

static inline uint32_t mcu_dwpl_highs(uint32_t a, uint32_t b)
{
    return (a >> 16) | (b & 0xFFFF0000u);
}
#endif

/* Channels c .. c + 3 of one input pixel at s, plus the input offset, into the four planes at d. */
static inline void mcu_dwpl_put1(int16_t *d, int32_t pl, const int8_t *s, uint32_t off2)
{
    const uint32_t v = mcu_load_u32(s);
    const uint32_t e = mcu_sxtab16(off2, v);      /* channels 0 and 2 */
    const uint32_t o = mcu_sxtab16_ror8(off2, v); /* channels 1 and 3 */
    d[0] = (int16_t)(uint16_t)e;
    d[2 * pl] = (int16_t)(uint16_t)(e >> 16);
    d[pl] = (int16_t)(uint16_t)o;
    d[3 * pl] = (int16_t)(uint16_t)(o >> 16);
}

/* The same for two input pixels a and b that are neighbours along a plane line (d even: one word per
 * plane, the lanes packed with PKHBT / PKHTB). */
static inline void mcu_dwpl_put2(int16_t *d, int32_t pl, const int8_t *a, const int8_t *b, uint32_t off2)
{
    const uint32_t va = mcu_load_u32(a), vb = mcu_load_u32(b);
    const uint32_t lo = mcu_dwpl_lows(va, vb), hi = mcu_dwpl_highs(va, vb); /* bytes (a0 a1 b0 b1), (a2 a3 b2 b3) */
    mcu_store_u32(d, mcu_sxtab16(off2, lo));
    mcu_store_u32(d + pl, mcu_sxtab16_ror8(off2, lo));
    mcu_store_u32(d + 2 * pl, mcu_sxtab16(off2, hi));
    mcu_store_u32(d + 3 * pl, mcu_sxtab16_ror8(off2, hi));
}

/* What mcu_dwpl_fill_lines reads: `lines` plane lines of the four planes from d (plane k at d + k pl_bytes;
 * d + lead even: the pairs' words aligned), each from s on: `lead` (0 or 1) pixel alone, `pairs` pairs of
 * pixels `next` bytes apart, `tail` (0 or 1) pixel alone; then the planes on by dskip bytes and s by sskip
 * to the next line; the input offset in both lanes of off2. `lines` counts down in place. */
typedef struct {
    int16_t *d;
    int32_t pl_bytes;
    const int8_t *s;
    int32_t next;
    int32_t pairs;
    uint32_t off2;
    int32_t lines;
    int32_t dskip, sskip;
    int32_t lead, tail;
    /* the layer's, for mcu_dwpl_fill (not read by the assembly): bytes of x from a plane line's input line
     * to the next, and the padding along a line (the first pixel's plane position) */
    int32_t across;
    int32_t pad_along;
    int32_t shape; /* a straight loop's line: 6 (mcu_dwpl_fill_lines6), 3 (mcu_dwpl_fill_lines3), else 0 */
} mcu_dwpl_fill_args;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_dwpl_fill_args, lines) == 24 && offsetof(mcu_dwpl_fill_args, tail) == 40,
               "mcu_dwpl_fill_args layout (mcu_dwpl_fill_lines)");

/* One pixel alone: four STRH, the plane pointers post-incremented. */
#define MCU_DWPL_FILL_ONE                                                                     \
    "ldr r8, [r2]\n\t"                                                                        \
    "add r2, r2, r3\n\t" MCU_DWPL_FILL_PUT1
/* The pixel's word in r8 widened into the four planes. */
#define MCU_DWPL_FILL_PUT1                                                                    \
    "sxtab16 r9, r7, r8\n\t"                                                                  \
    "sxtab16 r8, r7, r8, ror #8\n\t"                                                          \
    "strh r9, [r0], #2\n\t"                                                                   \
    "lsr r9, r9, #16\n\t"                                                                     \
    "strh r8, [r4], #2\n\t"                                                                   \
    "lsr r8, r8, #16\n\t"                                                                     \
    "strh r9, [r5], #2\n\t"                                                                   \
    "strh r8, [r6], #2\n\t"

/* Two pixels, neighbours along the line (mcu_dwpl_put2): two LDR, PKHBT and PKHTB, four SXTAB16 into four
 * STR, the plane pointers post-incremented; the loaded words' registers take the widened ones, so that r12
 * stays free for the line count. */
#define MCU_DWPL_FILL_PAIR                                                                    \
    "ldr r8, [r2]\n\t"                                                                        \
    "ldr r9, [r2, r3]\n\t"                                                                    \
    "add r2, r2, r3, lsl #1\n\t"                                                              \
    "pkhbt r10, r8, r9, lsl #16\n\t"                                                          \
    "pkhtb r11, r9, r8, asr #16\n\t"                                                          \
    "sxtab16 r8, r7, r10\n\t"                                                                 \
    "sxtab16 r10, r7, r10, ror #8\n\t"                                                        \
    "str r8, [r0], #4\n\t"                                                                    \
    "sxtab16 r9, r7, r11\n\t"                                                                 \
    "str r10, [r4], #4\n\t"                                                                   \
    "sxtab16 r11, r7, r11, ror #8\n\t"                                                        \
    "str r9, [r5], #4\n\t"                                                                    \
    "str r11, [r6], #4\n\t"

/* The fill's entry: a in lr, the four plane pointers in r0, r4-r6, the input in r2, its step in r3, the offset
 * pair in r7. */
#define MCU_DWPL_FILL_ENTRY "push {r4-r11, lr}\n\t" MCU_DWPL_FILL_SETUP
#define MCU_DWPL_FILL_SETUP                                                                   \
    "mov lr, r0\n\t"                                                                         \
    "ldm lr, {r0, r1, r2, r3}\n\t"                                                           \
    "ldr r7, [lr, #20]\n\t"                                                                  \
    "add r4, r0, r1\n\t"                                                                     \
    "add r5, r4, r1\n\t"                                                                     \
    "add r6, r5, r1\n\t"
/* A line's end: the planes on by dskip, the input by sskip. */
#define MCU_DWPL_FILL_SKIP                                                                    \
    "ldrd r8, r9, [lr, #28]\n\t"                                                             \
    "add r0, r0, r8\n\t"                                                                     \
    "add r4, r4, r8\n\t"                                                                     \
    "add r5, r5, r8\n\t"                                                                     \
    "add r6, r6, r8\n\t"                                                                     \
    "add r2, r2, r9\n\t"
/* mcu_dwpl_put2 over runs of pairs and mcu_dwpl_put1 at their ends, all lines of a fill in one call,
 * hand-scheduled with the four plane pointers post-incremented: per pair of pixels two LDR, two PKH that
 * pair the two pixels' bytes of channels (0, 1) and (2, 3) first, four SXTAB16 that widen them (and add
 * the offset) straight into plane words, four STR: 18 cycles for 8 values on the M4/M33 model (21 with
 * the words widened before they were paired); two pairs a step (an odd count's first pair alone), which
 * halves the loop's count and branch (mobilenet_v1's thirteen depthwise layers 2,808,038 -> 2,781,949
 * estimated cycles on mps2-an505-u575, the 6 x 6 images' lines of two pairs unchanged in instructions).
 * One call per fill rather than one per line with the lone pixels in C: the call's saved registers, the pointers' set-up and the C pixels
 * cost about 40 cycles a line (6 x 6 images: a line is 6 pixels). */
static __attribute__((naked, noinline, unused)) void mcu_dwpl_fill_lines(mcu_dwpl_fill_args *a)
{
    (void)a; /* in r0 */
    __asm__ volatile(MCU_DWPL_FILL_ENTRY
                     "ldr r12, [lr, #24]\n\t"
                     ".p2align 2\n\t" /* the line's first instruction, 32-bit, in one fetch word: refill 2 not 3 */
                     "3:\n\t"
                     "ldr r1, [lr, #36]\n\t"
                     "cbz r1, 4f\n\t" MCU_DWPL_FILL_ONE "4:\n\t"
                     "ldr r1, [lr, #16]\n\t"
                     "lsrs r1, r1, #1\n\t" /* two pairs a step after an odd count's first (C), its Z kept */
                     "bcc 7f\n\t" MCU_DWPL_FILL_PAIR "7:\n\t"
                     "beq 5f\n\t"
                     ".p2align 2\n\t"
                     "1:\n\t" MCU_DWPL_FILL_PAIR MCU_DWPL_FILL_PAIR
                     "subs r1, r1, #1\n\t"
                     "bne 1b\n\t"
                     "5:\n\t"
                     "ldr r1, [lr, #40]\n\t"
                     "cbz r1, 6f\n\t" MCU_DWPL_FILL_ONE "6:\n\t" MCU_DWPL_FILL_SKIP
                     "subs r12, r12, #1\n\t"
                     "bne 3b\n\t"
                     "str r12, [lr, #24]\n\t"
                     "pop {r4-r11, pc}\n\t");
}

/* The lines of the stride-1 3 x 3 and 6 x 6 images (padding 1 along them: a pixel alone and one pair, or a
 * pixel alone, two pairs and a pixel alone), straight, the line count in r1 and the planes' step in r12:
 * mcu_dwpl_fill_lines's tests of the pixels alone and its pair loop's set-up cost a line 8 instructions. */
#define MCU_DWPL_FILL_STRAIGHT(line)                                                          \
    "push {r4-r11, lr}\n\t" MCU_DWPL_FILL_STRAIGHT_LINES(line) "pop {r4-r11, pc}\n\t"
/* The same lines without the call (a in r0, every other register but sp overwritten): mcu_dwpl_layer_packed's
 * group fills, where the call's saved registers cost about 25 cycles a group. */
#define MCU_DWPL_FILL_STRAIGHT_LINES(line)                                                    \
    MCU_DWPL_FILL_SETUP                                                                       \
    "ldr r1, [lr, #24]\n\t"                                                                  \
    "ldr r12, [lr, #28]\n\t" /* dskip, held: a line's end loads sskip alone */               \
    ".p2align 2\n\t"                                                                         \
    "1:\n\t" line                                                                            \
    "ldr r8, [lr, #32]\n\t"                                                                  \
    "add r0, r0, r12\n\t"                                                                    \
    "add r4, r4, r12\n\t"                                                                    \
    "add r5, r5, r12\n\t"                                                                    \
    "add r6, r6, r12\n\t"                                                                    \
    "add r2, r2, r8\n\t"                                                                     \
    "subs r1, r1, #1\n\t"                                                                    \
    "bne 1b\n\t"                                                                             \
    "str r1, [lr, #24]\n\t"
static __attribute__((naked, noinline, unused)) void mcu_dwpl_fill_lines6(mcu_dwpl_fill_args *a)
{
    (void)a; /* in r0 */
    __asm__ volatile(MCU_DWPL_FILL_STRAIGHT(MCU_DWPL_FILL_ONE MCU_DWPL_FILL_PAIR MCU_DWPL_FILL_PAIR MCU_DWPL_FILL_ONE));
}
static __attribute__((naked, noinline, unused)) void mcu_dwpl_fill_lines3(mcu_dwpl_fill_args *a)
{
    (void)a; /* in r0 */
    __asm__ volatile(MCU_DWPL_FILL_STRAIGHT(MCU_DWPL_FILL_ONE MCU_DWPL_FILL_PAIR));
}
#endif

/* A layer's fill (x: h x w pixels of ch channels; lines in the planes' orientation: rows, or columns when
 * transposed), set up once: each plane line from its padding offset, pairs of pixels that are neighbours along
 * the line from an even plane position, a pixel alone before and after; the input offset in off2. The
 * per-call fields (the planes, the input, the lines) are set by mcu_dwpl_fill: building all eleven fields
 * per group and band cost about 30 cycles a call (mobilenet_v1's small images: a call per group). */
static inline void mcu_dwpl_fill_prep(mcu_dwpl_fill_args *a, const mcu_dwpl_geom *g, int32_t h, int32_t w, int32_t ch,
                                      int32_t pad_along, uint32_t off2)
{
    const int32_t row = w * ch;
    /* along a line: n pixels, the next `next` bytes on in x; from a line to the next: `across` bytes */
    const int32_t n = g->transposed ? h : w;
    const int32_t next = g->transposed ? row : ch;
    const int32_t lead = pad_along & 1;
    a->pl_bytes = 2 * g->plane;
    a->next = next;
    a->pairs = (n - lead) / 2;
    a->off2 = off2;
    a->dskip = 2 * (g->cols - n);
    a->across = g->transposed ? ch : row;
    a->sskip = a->across - n * next;
    a->lead = lead;
    a->tail = (n - lead) & 1;
    a->pad_along = pad_along;
    a->shape = lead == 1 && a->pairs == 2 && a->tail == 1 ? 6 : lead == 1 && a->pairs == 1 && a->tail == 0 ? 3 : 0;
}

/* Input lines j0 .. j0 + count - 1 of channels c .. c + 3 (x: channel c's first byte), plus the input offset,
 * into plane lines from d0 on (a prepared fill, mcu_dwpl_fill_prep). */
static inline void mcu_dwpl_fill(mcu_dwpl_fill_args *a, int16_t *d0, const int8_t *x, int32_t j0, int32_t count)
{
    if (count <= 0) {
        return;
    }
    a->d = d0 + a->pad_along;
    a->s = x + j0 * a->across;
    a->lines = count;
#if MCU_S8_DSP_NATIVE
    if (a->shape == 6) {
        mcu_dwpl_fill_lines6(a);
    } else if (a->shape == 3) {
        mcu_dwpl_fill_lines3(a);
    } else {
        mcu_dwpl_fill_lines(a);
    }
#else
    /* the assembly's steps in C */
    const int32_t pl = a->pl_bytes / 2;
    int16_t *d = a->d;
    const int8_t *sp = a->s;
    for (; a->lines > 0; --a->lines) {
        if (a->lead) {
            mcu_dwpl_put1(d, pl, sp, a->off2);
            d += 1;
            sp += a->next;
        }
        for (int32_t i = 0; i < a->pairs; ++i, d += 2, sp += 2 * a->next) {
            mcu_dwpl_put2(d, pl, sp, sp + a->next, a->off2);
        }
        if (a->tail) {
            mcu_dwpl_put1(d, pl, sp, a->off2);
            d += 1;
            sp += a->next;
        }
        d += a->dskip / 2;
        sp += a->sskip;
    }
#endif
}

/* Plane line `line` of all four planes set to zero (a line outside the image). */
static inline void mcu_dwpl_line4(const mcu_dwpl_geom *g, int16_t *planes, int32_t line)
{
    for (int32_t k = 0; k < 4; ++k) {
        int16_t *d = planes + k * g->plane + line * g->cols;
        int32_t i = 0;
        for (; i + 8 <= g->cols; i += 8) { /* four words a step */
            mcu_store_u32(d + i, 0u);
            mcu_store_u32(d + i + 2, 0u);
            mcu_store_u32(d + i + 4, 0u);
            mcu_store_u32(d + i + 6, 0u);
            __asm__("" ::: "memory"); /* no memset call: the kernels reference no libc function */
        }
        for (; i < g->cols; i += 2) { /* cols is even */
            mcu_store_u32(d + i, 0u);
            __asm__("" ::: "memory");
        }
    }
}

/* Plane lines band and band + 1 of the four planes (the previous band's last two input lines) into lines 0 and 1:
 * neighbours, so a run of cols words a plane, eight a step by one LDM and one STM (18 cycles on the M4/M33 model; a
 * line at a time by single loads and stores took about 6 cycles a word: 22 k estimated cycles of mobilenet_v1's
 * bands). */
static inline void mcu_dwpl_carry(const mcu_dwpl_geom *g, int16_t *planes)
{
    for (int32_t k = 0; k < 4; ++k) {
        int16_t *d = planes + k * g->plane;
        const int16_t *s = d + g->band * g->cols;
        int32_t words = g->cols;
#if MCU_S8_DSP_NATIVE
        int32_t steps = words >> 3;
        if (steps > 0) {
            __asm__ volatile("1:\n\t"
                             "ldmia %0!, {r2, r3, r4, r5, r8, r9, r10, r11}\n\t"
                             "stmia %1!, {r2, r3, r4, r5, r8, r9, r10, r11}\n\t"
                             "subs %2, %2, #1\n\t"
                             "bne 1b\n\t"
                             : "+r"(s), "+r"(d), "+r"(steps)
                             :
                             : "r2", "r3", "r4", "r5", "r8", "r9", "r10", "r11", "cc", "memory");
            words &= 7;
        }
#endif
        for (int32_t i = 0; i < words; ++i) {
            mcu_store_u32(d + 2 * i, mcu_load_u32(s + 2 * i));
            __asm__("" ::: "memory"); /* no memcpy call: the kernels reference no libc function */
        }
    }
}

/* One channel's constants and where its output goes, at the offsets the assembly reads. The weights
 * and the bias are doubled, so that the accumulator is 2 acc (|acc| < 2^30: mcu_dwpl_quant_ok) and
 * the requantization is one SMMLAR (see mcu_dwpl_rq). */
typedef struct {
    int8_t *y;          /* the next output pixel */
    int32_t step;       /* bytes between a line's output pixels */
    const int16_t *end; /* the plane position after the current line's last quad or six (stride 1) or pair of
                         * pixels; after the band's last line for the one-step lines (three, six) */
    uint32_t w[6];      /* kernel line i: 2 (w_i0, w_i1) and 2 (w_i1, w_i2) in the plane's orientation */
    uint32_t bias;      /* 2 bias (MCU_DWPL_SCALED: 2^e bias) */
    int32_t m;          /* the multiplier */
    int32_t c;          /* 2^(R-1) + output_offset 2^R (MCU_DWPL_SCALED: mcu_dwpl_rq_scaled's) */
    int32_t sh;         /* R */
    uint32_t min4, max4; /* the activation bounds in four bytes each */
    int32_t odd;         /* the lines' pixel count is odd: a last pixel alone */
    int32_t skip;        /* bytes from a line's end to the next line's start in the plane */
    int32_t yskip;       /* bytes from a line's last output pixel + step to the next line's first (MCU_DWPL_PACKED: from
                          * a line's first output pixel to the next line's first) */
    int32_t lines;       /* lines left */
    int32_t tail;        /* the line's pixel count modulo 4: a pair (2) and a pixel alone (1) after its quads */
    int32_t next;        /* one-step lines (three, six): bytes from end to the next channel's plane (t + 1) */
    int32_t more;        /* one-step lines: another channel of the group follows (t + 1) */
} mcu_dwpl_ch;

/* The requantization of the doubled accumulator s = 2 acc (mcu_dwpl_quant_ok held), plus the output
 * offset, saturated to int8: SMMLAR takes the high word of C 2^32 + s m + 2^31, which is
 *   C + floor((acc m + 2^30) / 2^31) = C + y   (y: mcu_rounding_doubling_high_mul(acc, m)),
 * and rounding_divide_by_pot(y, R) + output_offset = floor((y + 2^(R-1) - [y < 0] + output_offset 2^R) / 2^R),
 * [y < 0] replaced by [acc < 0] (they differ only where y == 0, and both give 0 there: common/rq_s8_dsp.h).
 * So: the sign of s added to C (ASR #31), one SMMLAR, an ASR by R and SSAT: 4 instructions with the
 * constants in registers, against the 64-bit SMLAL's 7. */
static inline int32_t mcu_dwpl_rq(const mcu_dwpl_ch *t, uint32_t s, int relu)
{
    const int32_t a = mcu_u32_to_s32(s);
    /* modulo 2^32 as the core's high word (mcu_dwpl_quant_ok keeps it from wrapping); without the sign
     * correction for MCU_DWPL_RELU, as the assembly's loops for it */
    const uint32_t hi = (uint32_t)t->c + (a < 0 && !relu ? 0xFFFFFFFFu : 0u) +
                        (uint32_t)mcu_asr64((int64_t)a * t->m + ((int64_t)1 << 31), 32);
    return mcu_clamp_s32(mcu_asr32(mcu_u32_to_s32(hi), t->sh), -128, 127);
}

/* The scaled requantization (MCU_DWPL_SCALED, s = 2^e acc, e = MCU_DWPL_SCALE - R): mcu_dwpl_rq's RELU form is
 * floor((2 acc m + 2^31 + C0 2^32) / 2^(32+R)), C0 = (2 output_offset + 1) 2^(R-1); above and below times 2^(e-1)
 * (e - 1 + R = 14) it is floor((s m + C 2^32) / 2^46) with C = 2^(e-2) + (2 output_offset + 1) 2^13: SMMLA's
 * high word (the low word dropped, a floor) and SSAT's ASR #14, the same bits. */
static inline int32_t mcu_dwpl_rq_scaled(const mcu_dwpl_ch *t, uint32_t s, int32_t scale)
{
    const uint32_t hi = (uint32_t)t->c + (uint32_t)mcu_asr64((int64_t)mcu_u32_to_s32(s) * t->m, 32);
    return mcu_clamp_s32(mcu_asr32(mcu_u32_to_s32(hi), scale - 1), -128, 127);
}

/* The lanes of v times those of f (their products fit int16: SMULBB, SMULTT, PKHBT). */
static inline uint32_t mcu_dwpl_lanes_mul(uint32_t v, uint32_t f)
{
    const int32_t lo = (int32_t)(int16_t)(uint16_t)v * (int32_t)(int16_t)(uint16_t)f;
    const int32_t hi = ((int32_t)v >> 16) * ((int32_t)f >> 16);
    return mcu_dwpl_lows((uint32_t)lo, (uint32_t)hi);
}

/* Channel (0, 1) or (2, 3)'s lanes of two doubled words: (lo(a), lo(b)) or (hi(a), hi(b)). */
static inline __attribute__((always_inline)) uint32_t mcu_dwpl_pick(int hi, uint32_t a, uint32_t b)
{
    return hi ? mcu_dwpl_highs(a, b) : mcu_dwpl_lows(a, b);
}

/* One channel's weight words from its lane (hi) of the nine doubled taps l0 .. l8 (tap 3 i + j). */
static inline __attribute__((always_inline)) void mcu_dwpl_ch_lanes(mcu_dwpl_ch *tk, int hi, int s2, uint32_t l0,
                                                                      uint32_t l1, uint32_t l2, uint32_t l3,
                                                                      uint32_t l4, uint32_t l5, uint32_t l6,
                                                                      uint32_t l7, uint32_t l8)
{
    if (!s2) {
        tk->w[0] = mcu_dwpl_pick(hi, l0, l1);
        tk->w[1] = mcu_dwpl_pick(hi, l1, l2);
        tk->w[2] = mcu_dwpl_pick(hi, l3, l4);
        tk->w[3] = mcu_dwpl_pick(hi, l4, l5);
        tk->w[4] = mcu_dwpl_pick(hi, l6, l7);
        tk->w[5] = mcu_dwpl_pick(hi, l7, l8);
    } else {
        tk->w[0] = mcu_dwpl_pick(hi, l0, l1);
        tk->w[1] = mcu_dwpl_pick(hi, l3, l4);
        tk->w[2] = mcu_dwpl_pick(hi, l6, l7);
        tk->w[3] = mcu_dwpl_pick(hi, l2, l5);
        tk->w[4] = mcu_dwpl_pick(hi, l8, 0);
        tk->w[5] = 0;
    }
}

/* The requantization and bias fields of channels c .. c + 3 (t[0 .. 3]; the arrays from channel c). */
static inline __attribute__((always_inline)) void mcu_dwpl_group_rq(mcu_dwpl_ch t[4], const int32_t *multiplier,
                                                                    const int32_t *shift, const int32_t *bias,
                                                                    int32_t output_offset, int scaled)
{
    /* 2^(R-1) + output_offset 2^R = (2 output_offset + 1) 2^(R-1), R - 1 = ~shift: fits (mcu_dwpl_quant_ok);
     * unsigned, so that no step overflows. The four channels in straight lines (a loop with the bias's test
     * in it: about 28 cycles a channel on the M33 model). */
    const uint32_t k2 = 2u * (uint32_t)output_offset + 1u;
    /* every read before the first write: t's int32_t fields may alias the arrays, so GCC reloaded each
     * shift after the stores */
    const int32_t m0 = multiplier[0], m1 = multiplier[1], m2 = multiplier[2], m3 = multiplier[3];
    const int32_t sh0 = shift[0], sh1 = shift[1], sh2 = shift[2], sh3 = shift[3];
    const uint32_t b0 = bias != NULL ? 2u * (uint32_t)bias[0] : 0u, b1 = bias != NULL ? 2u * (uint32_t)bias[1] : 0u;
    const uint32_t b2 = bias != NULL ? 2u * (uint32_t)bias[2] : 0u, b3 = bias != NULL ? 2u * (uint32_t)bias[3] : 0u;
    /* scaled: 2^e bias (the doubled one times 2^(e-1)) and C = 2^(e-2) + k2 2^(MCU_DWPL_SCALE - 2) (see
     * mcu_dwpl_rq_scaled) */
#define MCU_DWPL_RQ_INIT(k, bk, mk, sk)                                                                  \
    t[k].bias = scaled ? (bk) << ((MCU_DWPL_SCALE - 1 + (sk)) & 31) : (bk);                           \
    t[k].m = (mk);                                                                                       \
    t[k].c = scaled ? mcu_u32_to_s32((1u << ((MCU_DWPL_SCALE - 2 + (sk)) & 31)) + (k2 << (MCU_DWPL_SCALE - 2))) \
                    : mcu_u32_to_s32(k2 << (~(uint32_t)(sk) & 31u));                                     \
    t[k].sh = -(sk);
    MCU_DWPL_RQ_INIT(0, b0, m0, sh0) MCU_DWPL_RQ_INIT(1, b1, m1, sh1) MCU_DWPL_RQ_INIT(2, b2, m2, sh2)
    MCU_DWPL_RQ_INIT(3, b3, m3, sh3)
#undef MCU_DWPL_RQ_INIT
}

/* The constants of channels c .. c + 3 into t[0 .. 3] (w: their first tap's weights, taps [3][3][ch]):
 * kernel line i's taps at (i across + j along) ch bytes, j = 0 .. 2 (across 3, along 1; transposed
 * lines 1 and 3). Stride 1 (s2 0): the lane pairs (w_i0 w_i1), (w_i1 w_i2); stride 2: (w_i0 w_i1) of the
 * three kernel lines, then the third column's (w02 w12), (w22 0). All four channels from one word per
 * tap, doubled and split into lane pairs with SXTB16/SXTAB16 and packed with PKHBT/PKHTB, in straight
 * lines: about a third of the instructions of a channel's bytes one by one, for the 3 x 3 and 6 x 6
 * images where a channel's set-up weighs against its few pixels. Then the requantization (shift in
 * [-24, -1]) and the bias. */
static inline __attribute__((always_inline)) void
mcu_dwpl_group_init_as(mcu_dwpl_ch t[4], const int8_t *w, int32_t ch, int32_t across, int32_t along, int s2,
                       const int32_t *multiplier, const int32_t *shift, const int32_t *bias, int32_t output_offset,
                       int scaled)
{
    const size_t a = (size_t)across * (size_t)ch, b = (size_t)along * (size_t)ch;
    const uint32_t v0 = mcu_load_u32(w), v1 = mcu_load_u32(w + b), v2 = mcu_load_u32(w + 2 * b);
    const uint32_t v3 = mcu_load_u32(w + a), v4 = mcu_load_u32(w + a + b), v5 = mcu_load_u32(w + a + 2 * b);
    const uint32_t v6 = mcu_load_u32(w + 2 * a), v7 = mcu_load_u32(w + 2 * a + b);
    const uint32_t v8 = mcu_load_u32(w + 2 * a + 2 * b);
    /* scaled: channel k's lanes times 2^e_k, e_k = MCU_DWPL_SCALE - R_k (MCU_DWPL_SCALED), one SMULBB and one
     * SMULTT a word (2 instructions more a tap word than the doubling) */
    const uint32_t f02 = scaled ? (1u << (MCU_DWPL_SCALE + shift[0])) | (1u << (MCU_DWPL_SCALE + 16 + shift[2])) : 0u;
    const uint32_t f13 = scaled ? (1u << (MCU_DWPL_SCALE + shift[1])) | (1u << (MCU_DWPL_SCALE + 16 + shift[3])) : 0u;
#define MCU_DWPL_EVEN(v) (scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16(v), f02) : mcu_sxtab16(mcu_sxtb16(v), v)) /* 0, 2 */
#define MCU_DWPL_ODD(v)                                                                                               \
    (scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16_ror8(v), f13) : mcu_sxtab16_ror8(mcu_sxtb16_ror8(v), v)) /* 1, 3 */
    const uint32_t e0 = MCU_DWPL_EVEN(v0), e1 = MCU_DWPL_EVEN(v1), e2 = MCU_DWPL_EVEN(v2), e3 = MCU_DWPL_EVEN(v3),
                   e4 = MCU_DWPL_EVEN(v4), e5 = MCU_DWPL_EVEN(v5), e6 = MCU_DWPL_EVEN(v6), e7 = MCU_DWPL_EVEN(v7),
                   e8 = MCU_DWPL_EVEN(v8);
    mcu_dwpl_ch_lanes(&t[0], 0, s2, e0, e1, e2, e3, e4, e5, e6, e7, e8);
    mcu_dwpl_ch_lanes(&t[2], 1, s2, e0, e1, e2, e3, e4, e5, e6, e7, e8);
    const uint32_t o0 = MCU_DWPL_ODD(v0), o1 = MCU_DWPL_ODD(v1), o2 = MCU_DWPL_ODD(v2), o3 = MCU_DWPL_ODD(v3),
                   o4 = MCU_DWPL_ODD(v4), o5 = MCU_DWPL_ODD(v5), o6 = MCU_DWPL_ODD(v6), o7 = MCU_DWPL_ODD(v7),
                   o8 = MCU_DWPL_ODD(v8);
#undef MCU_DWPL_EVEN
#undef MCU_DWPL_ODD
    mcu_dwpl_ch_lanes(&t[1], 0, s2, o0, o1, o2, o3, o4, o5, o6, o7, o8);
    mcu_dwpl_ch_lanes(&t[3], 1, s2, o0, o1, o2, o3, o4, o5, o6, o7, o8);
    mcu_dwpl_group_rq(t, multiplier, shift, bias, output_offset, scaled);
}

static inline void mcu_dwpl_group_init(mcu_dwpl_ch t[4], const int8_t *w, int32_t ch, int32_t across, int32_t along,
                                       int s2, const int32_t *multiplier, const int32_t *shift, const int32_t *bias,
                                       int32_t output_offset)
{
    mcu_dwpl_group_init_as(t, w, ch, across, along, s2, multiplier, shift, bias, output_offset, 0);
}

/* Kernel line i's two words of channels c .. c + 3 from its taps' words v0 v1 v2 (taps j = 0 .. 2, a byte a
 * channel), stride 1: (w_i0 w_i1) and (w_i1 w_i2), doubled (scaled: times 2^e, the factors f02 and f13). */
static inline __attribute__((always_inline)) void mcu_dwpl_line_s1(mcu_dwpl_ch t[4], int i, uint32_t v0, uint32_t v1,
                                                                   uint32_t v2, int scaled, uint32_t f02,
                                                                   uint32_t f13)
{
    const uint32_t e0 = scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16(v0), f02) : mcu_sxtab16(mcu_sxtb16(v0), v0);
    const uint32_t e1 = scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16(v1), f02) : mcu_sxtab16(mcu_sxtb16(v1), v1);
    const uint32_t e2 = scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16(v2), f02) : mcu_sxtab16(mcu_sxtb16(v2), v2);
    t[0].w[2 * i] = mcu_dwpl_lows(e0, e1);
    t[0].w[2 * i + 1] = mcu_dwpl_lows(e1, e2);
    t[2].w[2 * i] = mcu_dwpl_highs(e0, e1);
    t[2].w[2 * i + 1] = mcu_dwpl_highs(e1, e2);
    const uint32_t o0 = scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16_ror8(v0), f13)
                               : mcu_sxtab16_ror8(mcu_sxtb16_ror8(v0), v0);
    const uint32_t o1 = scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16_ror8(v1), f13)
                               : mcu_sxtab16_ror8(mcu_sxtb16_ror8(v1), v1);
    const uint32_t o2 = scaled ? mcu_dwpl_lanes_mul(mcu_sxtb16_ror8(v2), f13)
                               : mcu_sxtab16_ror8(mcu_sxtb16_ror8(v2), v2);
    t[1].w[2 * i] = mcu_dwpl_lows(o0, o1);
    t[1].w[2 * i + 1] = mcu_dwpl_lows(o1, o2);
    t[3].w[2 * i] = mcu_dwpl_highs(o0, o1);
    t[3].w[2 * i + 1] = mcu_dwpl_highs(o1, o2);
}

/* mcu_dwpl_group_init_as for stride 1, a kernel line at a time: its three tap words and six lanes, so that no value
 * outlives its line (the nine words and eighteen lanes at once spilled to the stack). The widening is about 130
 * cycles a group on the M33 model; the set-up as a whole gains little (the requantization words spill instead), but
 * mobilenet_v1 measured about 15 k estimated cycles fewer on mps2-an386-l4r5 than with mcu_dwpl_group_init_as in
 * line, the others a few k fewer. */
static inline __attribute__((always_inline)) void
mcu_dwpl_group_init_s1(mcu_dwpl_ch t[4], const int8_t *w, int32_t ch, int32_t across, int32_t along,
                       const int32_t *multiplier, const int32_t *shift, const int32_t *bias, int32_t output_offset,
                       int scaled)
{
    const size_t a = (size_t)across * (size_t)ch, b = (size_t)along * (size_t)ch;
    const uint32_t f02 = scaled ? (1u << (MCU_DWPL_SCALE + shift[0])) | (1u << (MCU_DWPL_SCALE + 16 + shift[2])) : 0u;
    const uint32_t f13 = scaled ? (1u << (MCU_DWPL_SCALE + shift[1])) | (1u << (MCU_DWPL_SCALE + 16 + shift[3])) : 0u;
    mcu_dwpl_group_rq(t, multiplier, shift, bias, output_offset, scaled);
    for (int i = 0; i < 3; ++i, w += a) {
        mcu_dwpl_line_s1(t, i, mcu_load_u32(w), mcu_load_u32(w + b), mcu_load_u32(w + 2 * b), scaled, f02, f13);
    }
}

/* The fields of t[0 .. 3] fixed for a layer: the output step, the line's tail, the plane's skip from a
 * line's end to the next line, the output's, the clamp. */
static inline void mcu_dwpl_ch_layer(mcu_dwpl_ch t[4], int32_t step, int32_t len, int32_t skip, int32_t yskip,
                                     int32_t act_min, int32_t act_max)
{
    for (int32_t k = 0; k < 4; ++k) {
        t[k].step = step;
        t[k].tail = len & 3;
        t[k].odd = len & 1;
        t[k].skip = skip;
        t[k].yskip = yskip;
        t[k].min4 = mcu_splat4_s8(act_min);
        t[k].max4 = mcu_splat4_s8(act_max);
    }
}

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_dwpl_ch, step) == 4 && offsetof(mcu_dwpl_ch, end) == 8 && offsetof(mcu_dwpl_ch, w) == 12 &&
                   offsetof(mcu_dwpl_ch, bias) == 36 && offsetof(mcu_dwpl_ch, m) == 40 &&
                   offsetof(mcu_dwpl_ch, c) == 44 && offsetof(mcu_dwpl_ch, sh) == 48 &&
                   offsetof(mcu_dwpl_ch, min4) == 52 && offsetof(mcu_dwpl_ch, odd) == 60 &&
                   offsetof(mcu_dwpl_ch, skip) == 64 && offsetof(mcu_dwpl_ch, yskip) == 68 &&
                   offsetof(mcu_dwpl_ch, lines) == 72 && offsetof(mcu_dwpl_ch, tail) == 76 &&
                   offsetof(mcu_dwpl_ch, next) == 80 && offsetof(mcu_dwpl_ch, more) == 84 &&
                   sizeof(mcu_dwpl_ch) == 88,
               "mcu_dwpl_ch layout (offsets in MCU_DWPL_CHANNEL)");

/* A channel's lines, hand-scheduled: r0 the position in the line's first plane line, r1 the bytes
 * of a plane line, r12 the constants (mcu_dwpl_ch), r8-r11 the accumulators. Four output pixels a
 * step (a quad): per kernel line its two weight words and the plane words (x0 x1) (x2 x3) (x4 x5) in
 * one chain of single loads (a load after a load takes one cycle on the M4/M33: six words in 7 cycles
 * where the weights held in registers left room for two pixels only, three LDRD a pair), then
 *   pixel 0: SMLAD (x0 x1)(w0 w1) + SMLABT x2 w2     pixel 1: SMLATB x1 w0 + SMLAD (x2 x3)(w1 w2)
 *   pixel 2: SMLAD (x2 x3)(w0 w1) + SMLABT x4 w2     pixel 3: SMLATB x3 w0 + SMLAD (x4 x5)(w1 w2)
 * the first kernel line's MACs starting from the bias. The four requantizations share one chain of
 * loads of the multiplier, C and R, the output step and the quads' end (the sign of the doubled
 * accumulator added to C ahead of the SMMLAR: the same high word as adding it after); the optional
 * byte clamp on the four bytes packed; four STRB through the output pointer held in r7. About 80
 * cycles a quad against 104 for two pairs. A line's last two pixels (a pair) and a last pixel alone
 * (odd) take the same steps with two and one accumulators. The stride-2 loops (below) have no register
 * left for the output pointer and keep it in memory (MCU_DWPL_OUT4 and its kin). */
#define MCU_DWPL_CLAMP2                                                                       \
    "bfi r8, r9, #8, #8\n\t" MCU_DWPL_CLAMP1 "lsr r9, r8, #8\n\t"
#define MCU_DWPL_CLAMP1                                                                       \
    "ldrd r2, r3, [r12, #52]\n\t"                                                             \
    "ssub8 r4, r8, r2\n\t"                                                                    \
    "sel r8, r8, r2\n\t"                                                                      \
    "ssub8 r4, r3, r8\n\t"                                                                    \
    "sel r8, r8, r3\n\t"
#define MCU_DWPL_CLAMP4                                                                       \
    "bfi r8, r9, #8, #8\n\t"                                                                  \
    "bfi r8, r10, #16, #8\n\t"                                                                \
    "bfi r8, r11, #24, #8\n\t" MCU_DWPL_CLAMP1                                                \
    "lsr r9, r8, #8\n\t"                                                                      \
    "lsr r10, r8, #16\n\t"                                                                    \
    "lsr r11, r8, #24\n\t"
/* Kernel line i's weights (offset wofs) and plane words from x (then x, a register, stepped on by
 * `step`, an instruction among the MACs that follow). */
#define MCU_DWPL_LD3(wofs, x)                                                                 \
    "ldr r2, [r12, #" wofs "]\n\t"                                                            \
    "ldr r3, [r12, #" wofs " + 4]\n\t"                                                        \
    "ldr r4, [" x "]\n\t"                                                                     \
    "ldr r5, [" x ", #4]\n\t"                                                                 \
    "ldr r6, [" x ", #8]\n\t"
#define MCU_DWPL_LD2(wofs, x)                                                                 \
    "ldr r2, [r12, #" wofs "]\n\t"                                                            \
    "ldr r3, [r12, #" wofs " + 4]\n\t"                                                        \
    "ldr r4, [" x "]\n\t"                                                                     \
    "ldr r5, [" x ", #4]\n\t"
/* One kernel line's MACs of a quad, a pair, a pixel alone, onto the accumulators (MCU_DWPL_MAC4_0 and
 * its kin start the first kernel line from the bias); step: one instruction among them. */
#define MCU_DWPL_MAC4(step)                                                                   \
    "smlad r8, r4, r2, r8\n\t"                                                                \
    "smlatb r9, r4, r2, r9\n\t"                                                               \
    "smlad r10, r5, r2, r10\n\t"                                                              \
    "smlatb r11, r5, r2, r11\n\t" step                                                        \
    "smlabt r8, r5, r3, r8\n\t"                                                               \
    "smlad r9, r5, r3, r9\n\t"                                                                \
    "smlabt r10, r6, r3, r10\n\t"                                                             \
    "smlad r11, r6, r3, r11\n\t"
#define MCU_DWPL_MAC2(step)                                                                   \
    "smlad r8, r4, r2, r8\n\t"                                                                \
    "smlatb r9, r4, r2, r9\n\t" step                                                          \
    "smlabt r8, r5, r3, r8\n\t"                                                               \
    "smlad r9, r5, r3, r9\n\t"
#define MCU_DWPL_MAC1(step) "smlad r8, r4, r2, r8\n\t" step "smlabt r8, r5, r3, r8\n\t"
/* The requantization of accumulator a (mcu_dwpl_rq) with r2 the multiplier, r3 C, r6 R, t a temporary:
 * the sign into C, SMMLAR, the shift; SSAT after all of them. */
#define MCU_DWPL_RQ_CONSTS                                                                    \
    "ldr r2, [r12, #40]\n\t"                                                                  \
    "ldr r3, [r12, #44]\n\t" MCU_DWPL_LD_R("r6")
/* R into register r, and the int8 saturation of accumulator a: redefined for the scaled loops (one shift,
 * in the SSAT; no R). */
#define MCU_DWPL_LD_R(r) "ldr " r ", [r12, #48]\n\t"
#define MCU_DWPL_SAT8(a) "ssat " a ", #8, " a "\n\t"
#define MCU_DWPL_RQ_SIGNED(a, t)                                                              \
    "add " t ", r3, " a ", asr #31\n\t"                                                       \
    "smmlar " a ", " a ", r2, " t "\n\t"                                                      \
    "asr " a ", " a ", r6\n\t"
/* The same without the sign correction (MCU_DWPL_RELU): the loops of such layers are compiled with
 * MCU_DWPL_RQ (and MCU_DWPL_RQ6) pointing here (mcu_dwpl_channel_relu, mcu_dwpl_channel_s2_relu). */
#define MCU_DWPL_RQ_RELU(a, t) "smmlar " a ", " a ", r2, r3\n\t" "asr " a ", " a ", r6\n\t"
#define MCU_DWPL_RQ MCU_DWPL_RQ_SIGNED
/* The requantized, clamped outputs of a quad (r8-r11), a pair (r8, r9), a pixel alone (r8) stored from
 * the output pointer on, by its step, and the pointer stepped past them (the quad's LDM also loads the
 * quads' end into lr). */
#define MCU_DWPL_OUT4(clamp4)                                                                 \
    MCU_DWPL_RQ_CONSTS MCU_DWPL_RQ("r8", "r4") MCU_DWPL_RQ("r9", "r5") MCU_DWPL_RQ("r10", "r4")   \
        MCU_DWPL_RQ("r11", "r5")                                                              \
    "ssat r8, #8, r8\n\t"                                                                     \
    "ssat r9, #8, r9\n\t"                                                                     \
    "ssat r10, #8, r10\n\t"                                                                   \
    "ssat r11, #8, r11\n\t" clamp4                                                            \
    "ldm r12, {r2, r3, lr}\n\t"                                                               \
    "add r4, r2, r3, lsl #1\n\t"                                                              \
    "strb r8, [r2]\n\t"                                                                       \
    "strb r9, [r2, r3]\n\t"                                                                   \
    "strb r10, [r4]\n\t"                                                                      \
    "strb r11, [r4, r3]\n\t"                                                                  \
    "add r4, r4, r3, lsl #1\n\t"                                                              \
    "str r4, [r12]\n\t"
#define MCU_DWPL_OUT2(clamp2)                                                                 \
    MCU_DWPL_RQ_CONSTS MCU_DWPL_RQ("r8", "r4") MCU_DWPL_RQ("r9", "r5")                        \
    MCU_DWPL_SAT8("r8") MCU_DWPL_SAT8("r9") clamp2                                            \
    "ldrd r10, r11, [r12]\n\t"                                                                \
    "strb r8, [r10]\n\t"                                                                      \
    "strb r9, [r10, r11]\n\t"                                                                 \
    "add r10, r10, r11, lsl #1\n\t"                                                           \
    "str r10, [r12]\n\t"
#define MCU_DWPL_OUT1(clamp1)                                                                 \
    MCU_DWPL_RQ_CONSTS MCU_DWPL_RQ("r8", "r4")                                                \
    MCU_DWPL_SAT8("r8") clamp1                                                                \
    "ldrd r10, r11, [r12]\n\t"                                                                \
    "strb r8, [r10]\n\t"                                                                      \
    "add r10, r10, r11\n\t"                                                                   \
    "str r10, [r12]\n\t"
/* The line's tail into the flags: C its pair, N its pixel alone (a pair's steps set no flags: no
 * instruction of theirs has the S suffix, SSUB8 sets GE only). */
#define MCU_DWPL_TAIL                                                                         \
    "ldr r2, [r12, #76]\n\t"                                                                  \
    "lsls r2, r2, #31\n\t"
/* Stride 1 keeps the output pointer in r7 from the channel's start (the bias goes to r8, which the
 * other accumulators start from before r8 itself): per quad no LDM of it and no store back. The first
 * kernel line's MACs of a quad, a pair, three pixels: */
#define MCU_DWPL_MAC4_0(step)                                                                 \
    "smlatb r9, r4, r2, r8\n\t"                                                               \
    "smlad r10, r5, r2, r8\n\t"                                                               \
    "smlatb r11, r5, r2, r8\n\t"                                                              \
    "smlad r8, r4, r2, r8\n\t" step                                                           \
    "smlabt r8, r5, r3, r8\n\t"                                                               \
    "smlad r9, r5, r3, r9\n\t"                                                                \
    "smlabt r10, r6, r3, r10\n\t"                                                             \
    "smlad r11, r6, r3, r11\n\t"
#define MCU_DWPL_MAC2_0(step)                                                                 \
    "smlatb r9, r4, r2, r8\n\t"                                                               \
    "smlad r8, r4, r2, r8\n\t" step                                                           \
    "smlabt r8, r5, r3, r8\n\t"                                                               \
    "smlad r9, r5, r3, r9\n\t"
/* The requantization's constants and the output step (lr) in one chain; the stores through r7. */
#define MCU_DWPL_RQ_STEP MCU_DWPL_RQ_CONSTS "ldr lr, [r12, #4]\n\t"
#define MCU_DWPL_OUT4Y(clamp4)                                                                \
    MCU_DWPL_RQ_STEP "ldr r5, [r12, #8]\n\t" MCU_DWPL_RQ("r8", "r4") MCU_DWPL_RQ("r9", "r4")  \
        MCU_DWPL_RQ("r10", "r4") MCU_DWPL_RQ("r11", "r4")                                     \
    "ssat r8, #8, r8\n\t"                                                                     \
    "ssat r9, #8, r9\n\t"                                                                     \
    "ssat r10, #8, r10\n\t"                                                                   \
    "ssat r11, #8, r11\n\t" clamp4                                                            \
    "add r4, r7, lr, lsl #1\n\t"                                                              \
    "strb r8, [r7]\n\t"                                                                       \
    "strb r9, [r7, lr]\n\t"                                                                   \
    "strb r10, [r4]\n\t"                                                                      \
    "strb r11, [r4, lr]\n\t"                                                                  \
    "add r7, r4, lr, lsl #1\n\t"
#define MCU_DWPL_OUT2Y(clamp2)                                                                \
    MCU_DWPL_RQ_STEP MCU_DWPL_RQ("r8", "r4") MCU_DWPL_RQ("r9", "r4")                          \
    "ssat r8, #8, r8\n\t"                                                                     \
    "ssat r9, #8, r9\n\t" clamp2                                                              \
    "strb r8, [r7]\n\t"                                                                       \
    "strb r9, [r7, lr]\n\t"                                                                   \
    "add r7, r7, lr, lsl #1\n\t"
#define MCU_DWPL_OUT1Y(clamp1)                                                                \
    MCU_DWPL_RQ_STEP MCU_DWPL_RQ("r8", "r4")                                                  \
    "ssat r8, #8, r8\n\t" clamp1                                                              \
    "strb r8, [r7]\n\t"                                                                       \
    "add r7, r7, lr\n\t"
/* The line's end with the output pointer in r7. */
#define MCU_DWPL_LINE_END_Y                                                                   \
    "2:\n\t"                                                                                  \
    "ldr lr, [r12, #64]\n\t"                                                                  \
    "ldr r10, [r12, #8]\n\t"                                                                  \
    "ldr r11, [r12, #68]\n\t"                                                                 \
    "ldr r2, [r12, #72]\n\t"                                                                  \
    "add r0, r0, lr\n\t"                                                                      \
    "add r10, r10, r1\n\t"                                                                    \
    "add r7, r7, r11\n\t"                                                                     \
    "subs r2, r2, #1\n\t"                                                                     \
    "str r10, [r12, #8]\n\t"                                                                  \
    "str r2, [r12, #72]\n\t"                                                                  \
    "bne 1b\n\t"
/* The same for lines of three pixels (stride 1), whose plane line is always MCU_DWPL_COLS(3) int16 (the skip of a
 * line that leaves the position at its start) and whose end is the position after the last line (t->end, set so
 * by mcu_dwpl_layer): no count of lines in memory and no load of the skip (2 instructions a line). */
#define MCU_DWPL_LINE3_S "12"
_Static_assert(MCU_DWPL_COLS(3) * 2 == 12, "MCU_DWPL_LINE3_S: the bytes of a plane line of three pixels");
#define MCU_DWPL_LINE_END_Y3                                                                  \
    "ldr r11, [r12, #68]\n\t"                                                                 \
    "ldr r2, [r12, #8]\n\t"                                                                   \
    "add r0, r0, #" MCU_DWPL_LINE3_S "\n\t"                                                   \
    "add r7, r7, r11\n\t"                                                                     \
    "cmp r0, r2\n\t"                                                                          \
    "bne 1b\n\t"
/* After a channel's one-step lines (three, six), the group's next channel (t->more) from label: its constants at
 * r12 + 88, its plane t->next bytes on from this one's end (where the lines left r0). The four channels of a
 * group in one call: about 7 cycles a channel where the C loop between calls took about 50 (6 x 6 images) and
 * 64 (3 x 3). */
#define MCU_DWPL_NEXT_CH(label)                                                               \
    "ldr r2, [r12, #84]\n\t"                                                                  \
    "ldr r3, [r12, #80]\n\t"                                                                  \
    "add r12, r12, #88\n\t"                                                                   \
    "add r0, r0, r3\n\t"                                                                      \
    "cmp r2, #0\n\t"                                                                          \
    "bne " label "\n\t"
/* A step's three kernel lines: the bias into r8, each line's loads (LD) and MACs (MAC0 for the first),
 * the plane position on by adv among the last line's MACs. */
#define MCU_DWPL_ROWS(LD, MAC0, MAC, adv)                                                     \
    "ldr r8, [r12, #36]\n\t" LD("12", "r0") MAC0("add lr, r0, r1\n\t") LD("20", "lr")          \
        MAC("add lr, lr, r1\n\t") LD("28", "lr") MAC(adv)
#define MCU_DWPL_CHANNEL(clamp4, clamp2, clamp1)                                              \
    "ldr r7, [r12]\n\t"                                                                       \
    ".p2align 2\n\t" /* the loop's first instruction, 32-bit, in one fetch word: refill 2 not 3 */    \
    "1:\n\t"                                                                                  \
    MCU_DWPL_ROWS(MCU_DWPL_LD3, MCU_DWPL_MAC4_0, MCU_DWPL_MAC4, "add r0, r0, #8\n\t")                    \
        MCU_DWPL_OUT4Y(clamp4)                                                                \
    "cmp r0, r5\n\t"                                                                          \
    "bne 1b\n\t"                                                                              \
    MCU_DWPL_TAIL                                                                             \
    "bcc 3f\n\t"                                                                              \
    MCU_DWPL_ROWS(MCU_DWPL_LD2, MCU_DWPL_MAC2_0, MCU_DWPL_MAC2, "add r0, r0, #4\n\t")                    \
        MCU_DWPL_OUT2Y(clamp2)                                                                \
    "3:\n\t"                                                                                  \
    "bpl 2f\n\t"                                                                              \
    MCU_DWPL_ROWS(MCU_DWPL_LD2, MCU_DWPL_MAC1, MCU_DWPL_MAC1, "") MCU_DWPL_OUT1Y(clamp1)              \
        MCU_DWPL_LINE_END_Y
/* Lines of three pixels (3 x 3 images): one step a line, the quad's without its fourth pixel; the
 * position stays at the line's start (the skip is a whole plane line). */
#define MCU_DWPL_MAC3(step)                                                                   \
    "smlad r8, r4, r2, r8\n\t"                                                                \
    "smlatb r9, r4, r2, r9\n\t"                                                               \
    "smlad r10, r5, r2, r10\n\t" step                                                         \
    "smlabt r8, r5, r3, r8\n\t"                                                               \
    "smlad r9, r5, r3, r9\n\t"                                                                \
    "smlabt r10, r6, r3, r10\n\t"
#define MCU_DWPL_MAC3_0(step)                                                                 \
    "smlatb r9, r4, r2, r8\n\t"                                                               \
    "smlad r10, r5, r2, r8\n\t"                                                               \
    "smlad r8, r4, r2, r8\n\t" step                                                           \
    "smlabt r8, r5, r3, r8\n\t"                                                               \
    "smlad r9, r5, r3, r9\n\t"                                                                \
    "smlabt r10, r6, r3, r10\n\t"
#define MCU_DWPL_CLAMP3                                                                       \
    "bfi r8, r9, #8, #8\n\t"                                                                  \
    "bfi r8, r10, #16, #8\n\t" MCU_DWPL_CLAMP1                                                \
    "lsr r9, r8, #8\n\t"                                                                      \
    "lsr r10, r8, #16\n\t"
/* The three requantized outputs (r8-r10), with the output pointer in memory (stride 2) or in r7. */
#define MCU_DWPL_RQ3(clamp3)                                                                  \
    MCU_DWPL_RQ("r8", "r4") MCU_DWPL_RQ("r9", "r4") MCU_DWPL_RQ("r10", "r4") MCU_DWPL_SAT8("r8")   \
        MCU_DWPL_SAT8("r9") MCU_DWPL_SAT8("r10") clamp3
#define MCU_DWPL_OUT3(clamp3)                                                                 \
    MCU_DWPL_RQ_CONSTS MCU_DWPL_RQ3(clamp3)                                                   \
    "ldrd r2, r3, [r12]\n\t"                                                                  \
    "add r4, r2, r3, lsl #1\n\t"                                                              \
    "strb r8, [r2]\n\t"                                                                       \
    "strb r9, [r2, r3]\n\t"                                                                   \
    "strb r10, [r4]\n\t"                                                                      \
    "add r4, r4, r3\n\t"                                                                      \
    "str r4, [r12]\n\t"
#define MCU_DWPL_OUT3Y(clamp3)                                                                \
    MCU_DWPL_RQ_STEP MCU_DWPL_RQ3(clamp3)                                                     \
    "add r4, r7, lr, lsl #1\n\t"                                                              \
    "strb r8, [r7]\n\t"                                                                       \
    "strb r9, [r7, lr]\n\t"                                                                   \
    "strb r10, [r4]\n\t"                                                                      \
    "add r7, r4, lr\n\t"
#define MCU_DWPL_CHANNEL3(clamp3)                                                             \
    "0:\n\t"                                                                                  \
    "ldr r7, [r12]\n\t"                                                                       \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t"                                                                                  \
    MCU_DWPL_ROWS(MCU_DWPL_LD3, MCU_DWPL_MAC3_0, MCU_DWPL_MAC3, "") MCU_DWPL_OUT3Y(clamp3)            \
        MCU_DWPL_LINE_END_Y3 MCU_DWPL_NEXT_CH("0b")
/* Lines of six pixels without the clamp (6 x 6 images: a quad and a pair cost 126 cycles a line, six
 * accumulators one step of about 107): the weights in lr and r1, the plane words x0 .. x7 in r2-r5, the
 * accumulators r6-r11. A plane line of six pixels is always MCU_DWPL_COLS(6) int16, so the second and
 * third kernel lines' words are at fixed offsets from the position, which stays at the line's start:
 * no reload of the line's bytes and no address step between the kernel lines (4 instructions a line). */
#define MCU_DWPL_LINE6_S "20"
_Static_assert(MCU_DWPL_COLS(6) * 2 == 20, "MCU_DWPL_LINE6_S: the bytes of a plane line of six pixels");
#define MCU_DWPL_MAC6(a)                                                                      \
    "smlad r6, r2, lr, " a "\n\t"                                                             \
    "smlatb r7, r2, lr, r7\n\t"                                                               \
    "smlad r8, r3, lr, r8\n\t"                                                                \
    "smlatb r9, r3, lr, r9\n\t"                                                               \
    "smlad r10, r4, lr, r10\n\t"                                                              \
    "smlatb r11, r4, lr, r11\n\t"                                                             \
    "smlabt r6, r3, r1, r6\n\t"                                                               \
    "smlad r7, r3, r1, r7\n\t"                                                                \
    "smlabt r8, r4, r1, r8\n\t"                                                               \
    "smlad r9, r4, r1, r9\n\t"                                                                \
    "smlabt r10, r5, r1, r10\n\t"                                                             \
    "smlad r11, r5, r1, r11\n\t"
#define MCU_DWPL_LD6(wofs, x)                                                                 \
    "ldr lr, [r12, #" wofs "]\n\t"                                                            \
    "ldr r1, [r12, #" wofs " + 4]\n\t"                                                        \
    "ldr r2, [r0, #" x "]\n\t"                                                                \
    "ldr r3, [r0, #" x " + 4]\n\t"                                                            \
    "ldr r4, [r0, #" x " + 8]\n\t"                                                            \
    "ldr r5, [r0, #" x " + 12]\n\t"
/* The six accumulators r6-r11 requantized by RQ (a macro of one accumulator), then saturated to int8. */
#define MCU_DWPL_FINISH6(RQ)                                                                  \
    RQ("r6") RQ("r7") RQ("r8") RQ("r9") RQ("r10") RQ("r11") MCU_DWPL_SAT8("r6") MCU_DWPL_SAT8("r7") \
        MCU_DWPL_SAT8("r8") MCU_DWPL_SAT8("r9") MCU_DWPL_SAT8("r10") MCU_DWPL_SAT8("r11")
#define MCU_DWPL_RQ6_SIGNED(a) "add r3, lr, " a ", asr #31\n\t" "smmlar " a ", " a ", r1, r3\n\t" "asr " a ", " a ", r2\n\t"
#define MCU_DWPL_RQ6_RELU(a) "smmlar " a ", " a ", r1, lr\n\t" "asr " a ", " a ", r2\n\t"
#define MCU_DWPL_RQ6 MCU_DWPL_RQ6_SIGNED
/* A line's first kernel line: twelve MACs onto the bias in r6 (plane words r2-r5, weights lr and r1). */
#define MCU_DWPL_MAC6_0                                                                       \
    "smlatb r7, r2, lr, r6\n\t"                                                               \
    "smlad r8, r3, lr, r6\n\t"                                                                \
    "smlatb r9, r3, lr, r6\n\t"                                                               \
    "smlad r10, r4, lr, r6\n\t"                                                               \
    "smlatb r11, r4, lr, r6\n\t"                                                              \
    "smlad r6, r2, lr, r6\n\t"                                                                \
    "smlabt r6, r3, r1, r6\n\t"                                                               \
    "smlad r7, r3, r1, r7\n\t"                                                                \
    "smlabt r8, r4, r1, r8\n\t"                                                               \
    "smlad r9, r4, r1, r9\n\t"                                                                \
    "smlabt r10, r5, r1, r10\n\t"                                                             \
    "smlad r11, r5, r1, r11\n\t"
/* The MACs of a line of six: the bias, three kernel lines' loads and twelve MACs each, onto r6-r11. */
#define MCU_DWPL_MACS6                                                                        \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t"                                                                                  \
    "ldr r6, [r12, #36]\n\t" MCU_DWPL_LD6("12", "0") MCU_DWPL_MAC6_0                          \
        MCU_DWPL_LD6("20", MCU_DWPL_LINE6_S) MCU_DWPL_MAC6("r6")                               \
            MCU_DWPL_LD6("28", "2 * " MCU_DWPL_LINE6_S) MCU_DWPL_MAC6("r6")
#define MCU_DWPL_CHANNEL6                                                                     \
    MCU_DWPL_MACS6                                                                            \
    "ldr r1, [r12, #40]\n\t"                                                                  \
    "ldr lr, [r12, #44]\n\t"                                                                  \
    MCU_DWPL_LD_R("r2") MCU_DWPL_FINISH6(MCU_DWPL_RQ6)                                    \
    "ldr r3, [r12]\n\t"                                                                       \
    "ldr r4, [r12, #4]\n\t"                                                                   \
    "add r5, r3, r4, lsl #1\n\t"                                                              \
    "strb r6, [r3]\n\t"                                                                       \
    "strb r7, [r3, r4]\n\t"                                                                   \
    "strb r8, [r5]\n\t"                                                                       \
    "strb r9, [r5, r4]\n\t"                                                                   \
    "add r5, r5, r4, lsl #1\n\t"                                                              \
    "add r3, r5, r4, lsl #1\n\t"                                                              \
    "strb r10, [r5]\n\t"                                                                      \
    "strb r11, [r5, r4]\n\t" MCU_DWPL_LINE_END6S MCU_DWPL_NEXT_CH("1b")
/* Six pixels a step along a line (kind 12; lines of 12, 24 and 48, DS-CNN's of 25: about 108 cycles a step
 * against 114 for a quad and a half on the M4/M33 model; mobilenet_v1 on mps2-an505-u575: the 48 x 48 x 8,
 * 24 x 24 x 32 and 12 x 12 x 64 layers 430,481 / 436,629 / 231,580 -> 408,901 / 412,157 / 216,072
 * estimated cycles, DS-CNN's four 25 x 5 x 64 layers 196.8 k -> 191.0 k to 191.6 k each), then the line's pair and pixel alone as the quads' (t->tail: the
 * pair in bits 31 and 29, the pixel in bit 30, so that one LSLS sets C, N and Z for them: a line without
 * them spends 6 cycles on the test, not the 9 of MCU_DWPL_TAIL's two taken branches). The six accumulators and the four plane words
 * of MCU_DWPL_CHANNEL6 leave one register besides the plane's line bytes (r1): a kernel line's (w0 w1) in
 * lr first, for every pixel's MAC with it (the A half), then its (w1 w2) loaded over the plane word (x0 x1),
 * which the other half no longer reads (the B half). The position steps down the kernel lines by r1 and back;
 * the output pointer, its step and the line's end are in memory (t->y, t->step, t->end). */
#define MCU_DWPL_S6_A0                                                                        \
    "smlatb r7, r2, lr, r6\n\t"                                                               \
    "smlad r8, r3, lr, r6\n\t"                                                                \
    "smlatb r9, r3, lr, r6\n\t"                                                               \
    "smlad r10, r4, lr, r6\n\t"                                                               \
    "smlatb r11, r4, lr, r6\n\t"                                                              \
    "smlad r6, r2, lr, r6\n\t"
#define MCU_DWPL_S6_A                                                                         \
    "smlad r6, r2, lr, r6\n\t"                                                                \
    "smlatb r7, r2, lr, r7\n\t"                                                               \
    "smlad r8, r3, lr, r8\n\t"                                                                \
    "smlatb r9, r3, lr, r9\n\t"                                                               \
    "smlad r10, r4, lr, r10\n\t"                                                              \
    "smlatb r11, r4, lr, r11\n\t"
/* step: one instruction among the B half's MACs */
#define MCU_DWPL_S6_B(step)                                                                   \
    "smlabt r6, r3, r2, r6\n\t"                                                               \
    "smlad r7, r3, r2, r7\n\t"                                                                \
    "smlabt r8, r4, r2, r8\n\t" step                                                          \
    "smlad r9, r4, r2, r9\n\t"                                                                \
    "smlabt r10, r5, r2, r10\n\t"                                                             \
    "smlad r11, r5, r2, r11\n\t"
#define MCU_DWPL_S6_X                                                                         \
    "ldr r2, [r0]\n\t"                                                                        \
    "ldr r3, [r0, #4]\n\t"                                                                    \
    "ldr r4, [r0, #8]\n\t"                                                                    \
    "ldr r5, [r0, #12]\n\t"
/* The requantization of accumulator a with lr the multiplier, r3 C, r2 R (r4 a temporary). */
#define MCU_DWPL_RQS_SIGNED(a) "add r4, r3, " a ", asr #31\n\t" "smmlar " a ", " a ", lr, r4\n\t" "asr " a ", " a ", r2\n\t"
#define MCU_DWPL_RQS_RELU(a) "smmlar " a ", " a ", lr, r3\n\t" "asr " a ", " a ", r2\n\t"
#define MCU_DWPL_RQS MCU_DWPL_RQS_SIGNED
#define MCU_DWPL_SIXES                                                                        \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t"                                                                                  \
    "ldr r6, [r12, #36]\n\t"                                                                  \
    "ldr lr, [r12, #12]\n\t" MCU_DWPL_S6_X MCU_DWPL_S6_A0                                      \
    "ldr r2, [r12, #16]\n\t"                                                                  \
    "ldr lr, [r12, #20]\n\t" MCU_DWPL_S6_B("add r0, r0, r1\n\t") MCU_DWPL_S6_X MCU_DWPL_S6_A  \
    "ldr r2, [r12, #24]\n\t"                                                                  \
    "ldr lr, [r12, #28]\n\t" MCU_DWPL_S6_B("add r0, r0, r1\n\t") MCU_DWPL_S6_X MCU_DWPL_S6_A  \
    "ldr r2, [r12, #32]\n\t"                                                                  \
    "sub r0, r0, r1, lsl #1\n\t" MCU_DWPL_S6_B("add r0, r0, #12\n\t")                         \
    "ldr lr, [r12, #40]\n\t"                                                                  \
    "ldr r3, [r12, #44]\n\t"                                                                  \
    MCU_DWPL_LD_R("r2") MCU_DWPL_FINISH6(MCU_DWPL_RQS)                                    \
    "ldr r3, [r12]\n\t"                                                                       \
    "ldr r4, [r12, #4]\n\t"                                                                   \
    "ldr r5, [r12, #8]\n\t"                                                                   \
    "add r2, r3, r4, lsl #1\n\t"                                                              \
    "strb r6, [r3]\n\t"                                                                       \
    "strb r7, [r3, r4]\n\t"                                                                   \
    "add lr, r2, r4, lsl #1\n\t"                                                              \
    "strb r8, [r2]\n\t"                                                                       \
    "strb r9, [r2, r4]\n\t"                                                                   \
    "strb r10, [lr]\n\t"                                                                      \
    "strb r11, [lr, r4]\n\t"                                                                  \
    "add r3, lr, r4, lsl #1\n\t"                                                              \
    "str r3, [r12]\n\t"                                                                       \
    "cmp r0, r5\n\t"                                                                          \
    "bne 1b\n\t"
/* The sixes of MCU_DWPL_SCALED lines whose plane line is LB bytes (a string: the loop is one copy per line length,
 * mcu_dwpl_channel_scaled), for lines of whole sixes (kind 12). With the kernel lines' plane words at immediate
 * offsets the position stays at the line's first plane line (no adds down the kernel lines and back), which frees
 * r1 for the output pointer: no load and store of t->y a step, and the line's end steps it in a register. The
 * multiplier comes with the last kernel line's (w1 w2), C, the output step and the line's end in one chain. A kind-12
 * line is even (len % 6 == 0), so the sixes leave the position MCU_DWPL_COLS(len) - len = 4 int16 before the
 * next line: the skip is the immediate 8. About 95 cycles a step against 100 on the M4/M33 model. */
#define MCU_DWPL_S6_XI(x)                                                                     \
    "ldr r2, [r0, #" x "]\n\t"                                                                \
    "ldr r3, [r0, #" x " + 4]\n\t"                                                            \
    "ldr r4, [r0, #" x " + 8]\n\t"                                                            \
    "ldr r5, [r0, #" x " + 12]\n\t"
#define MCU_DWPL_SIXES_AT_AS(LB, LD_STEP, STORES)                                             \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t"                                                                                  \
    "ldr r6, [r12, #36]\n\t"                                                                  \
    "ldr lr, [r12, #12]\n\t" MCU_DWPL_S6_XI("0") MCU_DWPL_S6_A0                               \
    "ldr r2, [r12, #16]\n\t"                                                                  \
    "ldr lr, [r12, #20]\n\t" MCU_DWPL_S6_B("") MCU_DWPL_S6_XI(LB) MCU_DWPL_S6_A                \
    "ldr r2, [r12, #24]\n\t"                                                                  \
    "ldr lr, [r12, #28]\n\t" MCU_DWPL_S6_B("") MCU_DWPL_S6_XI("2 * " LB) MCU_DWPL_S6_A         \
    "ldr r2, [r12, #32]\n\t"                                                                  \
    "ldr lr, [r12, #40]\n\t" MCU_DWPL_S6_B("add r0, r0, #12\n\t")                            \
    "ldr r3, [r12, #44]\n\t"                                                                  \
    LD_STEP                                                                                   \
    "ldr r5, [r12, #8]\n\t" MCU_DWPL_FINISH6(MCU_DWPL_RQS)                                    \
    STORES                                                                                    \
    "cmp r0, r5\n\t"                                                                          \
    "bne 1b\n\t"                                                                              \
    "ldr r2, [r12, #68]\n\t"                                                                  \
    "ldr r3, [r12, #72]\n\t"                                                                  \
    "add r0, r0, #8\n\t"                                                                      \
    "add r5, r5, #" LB "\n\t"                                                                 \
    "add r1, r1, r2\n\t"                                                                      \
    "subs r3, r3, #1\n\t"                                                                     \
    "str r5, [r12, #8]\n\t"                                                                   \
    "str r3, [r12, #72]\n\t"                                                                  \
    "bne 1b\n\t"
/* The output step in r4: three of the six STRB take a register offset (2 cycles each on the M4/M33 model). */
#define MCU_DWPL_STORES6_R                                                                    \
    "add r2, r1, r4, lsl #1\n\t"                                                              \
    "strb r6, [r1]\n\t"                                                                       \
    "strb r7, [r1, r4]\n\t"                                                                   \
    "add lr, r2, r4, lsl #1\n\t"                                                              \
    "strb r8, [r2]\n\t"                                                                       \
    "strb r9, [r2, r4]\n\t"                                                                   \
    "strb r10, [lr]\n\t"                                                                      \
    "strb r11, [lr, r4]\n\t"                                                                  \
    "add r1, lr, r4, lsl #1\n\t"
/* The output step S an immediate (a string): six STRB at fixed offsets and one add, no load of the step. */
#define MCU_DWPL_STORES6_I(S)                                                                 \
    "strb r6, [r1]\n\t"                                                                       \
    "strb r7, [r1, #" S "]\n\t"                                                               \
    "strb r8, [r1, #2 * " S "]\n\t"                                                           \
    "strb r9, [r1, #3 * " S "]\n\t"                                                           \
    "strb r10, [r1, #4 * " S "]\n\t"                                                          \
    "strb r11, [r1, #5 * " S "]\n\t"                                                          \
    "add r1, r1, #6 * " S "\n\t"
#define MCU_DWPL_SIXES_AT(LB) MCU_DWPL_SIXES_AT_AS(LB, "ldr r4, [r12, #4]\n\t", MCU_DWPL_STORES6_R)
#define MCU_DWPL_SIXES_AT_I(LB, S) MCU_DWPL_SIXES_AT_AS(LB, "", MCU_DWPL_STORES6_I(S))
/* The loop for the output step (t->step): S1 or S2 at immediate offsets (the 96 x 96 models' channels at each line
 * length: mobilenet_v1's, then mobilenet_v2's), any other in r4; S1's loop last, without a branch to the end. The
 * test in the assembly: in C, GCC kept a second
 * pointer into the caller's t[] on the stack in every layer's loop of channels, these lines or not (DS-CNN's lines
 * of 25: 7 instructions a channel more). */
#define MCU_DWPL_SIXES_AT_PICK(LB, S1, S2)                                                    \
    "ldr r4, [r12, #4]\n\t"                                                                   \
    "cmp r4, #" S1 "\n\t"                                                                     \
    "beq 5f\n\t"                                                                              \
    "cmp r4, #" S2 "\n\t"                                                                     \
    "beq 6f\n\t" MCU_DWPL_SIXES_AT(LB)                                                        \
    "b 9f\n\t"                                                                                \
    "6:\n\t" MCU_DWPL_SIXES_AT_I(LB, S2)                                                      \
    "b 9f\n\t"                                                                                \
    "5:\n\t" MCU_DWPL_SIXES_AT_I(LB, S1)                                                      \
    "9:\n\t"
/* The same lines with the channel's constants in FPU registers (__ARM_FP: every DSP board's core has one): the six
 * weight words, the bias, the multiplier and C in s0-s8 (one VLDM a call), the band's end in s10, and for the
 * register-step loop the output skip and step in s9 and s11. A VMOV to a core register takes a cycle wherever it
 * stands, where the loads from t broke the plane words' chains of single loads (7 chains a six, 29 cycles for 22
 * loads; now 3 chains of four and 9 VMOV, 24), and r12 holds the line's end (no load of it a six; t back from s12 at
 * the end, so that GCC's code around the call is what it was). The first plane load steps the position (post-index),
 * the last store the output where 6 S fits its 8 bits, two stores where 3 S does (no ADD): 82 cycles a six against 89
 * on the M4/M33 model, and a line's end 5 against 10. */
#define MCU_DWPL_AT_FP_ENTER(LB)                                                              \
    "vmov s12, r12\n\t"                                                                       \
    "add r2, r12, #12\n\t"                                                                    \
    "vldm r2, {s0-s8}\n\t"                                                                    \
    "ldr r2, [r12, #68]\n\t"                                                                  \
    "ldr r3, [r12, #72]\n\t"                                                                  \
    "ldr r4, [r12, #4]\n\t"                                                                   \
    "ldr r12, [r12, #8]\n\t"                                                                  \
    "movs r5, #" LB "\n\t"                                                                    \
    "mla r3, r3, r5, r12\n\t"                                                                 \
    "vmov s10, r3\n\t"
#define MCU_DWPL_SIXES_FP(LB, LD_STEP, STORES, YSKIP)                                         \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t"                                                                                  \
    "vmov r6, s6\n\t"                                                                         \
    "vmov lr, s0\n\t"                                                                         \
    "ldr r2, [r0], #12\n\t"                                                                   \
    "ldr r3, [r0, #-8]\n\t"                                                                   \
    "ldr r4, [r0, #-4]\n\t"                                                                   \
    "ldr r5, [r0]\n\t" MCU_DWPL_S6_A0                                                         \
    "vmov r2, s1\n\t" MCU_DWPL_S6_B("")                                                       \
    "vmov lr, s2\n\t" MCU_DWPL_S6_XI(LB " - 12") MCU_DWPL_S6_A                                \
    "vmov r2, s3\n\t" MCU_DWPL_S6_B("")                                                       \
    "vmov lr, s4\n\t" MCU_DWPL_S6_XI("2 * " LB " - 12") MCU_DWPL_S6_A                         \
    "vmov r2, s5\n\t" MCU_DWPL_S6_B("")                                                       \
    "vmov lr, s7\n\t"                                                                         \
    "vmov r3, s8\n\t" LD_STEP MCU_DWPL_FINISH6(MCU_DWPL_RQS)                                  \
    STORES                                                                                    \
    "cmp r0, r12\n\t"                                                                         \
    "bne 1b\n\t" YSKIP                                                                        \
    "vmov r3, s10\n\t"                                                                        \
    "add r0, r0, #8\n\t"                                                                      \
    "add r12, r12, #" LB "\n\t"                                                               \
    "cmp r12, r3\n\t"                                                                         \
    "bne 1b\n\t"
/* The output on by the line's skip (the register-step loop's: zero for the immediate steps' lines along rows) */
#define MCU_DWPL_YSKIP_FP                                                                     \
    "vmov r2, s9\n\t"                                                                         \
    "add r1, r1, r2\n\t"
/* The step S an immediate, the output stepped by the last store (6 S at most 255: STRB's post-index). */
#define MCU_DWPL_STORES6_IP(S)                                                                \
    "strb r7, [r1, #" S "]\n\t"                                                               \
    "strb r8, [r1, #2 * " S "]\n\t"                                                           \
    "strb r9, [r1, #3 * " S "]\n\t"                                                           \
    "strb r10, [r1, #4 * " S "]\n\t"                                                          \
    "strb r11, [r1, #5 * " S "]\n\t"                                                          \
    "strb r6, [r1], #6 * " S "\n\t"
/* The same where 3 S fits the 8 bits but 6 S does not (steps 48 and 64): the output stepped by two stores, 3 S each. */
#define MCU_DWPL_STORES6_IP2(S)                                                               \
    "strb r7, [r1, #" S "]\n\t"                                                               \
    "strb r8, [r1, #2 * " S "]\n\t"                                                           \
    "strb r6, [r1], #3 * " S "\n\t"                                                           \
    "strb r10, [r1, #" S "]\n\t"                                                              \
    "strb r11, [r1, #2 * " S "]\n\t"                                                          \
    "strb r9, [r1], #3 * " S "\n\t"
/* MCU_DWPL_SIXES_AT_PICK's choice for these loops: the steps S1 and S2 with their stores ST1 and ST2, for lines whose
 * output skip is zero (lines along rows: a line's outputs end where the next line's begin; 2 cycles a line fewer);
 * any other step or skip takes the register step and the skip from s9. */
#define MCU_DWPL_SKIP0_FP                                                                     \
    "cmp r2, #0\n\t"                                                                          \
    "bne 7f\n\t"
/* SKIP0: the test for a nonzero skip, or none where the caller's skip is zero (mcu_dwpl_rows: a row's outputs end
 * where the next row's begin) */
#define MCU_DWPL_SIXES_FP_PICK_AS(LB, S1, ST1, S2, ST2, SKIP0)                                \
    MCU_DWPL_AT_FP_ENTER(LB) SKIP0                                                            \
    "cmp r4, #" S1 "\n\t"                                                                     \
    "beq 5f\n\t"                                                                              \
    "cmp r4, #" S2 "\n\t"                                                                     \
    "beq 6f\n\t"                                                                              \
    "7:\n\t"                                                                                  \
    "vmov s9, r2\n\t"                                                                         \
    "vmov s11, r4\n\t" MCU_DWPL_SIXES_FP(LB, "vmov r4, s11\n\t", MCU_DWPL_STORES6_R, MCU_DWPL_YSKIP_FP) \
    "b 9f\n\t"                                                                                \
    "6:\n\t" MCU_DWPL_SIXES_FP(LB, "", ST2, "")                                               \
    "b 9f\n\t"                                                                                \
    "5:\n\t" MCU_DWPL_SIXES_FP(LB, "", ST1, "")                                               \
    "9:\n\t"                                                                                  \
    "vmov r12, s12\n\t"
/* Lines with a pair or a pixel alone after their sixes (kind 13): the test for them costs a line 6 cycles,
 * which lines of whole sixes (kind 12) leave out (mobilenet_v1's three layers: 13.5 k estimated cycles). */
#define MCU_DWPL_SIXES_TAIL                                                                   \
    MCU_DWPL_SIXES                                                                            \
    "ldr r2, [r12, #76]\n\t"                                                                  \
    "lsls r2, r2, #1\n\t"                                                                     \
    "beq 2f\n\t"                                                                              \
    "bcc 3f\n\t"                                                                              \
    MCU_DWPL_ROWS(MCU_DWPL_LD2, MCU_DWPL_MAC2_0, MCU_DWPL_MAC2, "add r0, r0, #4\n\t") MCU_DWPL_OUT2("") \
    "3:\n\t"                                                                                  \
    "bpl 2f\n\t"                                                                              \
    MCU_DWPL_ROWS(MCU_DWPL_LD2, MCU_DWPL_MAC1, MCU_DWPL_MAC1, "") MCU_DWPL_OUT1("")             \
        MCU_DWPL_LINE_END("r1")
/* The line's end: the plane position on by skip, the line's end by `next` (the bytes from an output
 * line's first plane line to the next's), the output on by yskip, the lines counted down; the five
 * fields in one chain of single loads. */
#define MCU_DWPL_LINE_END(next)                                                               \
    "2:\n\t"                                                                                  \
    "ldr lr, [r12, #64]\n\t"                                                                  \
    "ldr r10, [r12, #8]\n\t"                                                                  \
    "ldr r11, [r12, #68]\n\t"                                                                 \
    "ldr r2, [r12, #72]\n\t"                                                                  \
    "ldr r3, [r12]\n\t"                                                                       \
    "add r0, r0, lr\n\t"                                                                      \
    "add r10, r10, " next "\n\t"                                                              \
    "add r3, r3, r11\n\t"                                                                     \
    "subs r2, r2, #1\n\t"                                                                     \
    "str r10, [r12, #8]\n\t"                                                                  \
    "str r3, [r12]\n\t"                                                                       \
    "str r2, [r12, #72]\n\t"                                                                  \
    "bne 1b\n\t"

/* The line's end of the one-step lines (six and three pixels), which have no quads' end to step on: lines of
 * six with the output pointer still in r3, lines of three with it in memory (stride 2). */
#define MCU_DWPL_LINE_END6                                                                    \
    "ldr lr, [r12, #64]\n\t"                                                                  \
    "ldr r11, [r12, #68]\n\t"                                                                 \
    "ldr r2, [r12, #72]\n\t"                                                                  \
    "add r0, r0, lr\n\t"                                                                      \
    "add r3, r3, r11\n\t"                                                                     \
    "subs r2, r2, #1\n\t"                                                                     \
    "str r3, [r12]\n\t"                                                                       \
    "str r2, [r12, #72]\n\t"                                                                  \
    "bne 1b\n\t"
#define MCU_DWPL_LINE_END3 "ldr r3, [r12]\n\t" MCU_DWPL_LINE_END6
/* The stride-1 lines of six: the skip a whole plane line (MCU_DWPL_LINE6_S), the end the position after the last
 * line (t->end, as MCU_DWPL_LINE_END_Y3). */
#define MCU_DWPL_LINE_END6S                                                                   \
    "ldr r11, [r12, #68]\n\t"                                                                 \
    "ldr r2, [r12, #8]\n\t"                                                                   \
    "add r0, r0, #" MCU_DWPL_LINE6_S "\n\t"                                                   \
    "add r3, r3, r11\n\t"                                                                     \
    "str r3, [r12]\n\t"                                                                       \
    "cmp r0, r2\n\t"                                                                          \
    "bne 1b\n\t"

/* One of the channel loops above (or the stride-2 ones below) with pos, the plane line's bytes and the
 * constants in r0, r1 and r12 (register variables of the caller). */
#define MCU_DWPL_RUN(loop)                                                                    \
    __asm__ volatile(loop                                                                     \
                     : "+r"(r0)                                                               \
                     : "r"(r1), "r"(r12)                                                      \
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory")
/* The same with r1 the output pointer (MCU_DWPL_SIXES_AT, y1 a register variable of the caller). */
#define MCU_DWPL_RUN_AT(loop)                                                                 \
    __asm__ volatile(loop                                                                     \
                     : "+r"(r0), "+r"(y1)                                                     \
                     : "r"(r12)                                                               \
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory")
/* The same for a group's one-step lines (MCU_DWPL_NEXT_CH steps r12 through the group). */
#define MCU_DWPL_RUN_GROUP(loop)                                                              \
    __asm__ volatile(loop                                                                     \
                     : "+r"(r0), "+r"(r12)                                                    \
                     : "r"(r1)                                                                \
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory")
/* The loop of a layer's lines: three pixels (LOOP3) or quads and their tail (LOOP), with the clamp or not. */
#define MCU_DWPL_PICK(three, clamp, LOOP3, LOOP)                                              \
    do {                                                                                      \
        if (three) {                                                                          \
            if ((clamp) == MCU_DWPL_CLAMP) {                                                  \
                MCU_DWPL_RUN(LOOP3(MCU_DWPL_CLAMP3));                                         \
            } else {                                                                          \
                MCU_DWPL_RUN(LOOP3(""));                                                      \
            }                                                                                 \
        } else if ((clamp) == MCU_DWPL_CLAMP) {                                               \
            MCU_DWPL_RUN(LOOP(MCU_DWPL_CLAMP4, MCU_DWPL_CLAMP2, MCU_DWPL_CLAMP1));            \
        } else {                                                                              \
            MCU_DWPL_RUN(LOOP("", "", ""));                                                   \
        }                                                                                     \
    } while (0)

/* mcu_dwpl_channel's lines (pos, line_bytes, t, kind in scope), the loops expanded with the definitions of
 * MCU_DWPL_RQ and MCU_DWPL_RQ6 where it is used: once with the sign correction, once without. */
#define MCU_DWPL_CHANNEL_BODY(clamp)                                                                  \
    register const int16_t *r0 __asm__("r0") = pos;                                                   \
    register int32_t r1 __asm__("r1") = line_bytes;                                                   \
    register mcu_dwpl_ch *r12 __asm__("r12") = t;                                                     \
    if (kind == 6) { /* MCU_DWPL_KIND: never with the clamp; the group's four channels */             \
        __asm__ volatile(MCU_DWPL_CHANNEL6                                                            \
                         : "+r"(r0), "+r"(r1), "+r"(r12)                                              \
                         :                                                                            \
                         : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory"); \
        return;                                                                                       \
    }                                                                                                 \
    if (kind == 3) { /* the group's four channels */                                                  \
        if ((clamp) == MCU_DWPL_CLAMP) {                                                              \
            MCU_DWPL_RUN_GROUP(MCU_DWPL_CHANNEL3(MCU_DWPL_CLAMP3));                                    \
        } else {                                                                                      \
            MCU_DWPL_RUN_GROUP(MCU_DWPL_CHANNEL3(""));                                                 \
        }                                                                                             \
        return;                                                                                       \
    }                                                                                                 \
    if (kind == 12) { /* MCU_DWPL_KIND: never with the clamp */                                       \
        MCU_DWPL_RUN(MCU_DWPL_SIXES MCU_DWPL_LINE_END("r1"));                                          \
        return;                                                                                       \
    }                                                                                                 \
    if (kind == 13) {                                                                                 \
        MCU_DWPL_RUN(MCU_DWPL_SIXES_TAIL);                                                            \
        return;                                                                                       \
    }                                                                                                 \
    if ((clamp) == MCU_DWPL_CLAMP) {                                                                  \
        MCU_DWPL_RUN(MCU_DWPL_CHANNEL(MCU_DWPL_CLAMP4, MCU_DWPL_CLAMP2, MCU_DWPL_CLAMP1));             \
    } else {                                                                                          \
        MCU_DWPL_RUN(MCU_DWPL_CHANNEL("", "", ""));                                                   \
    }

/* The loops of mcu_dwpl_channel for MCU_DWPL_RELU: the same macros with the requantization's sign
 * correction left out. */
#undef MCU_DWPL_RQ
#undef MCU_DWPL_RQ6
#undef MCU_DWPL_RQS
#define MCU_DWPL_RQ MCU_DWPL_RQ_RELU
#define MCU_DWPL_RQ6 MCU_DWPL_RQ6_RELU
#define MCU_DWPL_RQS MCU_DWPL_RQS_RELU
/* In line at each of mcu_dwpl_layer_as's two call sites, which pass the kinds they run (GCC put the loops out of
 * line, a call a channel, once the group's site was added). */
static inline __attribute__((always_inline)) void mcu_dwpl_channel_relu(const int16_t *pos, int32_t line_bytes,
                                                                        mcu_dwpl_ch *t, int kind)
{
    MCU_DWPL_CHANNEL_BODY(MCU_DWPL_SAT);
}
#undef MCU_DWPL_RQ
#undef MCU_DWPL_RQ6
#undef MCU_DWPL_RQS
/* The loops of mcu_dwpl_channel for MCU_DWPL_SCALED: SMMLA with C, no R, SSAT with ASR #14
 * (mcu_dwpl_rq_scaled); the lines of sixes (kinds 12 and 13: mcu_dwpl_layer takes the scaled form for them only). */
#undef MCU_DWPL_LD_R
#undef MCU_DWPL_SAT8
#define MCU_DWPL_LD_R(r) ""
#define MCU_DWPL_SAT8(a) "ssat " a ", #8, " a ", asr #14\n\t"
#define MCU_DWPL_RQ(a, t) "smmla " a ", " a ", r2, r3\n\t"
#define MCU_DWPL_RQ6(a) "smmla " a ", " a ", r1, lr\n\t"
#define MCU_DWPL_RQS(a) "smmla " a ", " a ", lr, r3\n\t"
_Static_assert(MCU_DWPL_SCALE - 1 == 14, "MCU_DWPL_SAT8's shift");
_Static_assert(MCU_DWPL_COLS(12) * 2 == 32 && MCU_DWPL_COLS(24) * 2 == 56 && MCU_DWPL_COLS(48) * 2 == 104 &&
                   MCU_DWPL_COLS(12) - 12 == 4 && MCU_DWPL_COLS(24) - 24 == 4 && MCU_DWPL_COLS(48) - 48 == 4,
               "MCU_DWPL_SIXES_AT: the plane line's bytes and the skip of 8 after a line's sixes");
/* The scaled lines of 12, 24 or 48 pixels (mcu_dwpl_len_at) from pos: MCU_DWPL_SIXES_AT with the plane line's
 * bytes an immediate and r1 the output pointer. */
static inline __attribute__((always_inline)) void mcu_dwpl_channel_at(const int16_t *pos, int32_t len, mcu_dwpl_ch *t,
                                                                      int skip0)
{
    register const int16_t *r0 __asm__("r0") = pos;
    register mcu_dwpl_ch *r12 __asm__("r12") = t;
    register int8_t *y1 __asm__("r1") = t->y;
#if defined(__ARM_FP)
#define MCU_DWPL_RUN_FP(loop)                                                                 \
    __asm__ volatile(loop                                                                     \
                     : "+r"(r0), "+r"(y1)                                                     \
                     : "r"(r12)                                                               \
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "s0", "s1", "s2", \
                       "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "cc", "memory")
#define MCU_DWPL_AT_LENS(SKIP0)                                                               \
    if (len == 12) {                                                                          \
        MCU_DWPL_RUN_FP(MCU_DWPL_SIXES_FP_PICK_AS("32", "64", MCU_DWPL_STORES6_IP2("64"), "96", MCU_DWPL_STORES6_I("96"), \
                                                  SKIP0));                                    \
    } else if (len == 24) {                                                                   \
        MCU_DWPL_RUN_FP(MCU_DWPL_SIXES_FP_PICK_AS("56", "32", MCU_DWPL_STORES6_IP("32"), "48", MCU_DWPL_STORES6_IP2("48"), \
                                                  SKIP0));                                    \
    } else {                                                                                  \
        MCU_DWPL_RUN_FP(MCU_DWPL_SIXES_FP_PICK_AS("104", "8", MCU_DWPL_STORES6_IP("8"), "16", MCU_DWPL_STORES6_IP("16"), \
                                                  SKIP0));                                    \
    }
    if (skip0) {
        MCU_DWPL_AT_LENS("")
    } else {
        MCU_DWPL_AT_LENS(MCU_DWPL_SKIP0_FP)
    }
#undef MCU_DWPL_AT_LENS
#undef MCU_DWPL_RUN_FP
#else
    (void)skip0;
    if (len == 12) {
        MCU_DWPL_RUN_AT(MCU_DWPL_SIXES_AT_PICK("32", "64", "96"));
    } else if (len == 24) {
        MCU_DWPL_RUN_AT(MCU_DWPL_SIXES_AT_PICK("56", "32", "48"));
    } else {
        MCU_DWPL_RUN_AT(MCU_DWPL_SIXES_AT_PICK("104", "8", "16"));
    }
#endif
}
static inline __attribute__((always_inline)) void mcu_dwpl_channel_scaled(const int16_t *pos, int32_t line_bytes,
                                                                          mcu_dwpl_ch *t, int kind)
{
    if (kind == 12 && mcu_dwpl_len_at(line_bytes / 2 - 4)) {
        mcu_dwpl_channel_at(pos, line_bytes / 2 - 4, t, 0);
        return;
    }
    register const int16_t *r0 __asm__("r0") = pos;
    register int32_t r1 __asm__("r1") = line_bytes;
    register mcu_dwpl_ch *r12 __asm__("r12") = t;
    if (kind == 12) {
        MCU_DWPL_RUN(MCU_DWPL_SIXES MCU_DWPL_LINE_END("r1"));
    } else {
        MCU_DWPL_RUN(MCU_DWPL_SIXES_TAIL);
    }
}
#undef MCU_DWPL_SAT8
/* The loops of the packed one-step lines' scaled form (MCU_DWPL_PACKED): SSAT's shift MCU_DWPL_PACKED_SCALE - 1. */
#define MCU_DWPL_SAT8(a) "ssat " a ", #8, " a ", asr #13\n\t"
_Static_assert(MCU_DWPL_PACKED_SCALE - 1 == 13, "MCU_DWPL_SAT8's shift (MCU_DWPL_PACKED)");
/* The packed one-step lines' own loops: the requantization's constants, the output pointer, its step, the line
 * skip (t->yskip: here from a line's first output pixel to the next's) and the lines' end in one chain of single loads (a load after a load takes a cycle: 2 cycles a line fewer
 * than three pairs), the lines of three reading their kernel lines at fixed offsets (a plane line of three is
 * always MCU_DWPL_LINE3_S bytes: no address steps among the MACs). */
#define MCU_DWPL_CHANNEL6P                                                                    \
    MCU_DWPL_MACS6                                                                            \
    "ldr r1, [r12, #40]\n\t"                                                                  \
    "ldr lr, [r12, #44]\n\t"                                                                  \
    "ldr r3, [r12]\n\t"                                                                       \
    "ldr r4, [r12, #4]\n\t"                                                                   \
    "ldr r5, [r12, #68]\n\t"                                                                  \
    "ldr r2, [r12, #8]\n\t" MCU_DWPL_FINISH6(MCU_DWPL_RQ6)                                     \
    "add r1, r3, r4, lsl #1\n\t"                                                              \
    "add lr, r3, r4, lsl #2\n\t"                                                              \
    "strb r6, [r3]\n\t"                                                                       \
    "strb r7, [r3, r4]\n\t"                                                                   \
    "strb r8, [r1]\n\t"                                                                       \
    "strb r9, [r1, r4]\n\t"                                                                   \
    "strb r10, [lr]\n\t"                                                                      \
    "strb r11, [lr, r4]\n\t"                                                                  \
    "add r3, r3, r5\n\t"                                                                      \
    "add r0, r0, #" MCU_DWPL_LINE6_S "\n\t"                                                   \
    "str r3, [r12]\n\t"                                                                       \
    "cmp r0, r2\n\t"                                                                          \
    "bne 1b\n\t" MCU_DWPL_NEXT_CH("1b")
#define MCU_DWPL_LD3F(wofs, x)                                                                \
    "ldr r2, [r12, #" wofs "]\n\t"                                                            \
    "ldr r3, [r12, #" wofs " + 4]\n\t"                                                        \
    "ldr r4, [r0, #" x "]\n\t"                                                                \
    "ldr r5, [r0, #" x " + 4]\n\t"                                                            \
    "ldr r6, [r0, #" x " + 8]\n\t"
#define MCU_DWPL_CHANNEL3P                                                                    \
    "0:\n\t"                                                                                  \
    "ldr r7, [r12]\n\t"                                                                       \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t"                                                                                  \
    "ldr r8, [r12, #36]\n\t" MCU_DWPL_LD3F("12", "0") MCU_DWPL_MAC3_0("")                      \
        MCU_DWPL_LD3F("20", MCU_DWPL_LINE3_S) MCU_DWPL_MAC3("")                                \
            MCU_DWPL_LD3F("28", "2 * " MCU_DWPL_LINE3_S) MCU_DWPL_MAC3("")                     \
    "ldr r2, [r12, #40]\n\t"                                                                  \
    "ldr r3, [r12, #44]\n\t"                                                                  \
    "ldr lr, [r12, #4]\n\t"                                                                   \
    "ldr r11, [r12, #68]\n\t"                                                                 \
    "ldr r5, [r12, #8]\n\t" MCU_DWPL_RQ3("")                                                  \
    "add r4, r7, lr, lsl #1\n\t"                                                              \
    "strb r8, [r7]\n\t"                                                                       \
    "strb r9, [r7, lr]\n\t"                                                                   \
    "strb r10, [r4]\n\t"                                                                      \
    "add r0, r0, #" MCU_DWPL_LINE3_S "\n\t"                                                   \
    "add r7, r7, r11\n\t"                                                                     \
    "cmp r0, r5\n\t"                                                                          \
    "bne 1b\n\t" MCU_DWPL_NEXT_CH("0b")
static inline __attribute__((always_inline)) void mcu_dwpl_channel_packed(const int16_t *pos, int32_t line_bytes,
                                                                          mcu_dwpl_ch *t, int kind)
{
    register const int16_t *r0 __asm__("r0") = pos;
    register int32_t r1 __asm__("r1") = line_bytes;
    register mcu_dwpl_ch *r12 __asm__("r12") = t;
    if (kind == 6) {
        __asm__ volatile(MCU_DWPL_CHANNEL6P
                         : "+r"(r0), "+r"(r1), "+r"(r12)
                         :
                         : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory");
    } else {
        MCU_DWPL_RUN_GROUP(MCU_DWPL_CHANNEL3P);
    }
}
/* The whole plane of a 6 x 6 or 3 x 3 image in one straight block a channel (mcu_dwpl_channels_whole): the
 * output line's plane and output offsets immediates (the output step S bytes, a string: 128 or 256), so that a
 * line ends in three loads (m, C, the channel's first output) and single stores at immediate offsets, where the
 * loops above spend about 16 cycles a line on the output pointer, its step, the lines' end and the branch; with
 * the padding one line across, the first line's first kernel line and the last line's last read zero lines only
 * and are left out. The constants are read where the packer put them (r12: MCU_DWPL_PACKED_WORDS a channel, no
 * copy into mcu_dwpl_ch), the channel's first output and whether another channel follows from the two words after
 * its plane (r0 + P and P + 4, a plane of P bytes, the planes P + 8 apart). */
#define MCU_DWPL_W6_FIRST(wofs, x) "ldr r6, [r12, #24]\n\t" MCU_DWPL_LD6(wofs, x) MCU_DWPL_MAC6_0
/* A line's outputs: pixel p (a string) of the six at r3 + p S; base: an add to r3 before the requantization. */
#define MCU_DWPL_W6_OUT(S, base, p)                                                           \
    "ldr r1, [r12, #28]\n\t"                                                                  \
    "ldr lr, [r12, #32]\n\t"                                                                  \
    "ldr r3, [r0, #160]\n\t" base MCU_DWPL_FINISH6(MCU_DWPL_RQ6)                               \
    "strb r6, [r3, #(" p ") * " S "]\n\t"                                                     \
    "strb r7, [r3, #(" p " + 1) * " S "]\n\t"                                                 \
    "strb r8, [r3, #(" p " + 2) * " S "]\n\t"                                                 \
    "strb r9, [r3, #(" p " + 3) * " S "]\n\t"                                                 \
    "strb r10, [r3, #(" p " + 4) * " S "]\n\t"                                                \
    "strb r11, [r3, #(" p " + 5) * " S "]\n\t"
/* Output line l (a digit) of a 6 x 6 plane: its plane lines l .. l + 2 at 20 l bytes. */
#define MCU_DWPL_W6_LINE(l)                                                                   \
    MCU_DWPL_W6_FIRST("0", "20 * " l) MCU_DWPL_LD6("8", "20 * " l " + 20") MCU_DWPL_MAC6("r6")  \
        MCU_DWPL_LD6("16", "20 * " l " + 40") MCU_DWPL_MAC6("r6")
/* After a channel's plane of P bytes (a string), the next one's from label, its first output one byte on (written
 * after the next plane: the caller sets the first channel's alone). */
#define MCU_DWPL_W_NEXT(P, label)                                                             \
    "ldr r3, [r0, #" P "]\n\t"                                                                \
    "ldr r2, [r0, #" P " + 4]\n\t"                                                            \
    "add r12, r12, #4 * " MCU_DWPL_STR(MCU_DWPL_PACKED_WORDS) "\n\t"                          \
    "adds r3, r3, #1\n\t"                                                                     \
    "str r3, [r0, #2 * " P " + 8]\n\t"                                                        \
    "add r0, r0, #" P " + 8\n\t"                                                              \
    "cmp r2, #0\n\t"                                                                          \
    "bne " label "\n\t"
#define MCU_DWPL_STR(v) MCU_DWPL_STR_(v)
#define MCU_DWPL_STR_(v) #v
/* The lines of the 6 x 6 images, the outputs of lines 3 to 5 from r3 + 18 S (STRB's offset reaches 4095). */
#define MCU_DWPL_W6(S)                                                                        \
    ".p2align 2\n\t"                                                                          \
    "0:\n\t" MCU_DWPL_W6_FIRST("8", "20") MCU_DWPL_LD6("16", "40") MCU_DWPL_MAC6("r6")         \
        MCU_DWPL_W6_OUT(S, "", "0") MCU_DWPL_W6_LINE("1") MCU_DWPL_W6_OUT(S, "", "6")          \
            MCU_DWPL_W6_LINE("2") MCU_DWPL_W6_OUT(S, "", "12") MCU_DWPL_W6_LINE("3")           \
                MCU_DWPL_W6_OUT(S, "add r3, r3, #18 * " S "\n\t", "0") MCU_DWPL_W6_LINE("4")    \
                    MCU_DWPL_W6_OUT(S, "add r3, r3, #18 * " S "\n\t", "6")                      \
                        MCU_DWPL_W6_FIRST("0", "100") MCU_DWPL_LD6("8", "120") MCU_DWPL_MAC6("r6") \
                            MCU_DWPL_W6_OUT(S, "add r3, r3, #18 * " S "\n\t", "12") MCU_DWPL_W_NEXT("160", "0b")
/* A 3 x 3 image's kernel line at wofs over the plane line at x (12 bytes a line). */
#define MCU_DWPL_W3_K(wofs, x, MAC) MCU_DWPL_LD3F(wofs, x) MAC("")
#define MCU_DWPL_W3_OUT(S, p)                                                                 \
    "ldr r2, [r12, #28]\n\t"                                                                  \
    "ldr r3, [r12, #32]\n\t"                                                                  \
    "ldr r7, [r0, #60]\n\t" MCU_DWPL_RQ3("")                                                  \
    "strb r8, [r7, #(" p ") * " S "]\n\t"                                                     \
    "strb r9, [r7, #(" p " + 1) * " S "]\n\t"                                                 \
    "strb r10, [r7, #(" p " + 2) * " S "]\n\t"
#define MCU_DWPL_W3(S)                                                                        \
    ".p2align 2\n\t"                                                                          \
    "0:\n\t"                                                                                  \
    "ldr r8, [r12, #24]\n\t" MCU_DWPL_W3_K("8", "12", MCU_DWPL_MAC3_0) MCU_DWPL_W3_K("16", "24", MCU_DWPL_MAC3) \
        MCU_DWPL_W3_OUT(S, "0")                                                               \
    "ldr r8, [r12, #24]\n\t" MCU_DWPL_W3_K("0", "12", MCU_DWPL_MAC3_0) MCU_DWPL_W3_K("8", "24", MCU_DWPL_MAC3) \
        MCU_DWPL_W3_K("16", "36", MCU_DWPL_MAC3) MCU_DWPL_W3_OUT(S, "3")                      \
    "ldr r8, [r12, #24]\n\t" MCU_DWPL_W3_K("0", "24", MCU_DWPL_MAC3_0) MCU_DWPL_W3_K("8", "36", MCU_DWPL_MAC3) \
        MCU_DWPL_W3_OUT(S, "6") MCU_DWPL_W_NEXT("60", "0b")
/* Which straight block serves a layer of the packed scaled lines (mcu_dwpl_layer_packed): 6 for the 6 x 6 x 128
 * images, 3 for the 3 x 3 x 256 ones (mobilenet_v1's), both with the padding one pixel across and along (the
 * blocks' and mcu_dwpl_fill_whole's fixed offsets); else 0. */
static inline int mcu_dwpl_whole_kind(const mcu_dwpl_geom *g, int32_t ch, int32_t pad_across, int32_t pad_along,
                                      int clamp)
{
    if (clamp != MCU_DWPL_PACKED || pad_across != 1 || pad_along != 1 || g->lines != g->len) {
        return 0;
    }
    return g->len == 6 && ch == 128 && g->plane == 80 ? 6 : g->len == 3 && ch == 256 && g->plane == 30 ? 3 : 0;
}
_Static_assert(MCU_DWPL_COLS(6) * 8 == 80 && MCU_DWPL_COLS(3) * 5 == 30 && MCU_DWPL_PACKED_WORDS == 10,
               "MCU_DWPL_W6, _W3: the planes' bytes (160, 60) and the packed words' offsets");
/* The group's four channels from the planes' start and their constants from k (on past them after). */
static inline __attribute__((always_inline)) const uint32_t *mcu_dwpl_channels_whole(const int16_t *planes,
                                                                                    const uint32_t *k, int whole)
{
    register const int16_t *r0 __asm__("r0") = planes;
    register const uint32_t *r12 __asm__("r12") = k;
    if (whole == 6) {
        __asm__ volatile(MCU_DWPL_W6("128")
                         : "+r"(r0), "+r"(r12)
                         :
                         : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory");
    } else {
        __asm__ volatile(MCU_DWPL_W3("256")
                         : "+r"(r0), "+r"(r12)
                         :
                         : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory");
    }
    return r12;
}
#undef MCU_DWPL_RQ
#undef MCU_DWPL_RQ6
#undef MCU_DWPL_RQS
#undef MCU_DWPL_LD_R
#undef MCU_DWPL_SAT8
#define MCU_DWPL_LD_R(r) "ldr " r ", [r12, #48]\n\t"
#define MCU_DWPL_SAT8(a) "ssat " a ", #8, " a "\n\t"
#define MCU_DWPL_RQ MCU_DWPL_RQ_SIGNED
#define MCU_DWPL_RQ6 MCU_DWPL_RQ6_SIGNED
#define MCU_DWPL_RQS MCU_DWPL_RQS_SIGNED

/* Every line of one channel's plane from pos (its first line's position 0), and for the one-step lines (kinds 3
 * and 6) those of the group's next channels too (t->more, t->next); clamp: how the outputs are finished
 * (MCU_DWPL_SAT, _CLAMP, _RELU). */
static inline __attribute__((always_inline)) void mcu_dwpl_channel(const int16_t *pos, int32_t line_bytes,
                                                                   mcu_dwpl_ch *t, int clamp, int kind)
{
    if (clamp == MCU_DWPL_RELU) {
        mcu_dwpl_channel_relu(pos, line_bytes, t, kind);
        return;
    }
    if (clamp == MCU_DWPL_SCALED) {
        mcu_dwpl_channel_scaled(pos, line_bytes, t, kind);
        return;
    }
    if (clamp == MCU_DWPL_PACKED) {
        mcu_dwpl_channel_packed(pos, line_bytes, t, kind);
        return;
    }
    MCU_DWPL_CHANNEL_BODY(clamp);
}
#else
/* The accumulator of the pixel at plane position pos (even; taps pos .. pos + 2 of three lines), or of
 * the one after it (odd), from the same two words of each line as the assembly (SMLAD and SMLABT, or
 * SMLATB and SMLAD). */
static inline uint32_t mcu_dwpl_pixel(const int16_t *pos, int32_t cols, const mcu_dwpl_ch *t, int odd)
{
    uint32_t s = t->bias;
    for (int32_t i = 0; i < 3; ++i) {
        const uint32_t a = mcu_load_u32(pos + i * cols), b = mcu_load_u32(pos + i * cols + 2);
        s = odd ? mcu_smlad(b, t->w[2 * i + 1], mcu_dwpl_smlatb(a, t->w[2 * i], s))
                : mcu_dwpl_smlabt(b, t->w[2 * i + 1], mcu_smlad(a, t->w[2 * i], s));
    }
    return s;
}

/* The accumulators' n outputs from t->y on, requantized and clamped. */
static inline void mcu_dwpl_put_out(mcu_dwpl_ch *t, const uint32_t *s, int32_t n, int clamp)
{
    const int32_t lo = (int8_t)(uint8_t)t->min4, hi = (int8_t)(uint8_t)t->max4;
    for (int32_t k = 0; k < n; ++k, t->y += t->step) {
        int32_t v = clamp == MCU_DWPL_SCALED   ? mcu_dwpl_rq_scaled(t, s[k], MCU_DWPL_SCALE)
                    : clamp == MCU_DWPL_PACKED ? mcu_dwpl_rq_scaled(t, s[k], MCU_DWPL_PACKED_SCALE)
                                               : mcu_dwpl_rq(t, s[k], clamp == MCU_DWPL_RELU);
        if (clamp == MCU_DWPL_CLAMP) {
            v = v < lo ? lo : v > hi ? hi : v;
        }
        t->y[0] = (int8_t)v;
    }
}

/* The same lines in C (the emulated build), in the assembly's steps: quads, a pair, a pixel alone; sixes;
 * or lines of three or six pixels in one step (MCU_DWPL_KIND). */
static inline void mcu_dwpl_channel(const int16_t *pos, int32_t line_bytes, mcu_dwpl_ch *t, int clamp, int kind)
{
    const int32_t cols = line_bytes / 2;
    if (kind == 3 || kind == 6) { /* one step a line, the position left at the line's start; the group's channels */
        for (;; ++t) {
            for (; t->lines > 0; --t->lines) {
                uint32_t s[6];
                for (int32_t k = 0; k < kind; ++k) {
                    s[k] = mcu_dwpl_pixel(pos + 2 * (k / 2), cols, t, k & 1);
                }
                int8_t *first = t->y;
                mcu_dwpl_put_out(t, s, kind, clamp);
                pos = (const int16_t *)(const void *)((const char *)pos + t->skip);
                t->y = clamp == MCU_DWPL_PACKED ? first + t->yskip : t->y + t->yskip;
            }
            if (!t->more) {
                return;
            }
            pos = (const int16_t *)(const void *)((const char *)pos + t->next);
        }
    }
    for (; t->lines > 0; --t->lines) {
        const int32_t n = kind >= 12 ? 6 : 4; /* pixels a step: sixes (MCU_DWPL_SIXES) or quads */
        for (; pos != t->end; pos += n) {
            uint32_t s[6];
            for (int32_t k = 0; k < n; ++k) {
                s[k] = mcu_dwpl_pixel(pos + 2 * (k / 2), cols, t, k & 1);
            }
            mcu_dwpl_put_out(t, s, n, clamp);
        }
        if (kind >= 12 ? (uint32_t)t->tail >> 31 : (uint32_t)t->tail & 2u) { /* the sixes' pair: bit 31 */
            const uint32_t s[2] = {mcu_dwpl_pixel(pos, cols, t, 0), mcu_dwpl_pixel(pos, cols, t, 1)};
            mcu_dwpl_put_out(t, s, 2, clamp);
            pos += 2;
        }
        if (t->odd) {
            const uint32_t s[1] = {mcu_dwpl_pixel(pos, cols, t, 0)};
            mcu_dwpl_put_out(t, s, 1, clamp);
        }
        pos = (const int16_t *)(const void *)((const char *)pos + t->skip);
        t->end = (const int16_t *)(const void *)((const char *)t->end + line_bytes);
        t->y += t->yskip;
    }
}

/* The assembly's lines of 12, 24 and 48 (mcu_dwpl_len_at), scaled. */
static inline void mcu_dwpl_channel_at(const int16_t *pos, int32_t len, mcu_dwpl_ch *t, int skip0)
{
    (void)skip0;
    mcu_dwpl_channel(pos, MCU_DWPL_COLS(len) * 2, t, MCU_DWPL_SCALED, 12);
}
#endif

/* `words` words of zero from p: four a step, the loop's count and branch once per four (a word a step spent
 * 7 cycles a word on the M4/M33 model: 32 k of mobilenet_v1's estimated cycles on mps2-an505-u575). The
 * empty asm keeps GCC from calling memset (the kernels reference no libc function). */
static inline void mcu_dwpl_zero(int16_t *p, int32_t words)
{
#if MCU_S8_DSP_NATIVE
    /* eight words a step in two STM of four zero registers: the streamed row calls zero their planes at every call
     * (mobilenet_v1's rows of 48: 312 words a call, about 550 instructions in the loop below) */
    int32_t steps = words >> 3;
    if (steps > 0) {
        uint32_t *q = (uint32_t *)(void *)p;
        __asm__ volatile("mov r2, #0\n\t"
                         "mov r3, #0\n\t"
                         "mov r4, #0\n\t"
                         "mov r5, #0\n\t"
                         "1:\n\t"
                         "stmia %0!, {r2, r3, r4, r5}\n\t"
                         "stmia %0!, {r2, r3, r4, r5}\n\t"
                         "subs %1, %1, #1\n\t"
                         "bne 1b\n\t"
                         : "+r"(q), "+r"(steps)
                         :
                         : "r2", "r3", "r4", "r5", "cc", "memory");
        p += (words & ~7) * 2;
        words &= 7;
    }
#endif
    int32_t i = 0;
    for (; i + 4 <= words; i += 4) {
        mcu_store_u32(p + 2 * i, 0);
        mcu_store_u32(p + 2 * i + 2, 0);
        mcu_store_u32(p + 2 * i + 4, 0);
        mcu_store_u32(p + 2 * i + 6, 0);
        __asm__("" ::: "memory");
    }
    for (; i < words; ++i) {
        mcu_store_u32(p + 2 * i, 0);
        __asm__("" ::: "memory");
    }
}

/* The whole layer (mcu_dwpl_plan held): x (n images of h x w x ch) into y of the same shape, which
 * may be x itself. */
/* Out of line (its planes are stack of its own), unused by the Helium builds; scaled: the layer is
 * MCU_DWPL_SCALED (a copy of its own, so that the other layers' code is that of the form without it). */
static inline __attribute__((always_inline)) void mcu_dwpl_layer_as(const mcu_dwpl_geom *g, int32_t n, int32_t h,
                                                                    int32_t w, int32_t ch, int32_t pad_top,
                                                                    int32_t pad_left, int32_t input_offset,
                                                                    int32_t output_offset, int32_t act_min,
                                                                    int32_t act_max, const mcu_per_channel_quant *q,
                                                                    const int8_t *x, const int8_t *weight,
                                                                    const int32_t *bias, int8_t *y, int scaled)
{
    _Alignas(8) int16_t planes[MCU_DWPL_BYTES / 2];
    const int32_t words = 2 * g->plane; /* four planes of an even count of int16 */
    mcu_dwpl_zero(planes, words); /* the border columns stay zero: fills write the interiors */
    const int clamp = scaled ? MCU_DWPL_SCALED : mcu_dwpl_finish(act_min, act_max, output_offset);
    const size_t image = (size_t)h * (size_t)w * (size_t)ch;
    const size_t row = (size_t)w * (size_t)ch;
    const size_t line_step = g->transposed ? (size_t)ch : row; /* output bytes from a line to the next */
    /* padding across the lines (the first plane line's input line is -pad_across) and along them */
    const int32_t pad_across = g->transposed ? pad_left : pad_top, pad_along = g->transposed ? pad_top : pad_left;
    mcu_dwpl_fill_args fill;
    mcu_dwpl_fill_prep(&fill, g, h, w, ch, pad_along, mcu_offset_pair(input_offset));
    const int32_t pairs = g->len & ~1; /* int16 of a line's pairs of pixels */
    const int32_t quads = g->len & ~3; /* int16 of a line's quads of pixels (one at least: MCU_DWPL_LEN_MIN) */
    mcu_dwpl_ch t[4];
    const int32_t step = g->transposed ? (int32_t)row : ch;
    const int kind = MCU_DWPL_KIND(g->len, scaled ? MCU_DWPL_RELU : clamp);
    /* the plane on from where a line's steps leave the position: after its pairs (quads or sixes and their
     * tail), at its start for three and six */
    const int32_t skip = (g->cols - (kind == 0 || kind >= 12 ? pairs : 0)) * 2;
    const int32_t steps = kind >= 12 ? g->len - g->len % 6 : quads; /* int16 of a line's sixes or quads */
    mcu_dwpl_ch_layer(t, step, g->len, skip, (int32_t)line_step - g->len * step, act_min, act_max);
    /* after the sixes: a pair (bits 31 and 29: the shifted word is not zero with the pair alone), a pixel
     * alone (bit 30) */
    const uint32_t tail6 = (g->len % 6 >= 2 ? 0xA0000000u : 0u) | (uint32_t)(g->len & 1) << 30;
    for (int32_t k = 0; k < 4; ++k) {
        t[k].tail = kind >= 12 ? mcu_u32_to_s32(tail6) : t[k].tail;
        t[k].more = k < 3;
    }
    for (int32_t b = 0; b < n; ++b) {
        const int8_t *xb = x + (size_t)b * image;
        int8_t *yb = y + (size_t)b * image;
        for (int32_t c = 0; c < ch; c += 4) {
            /* kernel line i of the plane's orientation: taps (i, j), or (j, i) transposed */
            const int32_t across = g->transposed ? 1 : 3, along = g->transposed ? 3 : 1;
            const int32_t *bc = bias != NULL ? bias + c : NULL;
            mcu_dwpl_group_init_s1(t, weight + c, ch, across, along, q->multiplier + c, q->shift + c, bc,
                                   output_offset, clamp == MCU_DWPL_SCALED);
            for (int32_t l0 = 0; l0 < g->lines; l0 += g->band) {
                const int32_t nb = g->lines - l0 < g->band ? g->lines - l0 : g->band;
                /* plane line p holds input line l0 - pad_across + p, for p in [0, nb + 2) */
                int32_t p = 0;
                if (g->band == g->lines) { /* one band: the lines outside the image stay zero */
                    mcu_dwpl_fill(&fill, planes + pad_across * g->cols, xb + c, 0, g->lines);
                    p = nb + 2;
                } else if (l0 > 0) { /* the previous band's last two input lines, no longer in the image */
                    mcu_dwpl_carry(g, planes);
                    p = 2;
                }
                for (; p < nb + 2; ++p) {
                    const int32_t j = l0 - pad_across + p;
                    if (j < 0 || j >= g->lines) {
                        mcu_dwpl_line4(g, planes, p);
                        continue;
                    }
                    int32_t count = 1; /* the run of lines inside the image from here */
                    while (p + count < nb + 2 && j + count < g->lines) {
                        ++count;
                    }
                    mcu_dwpl_fill(&fill, planes + p * g->cols, xb + c, j, count);
                    p += count - 1;
                }
                /* one-step lines (three, six): the position after the band's last line */
                const int32_t ends = scaled || (kind != 3 && kind != 6) ? steps : nb * g->cols;
                /* the four channels' fields in a loop without a call, which GCC keeps in registers */
                int8_t *yk = yb + (size_t)l0 * line_step + c;
                const int16_t *ek = planes + ends;
                const int32_t next = (g->plane - ends) * 2;
                for (int32_t k = 0; k < 4; ++k, ++yk, ek += g->plane) {
                    t[k].y = yk;
                    t[k].end = ek;
                    t[k].lines = nb;
                    t[k].next = next;
                }
                /* one-step lines: the group's four channels in one call; the kinds spelt out, so that each site
                 * expands only its own loops */
                if (kind == 3 || kind == 6) {
                    mcu_dwpl_channel(planes, g->cols * 2, t, clamp, kind == 3 ? 3 : 6);
                    continue;
                }
                for (int32_t k = 0; k < 4; ++k) {
                    mcu_dwpl_channel(planes + k * g->plane, g->cols * 2, &t[k], clamp,
                                     kind == 12 ? 12 : kind == 13 ? 13 : 0);
                }
            }
        }
    }
}

/* MCU_DWPL_PACKED_WORDS (mcu/kernels_s8.h): the ten words of a channel's constants in mcu_dwpl_ch (w[0 .. 5],
 * bias, m, c, sh), as packed ahead of time (mcu/backends/optimized/dwpack.py: the fields mcu_dwpl_group_init_s1
 * sets, in the same order). */

/* mcu_dwpl_layer_as for a layer of one band whose lines take one step each (MCU_DWPL_KIND 3 or 6: g->band ==
 * g->lines and `kind` checked by the caller), with every channel's constants packed ahead of time (k: ten words a
 * channel, MCU_DWPL_PACKED_WORDS, their requantization bounds checked by the packer): a group's set-up is a copy
 * of 40 words where mcu_dwpl_group_init_s1 widened the weights and built the requantization words (about 400
 * cycles a group on the M33 model), and no mcu_dwpl_quant_ok pass runs. The 6 x 6 and 3 x 3 images only, where a
 * group's set-up weighs against its few pixels; a copy of the layer's code of its own but for two kinds. */
static __attribute__((noinline, unused)) void
mcu_dwpl_layer_packed(const mcu_dwpl_geom *g, int32_t n, int32_t h, int32_t w, int32_t ch, int32_t pad_top,
                      int32_t pad_left, int32_t input_offset, int32_t act_min, int32_t act_max, int clamp, int kind,
                      const uint32_t *k, const int8_t *x, int8_t *y)
{
    _Alignas(8) int16_t planes[MCU_DWPL_BYTES / 2];
    mcu_dwpl_zero(planes, 2 * g->plane); /* the border columns and lines stay zero: fills write the interiors */
    const size_t image = (size_t)h * (size_t)w * (size_t)ch;
    const size_t row = (size_t)w * (size_t)ch;
    const size_t line_step = g->transposed ? (size_t)ch : row;
    const int32_t pad_across = g->transposed ? pad_left : pad_top, pad_along = g->transposed ? pad_top : pad_left;
    mcu_dwpl_fill_args fill;
    mcu_dwpl_fill_prep(&fill, g, h, w, ch, pad_along, mcu_offset_pair(input_offset));
    mcu_dwpl_ch t[4];
    const int32_t step = g->transposed ? (int32_t)row : ch;
    /* one-step lines: the position at a line's start, the next line a plane line on */
    mcu_dwpl_ch_layer(t, step, g->len, g->cols * 2, (int32_t)line_step - (clamp == MCU_DWPL_PACKED ? 0 : g->len * step),
                      act_min, act_max);
    for (int32_t j = 0; j < 4; ++j) {
        t[j].more = j < 3;
    }
    const int32_t ends = g->lines * g->cols; /* the position after the band's last line */
    const int32_t next = (g->plane - ends) * 2;
    /* the fields the one-step lines' assembly only reads, the same for every group */
    for (int32_t j = 0; j < 4; ++j) {
        t[j].end = planes + ends + j * g->plane;
        t[j].lines = g->lines;
        t[j].next = next;
    }
    for (int32_t b = 0; b < n; ++b) {
        const int8_t *xb = x + (size_t)b * image;
        int8_t *yb = y + (size_t)b * image;
        const uint32_t *kc = k;
        for (int32_t c = 0; c < ch; c += 4) {
            int8_t *yk = yb + c;
#if MCU_S8_DSP_NATIVE
            /* per channel its output pointer (t->y, 12 bytes before t->w) and w[0 .. 5], bias, m, c, sh: ten words
             * at offset 12 (the _Static_assert above) by two LDM and two STM of five, the four channels in one
             * block (a C loop of the copies reloaded the group's fields at each: 48 cycles a channel, now 37) */
            uint32_t *d = t[0].w;
#define MCU_DWPL_COPY_CH                                                                      \
    "str %2, [%1, #-12]\n\t"                                                                 \
    "ldmia %0!, {r1, r2, r3, r4, r5}\n\t"                                                    \
    "stmia %1!, {r1, r2, r3, r4, r5}\n\t"                                                    \
    "ldmia %0!, {r1, r2, r3, r4, r5}\n\t"                                                    \
    "stmia %1!, {r1, r2, r3, r4, r5}\n\t"                                                    \
    "adds %2, %2, #1\n\t"                                                                    \
    "adds %1, %1, #48\n\t" /* sizeof (mcu_dwpl_ch) - 40 */
            _Static_assert(sizeof(mcu_dwpl_ch) == 88, "MCU_DWPL_COPY_CH's step");
            __asm__ volatile(MCU_DWPL_COPY_CH MCU_DWPL_COPY_CH MCU_DWPL_COPY_CH MCU_DWPL_COPY_CH
                             : "+r"(kc), "+r"(d), "+r"(yk)
                             :
                             : "r1", "r2", "r3", "r4", "r5", "cc", "memory");
#undef MCU_DWPL_COPY_CH
#else
            for (int32_t j = 0; j < 4; ++j, ++yk) {
                for (int32_t i = 0; i < 6; ++i) {
                    t[j].w[i] = kc[i];
                }
                t[j].bias = kc[6];
                t[j].m = mcu_u32_to_s32(kc[7]);
                t[j].c = mcu_u32_to_s32(kc[8]);
                t[j].sh = mcu_u32_to_s32(kc[9]);
                kc += MCU_DWPL_PACKED_WORDS;
                t[j].y = yk;
                t[j].lines = g->lines; /* the C lines count it down */
            }
#endif
#if MCU_S8_DSP_NATIVE
            if (fill.shape == 6 || fill.shape == 3) {
                fill.d = planes + pad_across * g->cols + fill.pad_along;
                fill.s = xb + c;
                fill.lines = g->lines;
                register mcu_dwpl_fill_args *a0 __asm__("r0") = &fill;
                if (fill.shape == 6) {
                    __asm__ volatile(MCU_DWPL_FILL_STRAIGHT_LINES(MCU_DWPL_FILL_ONE MCU_DWPL_FILL_PAIR MCU_DWPL_FILL_PAIR
                                                                      MCU_DWPL_FILL_ONE)
                                     : "+r"(a0)
                                     :
                                     : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr",
                                       "cc", "memory");
                } else {
                    __asm__ volatile(MCU_DWPL_FILL_STRAIGHT_LINES(MCU_DWPL_FILL_ONE MCU_DWPL_FILL_PAIR)
                                     : "+r"(a0)
                                     :
                                     : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr",
                                       "cc", "memory");
                }
            } else
#endif
            {
                mcu_dwpl_fill(&fill, planes + pad_across * g->cols, xb + c, 0, g->lines);
            }
            /* the forms spelt out, so that only their loops are expanded (a ReLU layer's words are scaled, or
             * doubled for the signed loops: mcu_depthwise_conv2d_s8_planes passes no MCU_DWPL_RELU) */
            const int form = clamp == MCU_DWPL_PACKED ? MCU_DWPL_PACKED : clamp == MCU_DWPL_CLAMP ? MCU_DWPL_CLAMP
                                                                                                : MCU_DWPL_SAT;
            if (kind == 3) {
                mcu_dwpl_channel(planes, g->cols * 2, t, form, 3);
            } else {
                mcu_dwpl_channel(planes, g->cols * 2, t, form, 6);
            }
        }
    }
}

#if MCU_S8_DSP_NATIVE
/* The fill of a group's four planes for mcu_dwpl_layer_whole, straight: every input pixel at an immediate offset
 * from the group's first byte (r1; pixel (i, j) at (i w + j) S bytes, S = ch), every plane word at an immediate offset
 * from the planes (r0; plane k at k P bytes, plane line i + 1 at (i + 1) L bytes, a line's pixel j at position j + 1),
 * the input offset pair in r7. A line's pixels load in one chain and no pointer steps between them: 43 cycles a line
 * of six on the M4/M33 model where mcu_dwpl_fill_lines6's loop took 62 (its loads in four chains, the four plane
 * pointers and the input stepped at every pixel and line). */
/* Pixel v alone (its four channels) at plane byte D of planes 0 .. 3 (t a temporary). */
#define MCU_DWPL_WF_ONE(P, D, v, t)                                                           \
    "sxtab16 " t ", r7, " v "\n\t"                                                            \
    "sxtab16 " v ", r7, " v ", ror #8\n\t"                                                    \
    "strh " t ", [r0, #" D "]\n\t"                                                            \
    "lsr " t ", " t ", #16\n\t"                                                               \
    "strh " v ", [r0, #" P " + " D "]\n\t"                                                    \
    "lsr " v ", " v ", #16\n\t"                                                               \
    "strh " t ", [r0, #2 * " P " + " D "]\n\t"                                                \
    "strh " v ", [r0, #3 * " P " + " D "]\n\t"
/* Pixels a and b, neighbours along the line, at plane byte D (a word) of planes 0 .. 3, as MCU_DWPL_FILL_PAIR. */
#define MCU_DWPL_WF_PAIR(P, D, a, b, t)                                                       \
    "pkhbt " t ", " a ", " b ", lsl #16\n\t"                                                   \
    "pkhtb " b ", " b ", " a ", asr #16\n\t"                                                   \
    "sxtab16 " a ", r7, " t "\n\t"                                                            \
    "sxtab16 " t ", r7, " t ", ror #8\n\t"                                                    \
    "str " a ", [r0, #" D "]\n\t"                                                             \
    "sxtab16 " a ", r7, " b "\n\t"                                                            \
    "str " t ", [r0, #" P " + " D "]\n\t"                                                     \
    "sxtab16 " b ", r7, " b ", ror #8\n\t"                                                    \
    "str " a ", [r0, #2 * " P " + " D "]\n\t"                                                 \
    "str " b ", [r0, #3 * " P " + " D "]\n\t"
/* Input line i (X: its first pixel's byte offset) of a 6 x 6 x 128 image into plane line i + 1 (D: its byte offset). */
#define MCU_DWPL_WF6_LINE(X, D)                                                               \
    "ldr r2, [r1, #" X "]\n\t"                                                                \
    "ldr r3, [r1, #" X " + 128]\n\t"                                                          \
    "ldr r4, [r1, #" X " + 256]\n\t"                                                          \
    "ldr r5, [r1, #" X " + 384]\n\t"                                                          \
    "ldr r6, [r1, #" X " + 512]\n\t"                                                          \
    "ldr r8, [r1, #" X " + 640]\n\t" MCU_DWPL_WF_ONE("168", D " + 2", "r2", "r9")              \
        MCU_DWPL_WF_PAIR("168", D " + 4", "r3", "r4", "r9") MCU_DWPL_WF_PAIR("168", D " + 8", "r5", "r6", "r9") \
            MCU_DWPL_WF_ONE("168", D " + 12", "r8", "r9")
/* The same of a 3 x 3 x 256 image. */
#define MCU_DWPL_WF3_LINE(X, D)                                                               \
    "ldr r2, [r1, #" X "]\n\t"                                                                \
    "ldr r3, [r1, #" X " + 256]\n\t"                                                          \
    "ldr r4, [r1, #" X " + 512]\n\t" MCU_DWPL_WF_ONE("68", D " + 2", "r2", "r9")               \
        MCU_DWPL_WF_PAIR("68", D " + 4", "r3", "r4", "r9")
_Static_assert(MCU_DWPL_COLS(6) * 2 == 20 && MCU_DWPL_COLS(3) * 2 == 12 && MCU_DWPL_COLS(6) * 8 * 2 + 8 == 168 &&
                   MCU_DWPL_COLS(3) * 5 * 2 + 8 == 68,
               "MCU_DWPL_WF6_LINE, _WF3_LINE: the plane lines' and the planes' bytes");
static inline __attribute__((always_inline)) void mcu_dwpl_fill_whole(int16_t *planes, const int8_t *x, uint32_t off2,
                                                                      int whole)
{
    register int16_t *r0 __asm__("r0") = planes;
    register const int8_t *r1 __asm__("r1") = x;
    register uint32_t r7 __asm__("r7") = off2;
    if (whole == 6) { /* the last line's pixels from 30 S on: LDR's offset reaches 4095 */
        __asm__ volatile(MCU_DWPL_WF6_LINE("0", "20") MCU_DWPL_WF6_LINE("768", "40") MCU_DWPL_WF6_LINE("1536", "60")
                             MCU_DWPL_WF6_LINE("2304", "80") MCU_DWPL_WF6_LINE("3072", "100")
                                 "add r1, r1, #3840\n\t" MCU_DWPL_WF6_LINE("0", "120")
                         : "+r"(r1)
                         : "r"(r0), "r"(r7)
                         : "r2", "r3", "r4", "r5", "r6", "r8", "r9", "memory");
    } else {
        __asm__ volatile(MCU_DWPL_WF3_LINE("0", "12") MCU_DWPL_WF3_LINE("768", "24") MCU_DWPL_WF3_LINE("1536", "36")
                         :
                         : "r"(r0), "r"(r1), "r"(r7)
                         : "r2", "r3", "r4", "r9", "memory");
    }
}
/* mcu_dwpl_layer_packed for the layers mcu_dwpl_whole_kind takes (6 x 6 x 128, 3 x 3 x 256, scaled, padding one
 * line across): each channel's plane a straight block reading the packed words in place (no copy of a group's 40
 * words into mcu_dwpl_ch: about 110 cycles a group), the planes MCU_DWPL_W_STRIDE apart, each followed by its
 * channel's first output and whether another channel follows. Its planes are 840 bytes of stack where the layer's
 * take MCU_DWPL_BYTES. */
#define MCU_DWPL_W_STRIDE 168
_Static_assert(MCU_DWPL_COLS(6) * 8 * 2 + 8 == MCU_DWPL_W_STRIDE, "MCU_DWPL_W_STRIDE: the largest plane and two words");
static __attribute__((noinline, unused)) void mcu_dwpl_layer_whole(const mcu_dwpl_geom *g, int32_t n, int32_t h,
                                                                   int32_t w, int32_t ch, int32_t input_offset,
                                                                   int whole, const uint32_t *k,
                                                                   const int8_t *x, int8_t *y)
{
    _Alignas(8) int16_t planes[5 * MCU_DWPL_W_STRIDE / 2]; /* the last MCU_DWPL_W_NEXT's output word after four */
    const int32_t stride = 2 * g->plane + 8;
    mcu_dwpl_zero(planes, stride); /* four planes of stride bytes: stride words */
    const uint32_t off2 = mcu_offset_pair(input_offset);
    for (int32_t j = 0; j < 3; ++j) {
        mcu_store_u32(planes + (j * stride + 2 * g->plane + 4) / 2, 1u);
    }
    const size_t image = (size_t)h * (size_t)w * (size_t)ch;
    for (int32_t b = 0; b < n; ++b) {
        const int8_t *xb = x + (size_t)b * image;
        int8_t *yb = y + (size_t)b * image;
        const uint32_t *kc = k;
        for (int32_t c = 0; c < ch; c += 4) {
            /* the first channel's output; MCU_DWPL_W_NEXT sets the others' */
            mcu_store_u32(planes + g->plane, (uint32_t)(uintptr_t)(yb + c));
            mcu_dwpl_fill_whole(planes, xb + c, off2, whole);
            kc = mcu_dwpl_channels_whole(planes, kc, whole);
        }
    }
}
#endif

static __attribute__((noinline, unused)) void
mcu_dwpl_layer_scaled(const mcu_dwpl_geom *g, int32_t n, int32_t h, int32_t w, int32_t ch, int32_t pad_top,
                      int32_t pad_left, int32_t input_offset, int32_t output_offset, const mcu_per_channel_quant *q,
                      const int8_t *x, const int8_t *weight, const int32_t *bias, int8_t *y)
{
    mcu_dwpl_layer_as(g, n, h, w, ch, pad_top, pad_left, input_offset, output_offset, -128, 127, q, x, weight, bias, y,
                      1);
}

/* The layer: MCU_DWPL_SCALED for the lines of sixes where its bounds hold (on the 6 x 6 images the group's scaling
 * took back the saving, and the second copy of the code cost more in the U575's ICACHE: about 1 k estimated cycles
 * more a layer; on the 3 x 3 images a group's scaling costs more than the lines save). */
static __attribute__((noinline, unused)) void mcu_dwpl_layer(const mcu_dwpl_geom *g, int32_t n, int32_t h, int32_t w,
                                                             int32_t ch, int32_t pad_top, int32_t pad_left,
                                                             int32_t input_offset, int32_t output_offset,
                                                             int32_t act_min, int32_t act_max,
                                                             const mcu_per_channel_quant *q, const int8_t *x,
                                                             const int8_t *weight, const int32_t *bias, int8_t *y)
{
    const int finish = mcu_dwpl_finish(act_min, act_max, output_offset);
    if (g->scaled && finish == MCU_DWPL_RELU && MCU_DWPL_KIND(g->len, finish) >= 12) {
        mcu_dwpl_layer_scaled(g, n, h, w, ch, pad_top, pad_left, input_offset, output_offset, q, x, weight, bias, y);
        return;
    }
    mcu_dwpl_layer_as(g, n, h, w, ch, pad_top, pad_left, input_offset, output_offset, act_min, act_max, q, x, weight,
                      bias, y, 0);
}

/* The scaled bounds of four channels (below, with the stride-2 groups' that use them too). */
static inline int mcu_dwpl_scaled_ok4(const int32_t *shift, const int32_t *bias);

/* Whether the plane path serves a band of output rows of a 3x3 stride-1 layer apart from its full
 * image (a streamed prefix's or fused block's row call: `in_h` input rows, `out_h` output rows, fewer
 * than the input's, each reading rows oh - pad_top .. oh - pad_top + 2): lines along the rows, every
 * output row in one band of four planes within MCU_DWPL_BYTES, every input column inside a line. */
static inline int mcu_dwpl_plan_rows(mcu_dwpl_geom *g, int32_t kh, int32_t kw, int32_t ch, int32_t in_h, int32_t out_h,
                                     int32_t in_w, int32_t out_w, int32_t pad_top, int32_t pad_left,
                                     const mcu_per_channel_quant *q, const int32_t *bias, int32_t output_offset)
{
    if (kh != 3 || kw != 3 || ch % 4 != 0 || out_h >= in_h || out_w < MCU_DWPL_LEN_MIN || out_w > MCU_DWPL_ROW_MAX ||
        pad_top > 2 || pad_left > 2) {
        return 0;
    }
    const int32_t cols = (out_w + 4) & ~1;
    if (pad_left + in_w > cols || 4 * (out_h + 2) * cols * 2 > MCU_DWPL_BYTES) {
        return 0;
    }
    if (!mcu_dwpl_quant_ok(q, bias, ch, output_offset)) {
        return 0;
    }
    g->transposed = 0;
    g->lines = out_h;
    g->len = out_w;
    g->cols = cols;
    g->band = out_h;
    g->plane = (out_h + 2) * cols;
    return 1;
}

/* The band of mcu_dwpl_plan_rows (batch 1): plane line p holds input row p - pad_top; rows outside
 * the input, and columns outside it, stay zero. */
static __attribute__((noinline, unused)) void mcu_dwpl_rows(const mcu_dwpl_geom *g, int32_t in_h, int32_t in_w,
                                                            int32_t ch, int32_t pad_top, int32_t pad_left,
                                                            int32_t input_offset, int32_t output_offset,
                                                            int32_t act_min, int32_t act_max,
                                                            const mcu_per_channel_quant *q, const int8_t *x,
                                                            const int8_t *weight, const int32_t *bias, int8_t *y)
{
    _Alignas(8) int16_t planes[MCU_DWPL_BYTES / 2];
    const int32_t words = 2 * g->plane; /* four planes of an even count of int16 */
    mcu_dwpl_zero(planes, words); /* the border columns stay zero: fills write the interiors */
    mcu_dwpl_fill_args fill;
    mcu_dwpl_fill_prep(&fill, g, in_h, in_w, ch, pad_left, mcu_offset_pair(input_offset));
    const int clamp = mcu_dwpl_finish(act_min, act_max, output_offset);
    const int32_t out_row = g->len * ch;
    const int32_t filled = in_h < g->lines + 2 - pad_top ? in_h : g->lines + 2 - pad_top; /* rows a line holds */
    const int32_t pairs = g->len & ~1;
    const int32_t quads = g->len & ~3;
    mcu_dwpl_ch t[4];
    mcu_dwpl_ch_layer(t, ch, g->len, (g->cols - pairs) * 2, out_row - g->len * ch, act_min, act_max);
    /* ReLU rows of 12, 24 and 48 pixels take the whole layer's scaled loop group by group where its bounds hold (the
     * streamed rows of mobilenet_v1's 48 x 48 and 24 x 24 layers keep their gain with the whole-tensor calls') */
    const int at = clamp == MCU_DWPL_RELU && mcu_dwpl_len_at(g->len);
    for (int32_t c = 0; c < ch; c += 4) {
        mcu_dwpl_fill(&fill, planes + pad_top * g->cols, x + c, 0, filled);
        const int32_t *bc = bias != NULL ? bias + c : NULL;
        const int scaled = at && mcu_dwpl_scaled_ok4(q->shift + c, bc);
        mcu_dwpl_group_init_as(t, weight + c, ch, 3, 1, 0, q->multiplier + c, q->shift + c, bc, output_offset, scaled);
        for (int32_t k = 0; k < 4; ++k) {
            const int16_t *plane = planes + k * g->plane;
            t[k].y = y + c + k;
            t[k].end = plane + (scaled ? g->len : quads);
            t[k].lines = g->lines;
            if (scaled) {
                mcu_dwpl_channel_at(plane, g->len, &t[k], 1); /* a row's outputs end where the next's begin */
            } else {
                mcu_dwpl_channel(plane, g->cols * 2, &t[k], clamp, 0);
            }
        }
    }
}

/* --- stride 2 ----------------------------------------------------------------------------------
 *
 * Output pixel k of a line reads plane columns 2k .. 2k + 2, so a quad of output pixels reads the words
 * (x0 x1) .. (x8 x9) of each of its three plane lines and takes eight MACs a line:
 *   pixel k: SMLAD (x2k x2k+1)(w0 w1) + SMLABB x2k+2 w2
 * the kernel line's (w_i0 w_i1) and its third column's weight ((w02 w12), (w22 0)) loaded in the same
 * chain as the plane words (about 88 cycles a quad against 112 for two pairs with the weights in five
 * registers); then a pair and a pixel alone, or a line of three pixels in one step.
 * Output line l reads plane lines 2 l .. 2 l + 2. Every input is read (through the fill) once per band
 * of output lines, and a band's first plane line is the previous band's last.
 *
 * Why planes rather than a direct NHWC loop that slides along the input row (counted on the M4/M33
 * model, per group of four channels and output pixel, weights pre-widened on the stack): in a word of
 * NHWC inputs the lanes are different channels, so SMLAD cannot pair products and the 36 products
 * take 36 single MACs; the nine taps' 18 weight words do not fit in registers beside four accumulators,
 * so they are reloaded every pixel (18 cycles in a load chain); with 9 input loads, 18 SXTAB16, the
 * bias, four requantizations (28 with their constants' loads), the pack, store and loop: about 124
 * cycles, 31 an output, what the fill (about 8) and this loop (about 22) cost together. Pairing two
 * pixels' bytes with PKHBT/PKHTB in the loop (SMLAD on (x2k x2k+1), the fill fused in) brings it to
 * about 29, before borders: at most ~35 k of mobilenet_v1's four stride-2 layers (17,280 outputs) on
 * mps2-an505-u575, for a second path with its own padding. Stride 1 loses outright (2.3 cycles a MAC
 * here, more than 3 direct). */
/* Whether four channels (the layer within mcu_dwpl_quant_ok) are within mcu_dwpl_quant_as's scaled bounds too: its
 * scaled tests alone (the whole of mcu_dwpl_quant_as a group cost about 35 cycles more a group than these). */
static inline int mcu_dwpl_scaled_ok4(const int32_t *shift, const int32_t *bias)
{
    uint32_t sbad = 0;
    for (int32_t k = 0; k < 4; ++k) {
        const int32_t bk = bias != NULL ? bias[k] : 0;
        const uint32_t sign = (uint32_t)(bk >> 31);
        const uint32_t a = (((uint32_t)bk ^ sign) - sign) + MCU_DWPL_WINDOW_MAX;
        const uint32_t u = (uint32_t)shift[k] + 13u;
        sbad |= ((u | (6u - u)) >> 31) | (a >> ((16u - (uint32_t)shift[k]) & 31u));
    }
    return sbad == 0;
}

/* Stride 2 takes the scaled requantization (MCU_DWPL_SCALED, mcu_dwpl_rq_scaled) group by group: a group of a
 * layer finished by MCU_DWPL_RELU whose four channels are within mcu_dwpl_quant_as's scaled bounds (R in [7, 13],
 * 2^(15 - R) (|bias| + MCU_DWPL_WINDOW_MAX) < 2^31); mcu_dwpl_group_init_as scales its lanes as it widens them
 * (they stay int16: |w| 2^(15 - R) <= 2^15 at R = 7). The constants of channels c .. c + 3 (mcu_dwpl_group_init
 * with s2 1), scaled where they may be; returns the group's finish. */
static inline int mcu_dwpl_group_s2(mcu_dwpl_ch t[4], const int8_t *weight, int32_t c, int32_t ch,
                                    const mcu_per_channel_quant *q, const int32_t *bias, int32_t output_offset,
                                    int clamp)
{
    const int32_t *sh = q->shift + c, *m = q->multiplier + c;
    const int32_t *b = bias != NULL ? bias + c : NULL;
    if (clamp == MCU_DWPL_RELU && mcu_dwpl_scaled_ok4(sh, b)) {
        mcu_dwpl_group_init_as(t, weight + c, ch, 3, 1, 1, m, sh, b, output_offset, 1);
        return MCU_DWPL_SCALED;
    }
    mcu_dwpl_group_init_as(t, weight + c, ch, 3, 1, 1, m, sh, b, output_offset, 0);
    return clamp;
}

/* The scaled stride-2 lines with the constants held in registers (mcu_dwpl_group_s2_held): their plane line and
 * output step are immediates, so a layer takes them at the pairs they were built for, mobilenet_v1's 48 x 48 x 16
 * -> 24 x 24 (plane lines of 50 int16, step 16) and 24 x 24 x 32 -> 12 x 12 (26, 32), along rows of whole quads;
 * 0: the quads' loops. The emulated build has no such loop. mobilenet_v1 on mps2-an505-u575: 9,918,475 ->
 * 9,857,262 est. cycles; with the v1 pairs alone mobilenet_v2 lost 73 k to the ICACHE, with its own it gains 56 k. */
#define MCU_DWPL_S2H_100_16 1
#define MCU_DWPL_S2H_52_32 2
#define MCU_DWPL_S2H_100_48 3 /* mobilenet_v2's 48 x 48 x 48 -> 24 x 24 */
#define MCU_DWPL_S2H_52_48 4  /* and 24 x 24 x 48 -> 12 x 12 */
static inline int mcu_dwpl_s2_held(const mcu_dwpl_geom *g, int32_t ch)
{
#if MCU_S8_DSP_NATIVE
    if (g->transposed || g->len % 4 != 0) {
        return 0;
    }
    if (g->cols == 50 && ch == 16) {
        return MCU_DWPL_S2H_100_16;
    }
    if (g->cols == 26 && ch == 32) {
        return MCU_DWPL_S2H_52_32;
    }
    if (g->cols == 50 && ch == 48) {
        return MCU_DWPL_S2H_100_48;
    }
    if (g->cols == 26 && ch == 48) {
        return MCU_DWPL_S2H_52_48;
    }
#else
    (void)g;
    (void)ch;
#endif
    return 0;
}

#if MCU_S8_DSP_NATIVE
/* Kernel line i's weights (w_i0 w_i1) at wofs and its third column's at w2ofs, then plane words from
 * r0 on into r4, r5, r6, r7, lr (xs). */
#define MCU_DWPL_S2_LD(wofs, w2ofs, xs)                                                       \
    "ldr r2, [r12, #" wofs "]\n\t"                                                            \
    "ldr r3, [r12, #" w2ofs "]\n\t" xs
/* The second kernel line's: its third column's weight is the other half of the first line's word, still
 * in r3 (one load a step fewer). */
#define MCU_DWPL_S2_LD_W2KEPT(wofs, xs) "ldr r2, [r12, #" wofs "]\n\t" xs
#define MCU_DWPL_S2_X5                                                                        \
    "ldr r4, [r0]\n\t"                                                                        \
    "ldr r5, [r0, #4]\n\t"                                                                    \
    "ldr r6, [r0, #8]\n\t"                                                                    \
    "ldr r7, [r0, #12]\n\t"                                                                   \
    "ldr lr, [r0, #16]\n\t"
#define MCU_DWPL_S2_X4                                                                        \
    "ldr r4, [r0]\n\t"                                                                        \
    "ldr r5, [r0, #4]\n\t"                                                                    \
    "ldr r6, [r0, #8]\n\t"                                                                    \
    "ldr r7, [r0, #12]\n\t"
#define MCU_DWPL_S2_X3                                                                        \
    "ldr r4, [r0]\n\t"                                                                        \
    "ldr r5, [r0, #4]\n\t"                                                                    \
    "ldr r6, [r0, #8]\n\t"
#define MCU_DWPL_S2_X2                                                                        \
    "ldr r4, [r0]\n\t"                                                                        \
    "ldr r5, [r0, #4]\n\t"
/* One kernel line's MACs of a quad, a pair, a pixel alone: pixel k SMLAD (x2k x2k+1)(w0 w1) and the
 * third column's x2k+2 by the half bt of r3; a1 .. a3 what accumulators r9 .. r11 add to (r8: the bias
 * in r8 on the first kernel line, so r8's own MAC comes after theirs); step: one instruction among them. */
#define MCU_DWPL_S2_MAC4(bt, a1, a2, a3, step)                                                \
    "smlad r9, r5, r2, " a1 "\n\t"                                                            \
    "smlad r10, r6, r2, " a2 "\n\t"                                                           \
    "smlad r11, r7, r2, " a3 "\n\t"                                                           \
    "smlad r8, r4, r2, r8\n\t" step                                                           \
    "smla" bt " r8, r5, r3, r8\n\t"                                                           \
    "smla" bt " r9, r6, r3, r9\n\t"                                                           \
    "smla" bt " r10, r7, r3, r10\n\t"                                                         \
    "smla" bt " r11, lr, r3, r11\n\t"
#define MCU_DWPL_S2_MAC3(bt, a1, a2, step)                                                    \
    "smlad r9, r5, r2, " a1 "\n\t"                                                            \
    "smlad r10, r6, r2, " a2 "\n\t"                                                           \
    "smlad r8, r4, r2, r8\n\t" step                                                           \
    "smla" bt " r8, r5, r3, r8\n\t"                                                           \
    "smla" bt " r9, r6, r3, r9\n\t"                                                           \
    "smla" bt " r10, r7, r3, r10\n\t"
#define MCU_DWPL_S2_MAC2(bt, a1, step)                                                        \
    "smlad r9, r5, r2, " a1 "\n\t"                                                            \
    "smlad r8, r4, r2, r8\n\t" step                                                           \
    "smla" bt " r8, r5, r3, r8\n\t"                                                           \
    "smla" bt " r9, r6, r3, r9\n\t"
#define MCU_DWPL_S2_MAC1(bt, step)                                                            \
    "smlad r8, r4, r2, r8\n\t" step "smla" bt " r8, r5, r3, r8\n\t"
/* The three kernel lines of a quad, a pair, a pixel alone: r0 stepped down the plane lines and back,
 * then on by the pixels' plane words (adv). */
#define MCU_DWPL_S2_LINES(X, MAC, adv)                                                        \
    "ldr r8, [r12, #36]\n\t" MCU_DWPL_S2_LD("12", "24", X) MAC("bb", "add r0, r0, r1\n\t")    \
        MCU_DWPL_S2_LD_W2KEPT("16", X) MAC##_ON("bt", "add r0, r0, r1\n\t")                    \
            MCU_DWPL_S2_LD("20", "28", X) MAC##_ON("bb", "sub r0, r0, r1, lsl #1\n\t") "add r0, r0, #" adv "\n\t"
#define MCU_DWPL_S2_Q(bt, step) MCU_DWPL_S2_MAC4(bt, "r8", "r8", "r8", step)
#define MCU_DWPL_S2_Q_ON(bt, step) MCU_DWPL_S2_MAC4(bt, "r9", "r10", "r11", step)
#define MCU_DWPL_S2_T(bt, step) MCU_DWPL_S2_MAC3(bt, "r8", "r8", step)
#define MCU_DWPL_S2_T_ON(bt, step) MCU_DWPL_S2_MAC3(bt, "r9", "r10", step)
#define MCU_DWPL_S2_P(bt, step) MCU_DWPL_S2_MAC2(bt, "r8", step)
#define MCU_DWPL_S2_P_ON(bt, step) MCU_DWPL_S2_MAC2(bt, "r9", step)
#define MCU_DWPL_S2_S(bt, step) MCU_DWPL_S2_MAC1(bt, step)
#define MCU_DWPL_S2_S_ON(bt, step) MCU_DWPL_S2_MAC1(bt, step)
/* A line's pair and pixel alone after its quads (OUT2, OUT1: their outputs), then the line's end. A line of
 * quads alone (mobilenet_v1's lines of 24 and 12 outputs) leaves on one taken branch (Z: no tail) where
 * MCU_DWPL_TAIL's two tests took two; a line with a pixel alone tests the tail again after its pair. */
#define MCU_DWPL_S2_ENDS(OUT2, OUT1)                                                          \
    "ldr r2, [r12, #76]\n\t"                                                                  \
    "lsls r2, r2, #30\n\t" /* the tail's bits 1 (a pair: N) and 0 on top, Z: neither */        \
    "beq 2f\n\t"                                                                              \
    "bpl 3f\n\t" MCU_DWPL_S2_LINES(MCU_DWPL_S2_X3, MCU_DWPL_S2_P, "8") OUT2                   \
    "3:\n\t"                                                                                  \
    "ldr r2, [r12, #76]\n\t"                                                                  \
    "lsls r2, r2, #31\n\t"                                                                    \
    "bpl 2f\n\t" MCU_DWPL_S2_LINES(MCU_DWPL_S2_X2, MCU_DWPL_S2_S, "0") OUT1                   \
        MCU_DWPL_LINE_END("r1, lsl #1")
/* Quads of output pixels (eight plane columns a step), then a pair and a pixel alone, as the stride-1
 * loop (about 88 cycles a quad against 112 for two pairs with the weights held in five registers). */
#define MCU_DWPL_CHANNEL_S2(clamp4, clamp2, clamp1)                                           \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t" MCU_DWPL_S2_LINES(MCU_DWPL_S2_X5, MCU_DWPL_S2_Q, "16") MCU_DWPL_OUT4(clamp4)     \
    "cmp r0, lr\n\t"                                                                          \
    "bne 1b\n\t"                                                                              \
    MCU_DWPL_S2_ENDS(MCU_DWPL_OUT2(clamp2), MCU_DWPL_OUT1(clamp1))
/* Lines of three output pixels: one step a line (the position stays at the line's start). */
#define MCU_DWPL_CHANNEL3_S2(clamp3)                                                          \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t" MCU_DWPL_S2_LINES(MCU_DWPL_S2_X4, MCU_DWPL_S2_T, "0") MCU_DWPL_OUT3(clamp3)      \
        MCU_DWPL_LINE_END3

/* The scaled requantization (MCU_DWPL_SCALED, mcu_dwpl_group_s2): the multiplier in r2, C in r3, then per
 * accumulator SMMLA and SSAT with ASR #14; the output pointer, its step and the quads' end loaded in the same
 * chain as the two constants (r4, r5, lr: free after the MACs). */
#define MCU_DWPL_S2_SC(a) "smmla " a ", " a ", r2, r3\n\t" "ssat " a ", #8, " a ", asr #14\n\t"
#define MCU_DWPL_S2_SC_CONSTS                                                                 \
    "ldr r2, [r12, #40]\n\t"                                                                  \
    "ldr r3, [r12, #44]\n\t"
#define MCU_DWPL_S2_OUT4SC                                                                    \
    MCU_DWPL_S2_SC_CONSTS                                                                     \
    "ldr r4, [r12]\n\t"                                                                       \
    "ldr r5, [r12, #4]\n\t"                                                                   \
    "ldr lr, [r12, #8]\n\t" MCU_DWPL_S2_SC("r8") MCU_DWPL_S2_SC("r9") MCU_DWPL_S2_SC("r10")    \
        MCU_DWPL_S2_SC("r11")                                                                 \
    "add r6, r4, r5, lsl #1\n\t"                                                              \
    "strb r8, [r4]\n\t"                                                                       \
    "strb r9, [r4, r5]\n\t"                                                                   \
    "strb r10, [r6]\n\t"                                                                      \
    "strb r11, [r6, r5]\n\t"                                                                  \
    "add r6, r6, r5, lsl #1\n\t"                                                              \
    "str r6, [r12]\n\t"
#define MCU_DWPL_S2_OUT2SC                                                                    \
    MCU_DWPL_S2_SC_CONSTS                                                                     \
    "ldrd r10, r11, [r12]\n\t" MCU_DWPL_S2_SC("r8") MCU_DWPL_S2_SC("r9")                      \
    "strb r8, [r10]\n\t"                                                                      \
    "strb r9, [r10, r11]\n\t"                                                                 \
    "add r10, r10, r11, lsl #1\n\t"                                                           \
    "str r10, [r12]\n\t"
#define MCU_DWPL_S2_OUT1SC                                                                    \
    MCU_DWPL_S2_SC_CONSTS                                                                     \
    "ldrd r10, r11, [r12]\n\t" MCU_DWPL_S2_SC("r8")                                           \
    "strb r8, [r10]\n\t"                                                                      \
    "add r10, r10, r11\n\t"                                                                   \
    "str r10, [r12]\n\t"
#define MCU_DWPL_S2_OUT3SC                                                                    \
    MCU_DWPL_S2_SC_CONSTS                                                                     \
    "ldr r4, [r12]\n\t"                                                                       \
    "ldr r5, [r12, #4]\n\t" MCU_DWPL_S2_SC("r8") MCU_DWPL_S2_SC("r9") MCU_DWPL_S2_SC("r10")   \
    "add r6, r4, r5, lsl #1\n\t"                                                              \
    "strb r8, [r4]\n\t"                                                                       \
    "strb r9, [r4, r5]\n\t"                                                                   \
    "strb r10, [r6]\n\t"                                                                      \
    "add r6, r6, r5\n\t"                                                                      \
    "str r6, [r12]\n\t"
#define MCU_DWPL_CHANNEL_S2_SC                                                                \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t" MCU_DWPL_S2_LINES(MCU_DWPL_S2_X5, MCU_DWPL_S2_Q, "16") MCU_DWPL_S2_OUT4SC        \
    "cmp r0, lr\n\t"                                                                          \
    "bne 1b\n\t"                                                                              \
    MCU_DWPL_S2_ENDS(MCU_DWPL_S2_OUT2SC, MCU_DWPL_S2_OUT1SC)
#define MCU_DWPL_CHANNEL3_S2_SC                                                               \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t" MCU_DWPL_S2_LINES(MCU_DWPL_S2_X4, MCU_DWPL_S2_T, "0") MCU_DWPL_S2_OUT3SC         \
        MCU_DWPL_LINE_END3

/* Every line of one channel's plane at stride 2 from pos (its first line's position 0); three: lines of
 * three pixels. */
/* mcu_dwpl_channel_s2's lines, as MCU_DWPL_CHANNEL_BODY: once with the sign correction, once without. */
#define MCU_DWPL_CHANNEL_S2_BODY(clamp)                                                               \
    register const int16_t *r0 __asm__("r0") = pos;                                                   \
    register int32_t r1 __asm__("r1") = line_bytes;                                                   \
    register mcu_dwpl_ch *r12 __asm__("r12") = t;                                                     \
    MCU_DWPL_PICK(three, clamp, MCU_DWPL_CHANNEL3_S2, MCU_DWPL_CHANNEL_S2)

#undef MCU_DWPL_RQ
#define MCU_DWPL_RQ MCU_DWPL_RQ_RELU
static inline void mcu_dwpl_channel_s2_relu(const int16_t *pos, int32_t line_bytes, mcu_dwpl_ch *t, int three)
{
    MCU_DWPL_CHANNEL_S2_BODY(MCU_DWPL_SAT);
}
#undef MCU_DWPL_RQ
#define MCU_DWPL_RQ MCU_DWPL_RQ_SIGNED

static inline void mcu_dwpl_channel_s2_scaled(const int16_t *pos, int32_t line_bytes, mcu_dwpl_ch *t, int three)
{
    register const int16_t *r0 __asm__("r0") = pos;
    register int32_t r1 __asm__("r1") = line_bytes;
    register mcu_dwpl_ch *r12 __asm__("r12") = t;
    if (three) {
        MCU_DWPL_RUN(MCU_DWPL_CHANNEL3_S2_SC);
    } else {
        MCU_DWPL_RUN(MCU_DWPL_CHANNEL_S2_SC);
    }
}

static inline void mcu_dwpl_channel_s2(const int16_t *pos, int32_t line_bytes, mcu_dwpl_ch *t, int clamp, int three)
{
    if (clamp == MCU_DWPL_SCALED) {
        mcu_dwpl_channel_s2_scaled(pos, line_bytes, t, three);
        return;
    }
    if (clamp == MCU_DWPL_RELU) { /* the sign correction left out (MCU_DWPL_RELU) */
        mcu_dwpl_channel_s2_relu(pos, line_bytes, t, three);
        return;
    }
    MCU_DWPL_CHANNEL_S2_BODY(clamp);
}

/* Scaled stride-2 lines with a channel's constants held in registers (mcu_dwpl_group_s2_held): output x is
 * SMLAD (x2x x2x+1)(w_i0 w_i1) and SMLABB of x2x+2 per kernel line, and plane word x + 1 serves both output x's
 * third column and output x + 1's pairs, so each plane word is loaded once, right before its six MACs into two
 * accumulators (r9, r10 in turn: the one finished, the next begun). The nine weights in r2 .. r6 ((w_i0 w_i1),
 * (w02 w12), (w22, the quads left in the high half)), the multiplier and C in r7, r8, the plane position r0,
 * the output r1 (post-indexed by the step CH, an immediate), the three plane words in r11, r12, lr: the bias, the
 * lines left and the skip come from the caller's frame (sp-relative operands). A plane line of L bytes (an
 * immediate): an output is a run of four loads (5 cycles), six MACs, SMMLA, SSAT and STRB: 14 cycles, where the
 * quads that reload the weights and the constants take 21. */
#define MCU_DWPL_S2H_OUT(A, B, o0, o1, o2, CH)                                                \
    "ldr r11, [r0, #" o0 "]\n\t"                                                              \
    "ldr r12, [r0, #" o1 "]\n\t"                                                              \
    "ldr lr, [r0, #" o2 "]\n\t"                                                               \
    "ldr " B ", %[bias]\n\t"                                                                  \
    "smlabb " A ", r11, r5, " A "\n\t"                                                        \
    "smlabt " A ", r12, r5, " A "\n\t"                                                        \
    "smlabb " A ", lr, r6, " A "\n\t"                                                         \
    "smlad " B ", r11, r2, " B "\n\t"                                                         \
    "smlad " B ", r12, r3, " B "\n\t"                                                         \
    "smlad " B ", lr, r4, " B "\n\t"                                                          \
    "smmla " A ", " A ", r7, r8\n\t"                                                          \
    "ssat " A ", #8, " A ", asr #14\n\t"                                                      \
    "strb " A ", [r1], #" CH "\n\t"
/* The lines of a channel: each line's first pairs into r9, then its quads (the last one's first load steps r0 by
 * the quad's 16 bytes), then the skip to the next output line's plane lines. */
#define MCU_DWPL_S2H_LINES(L, CH)                                                             \
    "ldr r1, [r12]\n\t"                                                                       \
    "ldr r2, [r12, #12]\n\t"                                                                  \
    "ldr r3, [r12, #16]\n\t"                                                                  \
    "ldr r4, [r12, #20]\n\t"                                                                  \
    "ldr r5, [r12, #24]\n\t"                                                                  \
    "ldr r7, [r12, #40]\n\t"                                                                  \
    "ldr r8, [r12, #44]\n\t"                                                                  \
    "1:\n\t"                                                                                  \
    "ldr r11, [r0]\n\t"                                                                       \
    "ldr r12, [r0, #" L "]\n\t"                                                               \
    "ldr lr, [r0, #2*" L "]\n\t"                                                              \
    "ldr r9, %[bias]\n\t"                                                                     \
    "ldr r6, %[w4]\n\t"                                                                       \
    "smlad r9, r11, r2, r9\n\t"                                                               \
    "smlad r9, r12, r3, r9\n\t"                                                               \
    "smlad r9, lr, r4, r9\n\t"                                                                \
    ".p2align 2\n\t"                                                                          \
    "2:\n\t" MCU_DWPL_S2H_OUT("r9", "r10", "4", L "+4", "2*" L "+4", CH)                       \
        MCU_DWPL_S2H_OUT("r10", "r9", "8", L "+8", "2*" L "+8", CH)                            \
            MCU_DWPL_S2H_OUT("r9", "r10", "12", L "+12", "2*" L "+12", CH)                     \
    "ldr r11, [r0, #16]!\n\t"                                                                 \
    "ldr r12, [r0, #" L "]\n\t"                                                               \
    "ldr lr, [r0, #2*" L "]\n\t"                                                              \
    "ldr r9, %[bias]\n\t"                                                                     \
    "smlabb r10, r11, r5, r10\n\t"                                                            \
    "smlabt r10, r12, r5, r10\n\t"                                                            \
    "smlabb r10, lr, r6, r10\n\t"                                                             \
    "smlad r9, r11, r2, r9\n\t"                                                               \
    "smlad r9, r12, r3, r9\n\t"                                                               \
    "smlad r9, lr, r4, r9\n\t"                                                                \
    "smmla r10, r10, r7, r8\n\t"                                                              \
    "ssat r10, #8, r10, asr #14\n\t"                                                          \
    "strb r10, [r1], #" CH "\n\t"                                                             \
    "subs r6, r6, #0x10000\n\t"                                                               \
    "bpl 2b\n\t"                                                                              \
    "ldr r11, %[skip]\n\t"                                                                    \
    "ldr r12, %[lines]\n\t"                                                                   \
    "add r0, r0, r11\n\t"                                                                     \
    "subs r12, r12, #1\n\t"                                                                   \
    "str r12, %[lines]\n\t"                                                                   \
    "bne 1b\n\t"
#define MCU_DWPL_S2H_RUN(L, CH)                                                               \
    __asm__ volatile(MCU_DWPL_S2H_LINES(L, CH)                                                \
                     : "+r"(r0), "+r"(r12), [lines] "+m"(v[3])                                 \
                     : [bias] "m"(v[0]), [w4] "m"(v[1]), [skip] "m"(v[2])                     \
                     : "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "lr", "cc", "memory")

/* nb output lines of the group's four scaled channels (t[k].y set, their planes `plane` int16 apart from
 * planes) by MCU_DWPL_S2H_LINES of the form mcu_dwpl_s2_held chose. Out of line: its small frame keeps the
 * constants the loop reads at short sp-relative offsets (the layer's holds the planes). */
static __attribute__((noinline)) void mcu_dwpl_group_s2_held(const int16_t *planes, int32_t plane, mcu_dwpl_ch t[4],
                                                             int32_t nb, int32_t len, int form)
{
    const uint32_t quads = (uint32_t)(len / 4 - 1) << 16;
    for (int32_t k = 0; k < 4; ++k) {
        int32_t v[4] = {mcu_u32_to_s32(t[k].bias), mcu_u32_to_s32((t[k].w[4] & 0xFFFFu) | quads), t[k].skip, nb};
        register const int16_t *r0 __asm__("r0") = planes + k * plane;
        register mcu_dwpl_ch *r12 __asm__("r12") = &t[k];
        if (form == MCU_DWPL_S2H_100_16) {
            MCU_DWPL_S2H_RUN("100", "16");
        } else if (form == MCU_DWPL_S2H_52_32) {
            MCU_DWPL_S2H_RUN("52", "32");
        } else if (form == MCU_DWPL_S2H_100_48) {
            MCU_DWPL_S2H_RUN("100", "48");
        } else {
            MCU_DWPL_S2H_RUN("52", "48");
        }
    }
}
#else
/* The same in C (the emulated build): pixel 0 of the pair at plane position pos, from the same words. */
static inline uint32_t mcu_dwpl_pixel_s2(const int16_t *pos, int32_t cols, const mcu_dwpl_ch *t)
{
    uint32_t s = t->bias;
    for (int32_t i = 0; i < 3; ++i) {
        const uint32_t third = t->w[3 + i / 2] >> (i == 1 ? 16 : 0); /* w_i2 in the low lane */
        s = mcu_smlabb(mcu_load_u32(pos + i * cols + 2), third, mcu_smlad(mcu_load_u32(pos + i * cols), t->w[i], s));
    }
    return s;
}

static inline void mcu_dwpl_channel_s2(const int16_t *pos, int32_t line_bytes, mcu_dwpl_ch *t, int clamp, int three)
{
    const int32_t cols = line_bytes / 2;
    for (; t->lines > 0; --t->lines) {
        if (three) {
            const uint32_t s[3] = {mcu_dwpl_pixel_s2(pos, cols, t), mcu_dwpl_pixel_s2(pos + 2, cols, t),
                                   mcu_dwpl_pixel_s2(pos + 4, cols, t)};
            mcu_dwpl_put_out(t, s, 3, clamp);
            pos = (const int16_t *)(const void *)((const char *)pos + t->skip);
            t->y += t->yskip;
            continue;
        }
        for (; pos != t->end; pos += 8) { /* the assembly's quads, then a pair and a pixel alone */
            const uint32_t s[4] = {mcu_dwpl_pixel_s2(pos, cols, t), mcu_dwpl_pixel_s2(pos + 2, cols, t),
                                   mcu_dwpl_pixel_s2(pos + 4, cols, t), mcu_dwpl_pixel_s2(pos + 6, cols, t)};
            mcu_dwpl_put_out(t, s, 4, clamp);
        }
        if (t->tail & 2) {
            const uint32_t s[2] = {mcu_dwpl_pixel_s2(pos, cols, t), mcu_dwpl_pixel_s2(pos + 2, cols, t)};
            mcu_dwpl_put_out(t, s, 2, clamp);
            pos += 4;
        }
        if (t->odd) {
            const uint32_t s[1] = {mcu_dwpl_pixel_s2(pos, cols, t)};
            mcu_dwpl_put_out(t, s, 1, clamp);
        }
        pos = (const int16_t *)(const void *)((const char *)pos + t->skip);
        t->end = (const int16_t *)(const void *)((const char *)t->end + 2 * line_bytes);
        t->y += t->yskip;
    }
}
#endif

/* Whether the stride-2 plane path serves a 3x3 stride-2 layer (batch 1, ch_mult 1, dilation 1): channels a
 * multiple of 4, every requantization within mcu_dwpl_quant_ok's, output lines of three pixels or of a quad and more, and
 * a band of at least one output line in four planes within MCU_DWPL_S2_BYTES and, when the output overlaps
 * the input (`apart` 0), in the row buffer of `row_bytes`. g->band: output lines per band. */
static inline int mcu_dwpl_plan_s2(mcu_dwpl_geom *g, int32_t kh, int32_t kw, int32_t ch, int32_t in_w, int32_t out_h,
                                   int32_t out_w, int32_t pad_left, int apart, int32_t row_bytes,
                                   const mcu_per_channel_quant *q, const int32_t *bias, int32_t output_offset)
{
    if (kh != 3 || kw != 3 || ch % 4 != 0 || out_w < 3 || out_w > MCU_DWPL_ROW_MAX || in_w > 2 * MCU_DWPL_ROW_MAX ||
        pad_left > 2) {
        return 0;
    }
    int32_t cols = 2 * out_w + 2 > pad_left + in_w ? 2 * out_w + 2 : pad_left + in_w;
    cols = (cols + 1) & ~1;
    int32_t pband = (MCU_DWPL_S2_BYTES / (4 * cols * 2) - 1) / 2; /* 2 band + 1 plane lines */
    pband = pband < out_h ? pband : out_h;
    int32_t band = pband;
    if (!apart) {
        const int32_t rows = row_bytes / (out_w * ch);
        band = rows < band ? rows : band;
    }
    if (band < 1 || !mcu_dwpl_quant_ok(q, bias, ch, output_offset)) {
        return 0;
    }
    g->transposed = 0;
    g->lines = out_h;
    g->len = out_w;
    g->cols = cols;
    g->band = band;
    g->plane = (2 * pband + 1) * cols; /* the planes' band: larger than a staged band where the output may
                                        * go straight to y (mcu_dwpl_layer_s2) */
    return 1;
}

#if MCU_S8_DSP_NATIVE
/* The held forms' fill (mcu_dwpl_s2_held: pixels CH bytes apart, an immediate) of lines of a pixel alone, an odd
 * count of pairs and a pixel alone (padding 1 along them: mobilenet_v1's large stride-2 layers): every load at an
 * immediate offset from the input, the last one post-indexed, so a pair's add is gone and two pairs' four loads
 * run together (5 cycles where mcu_dwpl_fill_lines takes 8: two pairs 29 cycles, 32 there), and the lone pixels'
 * and the pairs' tests are gone (mobilenet_v1 on mps2-an505-u575: the two layers' fill 132 k -> 118 k estimated
 * cycles). Registers as mcu_dwpl_fill_lines's, r3 free for the pairs' PKHBT. */
#define MCU_DWPL_FILL_S2H_ONE(CH) "ldr r8, [r2], #" CH "\n\t" MCU_DWPL_FILL_PUT1
/* Two neighbours' words (a, b) into the four planes' pair words (mcu_dwpl_put2), r3 the scratch. */
#define MCU_DWPL_FILL_S2H_PUT2(a, b)                                                          \
    "pkhbt r3, " a ", " b ", lsl #16\n\t"                                                     \
    "pkhtb " b ", " b ", " a ", asr #16\n\t"                                                  \
    "sxtab16 " a ", r7, r3\n\t"                                                               \
    "sxtab16 r3, r7, r3, ror #8\n\t"                                                          \
    "str " a ", [r0], #4\n\t"                                                                 \
    "sxtab16 " a ", r7, " b "\n\t"                                                            \
    "str r3, [r4], #4\n\t"                                                                    \
    "sxtab16 " b ", r7, " b ", ror #8\n\t"                                                    \
    "str " a ", [r5], #4\n\t"                                                                 \
    "str " b ", [r6], #4\n\t"
#define MCU_DWPL_FILL_S2H_PAIR(CH)                                                            \
    "ldr r9, [r2, #" CH "]\n\t"                                                               \
    "ldr r8, [r2], #2*" CH "\n\t" MCU_DWPL_FILL_S2H_PUT2("r8", "r9")
#define MCU_DWPL_FILL_S2H_PAIRS2(CH)                                                          \
    "ldr r9, [r2, #" CH "]\n\t"                                                               \
    "ldr r10, [r2, #2*" CH "]\n\t"                                                            \
    "ldr r11, [r2, #3*" CH "]\n\t"                                                            \
    "ldr r8, [r2], #4*" CH "\n\t" MCU_DWPL_FILL_S2H_PUT2("r8", "r9") MCU_DWPL_FILL_S2H_PUT2("r10", "r11")
#define MCU_DWPL_FILL_S2H(CH)                                                                 \
    MCU_DWPL_FILL_ENTRY                                                                       \
    "ldr r12, [lr, #24]\n\t"                                                                  \
    ".p2align 2\n\t"                                                                          \
    "3:\n\t" MCU_DWPL_FILL_S2H_ONE(CH) MCU_DWPL_FILL_S2H_PAIR(CH)                             \
    "ldr r1, [lr, #16]\n\t"                                                                   \
    "lsrs r1, r1, #1\n\t" /* the pairs after the first, two a step */                         \
    ".p2align 2\n\t"                                                                          \
    "1:\n\t" MCU_DWPL_FILL_S2H_PAIRS2(CH)                                                     \
    "subs r1, r1, #1\n\t"                                                                     \
    "bne 1b\n\t" MCU_DWPL_FILL_S2H_ONE(CH) MCU_DWPL_FILL_SKIP                                 \
    "subs r12, r12, #1\n\t"                                                                   \
    "bne 3b\n\t"                                                                              \
    "str r12, [lr, #24]\n\t"                                                                  \
    "pop {r4-r11, pc}\n\t"
static __attribute__((naked, noinline, unused)) void mcu_dwpl_fill_s2h16(mcu_dwpl_fill_args *a)
{
    (void)a; /* in r0 */
    __asm__ volatile(MCU_DWPL_FILL_S2H("16"));
}
static __attribute__((naked, noinline, unused)) void mcu_dwpl_fill_s2h32(mcu_dwpl_fill_args *a)
{
    (void)a;
    __asm__ volatile(MCU_DWPL_FILL_S2H("32"));
}
#endif

/* mcu_dwpl_fill, by mcu_dwpl_fill_s2h16 or _s2h32 where the layer takes mobilenet_v1's held forms (`held`,
 * its pixels ch bytes apart) and its lines are a pixel alone, an odd count of pairs (three or more) and a pixel
 * alone. mobilenet_v2's (48 channels) are left to mcu_dwpl_fill: a copy for them saved 24 k instructions there
 * but cost it 49 k estimated cycles on mps2-an505-u575, the ICACHE (0.3 kB more code). */
static inline void mcu_dwpl_fill_s2(mcu_dwpl_fill_args *a, int16_t *d0, const int8_t *x, int32_t j0, int32_t count,
                                    int held)
{
#if MCU_S8_DSP_NATIVE
    if ((held == MCU_DWPL_S2H_100_16 || held == MCU_DWPL_S2H_52_32) && count > 0 && a->lead == 1 && a->tail == 1 &&
        a->pairs >= 3 && (a->pairs & 1) == 1) {
        a->d = d0 + 1;
        a->s = x + j0 * a->across;
        a->lines = count;
        if (held == MCU_DWPL_S2H_100_16) {
            mcu_dwpl_fill_s2h16(a);
        } else {
            mcu_dwpl_fill_s2h32(a);
        }
        return;
    }
#else
    (void)held;
#endif
    mcu_dwpl_fill(a, d0, x, j0, count);
}

/* Output rows [oh0, oh0 + nb) of the group of channels c .. c + 3 (mcu_dwpl_plan_s2 held) into y (output
 * row oh0's first byte of channel c, rows `out_row` bytes apart); planes as mcu_dwpl_layer's. */
static inline void mcu_dwpl_band_s2(const mcu_dwpl_geom *g, int16_t *planes, int32_t in_h, int32_t pad_top, int32_t c,
                                    int32_t oh0, int32_t nb, mcu_dwpl_fill_args *fill, int clamp, mcu_dwpl_ch t[4],
                                    const int8_t *x, int8_t *y, int held)
{
    const int32_t lines = 2 * nb + 1;
    for (int32_t p = 0; p < lines;) { /* plane line p holds input row 2 oh0 - pad_top + p */
        const int32_t j = 2 * oh0 - pad_top + p;
        if (j < 0 || j >= in_h) {
            mcu_dwpl_line4(g, planes, p);
            ++p;
            continue;
        }
        /* the run of rows inside the input from here */
        const int32_t count = lines - p < in_h - j ? lines - p : in_h - j;
        mcu_dwpl_fill_s2(fill, planes + p * g->cols, x + c, j, count, held);
        p += count;
    }
#if MCU_S8_DSP_NATIVE
    if (held != 0 && clamp == MCU_DWPL_SCALED) {
        for (int32_t k = 0; k < 4; ++k) {
            t[k].y = y + k;
        }
        mcu_dwpl_group_s2_held(planes, g->plane, t, nb, g->len, held);
        return;
    }
#else
    (void)held;
#endif
    for (int32_t k = 0; k < 4; ++k) {
        const int16_t *plane = planes + k * g->plane;
        t[k].y = y + k;
        t[k].end = plane + 2 * (g->len & ~3); /* the quads' (none for three, else one at least) */
        t[k].lines = nb;
        mcu_dwpl_channel_s2(plane, g->cols * 2, &t[k], clamp, g->len == 3);
    }
}

/* Output pixels from which a stride-2 layer takes the planes (fewer keep the pixel path of dw_px_s8_dsp.h:
 * the planes' fill and per-band set-up cost more there; measured on mobilenet_v1 on mps2-an505-u575:
 * 12 x 12 outputs of 32 channels 279,146 -> 253,178 estimated cycles with planes; 6 x 6 of 64 155,650 ->
 * 167,350 with a call per filled line, 156,605 -> 151,288 with mcu_dwpl_fill_lines; 3 x 3 of 128 103,776
 * -> 124,709 with pairs); lines of three outputs take the planes at any count (their one step a line and
 * a group's constants set up at once: mobilenet_v1's 3 x 3 of 128 103,703 -> 90,764 with the other changes);
 * the emulated build takes the host tests' small images. */
#if MCU_S8_DSP_NATIVE
#define MCU_DWPL_S2_MIN_PIXELS 30
#else
#define MCU_DWPL_S2_MIN_PIXELS 16
#endif
/* Bytes of the stride-2 path's row buffer (an output that overlaps the input). */
#define MCU_DWPL_S2_ROW_BYTES 1536

/* Whether an output y on or before its input x by whole pixels (x - y a multiple of ch) lets a stride-2
 * layer run group by group as if apart: a group's writes then fall on its own channels' bytes only, read
 * already (the direct path copies a group's input first), so no other group's input is touched. Where the
 * memory plan puts mobilenet_v1's four stride-2 layers (the output one pixel before the input), the
 * direct path staged its output and the planes ran their overlapping bands through a row buffer, a
 * group's constants set up again each band. */
static inline int mcu_dw_own_channels(const int8_t *x, const int8_t *y, int32_t ch)
{
    return (uintptr_t)y <= (uintptr_t)x && ((uintptr_t)x - (uintptr_t)y) % (uint32_t)ch == 0u;
}

/* The planes' bands of a group (mcu_dwpl_plan_s2 held, lines per band as mcu_dwpl_layer_s2's apart path) on an
 * output with mcu_dw_own_channels: a band fills its planes before its writes, so it is enough that every
 * band's first input row lies at or past the end of the output rows before it. */
static inline int mcu_dwpl_s2_own_bands(const mcu_dwpl_geom *g, const int8_t *x, const int8_t *y, int32_t ch,
                                        int32_t in_w, int32_t pad_top)
{
    if (!mcu_dw_own_channels(x, y, ch)) {
        return 0;
    }
    const int32_t pband = (g->plane / g->cols - 1) / 2;
    const uintptr_t out_row = (uintptr_t)g->len * (uintptr_t)ch, in_row = (uintptr_t)in_w * (uintptr_t)ch;
    for (int32_t o = pband; o < g->lines; o += pband) {
        const int32_t ih = 2 * o - pad_top;
        if ((uintptr_t)y + (uintptr_t)o * out_row > (uintptr_t)x + (uintptr_t)(ih > 0 ? ih : 0) * in_row) {
            return 0;
        }
    }
    return 1;
}

/* The whole stride-2 layer (mcu_dwpl_plan_s2 held, batch 1) from x into y. With the output apart from the
 * input (or on it by mcu_dwpl_s2_own_bands), a group's bands go straight to it; otherwise every group of a
 * band goes to a row buffer, copied to y after all of the band's reads: the window contract keeps those
 * writes below the inputs of the rows after the band. */
static __attribute__((noinline, unused)) void mcu_dwpl_layer_s2(const mcu_dwpl_geom *g, int32_t in_h, int32_t in_w,
                                                                int32_t ch, int32_t pad_top, int32_t pad_left,
                                                                int32_t input_offset, int32_t output_offset,
                                                                int32_t act_min, int32_t act_max,
                                                                const mcu_per_channel_quant *q, const int8_t *x,
                                                                const int8_t *weight, const int32_t *bias, int8_t *y,
                                                                int apart)
{
    _Alignas(8) int16_t planes[MCU_DWPL_S2_BYTES / 2];
    _Alignas(4) int8_t row_buf[MCU_DWPL_S2_ROW_BYTES];
    /* Only the border columns need zeros (the fills write every line's interior, a line outside the image is
     * zeroed whole): the four planes' lines, one after another, at their first pad_left and last columns
     * (mobilenet_v1's 48 x 48 x 16 -> 24 x 24 layer: 2 of 50 columns, where zeroing the planes whole took about
     * 2.3 k cycles a layer and a row call). */
    const int32_t plane_lines = 4 * (g->plane / g->cols);
    for (int32_t l = 0; l < plane_lines; ++l) {
        int16_t *p = planes + l * g->cols;
        for (int32_t i = 0; i < pad_left; ++i) {
            p[i] = 0;
            __asm__("" ::: "memory"); /* no memset call */
        }
        for (int32_t i = pad_left + in_w; i < g->cols; ++i) {
            p[i] = 0;
            __asm__("" ::: "memory");
        }
    }
    mcu_dwpl_fill_args fill;
    mcu_dwpl_fill_prep(&fill, g, in_h, in_w, ch, pad_left, mcu_offset_pair(input_offset));
    const int clamp = mcu_dwpl_finish(act_min, act_max, output_offset);
    const int32_t out_row = g->len * ch;
    mcu_dwpl_ch t[4];
    /* the plane on by two lines from where a line's steps leave the position: less the pairs' 8 bytes each,
     * at the line's start for three */
    mcu_dwpl_ch_layer(t, ch, g->len, 4 * g->cols - 4 * (g->len == 3 ? 0 : g->len & ~1), out_row - g->len * ch, act_min,
                      act_max);
    const int32_t pband = (g->plane / g->cols - 1) / 2; /* g->band where apart; a staged band may be less */
    const int held = mcu_dwpl_s2_held(g, ch);
    if (apart) {
        for (int32_t c = 0; c < ch; c += 4) {
            const int fin = mcu_dwpl_group_s2(t, weight, c, ch, q, bias, output_offset, clamp);
            for (int32_t oh0 = 0; oh0 < g->lines; oh0 += pband) {
                const int32_t nb = g->lines - oh0 < pband ? g->lines - oh0 : pband;
                mcu_dwpl_band_s2(g, planes, in_h, pad_top, c, oh0, nb, &fill, fin, t, x,
                                 y + (size_t)oh0 * (size_t)out_row + (size_t)c, held);
            }
        }
        return;
    }
    const size_t in_row = (size_t)in_w * (size_t)ch;
    for (int32_t oh0 = 0, nb; oh0 < g->lines; oh0 += nb) {
        /* Rows from oh0 on that end at or below the first input row they read go straight to y, as many as
         * the planes hold (the window contract keeps every later read above them): mobilenet_v1's 24 x 24 x
         * 32 -> 12 x 12 layer runs two bands instead of three. */
        const int32_t ih0 = 2 * oh0 - pad_top;
        const uintptr_t read = (uintptr_t)(x + (size_t)(ih0 > 0 ? ih0 : 0) * in_row);
        const uintptr_t y0 = (uintptr_t)(y + (size_t)oh0 * (size_t)out_row);
        const uintptr_t room = y0 <= read ? (read - y0) / (uintptr_t)out_row : 0;
        nb = g->lines - oh0 < g->band ? g->lines - oh0 : g->band;
        if (room > (uintptr_t)nb) {
            /* every row of [oh0, end) written straight: the group outer, its constants set up once for all
             * of their bands (mobilenet_v1's 48 x 48 x 16 -> 24 x 24 layer: 12 set-ups, not 24) */
            const int32_t end = room < (uintptr_t)(g->lines - oh0) ? oh0 + (int32_t)room : g->lines;
            for (int32_t c = 0; c < ch; c += 4) {
                const int fin = mcu_dwpl_group_s2(t, weight, c, ch, q, bias, output_offset, clamp);
                for (int32_t o = oh0; o < end; o += pband) {
                    mcu_dwpl_band_s2(g, planes, in_h, pad_top, c, o, end - o < pband ? end - o : pband, &fill, fin,
                                     t, x, y + (size_t)o * (size_t)out_row + (size_t)c, held);
                }
            }
            nb = end - oh0;
            continue;
        }
        for (int32_t c = 0; c < ch; c += 4) {
            const int fin = mcu_dwpl_group_s2(t, weight, c, ch, q, bias, output_offset, clamp);
            mcu_dwpl_band_s2(g, planes, in_h, pad_top, c, oh0, nb, &fill, fin, t, x, row_buf + c, held);
        }
        int8_t *d = y + (size_t)oh0 * (size_t)out_row;
        const int32_t bytes = nb * out_row; /* a multiple of 4: ch is */
        int32_t i = 0;
        for (; i + 16 <= bytes; i += 16) { /* four words a step: the loop's count and branch once */
            const uint32_t a = mcu_load_u32(row_buf + i), b = mcu_load_u32(row_buf + i + 4);
            const uint32_t e = mcu_load_u32(row_buf + i + 8), f = mcu_load_u32(row_buf + i + 12);
            mcu_store_u32(d + i, a);
            mcu_store_u32(d + i + 4, b);
            mcu_store_u32(d + i + 8, e);
            mcu_store_u32(d + i + 12, f);
            __asm__("" ::: "memory"); /* no memcpy call */
        }
        for (; i < bytes; i += 4) {
            mcu_store_u32(d + i, mcu_load_u32(row_buf + i));
            __asm__("" ::: "memory");
        }
    }
}

#endif /* MCU_S8_DSP */


#endif /* MCU_KERNELS_INTERNAL_DW_PLANE_S8_DSP_H */
