/* Depthwise convolution (ch_mult 1, dilation 1) four channels at a time over
 * whole rows, for the DSP paths (MCU_S8_DSP, see simd_s8.h). Internal: static
 * inline only.
 *
 * Where the instructions go in a 3x3 depthwise layer is the requantization
 * (one per output value, as many as a third of the multiply-accumulates) and
 * the weights (loaded and widened again for every pixel). So this path:
 *  - runs one group of four channels over a whole image (or row) at a time,
 *    with that group's weights widened once into a stack table of (w02, w13)
 *    lane pairs, one pair per tap: a tap is then LDR + 2 SXTAB16 + LDRD + 4
 *    SMLAxy;
 *  - folds the border into the tables instead of branching per tap: a pixel
 *    whose window crosses the left/right edge reads the kw in-bounds columns
 *    nearest to it, against a copy of the weights shifted by as many columns
 *    with zeros where a tap fell outside (a zero weight adds nothing, modulo
 *    2^32 as well); a kernel row outside the input reads any in-bounds row
 *    against zero weights. Every pixel then runs the same unrolled code;
 *  - requantizes with one 64-bit multiply-accumulate per value (mcu_rq_ch),
 *    then saturates, clamps and stores four values at once.
 * The caller decides the order of writes (see the kernels' overlap
 * contracts): these functions only read the rows they are given and write the
 * output pointers they are given. */
#ifndef MCU_KERNELS_INTERNAL_DW_S8_DSP_H
#define MCU_KERNELS_INTERNAL_DW_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "rq_s8_dsp.h"
#include "simd_s8.h"

#if MCU_S8_DSP

/* Widened weight words of one table of a channel group on the stack (two tables per group): kh rows
 * of kw + 2 MCU_DW_PADW taps, two words each. 3x3 needs 42, 5x5 90. */
#define MCU_DW_TAB_WORDS 128
/* Largest output row (out_w * channels bytes) the general kernel assembles on the stack when its
 * output overlaps its input (see mcu_depthwise_conv2d_s8.c). */
#define MCU_DW_ROW_BYTES 1024
/* Fewer output pixels than this per image: the pixel path is cheaper than building the tables of
 * every group (MobileNet's last layers, 3x3 images of 128 and 256 channels). */
#define MCU_DW_ROW_MIN_PIXELS 16
/* 1: mcu_dw4_row leaves out its 3x3 pixel loop (a kernel whose 3x3 layers mostly take another
 * path defines it before including this header, for flash; its 3x3 rows then run mcu_dw4_pixel). */
#ifndef MCU_DW4_ROW_NO_RUN3X3
#define MCU_DW4_ROW_NO_RUN3X3 0
#endif
/* 1: mcu_dw4_row leaves out its 5x5 pixel loop (then 5x5 rows run mcu_dw4_pixel). */
#ifndef MCU_DW4_ROW_NO_RUN5X5
#define MCU_DW4_ROW_NO_RUN5X5 0
#endif

/* --- one group of four channels -------------------------------------------------------------- */

/* Each kernel row of a weight table has MCU_DW_PADW zero taps on either side, so the table of a
 * column shift s in [-MCU_DW_PADW, MCU_DW_PADW] is the same memory from tap MCU_DW_PADW - s on. */
#define MCU_DW_PADW 2
#define MCU_DW_SHIFTS (2 * MCU_DW_PADW + 1)
#define MCU_DW_KW_MAX 16 /* widest kernel of the row path */
#define MCU_DW_KH_MAX 8 /* tallest */

typedef struct {
    int32_t kh, kw, channels;     /* kernel, channels of a pixel (the column step) */
    int32_t stride_w, pad_left;   /* of the output columns */
    int32_t in_w, out_w;          /* in_w >= kw */
    int32_t shift_min, shifts;    /* column shifts shift_min .. shift_min + shifts - 1 (see mcu_dw4_plan) */
    int32_t row_taps;             /* kw + 2 MCU_DW_PADW: taps per table row */
    int32_t input_offset;
    uint32_t min4, max4;          /* activation clamp in four bytes */
    int clamp;                    /* the activation range is narrower than int8 */
    int32_t output_offset, act_min, act_max;
} mcu_dw4_geom;

/* Fills g for a layer; 0 when the row path does not apply (then the caller uses another path). */
static inline int mcu_dw4_plan(mcu_dw4_geom *g, int32_t kh, int32_t kw, int32_t channels, int32_t stride_w,
                               int32_t pad_left, int32_t in_w, int32_t out_w, int32_t input_offset,
                               int32_t output_offset, int32_t act_min, int32_t act_max)
{
    /* A pixel reads columns st .. st + kw - 1 with st = iw0 clamped to [0, in_w - kw]; its shift
     * iw0 - st is -pad_left at the first column and grows to the last column's overhang. */
    const int64_t last = (int64_t)(out_w - 1) * stride_w - pad_left - (in_w - kw);
    if (channels < 4 || kh > MCU_DW_KH_MAX || kw > MCU_DW_KW_MAX || in_w < kw || pad_left > MCU_DW_PADW ||
        last > MCU_DW_PADW ||
        (int64_t)kh * (kw + 2 * MCU_DW_PADW) * 2 > MCU_DW_TAB_WORDS) {
        return 0;
    }
    g->kh = kh;
    g->kw = kw;
    g->channels = channels;
    g->stride_w = stride_w;
    g->pad_left = pad_left;
    g->in_w = in_w;
    g->out_w = out_w;
    g->shift_min = -pad_left;
    g->shifts = (int32_t)(last > 0 ? last : 0) + pad_left + 1;
    g->row_taps = kw + 2 * MCU_DW_PADW;
    g->input_offset = input_offset;
    g->min4 = mcu_splat4_s8(act_min);
    g->max4 = mcu_splat4_s8(act_max);
    g->clamp = act_min > -128 || act_max < 127;
    g->output_offset = output_offset;
    g->act_min = act_min;
    g->act_max = act_max;
    return 1;
}

/* Per group of four channels: the widened weights of every kernel row (SXTB16 lane pairs (w0, w2),
 * (w1, w3) per tap, MCU_DW_PADW zero taps on either side), a zero row that kernel rows outside the
 * input point at instead, and the bias of every column shift with the input offset folded in: the
 * pixel code multiplies the raw inputs, sum (x + off) w = sum x w + off sum w, modulo 2^32 like the
 * accumulation itself, the sums running over the taps a pixel really has ("full": all kernel rows;
 * "edge": the rows inside the input of an output row near the top or bottom). Then the
 * requantization of the four channels. */
typedef struct {
    uint32_t w[MCU_DW_TAB_WORDS];
    uint32_t zero[(MCU_DW_KW_MAX + 2 * MCU_DW_PADW) * 2];
    uint32_t bias[4];
    uint32_t bias_full[MCU_DW_SHIFTS][4];
    uint32_t bias_edge[MCU_DW_SHIFTS][4];
    int32_t edge_lo, edge_hi; /* the rows of bias_edge; -1: not computed */
    int16_t wsum[MCU_DW_KH_MAX][MCU_DW_SHIFTS][4]; /* per kernel row and column shift: the kept weights' sum */
    mcu_rq_ch rq[4];
    int fast_rq; /* all four channels take mcu_rq_ch */
    int32_t multiplier[4], shift[4];
} mcu_dw4_group;

/* Biases of every column shift for the kernel rows [lo, hi), from the row sums of mcu_dw4_group_init. */
static inline void mcu_dw4_biases(const mcu_dw4_group *t, const mcu_dw4_geom *g, int32_t lo, int32_t hi,
                                  uint32_t out[][4])
{
    for (int32_t si = 0; si < g->shifts; ++si) {
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* |sum| <= 127 kh kw: no overflow, nor in the products */
        for (int32_t i = lo; i < hi; ++i) {
            const int16_t *rs = t->wsum[i][si];
            s0 += rs[0];
            s1 += rs[1];
            s2 += rs[2];
            s3 += rs[3];
        }
        out[si][0] = t->bias[0] + (uint32_t)(g->input_offset * s0);
        out[si][1] = t->bias[1] + (uint32_t)(g->input_offset * s1);
        out[si][2] = t->bias[2] + (uint32_t)(g->input_offset * s2);
        out[si][3] = t->bias[3] + (uint32_t)(g->input_offset * s3);
    }
}

/* Once per call: the zero row. */
static inline void mcu_dw4_zero(mcu_dw4_group *t)
{
    for (int32_t j = 0; j < (MCU_DW_KW_MAX + 2 * MCU_DW_PADW) * 2; ++j) {
        t->zero[j] = 0;
        __asm__("" ::: "memory"); /* no memset call: the kernels reference no libc function */
    }
}

/* Once per group: requantization, bias, weight rows, their sums and the biases of all kernel rows. */
static inline void mcu_dw4_group_init(mcu_dw4_group *t, const mcu_dw4_geom *g, int32_t c, const int8_t *weight,
                                      const int32_t *bias, const mcu_per_channel_quant *q)
{
    const int32_t kh = g->kh, kw = g->kw, rt2 = g->row_taps * 2, ch = g->channels;
    t->fast_rq = 1;
    for (int32_t k = 0; k < 4; ++k) {
        t->bias[k] = bias != NULL ? (uint32_t)bias[c + k] : 0u;
        t->multiplier[k] = q->multiplier[c + k];
        t->shift[k] = q->shift[c + k];
        t->fast_rq &= mcu_rq_ch_init(&t->rq[k], q->multiplier[c + k], q->shift[c + k], g->output_offset);
    }
    uint32_t *row = t->w;
    for (int32_t i = 0; i < kh; ++i, row += rt2) {
        for (int32_t j = 0; j < 2 * MCU_DW_PADW; ++j) {
            row[j] = 0;
            row[(MCU_DW_PADW + kw) * 2 + j] = 0;
        }
        const int8_t *wr = weight + i * kw * ch + c; /* weight column j of this row at wr + j ch */
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int32_t j = 0; j < kw; ++j) {
            const int8_t *wp = wr + j * ch;
            const uint32_t wv = mcu_load_u32(wp);
            row[(MCU_DW_PADW + j) * 2] = mcu_sxtb16(wv);
            row[(MCU_DW_PADW + j) * 2 + 1] = mcu_sxtb16_ror8(wv);
            s0 += wp[0];
            s1 += wp[1];
            s2 += wp[2];
            s3 += wp[3];
        }
        /* a shift sh drops the weight columns [0, -sh) (sh < 0) or [kw - sh, kw) (sh > 0) */
        for (int32_t si = 0; si < g->shifts; ++si) {
            const int32_t sh = g->shift_min + si;
            int32_t d0 = s0, d1 = s1, d2 = s2, d3 = s3;
            const int32_t j0 = sh < 0 ? 0 : kw - sh, j1 = sh < 0 ? -sh : kw;
            for (int32_t j = j0 < 0 ? 0 : j0; j < (j1 > kw ? kw : j1); ++j) {
                const int8_t *wp = wr + j * ch;
                d0 -= wp[0];
                d1 -= wp[1];
                d2 -= wp[2];
                d3 -= wp[3];
            }
            int16_t *ws = t->wsum[i][si]; /* |.| <= 127 kw */
            ws[0] = (int16_t)d0;
            ws[1] = (int16_t)d1;
            ws[2] = (int16_t)d2;
            ws[3] = (int16_t)d3;
        }
    }
    mcu_dw4_biases(t, g, 0, kh, t->bias_full);
    t->edge_lo = -1;
    t->edge_hi = -1;
}

/* For an output row whose kernel rows [lo, hi) are inside the input: each kernel row's weight row
 * (the zero row for the others) in wrow, and the biases of every column shift. */
static inline const uint32_t (*mcu_dw4_tables(mcu_dw4_group *t, const mcu_dw4_geom *g, int32_t lo, int32_t hi,
                                              const uint32_t **wrow))[4]
{
    for (int32_t i = 0; i < g->kh; ++i) {
        wrow[i] = i >= lo && i < hi ? t->w + i * g->row_taps * 2 : t->zero;
    }
    if (lo == 0 && hi == g->kh) {
        return (const uint32_t(*)[4])t->bias_full;
    }
    if (lo != t->edge_lo || hi != t->edge_hi) { /* only near the top and bottom edges */
        mcu_dw4_biases(t, g, lo, hi, t->bias_edge);
        t->edge_lo = lo;
        t->edge_hi = hi;
    }
    return (const uint32_t(*)[4])t->bias_edge;
}

/* Accumulators of a pixel: bias, then taps of raw inputs (x0 x1 x2 x3 at xp) times the widened
 * weights at wp: lanes (x0, x2) with (w0, w2) and (x1, x3) with (w1, w3). */
#if MCU_S8_DSP_NATIVE
/* The taps are single asm statements: written in C, GCC hoists the loads of all taps of a pixel
 * ahead of the multiplies and spills most of them to the stack. The weights are two aligned words
 * per tap (LDRD). */
#define MCU_DW4_TAP_ASM(xaddr, wofs)                                                          \
    "ldr %[xv], " xaddr "\n\t"                                                                \
    "ldrd %[w0], %[w1], [%[w], #" wofs "]\n\t"                                                \
    "sxtb16 %[x13], %[xv], ror #8\n\t"                                                        \
    "sxtb16 %[xv], %[xv]\n\t"                                                                 \
    "smlabb %[a0], %[xv], %[w0], %[a0]\n\t"                                                   \
    "smlatt %[a2], %[xv], %[w0], %[a2]\n\t"                                                   \
    "smlabb %[a1], %[x13], %[w1], %[a1]\n\t"                                                  \
    "smlatt %[a3], %[x13], %[w1], %[a3]\n\t"

#define MCU_DW4_ACC_OUT                                                                       \
    [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xv] "=&r"(xv_), [x13] "=&r"(x13_), \
        [w0] "=&r"(w0_), [w1] "=&r"(w1_)

#define MCU_DW4_TAP(xp, wp)                                                                   \
    do {                                                                                      \
        uint32_t xv_, x13_, w0_, w1_;                                                         \
        __asm__(MCU_DW4_TAP_ASM("[%[x]]", "0") : MCU_DW4_ACC_OUT : [x] "r"(xp), [w] "r"(wp) : "memory"); \
    } while (0)

/* Three taps of one kernel row: inputs at xp, xp + ch, xp + 2 ch. */
#define MCU_DW4_ROW3(xp, wp)                                                                  \
    do {                                                                                      \
        uint32_t xv_, x13_, w0_, w1_;                                                         \
        __asm__(MCU_DW4_TAP_ASM("[%[x]]", "0") MCU_DW4_TAP_ASM("[%[x], %[ch]]", "8")            \
                    MCU_DW4_TAP_ASM("[%[x], %[ch], lsl #1]", "16")                              \
                : MCU_DW4_ACC_OUT                                                             \
                : [x] "r"(xp), [ch] "r"(ch), [w] "r"(wp)                                      \
                : "memory");                                                                  \
    } while (0)
#else
/* The instructions' arithmetic in C. */
#define MCU_DW4_TAP(xp, wp)                                                                   \
    do {                                                                                      \
        const uint32_t xv_ = mcu_load_u32(xp);                                                \
        const uint32_t x02_ = mcu_sxtb16(xv_);                                                \
        const uint32_t x13_ = mcu_sxtb16_ror8(xv_);                                           \
        a0 = mcu_smlabb(x02_, (wp)[0], a0);                                                   \
        a2 = mcu_smlatt(x02_, (wp)[0], a2);                                                   \
        a1 = mcu_smlabb(x13_, (wp)[1], a1);                                                   \
        a3 = mcu_smlatt(x13_, (wp)[1], a3);                                                   \
    } while (0)

#define MCU_DW4_ROW3(xp, wp)                                                                  \
    do {                                                                                      \
        MCU_DW4_TAP(xp, wp);                                                                  \
        MCU_DW4_TAP((xp) + ch, (wp) + 2);                                                     \
        MCU_DW4_TAP((xp) + 2 * ch, (wp) + 4);                                                 \
    } while (0)
#endif

#if defined(__GNUC__)
#define MCU_DW4_NOINLINE __attribute__((noinline, unused))
#else
#define MCU_DW4_NOINLINE
#endif

/* Requantizes, clamps and stores the four accumulators of a pixel at y. */
static inline void mcu_dw4_store(const mcu_dw4_group *t, const mcu_dw4_geom *g, uint32_t a0, uint32_t a1,
                                 uint32_t a2, uint32_t a3, int8_t *y)
{
    if (t->fast_rq) {
        const uint32_t v = mcu_rq4_pack_s8(t->rq, a0, a1, a2, a3);
        mcu_store_u32(y, g->clamp ? mcu_clamp4_s8(v, g->min4, g->max4) : v);
    } else {
        const uint32_t acc[4] = {a0, a1, a2, a3};
        for (int32_t k = 0; k < 4; ++k) {
            y[k] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[k]), t->multiplier[k], t->shift[k], g->output_offset,
                                             g->act_min, g->act_max);
        }
    }
}

/* One output pixel of any kernel size: kernel row i reads kw columns from rows[i] + col against
 * the weights from wrow[i] + wofs (the pixel's column shift), b the pixel's biases. */
static MCU_DW4_NOINLINE void mcu_dw4_pixel(const mcu_dw4_group *t, const mcu_dw4_geom *g, const int8_t *const *rows,
                                           const uint32_t *const *wrow, int32_t col, int32_t wofs, const uint32_t *b,
                                           int8_t *y)
{
    const int32_t kh = g->kh, kw = g->kw, ch = g->channels;
    uint32_t a0 = b[0], a1 = b[1], a2 = b[2], a3 = b[3];
    for (int32_t i = 0; i < kh; ++i) {
        const int8_t *xp = rows[i] + col;
        const uint32_t *wp = wrow[i] + wofs;
        if (kw == 3) {
            MCU_DW4_ROW3(xp, wp);
            continue;
        }
        for (int32_t j = 0; j < kw; ++j, xp += ch, wp += 2) {
            MCU_DW4_TAP(xp, wp);
        }
    }
    mcu_dw4_store(t, g, a0, a1, a2, a3, y);
}

/* --- the 3x3 pixel loop ----------------------------------------------------------------------- */

/* What mcu_dw4_run3x3 and mcu_dw4_run5x5 read, at fixed offsets on the Arm cores (asserted below):
 * pixels from y to y_end, stepping ch output bytes and `step` input bytes; kernel row i reads
 * row[i].x (advanced pixel by pixel) against the weights at row[i].w. */
typedef struct {
    uint32_t bias[4];
    mcu_rq_ch rq[4];
    struct {
        const int8_t *x;
        const uint32_t *w;
    } row[5];
    int32_t ch, step;
    int8_t *y, *y_end;
    uint32_t min4, max4;
    int32_t clamp;
} mcu_dw4_run;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_dw4_run, rq) == 16 && offsetof(mcu_dw4_run, row) == 112 &&
                   offsetof(mcu_dw4_run, ch) == 152 && offsetof(mcu_dw4_run, step) == 156 &&
                   offsetof(mcu_dw4_run, y) == 160 && offsetof(mcu_dw4_run, y_end) == 164 &&
                   offsetof(mcu_dw4_run, min4) == 168 && offsetof(mcu_dw4_run, max4) == 172 &&
                   offsetof(mcu_dw4_run, clamp) == 176,
               "mcu_dw4_run layout (offsets in mcu_dw4_run3x3 and mcu_dw4_run5x5)");

/* Hand-scheduled: all 14 registers. r0 = run, r1 = ch, r2 = y, r3 = step, r4-r7 the accumulators
 * of channels 0-3, r8-r11 temporaries, r12/lr a kernel row's input and weight pointers. Per pixel:
 * 2 bias loads, 3 x (LDRD of the row's pointers, 3 taps of 8, advance and store the input pointer),
 * 7 per requantized value, 5 to pack, 5 to clamp (where the activation range is narrower than
 * int8), 2 to store, 3 to loop: 118 (123). */
#define MCU_DW4_RUN_TAP(xaddr, wofs)                                                          \
    "ldr r8, " xaddr "\n\t"                                                                   \
    "ldrd r10, r11, [lr, #" wofs "]\n\t"                                                      \
    "sxtb16 r9, r8, ror #8\n\t"                                                               \
    "sxtb16 r8, r8\n\t"                                                                       \
    "smlabb r4, r8, r10, r4\n\t"                                                              \
    "smlatt r6, r8, r10, r6\n\t"                                                              \
    "smlabb r5, r9, r11, r5\n\t"                                                              \
    "smlatt r7, r9, r11, r7\n\t"
#define MCU_DW4_RUN_ROW(ofs)                                                                  \
    "ldrd r12, lr, [r0, #" ofs "]\n\t" MCU_DW4_RUN_TAP("[r12]", "0") MCU_DW4_RUN_TAP("[r12, r1]", "8") \
        MCU_DW4_RUN_TAP("[r12, r1, lsl #1]", "16") "add r12, r12, r3\n\t"                     \
                                                   "str r12, [r0, #" ofs "]\n\t"
/* Lane a (register), K[0] at kofs, multiplier and shift at mofs (K[acc < 0] as a borrow: see
 * mcu_rq_ch_apply); r0 the state, r8-r11 scratch. Also dw_px_s8_dsp.h's row loops' requantization. */
#define MCU_DW4_RUN_RQ(a, kofs, mofs)                                                         \
    "ldrd r10, r11, [r0, #" kofs "]\n\t"                                                      \
    "ldrd r8, r9, [r0, #" mofs "]\n\t"                                                        \
    "smlal r10, r11, " a ", r8\n\t"                                                           \
    "bic r8, " a ", r10\n\t"                                                                  \
    "add r11, r11, r8, asr #31\n\t"                                                           \
    "asr r11, r11, r9\n\t"                                                                    \
    "ssat " a ", #8, r11\n\t"

#define MCU_DW4_RUN_LOOP(clamp)                                                               \
    __asm__ volatile("push {r4-r11, lr}\n\t"                                                  \
                     "ldr r1, [r0, #152]\n\t"                                                 \
                     "ldr r3, [r0, #156]\n\t"                                                 \
                     "ldr r2, [r0, #160]\n\t"                                                 \
                     "1:\n\t"                                                                 \
                     "ldrd r4, r5, [r0, #0]\n\t"                                              \
                     "ldrd r6, r7, [r0, #8]\n\t" MCU_DW4_RUN_ROW("112") MCU_DW4_RUN_ROW("120")  \
                         MCU_DW4_RUN_ROW("128") MCU_DW4_RUN_RQ("r4", "16", "32")                \
                             MCU_DW4_RUN_RQ("r5", "40", "56") MCU_DW4_RUN_RQ("r6", "64", "80")  \
                                 MCU_DW4_RUN_RQ("r7", "88", "104")                              \
                     "pkhbt r4, r4, r6, lsl #16\n\t"                                          \
                     "pkhbt r5, r5, r7, lsl #16\n\t"                                          \
                     "and r4, r4, #0x00FF00FF\n\t"                                            \
                     "and r5, r5, #0x00FF00FF\n\t"                                            \
                     "orr r4, r4, r5, lsl #8\n\t" clamp                                      \
                     "str r4, [r2]\n\t"                                                       \
                     "add r2, r2, r1\n\t"                                                     \
                     "ldr r8, [r0, #164]\n\t"                                                 \
                     "cmp r2, r8\n\t"                                                         \
                     "bne 1b\n\t"                                                             \
                     "pop {r4-r11, pc}\n\t")

/* Per byte: SSUB8 sets GE where the value >= min, SEL keeps it there; then against max. */
#define MCU_DW4_RUN_CLAMP                                                                     \
    "ldrd r8, r9, [r0, #168]\n\t"                                                             \
    "ssub8 r10, r4, r8\n\t"                                                                   \
    "sel r4, r4, r8\n\t"                                                                      \
    "ssub8 r10, r9, r4\n\t"                                                                   \
    "sel r4, r4, r9\n\t"

/* The loop for activation ranges narrower than int8, and for the full range (SSAT clamps). */
static __attribute__((naked, noinline, unused)) void mcu_dw4_run3x3_clamp(mcu_dw4_run *run)
{
    (void)run; /* in r0 */
    MCU_DW4_RUN_LOOP(MCU_DW4_RUN_CLAMP);
}

static __attribute__((naked, noinline, unused)) void mcu_dw4_run3x3_full(mcu_dw4_run *run)
{
    (void)run; /* in r0 */
    MCU_DW4_RUN_LOOP("");
}

static inline void mcu_dw4_run3x3(mcu_dw4_run *run)
{
    if (run->clamp) {
        mcu_dw4_run3x3_clamp(run);
    } else {
        mcu_dw4_run3x3_full(run);
    }
}
/* The 5x5 loop, registers as in the 3x3 one except r3 = step - 2 ch: a kernel row reads its first three
 * taps at x, x + ch, x + 2 ch, moves x by 2 ch (Thumb has no register post-index for LDR) for the last
 * two, then by r3 to the next pixel's window. Per pixel: 2 bias loads, 5 x (LDRD of the row's pointers,
 * 5 taps of 8, two adds, the store of the input pointer), 28 to requantize, 5 to pack, 2 to test the
 * clamp flag (r5, free after the pack; 5 more where the activation range is narrower than int8), 2 to store, 3 to loop: 262
 * (267) for 100 multiply-accumulates. One copy for both activation ranges: the flag costs 2 of 262. */
#define MCU_DW4_RUN_ROW5(ofs)                                                                 \
    "ldrd r12, lr, [r0, #" ofs "]\n\t" MCU_DW4_RUN_TAP("[r12]", "0") MCU_DW4_RUN_TAP("[r12, r1]", "8") \
        MCU_DW4_RUN_TAP("[r12, r1, lsl #1]", "16") "add r12, r12, r1, lsl #1\n\t"           \
        MCU_DW4_RUN_TAP("[r12, r1]", "24") MCU_DW4_RUN_TAP("[r12, r1, lsl #1]", "32")         \
        "add r12, r12, r3\n\t"                                                               \
        "str r12, [r0, #" ofs "]\n\t"

static __attribute__((naked, noinline, unused)) void mcu_dw4_run5x5(mcu_dw4_run *run)
{
    (void)run; /* in r0 */
    __asm__ volatile("push {r4-r11, lr}\n\t"
                     "ldr r1, [r0, #152]\n\t"
                     "ldr r3, [r0, #156]\n\t"
                     "sub r3, r3, r1, lsl #1\n\t"
                     "ldr r2, [r0, #160]\n\t"
                     "1:\n\t"
                     "ldrd r4, r5, [r0, #0]\n\t"
                     "ldrd r6, r7, [r0, #8]\n\t" MCU_DW4_RUN_ROW5("112") MCU_DW4_RUN_ROW5("120")
                         MCU_DW4_RUN_ROW5("128") MCU_DW4_RUN_ROW5("136") MCU_DW4_RUN_ROW5("144")
                             MCU_DW4_RUN_RQ("r4", "16", "32") MCU_DW4_RUN_RQ("r5", "40", "56")
                                 MCU_DW4_RUN_RQ("r6", "64", "80") MCU_DW4_RUN_RQ("r7", "88", "104")
                     "pkhbt r4, r4, r6, lsl #16\n\t"
                     "pkhbt r5, r5, r7, lsl #16\n\t"
                     "and r4, r4, #0x00FF00FF\n\t"
                     "and r5, r5, #0x00FF00FF\n\t"
                     "orr r4, r4, r5, lsl #8\n\t"
                     "ldr r5, [r0, #176]\n\t"
                     "cbz r5, 2f\n\t" MCU_DW4_RUN_CLAMP
                     "2:\n\t"
                     "str r4, [r2]\n\t"
                     "add r2, r2, r1\n\t"
                     "ldr r8, [r0, #164]\n\t"
                     "cmp r2, r8\n\t"
                     "bne 1b\n\t"
                     "pop {r4-r11, pc}\n\t");
}
#undef MCU_DW4_RUN_ROW5
#undef MCU_DW4_RUN_LOOP
#undef MCU_DW4_RUN_CLAMP
#undef MCU_DW4_RUN_TAP
#undef MCU_DW4_RUN_ROW
#else
/* The same loop in C with the instructions' arithmetic. */
static MCU_DW4_NOINLINE void mcu_dw4_run3x3(mcu_dw4_run *run)
{
    const int32_t ch = run->ch;
    for (int8_t *y = run->y; y != run->y_end; y += ch) {
        uint32_t a0 = run->bias[0], a1 = run->bias[1], a2 = run->bias[2], a3 = run->bias[3];
        for (int32_t i = 0; i < 3; ++i) {
            MCU_DW4_ROW3(run->row[i].x, run->row[i].w);
            run->row[i].x += run->step;
        }
        const uint32_t v = mcu_rq4_pack_s8(run->rq, a0, a1, a2, a3);
        mcu_store_u32(y, run->clamp ? mcu_clamp4_s8(v, run->min4, run->max4) : v);
    }
}

static MCU_DW4_NOINLINE void mcu_dw4_run5x5(mcu_dw4_run *run)
{
    const int32_t ch = run->ch;
    for (int8_t *y = run->y; y != run->y_end; y += ch) {
        uint32_t a0 = run->bias[0], a1 = run->bias[1], a2 = run->bias[2], a3 = run->bias[3];
        for (int32_t i = 0; i < 5; ++i) {
            for (int32_t j = 0; j < 5; ++j) {
                MCU_DW4_TAP(run->row[i].x + j * ch, run->row[i].w + 2 * j);
            }
            run->row[i].x += run->step;
        }
        const uint32_t v = mcu_rq4_pack_s8(run->rq, a0, a1, a2, a3);
        mcu_store_u32(y, run->clamp ? mcu_clamp4_s8(v, run->min4, run->max4) : v);
    }
}
#endif

/* One output row of the group: rows[i] is kernel row i's input row (an in-bounds row whose weights
 * wrow[i] are the zero row when the real row is outside), offset to the group's first channel; b
 * the biases of every column shift; y is the output row, offset likewise. Pixels are written left
 * to right; a pixel whose window crosses the left or right edge reads the kw columns nearest to it
 * against the weights shifted by as many columns (zeros where a tap fell outside). */
static inline void mcu_dw4_row(const mcu_dw4_group *t, const mcu_dw4_geom *g, mcu_dw4_run *run,
                               const int8_t *const *rows, const uint32_t *const *wrow, const uint32_t (*b)[4],
                               int8_t *y)
{
    const int32_t ch = g->channels;
    const int32_t st_max = g->in_w - g->kw;
    int32_t iw0 = -g->pad_left;
    int32_t ow = 0;
#if !MCU_DW4_ROW_NO_RUN3X3
    if (g->kh == 3 && g->kw == 3 && t->fast_rq) {
        while (ow < g->out_w) {
            /* a run of pixels with the same shift: one border pixel, or the whole interior */
            const int32_t st = iw0 < 0 ? 0 : iw0 > st_max ? st_max : iw0;
            const int32_t sh = iw0 - st;
            int32_t n = 1;
            if (sh == 0) {
                n = (st_max - iw0) / g->stride_w + 1;
                n = n < g->out_w - ow ? n : g->out_w - ow;
            }
            for (int32_t k = 0; k < 4; ++k) {
                run->bias[k] = b[sh - g->shift_min][k];
            }
            for (int32_t i = 0; i < 3; ++i) {
                run->row[i].x = rows[i] + st * ch;
                run->row[i].w = wrow[i] + 2 * (MCU_DW_PADW - sh);
            }
            run->y = y + ow * ch;
            run->y_end = run->y + n * ch;
            mcu_dw4_run3x3(run);
            ow += n;
            iw0 += n * g->stride_w;
        }
        return;
    }
#else
    (void)run;
#endif
#if !MCU_DW4_ROW_NO_RUN5X5
    if (g->kh == 5 && g->kw == 5 && t->fast_rq) {
        /* as the 3x3 runs above: one run per column shift */
        while (ow < g->out_w) {
            const int32_t st = iw0 < 0 ? 0 : iw0 > st_max ? st_max : iw0;
            const int32_t sh = iw0 - st;
            int32_t n = 1;
            if (sh == 0) {
                n = (st_max - iw0) / g->stride_w + 1;
                n = n < g->out_w - ow ? n : g->out_w - ow;
            }
            for (int32_t k = 0; k < 4; ++k) {
                run->bias[k] = b[sh - g->shift_min][k];
            }
            for (int32_t i = 0; i < 5; ++i) {
                run->row[i].x = rows[i] + st * ch;
                run->row[i].w = wrow[i] + 2 * (MCU_DW_PADW - sh);
            }
            run->y = y + ow * ch;
            run->y_end = run->y + n * ch;
            mcu_dw4_run5x5(run);
            ow += n;
            iw0 += n * g->stride_w;
        }
        return;
    }
#endif
    for (; ow < g->out_w; ++ow, iw0 += g->stride_w) {
        const int32_t st = iw0 < 0 ? 0 : iw0 > st_max ? st_max : iw0;
        const int32_t sh = iw0 - st;
        mcu_dw4_pixel(t, g, rows, wrow, st * ch, 2 * (MCU_DW_PADW - sh), b[sh - g->shift_min], y + ow * ch);
    }
}

/* The fields of run fixed for a group. */
static inline void mcu_dw4_run_init(mcu_dw4_run *run, const mcu_dw4_group *t, const mcu_dw4_geom *g)
{
    for (int32_t k = 0; k < 4; ++k) { /* field by field: a struct copy may become a memcpy call */
        run->rq[k].k[0] = t->rq[k].k[0];
        run->rq[k].k[1] = t->rq[k].k[1];
        run->rq[k].multiplier = t->rq[k].multiplier;
        run->rq[k].rshift = t->rq[k].rshift;
    }
    run->ch = g->channels;
    run->step = g->stride_w * g->channels;
    run->min4 = g->min4;
    run->max4 = g->max4;
    run->clamp = g->clamp;
}

/* Kernel rows [*lo, *hi) of output row oh inside the input, and the row each kernel row reads:
 * its own when inside, else the nearest inside (read against zero weights). Returns ih0. */
static inline int32_t mcu_dw4_rows(int32_t oh, int32_t stride_h, int32_t pad_top, int32_t kh, int32_t in_h,
                                   int32_t *lo, int32_t *hi, int32_t *ih)
{
    const int32_t ih0 = oh * stride_h - pad_top;
    int32_t l = ih0 < 0 ? -ih0 : 0;
    int32_t h = in_h - ih0 < kh ? in_h - ih0 : kh;
    l = l < kh ? l : kh;
    h = h > l ? h : l;
    *lo = l;
    *hi = h;
    for (int32_t i = 0; i < kh; ++i) {
        const int32_t r = ih0 + i;
        ih[i] = r < 0 ? 0 : r >= in_h ? in_h - 1 : r;
    }
    return ih0;
}

/* Channels [c0, c1) of one output pixel with plain arithmetic (the channels after the last group
 * of four): rows[i] is NULL when kernel row i is outside the input, taps kw_lo <= j < kw_hi start
 * at column iw0. */
static inline void mcu_dw_pixel_tail_s8(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t iw0,
                                        int32_t kw_lo, int32_t kw_hi, int32_t channels, int32_t c0, int32_t c1,
                                        int32_t input_offset, const int8_t *weight, const int32_t *bias,
                                        const mcu_per_channel_quant *q, int32_t output_offset, int32_t act_min,
                                        int32_t act_max, int8_t *y)
{
    for (int32_t c = c0; c < c1; ++c) {
        uint32_t acc = bias != NULL ? (uint32_t)bias[c] : 0u;
        for (int32_t i = 0; i < kh; ++i) {
            if (rows[i] == NULL) {
                continue;
            }
            for (int32_t j = kw_lo; j < kw_hi; ++j) {
                acc += (uint32_t)((rows[i][(iw0 + j) * channels + c] + input_offset) *
                                  weight[(i * kw + j) * channels + c]);
            }
        }
        y[c] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc), q->multiplier[c], q->shift[c], output_offset, act_min,
                                         act_max);
    }
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_DW_S8_DSP_H */
