/* 3x3 stride-2 depthwise convolution (ch_mult 1, dilation 1) of small images straight from the
 * interleaved int8 channels, for the DSP paths (MCU_S8_DSP): a group of four channels at a time, two
 * output pixels of a row (or one) a step. Internal: static inline only.
 *
 * Why, beside the channel planes (dw_plane_s8_dsp.h): on mobilenet_v1's 6 x 6 and 3 x 3 stride-2 outputs
 * a plane channel serves 36 or 9 outputs, so its per-channel and per-band costs (the fill into int16
 * planes, the line loop's entry and ends) weigh against few MACs: 52 and 67 estimated cycles an output
 * there against about 21 in the stride-2 quad loop. Here a group's input is copied as words (one
 * LDR/STR per pixel of four channels) into a padded block whose border holds the byte -input_offset (then
 * x + input_offset is 0 there, as padding must be: the offset is folded into the bias, 2 (bias +
 * input_offset sum w), so no SXTAB16 needs it), and each tap is one load of four channels, two SXTB16
 * and four single MACs (SMLABB/SMLATT) on the doubled weights as lane pairs (channels 0 and 2, 1 and 3)
 * prepared once a group, with the planes' one-SMMLAR requantization (the doubled accumulator,
 * mcu_dwpl_rq, for a ReLU folded into the range). Counted on the M4/M33 model: 10 cycles a tap and 9 a
 * channel's requantization for one pixel (about 139 cycles, 35 an output), 18 a tap and 12 a channel for
 * two pixels sharing the weight and constant loads (about 241 a pair, 30 an output), plus about 550
 * cycles a group (its constants, the block's copy). The planes' loop is 21 cycles an output, so they
 * keep every larger image, and stride 1: the 3 x 3 x 256 layer lost 115,040 -> 117,358 estimated cycles
 * here (a pixel's 36 products take 36 MAC instructions, the planes' SMLAD pairs 24 for a quad of 36).
 *
 * On the Cortex-M33 an even image's 6 x 6 and 3 x 3 outputs with padding one (mobilenet_v1's and v2's layers) take
 * channel planes instead (mcu_dwp_layer below): six MAC instructions an output where a pixel here takes nine.
 *
 * Sums are modulo 2^32 in any order, and the folded offset leaves the final sum exact: the plain
 * kernel's bits. An output apart from the input goes straight to it; one that overlaps it (the window
 * contract's placements) is staged on the stack and written after the last read. */
#ifndef MCU_KERNELS_INTERNAL_DW_DIRECT_S8_DSP_H
#define MCU_KERNELS_INTERNAL_DW_DIRECT_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/check.h"
#include "../common/simd_s8.h"
#include "dw_plane_s8_dsp.h"

#if MCU_S8_DSP

/* The padded block: words of four channels, a fixed pitch of 16 words (64 bytes), so that the nine taps
 * of a window are immediate offsets from its first word. */
#define MCU_DWD_PITCH 16
/* Most output pixels of a layer the direct path takes: measured on mobilenet_v1 on mps2-an505-u575
 * (docs/cycles.md, "Depthwise: small stride-2 images straight from the channels"). */
#define MCU_DWD_MAX_PIXELS 36

/* Bytes of the output staged on the stack when it overlaps the input (written to it after every read). */
#define MCU_DWD_STAGE_BYTES 2304

/* A group's constants at the offsets the assembly reads (words): the doubled biases with the input
 * offset folded in (channels 0 .. 3), per tap t = 3 i + j the doubled weights of channels (0, 2) and
 * (1, 3) as lane pairs, then per channel the multiplier, C = 2^(R-1) + output_offset 2^R and R; then
 * the layer's loop constants. */
typedef struct {
    uint32_t bias[4];
    uint32_t w[9][2];
    int32_t rq[4][3];
    int32_t ow;       /* output pixels a row (pairs, in the pair loop) */
    int32_t row_step; /* block bytes from a row's last window + pixel step to the next row's first */
    int32_t y_step;   /* output bytes from a pixel to the next: the channel count */
    int8_t *y;        /* the pair loop's next output pixel (MCU_DWD_LOOP2) */
    int32_t left;     /* its pairs left in the row */
    int32_t rows;     /* its rows left */
} mcu_dwd_group;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_dwd_group, w) == 16 && offsetof(mcu_dwd_group, rq) == 88 &&
                   offsetof(mcu_dwd_group, ow) == 136 && offsetof(mcu_dwd_group, row_step) == 140 &&
                   offsetof(mcu_dwd_group, y_step) == 144 && offsetof(mcu_dwd_group, y) == 148 &&
                   offsetof(mcu_dwd_group, left) == 152 && offsetof(mcu_dwd_group, rows) == 156,
               "mcu_dwd_group layout (offsets in MCU_DWD_LOOP)");
#endif

/* Whether the output goes through the stage: it overlaps the input on other channels' bytes
 * (mcu_dw_own_channels: a group's input is in the block before its first write). */
static inline int mcu_dwd_staged(const int8_t *x, size_t in_bytes, const int8_t *y, size_t out_bytes, int32_t ch)
{
    return mcu_overlaps(x, in_bytes, y, out_bytes) && !mcu_dw_own_channels(x, y, ch);
}

/* Whether the direct path takes a 3x3 layer (ch_mult 1, dilation 1, batch 1 checked by the caller): stride
 * 2 both ways, channels a multiple of 4, the windows' rows and columns within the block, few enough
 * output pixels (MCU_DWD_MAX_PIXELS), an output that overlaps the input (`staged`) within
 * MCU_DWD_STAGE_BYTES, the planes' requantization bounds (mcu_dwpl_quant_ok), and a ReLU folded into the
 * range (mcu_dwpl_finish's MCU_DWPL_RELU: the requantization without its sign correction; mobilenet_v1's and
 * mobilenet_v2's layers; a second loop for the saturation alone cost 1.4 kB of flash for no layer of ours). */
static inline int mcu_dwd_applies(int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t ch,
                                  int32_t out_h, int32_t out_w, int staged, const mcu_per_channel_quant *q,
                                  const int32_t *bias, int32_t output_offset, int32_t act_min, int32_t act_max)
{
    if (kh != 3 || kw != 3 || stride_h != 2 || stride_w != 2 || ch % 4 != 0) {
        return 0;
    }
    if (staged && (int64_t)out_h * out_w * ch > MCU_DWD_STAGE_BYTES) {
        return 0;
    }
    if (2 * out_h + 1 > MCU_DWD_PITCH || 2 * out_w + 1 > MCU_DWD_PITCH || out_h * out_w > MCU_DWD_MAX_PIXELS) {
        return 0;
    }
    if (mcu_dwpl_finish(act_min, act_max, output_offset) != MCU_DWPL_RELU) {
        return 0;
    }
    return mcu_dwpl_quant_ok(q, bias, ch, output_offset);
}

/* The constants of channels c .. c + 3 (w: their first tap's weights, taps [3][3][ch]) in straight lines
 * (a group's set-up weighs against its 9 or 36 pixels), with the doubled weights' sums per channel. */
#define MCU_DWD_TAP_INIT(t)                                                                   \
    do {                                                                                      \
        const uint32_t v = mcu_load_u32(w + (t) * (size_t)ch);                                \
        const uint32_t e = mcu_sxtab16(mcu_sxtb16(v), v), o = mcu_sxtab16_ror8(mcu_sxtb16_ror8(v), v); \
        g->w[t][0] = e;                                                                       \
        g->w[t][1] = o;                                                                       \
        s0 += (int16_t)(uint16_t)e;                                                           \
        s2 += mcu_asr32(mcu_u32_to_s32(e), 16);                                               \
        s1 += (int16_t)(uint16_t)o;                                                           \
        s3 += mcu_asr32(mcu_u32_to_s32(o), 16);                                               \
    } while (0)
static inline void mcu_dwd_group_init(mcu_dwd_group *g, const int8_t *w, int32_t ch, const int32_t *multiplier,
                                      const int32_t *shift, const int32_t *bias, int32_t input_offset,
                                      uint32_t k2)
{
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* doubled weight sums */
    MCU_DWD_TAP_INIT(0);
    MCU_DWD_TAP_INIT(1);
    MCU_DWD_TAP_INIT(2);
    MCU_DWD_TAP_INIT(3);
    MCU_DWD_TAP_INIT(4);
    MCU_DWD_TAP_INIT(5);
    MCU_DWD_TAP_INIT(6);
    MCU_DWD_TAP_INIT(7);
    MCU_DWD_TAP_INIT(8);
    /* every read before the first write (the int32_t fields of g may alias the arrays) */
    const int32_t m0 = multiplier[0], m1 = multiplier[1], m2 = multiplier[2], m3 = multiplier[3];
    const int32_t sh0 = shift[0], sh1 = shift[1], sh2 = shift[2], sh3 = shift[3];
    uint32_t b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    if (bias != NULL) {
        b0 = 2u * (uint32_t)bias[0];
        b1 = 2u * (uint32_t)bias[1];
        b2 = 2u * (uint32_t)bias[2];
        b3 = 2u * (uint32_t)bias[3];
    }
    const uint32_t off = (uint32_t)input_offset;
#define MCU_DWD_RQ_INIT(k, bk, sk, mk, shk)                                                   \
    g->bias[k] = (bk) + off * (uint32_t)(sk); /* modulo 2^32 */                               \
    g->rq[k][0] = (mk);                                                                       \
    g->rq[k][1] = mcu_u32_to_s32(k2 << (~(uint32_t)(shk) & 31u));                             \
    g->rq[k][2] = -(shk);
    MCU_DWD_RQ_INIT(0, b0, s0, m0, sh0) MCU_DWD_RQ_INIT(1, b1, s1, m1, sh1) MCU_DWD_RQ_INIT(2, b2, s2, m2, sh2)
    MCU_DWD_RQ_INIT(3, b3, s3, m3, sh3)
#undef MCU_DWD_RQ_INIT
}
#undef MCU_DWD_TAP_INIT

#if MCU_S8_DSP_NATIVE
/* Tap t (block offset o): its input word, the weight pairs, four MACs into r2-r5 (channels 0 .. 3). */
#define MCU_DWD_TAP(o, wo, wo4)                                                               \
    "ldr r6, [r0, #" o "]\n\t"                                                                \
    "ldr r8, [r1, #" wo "]\n\t"                                                               \
    "ldr r12, [r1, #" wo4 "]\n\t"                                                             \
    "sxtb16 r7, r6\n\t"                                                                       \
    "smlabb r2, r7, r8, r2\n\t"                                                               \
    "smlatt r4, r7, r8, r4\n\t"                                                               \
    "sxtb16 r7, r6, ror #8\n\t"                                                               \
    "smlabb r3, r7, r12, r3\n\t"                                                              \
    "smlatt r5, r7, r12, r5\n\t"
/* The nine taps of a window (block offsets of a pitch of 64 bytes; weight pair offsets in mcu_dwd_group). */
#define MCU_DWD_TAPS(TAP)                                                                     \
    TAP("0", "16", "20") TAP("4", "24", "28") TAP("8", "32", "36") TAP("64", "40", "44")      \
    TAP("68", "48", "52") TAP("72", "56", "60") TAP("128", "64", "68") TAP("132", "72", "76") \
    TAP("136", "80", "84")
/* The four channels' requantizations: the accumulators of the first and the second pixel, the offsets of
 * the multiplier, C and R in mcu_dwd_group, the output byte. */
#define MCU_DWD_CHANNELS(RQ)                                                                  \
    RQ("r2", "r6", "88", "92", "96", "0") RQ("r3", "r7", "100", "104", "108", "1")            \
    RQ("r4", "r8", "112", "116", "120", "2") RQ("r5", "r9", "124", "128", "132", "3")
/* Channel k's requantization of accumulator a (mcu_dwpl_rq without the sign correction: MCU_DWPL_RELU)
 * and its byte k (b unused: one pixel a step): the multiplier, C and R in one chain of loads. */
#define MCU_DWD_RQ_RELU(a, b, mo, co, ro, k)                                                     \
    "ldr r6, [r1, #" mo "]\n\t"                                                               \
    "ldr r7, [r1, #" co "]\n\t"                                                               \
    "ldr r8, [r1, #" ro "]\n\t"                                                               \
    "smmlar " a ", " a ", r6, r7\n\t"                                                         \
    "asr " a ", " a ", r8\n\t"                                                                \
    "ssat " a ", #8, " a "\n\t"                                                               \
    "strb " a ", [r9, #" k "]\n\t"
/* Every output pixel of a group, one a step: r0 the block's first window, r1 the constants, r9 the output (channel
 * c of pixel 0), lr the output rows; r11 counts a row's pixels. */
#define MCU_DWD_LOOP(RQ)                                                                      \
    "ldr r10, [r1, #144]\n\t"                                                                 \
    "ldr r11, [r1, #136]\n\t"                                                                 \
    "1:\n\t"                                                                                  \
    "ldm r1, {r2-r5}\n\t"                                                                     \
    MCU_DWD_TAPS(MCU_DWD_TAP)                                                                 \
    MCU_DWD_CHANNELS(RQ)                                                                      \
    "add r9, r9, r10\n\t"                                                                     \
    "add r0, r0, #8\n\t"                                                                      \
    "subs r11, r11, #1\n\t"                                                                   \
    "bne 1b\n\t"                                                                              \
    "ldr r6, [r1, #140]\n\t"                                                                  \
    "ldr r11, [r1, #136]\n\t"                                                                 \
    "add r0, r0, r6\n\t"                                                                      \
    "subs lr, lr, #1\n\t"                                                                     \
    "bne 1b\n\t"
_Static_assert(MCU_DWD_PITCH == 16, "the taps' block offsets in MCU_DWD_TAPS are for a pitch of 64 bytes");

/* Two output pixels a step at stride 2 (the second window d bytes on, 8 along a row): each tap's weight pairs
 * loaded once for both, each channel's requantization constants once for both: about 120 cycles a pixel
 * against 139 for one a step. r0 the first window, r1 the constants, r2-r5 and r6-r9 the two pixels'
 * accumulators, r10/r11 their input words, r12 the widened lanes, lr the weight pair; the output pointer
 * and the counts live in the constants (y, left, rows). */
#define MCU_DWD_TAP2D(o, d, wo, wo4)                                                          \
    "ldr r10, [r0, #(" o ")]\n\t"                                                             \
    "ldr r11, [r0, #(" o " + " d ")]\n\t"                                                     \
    "ldr lr, [r1, #" wo "]\n\t"                                                               \
    "sxtb16 r12, r10\n\t"                                                                    \
    "smlabb r2, r12, lr, r2\n\t"                                                             \
    "smlatt r4, r12, lr, r4\n\t"                                                             \
    "sxtb16 r12, r11\n\t"                                                                    \
    "smlabb r6, r12, lr, r6\n\t"                                                             \
    "smlatt r8, r12, lr, r8\n\t"                                                             \
    "ldr lr, [r1, #" wo4 "]\n\t"                                                              \
    "sxtb16 r12, r10, ror #8\n\t"                                                            \
    "smlabb r3, r12, lr, r3\n\t"                                                             \
    "smlatt r5, r12, lr, r5\n\t"                                                             \
    "sxtb16 r12, r11, ror #8\n\t"                                                            \
    "smlabb r7, r12, lr, r7\n\t"                                                             \
    "smlatt r9, r12, lr, r9\n\t"
#define MCU_DWD_TAP2(o, wo, wo4) MCU_DWD_TAP2D(o, "8", wo, wo4)
/* Channel k's requantization of both pixels' accumulators a and b (MCU_DWPL_RELU: the multiplier in r10,
 * C in r11, R in lr; the bytes are stored after all four). */
#define MCU_DWD_RQ2_RELU(a, b, mo, co, ro, k)                                                    \
    "ldr r10, [r1, #" mo "]\n\t"                                                              \
    "ldr r11, [r1, #" co "]\n\t"                                                              \
    "ldr lr, [r1, #" ro "]\n\t"                                                               \
    "smmlar " a ", " a ", r10, r11\n\t"                                                      \
    "asr " a ", " a ", lr\n\t"                                                               \
    "ssat " a ", #8, " a "\n\t"                                                              \
    "smmlar " b ", " b ", r10, r11\n\t"                                                      \
    "asr " b ", " b ", lr\n\t"                                                               \
    "ssat " b ", #8, " b "\n\t"
/* A pair's accumulators from the biases (both pixels), and its eight bytes stored at r10 (g->y), left at the pixel
 * after them (r11 the pixel step; the pair loop and the 3 x 3 block). */
#define MCU_DWD_PAIR_START                                                                    \
    "ldm r1, {r2-r5}\n\t"                                                                     \
    "mov r6, r2\n\t"                                                                          \
    "mov r7, r3\n\t"                                                                          \
    "mov r8, r4\n\t"                                                                          \
    "mov r9, r5\n\t"
#define MCU_DWD_PAIR_STORE                                                                    \
    "strb r2, [r10]\n\t"                                                                      \
    "strb r3, [r10, #1]\n\t"                                                                  \
    "strb r4, [r10, #2]\n\t"                                                                  \
    "strb r5, [r10, #3]\n\t"                                                                  \
    "add r10, r10, r11\n\t"                                                                   \
    "strb r6, [r10]\n\t"                                                                      \
    "strb r7, [r10, #1]\n\t"                                                                  \
    "strb r8, [r10, #2]\n\t"                                                                  \
    "strb r9, [r10, #3]\n\t"                                                                  \
    "add r10, r10, r11\n\t"

#define MCU_DWD_LOOP2(RQ2)                                                                    \
    "1:\n\t"                                                                                  \
    MCU_DWD_PAIR_START                                                                        \
    MCU_DWD_TAPS(MCU_DWD_TAP2)                                                                \
    MCU_DWD_CHANNELS(RQ2)                                                                     \
    "ldr r10, [r1, #148]\n\t"                                                                 \
    "ldr r11, [r1, #144]\n\t"                                                                 \
    "add r0, r0, #16\n\t"                                                                     \
    MCU_DWD_PAIR_STORE                                                                        \
    "ldr r11, [r1, #152]\n\t"                                                                 \
    "str r10, [r1, #148]\n\t"                                                                 \
    "subs r11, r11, #1\n\t"                                                                   \
    "str r11, [r1, #152]\n\t"                                                                 \
    "bne 1b\n\t"                                                                              \
    "ldr r10, [r1, #140]\n\t"                                                                 \
    "ldr r11, [r1, #136]\n\t"                                                                 \
    "ldr r12, [r1, #156]\n\t"                                                                 \
    "add r0, r0, r10\n\t"                                                                     \
    "str r11, [r1, #152]\n\t"                                                                 \
    "subs r12, r12, #1\n\t"                                                                   \
    "str r12, [r1, #156]\n\t"                                                                 \
    "bne 1b\n\t"

#if defined(__ARM_ARCH_8M_MAIN__)
/* A 3 x 3 output's group in one straight block (the 6 x 6 x 128 -> 3 x 3 layer, Cortex-M33): its nine windows
 * at immediate block offsets (pixel (r, c) at 128 r + 8 c bytes), so that pairs may span rows: four pairs and
 * one pixel, no row ends or counts, where rows of three took nine pixels one a step. The nine taps of the
 * windows at block bytes b and b + d: */
#define MCU_DWD_TAPS2D(b, d)                                                                  \
    MCU_DWD_TAP2D(b " + 0", d, "16", "20") MCU_DWD_TAP2D(b " + 4", d, "24", "28")             \
    MCU_DWD_TAP2D(b " + 8", d, "32", "36") MCU_DWD_TAP2D(b " + 64", d, "40", "44")            \
    MCU_DWD_TAP2D(b " + 68", d, "48", "52") MCU_DWD_TAP2D(b " + 72", d, "56", "60")           \
    MCU_DWD_TAP2D(b " + 128", d, "64", "68") MCU_DWD_TAP2D(b " + 132", d, "72", "76")         \
    MCU_DWD_TAP2D(b " + 136", d, "80", "84")
/* Two pixels (windows at b and b + d) into the next two output pixels (the output pointer kept in g->y). */
#define MCU_DWD_PAIR9(b, d)                                                                   \
    MCU_DWD_PAIR_START                                                                        \
    MCU_DWD_TAPS2D(b, d)                                                                      \
    MCU_DWD_CHANNELS(MCU_DWD_RQ2_RELU)                                                        \
    "ldr r10, [r1, #148]\n\t"                                                                 \
    "ldr r11, [r1, #144]\n\t"                                                                 \
    MCU_DWD_PAIR_STORE                                                                        \
    "str r10, [r1, #148]\n\t"
/* The last pixel's taps (window at block byte 272) for MCU_DWD_TAP's accumulators r2-r5. */
#define MCU_DWD_TAPS9(TAP)                                                                    \
    TAP("272", "16", "20") TAP("276", "24", "28") TAP("280", "32", "36") TAP("336", "40", "44")   \
    TAP("340", "48", "52") TAP("344", "56", "60") TAP("400", "64", "68") TAP("404", "72", "76")   \
    TAP("408", "80", "84")

/* Every output pixel of a 3 x 3 output's group (g->y its first pixel's channel c; consumed). */
static __attribute__((noinline, unused)) void mcu_dwd_run9(const uint32_t *block, mcu_dwd_group *g)
{
    register const uint32_t *r0 __asm__("r0") = block;
    register mcu_dwd_group *r1 __asm__("r1") = g;
    __asm__ volatile(MCU_DWD_PAIR9("0", "8") MCU_DWD_PAIR9("16", "112") MCU_DWD_PAIR9("136", "8")
                         MCU_DWD_PAIR9("256", "8")
                     "ldm r1, {r2-r5}\n\t"
                     MCU_DWD_TAPS9(MCU_DWD_TAP)
                     "ldr r9, [r1, #148]\n\t"
                     MCU_DWD_CHANNELS(MCU_DWD_RQ_RELU)
                     :
                     : "r"(r0), "r"(r1)
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}
#define MCU_DWD_RUN9 1

/* A stride-2 layer of a 6 x 6 or 3 x 3 output whose input is twice its size with padding one row above and one
 * column left (a PyTorch 3 x 3, stride 2, padding 1 on an even image) as channel planes (Cortex-M33): where the
 * block above takes four channels' words and one single MAC a product (nine a pixel), a plane of one channel's
 * x + input_offset as int16 holds input columns 2c and 2c + 1 in word c, which is output c's SMLAD with kernel
 * row i's (w_i1 w_i2) and output c + 1's SMLATB with its w_i0: six MAC instructions an output, each plane word
 * loaded once. The padding is never read: output row 0 leaves its first kernel row out, output column 0 its first
 * kernel column (the bias is not folded with the input offset, so a left-out tap adds exactly its zero). */
/* A group's area (words): per channel a header of nine (another channel follows; (w01 w02), (w11 w12), (w21 w22),
 * (w00 w10) doubled, R and 2 w20 (the ASR reads the low byte alone), 2 bias, the multiplier and C: MCU_DWP_RUN's
 * LDMDB) and its plane (h rows of ow words). R beside w20 leaves r10 free for a second plane word, loaded in one
 * chain with the first (a cycle an output). */
#define MCU_DWP_HEAD 9
#define MCU_DWP_WORDS(oh, ow) (4 * (MCU_DWP_HEAD + 2 * (oh) * (ow)))
/* The forms, each a block of its own (the channel count is its outputs' immediate step): 6 x 6 outputs of 64
 * channels, 3 x 3 of 128 (mobilenet_v1's convolution_11 and _23), 6 x 6 of 96 and 3 x 3 of 192 (mobilenet_v2's). */
#define MCU_DWP_6X64 1
#define MCU_DWP_3X128 2
#define MCU_DWP_6X96 3
#define MCU_DWP_3X192 4
static inline int mcu_dwp_form(int32_t h, int32_t w, int32_t ch, int32_t out_h, int32_t out_w, int32_t pad_top,
                               int32_t pad_left)
{
    if (pad_top != 1 || pad_left != 1 || h != 2 * out_h || w != 2 * out_w || out_h != out_w) {
        return 0;
    }
    if (out_h == 6) {
        return ch == 64 ? MCU_DWP_6X64 : ch == 96 ? MCU_DWP_6X96 : 0;
    }
    return out_h == 3 && ch == 128 ? MCU_DWP_3X128 : out_h == 3 && ch == 192 ? MCU_DWP_3X192 : 0;
}

/* Kernel line i of output A (plane word X: SMLAD with (w_i1 w_i2), A's sum so far RA) and, BX, of the next output B
 * (the word's high half times w_i0). */
#define MCU_DWP_LD(X, off) "ldr " X ", [r0, #(" off ")]\n\t"
#define MCU_DWP_X(X, W, A, RA) "smlad " A ", " X ", " W ", " RA "\n\t"
#define MCU_DWP_BY(op, X, B, W, RA) op " " B ", " X ", " W ", " RA "\n\t"
#define MCU_DWP_BN(op, X, B, W, RA)
#define MCU_DWP_RQ(A, o)                                                                      \
    "smmlar " A ", " A ", r8, r9\n\t"                                                         \
    "asr " A ", " A ", r6\n\t"                                                                \
    "ssat " A ", #8, " A "\n\t"                                                               \
    "strb " A ", [r1, #(" o ")]\n\t"
/* An output from plane lines la, lb, lc (bytes) at word byte w into output byte o; OUT2 for output row 0 (la is
 * the padding). */
#define MCU_DWP_OUT3(la, lb, lc, w, A, RA, B, BX, o)                                           \
    MCU_DWP_LD("lr", "(" la ")+" w) MCU_DWP_LD("r10", "(" lb ")+" w)                           \
    MCU_DWP_X("lr", "r2", A, RA) BX("smlatb", "lr", B, "r5", "r7")                            \
    MCU_DWP_X("r10", "r3", A, A) BX("smlatt", "r10", B, "r5", B)                              \
    MCU_DWP_LD("lr", "(" lc ")+" w)                                                            \
    MCU_DWP_X("lr", "r4", A, A) BX("smlatt", "lr", B, "r6", B) MCU_DWP_RQ(A, o)
#define MCU_DWP_OUT2(la, lb, lc, w, A, RA, B, BX, o)                                           \
    MCU_DWP_LD("lr", "(" lb ")+" w) MCU_DWP_LD("r10", "(" lc ")+" w)                           \
    MCU_DWP_X("lr", "r3", A, RA) BX("smlatt", "lr", B, "r5", "r7")                            \
    MCU_DWP_X("r10", "r4", A, A) BX("smlatt", "r10", B, "r6", B) MCU_DWP_RQ(A, o)
/* An output row r of six or three pixels of CH channels (the accumulators r11 and r12 in turn). */
#define MCU_DWP_ROW6(OUT, la, lb, lc, CH, r)                                                   \
    OUT(la, lb, lc, "0", "r11", "r7", "r12", MCU_DWP_BY, CH "*(6*" r "+0)")                   \
    OUT(la, lb, lc, "4", "r12", "r12", "r11", MCU_DWP_BY, CH "*(6*" r "+1)")                  \
    OUT(la, lb, lc, "8", "r11", "r11", "r12", MCU_DWP_BY, CH "*(6*" r "+2)")                  \
    OUT(la, lb, lc, "12", "r12", "r12", "r11", MCU_DWP_BY, CH "*(6*" r "+3)")                 \
    OUT(la, lb, lc, "16", "r11", "r11", "r12", MCU_DWP_BY, CH "*(6*" r "+4)")                 \
    OUT(la, lb, lc, "20", "r12", "r12", "r11", MCU_DWP_BN, CH "*(6*" r "+5)")
#define MCU_DWP_ROW3(OUT, la, lb, lc, CH, r)                                                   \
    OUT(la, lb, lc, "0", "r11", "r7", "r12", MCU_DWP_BY, CH "*(3*" r "+0)")                   \
    OUT(la, lb, lc, "4", "r12", "r12", "r11", MCU_DWP_BY, CH "*(3*" r "+1)")                  \
    OUT(la, lb, lc, "8", "r11", "r11", "r12", MCU_DWP_BN, CH "*(3*" r "+2)")
/* A channel's whole output (plane lines of 24 and 12 bytes). */
#define MCU_DWP_BLOCK6(CH)                                                                     \
    MCU_DWP_ROW6(MCU_DWP_OUT2, "0", "0", "24", CH, "0")                                        \
    MCU_DWP_ROW6(MCU_DWP_OUT3, "24", "48", "72", CH, "1")                                      \
    MCU_DWP_ROW6(MCU_DWP_OUT3, "72", "96", "120", CH, "2")                                     \
    MCU_DWP_ROW6(MCU_DWP_OUT3, "120", "144", "168", CH, "3")                                   \
    MCU_DWP_ROW6(MCU_DWP_OUT3, "168", "192", "216", CH, "4")                                   \
    MCU_DWP_ROW6(MCU_DWP_OUT3, "216", "240", "264", CH, "5")
#define MCU_DWP_BLOCK3(CH)                                                                     \
    MCU_DWP_ROW3(MCU_DWP_OUT2, "0", "0", "12", CH, "0")                                        \
    MCU_DWP_ROW3(MCU_DWP_OUT3, "12", "24", "36", CH, "1")                                      \
    MCU_DWP_ROW3(MCU_DWP_OUT3, "36", "48", "60", CH, "2")
/* The group's four channels: r0 channel 0's plane (its header the ten words before it), r1 its first output; S the
 * bytes from a channel's plane to the next's. */
#define MCU_DWP_RUN(BLOCK, S)                                                                  \
    "0:\n\t"                                                                                  \
    "ldmdb r0, {r2-r9}\n\t" BLOCK                                                             \
    "ldr r2, [r0, #-36]\n\t"                                                                  \
    "add r0, r0, #" S "\n\t"                                                                  \
    "add r1, r1, #1\n\t"                                                                      \
    "cmp r2, #0\n\t"                                                                          \
    "bne 0b\n\t"

/* Input pixels 2j and 2j + 1 of a row (CH bytes apart at r0) into word j of the four planes at r1 (S bytes apart),
 * plus the input offset (r2, both lanes): PKHBT/PKHTB pair channels (0, 1) and (2, 3) of the two pixels, SXTAB16
 * widens each channel's two bytes. */
#define MCU_DWP_FILL2(j, CH, S)                                                                \
    "ldr r4, [r0, #(2*" j "*" CH ")]\n\t"                                                     \
    "ldr r5, [r0, #((2*" j "+1)*" CH ")]\n\t"                                                 \
    "pkhbt r6, r4, r5, lsl #16\n\t"                                                           \
    "pkhtb r7, r5, r4, asr #16\n\t"                                                           \
    "sxtab16 r4, r2, r6\n\t"                                                                  \
    "sxtab16 r5, r2, r6, ror #8\n\t"                                                          \
    "sxtab16 r6, r2, r7\n\t"                                                                  \
    "sxtab16 r7, r2, r7, ror #8\n\t"                                                          \
    "str r4, [r1, #(4*" j ")]\n\t"                                                            \
    "str r5, [r1, #(" S "+4*" j ")]\n\t"                                                      \
    "str r6, [r1, #(2*" S "+4*" j ")]\n\t"                                                    \
    "str r7, [r1, #(3*" S "+4*" j ")]\n\t"
/* Pixels 2j .. 2j + 3 into words j and j + 1: the four loads in one chain (nothing pipelines after a store). */
#define MCU_DWP_FILL4(j, j1, CH, S)                                                           \
    "ldr r4, [r0, #(2*" j "*" CH ")]\n\t"                                                     \
    "ldr r5, [r0, #((2*" j "+1)*" CH ")]\n\t"                                                 \
    "ldr r8, [r0, #(2*" j1 "*" CH ")]\n\t"                                                    \
    "ldr r9, [r0, #((2*" j1 "+1)*" CH ")]\n\t"                                                \
    "pkhbt r6, r4, r5, lsl #16\n\t"                                                           \
    "pkhtb r7, r5, r4, asr #16\n\t"                                                           \
    "pkhbt r10, r8, r9, lsl #16\n\t"                                                          \
    "pkhtb r11, r9, r8, asr #16\n\t"                                                          \
    "sxtab16 r4, r2, r6\n\t"                                                                  \
    "sxtab16 r5, r2, r6, ror #8\n\t"                                                          \
    "sxtab16 r6, r2, r7\n\t"                                                                  \
    "sxtab16 r7, r2, r7, ror #8\n\t"                                                          \
    "sxtab16 r8, r2, r10\n\t"                                                                 \
    "sxtab16 r9, r2, r10, ror #8\n\t"                                                         \
    "sxtab16 r10, r2, r11\n\t"                                                                \
    "sxtab16 r11, r2, r11, ror #8\n\t"                                                        \
    "str r4, [r1, #(4*" j ")]\n\t"                                                            \
    "str r5, [r1, #(" S "+4*" j ")]\n\t"                                                      \
    "str r6, [r1, #(2*" S "+4*" j ")]\n\t"                                                    \
    "str r7, [r1, #(3*" S "+4*" j ")]\n\t"                                                    \
    "str r8, [r1, #(4*" j1 ")]\n\t"                                                           \
    "str r9, [r1, #(" S "+4*" j1 ")]\n\t"                                                     \
    "str r10, [r1, #(2*" S "+4*" j1 ")]\n\t"                                                  \
    "str r11, [r1, #(3*" S "+4*" j1 ")]\n\t"
/* The rows of the group's input (r3 of them, ROW bytes apart) into its planes (lines of L bytes). */
#define MCU_DWP_FILL(PAIRS, ROW, L)                                                            \
    "1:\n\t" PAIRS                                                                            \
    "add r0, r0, #" ROW "\n\t"                                                                \
    "add r1, r1, #" L "\n\t"                                                                  \
    "subs r3, r3, #1\n\t"                                                                     \
    "bne 1b\n\t"
#define MCU_DWP_FILL6(CH, S) MCU_DWP_FILL4("0", "1", CH, S) MCU_DWP_FILL4("2", "3", CH, S) MCU_DWP_FILL4("4", "5", CH, S)
#define MCU_DWP_FILL3(CH, S) MCU_DWP_FILL4("0", "1", CH, S) MCU_DWP_FILL2("2", CH, S)
_Static_assert(MCU_DWP_WORDS(6, 6) == 324 && MCU_DWP_WORDS(3, 3) == 108,
               "MCU_DWP_RUN's and MCU_DWP_FILL's channel steps (324 and 108 bytes)");

/* The headers of channels c .. c + 3 (w: their first tap's weights, taps [3][3][ch]) in area (channel k's header at
 * k sw words; its first word, whether another channel follows, written once a layer): header word i from taps a and
 * b, each channel's lanes of their doubled words, in straight lines (a group's set-up weighs against few pixels). */
#define MCU_DWP_HEAD_PAIR(i, a, b)                                                            \
    do {                                                                                      \
        const uint32_t va = mcu_load_u32(w + (a) * (size_t)ch), vb = mcu_load_u32(w + (b) * (size_t)ch); \
        const uint32_t ea = mcu_sxtab16(mcu_sxtb16(va), va), oa = mcu_sxtab16_ror8(mcu_sxtb16_ror8(va), va); \
        const uint32_t eb = mcu_sxtab16(mcu_sxtb16(vb), vb), ob = mcu_sxtab16_ror8(mcu_sxtb16_ror8(vb), vb); \
        area[(i)] = mcu_dwpl_lows(ea, eb);                                                    \
        area[sw + (i)] = mcu_dwpl_lows(oa, ob);                                               \
        area[2 * sw + (i)] = mcu_dwpl_highs(ea, eb);                                          \
        area[3 * sw + (i)] = mcu_dwpl_highs(oa, ob);                                          \
    } while (0)
#define MCU_DWP_HEAD_RQ(k, w20)                                                               \
    do {                                                                                      \
        area[(k) * sw + 5] = (uint32_t)-shift[(k)] | (w20);                                   \
        area[(k) * sw + 6] = bias != NULL ? 2u * (uint32_t)bias[(k)] : 0u;                     \
        area[(k) * sw + 7] = (uint32_t)multiplier[(k)];                                       \
        area[(k) * sw + 8] = k2 << (~(uint32_t)shift[(k)] & 31u);                             \
    } while (0)
static inline __attribute__((always_inline)) void mcu_dwp_heads(uint32_t *area, int32_t sw, const int8_t *w,
                                                                int32_t ch, const int32_t *multiplier,
                                                                const int32_t *shift, const int32_t *bias,
                                                                uint32_t k2)
{
    MCU_DWP_HEAD_PAIR(1, 1, 2);
    MCU_DWP_HEAD_PAIR(2, 4, 5);
    MCU_DWP_HEAD_PAIR(3, 7, 8);
    MCU_DWP_HEAD_PAIR(4, 0, 3);
    const uint32_t v = mcu_load_u32(w + 6 * (size_t)ch);
    const uint32_t e = mcu_sxtab16(mcu_sxtb16(v), v), o = mcu_sxtab16_ror8(mcu_sxtb16_ror8(v), v);
    MCU_DWP_HEAD_RQ(0, e << 16);
    MCU_DWP_HEAD_RQ(1, o << 16);
    MCU_DWP_HEAD_RQ(2, e & 0xFFFF0000u);
    MCU_DWP_HEAD_RQ(3, o & 0xFFFF0000u);
}
#undef MCU_DWP_HEAD_PAIR
#undef MCU_DWP_HEAD_RQ

/* The group's fill and its channels' blocks: 6 x 6 or 3 x 3 outputs of CH channels (strings: the channels, the input
 * row's bytes). */
#define MCU_DWP_GROUP(FILLN, BLOCKN, CH, ROW, S, L, ROWS)                                     \
    do {                                                                                      \
        register const int8_t *r0 __asm__("r0") = x + c;                                      \
        register uint32_t *r1 __asm__("r1") = area + MCU_DWP_HEAD;                            \
        register uint32_t r2 __asm__("r2") = off;                                             \
        register int32_t r3 __asm__("r3") = (ROWS);                                           \
        __asm__ volatile(MCU_DWP_FILL(FILLN(CH, S), ROW, L)                                   \
                         : "+r"(r0), "+r"(r1), "+r"(r3)                                       \
                         : "r"(r2)                                                            \
                         : "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "cc", "memory");     \
        register const uint32_t *p0 __asm__("r0") = area + MCU_DWP_HEAD;                      \
        register int8_t *p1 __asm__("r1") = y + c;                                            \
        __asm__ volatile(MCU_DWP_RUN(BLOCKN(CH), S)                                           \
                         : "+r"(p0), "+r"(p1)                                                 \
                         :                                                                    \
                         : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", \
                           "memory");                                                         \
    } while (0)

/* Every group of a layer of the form `form`, a constant: the channel count and the headers' offsets immediates. */
static inline __attribute__((always_inline)) void mcu_dwp_groups(int form, int32_t input_offset, int32_t output_offset,
                                                                 const mcu_per_channel_quant *q, const int8_t *x,
                                                                 const int8_t *weight, const int32_t *bias, int8_t *y,
                                                                 uint32_t *area)
{
    const uint32_t k2 = 2u * (uint32_t)output_offset + 1u;
    const uint32_t off = 0x00010001u * (uint16_t)input_offset;
    const int six = form == MCU_DWP_6X64 || form == MCU_DWP_6X96;
    const int32_t ch = form == MCU_DWP_6X64 ? 64 : form == MCU_DWP_6X96 ? 96 : form == MCU_DWP_3X128 ? 128 : 192;
    const int32_t sw = six ? MCU_DWP_WORDS(6, 6) / 4 : MCU_DWP_WORDS(3, 3) / 4;
    area[0] = 1;
    area[sw] = 1;
    area[2 * sw] = 1;
    area[3 * sw] = 0;
    for (int32_t c = 0; c < ch; c += 4) {
        mcu_dwp_heads(area, sw, weight + c, ch, q->multiplier + c, q->shift + c, bias != NULL ? bias + c : NULL, k2);
        if (form == MCU_DWP_6X64) {
            MCU_DWP_GROUP(MCU_DWP_FILL6, MCU_DWP_BLOCK6, "64", "768", "324", "24", 12);
        } else if (form == MCU_DWP_6X96) {
            MCU_DWP_GROUP(MCU_DWP_FILL6, MCU_DWP_BLOCK6, "96", "1152", "324", "24", 12);
        } else if (form == MCU_DWP_3X128) {
            MCU_DWP_GROUP(MCU_DWP_FILL3, MCU_DWP_BLOCK3, "128", "768", "108", "12", 6);
        } else {
            MCU_DWP_GROUP(MCU_DWP_FILL3, MCU_DWP_BLOCK3, "192", "1152", "108", "12", 6);
        }
    }
}
#undef MCU_DWP_GROUP

/* The layer (mcu_dwp_form's `form`, mcu_dwd_applies held) into y (the stage when it overlaps x); area the group's
 * MCU_DWP_WORDS. */
static __attribute__((noinline, unused)) void mcu_dwp_layer(int form, int32_t input_offset, int32_t output_offset,
                                                            const mcu_per_channel_quant *q, const int8_t *x,
                                                            const int8_t *weight, const int32_t *bias, int8_t *y,
                                                            uint32_t *area)
{
    if (form == MCU_DWP_6X64) {
        mcu_dwp_groups(MCU_DWP_6X64, input_offset, output_offset, q, x, weight, bias, y, area);
    } else if (form == MCU_DWP_6X96) {
        mcu_dwp_groups(MCU_DWP_6X96, input_offset, output_offset, q, x, weight, bias, y, area);
    } else if (form == MCU_DWP_3X128) {
        mcu_dwp_groups(MCU_DWP_3X128, input_offset, output_offset, q, x, weight, bias, y, area);
    } else {
        mcu_dwp_groups(MCU_DWP_3X192, input_offset, output_offset, q, x, weight, bias, y, area);
    }
}
#define MCU_DWP_PLANES 1
#endif

/* Every output pixel of a group at stride 2 with rows of an even count (g->ow the pairs a row, g->y the
 * output, g->rows the rows; the fields are consumed). */
static __attribute__((noinline, unused)) void mcu_dwd_run2(const uint32_t *block, mcu_dwd_group *g)
{
    register const uint32_t *r0 __asm__("r0") = block;
    register mcu_dwd_group *r1 __asm__("r1") = g;
    g->left = g->ow;
    __asm__ volatile(MCU_DWD_LOOP2(MCU_DWD_RQ2_RELU)
                     : "+r"(r0)
                     : "r"(r1)
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}

static __attribute__((noinline, unused)) void mcu_dwd_run(const uint32_t *block, const mcu_dwd_group *g, int8_t *y,
                                                          int32_t rows)
{
    register const uint32_t *r0 __asm__("r0") = block;
    register const mcu_dwd_group *r1 __asm__("r1") = g;
    register int8_t *r9 __asm__("r9") = y;
    register int32_t lr __asm__("lr") = rows;
    __asm__ volatile(MCU_DWD_LOOP(MCU_DWD_RQ_RELU)
                     : "+r"(r0), "+r"(r9), "+r"(lr)
                     : "r"(r1)
                     : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r10", "r11", "r12", "cc", "memory");
}
#else
/* The assembly's steps in C (the emulated build): the same words, lanes and requantization. */
static inline void mcu_dwd_run(const uint32_t *block, const mcu_dwd_group *g, int8_t *y, int32_t rows)
{
    for (int32_t r = 0; r < rows; ++r) {
        for (int32_t i = 0; i < g->ow; ++i) {
            uint32_t a[4] = {g->bias[0], g->bias[1], g->bias[2], g->bias[3]};
            for (int32_t t = 0; t < 9; ++t) {
                const uint32_t v = block[(t / 3) * MCU_DWD_PITCH + t % 3];
                const uint32_t e = mcu_sxtb16(v), o = mcu_sxtb16_ror8(v);
                a[0] = mcu_smlabb(e, g->w[t][0], a[0]);
                a[2] = mcu_smlatt(e, g->w[t][0], a[2]);
                a[1] = mcu_smlabb(o, g->w[t][1], a[1]);
                a[3] = mcu_smlatt(o, g->w[t][1], a[3]);
            }
            for (int32_t k = 0; k < 4; ++k) {
                const mcu_dwpl_ch t = {.m = g->rq[k][0], .c = g->rq[k][1], .sh = g->rq[k][2]};
                y[k] = (int8_t)mcu_dwpl_rq(&t, a[k], 1);
            }
            y += g->y_step;
            block += 2;
        }
        block += g->row_step / 4;
    }
}

/* The pair loop's contract in C: the same outputs, pixel by pixel. */
static inline void mcu_dwd_run2(const uint32_t *block, mcu_dwd_group *g)
{
    const int32_t ow = g->ow;
    g->ow = 2 * ow;
    mcu_dwd_run(block, g, g->y, g->rows);
    g->ow = ow;
}
#endif

/* rows x n pixels' words (n > 0; four channels, ch bytes apart in src, rows src_row bytes apart) into dst, rows
 * MCU_DWD_PITCH words apart: four a step with the loads in one chain before the stores (nothing pipelines after a
 * store), then a pair and a word alone: about 3.75 cycles a word on the M4/M33 model where a C loop of two a step,
 * each load after a store, took 6.5; every row in one call, not a call a row (mobilenet_v1's 12 x 12 x 64 -> 6 x 6
 * and 6 x 6 x 128 -> 3 x 3 layers, 192 rows each: 95,795 -> 94,427 and 66,620 -> 64,838 estimated cycles on
 * mps2-an505-u575). */
static inline void mcu_dwd_copy(uint32_t *dst, const int8_t *src, int32_t ch, int32_t n, int32_t rows, int32_t src_row)
{
#if MCU_S8_DSP_NATIVE
    /* a row's words, then the source's and the block's steps from a row's end to the next row's start */
    const int32_t k[3] = {n, src_row - n * ch, 4 * (MCU_DWD_PITCH - n)};
    uint32_t a, b, c, d;
    int32_t left;
    const int32_t ch3 = 3 * ch;
    __asm__ volatile("0:\n\t"
                     "ldr %[m], [%[k]]\n\t"
                     "subs %[m], %[m], #4\n\t"
                     "blo 2f\n\t"
                     "1:\n\t"
                     "ldr %[a], [%[s]]\n\t"
                     "ldr %[b], [%[s], %[ch]]\n\t"
                     "ldr %[c], [%[s], %[ch], lsl #1]\n\t"
                     "ldr %[d], [%[s], %[ch3]]\n\t"
                     "add %[s], %[s], %[ch], lsl #2\n\t"
                     "str %[a], [%[o]]\n\t"
                     "str %[b], [%[o], #4]\n\t"
                     "str %[c], [%[o], #8]\n\t"
                     "str %[d], [%[o], #12]\n\t"
                     "add %[o], %[o], #16\n\t"
                     "subs %[m], %[m], #4\n\t"
                     "bhs 1b\n\t"
                     "2:\n\t"
                     "lsls %[m], %[m], #31\n\t" /* n - 4 k: bit 1 (a pair) into C, bit 0 (a word) into N */
                     "bcc 3f\n\t"
                     "ldr %[a], [%[s]]\n\t"
                     "ldr %[b], [%[s], %[ch]]\n\t"
                     "add %[s], %[s], %[ch], lsl #1\n\t"
                     "str %[a], [%[o]]\n\t"
                     "str %[b], [%[o], #4]\n\t"
                     "add %[o], %[o], #8\n\t"
                     "3:\n\t"
                     "bpl 4f\n\t"
                     "ldr %[a], [%[s]]\n\t"
                     "add %[s], %[s], %[ch]\n\t"
                     "str %[a], [%[o]]\n\t"
                     "add %[o], %[o], #4\n\t"
                     "4:\n\t"
                     "ldrd %[a], %[b], [%[k], #4]\n\t"
                     "add %[s], %[s], %[a]\n\t"
                     "add %[o], %[o], %[b]\n\t"
                     "subs %[r], %[r], #1\n\t"
                     "bne 0b\n\t"
                     : [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d), [m] "=&r"(left), [s] "+r"(src),
                       [o] "+r"(dst), [r] "+r"(rows)
                     : [ch] "r"(ch), [ch3] "r"(ch3), [k] "r"(k)
                     : "cc", "memory");
#else
    for (; rows > 0; --rows, src += src_row, dst += MCU_DWD_PITCH) {
        for (int32_t i = 0; i < n; ++i) {
            dst[i] = mcu_load_u32(src + (size_t)i * (size_t)ch);
        }
    }
#endif
}

#if defined(MCU_DWP_PLANES)
/* the padded block's words, or a plane group's area */
#define MCU_DWD_BLOCK_WORDS MCU_DWP_WORDS(6, 6)
_Static_assert(MCU_DWP_WORDS(6, 6) >= MCU_DWD_PITCH * MCU_DWD_PITCH, "the block within the planes' area");
#else
#define MCU_DWD_BLOCK_WORDS (MCU_DWD_PITCH * MCU_DWD_PITCH)
#endif

/* The whole layer (mcu_dwd_applies held, batch 1): x (h x w x ch) into y (out_h x out_w x ch), apart from
 * it, or (`staged`) overlapping it: then every output goes to the stack first and to y after the last
 * read. */
static __attribute__((noinline, unused)) void mcu_dwd_layer(int32_t h, int32_t w, int32_t ch, int32_t out_h,
                                                            int32_t out_w, int32_t pad_top, int32_t pad_left,
                                                            int32_t input_offset, int32_t output_offset,
                                                            const mcu_per_channel_quant *q, const int8_t *x,
                                                            const int8_t *weight, const int32_t *bias, int8_t *y,
                                                            int staged)
{
    const int32_t bh = 2 * out_h + 1, bw = 2 * out_w + 1; /* the block's rows, columns */
    uint32_t block[MCU_DWD_BLOCK_WORDS];
    uint32_t stage[MCU_DWD_STAGE_BYTES / 4];
#if defined(MCU_DWP_PLANES)
    const int form = mcu_dwp_form(h, w, ch, out_h, out_w, pad_top, pad_left);
    if (form != 0) {
        mcu_dwp_layer(form, input_offset, output_offset, q, x, weight, bias, staged ? (int8_t *)stage : y, block);
    } else
#endif
    {
        /* x + input_offset = 0: mcu_input_offset_valid */
        const uint32_t pad = 0x01010101u * (uint8_t)(-input_offset);
        for (int32_t i = 0; i < bh * MCU_DWD_PITCH; ++i) {
            block[i] = pad;
        }
        /* the block's part inside the input: rows [r0, r1), columns [c0, c1) */
        const int32_t r0 = pad_top, r1 = pad_top + h < bh ? pad_top + h : bh;
        const int32_t c0 = pad_left, c1 = pad_left + w < bw ? pad_left + w : bw;
        const uint32_t k2 = 2u * (uint32_t)output_offset + 1u; /* C = k2 2^(R-1) (mcu_dwpl_quant_ok) */
        mcu_dwd_group g;
        /* rows of whole pairs take the pair loop (g.ow then counts pairs) */
        const int pairs = out_w % 2 == 0;
        g.ow = pairs ? out_w / 2 : out_w;
        g.row_step = 4 * (2 * MCU_DWD_PITCH - 2 * out_w);
        g.y_step = ch;
        const size_t row = (size_t)w * (size_t)ch;
        for (int32_t c = 0; c < ch; c += 4) {
            mcu_dwd_group_init(&g, weight + c, ch, q->multiplier + c, q->shift + c, bias != NULL ? bias + c : NULL,
                               input_offset, k2);
            if (c1 > c0 && r1 > r0) {
                mcu_dwd_copy(block + r0 * MCU_DWD_PITCH + c0,
                             x + (size_t)(r0 - pad_top) * row + (size_t)(c0 - pad_left) * (size_t)ch + c, ch, c1 - c0,
                             r1 - r0, (int32_t)row);
            }
            int8_t *yc = (staged ? (int8_t *)stage : y) + c;
#if defined(MCU_DWD_RUN9)
            if (out_h == 3 && out_w == 3) {
                g.y = yc;
                mcu_dwd_run9(block, &g);
                continue;
            }
#endif
            if (pairs) {
                g.y = yc;
                g.rows = out_h;
                mcu_dwd_run2(block, &g);
            } else {
                mcu_dwd_run(block, &g, yc, out_h);
            }
        }
    }
    if (staged) { /* word copies; the empty asm keeps GCC from calling memcpy (no libc in the kernels) */
        const int32_t words = out_h * out_w * ch / 4;
        int32_t i = 0;
        for (; i + 2 <= words; i += 2) {
            const uint32_t v0 = stage[i], v1 = stage[i + 1];
            mcu_store_u32(y + 4 * i, v0);
            mcu_store_u32(y + 4 * i + 4, v1);
            __asm__("" ::: "memory");
        }
        if (i < words) {
            mcu_store_u32(y + 4 * i, stage[i]);
        }
    }
}

#endif /* MCU_S8_DSP */
#endif /* MCU_KERNELS_INTERNAL_DW_DIRECT_S8_DSP_H */
