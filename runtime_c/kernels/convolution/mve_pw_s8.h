/* Helium (MVE) 1x1 convolution: four output channels times two pixels per pass, so that every
 * 16-byte load feeds two VMLADAVAs (a weight row's chunk serves both pixels, a pixel's chunk all
 * four rows): 6 loads and 8 multiply-accumulates per 16 taps instead of 5 and 4 one pixel at a time.
 * Internal: static inline only; used by mcu_conv2d_1x1_s8.c.
 *
 * Eight accumulators need eight even registers for VMLADAVA (r0, r2, ..., r12 and lr), so lr cannot
 * count a low-overhead loop and the input comes from a column packed per pair of pixels (for each 16
 * taps: the first pixel's 16 bytes, then the second's; the last 16 of a row zero-padded): one pointer
 * walks both pixels. The five pointers (packed input, four weight rows) and the chunk counter take
 * the six odd registers. The padded taps are 0 in the column, and the weight rows' loads of the last
 * partial chunk are predicated (nothing past a row's end is read; inactive lanes load as 0): both
 * products of a padded tap are 0.
 *
 * Arithmetic as in mve_s8.h: raw int8 products modulo 2^32 on top of the folded biases (the input
 * offset times the row sums, mcu_mve_fold_bias), then mcu_mve_requantize's operations. */
#ifndef MCU_KERNELS_INTERNAL_MVE_PW_S8_H
#define MCU_KERNELS_INTERNAL_MVE_PW_S8_H

#include <stddef.h>
#include <stdint.h>

#include "../common/mve_s8.h"

#if MCU_S8_MVE

/* Bytes of packed input per block of pixels (a row takes its length rounded up to 16). */
#define MCU_MVE_PW_COL 2048
/* The longest rows (a block holds at least one pair: 2 * 1024 bytes). */
#define MCU_MVE_PW_N_MAX 1024
/* The last group's rows are copied, zero-padded to whole chunks, when they take at most this many
 * bytes (see mcu_mve_pw_block). */
#define MCU_MVE_PW_TAIL 256
/* Bytes of the stack copy of one group's four weight rows (each zero-padded to whole chunks): rows of
 * up to 256 values. */
#define MCU_MVE_PW_STAGE 1024

/* Pixels i and i + 1's rows of n values packed by 16 (see above) into col: 2 * round_up(n, 16) bytes;
 * x1 may equal x0 (a last, single pixel). `back`: the chunks in reverse order (the pair loop walks the
 * weight rows backwards every other pair). */
static inline void mcu_mve_pw_pack2(const int8_t *x0, const int8_t *x1, int32_t n, int back, int8_t *col)
{
    const int32_t step = back ? -32 : 32;
    if (back) {
        col += (n - 1) / 16 * 32;
    }
    for (int32_t c = 0; c < n; c += 16, col += step) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - c));
        vstrbq_s8(col, vldrbq_z_s8(x0 + c, p));
        vstrbq_s8(col + 16, vldrbq_z_s8(x1 + c, p));
    }
}

/* What the pair loop keeps in memory (it has no register left for them); the loop reads the biases
 * with one LDM (kb at the address it is given) and the rest with one LDMDB below it. */
typedef struct {
    int32_t unused;
    int8_t *y;     /* the next pair's first output channel */
    int32_t out_c; /* output pixel stride */
    int32_t offset;
    int32_t kb[4]; /* the group's folded biases */
} mcu_mve_pw_state;

/* 16 taps of both packed pixels (q0, q1) times the four rows (r3, r5, r7, r9), forward (post-increment)
 * or backward (pre-decrement) along the rows; the column (r1) always forward. */
#define MCU_PW_FWD(r) "vldrb.8 q2, [" r "], #16\n"
#define MCU_PW_BWD(r) "vldrb.8 q2, [" r ", #-16]!\n"
/* The chunk's two column vectors are in q0, q1 when it starts (loaded before the pair's loop, or by the
 * chunk before): the next chunk's are loaded between the last multiply-accumulates, so that loads and
 * multiply-accumulates alternate and overlap (docs/cycles.md), moving r1 on by 32; the pair's last
 * chunk reads 32 bytes past the pair (slack after the column) and uses nothing of them. */
#define MCU_PW_CHUNK(LD)                                                                                            \
    LD("r3") "vmladava.s8 r0, q0, q2\n"                                                                            \
    "vmladava.s8 r8, q1, q2\n" LD("r5") "vmladava.s8 r2, q0, q2\n"                                                 \
    "vmladava.s8 r10, q1, q2\n" LD("r7") "vmladava.s8 r4, q0, q2\n"                                                \
    "vmladava.s8 r12, q1, q2\n" LD("r9") "vmladava.s8 r6, q0, q2\n"                                                \
    "vldrb.8 q0, [r1, #32]!\n"                                                                                     \
    "vmladava.s8 lr, q1, q2\n"                                                                                     \
    "vldrb.8 q1, [r1, #16]\n"
/* mcu_mve_requantize with left shift 0, then mcu_mve_matrix_block's clamp (lo, hi: the bounds minus
 * the offset, r8) and offset. */
#define MCU_PW_REQUANT(q)                                                                                           \
    "vqrdmulh.s32 " q ", " q ", %q[m]\n"                                                                           \
    "vand q2, " q ", %q[r]\n"                                                                                      \
    "vshr.s32 q2, q2, #31\n"                                                                                       \
    "vqadd.s32 " q ", " q ", q2\n"                                                                                 \
    "vrshl.s32 " q ", " q ", %q[r]\n"                                                                              \
    "vmax.s32 " q ", " q ", %q[lo]\n"                                                                              \
    "vmin.s32 " q ", " q ", %q[hi]\n"                                                                              \
    "vadd.i32 " q ", " q ", r8\n"
/* One pair: the accumulators from the biases, `LOOP` (label L) times the chunks `BODY`, then both
 * pixels' four outputs requantized and stored, and the output pointer moved two pixels on. */
#define MCU_PW_PAIR(L, BODY)                                                                                        \
    "vmov r11, lr, %q[c][2], %q[c][0]\n"                                                                           \
    "ldm lr, {r0, r2, r4, r6}\n"                                                                                   \
    "ldm lr, {r8, r10, r12, lr}\n"                                                                                \
    "vldrb.8 q0, [r1]\n"                                                                                          \
    "vldrb.8 q1, [r1, #16]\n" L ":\n" BODY "subs r11, r11, #1\n"                                                  \
    "bne " L "b\n"                                                                                                 \
    "vmov q0[2], q0[0], r0, r4\n"                                                                                  \
    "vmov q0[3], q0[1], r2, r6\n"                                                                                  \
    "vmov q1[2], q1[0], r8, r12\n"                                                                                 \
    "vmov q1[3], q1[1], r10, lr\n"                                                                                 \
    "vmov r0, r2, %q[c][2], %q[c][0]\n"                                                                            \
    "ldmdb r2, {r4, r6, r8}\n" MCU_PW_REQUANT("q0") MCU_PW_REQUANT("q1") "vstrb.32 q0, [r4]\n"                     \
    "add r4, r4, r6\n"                                                                                             \
    "vstrb.32 q1, [r4]\n"                                                                                          \
    "add r4, r4, r6\n"                                                                                             \
    "str r4, [r2, #-12]\n"                                                                                         \
    "vmov r0, r2, %q[c][3], %q[c][1]\n"                                                                            \
    "cmp r1, r0\n"
/* All pairs: forward along the rows, then backward (the rows end where they began), and so on, so that
 * no pass rewinds the four row pointers. */
#define MCU_PW_PAIRS(BODY_FWD, BODY_BWD)                                                                            \
    "1:\n" MCU_PW_PAIR("2", BODY_FWD) "beq 9f\n" MCU_PW_PAIR("3", BODY_BWD) "bne 1b\n"                             \
    "9:\n"

/* The operands of the pair loops: the registers are named (r0, r2, ..., lr accumulate, r1 the column,
 * r3, r5, r7, r9 the rows, r11 the loop count) because GCC cannot place fourteen asm operands itself. */
#define MCU_PW_OPERANDS                                                                                             \
    : "=&r"(a0), "=&r"(a1), "=&r"(a2), "=&r"(a3), "=&r"(b0), "=&r"(b1), "=&r"(b2), "=&r"(b3), "=&r"(k), "+r"(x), \
      "+r"(w0), "+r"(w1), "+r"(w2), "+r"(w3)                                                                       \
    : [c] "w"(c), [m] "w"(m), [r] "w"(right), [lo] "w"(lo), [hi] "w"(hi)                                          \
    : "q0", "q1", "q2", "cc", "memory"

/* All packed pairs of pixels from col (at least one; odd pairs packed backwards) for the four weight
 * rows w, w + stride, w + 2 stride, w + 3 stride, read in whole chunks of 16 (the caller guarantees
 * those bytes are inside the weight array: their products are 0 against the column's zero padding).
 * No shift of the group may be positive (no VQSHL: no vector register is left for it). c: lane 0 the
 * loop count per pair (the chunks, or half of them when `two`: two chunks per iteration), lane 1 the
 * end of the pairs in col, lane 2 &st->kb. (VMOV Rt, Rt2, Qd[2], Qd[0] moves lane 0 to Rt and lane 2
 * to Rt2, and back the same way.) */
static inline void mcu_mve_pw_group(const int8_t *col, const int8_t *w, int32_t stride, int two, int32x4_t c,
                                    int32x4_t m, int32x4_t right, int32x4_t lo, int32x4_t hi)
{
    register int32_t a0 __asm__("r0");
    register int32_t a1 __asm__("r2");
    register int32_t a2 __asm__("r4");
    register int32_t a3 __asm__("r6");
    register int32_t b0 __asm__("r8");
    register int32_t b1 __asm__("r10");
    register int32_t b2 __asm__("r12");
    register int32_t b3 __asm__("lr");
    register int32_t k __asm__("r11");
    register const int8_t *x __asm__("r1") = col;
    register const int8_t *w0 __asm__("r3") = w;
    register const int8_t *w1 __asm__("r5") = w + stride;
    register const int8_t *w2 __asm__("r7") = w + 2 * stride;
    register const int8_t *w3 __asm__("r9") = w + 3 * stride;
    if (two) {
        __asm__ volatile(MCU_PW_PAIRS(MCU_PW_CHUNK(MCU_PW_FWD) MCU_PW_CHUNK(MCU_PW_FWD),
                                      MCU_PW_CHUNK(MCU_PW_BWD) MCU_PW_CHUNK(MCU_PW_BWD)) MCU_PW_OPERANDS);
    } else {
        __asm__ volatile(MCU_PW_PAIRS(MCU_PW_CHUNK(MCU_PW_FWD), MCU_PW_CHUNK(MCU_PW_BWD)) MCU_PW_OPERANDS);
    }
}

/* acc + x . w_k (k < 4) for one packed pixel (16 bytes every 32, or every -32 when `back`) and rows of
 * n > 0 values: a tail-predicated loop as mcu_mve_dot4 (nothing past a row's end is read). */
static inline int32x4_t mcu_mve_pw_dot4x1(const int8_t *x, int back, const int8_t *w0, const int8_t *w1,
                                          const int8_t *w2, const int8_t *w3, int32_t n, int32x4_t acc)
{
    int32_t a0 = vgetq_lane_s32(acc, 0), a1 = vgetq_lane_s32(acc, 1);
    int32_t a2 = vgetq_lane_s32(acc, 2), a3 = vgetq_lane_s32(acc, 3);
#define MCU_PW_DOT1(XLD)                                                                                            \
    __asm__ volatile("   dlstp.8 lr, %[n]\n"                                                                       \
                     "1: " XLD "\n"                                                                                \
                     "   vldrb.8 q1, [%[w0]], #16\n"                                                               \
                     "   vmladava.s8 %[a0], q0, q1\n"                                                              \
                     "   vldrb.8 q1, [%[w1]], #16\n"                                                               \
                     "   vmladava.s8 %[a1], q0, q1\n"                                                              \
                     "   vldrb.8 q1, [%[w2]], #16\n"                                                               \
                     "   vmladava.s8 %[a2], q0, q1\n"                                                              \
                     "   vldrb.8 q1, [%[w3]], #16\n"                                                               \
                     "   vmladava.s8 %[a3], q0, q1\n"                                                              \
                     "   letp lr, 1b\n"                                                                            \
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3), [x] "+r"(x),              \
                       [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)                                  \
                     : [n] "r"(n)                                                                                  \
                     : "q0", "q1", "lr", "memory")
    if (back) {
        MCU_PW_DOT1("vldrb.8 q0, [%[x]], #-32");
    } else {
        MCU_PW_DOT1("vldrb.8 q0, [%[x]], #32");
    }
#undef MCU_PW_DOT1
    acc = vsetq_lane_s32(a0, acc, 0);
    acc = vsetq_lane_s32(a1, acc, 1);
    acc = vsetq_lane_s32(a2, acc, 2);
    return vsetq_lane_s32(a3, acc, 3);
}

/* mcu_mve_fold_bias four rows per pass (one load and one VADDVA per 16 values of a row, one loop
 * instruction per four rows' 16): kbias[r] = bias[r] + off * sum(w_r) modulo 2^32. */
static inline void mcu_mve_pw_fold_bias(const int8_t *weight, int32_t n, int32_t rows, const int32_t *bias,
                                        int32_t input_offset, int32_t *kbias)
{
    int32_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        const int8_t *w0 = weight + r * n;
        const int8_t *w1 = w0 + n;
        const int8_t *w2 = w1 + n;
        const int8_t *w3 = w2 + n;
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        __asm__ volatile("   dlstp.8 lr, %[n]\n"
                         "1: vldrb.8 q0, [%[w0]], #16\n"
                         "   vaddva.s8 %[s0], q0\n"
                         "   vldrb.8 q0, [%[w1]], #16\n"
                         "   vaddva.s8 %[s1], q0\n"
                         "   vldrb.8 q0, [%[w2]], #16\n"
                         "   vaddva.s8 %[s2], q0\n"
                         "   vldrb.8 q0, [%[w3]], #16\n"
                         "   vaddva.s8 %[s3], q0\n"
                         "   letp lr, 1b\n"
                         : [s0] "+Te"(s0), [s1] "+Te"(s1), [s2] "+Te"(s2), [s3] "+Te"(s3), [w0] "+r"(w0),
                           [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)
                         : [n] "r"(n)
                         : "q0", "lr", "memory");
        int32x4_t sum = vdupq_n_s32(s0);
        sum = vsetq_lane_s32(s1, sum, 1);
        sum = vsetq_lane_s32(s2, sum, 2);
        sum = vsetq_lane_s32(s3, sum, 3);
        /* 32-bit lanes wrap modulo 2^32 */
        const int32x4_t b = bias != NULL ? vldrwq_s32(bias + r) : vdupq_n_s32(0);
        vstrwq_s32(kbias + r, vmlaq_n_s32(b, sum, input_offset));
    }
    if (r < rows) {
        mcu_mve_fold_bias(weight + r * n, n, rows - r, bias != NULL ? bias + r : NULL, input_offset, kbias + r);
    }
}

/* Pixels [first, pixels) of a packed block (see mcu_mve_pw_block) one at a time for the `rest` (1..4)
 * output channels oc .. oc + rest - 1 (weight rows from w, ws bytes apart): any shift, rows of any
 * length. Not inlined: it keeps its registers out of the pair loop's function. */
static __attribute__((noinline, unused)) void
mcu_mve_pw_pixels(const int8_t *col, int32_t first, int32_t pixels, int32_t n, int32_t oc, int32_t rest,
                  const int8_t *w, int32_t ws, const int32_t *kb, const mcu_per_channel_quant *q,
                  int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y, int32_t out_c)
{
    const int32_t chunks = (n + 15) / 16;
    const int8_t *w1 = rest > 1 ? w + ws : w;
    const int8_t *w2 = rest > 2 ? w + 2 * ws : w;
    const int8_t *w3 = rest > 3 ? w + 3 * ws : w;
    const int32x4_t kbv = vldrwq_s32(kb); /* kb: the channels' folded biases, room for 4 */
    for (int32_t i = first; i < pixels; ++i) {
        const int back = (i / 2) % 2; /* odd pairs are packed backwards */
        const int8_t *x = col + (i / 2) * 32 * chunks + (back ? (chunks - 1) * 32 : 0) + (i % 2) * 16;
        const int32x4_t acc = mcu_mve_pw_dot4x1(x, back, w, w1, w2, w3, n, kbv);
        if (rest == 4) {
            mcu_mve_store4(acc, q, oc, output_offset, act_min, act_max, y + i * out_c);
        } else {
            mcu_mve_store_tail(acc, q, oc, rest, output_offset, act_min, act_max, y + i * out_c);
        }
    }
}

/* Four weight rows of n values from w (row stride n) into dst, each zero-padded to `chunks` * 16 bytes:
 * the pair loop then reads its weights from the stack (tightly coupled memory on the Cortex-M55
 * boards) rather than once per pair from wherever the model's constants live, which may be a flash
 * with wait states on every access. */
static inline void mcu_mve_pw_stage(const int8_t *w, int32_t n, int32_t chunks, int8_t *dst)
{
    for (int32_t r = 0; r < 4; ++r, w += n) {
        for (int32_t c = 0; c < 16 * chunks; c += 16, dst += 16) {
            vstrbq_s8(dst, vldrbq_z_s8(w + c, vctp8q((uint32_t)(n - c))));
        }
    }
}

/* The 1x1 convolution of `pixels` > 0 pixels packed in col by mcu_mve_pw_pack2 (pairs, odd pairs
 * backwards, then a last single pixel packed with itself), out_c outputs per pixel to y (pixel stride
 * out_c) from weight rows of n values and the folded biases kbias (room for a multiple of 4), or, when
 * kbias is NULL, folded here group by group from bias and input_offset. Output channels
 * outer, pairs inner (mcu_mve_pw_group) where it may: groups of four channels without a left shift:
 * from a stack copy of their rows when the block has two pairs or more (mcu_mve_pw_stage; the folded
 * biases are then summed from the copy), else in place where their whole-chunk reads stay inside the
 * weights, or from tail_w (the last four rows, each zero-padded to whole chunks; NULL when there is
 * none) when the last group's would pass the array's end; the rest, and a last single pixel, one pixel
 * at a time (mcu_mve_pw_pixels, from the copy when there is one). */
static __attribute__((noinline, unused)) void
mcu_mve_pw_block(const int8_t *col, int32_t pixels, int32_t n, int32_t out_c, const int8_t *weight,
                 const int8_t *tail_w, const int32_t *kbias, const int32_t *bias, int32_t input_offset,
                 const mcu_per_channel_quant *q, int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y)
{
    const int32x4_t lo = vdupq_n_s32(act_min - output_offset);
    const int32x4_t hi = vdupq_n_s32(act_max - output_offset);
    const int32_t chunks = (n + 15) / 16;
    const int32_t pairs = pixels / 2;
    const int two = chunks % 2 == 0;
    mcu_mve_pw_state st = {0, y, out_c, output_offset, {0, 0, 0, 0}};
    /* With two pairs or more every weight is read more than once: the group's rows are copied first. */
    _Alignas(16) int8_t stage[MCU_MVE_PW_STAGE];
    const int staged = pairs >= 2 && 64 * chunks <= MCU_MVE_PW_STAGE;
    _Alignas(16) int32_t kb4[4];
    int32x4_t c = vdupq_n_s32(two ? chunks / 2 : chunks);
    c = vsetq_lane_s32((int32_t)(uintptr_t)(col + pairs * 32 * chunks), c, 1);
    c = vsetq_lane_s32((int32_t)(uintptr_t)st.kb, c, 2);
    for (int32_t oc = 0; oc < out_c; oc += 4) {
        const int32_t rest = out_c - oc < 4 ? out_c - oc : 4;
        const int copy = staged && rest == 4;
        const int32_t *b = bias != NULL ? bias + oc : NULL;
        if (copy) {
            mcu_mve_pw_stage(weight + oc * n, n, chunks, stage);
        }
        if (kbias == NULL) { /* from the copy, whose padding sums 0, when there is one */
            mcu_mve_pw_fold_bias(copy ? stage : weight + oc * n, copy ? 16 * chunks : n, rest, b, input_offset, kb4);
        }
        const int32_t *kb = kbias != NULL ? kbias + oc : kb4;
        int32_t first = 0;
        if (pairs > 0 && rest == 4) {
            /* rows oc .. oc + 3 read up to 16 * chunks - n bytes into row oc + 4 */
            const int inside = n % 16 == 0 || oc + 4 < out_c;
            const int8_t *w = copy ? stage : inside ? weight + oc * n : tail_w;
            const int32x4_t s = vldrwq_s32(q->shift + oc);
            if (w != NULL && vmaxvq_s32(INT32_MIN, s) <= 0) { /* then s is its own right shift, min(s, 0) */
                vstrwq_s32(st.kb, vldrwq_s32(kb));
                st.y = y + oc;
                mcu_mve_pw_group(col, w, copy || !inside ? 16 * chunks : n, two, c, vldrwq_s32(q->multiplier + oc), s,
                                 lo, hi);
                first = 2 * pairs;
            }
        }
        if (first < pixels) {
            mcu_mve_pw_pixels(col, first, pixels, n, oc, rest, copy ? stage : weight + oc * n, copy ? 16 * chunks : n,
                              kb, q, output_offset, act_min, act_max, y, out_c);
        }
    }
}

/* Where output pixel i (memory order) of a 1x1 convolution without padding reads its n values: the
 * input's pixel (oh * stride_h, ow * stride_w). */
static inline const int8_t *mcu_mve_pw_source(const int8_t *input, const mcu_conv2d_s8_params *geom, int64_t i,
                                              int32_t n)
{
    const int64_t plane = (int64_t)geom->output.h * geom->output.w;
    const int64_t b = i / plane;
    const int32_t r = (int32_t)(i - b * plane);
    const int32_t oh = r / geom->output.w;
    const int32_t ow = r - oh * geom->output.w;
    return input + ((b * geom->input.h + (int64_t)oh * geom->stride_h) * geom->input.w + (int64_t)ow * geom->stride_w) * n;
}

/* The 1x1 convolution of `pixels` pixels of n <= MCU_MVE_PW_N_MAX values (out_c <= MCU_S8_MVE_OC_MAX),
 * in blocks packed into a column first (mcu_mve_pw_pack2), forward or backward: all of a block's
 * input is read before any of its output is written, so the pixel-buffer contract of
 * mcu_conv2d_1x1_s8 holds for a block as for one pixel, and so does the window contract of
 * mcu_conv2d_s8 (forward, output pixels in memory order) for a strided 1x1 convolution without
 * padding (`geom`: its parameters; NULL for stride 1). A function of its own, not inlined, so that
 * its stack buffers do not add to other paths' frames. */
static __attribute__((noinline, unused)) void
mcu_mve_pointwise(const int8_t *input, int64_t pixels, int32_t n, int32_t out_c, const int8_t *weight,
                  const int32_t *bias, int32_t input_offset, const mcu_per_channel_quant *q, int32_t output_offset,
                  int32_t act_min, int32_t act_max, int8_t *output, int forward,
                  const mcu_conv2d_s8_params *geom)
{
    /* the packed column, and the folded biases after it unless the blocks fold them group by group; 32
     * bytes of slack that the pair loop reads past the column (mcu_mve_pw_group) */
    _Alignas(16) int32_t buf[(MCU_MVE_PW_COL + 4 * MCU_S8_MVE_OC_MAX + 32) / 4];
    _Alignas(16) int8_t tail[MCU_MVE_PW_TAIL];
    int8_t *col = (int8_t *)buf;
    const int32_t stride = (n + 15) / 16 * 16;
    /* rows that a block may copy are folded from the copy, block by block (mcu_mve_pw_block), and the
     * column takes the whole buffer */
    const int fold = 4 * stride <= MCU_MVE_PW_STAGE;
    int32_t *kbias = fold ? NULL : buf + MCU_MVE_PW_COL / 4;
    if (!fold) {
        mcu_mve_pw_fold_bias(weight, n, out_c, bias, input_offset, kbias);
    }
    const int8_t *tail_w = NULL;
    if (n % 16 != 0 && out_c % 4 == 0 && 4 * stride <= MCU_MVE_PW_TAIL) {
        for (int32_t r = 0; r < 4; ++r) {
            for (int32_t c = 0; c < n; c += 16) {
                vstrbq_s8(tail + r * stride + c, vldrbq_z_s8(weight + (out_c - 4 + r) * n + c, vctp8q((uint32_t)(n - c))));
            }
        }
        tail_w = tail;
    }
    /* >= 2, even: whole pairs (n <= MCU_MVE_PW_N_MAX) */
    const int64_t block = (fold ? (int64_t)sizeof buf - 32 : MCU_MVE_PW_COL) / stride / 2 * 2;
    for (int64_t done = 0; done < pixels; done += block) {
        const int32_t count = (int32_t)(pixels - done < block ? pixels - done : block);
        const int64_t first = forward ? done : pixels - done - count;
        if (geom == NULL) { /* (the contiguous loop of its own: no per-pixel address arithmetic) */
            const int8_t *x = input + first * n;
            for (int32_t i = 0; i < count; i += 2) {
                mcu_mve_pw_pack2(x + i * n, x + (i + 1 < count ? i + 1 : i) * n, n, (i / 2) % 2, col + i * stride);
            }
        } else {
            for (int32_t i = 0; i < count; i += 2) {
                const int8_t *x0 = mcu_mve_pw_source(input, geom, first + i, n);
                const int8_t *x1 = i + 1 < count ? mcu_mve_pw_source(input, geom, first + i + 1, n) : x0;
                mcu_mve_pw_pack2(x0, x1, n, (i / 2) % 2, col + i * stride);
            }
        }
        mcu_mve_pw_block(col, count, n, out_c, weight, tail_w, kbias, bias, input_offset, q, output_offset, act_min,
                         act_max, output + first * out_c);
    }
}

#endif /* MCU_S8_MVE */

#endif
