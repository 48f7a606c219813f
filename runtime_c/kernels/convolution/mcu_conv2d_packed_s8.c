/* Convolution and fully connected layers with weights packed ahead of time for the dual-MAC loop
 * (convolution/gemm_s8_dsp.h explains the layout and why). One output pixel at a time: its window
 * becomes a 16-bit column on the stack, then four output channels per block. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "conv_column_s8.h"
#include "conv_k3c3_rows_s8_dsp.h"
#include "conv_narrow_s8_dsp.h"
#include "gemm_s8_dsp.h"
#include "pair_bytes_s8_dsp.h"
#include "pw3_s8_dsp.h"
#include "pw4_s8_dsp.h"
#include "pw_small_s8_dsp.h"
#include "../common/requant.h"
#include "../common/window.h"

int32_t mcu_conv2d_packed_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    (void)p; /* the column lives on the stack */
    return 0;
}

/* What every block of a layer shares, in locals: int8 stores may alias anything, so fields read
 * through the params pointer would be reloaded after every store. */
typedef struct {
    int32_t cout, kp, words;
    int32_t output_offset, act_min, act_max;
    uint32_t bounds[2]; /* act_min, act_max in four bytes each: the layout mcu_pixel_packed reads */
    int clamp;          /* the activation range is narrower than int8 */
    int right;          /* the stream's flag: every shift in [-23, -1], requantized from K */
    int group;          /* MCU_PACKED_FLAG_GROUP: the weights wait (flash), pointwise pairs share reads */
    int px2;            /* the pair loops' tail: clamp, 2 where act_min >= output_offset (MCU_PX2_RQ_RELU), and then
                         * 4 where the biases allow MCU_PX2_RQ_DIFF, or 8 for a scaled stream */
    int px2f;           /* px2 for blocks forward (mcu_px2_tail_flat): the flat pairs' */
#if MCU_PACKED_SCALED
    int scaled;         /* MCU_PACKED_FLAG_SCALED: (multiplier, C) words, mcu_packed_rq_scaled */
    int32_t skip;       /* bytes the flat pairs' stream pointer stops short of the next block: 32 when scaled */
#endif
} layer_t;

/* The layer's stream is scaled (0 in a build without scaled streams, whose layer_t and code stay as they were). */
static inline int layer_scaled(const layer_t *l)
{
#if MCU_PACKED_SCALED
    return l->scaled;
#else
    (void)l;
    return 0;
#endif
}

/* The bytes the flat pairs' stream pointer stops short of the next block: 32 for a scaled stream (its 8 spare
 * requantization words), else 0. */
#if MCU_S8_DSP_NATIVE
static inline int32_t layer_skip(const layer_t *l)
{
    return layer_scaled(l) ? 32 : 0;
}
#endif

/* One block in C: the host, the emulated build, and layers with shifts outside [-23, -1]. */
static void block_c(const layer_t *l, const int16_t *col, const int32_t *blob, int8_t *y, int32_t n)
{
    uint32_t acc[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[2], (uint32_t)blob[3]};
    mcu_dot4_packed(col, blob + 4, l->kp, acc);
    const int32_t *rq = blob + 4 + 2 * l->kp;
    for (int32_t o = 0; o < n; ++o, rq += 4) {
        const int32_t a = mcu_u32_to_s32(acc[o]);
        if (layer_scaled(l)) {
            const int32_t *mc = blob + 4 + 2 * l->kp + 2 * o;
            y[o] = (int8_t)mcu_clamp_s32(mcu_packed_rq_scaled(a, mc[0], mc[1]), l->act_min, l->act_max);
            continue;
        }
        y[o] = l->right ? (int8_t)mcu_clamp_s32(mcu_packed_rq_s8(a, rq), l->act_min, l->act_max)
                        : mcu_requantize_to_s8_fast(a, rq[2], rq[3], l->output_offset, l->act_min, l->act_max);
    }
}

/* Output pixel y from its column, four channels per block; a last partial block computes padded
 * channels (zero weights) and writes only the real ones. */
static void pixel(const layer_t *l, const int16_t *col, const int32_t *blocks, int8_t *y)
{
    const int32_t *blob = blocks;
    int32_t oc = 0;
#if MCU_S8_DSP_NATIVE
    if (l->right && !layer_scaled(l)) {
        /* in locals: the assembly's memory clobber would reload fields of *l every block */
        const int32_t whole = l->cout & ~3;
        if (whole > 0) {
            blob = mcu_pixel_packed(col, l->kp, blob, y, y + whole, l->bounds, l->clamp);
            oc = whole;
        }
    }
#endif
    for (; oc + 4 <= l->cout; oc += 4) {
        block_c(l, col, blob, y + oc, 4);
        blob += l->words;
    }
    if (oc < l->cout) {
        block_c(l, col, blob, y + oc, l->cout - oc);
    }
}

#ifndef MCU_PACKED_BYTES
#define MCU_PACKED_BYTES 1 /* 0: a model's build without byte streams (specialise.py) */
#endif
#if MCU_PACKED_BYTES
/* Output pixel y from its column, from a byte stream (MCU_PACKED_FLAG_BYTES, pair_bytes_s8_dsp.h):
 * four channels per block, a last partial block writing only the real ones. */
static void pixel_bytes(const layer_t *l, const int16_t *col, const int32_t *blob, int8_t *y)
{
    const int32_t words = mcu_bytes_block_words(l->kp);
    int32_t oc = 0;
#if MCU_S8_DSP_NATIVE
    if (l->right) {
        /* in locals: the assembly's memory clobber would reload fields of *l every block */
        const int32_t kp = l->kp, whole = l->cout & ~3, clamp = l->clamp;
        const uint32_t min4 = l->bounds[0], max4 = l->bounds[1];
        for (; oc < whole; oc += 4) {
            const uint32_t v = mcu_pair_bytes_block(col, &blob, kp);
            mcu_store_u32(y + oc, clamp ? mcu_pair_bytes_clamp(v, min4, max4) : v);
        }
    }
#endif
    for (; oc < l->cout; oc += 4, blob += words) {
        int32_t acc[4];
        mcu_pair_bytes_dot(col, blob, l->kp, acc);
        const int32_t *rq = blob + words - 16;
        const int32_t n = l->cout - oc < 4 ? l->cout - oc : 4;
        for (int32_t o = 0; o < n; ++o, rq += 4) {
            y[oc + o] = l->right ? (int8_t)mcu_clamp_s32(mcu_packed_rq_s8(acc[o], rq), l->act_min, l->act_max)
                                 : mcu_requantize_to_s8_fast(acc[o], rq[2], rq[3], l->output_offset, l->act_min,
                                                             l->act_max);
        }
    }
}
#endif

/* What mcu_window_column_s16 needs of a windowed layer, in locals (as layer_t). */
typedef struct {
    int32_t sh, sw, pt, pl; /* strides and padding */
    int32_t iw_max, ih_max; /* the last window origins whose window lies wholly inside the input */
    int32_t c, row;         /* input channels, bytes of an input row */
    int32_t run, step, kh;  /* a window row's bytes, the distance between window rows, kernel rows */
    int32_t in_h, in_w, kw, dh;
    uint32_t off2;          /* the input offset in both halves */
    int whole;              /* windows inside the input take mcu_window_column_s16 */
    int rows;               /* so do the in-input parts of the others, row by row (whole pixels of 16 bytes) */
} window_t;

static window_t window_of(const mcu_conv2d_s8_params *p)
{
    const mcu_shape4 in = p->input;
    const int32_t run = p->kernel_w * in.c;
    window_t g = {p->stride_h, p->stride_w, p->pad_top, p->pad_left, in.w - p->kernel_w,
                  in.h - 1 - (p->kernel_h - 1) * p->dilation_h, in.c, in.w * in.c, run,
                  p->dilation_h * in.w * in.c, p->kernel_h, in.h, in.w, p->kernel_w, p->dilation_h,
                  ((uint32_t)p->input_offset & 0xFFFFu) * 0x10001u, 0, 0};
#if MCU_S8_DSP_NATIVE
    g.whole = p->dilation_w == 1 && run % 16 == 0 && run > 0;
    g.rows = g.whole && in.c % 16 == 0;
#endif
    return g;
}

#if MCU_S8_DSP_NATIVE
/* n int16 zeros (n a multiple of 16) in words: mcu_zero_s16 stores one int16 at a time. */
static inline void zero_s16(int16_t *dst, int32_t n)
{
    uint32_t *w = (uint32_t *)(void *)dst;
    for (int32_t i = 0; i < n; i += 16, w += 8) {
        w[0] = 0;
        w[1] = 0;
        w[2] = 0;
        w[3] = 0;
        w[4] = 0;
        w[5] = 0;
        w[6] = 0;
        w[7] = 0;
        __asm__("" ::: "memory"); /* no memset call */
    }
}

/* The column of a window over the padding: each kernel row's in-input pixels through
 * mcu_window_column_s16, zeros around (a padded tap contributes nothing). Apart from window_column,
 * whose inlined fast case it would crowd: about an eighth of resnet8's windows. */
static __attribute__((noinline)) void padded_column(const window_t *g, const int8_t *x_n, int32_t ih0, int32_t iw0,
                                                    int16_t *col)
{
    int32_t lo = 0, hi = 0;
    mcu_window_taps(iw0, g->kw, 1, g->in_w, &lo, &hi);
    const int32_t c = g->c, run = g->run, zl = lo * c, n = (hi - lo) * c;
    const uint32_t off2 = g->off2;
    for (int32_t i = 0, ih = ih0; i < g->kh; ++i, ih += g->dh, col += run) {
        if (ih < 0 || ih >= g->in_h || n <= 0) {
            zero_s16(col, run);
            continue;
        }
        zero_s16(col, zl);
        mcu_window_column_s16(x_n + ih * g->row + (iw0 + lo) * c, n, 0, 1, off2, col + zl);
        zero_s16(col + zl + n, run - zl - n);
    }
}
#endif

/* The column of output pixel (oh, ow) of a windowed layer. */
static inline void window_column(const mcu_conv2d_s8_params *p, const window_t *g, const int8_t *x_n, int32_t oh,
                                 int32_t ow, int32_t kp, int16_t *col, int8_t *raw)
{
#if MCU_S8_DSP_NATIVE
    const int32_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
    if (g->whole && ih0 >= 0 && iw0 >= 0 && iw0 <= g->iw_max && ih0 <= g->ih_max) {
        mcu_window_column_s16(x_n + ih0 * g->row + iw0 * g->c, g->run, g->step, g->kh, g->off2, col);
        return;
    }
    if (g->rows) {
        padded_column(g, x_n, ih0, iw0, col);
        return;
    }
#else
    (void)g;
#endif
    mcu_conv_column_s16(p, x_n, oh, ow, kp, col, raw);
}

#if MCU_S8_DSP_NATIVE
/* A pass of the pixel-pair or four-pixel loops over every block (l->cout a multiple of 4) of the
 * pixel whose outputs start at y: from the first block on, or back from the last (mcu_block_order),
 * the loops alternating them pass by pass. */
typedef struct {
    mcu_block_order order;
    const int32_t *blob;
    int8_t *y, *y_end;
    int tail; /* the flat pairs' (layer_t's px2f forward, px2 backward) */
} pass_t;

static inline pass_t pass_of(const layer_t *l, const int32_t *packed, int8_t *y, int back)
{
    if (!back) {
        return (pass_t){{layer_skip(l), 0}, packed, y, y + l->cout, l->px2f};
    }
    /* y_end is one block before y: compared, never stored through (as an address it may lie before
     * the output) */
    return (pass_t){{layer_skip(l) - 8 * l->words, -8}, packed + (l->cout / 4 - 1) * l->words, y + l->cout - 4,
                    (int8_t *)((uintptr_t)y - 4u), l->px2};
}
#endif

/* The flat pairs' tail for blocks forward over a stream whose blocks `skip` bytes apart (mcu_px2_tail_flat). */
static int px2_forward(int px2, int32_t skip)
{
#if MCU_S8_DSP_NATIVE
    const mcu_block_order fwd = {skip, 0};
    return mcu_px2_tail_flat(px2, &fwd);
#else
    (void)skip;
    return px2;
#endif
}

/* The K words of a right shift R and output offset (mcu_packed_rq_s8), as tuned.pack_layer makes them. */
static void packed_k(int32_t r, int32_t output_offset, uint32_t *lo, int32_t *hi)
{
    *lo = (1u << 30) | (r == 1 ? 1u << 31 : 0u);
    *hi = (r >= 2 ? (int32_t)1 << (r - 2) : 0) + output_offset * ((int32_t)1 << (r - 1));
}

/* The pair loops' tail bit for a ReLU layer's requantization by difference (mcu_px2_diff_ok): word
 * streams on the core only (byte streams have other blocks, and nothing else reads the bit). */
static int px2_diff(const int32_t *stream, uint32_t flags, int32_t cout, int32_t kp)
{
#if MCU_S8_DSP_NATIVE
    if ((flags & MCU_PACKED_FLAG_RIGHT) && !(flags & MCU_PACKED_FLAG_BYTES)) {
        return mcu_px2_diff_ok(stream + MCU_PACKED_HEADER_WORDS, cout, kp);
    }
#else
    (void)stream, (void)flags, (void)cout, (void)kp;
#endif
    return 0;
}

/* The stream's header names the layer it was packed for (output channels, taps, output offset);
 * its requantization constants are checked where C code shifts by them (the assembly of the core's
 * fast path cannot fault on any value). */
static int check_stream(const int32_t *stream, int32_t cout, int32_t kp, int32_t output_offset, uint32_t *flags_out)
{
    const uint32_t flags = (uint32_t)stream[1];
    /* a build without scaled streams (MCU_PACKED_SCALED 0, specialise.py) refuses them */
    const uint32_t known = MCU_PACKED_FLAG_RIGHT | MCU_PACKED_FLAG_BYTES | MCU_PACKED_FLAG_GROUP |
                           MCU_PACKED_FLAG_ROWS | (MCU_PACKED_SCALED ? MCU_PACKED_FLAG_SCALED : 0u);
    if (stream[0] != MCU_PACKED_MAGIC || (flags & ~(0xFF00u | known)) != 0 ||
        stream[2] != cout || stream[3] != kp || ((flags >> 8) & 0xFFu) != ((uint32_t)output_offset & 0xFFu)) {
        return 0;
    }
    *flags_out = flags;
    const int right = (int)(flags & MCU_PACKED_FLAG_RIGHT);
    const int bytes = (flags & MCU_PACKED_FLAG_BYTES) != 0;
    if (MCU_PACKED_SCALED && (flags & MCU_PACKED_FLAG_SCALED)) { /* word streams of shifts brought to one; no value of theirs can fault */
        return right && !bytes;
    }
#if MCU_S8_DSP_NATIVE
    if (right) {
        return 1;
    }
#endif
    const int32_t words = bytes ? mcu_bytes_block_words(kp) : mcu_packed_block_words(kp);
    const int32_t *blob = stream + MCU_PACKED_HEADER_WORDS;
    for (int32_t oc0 = 0; oc0 < cout; oc0 += 4, blob += words) {
        const int32_t *rq = blob + words - 16;
        for (int32_t o = 0; o < 4 && oc0 + o < cout; ++o, rq += 4) {
            int ok;
            if (right) {
                uint32_t lo;
                int32_t hi;
                ok = rq[2] >= 0 && rq[3] >= 0 && rq[3] <= 22;
                if (ok) {
                    packed_k(rq[3] + 1, output_offset, &lo, &hi);
                    ok = (uint32_t)rq[0] == lo && rq[1] == hi;
                }
            } else {
                ok = rq[3] >= -31 && rq[3] <= 30 && mcu_quant_valid(rq[2], rq[3]);
            }
            if (!ok) {
                return 0;
            }
        }
    }
    return 1;
}

#if MCU_S8_DSP_NATIVE
/* The column buffer's int16, at least MCU_PACKED_PW_GROUP_TAPS: a build with a flat pointwise layer
 * whose stream outgrows a flash cache and has MCU_PACKED_FLAG_GROUP (specialise.py: ds_cnn's 64->64
 * layers, mobilenet_v1's from 64 channels on, where the weights wait behind a cache a part of the stream
 * fits) gives it room for 18 pairs of each such layer; every build groups the pairs its buffer holds, up to
 * MCU_PW_GROUP_MAX. 0: no
 * layer of this build groups its pairs, no code for it. */
#if defined(MCU_PACKED_PW_GROUP_TAPS) && MCU_PACKED_PW_GROUP_TAPS == 0
#define PW_GROUPS_BUILT 0
#else
#define PW_GROUPS_BUILT 1
#endif
#if !defined(MCU_PACKED_PW_GROUP_TAPS)
#define MCU_PACKED_PW_GROUP_TAPS 0
#endif
/* Four-pixel units sharing one read of a windowed layer's stream: 4 (specialise.py) in a model's build with windows over MCU_PIXEL_WIDE_TAPS whose streams outgrow a flash cache
 * (specialise.py: resnet8's 288- and 576-tap layers, streams of 19 to 74 kB), whose buffer then holds
 * that many units' columns; 1 (no grouping, no more stack) otherwise. */
#ifndef MCU_PIXEL4_GROUP
#define MCU_PIXEL4_GROUP 1
#endif
#if MCU_PIXEL4_GROUP > 1 && !defined(__ARM_ARCH_8M_MAIN__)
/* Armv8-M Mainline (Cortex-M33) only: the groups' extra calls cost cycles wherever no flash cache the
 * size of the U575's saves misses (resnet8 at zero wait states +0.2 %, with the L4R5's 1 kB ART +0.8 %),
 * so the Cortex-M4 builds keep one unit at a time and their stack. */
#undef MCU_PIXEL4_GROUP
#define MCU_PIXEL4_GROUP 1
#endif
#define MCU_PIXEL4_GROUP_TAPS (MCU_PIXEL4_GROUP * (3 * MCU_PIXEL4_B + MCU_PIXEL4_TAPS))
#define MCU_PACKED_BUF_TAPS1                                                                              \
    (MCU_PACKED_PW_GROUP_TAPS > MCU_PACKED_COL_TAPS ? MCU_PACKED_PW_GROUP_TAPS : MCU_PACKED_COL_TAPS)
#define MCU_PACKED_BUF_TAPS2 (MCU_PW3_TAPS > MCU_PACKED_BUF_TAPS1 ? MCU_PW3_TAPS : MCU_PACKED_BUF_TAPS1)
#define MCU_PACKED_BUF_TAPS3 (MCU_PW4_TAPS > MCU_PACKED_BUF_TAPS2 ? MCU_PW4_TAPS : MCU_PACKED_BUF_TAPS2)
#define MCU_PACKED_BUF_TAPS                                                                               \
    (MCU_PIXEL4_GROUP_TAPS > MCU_PACKED_BUF_TAPS3 ? MCU_PIXEL4_GROUP_TAPS : MCU_PACKED_BUF_TAPS3)
/* The column buffer's array: at least the widened rows' slots where a layer takes them (the section's need) */
#if MCU_S8_DSP && MCU_PACKED_NARROW && MCU_PACKED_NARROW_K3C3 && MCU_PACKED_NARROW_ROWS
#define MCU_PACKED_COL_ARRAY (MCU_PACKED_BUF_TAPS > MCU_K3C3_BUF_TAPS ? MCU_PACKED_BUF_TAPS : MCU_K3C3_BUF_TAPS)
#else
#define MCU_PACKED_COL_ARRAY MCU_PACKED_BUF_TAPS
#endif
/* Pairs sharing one read of the stream: a 6 x 6 image's 18 fill the buffer specialise.py sizes for them at 128 taps;
 * a layer of fewer taps groups what that buffer holds, up to this (mobilenet_v1's 12 x 12 layer of 64 taps: 33 of its
 * 72 pairs, its 9.5 kB stream read three times where 18 read it four). */
#define MCU_PW_GROUP_MAX 36

/* How many pairs of a pointwise layer share a read of its stream (mcu_conv2d_packed_s8): as many as
 * the buffer holds (`fit`), up to MCU_PW_GROUP_MAX, when the stream outgrows a flash cache of
 * MCU_PIXEL4_STREAM_MIN bytes and has MCU_PACKED_FLAG_GROUP (the packer sets it where the weights wait
 * behind a cache that holds a part of the stream, mcu/backends/optimized/tuned.py groups_pay: not at
 * zero wait states, nor behind the L4R5's 256 B data cache, where the groups' extra calls cost more
 * than the misses they save); 1 (the pairs one by one) otherwise. */
#if MCU_PACKED_PW_PAIRS
static int32_t pw_group(const layer_t *l, int32_t fit)
{
    if (!PW_GROUPS_BUILT || !l->group || (int64_t)l->words * 4 * (l->cout / 4) <= MCU_PIXEL4_STREAM_MIN) {
        return 1;
    }
    return fit < MCU_PW_GROUP_MAX ? fit : MCU_PW_GROUP_MAX;
}
#endif

#if MCU_PACKED_PW_PAIRS
/* 1 where the flat pairs' passes alternate their block order (pass_of): a stream over half a flash cache of
 * MCU_PIXEL4_STREAM_MIN bytes whose weights wait behind such a cache (MCU_PACKED_FLAG_GROUP), so that a pass starts
 * on the lines the last one left cached; 0 (every pass forward) for one that stays cached with the loop's code, or
 * whose weights no cache of that size holds (zero wait states, `--weights-in fast`, the L4R5's 256 B data cache),
 * whose scaled blocks then all take the forward tail (MCU_PX2_FWD: 6 cycles less a block than backward). */
static int pw_turns(const layer_t *l)
{
    return l->group && (int64_t)l->words * 4 * (l->cout / 4) > MCU_PIXEL4_STREAM_MIN / 2;
}
#endif

#if MCU_PACKED_PW_PAIRS || (MCU_PACKED_WINDOWS && MCU_PACKED_QUADS && MCU_PIXEL4_GROUP > 1)
/* Blocks of a part of the stream: at most half the cache's bytes, so a part and the loop's code stay
 * in a two-way cache together; at least one block. */
static int32_t pw_part_blocks(const layer_t *l)
{
    const int32_t blocks = l->cout / 4;
    const int32_t fit = MCU_PIXEL4_STREAM_MIN / 2 / (l->words * 4);
    const int32_t most = fit < 1 ? 1 : fit;
    const int32_t parts = (blocks + most - 1) / most;
    return (blocks + parts - 1) / parts; /* parts of equal size, the last one possibly smaller */
}
#endif

#if MCU_PACKED_PW_PAIRS
/* nb whole blocks of one pixel from its column (mcu_column_s8's, its state after it), as pixel() computes them. */
static void pixel_blocks(const layer_t *l, const int16_t *col, const int32_t *blob, int8_t *y, int32_t nb)
{
    if (l->right && !layer_scaled(l)) {
        mcu_pixel_packed(col, l->kp, blob, y, y + 4 * nb, l->bounds, l->clamp);
        return;
    }
    for (int32_t k = 0; k < nb; ++k, blob += l->words, y += 4) {
        block_c(l, col, blob, y, 4);
    }
}

/* The fixed words of the states of a group's pairs 1 to n - 1 (columns pb int16 apart from col) for a chain
 * (MCU_PX2_CHAIN: one call runs a part for every pair, each pair's state naming the next): the sentinel, the
 * column start, the bounds, the stride and the next pair's state. Pair 0's state is the call's own. */
static void pw_chain_init(const layer_t *l, int16_t *col, int32_t pb, int32_t n)
{
    if (!mcu_px2_chains(l->px2f, l->kp)) {
        return;
    }
    for (int32_t g = 1; g < n; ++g) {
        uint32_t *st = (uint32_t *)(void *)(col + g * pb + 2 * l->kp);
        st[MCU_PX2_ST_SENTINEL] = 0x80008000u;
        st[MCU_PX2_ST_COL] = (uint32_t)(uintptr_t)(col + g * pb);
        st[MCU_PX2_ST_MIN4] = l->bounds[0];
        st[MCU_PX2_ST_MAX4] = l->bounds[1];
        st[MCU_PX2_ST_DY] = (uint32_t)l->cout;
        st[MCU_PX2_ST_NEXT] = g + 1 < n ? (uint32_t)(uintptr_t)(col + (g + 1) * pb + 2 * l->kp) : 0u;
    }
}

/* The blocks [b0, b0 + nb) of n pairs of a group (columns pb int16 apart from col; pair g's pixel A outputs at
 * y0 + g dy): one call for them all where they chain (pw_chain_init wrote their states' fixed words, pw_parts
 * the last one's next; here each pair's outputs, while the part's start and end go from pair to pair), else one
 * call a pair. Where the last pair's next leads back to the first (pw_parts), the call runs the parts after this
 * one too, up to the last block. */
static void pw_part(const layer_t *l, int16_t *col, int32_t pb, const int32_t *packed, int8_t *y0, int32_t dy,
                    int32_t n, int32_t b0, int32_t nb)
{
    const int32_t kp = l->kp;
    const int32_t *blob = packed + b0 * l->words;
    y0 += 4 * b0;
    if (n >= 2 && mcu_px2_chains(l->px2f, l->kp)) {
        for (int32_t g = 1; g < n; ++g) {
            uint32_t *st = (uint32_t *)(void *)(col + g * pb + 2 * kp);
            st[MCU_PX2_ST_Y] = (uint32_t)(uintptr_t)(y0 + g * dy);
        }
        /* the first pair's state takes the part's start and the next pair's state from the order's words */
        const mcu_block_order chain = {(int32_t)(uintptr_t)blob, (int32_t)(uintptr_t)(col + pb + 2 * kp)};
        mcu_pixel2_packed(col, kp, blob, y0, y0 + 4 * nb, l->cout, l->bounds, l->px2f, &chain);
        return;
    }
    const mcu_block_order fwd = {layer_skip(l), 0};
    for (int32_t g = 0; g < n; ++g) {
        int8_t *yg = y0 + g * dy;
        mcu_pixel2_packed(col + g * pb, kp, blob, yg, yg + 4 * nb, l->cout, l->bounds, l->px2f, &fwd);
    }
}

/* Every part of n pairs of a group (pw_part), forward or (back) backward. Forward where the pairs chain, all in
 * one call: each part starts where the last one ended, so the last pair's state leads back to the first's
 * (MCU_PX2_CHAIN), with the stream's end and a part's bytes. */
static void pw_parts(const layer_t *l, int16_t *col, int32_t pb, const int32_t *packed, int8_t *y0, int32_t dy,
                     int32_t n, int back)
{
    const int32_t part = pw_part_blocks(l);
    const int32_t blocks = l->cout / 4;
    if (n >= 2 && mcu_px2_chains(l->px2f, l->kp)) {
        uint32_t *last = (uint32_t *)(void *)(col + (n - 1) * pb + 2 * l->kp);
        last[MCU_PX2_ST_NEXT] = back ? 0u : (uint32_t)(uintptr_t)(col + 2 * l->kp) + 1u;
        if (!back) {
            last[MCU_PX2_ST_GROUP_END] = (uint32_t)(uintptr_t)(packed + blocks * l->words);
            last[MCU_PX2_ST_PART_BYTES] = (uint32_t)(part * l->words * 4);
            pw_part(l, col, pb, packed, y0, dy, n, 0, part < blocks ? part : blocks);
            return;
        }
    }
    for (int32_t k = 0; k < blocks; k += part) {
        const int32_t b0 = back ? ((blocks - 1 - k) / part) * part : k;
        const int32_t nb = blocks - b0 < part ? blocks - b0 : part;
        pw_part(l, col, pb, packed, y0, dy, n, b0, nb);
    }
}

/* n pairs of a pointwise layer sharing each read of its stream: pair g is pixels a[g] and a[g] + 1 (c_in
 * bytes in, l->cout out each), and pixel `lone` (>= 0) alone, after them in the buffer. The columns of every
 * pair and pixel first, so all their inputs are read before any of their outputs is written; then the stream
 * by parts (pw_part_blocks), each part for every pair and the lone pixel, the parts forward or (back)
 * backward, so a group starts on the part the previous one left in the cache. */
static __attribute__((noinline)) void pw_group_run(const layer_t *l, const int32_t *packed, int16_t *col, const int8_t *input, int8_t *output,
                         const int64_t *a, int32_t n, int64_t lone, int32_t c_in, int32_t input_offset, int back)
{
    const int32_t kp = l->kp, pb = 2 * kp + MCU_PIXEL2_SPARE;
    for (int32_t g = 0; g < n; ++g) {
        const int8_t *x = input + a[g] * c_in;
        mcu_column2_s8(x, x + c_in, kp, input_offset, col + g * pb);
    }
    int16_t *col1 = col + n * pb;
    if (lone >= 0) {
        mcu_column_s8(input + lone * c_in, kp, input_offset, col1);
        mcu_pixel_packed_start(col1, kp);
    }
    const int32_t part = pw_part_blocks(l);
    const int32_t blocks = l->cout / 4;
    pw_chain_init(l, col, pb, n);
    /* a[] steps by two pixels, up or down */
    const int32_t dy = n >= 2 ? (int32_t)(a[1] - a[0]) * l->cout : 0;
    if (lone < 0) {
        if (n >= 1) {
            pw_parts(l, col, pb, packed, output + a[0] * l->cout, dy, n, back);
        }
        return;
    }
    for (int32_t k = 0; k < blocks; k += part) {
        const int32_t b0 = back ? ((blocks - 1 - k) / part) * part : k;
        const int32_t nb = blocks - b0 < part ? blocks - b0 : part;
        if (n >= 1) {
            pw_part(l, col, pb, packed, output + a[0] * l->cout, dy, n, b0, nb);
        }
        pixel_blocks(l, col1, packed + b0 * l->words, output + lone * l->cout + 4 * b0, nb);
    }
}
#endif
#endif

#if MCU_S8_DSP_NATIVE && MCU_PACKED_PW_PAIRS && MCU_PACKED_PW8
/* `pairs` pixel pairs of a flat pointwise layer of 8 input channels through mcu_pw8_pairs, the first
 * pair's pixel A at x (input) and y (output), the next ones 2 pixels on (step 1) or back (step -1).
 * `buf` holds the state (the column buffer, word-aligned). */
static void pw8_run(const layer_t *l, const int32_t *packed, void *buf, const int8_t *x, int8_t *y, int64_t pairs,
                    int step, int32_t input_offset)
{
#if defined(MCU_PW8_16_BUILT)
    if (mcu_pw8_16_takes(l->px2f, l->cout)) { /* as below, 16 channels out: pw_small_s8_dsp.h */
        mcu_pw8_16_run(x, y, (int32_t)pairs, step, input_offset, packed);
        return;
    }
#endif
#if defined(MCU_PW8_REGS_BUILT)
    if (mcu_pw8_regs_takes(l->px2f, l->cout)) { /* a scaled stream, its bytes whole, forward */
        const mcu_pw8r_state r = {x, (int32_t)pairs, 16 * step, step > 0 ? l->cout : -3 * l->cout, l->cout,
                                  ((uint32_t)input_offset & 0xFFFFu) * 0x10001u, packed, y};
        mcu_pw8_regs(&r);
        return;
    }
#endif
    mcu_pw8_state *st = (mcu_pw8_state *)buf;
    st->y = y;
    st->y_end = y + l->cout;
    st->min4 = l->bounds[0];
    st->max4 = l->bounds[1];
    st->stride = l->cout;
    st->stream_step = layer_skip(l);
    st->y_step = 0;
    st->x = x;
    st->dx = 16 * step;
    st->pairs = (int32_t)pairs;
    st->dy = step > 0 ? l->cout : -3 * l->cout;
    st->off2 = ((uint32_t)input_offset & 0xFFFFu) * 0x10001u;
    st->blocks = packed;
    mcu_pw8_pairs(st, l->px2f); /* the blocks forward */
}
#endif

mcu_status mcu_conv2d_packed_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const int8_t *input,
                                const int32_t *packed, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && input != NULL && packed != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_conv2d_s8_params_valid(p) && p->groups == 1, MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t in_count = mcu_shape4_count(&in, 1);
    const int32_t out_count = mcu_shape4_count(&out, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0 && out.n == in.n, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->kernel_h <= MCU_CONV_PACKED_TAPS_MAX && p->kernel_w <= MCU_CONV_PACKED_TAPS_MAX &&
                    in.c <= MCU_CONV_PACKED_TAPS_MAX,
                MCU_ERR_SHAPE);
    const int32_t kp = mcu_conv_column_taps(p);
    MCU_REQUIRE(kp <= MCU_CONV_PACKED_TAPS_MAX, MCU_ERR_SHAPE);
    MCU_REQUIRE(((uintptr_t)packed & 3u) == 0, MCU_ERR_INVALID_ARG); /* LDM takes whole words */
    uint32_t flags = 0;
    MCU_REQUIRE(check_stream(packed, out.c, kp, p->output_offset, &flags), MCU_ERR_INVALID_ARG);
    const int right = (int)(flags & MCU_PACKED_FLAG_RIGHT);
#if MCU_PACKED_SCALED
    const int scaled = (flags & MCU_PACKED_FLAG_SCALED) != 0;
    /* a scaled stream's requantization has the ReLU tails' form (tuned.pack_layer_scaled) */
    MCU_REQUIRE(!scaled || p->act_min >= p->output_offset, MCU_ERR_INVALID_ARG);
#else
    const int scaled = 0; /* check_stream refused a scaled stream: this build left them out */
#endif
    const uint32_t min4 = ((uint32_t)p->act_min & 0xFFu) * 0x01010101u;
    const uint32_t max4 = ((uint32_t)p->act_max & 0xFFu) * 0x01010101u;
    const int clamp = p->act_min > -128 || p->act_max < 127;
    /* a single pixel (a linear layer) has no pair to requantize by difference: skip the pass over its biases */
    const int pair_diff = (int64_t)out.n * out.h * out.w >= 2 && !scaled ? px2_diff(packed, flags, out.c, kp) : 0;
    const int px2 = clamp | (scaled ? 8 : p->act_min >= p->output_offset ? 2 | pair_diff : 0);
    const layer_t l = {out.c, kp, mcu_packed_block_words(kp), p->output_offset, p->act_min, p->act_max,
                       {min4, max4}, clamp, right, (flags & MCU_PACKED_FLAG_GROUP) != 0, px2,
                       px2_forward(px2, scaled ? 32 : 0)
#if MCU_PACKED_SCALED
                       , scaled, scaled ? 32 : 0
#endif
    };
    packed += MCU_PACKED_HEADER_WORDS;
#if MCU_S8_DSP_NATIVE
    _Alignas(8) int16_t col[MCU_PACKED_COL_ARRAY]; /* + mcu_pixel_packed's state, or two pixels' columns */
    mcu_pixel_packed_start(col, kp);
#elif MCU_S8_DSP && MCU_PACKED_NARROW && MCU_PACKED_NARROW_K3C3 && MCU_PACKED_NARROW_ROWS
    _Alignas(8) int16_t
        col[MCU_CONV_PACKED_TAPS_MAX > MCU_K3C3_REPACK_TAPS ? MCU_CONV_PACKED_TAPS_MAX : MCU_K3C3_REPACK_TAPS];
#else
    _Alignas(8) int16_t col[MCU_CONV_PACKED_TAPS_MAX];
#endif
    _Alignas(4) int8_t raw[MCU_CONV_PACKED_TAPS_MAX];
    const int32_t hw = out.h * out.w;
    const int direction = mcu_conv_pixel_direction(p, input, in_count, output, out_count);
    MCU_REQUIRE(direction >= 0, MCU_ERR_INVALID_ARG);
    if (flags & MCU_PACKED_FLAG_BYTES) {
#if !MCU_PACKED_BYTES
        return MCU_ERR_UNSUPPORTED; /* this build left the byte streams' path out */
#else
        /* fully connected layers (1x1, stride 1, unpadded): one pixel, a row, at a time, in the
         * direction that reads each row before its output lands on it */
        MCU_REQUIRE(p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                        p->pad_top == 0 && p->pad_left == 0 && out.h == in.h && out.w == in.w,
                    MCU_ERR_UNSUPPORTED);
        const int64_t pixels = (int64_t)in.n * hw;
        for (int64_t k = 0; k < pixels; ++k) {
            const int64_t i = direction == 1 ? pixels - 1 - k : k;
            if (in.c % 4 == 0) {
                mcu_column_s8(input + i * in.c, kp, p->input_offset, col);
            } else {
                mcu_conv_column_s16(p, input + i * in.c, 0, 0, kp, col, raw);
            }
            pixel_bytes(&l, col, packed, output + i * out.c);
        }
        return MCU_OK;
#endif
    }
#if MCU_S8_DSP
    /* few taps per pixel (first layers, narrow pointwise): convolution/conv_narrow_s8_dsp.h */
    if (mcu_narrow_applies(p, kp, right && !scaled, direction)) {
#if MCU_PACKED_NARROW
#if MCU_PACKED_NARROW_K3C3 && MCU_PACKED_NARROW_ROWS
        /* RGB at stride 2: widened rows, from the stream's rows section or its pairs repacked here (exact for the
         * layer, else by threes); only such a layer of a right-shift, unscaled word stream reads a section */
        const int32_t *section = (flags & MCU_PACKED_FLAG_ROWS) ? packed + (out.c / 4) * l.words : NULL;
        if (mcu_k3c3_rows_applies(p, (int32_t)(sizeof col / sizeof col[0]), section != NULL) &&
            mcu_k3c3_rows_layer(p, input, packed, section, output, col)) {
            return MCU_OK;
        }
#endif
#if MCU_S8_DSP_NATIVE && !(MCU_PACKED_NARROW_CLAMP && MCU_PACKED_NARROW_FULL)
        /* this build left out the engine of some narrow layers' stores */
        MCU_REQUIRE(clamp ? MCU_PACKED_NARROW_CLAMP : MCU_PACKED_NARROW_FULL, MCU_ERR_UNSUPPORTED);
#endif
        mcu_conv_narrow_s8(p, input, packed, output, kp, direction, l.group, col,
                           (int32_t)(sizeof col / sizeof col[0]));
        return MCU_OK;
#else
        return MCU_ERR_UNSUPPORTED; /* this build left the narrow path out (MCU_PACKED_NARROW 0) */
#endif
    }
#endif
#if MCU_S8_DSP_NATIVE && !MCU_PACKED_LOOP
    /* this build left out the loop for windows wider than MCU_PIXEL_WIDE_TAPS */
    MCU_REQUIRE(!right || out.c < 4 || kp <= MCU_PIXEL_WIDE_TAPS, MCU_ERR_UNSUPPORTED);
#endif
#if MCU_S8_DSP_NATIVE && MCU_PACKED_PW_PAIRS
    /* pointwise pairs (below): the interleaved column of two pixels and its state fit the buffer */
    const int pw_pairs = right && out.c % 4 == 0 && in.c % 4 == 0 && kp == in.c &&
                         2 * kp + MCU_PIXEL2_SPARE <= MCU_PACKED_COL_TAPS;
#if MCU_PACKED_PW8
    /* 8 input channels, whole input words (the pairs' LDRD): every pair in one call (mcu_pw8_pairs) */
    const int pw8 = pw_pairs && in.c == 8 && ((uintptr_t)input & 3u) == 0;
#endif
#if defined(MCU_PW_SMALL_BUILT)
    /* 16 or 32 input channels of a scaled stream: every pair in one call (pw_small_s8_dsp.h), which reads the whole
     * stream once a pair, its blocks always forward; so not where a larger stream than a flash cache's bytes waits
     * behind such a cache (FLAG_GROUP: the groups' parts, the alternating block order) */
    const int pws = pw_pairs && mcu_pw_small_takes(l.px2, kp) && ((uintptr_t)input & 3u) == 0 &&
                    (!l.group || (int64_t)l.words * 4 * (out.c / 4) <= MCU_PIXEL4_STREAM_MIN);
#endif
#if defined(MCU_PW4_BUILT)
    /* a small image of a multiple of 4 pixels: the whole layer in one call, every column first (pw4_s8_dsp.h) */
    if (pw_pairs && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 && p->pad_left == 0 && out.h == in.h &&
        out.w == in.w && mcu_pw4_takes(l.px2, kp, (int64_t)in.n * hw, out.c, MCU_PACKED_BUF_TAPS)) {
        mcu_pw4_layer(input, output, (int32_t)(in.n * hw), kp, out.c, p->input_offset, packed, col);
        return MCU_OK;
    }
#endif
#if defined(MCU_PW3_BUILT)
    /* a small image of a multiple of 3 pixels: the whole layer in one call, every column first (pw3_s8_dsp.h) */
    if (pw_pairs && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 && p->pad_left == 0 && out.h == in.h &&
        out.w == in.w && mcu_pw3_takes(l.px2, kp, (int64_t)in.n * hw, MCU_PACKED_BUF_TAPS)) {
        mcu_pw3_layer(input, output, (int32_t)(in.n * hw), kp, out.c, p->input_offset, packed, col);
        return MCU_OK;
    }
#endif
#endif
    if (direction == 1) { /* each pixel's input is in the column before its output is written */
        const int64_t bi = in.c, bo = out.c;
        int64_t i = (int64_t)in.n * hw - 1;
#if MCU_S8_DSP_NATIVE && MCU_PACKED_PW_PAIRS
        if (i >= 1 && pw_pairs) {
            /* Pixels i - 1 and i per pass, last pair first: both inputs are in the column before
             * either output is written, and pixel i - 1's output lands no earlier than it would one
             * pixel at a time (after pixel i's), so the order stays safe. Such layers are where the
             * planner overlaps a wider output with its input (mobilenet_v1's channel doublings): one
             * pixel at a time streamed their weights once per pixel. */
            int back = 0;
#if MCU_PACKED_PW8
            if (pw8) { /* every pair in one call, last pair first */
                pw8_run(&l, packed, col, input + (i - 1) * bi, output + (i - 1) * bo, (i + 1) / 2, -1,
                        p->input_offset);
                i -= 2 * ((i + 1) / 2);
            }
#endif
#if defined(MCU_PW_SMALL_BUILT)
            if (pws) { /* every pair in one call, last pair first */
                mcu_pw_small_run(input + (i - 1) * bi, output + (i - 1) * bo, (int32_t)((i + 1) / 2), -1, kp, out.c,
                                 p->input_offset, packed);
                i -= 2 * ((i + 1) / 2);
            }
#endif
            const int32_t group = pw_group(&l, MCU_PACKED_BUF_TAPS / (2 * kp + MCU_PIXEL2_SPARE));
            /* A stream larger than a flash cache is read once per group of pairs (pw_group_run), the
             * last group possibly smaller. Still safe backward: a pixel's output never overlaps the
             * input of a lower pixel (the direction's condition), and every pixel above the group's
             * lowest one is read by then. */
            while (group >= 2 && i >= 1) {
                int64_t a[MCU_PW_GROUP_MAX];
                int32_t n = 0;
                for (; n < group && i >= 1; ++n, i -= 2) {
                    a[n] = i - 1;
                }
                /* a last lone pixel (0) joins the last group where its column and state fit the buffer: the
                 * stream is read once more for it otherwise (mobilenet_v1's 3 x 3 layers, 70 and 136 kB) */
                const int64_t lone = i == 0 && (n + 1) * (2 * kp + MCU_PIXEL2_SPARE) <= MCU_PACKED_BUF_TAPS ? 0 : -1;
                pw_group_run(&l, packed, col, input, output, a, n, lone, in.c, p->input_offset, back);
                i -= lone == 0;
                back ^= 1;
            }
            const int turn = pw_turns(&l);
            for (; i >= 1; i -= 2, back ^= turn) {
                const pass_t t = pass_of(&l, packed, output + (i - 1) * bo, back);
                mcu_column2_s8(input + (i - 1) * bi, input + i * bi, kp, p->input_offset, col);
                mcu_pixel2_packed(col, kp, t.blob, t.y, t.y_end, out.c, l.bounds, t.tail, &t.order);
            }
            mcu_pixel_packed_start(col, kp); /* the pairs' state overwrote the one-pixel loop's */
        }
#endif
        for (; i >= 0; --i) {
            mcu_conv_column_s16(p, input + i * bi, 0, 0, kp, col, raw);
            pixel(&l, col, packed, output + i * bo);
        }
        return MCU_OK;
    }
#if MCU_S8_DSP
    const int pointwise = p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                          p->pad_top == 0 && p->pad_left == 0 && out.h == in.h && out.w == in.w;
    if (pointwise && in.c % 4 == 0) {
        /* A pointwise layer's pixels are consecutive runs of c bytes in and out: one flat loop with
         * the column straight from the run, without the window bounds of mcu_conv_column_s16
         * (about a fifth of the time of the small-channel layers at large images). kp == c here. */
        const int64_t pixels = (int64_t)in.n * hw;
        const int8_t *x = input;
        int8_t *y = output;
        int64_t i = 0;
#if MCU_S8_DSP_NATIVE && MCU_PACKED_PW_PAIRS
        if (pixels >= 2 && pw_pairs) {
            int back = 0;
#if MCU_PACKED_PW8
            if (pw8) { /* every pair in one call */
                const int64_t pairs = pixels / 2;
                pw8_run(&l, packed, col, x, y, pairs, 1, p->input_offset);
                i = 2 * pairs;
                x += 2 * pairs * in.c;
                y += 2 * pairs * out.c;
            }
#endif
#if defined(MCU_PW_SMALL_BUILT)
            if (pws) { /* every pair in one call */
                const int64_t pairs = pixels / 2;
                mcu_pw_small_run(x, y, (int32_t)pairs, 1, kp, out.c, p->input_offset, packed);
                i = 2 * pairs;
                x += 2 * pairs * in.c;
                y += 2 * pairs * out.c;
            }
#endif
            const int32_t group = pw_group(&l, MCU_PACKED_BUF_TAPS / (2 * kp + MCU_PIXEL2_SPARE));
            if (group >= 2) {
                /* A stream larger than a flash cache (8 kB, the mps2-an505-u575's ICACHE; ds_cnn's
                 * 64->64 layers stream 9.5 kB) is read by parts of at most half of it: the columns of
                 * `group` pairs first, then each part for every pair, so each line is fetched once per
                 * group, not per pair. The parts run forward and backward in turn, so a group starts on
                 * the part the previous one left in the cache. All the group's inputs are in the columns
                 * before any output is written: the one-pixel order's overlaps stay safe. (pw_group_run
                 * is the same for the backward layers; inlined here, where ds_cnn's code placement in
                 * the cache was measured.) */
                const int32_t pb = 2 * kp + MCU_PIXEL2_SPARE;
                pw_chain_init(&l, col, pb, group);
                for (; i + 2 * group <= pixels; i += 2 * group, x += 2 * group * in.c, y += 2 * group * out.c) {
                    for (int32_t g = 0; g < group; ++g) {
                        mcu_column2_s8(x + 2 * g * in.c, x + (2 * g + 1) * in.c, kp, p->input_offset, col + g * pb);
                    }
                    pw_parts(&l, col, pb, packed, y, 2 * out.c, group, back);
                    back ^= 1;
                }
                /* the pairs left and a last lone pixel as one more, smaller group: the stream read once for
                 * them (ds_cnn's 125 pixels: 62 pairs and one) */
                if (i < pixels) {
                    int64_t a[MCU_PW_GROUP_MAX];
                    int32_t n = 0;
                    for (; i + 2 <= pixels; ++n, i += 2) {
                        a[n] = i;
                    }
                    const int64_t lone = i < pixels ? i : -1;
                    pw_group_run(&l, packed, col, input, output, a, n, lone, in.c, p->input_offset, back);
                    i = pixels;
                }
            }
            /* two pixels per pass, each weight word loaded once for both (gemm_s8_dsp.h) */
            const int turn = pw_turns(&l);
            for (; i + 2 <= pixels; i += 2, x += 2 * in.c, y += 2 * out.c, back ^= turn) {
                const pass_t t = pass_of(&l, packed, y, back);
                mcu_column2_s8(x, x + in.c, kp, p->input_offset, col);
                mcu_pixel2_packed(col, kp, t.blob, t.y, t.y_end, out.c, l.bounds, t.tail, &t.order);
            }
            mcu_pixel_packed_start(col, kp); /* the pairs' state overwrote the one-pixel loop's */
        }
#endif
        for (; i < pixels; ++i, x += in.c, y += out.c) {
            mcu_column_s8(x, kp, p->input_offset, col);
            pixel(&l, col, packed, y);
        }
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS
    const int pairs = out.w >= 2 && right && !scaled && out.c % 4 == 0 && kp + MCU_PIXEL2_SPARE <= MCU_PIXEL2_B &&
                      MCU_PIXEL2_B + kp <= MCU_PACKED_COL_TAPS;
#endif
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS && MCU_PACKED_QUADS
    /* Four pixels per pass where the weights (the stream's bytes) outgrow a flash cache of 8 kB, the
     * mps2-an505-u575's ICACHE: each line is then fetched once per four pixels. Smaller streams stay
     * in the cache and keep the pairs, whose requantization and stores cost less per pixel. */
    const int quads = pairs && out.w >= 4 && kp + MCU_PIXEL4_SPARE <= MCU_PIXEL4_B &&
                      (int64_t)out.c * (2 * (int64_t)kp + 20) > MCU_PIXEL4_STREAM_MIN;
#endif
    const window_t g = window_of(p);
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS
    int back = 0; /* the next pass's block order (pass_of) */
#endif
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        int8_t *y_n = output + (int64_t)b * hw * out.c;
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS && MCU_PACKED_QUADS && MCU_PIXEL4_GROUP > 1
        /* The image's four-pixel units (out.w / 4 a row, row by row) in groups of MCU_PIXEL4_GROUP,
         * across rows where a row has fewer: the group's columns first, then the stream by parts of at
         * most half the flash cache, each part for every unit of the group, so each line is fetched
         * once per group rather than once per unit. The parts run forward and backward in turn, so a
         * group starts on the part the previous one left in the cache. Each unit's columns and state
         * take 3 MCU_PIXEL4_B + kp int16. The units left over and each row's last pixels take the row
         * loop below (`grouped`: the units done). */
        const int32_t upr = out.w / 4;
        int32_t grouped = 0;
        if (quads) {
            const int32_t qb = 3 * MCU_PIXEL4_B + kp;
            const int32_t fit = MCU_PACKED_BUF_TAPS / qb;
            const int32_t group = fit < MCU_PIXEL4_GROUP ? fit : MCU_PIXEL4_GROUP;
            const int32_t part = pw_part_blocks(&l);
            const int32_t blocks = out.c / 4;
            const int32_t units = upr * out.h;
            for (; group >= 2 && grouped + group <= units; grouped += group) {
                for (int32_t q = 0; q < 4 * group; ++q) {
                    const int32_t u = grouped + q / 4;
                    window_column(p, &g, x_n, u / upr, 4 * (u % upr) + q % 4, kp,
                                  col + (q / 4) * qb + (q % 4) * MCU_PIXEL4_B, raw);
                }
                for (int32_t n = 0; n < blocks; n += part) {
                    const int32_t b0 = back ? ((blocks - 1 - n) / part) * part : n;
                    const int32_t nb = blocks - b0 < part ? blocks - b0 : part;
                    const mcu_block_order fwd = {0, 0};
                    for (int32_t q = 0; q < group; ++q) {
                        const int32_t u = grouped + q;
                        int8_t *y = y_n + ((u / upr) * out.w + 4 * (u % upr)) * out.c + 4 * b0;
                        mcu_pixel4_packed_split(col + q * qb, kp, packed + b0 * l.words, y, y + 4 * nb, out.c,
                                                l.bounds, &fwd);
                    }
                }
                back ^= 1;
            }
        }
#endif
        for (int32_t oh = 0; oh < out.h; ++oh) {
            int32_t ow = 0;
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS && MCU_PACKED_QUADS && MCU_PIXEL4_GROUP > 1
            if (grouped > oh * upr) { /* this row's units done in groups above: all, or its first ones */
                ow = 4 * (grouped - oh * upr < upr ? grouped - oh * upr : upr);
            }
#endif
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS && MCU_PACKED_QUADS
            if (quads) {
                /* four pixels of the row per pass, each line of the stream fetched once for them */
                for (; ow + 4 <= out.w; ow += 4) {
                    int8_t *y = y_n + (oh * out.w + ow) * out.c;
                    for (int32_t j = 0; j < 4; ++j) {
                        window_column(p, &g, x_n, oh, ow + j, kp, col + j * MCU_PIXEL4_B, raw);
                    }
                    const pass_t t = pass_of(&l, packed, y, back);
                    back ^= 1;
                    mcu_pixel4_packed_split(col, kp, t.blob, t.y, t.y_end, out.c, l.bounds, &t.order);
                }
            }
#endif
#if MCU_S8_DSP_NATIVE && MCU_PACKED_WINDOWS
            if (pairs) {
                /* two pixels of the row per pass, each weight word loaded once for both */
                for (; ow + 2 <= out.w; ow += 2) {
                    int8_t *y = y_n + (oh * out.w + ow) * out.c;
                    window_column(p, &g, x_n, oh, ow, kp, col, raw);
                    window_column(p, &g, x_n, oh, ow + 1, kp, col + MCU_PIXEL2_B, raw);
                    const pass_t t = pass_of(&l, packed, y, back);
                    back ^= 1;
                    mcu_pixel2_packed_split(col, kp, t.blob, t.y, t.y_end, out.c, l.bounds, l.px2, &t.order);
                }
                mcu_pixel_packed_start(col, kp); /* the pairs' state overwrote the one-pixel loop's */
            }
#endif
            for (; ow < out.w; ++ow) {
                window_column(p, &g, x_n, oh, ow, kp, col, raw);
                pixel(&l, col, packed, y_n + (oh * out.w + ow) * out.c);
            }
        }
    }
    return MCU_OK;
}
