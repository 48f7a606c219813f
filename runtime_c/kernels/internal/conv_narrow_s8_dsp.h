/* mcu_conv2d_packed_s8 for layers with few taps per output pixel (kp <= 32: a first layer's 3x3
 * window of 3 channels, pointwise layers of up to 32 input channels) whose activation range starts
 * at or above the output offset, as every layer with a ReLU folded into its range does. Internal:
 * static inline only; the packed stream and its column are those of internal/gemm_s8_dsp.h.
 *
 * Why a path of its own: at a few taps per pixel the dot product is a small part of a block, and
 * the requantization, the block's loop and the column dominate (MobileNetV1-0.25's first layer ran
 * 2.4 instructions per MAC, its 8->16 pointwise layer 400 per pixel). Three savings:
 *  - the requantization without the sign correction of mcu_packed_rq_s8 (AND, ADDS, ADC): for
 *    acc < 0, z = floor((acc m + K - 2^31) / 2^(31+R)) and z' = floor((acc m + K) / 2^(31+R)) are
 *    both <= 0 (m >= 0, so acc m <= 0, and K - output_offset 2^(31+R) = 2^30 + 2^(R+30) < 2^(31+R)),
 *    so both outputs are at most the output offset, which the activation clamp (act_min >=
 *    output_offset) turns into act_min: 4 instructions per channel instead of 7;
 *  - the dot product fully unrolled (at most 8 steps of 4 taps), entered through a TBB whose index
 *    the layer computes once, without the loop compare;
 *  - the column of an interior window gathered by whole rows, with the padding taps of the raw
 *    bytes written once per layer. */
#ifndef MCU_KERNELS_INTERNAL_CONV_NARROW_S8_DSP_H
#define MCU_KERNELS_INTERNAL_CONV_NARROW_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "conv_column_s8.h"
#include "gemm_s8_dsp.h"
#include "requant.h"
#include "simd_s8.h"

#if MCU_S8_DSP

#define MCU_NARROW_TAPS_MAX 32

/* 1 when a layer takes this path: the stream's right-shift flag (every shift in [-23, -1]), few
 * taps, and an activation range that clamps every output at or below the output offset. Pixels
 * run backward (direction 1, mcu_conv_pixel_direction) only in pointwise layers of whole words. */
static inline int mcu_narrow_applies(const mcu_conv2d_s8_params *p, int32_t kp, int right, int direction)
{
    return right && kp <= MCU_NARROW_TAPS_MAX && p->act_min >= p->output_offset &&
           (direction == 0 || p->input.c % 4 == 0);
}

/* What the block loop reads; the assembly reads it at fixed offsets (y, y_end, min4, max4, col,
 * entry), the C blocks read kp. */
typedef struct {
    int8_t *y;
    int8_t *y_end;
    uint32_t min4, max4; /* activation bounds in four bytes each */
    const int16_t *col;
    uint32_t entry; /* 8 - kp / 4: the first of the 8 unrolled dot-product steps that kp needs */
    int32_t kp;
} mcu_narrow_state;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_narrow_state, col) == 16 && offsetof(mcu_narrow_state, entry) == 20,
               "mcu_narrow_state layout");
#endif

/* One channel's requantization without the sign correction (see the top of this file), saturated
 * to int8: what the assembly's LDM, SMLAL, ASR, SSAT compute. */
static inline int32_t mcu_narrow_rq_s8(int32_t acc, const int32_t *rq)
{
    const int64_t k = (int64_t)(((uint64_t)(uint32_t)rq[1] << 32) | (uint32_t)rq[0]);
    return mcu_clamp_s32((int32_t)mcu_asr64(k + (int64_t)acc * rq[2], 32 + rq[3]), -128, 127);
}

/* One block of n <= 4 channels in C, clamped to [act_min, act_max]. */
static inline void mcu_narrow_block_c(const mcu_narrow_state *st, const int32_t *blob, int8_t *y, int32_t n,
                                      int32_t act_min, int32_t act_max)
{
    uint32_t acc[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[2], (uint32_t)blob[3]};
    mcu_dot4_packed(st->col, blob + 4, st->kp, acc);
    const int32_t *rq = blob + 4 + 2 * st->kp;
    for (int32_t o = 0; o < n; ++o, rq += 4) {
        y[o] = (int8_t)mcu_clamp_s32(mcu_narrow_rq_s8(mcu_u32_to_s32(acc[o]), rq), act_min, act_max);
    }
}

#if MCU_S8_DSP_NATIVE
/* Four taps (two pairs) of the column (r4) against four channels of the stream (r5), into r0-r3. */
#define MCU_NW_STEP                                                                                       \
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

/* One channel: (K low, K high, m, R - 1) in one LDM, K + acc m, the high word shifted by R - 1. */
#define MCU_NW_RQ(acc)                                                                                    \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlal r8, r9, " acc ", r10\n\t"                                                                      \
    "asr r9, r9, r11\n\t"                                                                                 \
    "ssat " acc ", #8, r9\n\t"

/* Four STRB when the activation range is all of int8, else the bytes packed into a word and
 * clamped byte-wise (SSUB8 sets GE where the value is at least the bound, SEL keeps it). Both
 * leave y (advanced) in r4 and y_end in r8. */
#define MCU_NW_STORE_BYTES                                                                                \
    "ldrd r4, r8, [r6]\n\t"                                                                               \
    "strb r1, [r4, #1]\n\t"                                                                               \
    "strb r2, [r4, #2]\n\t"                                                                               \
    "strb r3, [r4, #3]\n\t"                                                                               \
    "strb r0, [r4], #4\n\t"
#define MCU_NW_STORE_CLAMP                                                                                \
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

/* Every whole block of one pixel: the column and the TBB index from the state (r6), biases into
 * the accumulators, the unrolled steps from the entry on, the requantization and the store. */
#define MCU_NW_BLOCKS(store)                                                                              \
    "5:\n\t"                                                                                              \
    "ldrd r4, r8, [r6, #16]\n\t"                                                                          \
    "ldmia r5!, {r0, r1, r2, r3}\n\t"                                                                     \
    "tbb [pc, r8]\n\t"                                                                                    \
    "0:\n\t"                                                                                              \
    ".byte (11f - 0b) / 2, (12f - 0b) / 2, (13f - 0b) / 2, (14f - 0b) / 2\n\t"                             \
    ".byte (15f - 0b) / 2, (16f - 0b) / 2, (17f - 0b) / 2, (18f - 0b) / 2\n\t"                             \
    "11:\n\t" MCU_NW_STEP "12:\n\t" MCU_NW_STEP "13:\n\t" MCU_NW_STEP "14:\n\t" MCU_NW_STEP               \
    "15:\n\t" MCU_NW_STEP "16:\n\t" MCU_NW_STEP "17:\n\t" MCU_NW_STEP "18:\n\t" MCU_NW_STEP               \
    MCU_NW_RQ("r0") MCU_NW_RQ("r1") MCU_NW_RQ("r2") MCU_NW_RQ("r3")                                       \
    store                                                                                                 \
    "str r4, [r6]\n\t"                                                                                    \
    "cmp r4, r8\n\t"                                                                                      \
    "bne 5b\n\t"
#endif

/* The whole blocks of one pixel, st->y to st->y_end (a positive multiple of 4 channels), from the
 * column st->col; returns the stream after them. */
static inline const int32_t *mcu_narrow_blocks(mcu_narrow_state *st, const int32_t *blob, int clamp,
                                               int32_t act_min, int32_t act_max)
{
#if MCU_S8_DSP_NATIVE
    (void)act_min;
    (void)act_max;
    register const int32_t *w __asm__("r5") = blob;
    register mcu_narrow_state *s __asm__("r6") = st;
    if (clamp) {
        __asm__ volatile(MCU_NW_BLOCKS(MCU_NW_STORE_CLAMP)
                         : "+r"(w)
                         : "r"(s)
                         : "r0", "r1", "r2", "r3", "r4", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    } else {
        __asm__ volatile(MCU_NW_BLOCKS(MCU_NW_STORE_BYTES)
                         : "+r"(w)
                         : "r"(s)
                         : "r0", "r1", "r2", "r3", "r4", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
    }
    return w;
#else
    (void)clamp;
    const int32_t words = mcu_packed_block_words(st->kp);
    for (int8_t *y = st->y; y != st->y_end; y += 4, blob += words) {
        mcu_narrow_block_c(st, blob, y, 4, act_min, act_max);
    }
    return blob;
#endif
}

#if MCU_S8_DSP_NATIVE
#undef MCU_NW_BLOCKS
#undef MCU_NW_STORE_CLAMP
#undef MCU_NW_STORE_BYTES
#undef MCU_NW_RQ
#undef MCU_NW_STEP
#endif

/* What a layer's pixels share. */
typedef struct {
    mcu_narrow_state st;
    const int32_t *blocks; /* the first block of the stream */
    int32_t cout, whole;   /* channels, and those in whole blocks of 4 */
    int32_t act_min, act_max;
    int clamp; /* the activation range is narrower than int8 */
} mcu_narrow_layer;

/* Output pixel y from the column in st.col. */
static inline void mcu_narrow_pixel(mcu_narrow_layer *l, int8_t *y)
{
    const int32_t *blob = l->blocks;
    if (l->whole > 0) {
        l->st.y = y;
        l->st.y_end = y + l->whole;
        blob = mcu_narrow_blocks(&l->st, blob, l->clamp, l->act_min, l->act_max);
    }
    if (l->whole < l->cout) {
        mcu_narrow_block_c(&l->st, blob, y + l->whole, l->cout - l->whole, l->act_min, l->act_max);
    }
}

/* The layer (mcu_narrow_applies, pixels in forward order), `blocks` after the stream's header. */
static inline void mcu_conv_narrow_s8(const mcu_conv2d_s8_params *p, const int8_t *input, const int32_t *blocks,
                                      int8_t *output, int32_t kp, int direction)
{
    _Alignas(8) int16_t col[MCU_NARROW_TAPS_MAX];
    _Alignas(4) int8_t raw[MCU_NARROW_TAPS_MAX];
    const mcu_shape4 in = p->input, out = p->output;
    mcu_narrow_layer l;
    l.st.y = output;
    l.st.y_end = output;
    l.st.min4 = ((uint32_t)p->act_min & 0xFFu) * 0x01010101u;
    l.st.max4 = ((uint32_t)p->act_max & 0xFFu) * 0x01010101u;
    l.st.col = col;
    l.st.entry = (uint32_t)(8 - kp / 4);
    l.st.kp = kp;
    l.blocks = blocks;
    l.cout = out.c;
    l.whole = out.c & ~3;
    l.act_min = p->act_min;
    l.act_max = p->act_max;
    l.clamp = p->act_min > -128 || p->act_max < 127;
    const int32_t c = in.c;
    const int32_t off = p->input_offset;
    const int pointwise = p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                          p->pad_top == 0 && p->pad_left == 0 && out.h == in.h && out.w == in.w;
    if (pointwise && c % 4 == 0) { /* pixels are runs of c bytes in and out, kp == c */
        const int64_t pixels = (int64_t)in.n * in.h * in.w;
        /* backward: each pixel's input is in the column before its output is written */
        const int64_t first = direction == 1 ? pixels - 1 : 0;
        const int64_t dx = direction == 1 ? -c : c, dy = direction == 1 ? -out.c : out.c;
        const int8_t *x = input + first * c;
        int8_t *y = output + first * out.c;
        for (int64_t i = 0; i < pixels; ++i, x += dx, y += dy) {
            mcu_column_s8(x, kp, off, col);
            mcu_narrow_pixel(&l, y);
        }
        return;
    }
    const int32_t kh = p->kernel_h, kw = p->kernel_w;
    const int32_t run = kw * c;                        /* a window row's bytes (dilation_w 1) */
    const int32_t step = p->dilation_h * in.w * c;     /* between window rows */
    const int32_t span = (kh - 1) * p->dilation_h + 1; /* input rows a window covers */
    mcu_fill_s8(raw + kh * run, (int8_t)-off, kp - kh * run); /* taps past the window: 0 in the column */
    const int gather = p->dilation_w == 1;
    /* output columns whose window lies inside the input's width: ow_lo <= ow < ow_hi */
    int32_t ow_lo = 0, ow_hi = 0;
    if (gather) {
        ow_lo = (p->pad_left + p->stride_w - 1) / p->stride_w;
        ow_hi = in.w - kw + p->pad_left >= 0 ? (in.w - kw + p->pad_left) / p->stride_w + 1 : 0;
        ow_hi = ow_hi < out.w ? ow_hi : out.w;
        ow_lo = ow_lo < ow_hi ? ow_lo : ow_hi;
    }
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * c;
        int8_t *y_n = output + (int64_t)b * out.h * out.w * out.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            const int rows_in = gather && ih0 >= 0 && ih0 + span <= in.h;
            const int32_t lo = rows_in ? ow_lo : out.w, hi = rows_in ? ow_hi : out.w;
            int8_t *y = y_n + (int64_t)oh * out.w * out.c;
            for (int32_t ow = 0; ow < out.w; ++ow, y += out.c) {
                if (ow >= lo && ow < hi) {
                    const int8_t *src = x_n + ((int64_t)ih0 * in.w + ow * p->stride_w - p->pad_left) * c;
                    if (c % 4 == 0) {
                        for (int32_t i = 0; i < kh; ++i, src += step) {
                            mcu_column_s8(src, run, off, col + i * run);
                        }
                    } else {
                        for (int32_t i = 0; i < kh; ++i, src += step) {
                            mcu_copy_run_s8(raw + i * run, src, run);
                        }
                        mcu_column_s8(raw, kp, off, col);
                    }
                } else {
                    /* a border window; it writes raw's padding taps with the same zero-point */
                    mcu_conv_column_s16(p, x_n, oh, ow, kp, col, raw);
                }
                mcu_narrow_pixel(&l, y);
            }
        }
    }
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_CONV_NARROW_S8_DSP_H */
