/* mcu_conv2d_packed_s8 for layers with few taps per output pixel (kp <= 48: a first layer's 3x3
 * window of 3 channels or DS-CNN's 10x4 window of one, pointwise layers of up to 48 input channels)
 * whose activation range starts at or above the output offset, as every layer with a ReLU folded
 * into its range does. Internal: static inline only; the packed stream and its column are those of
 * convolution/gemm_s8_dsp.h.
 *
 * Why a path of its own: at a few taps per pixel the dot product is a small part of a block, and
 * the requantization, the block's loop and the column dominate (MobileNetV1-0.25's first layer ran
 * 2.4 instructions per MAC, its 8->16 pointwise layer 400 per pixel). Three savings:
 *  - the requantization without the sign correction of mcu_packed_rq_s8 (AND, ADDS, ADC): with
 *    K = 2^30 + 2^(R+30) + output_offset 2^(31+R), for acc < 0 the corrected value
 *    floor((acc m + K - 2^31) / 2^(31+R)) and the uncorrected floor((acc m + K) / 2^(31+R)) are both
 *    at most output_offset (m >= 0, so acc m <= 0, and 2^30 + 2^(R+30) < 2^(31+R)), and saturating
 *    to int8 keeps them there; the activation clamp (act_min >= output_offset) turns both into
 *    act_min. For acc >= 0 there is no correction. 4 instructions per channel instead of 7;
 *  - the dot product fully unrolled (at most 12 steps of 4 taps), entered through a TBB whose index
 *    the layer computes once, without the loop compare;
 *  - the pixel loop itself in the assembly for pointwise layers and the interior of a 3x3 window
 *    of 3 channels (first layers on RGB), the column built there from unaligned loads: a C loop
 *    around one call per pixel kept its state on the stack and spent more than the column. */
#ifndef MCU_KERNELS_INTERNAL_CONV_NARROW_S8_DSP_H
#define MCU_KERNELS_INTERNAL_CONV_NARROW_S8_DSP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"
#include "conv_column_s8.h"
#include "gemm_s8_dsp.h"
#include "../common/requant.h"
#include "../common/simd_s8.h"

#if MCU_S8_DSP

#define MCU_NARROW_TAPS_MAX 48
/* Pointwise layers of at least this many taps take the two-pixel loops of gemm_s8_dsp.h instead: one
 * weight load serves two pixels there, which outweighs this path's cheaper requantization from 16
 * taps on (mobilenet_v1's 16->32 and 32->32 layers at 24 x 24: 697,000 -> 651,000 and 1,100,000 ->
 * 995,000 estimated cycles on mps2-an505-u575, fewer on every DSP board). So do flat pointwise layers
 * of 8 taps and two pixels or more (mcu_pw8_pairs: mobilenet_v1's 8->16 layer 1,056,000 -> 790,000);
 * a single row of 8 (a fully connected layer) stays here. */
#define MCU_NARROW_PW_MIN 16

/* 1 when a layer takes this path: the stream's right-shift flag (every shift in [-23, -1]), few
 * taps (pointwise layers fewer than MCU_NARROW_PW_MIN, not flat ones of 8 channels over two pixels or
 * more), output channels in whole blocks of 4 (layers with a partial block, classifiers mostly,
 * keep the general path: the C of a partial block would be the path's largest part), and an
 * activation range that clamps every output at or below the output offset. Pixels run backward
 * (direction 1, mcu_conv_pixel_direction) only in pointwise layers of whole words (mode 1). */
static inline int mcu_narrow_applies(const mcu_conv2d_s8_params *p, int32_t kp, int right, int direction)
{
    const int pointwise = p->kernel_h == 1 && p->kernel_w == 1;
    /* flat, 8 taps (specialise.py's takes_pw8: the build's paths follow it; 5 to 7 channels pad to 8 and
     * take the pairs' general loops) */
    const int pw8 = pointwise && kp == 8 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
                    p->pad_left == 0 && p->output.h == p->input.h && p->output.w == p->input.w &&
                    (int64_t)p->output.n * p->output.h * p->output.w >= 2;
    return right && kp <= MCU_NARROW_TAPS_MAX && !(pointwise && (kp >= MCU_NARROW_PW_MIN || pw8)) &&
           p->output.c % 4 == 0 &&
           p->act_min >= p->output_offset &&
           (direction == 0 || p->input.c % 4 == 0);
}

#ifndef MCU_PACKED_NARROW
#define MCU_PACKED_NARROW 1 /* 0: a model's build without narrow layers (mcu/backends/specialise.py) */
#endif
#ifndef MCU_PACKED_NARROW_K3C3
#define MCU_PACKED_NARROW_K3C3 1 /* 0: no 3x3 windows of 3 channels (the runs of mode 2 and the border patch) */
#endif
/* The engine's two forms (its stores): 0 leaves out the clamped one where no narrow layer's activation range
 * is narrower than int8, or the other where every narrow layer's is (specialise.py). */
#ifndef MCU_PACKED_NARROW_CLAMP
#define MCU_PACKED_NARROW_CLAMP 1
#endif
#ifndef MCU_PACKED_NARROW_FULL
#define MCU_PACKED_NARROW_FULL 1
#endif
#ifndef MCU_PACKED_NARROW_PARTS
#define MCU_PACKED_NARROW_PARTS 1 /* 0: no narrow layer's pixels by parts of the stream (specialise.py) */
#endif
#if MCU_PACKED_NARROW
/* A layer's state. The assembly reads the fields up to `mode` at fixed offsets; the rest is for the
 * C around it. Modes: 0 the whole blocks of one pixel whose column is built; 1 pointwise pixels
 * from x (kp bytes each); 2 interior 3x3 windows of 3 channels at x (rows `step` bytes apart).
 * In modes 1 and 2 pixels run until x reaches x_stop, x advancing by dx (after the kp bytes a
 * pointwise column consumed) and y by dy (after the pixel's cout bytes). */
typedef struct {
    int8_t *y;
    int8_t *y_end;
    uint32_t min4, max4; /* activation bounds in four bytes each */
    const int16_t *col;
    uint32_t entry;        /* 12 - kp / 4: the first of the 12 unrolled steps of 4 taps that kp needs */
    const int32_t *blocks; /* the stream's first block */
    int32_t cout;          /* output channels, a multiple of 4 */
    const int8_t *x;
    const int8_t *x_stop;
    int32_t dx, dy;
    uint32_t off2; /* the input offset in both 16-bit lanes */
    int32_t step;
    uint32_t zp4; /* the input zero-point in byte 3: the padding tap of a 27-tap column */
    uint32_t mode;
    int32_t kp;
    int32_t act_min, act_max;
    int clamp; /* the activation range is narrower than int8 */
} mcu_narrow_state;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_narrow_state, col) == 16 && offsetof(mcu_narrow_state, blocks) == 24 &&
                   offsetof(mcu_narrow_state, x) == 32 && offsetof(mcu_narrow_state, dx) == 40 &&
                   offsetof(mcu_narrow_state, off2) == 48 && offsetof(mcu_narrow_state, mode) == 60,
               "mcu_narrow_state layout");
#endif

/* One channel's requantization without the sign correction (see the top of this file), saturated
 * to int8: what the assembly's LDM, SMLAL, ASR, SSAT compute. */
static inline int32_t mcu_narrow_rq_s8(int32_t acc, const int32_t *rq)
{
    const int64_t k = (int64_t)(((uint64_t)(uint32_t)rq[1] << 32) | (uint32_t)rq[0]);
    return mcu_clamp_s32((int32_t)mcu_asr64(k + (int64_t)acc * rq[2], 32 + rq[3]), -128, 127);
}

/* One block of 4 channels in C (the engine's twin off the core), clamped to the activation range. */
static inline void mcu_narrow_block_c(const mcu_narrow_state *st, const int32_t *blob, int8_t *y)
{
    uint32_t acc[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[2], (uint32_t)blob[3]};
    mcu_dot4_packed(st->col, blob + 4, st->kp, acc);
    const int32_t *rq = blob + 4 + 2 * st->kp;
    for (int32_t o = 0; o < 4; ++o, rq += 4) {
        y[o] = (int8_t)mcu_clamp_s32(mcu_narrow_rq_s8(mcu_u32_to_s32(acc[o]), rq), st->act_min, st->act_max);
    }
}

/* Two 16-bit lanes (x + input_offset) of bytes 0, 2 and 1, 3 of word v stored at col[0..3]. */
static inline void mcu_narrow_col4(int16_t *col, uint32_t off2, uint32_t v)
{
    mcu_store_u32(col, mcu_sxtab16(off2, v));
    mcu_store_u32(col + 2, mcu_sxtab16_ror8(off2, v));
}

static inline uint32_t mcu_narrow_load_u16(const int8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The column of an interior 3x3 window of 3 channels, rows s, s + step, s + 2 step of 9 bytes each:
 * the 27 bytes and the padding tap (zp4) as seven words from unaligned loads, without raw bytes.
 * The loads stay inside the window's rows, except the word ending at the second row's first byte
 * (its first byte, replaced, is the input byte before that row's window: the window starts at
 * input row 0 or later). The assembly builds the same words. */
static inline void mcu_narrow_col_k3c3(const int8_t *s, int32_t step, uint32_t off2, uint32_t zp4, int16_t *col)
{
    const int8_t *s1 = s + step, *s2 = s1 + step;
    mcu_narrow_col4(col, off2, mcu_load_u32(s));
    mcu_narrow_col4(col + 4, off2, mcu_load_u32(s + 4));
    mcu_narrow_col4(col + 8, off2, (mcu_load_u32(s1 - 1) & 0xFFFFFF00u) | (uint8_t)s[8]);
    mcu_narrow_col4(col + 12, off2, mcu_load_u32(s1 + 3));
    mcu_narrow_col4(col + 16, off2, mcu_narrow_load_u16(s1 + 7) | (mcu_narrow_load_u16(s2) << 16));
    mcu_narrow_col4(col + 20, off2, mcu_load_u32(s2 + 2));
    mcu_narrow_col4(col + 24, off2, (mcu_load_u32(s2 + 5) >> 8) | zp4);
}

#if MCU_S8_DSP_NATIVE
/* One channel: (K low, K high, m, R - 1) in one LDM, K + acc m, the high word shifted by R - 1. */
#define MCU_NW_RQ(acc)                                                                                    \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlal r8, r9, " acc ", r10\n\t"                                                                      \
    "asr r9, r9, r11\n\t"                                                                                 \
    "ssat " acc ", #8, r9\n\t"

/* The stores are gemm_s8_dsp.h's (MCU_PX_STORE_BYTES, MCU_PX_STORE_CLAMP: four STRB when the range is all
 * of int8, else the bytes clamped byte-wise and one STR), on the same state layout at r6; both leave
 * y (advanced) in r4 and y_end in r8. */

/* Four bytes of the pointwise column: (x + off) of bytes 0, 2 and 1, 3 (r12: off2). */
#define MCU_NW_COL4                                                                                       \
    "ldr r0, [r5], #4\n\t"                                                                                \
    "sxtab16 r1, r12, r0, ror #8\n\t"                                                                     \
    "sxtab16 r0, r12, r0\n\t"                                                                             \
    "strd r0, r1, [r4], #8\n\t"

/* Eight column words (two STM of four) from r0, r1 and r2, r3 (r12: off2). */
#define MCU_NW_COL8(a, b)                                                                                 \
    "sxtab16 r8, r12, " a "\n\t"                                                                          \
    "sxtab16 r9, r12, " a ", ror #8\n\t"                                                                  \
    "sxtab16 r10, r12, " b "\n\t"                                                                         \
    "sxtab16 r11, r12, " b ", ror #8\n\t"                                                                 \
    "stmia r4!, {r8, r9, r10, r11}\n\t"

/* The column of the 3x3 window of 3 channels at r5 (rows r0 bytes apart) from r4 on, r4 advanced past
 * it (mcu_narrow_col_k3c3's words; r12: off2, the state at r6 holds zp4 at byte `zp`). */
#define MCU_NW_K3C3(zp)                                                                                   \
    "add lr, r5, r0\n\t"                                                                                  \
    "add r0, lr, r0\n\t"                                                                                  \
    "ldr r1, [r5]\n\t"                                                                                    \
    "ldr r2, [r5, #4]\n\t"                                                                                \
    MCU_NW_COL8("r1", "r2")                                                                               \
    "ldr r1, [lr, #-1]\n\t"                                                                               \
    "ldrb r3, [r5, #8]\n\t"                                                                               \
    "bfi r1, r3, #0, #8\n\t"                                                                              \
    "ldr r2, [lr, #3]\n\t"                                                                                \
    MCU_NW_COL8("r1", "r2")                                                                               \
    "ldrh r1, [lr, #7]\n\t"                                                                               \
    "ldrh r3, [r0]\n\t"                                                                                   \
    "orr r1, r1, r3, lsl #16\n\t"                                                                         \
    "ldr r2, [r0, #2]\n\t"                                                                                \
    MCU_NW_COL8("r1", "r2")                                                                               \
    "ldr r1, [r0, #5]\n\t"                                                                                \
    "ldr r3, [r6, #" zp "]\n\t"                                                                           \
    "orr r1, r3, r1, lsr #8\n\t"                                                                          \
    "sxtab16 r8, r12, r1\n\t"                                                                             \
    "sxtab16 r9, r12, r1, ror #8\n\t"                                                                     \
    "stmia r4!, {r8, r9}\n\t"

/* The engine (the modes of mcu_narrow_state, r6 the state): per pixel the column (modes 1 and 2),
 * x advanced, then every whole block (biases into the accumulators, the unrolled steps from the
 * entry on, the requantization, the store), then (modes 1 and 2) y advanced and the next pixel. */
#define MCU_NW_ENGINE(store)                                                                              \
    "ldr r0, [r6, #60]\n\t"                                                                               \
    "cmp r0, #0\n\t"                                                                                      \
    "beq 9f\n\t"                                                                                          \
    "7:\n\t"                                                                                              \
    "ldrd r12, r0, [r6, #48]\n\t"                                                                         \
    "ldr r3, [r6, #60]\n\t"                                                                               \
    "ldr r5, [r6, #32]\n\t"                                                                               \
    "ldrd r4, r8, [r6, #16]\n\t"                                                                          \
    "cmp r3, #2\n\t"                                                                                      \
    "beq 40f\n\t"                                                                                         \
    "tbb [pc, r8]\n\t"                                                                                    \
    "30:\n\t"                                                                                             \
    ".byte (31f - 30b) / 2, (32f - 30b) / 2, (33f - 30b) / 2, (34f - 30b) / 2\n\t"                        \
    ".byte (35f - 30b) / 2, (36f - 30b) / 2, (37f - 30b) / 2, (38f - 30b) / 2\n\t"                        \
    ".byte (39f - 30b) / 2, (20f - 30b) / 2, (21f - 30b) / 2, (22f - 30b) / 2\n\t"                        \
    "31:\n\t" MCU_NW_COL4 "32:\n\t" MCU_NW_COL4 "33:\n\t" MCU_NW_COL4 "34:\n\t" MCU_NW_COL4               \
    "35:\n\t" MCU_NW_COL4 "36:\n\t" MCU_NW_COL4 "37:\n\t" MCU_NW_COL4 "38:\n\t" MCU_NW_COL4               \
    "39:\n\t" MCU_NW_COL4 "20:\n\t" MCU_NW_COL4 "21:\n\t" MCU_NW_COL4 "22:\n\t" MCU_NW_COL4               \
    "b 8f\n\t"                                                                                            \
    "40:\n\t"                                                                                             \
    MCU_NW_K3C3("56")                                                                                     \
    "8:\n\t"                                                                                              \
    "ldr r0, [r6, #40]\n\t"                                                                               \
    "add r5, r5, r0\n\t"                                                                                  \
    "str r5, [r6, #32]\n\t"                                                                               \
    "9:\n\t"                                                                                              \
    "ldr r5, [r6, #24]\n\t"                                                                               \
    "5:\n\t"                                                                                              \
    "ldrd r4, r8, [r6, #16]\n\t"                                                                          \
    "ldmia r5!, {r0, r1, r2, r3}\n\t"                                                                     \
    "tbb [pc, r8]\n\t"                                                                                    \
    "0:\n\t"                                                                                              \
    ".byte (11f - 0b) / 2, (12f - 0b) / 2, (13f - 0b) / 2, (14f - 0b) / 2\n\t"                             \
    ".byte (15f - 0b) / 2, (16f - 0b) / 2, (17f - 0b) / 2, (18f - 0b) / 2\n\t"                             \
    ".byte (19f - 0b) / 2, (23f - 0b) / 2, (24f - 0b) / 2, (25f - 0b) / 2\n\t"                             \
    "11:\n\t" MCU_DOT4_HALF "12:\n\t" MCU_DOT4_HALF                                                       \
    "13:\n\t" MCU_DOT4_HALF "14:\n\t" MCU_DOT4_HALF                                                       \
    "15:\n\t" MCU_DOT4_HALF "16:\n\t" MCU_DOT4_HALF                                                       \
    "17:\n\t" MCU_DOT4_HALF "18:\n\t" MCU_DOT4_HALF                                                       \
    "19:\n\t" MCU_DOT4_HALF "23:\n\t" MCU_DOT4_HALF                                                       \
    "24:\n\t" MCU_DOT4_HALF "25:\n\t" MCU_DOT4_HALF                                                       \
    MCU_NW_RQ("r0") MCU_NW_RQ("r1") MCU_NW_RQ("r2") MCU_NW_RQ("r3")                                       \
    store                                                                                                 \
    "str r4, [r6]\n\t"                                                                                    \
    "cmp r4, r8\n\t"                                                                                      \
    "bne 5b\n\t"                                                                                          \
    "ldrd r0, r1, [r6, #40]\n\t"                                                                          \
    "ldr r2, [r6, #28]\n\t"                                                                               \
    "ldr r3, [r6, #60]\n\t"                                                                               \
    "add r4, r4, r1\n\t"                                                                                  \
    "add r2, r4, r2\n\t"                                                                                  \
    "strd r4, r2, [r6]\n\t"                                                                               \
    "cbz r3, 99f\n\t"                                                                                     \
    "ldrd r0, r1, [r6, #32]\n\t"                                                                          \
    "cmp r0, r1\n\t"                                                                                      \
    "bne 7b\n\t"                                                                                          \
    "99:\n\t"

/* Functions of their own: each holds the unrolled loops once, and callers keep few values across
 * them. */
#if MCU_PACKED_NARROW_FULL
static __attribute__((noinline)) void mcu_narrow_engine_full(mcu_narrow_state *st)
{
    register mcu_narrow_state *s __asm__("r6") = st;
    __asm__ volatile(MCU_NW_ENGINE(MCU_PX_STORE_BYTES)
                     :
                     : "r"(s)
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}

#endif
#if MCU_PACKED_NARROW_CLAMP
static __attribute__((noinline)) void mcu_narrow_engine_clamp(mcu_narrow_state *st)
{
    register mcu_narrow_state *s __asm__("r6") = st;
    __asm__ volatile(MCU_NW_ENGINE(MCU_PX_STORE_CLAMP)
                     :
                     : "r"(s)
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}
#endif
#undef MCU_NW_ENGINE
#undef MCU_NW_COL4
#undef MCU_NW_RQ

/* The layer's engine (a build without it refuses the layer first: mcu_conv2d_packed_s8). */
static inline void mcu_narrow_engine(mcu_narrow_state *st)
{
#if MCU_PACKED_NARROW_CLAMP && MCU_PACKED_NARROW_FULL
    if (st->clamp) {
        mcu_narrow_engine_clamp(st);
    } else {
        mcu_narrow_engine_full(st);
    }
#elif MCU_PACKED_NARROW_CLAMP
    mcu_narrow_engine_clamp(st);
#elif MCU_PACKED_NARROW_FULL
    mcu_narrow_engine_full(st);
#else
    (void)st;
#endif
}
#else
/* The engine in C, with the same state and steps. */
static void mcu_narrow_engine(mcu_narrow_state *st)
{
    const int32_t words = mcu_packed_block_words(st->kp);
    int16_t *col = (int16_t *)(uintptr_t)st->col; /* the caller's column */
    for (;;) {
        if (st->mode == 1) {
            mcu_column_s8(st->x, st->kp, mcu_lane_s16(st->off2, 0), col);
            st->x += st->kp + st->dx;
        } else if (st->mode == 2) {
            mcu_narrow_col_k3c3(st->x, st->step, st->off2, st->zp4, col);
            st->x += st->dx;
        }
        const int32_t *blob = st->blocks;
        for (int8_t *y = st->y; y != st->y_end; y += 4, blob += words) {
            mcu_narrow_block_c(st, blob, y);
        }
        st->y = st->y_end + st->dy;
        st->y_end = st->y + st->cout;
        if (st->mode == 0 || st->x == st->x_stop) {
            return;
        }
    }
}
#endif

/* Output pixel y from the column in st->col (mode 0). */
static inline void mcu_narrow_pixel(mcu_narrow_state *st, int8_t *y)
{
    st->y = y;
    st->y_end = y + st->cout;
    mcu_narrow_engine(st);
}

/* The 3x3 window of 3 channels at input row ih0 (rows dilation_h apart), column iw0, as 27 bytes
 * in three rows of 9, the zero-point where a tap lies outside the input: a border window for the
 * engine's mode 2 (rows 9 bytes apart), quicker than the general column. */
static inline void mcu_narrow_k3c3_patch(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t ih0, int32_t iw0,
                                         int8_t *patch)
{
    const int8_t zp = (int8_t)-p->input_offset;
    const mcu_shape4 in = p->input;
    for (int32_t i = 0; i < 3; ++i) {
        const int32_t ih = ih0 + i * p->dilation_h;
        for (int32_t j = 0; j < 3; ++j) {
            const int32_t iw = iw0 + j;
            int8_t *dst = patch + 9 * i + 3 * j;
            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                dst[0] = dst[1] = dst[2] = zp;
            } else {
                const int8_t *src = x_n + ((int64_t)ih * in.w + iw) * 3;
                dst[0] = src[0];
                dst[1] = src[1];
                dst[2] = src[2];
            }
        }
    }
    patch[27] = zp;
}

/* `count` > 0 pixels in mode 1 or 2: the first window at x, the
 * first output at y. */
static inline void mcu_narrow_run(mcu_narrow_state *st, uint32_t mode, const int8_t *x, int8_t *y, int64_t count,
                                  int32_t dx, int32_t dy)
{
    st->mode = mode;
    st->x = x;
    st->dx = mode == 1 ? dx - st->kp : dx; /* the column's loads advance x by kp */
    st->x_stop = x + count * dx;
    st->dy = dy - st->cout;
    st->y = y;
    st->y_end = y + st->cout;
    mcu_narrow_engine(st);
    st->mode = 0;
    st->dy = 0;
}

#if MCU_PACKED_NARROW_K3C3
/* Three 3x3 windows of 3 channels per pass (mcu_narrow_x3): the single-pixel engine spends 21
 * cycles per 16 MACs (an LDRD of column and two LDM of weights per four taps and four channels) and a
 * requantization constant load per output. Here a tap pair of two channels meets three pixels' columns:
 * five independent LDR (6 cycles, the loads pipelining) and six SMLAD, 12 cycles per 12 MACs, with
 * 13 registers (six accumulators, five operands, two pointers); each channel's requantization
 * constants serve three outputs. Layers whose activation range is narrower than int8 keep the engine
 * (its byte-wise clamp needs four channels of one pixel in a word). */
#define MCU_NARROW_X3_TAPS 28 /* 27 taps and the padding tap: the column of a 3x3x3 window */

/* The pass's state, read by the assembly at fixed offsets. */
typedef struct {
    const int32_t *pair; /* the next channel pair's two biases (its weights from byte 16 on) */
    int16_t *col;        /* three columns of MCU_NARROW_X3_TAPS */
    int8_t *y;           /* the first pixel's output for the pair */
    int32_t cout;        /* between the pixels' outputs */
    int8_t *y_end;       /* the first pixel's output end */
    int32_t skip;        /* bytes from a block's second pair to the next block's first */
    int32_t rq;          /* bytes from the pair's weights to its constants: 224 (a block's first pair), 248 */
    const int32_t *blocks; /* the stream's first block */
    int32_t step;          /* between window rows */
    uint32_t off2, zp4;    /* as in mcu_narrow_state */
    /* a run of interior threes: while x != x_stop each three's columns are built from the windows at
     * x, x + dx, x + 2 dx first (x advancing), and the outputs move on by 3 cout after each */
    const int8_t *x;
    const int8_t *x_stop;
    int32_t dx;
    const int16_t *col_end; /* col + 3 MCU_NARROW_X3_TAPS */
} mcu_narrow_x3_state;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_narrow_x3_state, col) == 4 && offsetof(mcu_narrow_x3_state, y) == 8 &&
                   offsetof(mcu_narrow_x3_state, cout) == 12 && offsetof(mcu_narrow_x3_state, y_end) == 16 &&
                   offsetof(mcu_narrow_x3_state, skip) == 20 && offsetof(mcu_narrow_x3_state, rq) == 24 &&
                   offsetof(mcu_narrow_x3_state, blocks) == 28 && offsetof(mcu_narrow_x3_state, step) == 32 &&
                   offsetof(mcu_narrow_x3_state, off2) == 36 && offsetof(mcu_narrow_x3_state, zp4) == 40 &&
                   offsetof(mcu_narrow_x3_state, x) == 44 && offsetof(mcu_narrow_x3_state, x_stop) == 48 &&
                   offsetof(mcu_narrow_x3_state, dx) == 52 && offsetof(mcu_narrow_x3_state, col_end) == 56,
               "mcu_narrow_x3_state layout");

/* Tap pair t: the pair's two weight words (16 bytes apart per tap pair in the stream, from lr), the
 * three columns' words (56 bytes apart, from r12), six SMLAD. */
#define MCU_NX3_TAP(w0, w1, c0, c1, c2)                                                                   \
    "ldr r6, [lr, #" w0 "]\n\t"                                                                           \
    "ldr r8, [lr, #" w1 "]\n\t"                                                                           \
    "ldr r9, [r12, #" c0 "]\n\t"                                                                          \
    "ldr r10, [r12, #" c1 "]\n\t"                                                                         \
    "ldr r11, [r12, #" c2 "]\n\t"                                                                         \
    "smlad r0, r9, r6, r0\n\t"                                                                            \
    "smlad r1, r9, r8, r1\n\t"                                                                            \
    "smlad r2, r10, r6, r2\n\t"                                                                           \
    "smlad r3, r10, r8, r3\n\t"                                                                           \
    "smlad r4, r11, r6, r4\n\t"                                                                           \
    "smlad r5, r11, r8, r5\n\t"

/* A channel pair's three pixels: the biases in r0, r1 copied to the other pixels, the 14 tap pairs. */
#define MCU_NX3_PAIR                                                                                      \
    "mov r2, r0\n\t"                                                                                      \
    "mov r3, r1\n\t"                                                                                      \
    "mov r4, r0\n\t"                                                                                      \
    "mov r5, r1\n\t"                                                                                      \
    MCU_NX3_TAP("0", "4", "0", "56", "112")                                                               \
    MCU_NX3_TAP("16", "20", "4", "60", "116")                                                             \
    MCU_NX3_TAP("32", "36", "8", "64", "120")                                                             \
    MCU_NX3_TAP("48", "52", "12", "68", "124")                                                            \
    MCU_NX3_TAP("64", "68", "16", "72", "128")                                                            \
    MCU_NX3_TAP("80", "84", "20", "76", "132")                                                            \
    MCU_NX3_TAP("96", "100", "24", "80", "136")                                                           \
    MCU_NX3_TAP("112", "116", "28", "84", "140")                                                          \
    MCU_NX3_TAP("128", "132", "32", "88", "144")                                                          \
    MCU_NX3_TAP("144", "148", "36", "92", "148")                                                          \
    MCU_NX3_TAP("160", "164", "40", "96", "152")                                                          \
    MCU_NX3_TAP("176", "180", "44", "100", "156")                                                         \
    MCU_NX3_TAP("192", "196", "48", "104", "160")                                                         \
    MCU_NX3_TAP("208", "212", "52", "108", "164")

/* One channel's three outputs a, b, c: the constants (K low, K high, m, shift) in one LDM from lr,
 * then K + acc m and the high word shifted, as MCU_NW_RQ; K copied for the first two. */
#define MCU_NX3_RQ(a, b, c)                                                                               \
    "ldmia lr!, {r8, r9, r10, r11}\n\t"                                                                   \
    "mov r6, r8\n\t"                                                                                      \
    "mov r12, r9\n\t"                                                                                     \
    "smlal r6, r12, " a ", r10\n\t"                                                                       \
    "asr r12, r12, r11\n\t"                                                                               \
    "ssat " a ", #8, r12\n\t"                                                                             \
    "mov r6, r8\n\t"                                                                                      \
    "mov r12, r9\n\t"                                                                                     \
    "smlal r6, r12, " b ", r10\n\t"                                                                       \
    "asr r12, r12, r11\n\t"                                                                               \
    "ssat " b ", #8, r12\n\t"                                                                             \
    "smlal r8, r9, " c ", r10\n\t"                                                                        \
    "asr r9, r9, r11\n\t"                                                                                 \
    "ssat " c ", #8, r9\n\t"

/* The pair's six outputs: pixel p's at r8 + p cout (r9: cout). */
#define MCU_NX3_STORE                                                                                     \
    "add r10, r8, r9\n\t"                                                                                 \
    "add r11, r10, r9\n\t"                                                                                \
    "strb r0, [r8]\n\t"                                                                                   \
    "strb r1, [r8, #1]\n\t"                                                                               \
    "strb r2, [r10]\n\t"                                                                                  \
    "strb r3, [r10, #1]\n\t"                                                                              \
    "strb r4, [r11]\n\t"                                                                                  \
    "strb r5, [r11, #1]\n\t"

/* The three interior windows' columns from x on (mode 2 of the engine, three times: x advancing by dx,
 * the columns one after another from st->col), r6 the state; then x stored back. */
#define MCU_NX3_COLUMNS                                                                                   \
    "ldr r4, [r6, #4]\n\t"                                                                                \
    "ldr r12, [r6, #36]\n\t"                                                                              \
    "11:\n\t"                                                                                             \
    "ldr r0, [r6, #32]\n\t"                                                                               \
    MCU_NW_K3C3("40")                                                                                     \
    "ldrd r1, r2, [r6, #52]\n\t"                                                                          \
    "add r5, r5, r1\n\t"                                                                                  \
    "cmp r4, r2\n\t"                                                                                      \
    "bne 11b\n\t"                                                                                         \
    "str r5, [r6, #44]\n\t"

/* Threes of pixels: per three (while x != x_stop) the columns, then every channel pair (the stream's
 * words of a block: 4 biases, 14 tap pairs of 4 weight words from byte 16, the constants from byte 240),
 * one pair a pass, the outputs 3 cout on after each three. The loop, about 1 kB with the columns', fits
 * a 1 kB instruction cache (the STM32L4R5's ART, 32-byte lines: hence the alignment; a block's two pairs
 * unrolled, 1.4 kB, missed on every pass there). The state pointer stays in r7 (the columns read it from
 * r6, which the pairs take for a weight word; it waited on the stack, reloaded twice a pass). A pair's
 * constants end 264 bytes after the block's second pair starts (a block's first pair), or where the
 * next block starts (its second). */
static __attribute__((noinline, aligned(32))) void mcu_narrow_x3(mcu_narrow_x3_state *st)
{
    register mcu_narrow_x3_state *s __asm__("r7") = st;
    __asm__ volatile(
        "10:\n\t"
        "ldrd r5, r1, [r7, #44]\n\t"
        "cmp r5, r1\n\t"
        "beq 12f\n\t"
        "mov r6, r7\n\t"
        MCU_NX3_COLUMNS
        "12:\n\t"
        "ldr lr, [r7, #28]\n\t"
        "1:\n\t"
        "ldr r12, [r7, #4]\n\t"
        "ldrd r0, r1, [lr], #16\n\t"
        MCU_NX3_PAIR
        "ldr r8, [r7, #24]\n\t"
        "add lr, lr, r8\n\t"
        MCU_NX3_RQ("r0", "r2", "r4")
        MCU_NX3_RQ("r1", "r3", "r5")
        "ldrd r8, r9, [r7, #8]\n\t"
        MCU_NX3_STORE
        "ldr r10, [r7, #24]\n\t"
        "add r8, r8, #2\n\t"
        "cmp r10, #224\n\t"
        "it eq\n\t"
        "subeq lr, lr, #264\n\t"
        "eor r10, r10, #(224 ^ 248)\n\t"
        "str r8, [r7, #8]\n\t"
        "str r10, [r7, #24]\n\t"
        "ldr r11, [r7, #16]\n\t"
        "cmp r8, r11\n\t"
        "bne 1b\n\t"
        /* the next three, if any: its outputs from y_end + 2 cout */
        "ldrd r0, r1, [r7, #44]\n\t"
        "cmp r0, r1\n\t"
        "beq 2f\n\t"
        "ldr r9, [r7, #12]\n\t"
        "add r8, r8, r9, lsl #1\n\t"
        "add r10, r8, r9\n\t"
        "str r8, [r7, #8]\n\t"
        "str r10, [r7, #16]\n\t"
        "b 10b\n\t"
        "2:\n\t"
        : "+r"(s)
        :
        : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
}
#undef MCU_NX3_COLUMNS
#undef MCU_NX3_TAP
#undef MCU_NX3_PAIR
#undef MCU_NX3_RQ
#undef MCU_NX3_STORE
#else
/* The passes in C, with the same state and steps. */
static void mcu_narrow_x3(mcu_narrow_x3_state *st)
{
    for (;;) {
        if (st->x != st->x_stop) {
            for (int32_t i = 0; i < 3; ++i, st->x += st->dx) {
                mcu_narrow_col_k3c3(st->x, st->step, st->off2, st->zp4, st->col + i * MCU_NARROW_X3_TAPS);
            }
        }
        st->pair = st->blocks;
        while (st->y != st->y_end) {
            const int32_t *rq = st->pair + 4 + st->rq / 4; /* the pair's weights start 4 words after its biases */
            for (int32_t px = 0; px < 3; ++px) {
                for (int32_t ch = 0; ch < 2; ++ch) {
                    uint32_t acc = (uint32_t)st->pair[ch];
                    for (int32_t t = 0; t < MCU_NARROW_X3_TAPS / 2; ++t) {
                        const uint32_t x = mcu_load_u32(st->col + px * MCU_NARROW_X3_TAPS + 2 * t);
                        acc = mcu_smlad(x, (uint32_t)st->pair[4 + 4 * t + ch], acc);
                    }
                    st->y[px * st->cout + ch] = (int8_t)mcu_narrow_rq_s8(mcu_u32_to_s32(acc), rq + 4 * ch);
                }
            }
            st->y += 2;
            st->pair = (const int32_t *)((const int8_t *)st->pair + (st->rq == 224 ? 8 : st->skip));
            st->rq ^= 224 ^ 248;
        }
        if (st->x == st->x_stop) {
            return;
        }
        st->y += 2 * st->cout;
        st->y_end = st->y + st->cout;
    }
}
#endif

/* `threes` > 0 threes of interior windows, the first at x (rows st->step apart, the next dx bytes on),
 * their columns built in the pass; or none (threes 0): the three pixels whose columns are in st->col.
 * The first output at y. */
static inline void mcu_narrow_x3_run(mcu_narrow_x3_state *st, const int8_t *x, int32_t dx, int32_t threes, int8_t *y)
{
    st->rq = 224;
    st->y = y;
    st->y_end = y + st->cout;
    st->x = x;
    st->x_stop = threes > 0 ? x + 3 * threes * dx : x;
    st->dx = dx;
    st->col_end = st->col + 3 * MCU_NARROW_X3_TAPS;
    mcu_narrow_x3(st);
}

/* The three pixels whose columns are in st->col, the first output at y. */
static inline void mcu_narrow_x3_flush(mcu_narrow_x3_state *st, int8_t *y)
{
    mcu_narrow_x3_run(st, NULL, 0, 0, y);
}

/* Pixel ow's column into the k-th place (0 to 2), from the window at src or, without one (a border
 * window), from its patch; the three pixels run once the third is in (y: the first one's output).
 * Returns the places taken. */
static inline int32_t mcu_narrow_x3_put(mcu_narrow_x3_state *st, const mcu_conv2d_s8_params *p, const int8_t *x_n,
                                        int32_t ih0, int32_t ow, int8_t *patch, const int8_t *src, int32_t k,
                                        int8_t *y)
{
    int16_t *cw = st->col + k * MCU_NARROW_X3_TAPS;
    if (src != NULL) {
        mcu_narrow_col_k3c3(src, st->step, st->off2, st->zp4, cw);
    } else {
        mcu_narrow_k3c3_patch(p, x_n, ih0, ow * p->stride_w - p->pad_left, patch);
        mcu_narrow_col_k3c3(patch, 9, st->off2, st->zp4, cw);
    }
    if (k < 2) {
        return k + 1;
    }
    mcu_narrow_x3_flush(st, y);
    return 0;
}
#endif /* MCU_PACKED_NARROW_K3C3 */

#if MCU_PACKED_NARROW_PARTS
#ifndef MCU_PIXEL4_STREAM_MIN
#define MCU_PIXEL4_STREAM_MIN 8192 /* gemm_s8_dsp.h's, which defines it for the native loops only */
#endif
/* Pixels whose columns wait in a buffer for the stream's parts (mcu_narrow_parts_flush), at most. */
#define MCU_NARROW_PARTS_MAX 32

/* The buffered pixels' outputs, the stream by parts: each part (at most a way of the two-way cache the weights
 * share with the code, MCU_PIXEL4_STREAM_MIN / 2 bytes) for every buffered pixel, so that no set holds two of the
 * part's lines beside the loop's; the parts forward and backward in turn, a group starting on the part the last
 * one left cached. */
static void mcu_narrow_parts_flush(mcu_narrow_state *st, const int16_t *cols, int32_t stride, int8_t *const *ys,
                                   int32_t n, int32_t part, int back)
{
    const int32_t *blocks = st->blocks;
    const int32_t cout = st->cout, words = mcu_packed_block_words(st->kp), nblocks = cout / 4;
    for (int32_t k = 0; k < nblocks; k += part) {
        const int32_t b0 = back ? ((nblocks - 1 - k) / part) * part : k;
        st->blocks = blocks + b0 * words;
        st->cout = 4 * (nblocks - b0 < part ? nblocks - b0 : part);
        for (int32_t q = 0; q < n; ++q) {
            st->col = cols + q * stride;
            mcu_narrow_pixel(st, ys[q] + 4 * b0);
        }
    }
    st->blocks = blocks;
    st->cout = cout;
}
#endif

/* The layer (mcu_narrow_applies, pixels in forward order), `blocks` after the stream's header. `group`: the
 * stream's FLAG_GROUP (its weights wait behind a cache the code shares, the U575's ICACHE); `buf` of `buf_taps`
 * int16 holds the columns of the pixels that share each read of a part of a stream over a way (else unused). */
static inline void mcu_conv_narrow_s8(const mcu_conv2d_s8_params *p, const int8_t *input, const int32_t *blocks,
                                      int8_t *output, int32_t kp, int direction, int group, int16_t *buf,
                                      int32_t buf_taps)
{
#if MCU_PACKED_NARROW_K3C3
    _Alignas(8) int16_t col[3 * MCU_NARROW_X3_TAPS]; /* one column, or mcu_narrow_x3's three */
    _Static_assert(3 * MCU_NARROW_X3_TAPS >= MCU_NARROW_TAPS_MAX, "the narrow column");
#else
    _Alignas(8) int16_t col[MCU_NARROW_TAPS_MAX];
#endif
    _Alignas(4) int8_t raw[MCU_NARROW_TAPS_MAX];
    _Alignas(4) int8_t patch[28]; /* a border 3x3x3 window and one byte the column's loads read */
    const mcu_shape4 in = p->input, out = p->output;
    const int32_t c = in.c;
    const int32_t off = p->input_offset;
    mcu_narrow_state st;
    st.y = output;
    st.y_end = output;
    st.min4 = ((uint32_t)p->act_min & 0xFFu) * 0x01010101u;
    st.max4 = ((uint32_t)p->act_max & 0xFFu) * 0x01010101u;
    st.col = col;
    st.entry = (uint32_t)(12 - kp / 4);
    st.blocks = blocks;
    st.cout = out.c;
    st.x = input;
    st.x_stop = input;
    st.dx = 0;
    st.dy = 0;
    st.off2 = mcu_offset_pair(off);
    st.step = p->dilation_h * in.w * c; /* between window rows */
    st.zp4 = ((uint32_t)-off & 0xFFu) << 24;
    st.mode = 0;
    st.kp = kp;
    st.act_min = p->act_min;
    st.act_max = p->act_max;
    st.clamp = p->act_min > -128 || p->act_max < 127;
    const int pointwise = p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                          p->pad_top == 0 && p->pad_left == 0 && out.h == in.h && out.w == in.w;
    if (pointwise && c % 4 == 0) { /* pixels are runs of c bytes in and out, kp == c */
        const int64_t pixels = (int64_t)in.n * in.h * in.w;
        if (direction == 1) { /* each pixel's input is in the column before its output is written */
            mcu_narrow_run(&st, 1, input + (pixels - 1) * c, output + (pixels - 1) * out.c, pixels, -c, -out.c);
        } else {
            mcu_narrow_run(&st, 1, input, output, pixels, c, out.c);
        }
        return;
    }
    const int32_t kh = p->kernel_h, kw = p->kernel_w;
    const int32_t span = (kh - 1) * p->dilation_h + 1; /* input rows a window covers */
    const int32_t run = kw * c;                        /* a window row's bytes (dilation_w 1) */
    mcu_fill_s8(raw + kh * run, (int8_t)-off, kp - kh * run); /* taps past the window: 0 in the column */
    const int gather = p->dilation_w == 1;
    /* others: a pixel at a time (a 3x1 window of 9 channels also has 9-byte rows, but its border patch
     * would be read as three pixels of 3 channels) */
    const int k3c3 = MCU_PACKED_NARROW_K3C3 && gather && kh == 3 && kw == 3 && c == 3;
#if MCU_PACKED_NARROW_K3C3
    const int x3 = k3c3 && !st.clamp && kp == MCU_NARROW_X3_TAPS;
    mcu_narrow_x3_state x3s = {.col = col,
                               .cout = out.c,
                               .skip = 4 * mcu_packed_block_words(kp) - 8,
                               .blocks = blocks,
                               .step = st.step,
                               .off2 = st.off2,
                               .zp4 = st.zp4};
#endif
    /* output columns whose window lies inside the input's width: ow_lo <= ow < ow_hi */
    int32_t ow_lo = 0, ow_hi = 0;
    if (gather) {
        ow_lo = (p->pad_left + p->stride_w - 1) / p->stride_w;
        ow_hi = in.w - kw + p->pad_left >= 0 ? (in.w - kw + p->pad_left) / p->stride_w + 1 : 0;
        ow_hi = ow_hi < out.w ? ow_hi : out.w;
        ow_lo = ow_lo < ow_hi ? ow_lo : ow_hi;
    }
#if MCU_PACKED_NARROW_PARTS
    /* A stream over a way of a two-way cache that also holds the loop re-read by every pixel loses both lines of each
     * set it covers twice wherever the loop has a line there (ds_cnn's 10x4 layer, 6,416 B): where the weights wait
     * behind such a cache, the pixels' columns wait in `buf` and the stream runs by parts of at most a way for all of
     * them. Forward (direction 0) no pixel's output lands on a later pixel's input, and every column of a group is
     * built before any of its outputs is written: the one-pixel order's overlaps stay safe. */
    const int32_t nblocks = out.c / 4, words = mcu_packed_block_words(kp), stride = (kp + 3) & ~3;
    const int32_t fit = MCU_PIXEL4_STREAM_MIN / 2 / (4 * words);
    const int32_t most = fit < 1 ? 1 : fit, nparts = (nblocks + most - 1) / most;
    const int32_t part = (nblocks + nparts - 1) / nparts;
    int32_t gmax = buf_taps / stride;
    gmax = gmax < MCU_NARROW_PARTS_MAX ? gmax : MCU_NARROW_PARTS_MAX;
    const int parts = group && direction == 0 && !k3c3 && nparts > 1 && gmax >= 2;
    int8_t *ys[MCU_NARROW_PARTS_MAX];
    int32_t nq = 0;
    int back = 0;
#else
    (void)group;
    (void)buf;
    (void)buf_taps;
#endif
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * c;
        int8_t *y_n = output + (int64_t)b * out.h * out.w * out.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            const int rows_in = gather && ih0 >= 0 && ih0 + span <= in.h;
            const int32_t lo = rows_in ? ow_lo : out.w, hi = rows_in ? ow_hi : out.w;
            int8_t *y = y_n + (int64_t)oh * out.w * out.c;
#if MCU_PACKED_NARROW_K3C3
            if (x3) { /* every window's column, interior or border, then the pixels by threes */
                const int32_t dx = p->stride_w * c;
                const int8_t *src = x_n + ((int64_t)ih0 * in.w + lo * p->stride_w - p->pad_left) * c;
                int32_t k = 0, ow = 0;
                for (; ow < lo; ++ow) { /* the left border, then interior windows up to a whole three */
                    k = mcu_narrow_x3_put(&x3s, p, x_n, ih0, ow, patch, NULL, k, y + (ow - 2) * out.c);
                }
                for (; k != 0 && ow < hi; ++ow, src += dx) {
                    k = mcu_narrow_x3_put(&x3s, p, x_n, ih0, ow, patch, src, k, y + (ow - 2) * out.c);
                }
                const int32_t threes = (hi - ow) / 3; /* the interior by threes, in one run */
                if (threes > 0 && ow < hi) {
                    mcu_narrow_x3_run(&x3s, src, dx, threes, y + ow * out.c);
                    ow += 3 * threes;
                    src += 3 * threes * dx;
                }
                for (; ow < out.w; ++ow, src += dx) { /* the rest of the interior, the right border */
                    k = mcu_narrow_x3_put(&x3s, p, x_n, ih0, ow, patch, ow < hi ? src : NULL, k, y + (ow - 2) * out.c);
                }
                for (int32_t i = 0; i < k; ++i) { /* the row's last one or two */
                    st.col = col + i * MCU_NARROW_X3_TAPS;
                    mcu_narrow_pixel(&st, y + (out.w - k + i) * out.c);
                }
                st.col = col;
                continue;
            }
#endif
            for (int32_t ow = 0; ow < out.w; ++ow, y += out.c) {
                if (ow == lo && lo < hi && k3c3) { /* the row's interior windows in one run */
                    const int8_t *src = x_n + ((int64_t)ih0 * in.w + ow * p->stride_w - p->pad_left) * c;
                    mcu_narrow_run(&st, 2, src, y, hi - lo, p->stride_w * c, out.c);
                    y += (hi - lo - 1) * out.c;
                    ow = hi - 1;
                    continue;
                }
                if (k3c3) { /* a border window: its taps (zero-point outside) in 9-byte rows */
                    mcu_narrow_k3c3_patch(p, x_n, ih0, ow * p->stride_w - p->pad_left, patch);
                    const int32_t step = st.step;
                    st.step = 9;
                    mcu_narrow_run(&st, 2, patch, y, 1, 0, out.c);
                    st.step = step;
                    continue;
                }
#if MCU_PACKED_NARROW_PARTS
                int16_t *dst = parts ? buf + nq * stride : col;
#else
                int16_t *dst = col;
#endif
                if (ow >= lo && ow < hi && c % 4 != 0) {
                    /* an interior window of few channels: kh runs of kw * c bytes, then widened
                     * (raw's taps past the window hold the zero-point: filled above) */
                    const int8_t *src = x_n + ((int64_t)ih0 * in.w + ow * p->stride_w - p->pad_left) * c;
                    for (int32_t i = 0; i < kh; ++i, src += st.step) {
                        mcu_copy_run_s8(raw + i * run, src, run);
                    }
                    mcu_column_s8(raw, kp, off, dst);
                } else {
                    mcu_conv_column_s16(p, x_n, oh, ow, kp, dst, raw);
                }
#if MCU_PACKED_NARROW_PARTS
                if (parts) {
                    ys[nq++] = y;
                    if (nq == gmax) {
                        mcu_narrow_parts_flush(&st, buf, stride, ys, nq, part, back);
                        nq = 0;
                        back ^= 1;
                    }
                    continue;
                }
#endif
                mcu_narrow_pixel(&st, y);
            }
        }
    }
#if MCU_PACKED_NARROW_PARTS
    if (nq > 0) {
        mcu_narrow_parts_flush(&st, buf, stride, ys, nq, part, back);
    }
#endif
}

#undef MCU_NW_K3C3 /* defined for the native engine and the by-threes pass */
#undef MCU_NW_COL8
#endif /* MCU_PACKED_NARROW */

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_CONV_NARROW_S8_DSP_H */
