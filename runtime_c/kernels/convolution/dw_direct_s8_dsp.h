/* 3x3 depthwise convolution (ch_mult 1, dilation 1, stride 1 or 2) of small images straight from the
 * interleaved int8 channels, for the DSP paths (MCU_S8_DSP): a group of four channels at a time, one
 * output pixel (its four channels) a step. Internal: static inline only.
 *
 * Why, beside the channel planes (dw_plane_s8_dsp.h): on the 3 x 3 and 6 x 6 outputs of mobilenet_v1's
 * last depthwise layers a plane channel serves 9 or 36 outputs, so its per-channel and per-group costs
 * (the fill into int16 planes, the group's lane pairs, the line loop's entry) weigh against few MACs:
 * 50 to 67 estimated cycles an output there against about 20 on the large images. Here a group's input
 * is copied as words (one LDR/STR per pixel of four channels) into a padded block whose border holds
 * the byte -input_offset (then x + input_offset is 0 there, as padding must be: the offset is folded
 * into the bias, 2 (bias + input_offset sum w), so no SXTAB16 needs it), and each tap of a pixel is one
 * load of four channels, two SXTB16 and four single MACs (SMLABB/SMLATT) on the doubled weights as lane
 * pairs (channels 0 and 2, 1 and 3) prepared once a group: 10 cycles a tap on the M4/M33 model, with
 * the planes' one-SMMLAR requantization (the doubled accumulator, mcu_dwpl_rq): about 33 cycles an output
 * against the planes' 50 to 67 on those images. On larger images the planes win: their SMLAD pairs take
 * 24 MAC instructions for a quad's 36 products, here 36 (see MCU_DWD_MAX_PIXELS).
 *
 * Sums are modulo 2^32 in any order, and the folded offset leaves the final sum exact: the plain
 * kernel's bits. Every input of a group's channels is in the block before the first of their outputs
 * is written, and other channels' bytes are never written: the output may be the input itself. */
#ifndef MCU_KERNELS_INTERNAL_DW_DIRECT_S8_DSP_H
#define MCU_KERNELS_INTERNAL_DW_DIRECT_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/simd_s8.h"
#include "dw_plane_s8_dsp.h"

#if MCU_S8_DSP

/* The padded block: words of four channels, a fixed pitch of 16 words (64 bytes), so that the nine taps
 * of a window are immediate offsets from its first word. */
#define MCU_DWD_PITCH 16
/* Most output pixels of a layer the direct path takes (per stride): measured on mobilenet_v1 on
 * mps2-an505-u575 (docs/cycles.md, "Depthwise: small images straight from the channels"). */
#define MCU_DWD_MAX_PIXELS_S1 9
#define MCU_DWD_MAX_PIXELS_S2 36

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
    int32_t ow;       /* output pixels a row */
    int32_t row_step; /* block bytes from a row's last window + pixel step to the next row's first */
    int32_t px_step;  /* block bytes from a window to the next: 4 stride */
    int32_t y_step;   /* output bytes from a pixel to the next: the channel count */
} mcu_dwd_group;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_dwd_group, w) == 16 && offsetof(mcu_dwd_group, rq) == 88 &&
                   offsetof(mcu_dwd_group, ow) == 136 && offsetof(mcu_dwd_group, row_step) == 140 &&
                   offsetof(mcu_dwd_group, px_step) == 144 && offsetof(mcu_dwd_group, y_step) == 148,
               "mcu_dwd_group layout (offsets in MCU_DWD_LOOP)");
#endif

/* Whether the direct path takes a 3x3 layer (ch_mult 1, dilation 1, batch 1 checked by the caller): stride
 * 1 or 2 both ways, channels a multiple of 4, the windows' rows and columns within the block, few enough
 * output pixels (MCU_DWD_MAX_PIXELS_S*), an output that overlaps the input (`staged`, not the in-place
 * kernel's) within MCU_DWD_STAGE_BYTES, the planes' requantization bounds (mcu_dwpl_quant_ok), and an
 * output finished by saturation alone (mcu_dwpl_finish: no clamp narrower than int8). */
static inline int mcu_dwd_applies(int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t ch,
                                  int32_t out_h, int32_t out_w, int staged, const mcu_per_channel_quant *q,
                                  const int32_t *bias, int32_t output_offset, int32_t act_min, int32_t act_max)
{
    if (kh != 3 || kw != 3 || stride_h != stride_w || (stride_h != 1 && stride_h != 2) || ch % 4 != 0) {
        return 0;
    }
    if (staged && (int64_t)out_h * out_w * ch > MCU_DWD_STAGE_BYTES) {
        return 0;
    }
    const int32_t s = stride_h;
    if ((out_h - 1) * s + 3 > MCU_DWD_PITCH || (out_w - 1) * s + 3 > MCU_DWD_PITCH ||
        out_h * out_w > (s == 1 ? MCU_DWD_MAX_PIXELS_S1 : MCU_DWD_MAX_PIXELS_S2)) {
        return 0;
    }
    if (mcu_dwpl_finish(act_min, act_max, output_offset) == MCU_DWPL_CLAMP) {
        return 0;
    }
    return mcu_dwpl_quant_ok(q, bias, ch, output_offset);
}

/* The constants of channels c .. c + 3 (w: their first tap's weights, taps [3][3][ch]). */
static inline void mcu_dwd_group_init(mcu_dwd_group *g, const int8_t *w, int32_t ch, const int32_t *multiplier,
                                      const int32_t *shift, const int32_t *bias, int32_t input_offset,
                                      int32_t output_offset)
{
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* doubled weight sums */
    for (int32_t t = 0; t < 9; ++t) {
        const uint32_t v = mcu_load_u32(w + (size_t)t * (size_t)ch);
        const uint32_t e = mcu_sxtab16(mcu_sxtb16(v), v), o = mcu_sxtab16_ror8(mcu_sxtb16_ror8(v), v);
        g->w[t][0] = e;
        g->w[t][1] = o;
        s0 += (int16_t)(uint16_t)e;
        s2 += (int16_t)(uint16_t)(e >> 16);
        s1 += (int16_t)(uint16_t)o;
        s3 += (int16_t)(uint16_t)(o >> 16);
    }
    const int32_t sums[4] = {s0, s1, s2, s3};
    const uint32_t k2 = 2u * (uint32_t)output_offset + 1u;
    for (int32_t k = 0; k < 4; ++k) {
        const uint32_t b = bias != NULL ? 2u * (uint32_t)bias[k] : 0u;
        g->bias[k] = b + (uint32_t)input_offset * (uint32_t)sums[k]; /* modulo 2^32 */
        g->rq[k][0] = multiplier[k];
        g->rq[k][1] = mcu_u32_to_s32(k2 << (~(uint32_t)shift[k] & 31u));
        g->rq[k][2] = -shift[k];
    }
}

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
/* Channel k's requantization of accumulator a (mcu_dwpl_rq) and its byte: the multiplier, C and R in one
 * chain of loads; the sign of a added to C (SIGNED) or not (RELU). */
#define MCU_DWD_RQ_SIGNED(a, mo, co, ro, k)                                                   \
    "ldr r6, [r1, #" mo "]\n\t"                                                               \
    "ldr r7, [r1, #" co "]\n\t"                                                               \
    "ldr r8, [r1, #" ro "]\n\t"                                                               \
    "add r7, r7, " a ", asr #31\n\t"                                                          \
    "smmlar " a ", " a ", r6, r7\n\t"                                                         \
    "asr " a ", " a ", r8\n\t"                                                                \
    "ssat " a ", #8, " a "\n\t"                                                               \
    "strb " a ", [r9, #" k "]\n\t"
#define MCU_DWD_RQ_RELU(a, mo, co, ro, k)                                                     \
    "ldr r6, [r1, #" mo "]\n\t"                                                               \
    "ldr r7, [r1, #" co "]\n\t"                                                               \
    "ldr r8, [r1, #" ro "]\n\t"                                                               \
    "smmlar " a ", " a ", r6, r7\n\t"                                                         \
    "asr " a ", " a ", r8\n\t"                                                                \
    "ssat " a ", #8, " a "\n\t"                                                               \
    "strb " a ", [r9, #" k "]\n\t"
/* Every output pixel of a group: r0 the block's first window, r1 the constants, r9 the output (channel
 * c of pixel 0), lr the output rows; r11 counts a row's pixels. */
#define MCU_DWD_LOOP(RQ)                                                                      \
    "ldr r10, [r1, #148]\n\t"                                                                 \
    "ldr r11, [r1, #136]\n\t"                                                                 \
    "1:\n\t"                                                                                  \
    "ldm r1, {r2-r5}\n\t"                                                                     \
    MCU_DWD_TAP("0", "16", "20") MCU_DWD_TAP("4", "24", "28") MCU_DWD_TAP("8", "32", "36")    \
    MCU_DWD_TAP("64", "40", "44") MCU_DWD_TAP("68", "48", "52") MCU_DWD_TAP("72", "56", "60") \
    MCU_DWD_TAP("128", "64", "68") MCU_DWD_TAP("132", "72", "76") MCU_DWD_TAP("136", "80", "84") \
    RQ("r2", "88", "92", "96", "0") RQ("r3", "100", "104", "108", "1")                        \
    RQ("r4", "112", "116", "120", "2") RQ("r5", "124", "128", "132", "3")                     \
    "ldr r6, [r1, #144]\n\t"                                                                  \
    "add r9, r9, r10\n\t"                                                                     \
    "add r0, r0, r6\n\t"                                                                      \
    "subs r11, r11, #1\n\t"                                                                   \
    "bne 1b\n\t"                                                                              \
    "ldr r6, [r1, #140]\n\t"                                                                  \
    "ldr r11, [r1, #136]\n\t"                                                                 \
    "add r0, r0, r6\n\t"                                                                      \
    "subs lr, lr, #1\n\t"                                                                     \
    "bne 1b\n\t"
_Static_assert(MCU_DWD_PITCH == 16, "the taps' block offsets in MCU_DWD_LOOP are for a pitch of 64 bytes");

static __attribute__((noinline, unused)) void mcu_dwd_run(const uint32_t *block, const mcu_dwd_group *g, int8_t *y,
                                                          int32_t rows, int relu)
{
    register const uint32_t *r0 __asm__("r0") = block;
    register const mcu_dwd_group *r1 __asm__("r1") = g;
    register int8_t *r9 __asm__("r9") = y;
    register int32_t lr __asm__("lr") = rows;
    if (relu) {
        __asm__ volatile(MCU_DWD_LOOP(MCU_DWD_RQ_RELU)
                         : "+r"(r0), "+r"(r9), "+r"(lr)
                         : "r"(r1)
                         : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r10", "r11", "r12", "cc", "memory");
    } else {
        __asm__ volatile(MCU_DWD_LOOP(MCU_DWD_RQ_SIGNED)
                         : "+r"(r0), "+r"(r9), "+r"(lr)
                         : "r"(r1)
                         : "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r10", "r11", "r12", "cc", "memory");
    }
}
#else
/* The assembly's steps in C (the emulated build): the same words, lanes and requantization. */
static inline void mcu_dwd_run(const uint32_t *block, const mcu_dwd_group *g, int8_t *y, int32_t rows, int relu)
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
                y[k] = (int8_t)mcu_dwpl_rq(&t, a[k], relu);
            }
            y += g->y_step;
            block += g->px_step / 4;
        }
        block += g->row_step / 4;
    }
}
#endif

/* The whole layer (mcu_dwd_applies held, batch 1): x (h x w x ch) into y (out_h x out_w x ch), which may be
 * x itself (the in-place kernel: a group writes only its own channels' bytes, after copying them) or
 * apart from it, or else (`staged`) overlap it: then every output goes to the stack first and to y after
 * the last read. */
static __attribute__((noinline, unused)) void mcu_dwd_layer(int32_t h, int32_t w, int32_t ch, int32_t out_h,
                                                            int32_t out_w, int32_t stride, int32_t pad_top,
                                                            int32_t pad_left, int32_t input_offset,
                                                            int32_t output_offset, int32_t act_min, int32_t act_max,
                                                            const mcu_per_channel_quant *q, const int8_t *x,
                                                            const int8_t *weight, const int32_t *bias, int8_t *y,
                                                            int staged)
{
    const int32_t bh = (out_h - 1) * stride + 3, bw = (out_w - 1) * stride + 3; /* the block's rows, columns */
    uint32_t block[MCU_DWD_PITCH * MCU_DWD_PITCH];
    uint32_t stage[MCU_DWD_STAGE_BYTES / 4];
    const uint32_t pad = 0x01010101u * (uint8_t)(-input_offset); /* x + input_offset = 0: mcu_input_offset_valid */
    for (int32_t i = 0; i < bh * MCU_DWD_PITCH; ++i) {
        block[i] = pad;
    }
    /* the block's part inside the input: rows [r0, r1), columns [c0, c1) */
    const int32_t r0 = pad_top, r1 = pad_top + h < bh ? pad_top + h : bh;
    const int32_t c0 = pad_left, c1 = pad_left + w < bw ? pad_left + w : bw;
    const int relu = mcu_dwpl_finish(act_min, act_max, output_offset) == MCU_DWPL_RELU;
    mcu_dwd_group g;
    g.ow = out_w;
    g.px_step = 4 * stride;
    g.row_step = 4 * (stride * MCU_DWD_PITCH - out_w * stride);
    g.y_step = ch;
    const size_t row = (size_t)w * (size_t)ch;
    for (int32_t c = 0; c < ch; c += 4) {
        mcu_dwd_group_init(&g, weight + c, ch, q->multiplier + c, q->shift + c, bias != NULL ? bias + c : NULL,
                           input_offset, output_offset);
        for (int32_t r = r0; r < r1; ++r) {
            const int8_t *src = x + (size_t)(r - pad_top) * row + (size_t)(c0 - pad_left) * (size_t)ch + c;
            uint32_t *dst = block + r * MCU_DWD_PITCH;
            for (int32_t col = c0; col < c1; ++col, src += ch) {
                dst[col] = mcu_load_u32(src);
            }
        }
        mcu_dwd_run(block, &g, (staged ? (int8_t *)stage : y) + c, out_h, relu);
    }
    if (staged) { /* word copies; the empty asm keeps GCC from calling memcpy (no libc in the kernels) */
        const int32_t words = out_h * out_w * ch / 4;
        for (int32_t i = 0; i < words; ++i) {
            mcu_store_u32(y + 4 * i, stage[i]);
            __asm__("" ::: "memory");
        }
    }
}

#endif /* MCU_S8_DSP */
#endif /* MCU_KERNELS_INTERNAL_DW_DIRECT_S8_DSP_H */
