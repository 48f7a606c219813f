/* 3x3 depthwise convolution (ch_mult 1, dilation 1) pixel by pixel over chunks of channels, for
 * the DSP paths (MCU_S8_DSP, see simd_s8.h) of images too small for the row path of
 * common/dw_s8_dsp.h to pay back its per-group set-up. Internal: static inline only.
 *
 * On small images (MobileNet's 12x12, 6x6 and 3x3 layers, DS-CNN's 25x5) the row path spends as
 * much on set-up as on arithmetic: per group of four channels it builds weight tables for every
 * column shift, biases for every border configuration, and per output row it makes three calls of
 * its pixel loop (left border, interior, right border). Here a chunk of up to MCU_DWPX_GROUPS
 * groups is set up once (widened weights, the bias with the input offset folded in over all nine
 * taps, the requantization of common/rq_s8_dsp.h), then every output pixel runs all groups of the
 * chunk with the same unrolled taps (hand-scheduled on the Arm cores: 97 instructions per group
 * and pixel, 102 with the activation clamp).
 *
 * Borders need no tests per pixel: the chunk's channels of the three input rows an output row reads
 * are copied, widened once for all the taps that read them, into a ring of three padded rows on
 * the stack, whose columns outside the input hold
 * the input zero-point, and so do the rows of kernel rows outside the input. (zero-point +
 * input_offset) is 0, so zero-point x w = -input_offset x w cancels that tap's share of the folded
 * bias, modulo 2^32 like the accumulation itself: every pixel, border or not, computes exactly the
 * plain kernel's sum. The copies also make the order of writes free: an output row is computed
 * after every input it reads is in the ring, so the in-place kernel writes its output row straight
 * over the input row (already in the ring) and needs no ring of its own. */
#ifndef MCU_KERNELS_INTERNAL_DW_PX_S8_DSP_H
#define MCU_KERNELS_INTERNAL_DW_PX_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/dw_s8_dsp.h"
#include "../common/rq_s8_dsp.h"
#include "../common/simd_s8.h"

#if MCU_S8_DSP

/* Groups of four channels per chunk: 8 x 184 bytes of tables on the stack. */
#define MCU_DWPX_GROUPS 8
/* Output pixels per image up to which strided layers take the pixel path (measured on the M33:
 * at 24x24 outputs of stride 2 the ring's fill of two rows per output row, two columns per pixel,
 * costs more than the row path's set-up; at stride 1 the pixel path wins at every size). */
#define MCU_DWPX_MAX_PIXELS 200
/* The ring of three padded rows on the stack: a layer whose padded row of one group (8 bytes a
 * column at stride 1, 4 else) does not fit three times is left to the row path; wider rows take
 * fewer groups a chunk. */
#define MCU_DWPX_RING_BYTES 3072
/* 1: the widened ring's loop in two copies, with and without the clamp (2 instructions a group and
 * pixel less, ~0.5 KiB more); a kernel defines it before including this header. */
#ifndef MCU_DWPX_WIDE_SPLIT
#define MCU_DWPX_WIDE_SPLIT 0
#endif

typedef struct {
    uint32_t w[18]; /* tap t = 3 i + j at 2 t: lanes (w0, w2), (w1, w3) of the group's channels */
    uint32_t bias[4]; /* bias + input_offset x (sum of the nine weights), modulo 2^32 */
    mcu_rq_ch rq[4];
} mcu_dwpx_group;

typedef struct {
    mcu_dwpx_group g[MCU_DWPX_GROUPS];
    int32_t ch, in_h, in_w, out_w, stride_h, stride_w, pad_top, pad_left;
    int32_t cols;       /* columns of a padded row: every column an output pixel reads */
    int32_t max_groups; /* groups a chunk whose ring rows fit MCU_DWPX_RING_BYTES */
    int wide;           /* the ring holds the inputs widened, one padded row a group (see mcu_dwpx_rows) */
    int32_t colb;       /* bytes of a group's padded column: 8 widened, 4 raw */
    int32_t groups;     /* of the current chunk */
    uint32_t min4, max4;
    uint32_t zpw; /* the input zero-point in four bytes: what a tap outside the input reads */
    int clamp;    /* the activation range is narrower than int8 */
} mcu_dwpx_chunk;


/* Whether the pixel path serves a layer: 3x3, channels a multiple of 4, every requantization in
 * mcu_rq_ch's range (shift in [-24, -1]), three padded rows of a group within the ring. */
static inline int mcu_dwpx_applies(int32_t kh, int32_t kw, int32_t ch, int32_t out_w, int32_t stride_w, int wide,
                                   const mcu_per_channel_quant *q)
{
    /* the padded columns (out_w - 1) stride_w + 3 (output column ow reads ow stride .. ow stride + 2),
     * bounded first so that the product cannot overflow */
    const int32_t cols_max = MCU_DWPX_RING_BYTES / (3 * (wide ? 8 : 4));
    if (kh != 3 || kw != 3 || ch % 4 != 0 || out_w > cols_max || stride_w > cols_max ||
        (out_w - 1) * stride_w + 3 > cols_max) {
        return 0;
    }
    for (int32_t c = 0; c < ch; ++c) {
        if (q->shift[c] > -1 || q->shift[c] < -24) {
            return 0;
        }
    }
    return 1;
}

/* The fields fixed for a layer (mcu_dwpx_applies held). */
static inline void mcu_dwpx_layer(mcu_dwpx_chunk *k, int32_t ch, int32_t in_h, int32_t in_w, int32_t out_w,
                                  int32_t stride_h, int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                  int32_t input_offset, int32_t act_min, int32_t act_max, int wide)
{
    k->ch = ch;
    k->in_h = in_h;
    k->in_w = in_w;
    k->out_w = out_w;
    k->stride_h = stride_h;
    k->stride_w = stride_w;
    k->pad_top = pad_top;
    k->pad_left = pad_left;
    k->cols = (out_w - 1) * stride_w + 3; /* mcu_dwpx_applies bounded it */
    k->wide = wide;
    k->colb = wide ? 8 : 4;
    const int32_t fit = MCU_DWPX_RING_BYTES / (3 * k->colb * k->cols);
    k->max_groups = fit < MCU_DWPX_GROUPS ? fit : MCU_DWPX_GROUPS;
    k->groups = 0;
    k->min4 = mcu_splat4_s8(act_min);
    k->max4 = mcu_splat4_s8(act_max);
    k->zpw = mcu_splat4_s8(-input_offset); /* input_offset in [-127, 128]: an int8 zero-point */
    k->clamp = act_min > -128 || act_max < 127;
}

/* The tables of the chunk from channel c0 (weights in [3][3][ch] order); returns its groups. */
static inline int32_t mcu_dwpx_chunk_init(mcu_dwpx_chunk *k, int32_t c0, const int8_t *weight, const int32_t *bias,
                                          const mcu_per_channel_quant *q, int32_t input_offset,
                                          int32_t output_offset)
{
    const int32_t ch = k->ch;
    const int32_t groups = (ch - c0) / 4 < k->max_groups ? (ch - c0) / 4 : k->max_groups;
    k->groups = groups;
    for (int32_t gi = 0; gi < groups; ++gi) {
        mcu_dwpx_group *t = &k->g[gi];
        const int32_t c = c0 + 4 * gi;
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* |sum| <= 9 x 128 */
        for (int32_t tap = 0; tap < 9; ++tap) {
            const int8_t *wp = weight + tap * ch + c;
            const uint32_t wv = mcu_load_u32(wp);
            t->w[2 * tap] = mcu_sxtb16(wv);
            t->w[2 * tap + 1] = mcu_sxtb16_ror8(wv);
            s0 += wp[0];
            s1 += wp[1];
            s2 += wp[2];
            s3 += wp[3];
        }
        const int32_t sums[4] = {s0, s1, s2, s3};
        for (int32_t o = 0; o < 4; ++o) {
            t->bias[o] = (bias != NULL ? (uint32_t)bias[c + o] : 0u) + (uint32_t)(input_offset * sums[o]);
            (void)mcu_rq_ch_init(&t->rq[o], q->multiplier[c + o], q->shift[c + o], output_offset);
        }
    }
    return groups;
}

/* What the pixel loop reads: kernel row i's padded row of the first group at x[i] (the first
 * pixel's first column), the output at y, the groups from start to end, `pixels` output pixels a
 * row; gs is the bytes from one group's padded row to the next's (widened ring) or of a padded
 * column (raw ring, where a group's inputs are 4 bytes on from the previous group's). From pixel
 * to pixel the input pointers step xskip more than the groups' steps, the output yskip more than
 * their 4 bytes each. At fixed offsets on the Arm cores. */
typedef struct {
    const int8_t *x[3];
    int8_t *y;
    const mcu_dwpx_group *end;
    int32_t gs;
    uint32_t min4, max4;
    const mcu_dwpx_group *start;
    int32_t pixels;
    int32_t xskip, yskip;
    int32_t clamp; /* the activation range is narrower than int8 */
} mcu_dwpx_px;

#if MCU_S8_DSP_NATIVE
_Static_assert(offsetof(mcu_dwpx_group, bias) == 72 && offsetof(mcu_dwpx_group, rq) == 88 &&
                   sizeof(mcu_dwpx_group) == 184,
               "mcu_dwpx_group layout (offsets in mcu_dwpx_run)");
_Static_assert(offsetof(mcu_dwpx_px, y) == 12 && offsetof(mcu_dwpx_px, end) == 16 && offsetof(mcu_dwpx_px, gs) == 20 &&
                   offsetof(mcu_dwpx_px, min4) == 24 && offsetof(mcu_dwpx_px, max4) == 28 &&
                   offsetof(mcu_dwpx_px, start) == 32 && offsetof(mcu_dwpx_px, pixels) == 36 &&
                   offsetof(mcu_dwpx_px, xskip) == 40 && offsetof(mcu_dwpx_px, yskip) == 44 &&
                   offsetof(mcu_dwpx_px, clamp) == 48,
               "mcu_dwpx_px layout (offsets in mcu_dwpx_run)");

/* Hand-scheduled, all 14 registers: r0 the group's tables, r1 gs, r2/r3/r12 the three rows' input
 * pointers, lr y, r4-r7 the four accumulators, r8-r11 temporaries; the end, the clamp bounds, the
 * arguments and the pixels left on the stack. Per group: 2 bias loads, 9 taps of 6 and 3 to step
 * the rows (widened ring; raw: 9 taps of 8), 7 per requantized value, 5 to pack, 2 to test for
 * the clamp and 5 to clamp (where the activation range is narrower than int8: one loop for both
 * keeps the flash of the kernels; without the test in the split loops), 1 to store, 4 to loop:
 * 99 (104; split 97, 102; raw 114, 119); per pixel 11 more. */
#define MCU_DWPX_TAP(x, xofs, wofs)                                                           \
    "ldrd r8, r9, [" x ", #" xofs "]\n\t"                                                     \
    "ldrd r10, r11, [r0, #" wofs "]\n\t"                                                      \
    "smlabb r4, r8, r10, r4\n\t"                                                              \
    "smlatt r6, r8, r10, r6\n\t"                                                              \
    "smlabb r5, r9, r11, r5\n\t"                                                              \
    "smlatt r7, r9, r11, r7\n\t"
/* Kernel row of input pointer x (then stepped to the next group's padded row), weights of its
 * taps at w0ofs, w1ofs, w2ofs. */
#define MCU_DWPX_ROW(x, w0ofs, w1ofs, w2ofs)                                                   \
    MCU_DWPX_TAP(x, "0", w0ofs) MCU_DWPX_TAP(x, "8", w1ofs) MCU_DWPX_TAP(x, "16", w2ofs) "add " x ", " x ", r1\n\t"
/* Raw ring: a tap widens its input; a row's first tap last, its load post-indexed to the next group. */
#define MCU_DWPX_RTAP(xaddr, wofs)                                                            \
    "ldr r8, " xaddr "\n\t"                                                                   \
    "ldrd r10, r11, [r0, #" wofs "]\n\t"                                                      \
    "sxtb16 r9, r8, ror #8\n\t"                                                               \
    "sxtb16 r8, r8\n\t"                                                                       \
    "smlabb r4, r8, r10, r4\n\t"                                                              \
    "smlatt r6, r8, r10, r6\n\t"                                                              \
    "smlabb r5, r9, r11, r5\n\t"                                                              \
    "smlatt r7, r9, r11, r7\n\t"
#define MCU_DWPX_RROW(x, w0ofs, w1ofs, w2ofs)                                                  \
    MCU_DWPX_RTAP("[" x ", r1, lsl #1]", w2ofs) MCU_DWPX_RTAP("[" x ", r1]", w1ofs) MCU_DWPX_RTAP("[" x "], #4", w0ofs)
#define MCU_DWPX_WIDE_ROWS                                                                    \
    MCU_DWPX_ROW("r2", "0", "8", "16") MCU_DWPX_ROW("r3", "24", "32", "40") MCU_DWPX_ROW("r12", "48", "56", "64")
#define MCU_DWPX_RAW_ROWS                                                                     \
    MCU_DWPX_RROW("r2", "0", "8", "16") MCU_DWPX_RROW("r3", "24", "32", "40") MCU_DWPX_RROW("r12", "48", "56", "64")
#define MCU_DWPX_LOOP(rows, clamp)                                                            \
    __asm__ volatile("push {r4-r11, lr}\n\t"                                                  \
                     "sub sp, sp, #28\n\t"                                                    \
                     "ldr r8, [r1, #16]\n\t"                                                  \
                     "ldrd r9, r10, [r1, #24]\n\t"                                            \
                     "str r8, [sp]\n\t"                                                       \
                     "strd r9, r10, [sp, #4]\n\t"                                             \
                     "ldr r9, [r1, #36]\n\t"                                                  \
                     "strd r1, r9, [sp, #12]\n\t"                                             \
                     "ldr r9, [r1, #48]\n\t"                                                  \
                     "str r9, [sp, #20]\n\t"                                                  \
                     "ldrd r2, r3, [r1]\n\t"                                                  \
                     "ldrd r12, lr, [r1, #8]\n\t"                                             \
                     "ldr r1, [r1, #20]\n\t"                                                  \
                     "1:\n\t"                                                                 \
                     "ldrd r4, r5, [r0, #72]\n\t"                                             \
                     "ldrd r6, r7, [r0, #80]\n\t" rows                                        \
                             MCU_DW4_RUN_RQ("r4", "88", "104") MCU_DW4_RUN_RQ("r5", "112", "128")       \
                                 MCU_DW4_RUN_RQ("r6", "136", "152") MCU_DW4_RUN_RQ("r7", "160", "176")  \
                     "pkhbt r4, r4, r6, lsl #16\n\t"                                          \
                     "pkhbt r5, r5, r7, lsl #16\n\t"                                          \
                     "and r4, r4, #0x00FF00FF\n\t"                                            \
                     "and r5, r5, #0x00FF00FF\n\t"                                            \
                     "orr r4, r4, r5, lsl #8\n\t" clamp                                      \
                     "str r4, [lr], #4\n\t"                                                   \
                     "add r0, r0, #184\n\t"                                                   \
                     "ldr r8, [sp]\n\t"                                                       \
                     "cmp r0, r8\n\t"                                                         \
                     "bne 1b\n\t"                                                             \
                     "ldr r8, [sp, #12]\n\t"                                                  \
                     "ldrd r9, r10, [r8, #40]\n\t"                                            \
                     "add r2, r2, r9\n\t"                                                     \
                     "add r3, r3, r9\n\t"                                                     \
                     "add r12, r12, r9\n\t"                                                   \
                     "add lr, lr, r10\n\t"                                                    \
                     "ldr r0, [r8, #32]\n\t"                                                  \
                     "ldr r9, [sp, #16]\n\t"                                                  \
                     "subs r9, r9, #1\n\t"                                                    \
                     "str r9, [sp, #16]\n\t"                                                  \
                     "bne 1b\n\t"                                                             \
                     "add sp, sp, #28\n\t"                                                    \
                     "pop {r4-r11, pc}\n\t")
/* Per byte: SSUB8 sets GE where the value >= min, SEL keeps it there; then against max. */
#define MCU_DWPX_CLAMP                                                                        \
    "ldrd r8, r9, [sp, #4]\n\t"                                                               \
    "ssub8 r10, r4, r8\n\t"                                                                   \
    "sel r4, r4, r8\n\t"                                                                      \
    "ssub8 r10, r9, r4\n\t"                                                                   \
    "sel r4, r4, r9\n\t"
/* The clamp where the flag asks for it (r5 is free once the bytes are packed). */
#define MCU_DWPX_CLAMP_IF "ldr r5, [sp, #20]\n\t" "cbz r5, 2f\n\t" MCU_DWPX_CLAMP "2:\n\t"

/* Every group of a row of output pixels (at least one), widened or raw ring, the clamp behind a
 * branch; and the widened ring's loop for activation ranges narrower than int8 and for the full
 * range (SSAT clamps), for a kernel that defines MCU_DWPX_WIDE_SPLIT (flash for speed). */
static __attribute__((naked, noinline, unused)) void mcu_dwpx_wide(const mcu_dwpx_group *t, const mcu_dwpx_px *a)
{
    (void)t; /* in r0 */
    (void)a; /* in r1 */
    MCU_DWPX_LOOP(MCU_DWPX_WIDE_ROWS, MCU_DWPX_CLAMP_IF);
}

static __attribute__((naked, noinline, unused)) void mcu_dwpx_raw(const mcu_dwpx_group *t, const mcu_dwpx_px *a)
{
    (void)t;
    (void)a;
    MCU_DWPX_LOOP(MCU_DWPX_RAW_ROWS, MCU_DWPX_CLAMP_IF);
}

static __attribute__((naked, noinline, unused)) void mcu_dwpx_wide_clamp(const mcu_dwpx_group *t,
                                                                         const mcu_dwpx_px *a)
{
    (void)t;
    (void)a;
    MCU_DWPX_LOOP(MCU_DWPX_WIDE_ROWS, MCU_DWPX_CLAMP);
}

static __attribute__((naked, noinline, unused)) void mcu_dwpx_wide_full(const mcu_dwpx_group *t,
                                                                        const mcu_dwpx_px *a)
{
    (void)t;
    (void)a;
    MCU_DWPX_LOOP(MCU_DWPX_WIDE_ROWS, "");
}
#undef MCU_DWPX_LOOP
#undef MCU_DWPX_CLAMP
#undef MCU_DWPX_CLAMP_IF
#undef MCU_DWPX_TAP
#undef MCU_DWPX_ROW
#undef MCU_DWPX_RTAP
#undef MCU_DWPX_RROW
#undef MCU_DWPX_WIDE_ROWS
#undef MCU_DWPX_RAW_ROWS
#else
/* The same loop in C with the instructions' arithmetic. */
#define MCU_DWPX_WTAP(xp, wp)                                                                 \
    do {                                                                                      \
        const uint32_t x02_ = mcu_load_u32(xp), x13_ = mcu_load_u32((xp) + 4);                \
        a0 = mcu_smlabb(x02_, (wp)[0], a0);                                                   \
        a2 = mcu_smlatt(x02_, (wp)[0], a2);                                                   \
        a1 = mcu_smlabb(x13_, (wp)[1], a1);                                                   \
        a3 = mcu_smlatt(x13_, (wp)[1], a3);                                                   \
    } while (0)
static void mcu_dwpx_run_any(const mcu_dwpx_group *t, const mcu_dwpx_px *a, int wide)
{
    const int8_t *x0 = a->x[0], *x1 = a->x[1], *x2 = a->x[2];
    int8_t *y = a->y;
    (void)t; /* a->start */
    for (int32_t px = 0; px < a->pixels; ++px, x0 += a->xskip, x1 += a->xskip, x2 += a->xskip, y += a->yskip) {
        const int32_t gstep = wide ? a->gs : 4;
        for (t = a->start; t != a->end; ++t, x0 += gstep, x1 += gstep, x2 += gstep, y += 4) {
            uint32_t a0 = t->bias[0], a1 = t->bias[1], a2 = t->bias[2], a3 = t->bias[3];
            if (wide) {
                for (int32_t j = 0; j < 3; ++j) {
                    MCU_DWPX_WTAP(x0 + 8 * j, t->w + 2 * j);
                    MCU_DWPX_WTAP(x1 + 8 * j, t->w + 6 + 2 * j);
                    MCU_DWPX_WTAP(x2 + 8 * j, t->w + 12 + 2 * j);
                }
            } else {
                const int32_t ch = a->gs; /* the column step of MCU_DW4_ROW3 */
                MCU_DW4_ROW3(x0, t->w);
                MCU_DW4_ROW3(x1, t->w + 6);
                MCU_DW4_ROW3(x2, t->w + 12);
            }
            const uint32_t v = mcu_rq4_pack_s8(t->rq, a0, a1, a2, a3);
            mcu_store_u32(y, a->clamp ? mcu_clamp4_s8(v, a->min4, a->max4) : v);
        }
    }
}

static inline void mcu_dwpx_wide(const mcu_dwpx_group *t, const mcu_dwpx_px *a)
{
    mcu_dwpx_run_any(t, a, 1);
}

static inline void mcu_dwpx_raw(const mcu_dwpx_group *t, const mcu_dwpx_px *a)
{
    mcu_dwpx_run_any(t, a, 0);
}

static inline void mcu_dwpx_wide_clamp(const mcu_dwpx_group *t, const mcu_dwpx_px *a)
{
    mcu_dwpx_run_any(t, a, 1);
}

static inline void mcu_dwpx_wide_full(const mcu_dwpx_group *t, const mcu_dwpx_px *a)
{
    mcu_dwpx_run_any(t, a, 1);
}
#undef MCU_DWPX_WTAP
#endif

/* Padded row of input row ih, x offset to the chunk's first channel, the zero-point outside the
 * input. Widened ring: one padded row a group, SXTB16 lane pairs (x0, x2), (x1, x3) per column;
 * raw: the groups' bytes column after column. */
static inline __attribute__((always_inline)) void mcu_dwpx_fill(const mcu_dwpx_chunk *k, const int8_t *x,
                                                                 int32_t ih, int8_t *slot, int wide)
{
    const int32_t ch = k->ch, cols = k->cols;
    /* padded columns [lo, hi) hold input columns; none when the row is outside */
    int32_t lo = k->pad_left < cols ? k->pad_left : cols;
    int32_t hi = k->pad_left + k->in_w < cols ? k->pad_left + k->in_w : cols;
    if (ih < 0 || ih >= k->in_h) {
        lo = hi = cols;
    }
    hi = hi > lo ? hi : lo;
    const int8_t *row = x + (ih >= 0 && ih < k->in_h ? ih * k->in_w * ch : 0) + (lo - k->pad_left) * ch;
    if (!wide) {
        const int32_t cs = 4 * k->groups;
        for (int32_t b = 0; b < lo * cs; b += 4) {
            mcu_store_u32(slot + b, k->zpw);
            __asm__("" ::: "memory"); /* no memset call: the kernels reference no libc function */
        }
        const int8_t *src = row;
        for (int8_t *d = slot + lo * cs, *end = slot + hi * cs; d != end; d += cs, src += ch) {
            int32_t b = 0;
            for (; b + 8 <= cs; b += 8) { /* two words a step: the loop costs as much as the copy */
                const uint32_t v0 = mcu_load_u32(src + b), v1 = mcu_load_u32(src + b + 4);
                mcu_store_u32(d + b, v0);
                mcu_store_u32(d + b + 4, v1);
                __asm__("" ::: "memory"); /* no memcpy call */
            }
            if (b < cs) {
                mcu_store_u32(d + b, mcu_load_u32(src + b));
            }
        }
        for (int32_t b = hi * cs; b < cols * cs; b += 4) {
            mcu_store_u32(slot + b, k->zpw);
            __asm__("" ::: "memory");
        }
        return;
    }
    const uint32_t zpw = mcu_sxtb16(k->zpw);
    for (int32_t gi = 0; gi < k->groups; ++gi, slot += 8 * cols, row += 4) {
        int8_t *d = slot;
        for (int32_t pc = 0; pc < lo; ++pc, d += 8) {
            mcu_store_u32(d, zpw);
            mcu_store_u32(d + 4, zpw);
            __asm__("" ::: "memory");
        }
        const int8_t *src = row;
        int8_t *const end = slot + 8 * hi;
        for (; d + 16 <= end; d += 16, src += 2 * ch) { /* two columns a step */
            const uint32_t v0 = mcu_load_u32(src), v1 = mcu_load_u32(src + ch);
            mcu_store_u32(d, mcu_sxtb16(v0));
            mcu_store_u32(d + 4, mcu_sxtb16_ror8(v0));
            mcu_store_u32(d + 8, mcu_sxtb16(v1));
            mcu_store_u32(d + 12, mcu_sxtb16_ror8(v1));
        }
        if (d != end) {
            const uint32_t v = mcu_load_u32(src);
            mcu_store_u32(d, mcu_sxtb16(v));
            mcu_store_u32(d + 4, mcu_sxtb16_ror8(v));
            d += 8;
        }
        for (int32_t pc = hi; pc < cols; ++pc, d += 8) {
            mcu_store_u32(d, zpw);
            mcu_store_u32(d + 4, zpw);
            __asm__("" ::: "memory");
        }
    }
}

/* Output rows [oh0, oh1) of the current chunk: x is the input image offset to the chunk's first
 * channel, y output row oh0 offset likewise, y_row the output's row stride. Each output row is
 * computed once the input rows it reads are in the ring, and written left to right; an input row
 * is read (into the ring) before the output row of the same index is written, so y may be x
 * itself (the in-place kernel).
 *
 * wide (a constant at each call, k->wide, so that a kernel holds the code of one ring only: flash):
 * widened once, an input is read by up to nine taps at stride 1; at stride 2 by four at most (two
 * rows of a column are filled per output row, two columns per pixel), which does not pay back the
 * widening. The in-place kernel (stride 1) takes the widened ring, the other (MobileNet's strided
 * layers) the raw one. */
static inline __attribute__((always_inline)) void mcu_dwpx_rows(const mcu_dwpx_chunk *k, const int8_t *x,
                                                                 int32_t oh0, int32_t oh1, int8_t *y, int32_t y_row,
                                                                 int wide)
{
    _Alignas(4) int8_t ring[MCU_DWPX_RING_BYTES];
    const int32_t slot_bytes = k->groups * k->cols * k->colb;
    mcu_dwpx_px a;
    a.start = k->g;
    a.end = k->g + k->groups;
    a.pixels = k->out_w;
    a.gs = wide ? 8 * k->cols : 4 * k->groups;
    a.xskip = wide ? 8 * k->stride_w - k->groups * a.gs : (k->stride_w - 1) * a.gs;
    a.clamp = k->clamp;
    a.yskip = k->ch - 4 * k->groups;
    a.min4 = k->min4;
    a.max4 = k->max4;
    int32_t next = oh0 * k->stride_h - k->pad_top; /* the first input row not yet in the ring */
    for (int32_t oh = oh0; oh < oh1; ++oh, y += y_row) {
        const int32_t ih0 = oh * k->stride_h - k->pad_top;
        next = next > ih0 ? next : ih0;
        int32_t slot = ih0 % 3;
        slot += slot < 0 ? 3 : 0;
        for (int32_t i = 0; i < 3; ++i, slot = slot == 2 ? 0 : slot + 1) {
            a.x[i] = ring + slot * slot_bytes;
            if (ih0 + i >= next) {
                mcu_dwpx_fill(k, x, ih0 + i, ring + slot * slot_bytes, wide);
            }
        }
        next = ih0 + 3;
        a.y = y;
        if (wide) {
#if MCU_DWPX_WIDE_SPLIT
            if (k->clamp) {
                mcu_dwpx_wide_clamp(k->g, &a);
            } else {
                mcu_dwpx_wide_full(k->g, &a);
            }
#else
            mcu_dwpx_wide(k->g, &a);
#endif
        } else {
            mcu_dwpx_raw(k->g, &a);
        }
    }
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_DW_PX_S8_DSP_H */
