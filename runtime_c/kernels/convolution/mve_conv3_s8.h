/* Helium (MVE) convolution (groups 1, dilation 1) for input channel counts that are multiples of 16:
 * three output pixels times two output channels per block of dot products. Internal: static inline
 * only; defines nothing unless MCU_S8_MVE.
 *
 * VMLADAVA accumulates into even general registers, so a block holds at most six sums; three pixels
 * by two channels load 3 + 2 vectors per 16 taps for 6 VMLADAVAs (the four-channel dot of one pixel,
 * mcu_mve_dot4, loads 5 for 4). The three pixels' windows are gathered (im2col, raw int8 as in
 * mve_s8.h, padded taps = the input zero-point, the input offset folded into the biases) into one
 * column interleaved by 16-byte chunks: chunk k of pixel j at (3k + j) * 16, so that one pointer
 * walks all three. With the input channels a multiple of 16 every chunk lies within one tap, and the
 * gather copies or fills whole chunks: the window's rows of the input straight from the input. */
#ifndef MCU_KERNELS_INTERNAL_MVE_CONV3_S8_H
#define MCU_KERNELS_INTERNAL_MVE_CONV3_S8_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/mve_s8.h"
#include "../common/window.h"


#if MCU_S8_MVE

/* Largest window (kh * kw * in_c bytes) of this path: three of them make its column on the stack. */
#define MCU_S8_MVE_CONV3_COL_MAX 576

/* `chunks` > 0 chunks of 16 bytes from src to dst, dst stepping 48 bytes (one interleaved column
 * slot); returns the next slot. */
static inline int8_t *mcu_mve_il_copy(int8_t *dst, const int8_t *src, int32_t chunks)
{
    __asm__ volatile("   dls lr, %[k]\n"
                     "1: vldrb.8 q0, [%[s]], #16\n"
                     "   vstrb.8 q0, [%[d]], #48\n"
                     "   le lr, 1b\n"
                     : [d] "+r"(dst), [s] "+r"(src)
                     : [k] "r"(chunks)
                     : "q0", "lr", "memory");
    return dst;
}

/* `chunks` > 0 slots of 16 bytes of zp, as mcu_mve_il_copy. */
static inline int8_t *mcu_mve_il_fill(int8_t *dst, int8x16_t zp, int32_t chunks)
{
    __asm__ volatile("   dls lr, %[k]\n"
                     "1: vstrb.8 %q[z], [%[d]], #48\n"
                     "   le lr, 1b\n"
                     : [d] "+r"(dst)
                     : [k] "r"(chunks), [z] "w"(zp)
                     : "lr", "memory");
    return dst;
}

/* `rows` > 0 runs of `chunks` > 0 chunks, the runs `step` bytes apart in src, into slot dst as
 * mcu_mve_il_copy: a window inside the input. */
static inline void mcu_mve_il_rows(int8_t *dst, const int8_t *src, int32_t chunks, int32_t rows, int32_t step)
{
    __asm__ volatile("2: dls lr, %[k]\n"
                     "1: vldrb.8 q0, [%[s]], #16\n"
                     "   vstrb.8 q0, [%[d]], #48\n"
                     "   le lr, 1b\n"
                     "   add %[s], %[s], %[st]\n"
                     "   subs %[r], %[r], #1\n"
                     "   bne 2b\n"
                     : [d] "+r"(dst), [s] "+r"(src), [r] "+r"(rows)
                     : [k] "r"(chunks), [st] "r"(step - chunks * 16)
                     : "q0", "lr", "cc", "memory");
}

/* The windows of three output pixels inside the input, their runs `ps` bytes apart: `rows` > 0 runs
 * of `chunks` > 0 chunks each, `step` bytes apart, into the three slots of col. */
static inline void mcu_mve_il_rows3(int8_t *col, const int8_t *src, int32_t ps, int32_t chunks, int32_t rows,
                                    int32_t step)
{
    const int8_t *s1 = src + ps;
    const int8_t *s2 = s1 + ps;
    const int32_t adv = step - chunks * 16;
    __asm__ volatile("2: dls lr, %[k]\n"
                     "1: vldrb.8 q0, [%[s0]], #16\n"
                     "   vldrb.8 q1, [%[s1]], #16\n"
                     "   vldrb.8 q2, [%[s2]], #16\n"
                     "   vstrb.8 q1, [%[d], #16]\n"
                     "   vstrb.8 q2, [%[d], #32]\n"
                     "   vstrb.8 q0, [%[d]], #48\n"
                     "   le lr, 1b\n"
                     "   add %[s0], %[s0], %[adv]\n"
                     "   add %[s1], %[s1], %[adv]\n"
                     "   add %[s2], %[s2], %[adv]\n"
                     "   subs %[r], %[r], #1\n"
                     "   bne 2b\n"
                     : [d] "+r"(col), [s0] "+r"(src), [s1] "+r"(s1), [s2] "+r"(s2), [r] "+r"(rows)
                     : [k] "r"(chunks), [adv] "r"(adv)
                     : "q0", "q1", "q2", "lr", "cc", "memory");
}

/* The window of output pixel (oh, ow) into interleaved slot `dst` (see the header comment): per kernel
 * row the taps before the input, inside it (one run of the input row) and after it. */
static inline void mcu_mve_il_window(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow,
                                     int8x16_t zp, int8_t *dst)
{
    const mcu_shape4 in = p->input;
    const int32_t kc = in.c / 16; /* chunks per tap */
    const int32_t kw = p->kernel_w;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    if (ih0 >= 0 && iw0 >= 0 && ih0 + p->kernel_h <= in.h && iw0 + kw <= in.w) {
        mcu_mve_il_rows(dst, x_n + ((int64_t)ih0 * in.w + iw0) * in.c, kw * kc, p->kernel_h, in.w * in.c);
        return;
    }
    int32_t lo, hi;
    mcu_window_taps(iw0, kw, 1, in.w, &lo, &hi);
    for (int32_t i = 0; i < p->kernel_h; ++i) {
        const int32_t ih = ih0 + i;
        if (ih < 0 || ih >= in.h || hi <= lo) {
            dst = mcu_mve_il_fill(dst, zp, kw * kc);
            continue;
        }
        if (lo > 0) {
            dst = mcu_mve_il_fill(dst, zp, lo * kc);
        }
        dst = mcu_mve_il_copy(dst, x_n + ((int64_t)ih * in.w + iw0 + lo) * in.c, (hi - lo) * kc);
        if (hi < kw) {
            dst = mcu_mve_il_fill(dst, zp, (kw - hi) * kc);
        }
    }
}

/* Most output channels of this path: their packed parameters (mcu_mve_conv3_pair) live on the stack. */
#define MCU_S8_MVE_CONV3_OC_MAX 64

/* One pair of output channels c0, c1 as the group loop reads it: folded biases (three of each: the
 * six sums' start), then the multipliers and the (non-positive) shifts in the lane order (c0, c1, c0,
 * c1) of the loop's vectors. */
typedef struct {
    int32_t kb[6];
    int32_t m[4];
    int32_t s[4];
} mcu_mve_conv3_pair;

/* The loop's constants, read from memory where registers run out (offsets fixed in the assembly). */
typedef struct {
    int32_t iters;      /* 0: chunks of 16 taps per window */
    int32_t offset;     /* 4: output offset */
    int32_t n;          /* 8: window bytes */
    const int8_t *col;  /* 12: the interleaved column */
    const void *end;    /* 16: one past the last pair */
    int32_t out_c;      /* 20 */
    int32_t unused[2];  /* 24 */
    _Alignas(16) uint32_t ofs[4];  /* 32: the byte offsets (0, 1, out_c, out_c + 1) of the first vector's lanes */
    _Alignas(16) uint32_t ofs2[4]; /* 48: the second vector's (pixels 1 and 2), out_c more */
} mcu_mve_conv3_cfg;

/* The parts of mcu_mve_conv3_group's loop: the pair's start, one step of 16 taps, the pair's end. */
#define MCU_MVE_CONV3_HEAD                                                                                           \
    "2: ldrd %[a0], %[a1], [%[pk]], #8\n"                                                                            \
    "   ldrd %[a2], %[a3], [%[pk]], #8\n"                                                                            \
    "   ldrd %[a4], %[a5], [%[pk]], #8\n"                                                                            \
    "   ldr %[x], [%[cfg], #12]\n"                                                                                   \
    "   ldr lr, [%[cfg]]\n"                                                                                          \
    "   vldrb.8 q0, [%[x]]\n"                                                                                        \
    "   dls lr, lr\n"
/* Loads and multiply-accumulates alternate, so that each overlaps the one before (docs/cycles.md: a
 * vector memory instruction after a data-processing one and the other way round); the first pixel's
 * 16 taps of the next step are loaded at the end of this one (pre-indexed, moving x on), which in the
 * last step reads 16 bytes past the column, inside the stack buffer, and uses nothing of them. */
#define MCU_MVE_CONV3_STEP                                                                                           \
    "   vldrb.8 q3, [%[w0]], #16\n"                                                                                  \
    "   vmladava.s8 %[a0], q0, q3\n"                                                                                 \
    "   vldrb.8 q1, [%[x], #16]\n"                                                                                   \
    "   vmladava.s8 %[a1], q1, q3\n"                                                                                 \
    "   vldrb.8 q2, [%[x], #32]\n"                                                                                   \
    "   vmladava.s8 %[a2], q2, q3\n"                                                                                 \
    "   vldrb.8 q3, [%[w1]], #16\n"                                                                                  \
    "   vmladava.s8 %[a3], q0, q3\n"                                                                                 \
    "   vldrb.8 q0, [%[x], #48]!\n"                                                                                  \
    "   vmladava.s8 %[a4], q1, q3\n"                                                                                 \
    "   vmladava.s8 %[a5], q2, q3\n"
#define MCU_MVE_CONV3_TAIL                                                                                           \
    "   vmov q0[2], q0[0], %[a0], %[a1]\n"                                                                           \
    "   vmov q0[3], q0[1], %[a3], %[a4]\n"                                                                           \
    "   vmov q1[2], q1[0], %[a1], %[a2]\n"                                                                           \
    "   vmov q1[3], q1[1], %[a4], %[a5]\n"                                                                           \
    "   vldrw.u32 q2, [%[pk]]\n"                                                                                     \
    "   vqrdmulh.s32 q0, q0, q2\n"                                                                                   \
    "   vldrw.u32 q3, [%[pk], #16]\n"                                                                                \
    "   vqrdmulh.s32 q1, q1, q2\n"                                                                                   \
    "   adds %[pk], #32\n"                                                                                           \
    "   vand q2, q0, q3\n"                                                                                           \
    "   vshr.s32 q2, q2, #31\n"                                                                                      \
    "   vqadd.s32 q0, q0, q2\n"                                                                                      \
    "   vand q2, q1, q3\n"                                                                                           \
    "   vshr.s32 q2, q2, #31\n"                                                                                      \
    "   vqadd.s32 q1, q1, q2\n"                                                                                      \
    "   vrshl.s32 q0, q0, q3\n"                                                                                      \
    "   vrshl.s32 q1, q1, q3\n"                                                                                      \
    "   ldr %[a0], [%[cfg], #4]\n"                                                                                   \
    "   vqadd.s32 q0, q0, %[a0]\n"                                                                                   \
    "   vqadd.s32 q1, q1, %[a0]\n"                                                                                   \
    "   vqshl.s32 q0, q0, #24\n"                                                                                     \
    "   vldrw.u32 q2, [%[cfg], #32]\n"                                                                               \
    "   vqshl.s32 q1, q1, #24\n"                                                                                     \
    "   vldrw.u32 q3, [%[cfg], #48]\n"                                                                               \
    "   vshr.s32 q0, q0, #24\n"                                                                                      \
    "   vshr.s32 q1, q1, #24\n"                                                                                      \
    "   vstrb.32 q0, [%[y], q2]\n"                                                                                   \
    "   vstrb.32 q1, [%[y], q3]\n"                                                                                   \
    "   adds %[y], #2\n"                                                                                             \
    "   ldr %[a0], [%[cfg], #8]\n"                                                                                   \
    "   add %[w0], %[w0], %[a0]\n"                                                                                   \
    "   add %[w1], %[w1], %[a0]\n"                                                                                   \
    "   ldr %[a0], [%[cfg], #16]\n"                                                                                  \
    "   cmp %[pk], %[a0]\n"                                                                                          \
    "   bne 2b\n"

/* Every output channel of the three pixels in col (interleaved, see the header comment), pairs of
 * channels in order: the six dot products (three pixels by two weight rows, 16 taps per step), the
 * requantization of mcu_mve_requantize without left shift (every shift <= 0) on the lanes (p0 c0,
 * p0 c1, p1 c0, p1 c1) and (p1 c0, p1 c1, p2 c0, p2 c1) (pixel 1 twice: same bytes), the offset added
 * with saturation and the clamp to [-128, 127] as a saturating shift left by 24 and back (the caller
 * takes this path only for that activation range), and byte scatters to y (offsets 0, 1, out_c,
 * out_c + 1) and y + out_c (cfg->ofs, cfg->ofs2). One assembly loop for all pairs: every general register
 * is in use, so the constants come from cfg and the six sums' registers double as temporaries; it keeps
 * to q0..q3, which the calling convention does not preserve, so that a call saves no vector registers
 * (q4..q7 cost a VPUSH and VPOP of 16 words per group). */
static inline void mcu_mve_conv3_group(const mcu_mve_conv3_cfg *cfg, const mcu_mve_conv3_pair *pk,
                                       const int8_t *w, int8_t *y, int unrolled)
{
    const int8_t *w1 = w + cfg->n;
    const int8_t *x;
    int32_t a0, a1, a2, a3, a4, a5;
    if (unrolled) { /* cfg->iters counts steps of 48 taps: one loop end per three steps */
        __asm__ volatile(MCU_MVE_CONV3_HEAD "1:" MCU_MVE_CONV3_STEP MCU_MVE_CONV3_STEP MCU_MVE_CONV3_STEP
                         "   le lr, 1b\n" MCU_MVE_CONV3_TAIL
                         : [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [a4] "=&Te"(a4),
                           [a5] "=&Te"(a5), [x] "=&r"(x), [w0] "+r"(w), [w1] "+r"(w1), [pk] "+r"(pk), [y] "+r"(y)
                         : [cfg] "r"(cfg)
                         : "q0", "q1", "q2", "q3", "lr", "cc", "memory");
    } else {
        __asm__ volatile(MCU_MVE_CONV3_HEAD "1:" MCU_MVE_CONV3_STEP "   le lr, 1b\n" MCU_MVE_CONV3_TAIL
                         : [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [a4] "=&Te"(a4),
                           [a5] "=&Te"(a5), [x] "=&r"(x), [w0] "+r"(w), [w1] "+r"(w1), [pk] "+r"(pk), [y] "+r"(y)
                         : [cfg] "r"(cfg)
                         : "q0", "q1", "q2", "q3", "lr", "cc", "memory");
    }
}

/* 1 when this path applies to the layer: input channels a multiple of 16, dilation 1, an even number
 * of at most MCU_S8_MVE_CONV3_OC_MAX output channels, a window of at most MCU_S8_MVE_CONV3_COL_MAX
 * bytes, the full int8 activation range and no positive shift. */
static inline int mcu_mve_conv3_applies(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q)
{
    return p->groups == 1 && p->input.c % 16 == 0 && p->dilation_h == 1 && p->dilation_w == 1 &&
           p->output.c % 2 == 0 && p->output.c <= MCU_S8_MVE_CONV3_OC_MAX &&
           p->kernel_h * p->kernel_w * p->input.c <= MCU_S8_MVE_CONV3_COL_MAX && p->act_min == -128 &&
           p->act_max == 127 && mcu_mve_no_left_shift(q, p->output.c);
}

/* The windows of the three output pixels from (*oh, *ow) on (memory order) into the interleaved
 * column col; moves (*oh, *ow) past them. */
static inline void mcu_mve_conv3_windows(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t *oh, int32_t *ow,
                                         int8x16_t zp, int8_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t ih0 = *oh * p->stride_h - p->pad_top;
    const int32_t iw0 = *ow * p->stride_w - p->pad_left;
    if (*ow + 3 <= p->output.w && ih0 >= 0 && iw0 >= 0 && ih0 + p->kernel_h <= in.h &&
        iw0 + 2 * p->stride_w + p->kernel_w <= in.w) {
        /* three windows of one output row inside the input */
        mcu_mve_il_rows3(col, x_n + ((int64_t)ih0 * in.w + iw0) * in.c, p->stride_w * in.c, p->kernel_w * in.c / 16,
                         p->kernel_h, in.w * in.c);
        *ow += 3;
    } else {
        for (int32_t j = 0; j < 3; ++j) {
            mcu_mve_il_window(p, x_n, *oh, *ow, zp, col + 16 * j);
            if (++*ow == p->output.w) {
                *ow = 0;
                ++*oh;
            }
        }
    }
    if (*ow == p->output.w) {
        *ow = 0;
        ++*oh;
    }
}

/* The windows of the `count` (1 or 2) output pixels from pixel i (memory order) on into the slots of
 * col, the last one repeated in the slots left over (its outputs are computed twice). */
static inline void mcu_mve_conv3_part(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t i, int32_t count,
                                      int8x16_t zp, int8_t *col)
{
    for (int32_t j = 0; j < 3; ++j) {
        const int32_t k = i + (j < count ? j : count - 1);
        mcu_mve_il_window(p, x_n, k / p->output.w, k % p->output.w, zp, col + 16 * j);
    }
}

/* Fewest groups of three pixels in a call for which mcu_mve_conv3 copies the weights to the stack;
 * below, it reads them in place (see there). On mps3-an547's description (weights in a flash of 8
 * wait states per access, the stack in a TCM of none) the copy pays off in estimated cycles though
 * not in instructions: ResNet-8's prefix streamed one row a call (3 to 11 groups a call) took 8.09 M
 * cycles with this at 2, 8.22 M at 4 (3.96 M and 3.58 M instructions), 8.95 M at 8. A single group
 * is read in place: not measured; override per build where the weights live in memory without
 * wait states. */
#ifndef MCU_S8_MVE_CONV3_COPY_GROUPS
#define MCU_S8_MVE_CONV3_COPY_GROUPS 2
#endif

/* The folded biases of rows c0 .. c0 + cn - 1 (their n weights each from w) into their pairs' kb. */
static inline void mcu_mve_conv3_fold_pack(const int8_t *w, int32_t n, int32_t c0, int32_t cn, const int32_t *bias,
                                           int32_t input_offset, mcu_mve_conv3_pair *pack)
{
    for (int32_t r = c0; r < c0 + cn; ++r, w += n) {
        const uint32_t b = bias != NULL ? (uint32_t)bias[r] : 0u;
        const int32_t kb = mcu_u32_to_s32(b + (uint32_t)input_offset * (uint32_t)mcu_mve_sum_s8(w, n));
        int32_t *dst = pack[r / 2].kb + 3 * (r % 2);
        dst[0] = kb;
        dst[1] = kb;
        dst[2] = kb;
    }
}

/* Stack bytes of the column and the copy of weight rows: two groups' windows of the largest size and
 * two of its weight rows, or more windows of smaller layers (see mcu_mve_conv3). */
#define MCU_S8_MVE_CONV3_BUF (8 * MCU_S8_MVE_CONV3_COL_MAX)

/* mcu_mve_conv3's stack: the packed parameters of every pair and the column and copy; when groups of
 * windows share each copy of a block of rows, the whole of it holds one block's pairs, the windows
 * and the block. */
typedef struct {
    mcu_mve_conv3_pair pack[MCU_S8_MVE_CONV3_OC_MAX / 2];
    _Alignas(16) int8_t buf[MCU_S8_MVE_CONV3_BUF];
} mcu_mve_conv3_mem;

/* Bytes of the packed parameters of `rows` rows, rounded up to 16 (the windows after them are loaded
 * in vectors). */
static inline int32_t mcu_mve_conv3_pack_bytes(int32_t rows)
{
    return (rows / 2 * (int32_t)sizeof(mcu_mve_conv3_pair) + 15) / 16 * 16;
}

/* The pairs of rows c0 .. c0 + cn - 1 into pack[0 ..): their folded biases from kbias[c0 ..), their
 * multipliers and shifts. */
static inline void mcu_mve_conv3_block_pack(const mcu_per_channel_quant *q, const int32_t *kbias, int32_t c0,
                                            int32_t cn, mcu_mve_conv3_pair *pack)
{
    for (int32_t c = c0; c < c0 + cn; c += 2) {
        mcu_mve_conv3_pair *e = &pack[(c - c0) / 2];
        for (int32_t k = 0; k < 6; ++k) {
            e->kb[k] = kbias[c + k / 3];
        }
        for (int32_t k = 0; k < 4; ++k) {
            e->m[k] = q->multiplier[c + (k & 1)];
            e->s[k] = q->shift[c + (k & 1)];
        }
    }
}

/* The convolution (mcu_mve_conv3_applies), in groups of three output pixels (memory order; each
 * group's windows gathered before any of its outputs is written: the window overlap contract), the
 * last one or two pixels of an image through mcu_mve_matrix_block. The weights are read from a stack
 * copy, so that each is read once per call, or once per few groups, from wherever the model's
 * constants live (a flash with wait states on every access on some boards) rather than once per group:
 *  - when all rows fit the copy, or the caller's scratch (ctx) holds them, one copy;
 *  - else, when the output does not overlap the input, blocks of rows outer (each block copied once,
 *    the windows gathered again per block);
 *  - else (a block's outputs could overwrite input that a later block still reads) the windows of
 *    several groups are gathered first and every block of rows, copied per such super-group, runs
 *    over them. There the weights are read once per super-group, so the super-group is as large as
 *    the stack allows: the pairs' parameters are packed per block (into the space that holds all
 *    pairs on the other paths) and the biases folded from the first super-group's copies; the
 *    image's last one or two pixels write their outputs in place, the repeated slots' byte
 *    scatters aimed at the last pixel (the same values). */
static __attribute__((noinline, unused)) void mcu_mve_conv3(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                                           const mcu_per_channel_quant *q, const int8_t *input,
                                                           const int8_t *weight, const int32_t *bias, int8_t *output)
{
    /* The window gathers read the layer's shape per pixel; a model's parameters are constants, which
     * some boards keep in a flash with wait states on every access (mps3-an547: 8), the stack none. */
    const mcu_conv2d_s8_params local = *p;
    p = &local;
    mcu_mve_conv3_mem mem;
    int8_t *buf = mem.buf;
    mcu_mve_conv3_pair *pack = mem.pack;
    _Alignas(16) int32_t kbias[MCU_S8_MVE_CONV3_OC_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int32_t oc = out.c;
    const int32_t hw = out.h * out.w;
    const int32_t wmax = MCU_S8_MVE_CONV3_BUF - 3 * MCU_S8_MVE_CONV3_COL_MAX; /* bytes of the copy */
    int8_t *col = buf;
    int8_t *wbuf = buf + 3 * MCU_S8_MVE_CONV3_COL_MAX;
    /* A call of a single group reads every weight in place, once, in one block of all rows: the copy
     * (and the blocks' second gathers) would cost more than they save (MCU_S8_MVE_CONV3_COPY_GROUPS). */
    const int copy = in.n * ((hw + 2) / 3) >= MCU_S8_MVE_CONV3_COPY_GROUPS;
    /* the planner's scratch for every row (mcu/backends/portable/conv.py mve_conv3_scratch_bytes) */
    const int scratch = copy && oc * n > wmax && ctx != NULL && ctx->buf != NULL && ctx->size >= oc * n;
    if (scratch) {
        wbuf = (int8_t *)ctx->buf;
    }
    /* every row in one block: the copy, made once, or in place */
    const int all = !copy || oc * n <= wmax || scratch;
    const int8_t *wst = copy ? wbuf : weight;
    if (all && copy) {
        mcu_mve_copy_s8(wbuf, weight, oc * n);
        weight = wbuf;
    }
    const uintptr_t i0 = (uintptr_t)input, o0 = (uintptr_t)output;
    const uintptr_t i1 = i0 + (uintptr_t)in.n * (uintptr_t)in.h * (uintptr_t)in.w * (uintptr_t)in.c;
    const uintptr_t o1 = o0 + (uintptr_t)in.n * (uintptr_t)hw * (uintptr_t)oc;
    /* Blocks of rows outer (one image, output apart from the input): each block's biases folded from
     * its copy, so that the weights are read once from where they live, not twice. */
    const int late = !all && in.n == 1 && (o1 <= i0 || i1 <= o0);
    const int grouped = !all && !(o1 <= i0 || i1 <= o0); /* super-groups (see above) */
    if (!late && !grouped) {
        mcu_mve_fold_bias(weight, n, oc, bias, p->input_offset, kbias);
    }
    for (int32_t c = 0; !grouped && c < oc; c += 2) {
        mcu_mve_conv3_pair *e = &pack[c / 2];
        for (int32_t k = 0; !late && k < 6; ++k) {
            e->kb[k] = kbias[c + k / 3];
        }
        for (int32_t k = 0; k < 4; ++k) {
            e->m[k] = q->multiplier[c + (k & 1)];
            e->s[k] = q->shift[c + (k & 1)];
        }
    }
    const int unrolled = (n / 16) % 3 == 0;
    const int8x16_t zp = vdupq_n_s8((int8_t)-p->input_offset);
    const int32_t wn = 3 * n; /* one group's windows */
    mcu_mve_conv3_cfg cfg = {unrolled ? n / 48 : n / 16, p->output_offset, n, col, pack, oc, {0, 0},
                             {0, 1, (uint32_t)oc, (uint32_t)oc + 1u},
                             {(uint32_t)oc, (uint32_t)oc + 1u, 2u * (uint32_t)oc, 2u * (uint32_t)oc + 1u}};
    /* The last one or two pixels of an image: a group of three whose empty slots repeat the last
     * window, its outputs to `part` (same pixel stride) and then copied out. `part` takes the folded
     * biases' place: the groups read them from `pack`, and only the other way of computing those
     * pixels (mcu_mve_matrix_block, never in the same call) reads kbias after this point. */
    int8_t *part = (int8_t *)kbias; /* 3 * MCU_S8_MVE_CONV3_OC_MAX bytes of 4 * MCU_S8_MVE_CONV3_OC_MAX */
    if (all || o1 <= i0 || i1 <= o0) {
        const int32_t rows = all ? oc : wmax / n / 2 * 2;
        for (int32_t c0 = 0; c0 < oc; c0 += rows) {
            const int32_t cn = oc - c0 < rows ? oc - c0 : rows;
            if (!all) {
                mcu_mve_copy_s8(wbuf, weight + (int64_t)c0 * n, cn * n);
                if (late) {
                    mcu_mve_conv3_fold_pack(wbuf, n, c0, cn, bias, p->input_offset, pack);
                }
            }
            cfg.end = pack + (c0 + cn) / 2;
            for (int32_t b = 0; b < in.n; ++b) {
                const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
                int8_t *y_n = output + (int64_t)b * hw * oc;
                int32_t oh = 0, ow = 0, i = 0;
                for (; i + 3 <= hw; i += 3) {
                    mcu_mve_conv3_windows(p, x_n, &oh, &ow, zp, col);
                    mcu_mve_conv3_group(&cfg, pack + c0 / 2, wst, y_n + (int64_t)i * oc + c0, unrolled);
                }
                if (i == hw) {
                    continue;
                }
                if (rows == oc || in.n == 1) { /* `part` holds this image's channels until the last block */
                    mcu_mve_conv3_part(p, x_n, i, hw - i, zp, col);
                    mcu_mve_conv3_group(&cfg, pack + c0 / 2, wst, part + c0, unrolled);
                    if (c0 + cn == oc) {
                        mcu_mve_copy_s8(y_n + (int64_t)i * oc, part, (hw - i) * oc);
                    }
                } else if (c0 + cn == oc) {
                    for (int32_t j = i; j < hw; ++j) {
                        mcu_mve_im2col_s8(p, x_n, j / out.w, j % out.w, col + (j - i) * n);
                    }
                    mcu_mve_matrix_block(col, hw - i, n, oc, weight, kbias, q, p->output_offset, p->act_min,
                                         p->act_max, y_n + (int64_t)i * oc);
                }
            }
        }
        return;
    }
    /* the most groups whose windows leave room for two rows of the copy and their pair (n <= 576: at
     * least three), then as many rows as fit */
    int8_t *pool = (int8_t *)&mem;
    const int32_t pool_bytes = (int32_t)sizeof mem;
    const int32_t groups = (pool_bytes - mcu_mve_conv3_pack_bytes(2) - 2 * n) / wn;
    int32_t rows = 2;
    while (rows + 2 <= oc && mcu_mve_conv3_pack_bytes(rows + 2) + groups * wn + (rows + 2) * n <= pool_bytes) {
        rows += 2;
    }
    col = pool + mcu_mve_conv3_pack_bytes(rows);
    wbuf = col + groups * wn;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        int8_t *y_n = output + (int64_t)b * hw * oc;
        int32_t oh = 0, ow = 0, i = 0;
        while (i < hw) {
            const int32_t full = (hw - i) / 3;
            const int32_t g = full < groups ? full : groups;
            const int32_t rest = g < groups ? hw - i - 3 * g : 0; /* the image's last pixels, when they fit */
            for (int32_t k = 0; k < g; ++k) {
                mcu_mve_conv3_windows(p, x_n, &oh, &ow, zp, col + k * wn);
            }
            if (rest > 0) {
                mcu_mve_conv3_part(p, x_n, i + 3 * g, rest, zp, col + g * wn);
            }
            for (int32_t c0 = 0; c0 < oc; c0 += rows) {
                const int32_t cn = oc - c0 < rows ? oc - c0 : rows;
                mcu_mve_copy_s8(wbuf, weight + (int64_t)c0 * n, cn * n);
                if (b == 0 && i == 0) {
                    mcu_mve_fold_bias(wbuf, n, cn, bias != NULL ? bias + c0 : NULL, p->input_offset, kbias + c0);
                }
                mcu_mve_conv3_block_pack(q, kbias, c0, cn, mem.pack);
                cfg.end = mem.pack + cn / 2;
                for (int32_t k = 0; k < g; ++k) {
                    cfg.col = col + k * wn;
                    mcu_mve_conv3_group(&cfg, mem.pack, wbuf, y_n + (int64_t)(i + 3 * k) * oc + c0, unrolled);
                }
                if (rest > 0) {
                    /* slots past the image repeat its last pixel: their scatters go to that pixel */
                    const uint32_t last = rest == 2 ? (uint32_t)oc : 0u;
                    cfg.ofs[2] = last;
                    cfg.ofs[3] = last + 1u;
                    cfg.ofs2[0] = last;
                    cfg.ofs2[1] = last + 1u;
                    cfg.ofs2[2] = last;
                    cfg.ofs2[3] = last + 1u;
                    cfg.col = col + g * wn;
                    mcu_mve_conv3_group(&cfg, mem.pack, wbuf, y_n + (int64_t)(i + 3 * g) * oc + c0, unrolled);
                    cfg.ofs[2] = (uint32_t)oc;
                    cfg.ofs[3] = (uint32_t)oc + 1u;
                    cfg.ofs2[0] = (uint32_t)oc;
                    cfg.ofs2[1] = (uint32_t)oc + 1u;
                    cfg.ofs2[2] = 2u * (uint32_t)oc;
                    cfg.ofs2[3] = 2u * (uint32_t)oc + 1u;
                }
            }
            i += 3 * g + rest;
        }
    }
}

#undef MCU_MVE_CONV3_HEAD
#undef MCU_MVE_CONV3_STEP
#undef MCU_MVE_CONV3_TAIL

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_CONV3_S8_H */
