/* Convolution and fully connected layers with int8 weights in flash, reordered at compile time
 * (mcu/backends/compact.py) so that the dual-MAC loop widens each weight word once for two output
 * pixels.
 *
 * Why: the packed kernel (mcu_conv2d_packed_s8) stores weights as int16, twice their flash, so that
 * no instruction widens them. Here they stay int8 and SXTB16 widens a word of 4 taps into two
 * 16-bit pairs (taps 0, 2 and 1, 3: the order of the int16 column, convolution/conv_column_s8.h). Two
 * output pixels share every widened word: per 4 taps of 2 pixels x 2 channels, one LDM of both
 * pixels' column words, one LDRD of the two channels' weight words, 4 SXTB16 and 8 SMLAD, 14
 * instructions for 16 MACs, against 12 for the packed kernel (and 18 or more for int8 kernels that
 * widen per pixel). A single pixel (fully connected layers on one row, the odd last pixel) takes 4
 * channels at once instead: 18 instructions for 16 MACs.
 *
 * The stream, 32-bit words (mcu/include/mcu/kernels_s8.h): a header, then per block of 4 output
 * channels their 4 biases, their weights (per group of 4 taps, one word per channel: the taps'
 * bytes in order), then (multiplier, shift) per channel: 12 bytes of constants per channel, as
 * the portable kernels' separate arrays. The requantization works from a table of K words per
 * channel (common/rq_s8_dsp.h) that the kernel fills once per call in its scratch buffer.
 * Products and sums are exact integers modulo 2^32 in any order, so every path gives the bits of
 * the plain reference. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "conv_column_s8.h"
#include "../common/gemm_s8_compact.h"
#include "../common/requant.h"
#include "../common/rq_s8_dsp.h"

#if MCU_S8_DSP
_Static_assert(sizeof(mcu_rq_ch) == 24, "RQ_ENTRY_BYTES");
#endif
#include "../common/simd_s8.h"

/* Bytes of one channel's entry of the requantization table (mcu_rq_ch: two int64 K words, multiplier,
 * shift), kept on builds without it too, so that every build plans the same scratch. */
#define RQ_ENTRY_BYTES 24

/* Scratch: the requantization table (RQ_ENTRY_BYTES per channel), then the two pixels' interleaved
 * column and their own columns (2 kp, kp, kp int16 values), from the first 8-byte boundary of a
 * word-aligned buffer (4 bytes of slack: planners align buffers to words). */
int32_t mcu_conv2d_compact_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    if (p == NULL || p->output.c <= 0 || p->output.c > 1 << 20 || p->kernel_h <= 0 || p->kernel_w <= 0 ||
        p->input.c <= 0 || p->kernel_h > MCU_CONV_PACKED_TAPS_MAX || p->kernel_w > MCU_CONV_PACKED_TAPS_MAX ||
        p->input.c > MCU_CONV_PACKED_TAPS_MAX) {
        return 0;
    }
    const int32_t kp = mcu_conv_column_taps(p);
    if (kp > MCU_CONV_PACKED_TAPS_MAX) {
        return 0;
    }
    return mcu_compact_blocks(p->output.c) * 4 * RQ_ENTRY_BYTES + 8 * kp + 4;
}

/* What every block shares, in locals (int8 stores may alias anything). */
typedef struct {
    int32_t cout, kp, words;
    int32_t output_offset, act_min, act_max;
    uint32_t min4, max4;
    int clamp; /* the activation range is narrower than int8 */
    int fast;  /* every shift in [-24, -1] on a DSP build: the K-word table rq serves */
#if MCU_S8_DSP
    const mcu_rq_ch *rq;
#endif
} layer_t;

/* n (1..4) outputs of channels oc.. from their accumulators, one at a time; blob: the block's
 * stream words. The layers whose table cannot serve, and partial last blocks. */
static void store_each(const layer_t *l, const uint32_t acc[4], const int32_t *blob, int32_t oc, int32_t n, int8_t *y)
{
    const int32_t *mq = blob + 4 + l->kp;
    for (int32_t o = 0; o < n; ++o) {
        const int32_t a = mcu_u32_to_s32(acc[o]);
#if MCU_S8_DSP
        if (l->fast) {
            y[oc + o] = (int8_t)mcu_clamp_s32(mcu_rq_ch_apply(&l->rq[oc + o], a), l->act_min, l->act_max);
            continue;
        }
#endif
        y[oc + o] = mcu_requantize_to_s8(a, mq[2 * o], mq[2 * o + 1], l->output_offset, l->act_min, l->act_max);
    }
}

/* Four outputs of channels oc..oc + 3 from their accumulators: the table's requantization of all
 * four in one statement, packed, clamped byte-wise and stored as one word. */
static inline int store4(const layer_t *l, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, int32_t oc, int8_t *y)
{
#if MCU_S8_DSP
    if (l->fast) {
        uint32_t v = mcu_rq4_pack_s8(l->rq + oc, a0, a1, a2, a3);
        if (l->clamp) {
            v = mcu_clamp4_s8(v, l->min4, l->max4);
        }
        mcu_store_u32(y + oc, v);
        return 1;
    }
#else
    (void)l, (void)a0, (void)a1, (void)a2, (void)a3, (void)oc, (void)y;
#endif
    return 0;
}

/* Two output pixels ya, yb from their interleaved column. */
static void pixel_pair(const layer_t *l, const int16_t *cc, const int32_t *blocks, int8_t *ya, int8_t *yb)
{
    const int32_t *blob = blocks;
    const int32_t cout = l->cout, kp = l->kp, words = l->words;
    for (int32_t oc = 0; oc < cout; oc += 4, blob += words) {
        uint32_t lo[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[0], (uint32_t)blob[1]};
        uint32_t hi[4] = {(uint32_t)blob[2], (uint32_t)blob[3], (uint32_t)blob[2], (uint32_t)blob[3]};
        mcu_compact_dot2x2(cc, blob + 4, kp, lo);
        mcu_compact_dot2x2(cc, blob + 6, kp, hi);
        if (oc + 4 <= cout && store4(l, lo[0], lo[1], hi[0], hi[1], oc, ya) &&
            store4(l, lo[2], lo[3], hi[2], hi[3], oc, yb)) {
            continue;
        }
        const int32_t n = cout - oc < 4 ? cout - oc : 4;
        const uint32_t a[4] = {lo[0], lo[1], hi[0], hi[1]};
        const uint32_t b[4] = {lo[2], lo[3], hi[2], hi[3]};
        store_each(l, a, blob, oc, n, ya);
        store_each(l, b, blob, oc, n, yb);
    }
}

/* One output pixel y from its column. */
static void pixel_one(const layer_t *l, const int16_t *col, const int32_t *blocks, int8_t *y)
{
    const int32_t *blob = blocks;
    const int32_t cout = l->cout, kp = l->kp, words = l->words;
    for (int32_t oc = 0; oc < cout; oc += 4, blob += words) {
        uint32_t acc[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[2], (uint32_t)blob[3]};
        mcu_compact_dot1x4(col, blob + 4, kp, acc);
        if (oc + 4 > cout || !store4(l, acc[0], acc[1], acc[2], acc[3], oc, y)) {
            store_each(l, acc, blob, oc, cout - oc < 4 ? cout - oc : 4, y);
        }
    }
}

/* Columns a and b (kp taps each) as one column of groups: a's two words, then b's. */
static void interleave(const int16_t *a, const int16_t *b, int32_t kp, int16_t *cc)
{
    const uint32_t *wa = (const uint32_t *)(const void *)a;
    const uint32_t *wb = (const uint32_t *)(const void *)b;
    uint32_t *out = (uint32_t *)(void *)cc;
    for (int32_t g = 0; g < kp / 4; ++g, wa += 2, wb += 2, out += 4) {
        out[0] = wa[0];
        out[1] = wa[1];
        out[2] = wb[0];
        out[3] = wb[1];
    }
}

/* The header names the layer the stream was packed for; the table is filled from its constants,
 * which are validated first (the shifts are used as shift counts). */
static int prepare(const int32_t *stream, const mcu_conv2d_s8_params *p, int32_t kp, void *rq_table, int *fast)
{
    const int32_t cout = p->output.c;
    if (!mcu_compact_header_ok(stream, cout, kp)) {
        return 0;
    }
    *fast = 1;
#if MCU_S8_DSP
    mcu_rq_ch *rq = (mcu_rq_ch *)rq_table;
#else
    void *rq = rq_table;
#endif
    const int32_t words = mcu_compact_block_words(kp);
    const int32_t *blob = stream + MCU_COMPACT_HEADER_WORDS;
    for (int32_t oc = 0; oc < cout; ++oc) {
        const int32_t *mq = blob + (oc / 4) * words + 4 + kp + 2 * (oc % 4);
        if (mq[1] < -31 || mq[1] > 30 || !mcu_quant_valid(mq[0], mq[1])) {
            return 0;
        }
#if MCU_S8_DSP
        *fast = *fast && mcu_rq_ch_init(&rq[oc], mq[0], mq[1], p->output_offset);
#else
        (void)rq;
        *fast = 0;
#endif
    }
    return 1;
}

mcu_status mcu_conv2d_compact_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const int8_t *input,
                                 const int32_t *stream, int8_t *output)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && input != NULL && stream != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
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
    MCU_REQUIRE(((uintptr_t)stream & 3u) == 0, MCU_ERR_INVALID_ARG); /* LDRD and LDM take whole words */
    const int32_t need = mcu_conv2d_compact_s8_get_buffer_size(p);
    MCU_REQUIRE(need > 0 && ctx->buf != NULL && ctx->size >= need && ((uintptr_t)ctx->buf & 3u) == 0,
                MCU_ERR_BUFFER_TOO_SMALL);
    MCU_REQUIRE(!mcu_overlaps(ctx->buf, (size_t)need, input, (size_t)in_count) &&
                    !mcu_overlaps(ctx->buf, (size_t)need, output, (size_t)out_count),
                MCU_ERR_INVALID_ARG);
    uint8_t *scratch = (uint8_t *)ctx->buf + ((uintptr_t)ctx->buf & 4u); /* 8-byte aligned */
    int fast = 0;
    MCU_REQUIRE(prepare(stream, p, kp, scratch, &fast), MCU_ERR_INVALID_ARG);
    const layer_t l = {out.c, kp, mcu_compact_block_words(kp), p->output_offset, p->act_min, p->act_max,
                       ((uint32_t)p->act_min & 0xFFu) * 0x01010101u, ((uint32_t)p->act_max & 0xFFu) * 0x01010101u,
                       p->act_min > -128 || p->act_max < 127, fast
#if MCU_S8_DSP
                       , (const mcu_rq_ch *)(void *)scratch
#endif
    };
    const int32_t *blocks = stream + MCU_COMPACT_HEADER_WORDS;
    /* the table's size is a multiple of 8: the columns stay 8-byte aligned for LDRD and LDM */
    int16_t *cc = (int16_t *)(void *)(scratch + mcu_compact_blocks(out.c) * 4 * RQ_ENTRY_BYTES);
    int16_t *col_a = cc + 2 * kp;
    int16_t *col_b = col_a + kp;
    _Alignas(4) int8_t raw[MCU_CONV_PACKED_TAPS_MAX];
    const int32_t hw = out.h * out.w;
    const int64_t pixels = (int64_t)in.n * hw;
    /* both pixels' inputs are in the column before either output is written */
    const int direction = mcu_conv_pixel_direction(p, input, in_count, output, out_count);
    MCU_REQUIRE(direction >= 0, MCU_ERR_INVALID_ARG);
    const int backward = direction == 1;
    /* Pixel q of the batch in memory order: image q / hw, position q % hw (32-bit: the output count
     * fits int32, and no 64-bit division reaches cores without one). */
    const int32_t count = (int32_t)pixels;
    for (int32_t k = 0; k < count; k += 2) {
        const int32_t qa = backward ? count - 1 - k : k;
        const int32_t qb = backward ? qa - 1 : qa + 1;
        const int32_t na = qa / hw, pa = qa % hw;
        mcu_conv_column_s16(p, input + (int64_t)na * in.h * in.w * in.c, pa / out.w, pa % out.w, kp, col_a, raw);
        if (k + 1 == count) {
            pixel_one(&l, col_a, blocks, output + (int64_t)qa * out.c);
            break;
        }
        const int32_t nb = qb / hw, pb = qb % hw;
        mcu_conv_column_s16(p, input + (int64_t)nb * in.h * in.w * in.c, pb / out.w, pb % out.w, kp, col_b, raw);
        interleave(col_a, col_b, kp, cc);
        pixel_pair(&l, cc, blocks, output + (int64_t)qa * out.c, output + (int64_t)qb * out.c);
    }
    return MCU_OK;
}
