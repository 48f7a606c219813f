/* Fully connected layers from the compact-weight stream (mcu/backends/compact.py; the layout and the
 * dual-MAC loops: mcu_conv2d_compact_s8.c, common/gemm_s8_compact.h). No window: each input row
 * widens into one int16 column (x + input_offset, taps 0, 2, 1, 3 per group of 4), then 4 channels
 * at a time, each block in one assembly statement from its biases to its four packed outputs
 * (mcu_compact_block1x4). The requantization works from the stream's (multiplier, shift) directly: a
 * layer run on one row would spend more on filling a table than on using it. Rows are not paired
 * as the convolution pairs pixels: fully connected layers mostly run on one row, and the pair's
 * code would cost more flash than it saves time there. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/gemm_s8_compact.h"
#include "../common/requant.h"
#include "../common/rq_s8_dsp.h" /* mcu_clamp4_s8 */
#include "../common/simd_s8.h"

static int32_t padded(int32_t k)
{
    return (k + 3) & ~3;
}

/* Scratch: one row's column (kp int16 values). */
int32_t mcu_linear_compact_s8_get_buffer_size(const mcu_linear_s8_params *p)
{
    if (p == NULL || p->in_features <= 0 || p->in_features > MCU_CONV_PACKED_TAPS_MAX) {
        return 0;
    }
    return 2 * padded(p->in_features);
}

/* The row x (n values) as a column of kp int16 values (zero taps past n). */
static void row_column(const int8_t *x, int32_t n, int32_t kp, int32_t off, int16_t *col)
{
    const int32_t whole = n & ~3;
    mcu_column_s8(x, whole, off, col);
    int32_t i = whole;
    for (; i < n; ++i) {
        col[(i & ~3) + ((i & 1) << 1) + ((i >> 1) & 1)] = (int16_t)(x[i] + off); /* tap t of a group at 0, 2, 1, 3 */
    }
    for (; i < kp; ++i) {
        col[(i & ~3) + ((i & 1) << 1) + ((i >> 1) & 1)] = 0;
    }
}

static int8_t requant(uint32_t acc, const int32_t *mq, const mcu_linear_s8_params *p)
{
#if MCU_S8_DSP
    return mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc), mq[0], mq[1], p->output_offset, p->act_min, p->act_max);
#else
    return mcu_requantize_to_s8(mcu_u32_to_s32(acc), mq[0], mq[1], p->output_offset, p->act_min, p->act_max);
#endif
}

mcu_status mcu_linear_compact_s8(const mcu_context *ctx, const mcu_linear_s8_params *p, const int8_t *input,
                                 const int32_t *stream, int8_t *output)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && input != NULL && stream != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->batch > 0 && p->out_features > 0 && mcu_input_offset_valid(p->input_offset) &&
                    mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const int32_t need = mcu_linear_compact_s8_get_buffer_size(p);
    MCU_REQUIRE(need > 0 && ctx->buf != NULL && ctx->size >= need && ((uintptr_t)ctx->buf & 3u) == 0,
                MCU_ERR_BUFFER_TOO_SMALL);
    MCU_REQUIRE(((uintptr_t)stream & 3u) == 0, MCU_ERR_INVALID_ARG); /* LDRD and LDM take whole words */
    const int32_t n = p->in_features, cout = p->out_features, kp = padded(n);
    const int64_t in_count = (int64_t)p->batch * n, out_count = (int64_t)p->batch * cout;
    MCU_REQUIRE(in_count <= INT32_MAX && out_count <= INT32_MAX, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(ctx->buf, (size_t)need, input, (size_t)in_count) &&
                    !mcu_overlaps(ctx->buf, (size_t)need, output, (size_t)out_count),
                MCU_ERR_INVALID_ARG);
    /* as mcu_linear_s8: the output overlaps neither the input nor the stream */
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, (size_t)out_count) &&
                    !mcu_overlaps(stream, (size_t)MCU_COMPACT_HEADER_WORDS * 4u, output, (size_t)out_count),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_compact_header_ok(stream, cout, kp), MCU_ERR_INVALID_ARG);
    const int32_t words = mcu_compact_block_words(kp);
    const int32_t *blocks = stream + MCU_COMPACT_HEADER_WORDS;
    int fast = 1; /* every shift a right shift in [1, 24]: mcu_compact_block1x4 */
    for (int32_t oc = 0; oc < cout; ++oc) { /* the shifts are shift counts below */
        const int32_t *mq = blocks + (oc / 4) * words + 4 + kp + 2 * (oc % 4);
        MCU_REQUIRE(mq[1] >= -31 && mq[1] <= 30 && mcu_quant_valid(mq[0], mq[1]), MCU_ERR_INVALID_ARG);
        fast = fast && mq[1] <= -1 && mq[1] >= -24;
    }
    int16_t *col = (int16_t *)ctx->buf;
#if MCU_S8_DSP
    const int32_t t = 1 + 2 * p->output_offset;
    const int clamp = p->act_min > -128 || p->act_max < 127;
    const uint32_t min4 = mcu_splat4_s8(p->act_min), max4 = mcu_splat4_s8(p->act_max);
#else
    (void)fast;
#endif
    for (int32_t r = 0; r < p->batch; ++r) {
        int8_t *y = output + (int64_t)r * cout;
        row_column(input + (int64_t)r * n, n, kp, p->input_offset, col);
        const int32_t *blob = blocks;
        int32_t oc = 0;
#if MCU_S8_DSP
        if (fast) {
            for (; oc + 4 <= cout; oc += 4, blob += words) {
                const uint32_t v = mcu_compact_block1x4(col, kp, blob, t);
                mcu_store_u32(y + oc, clamp ? mcu_clamp4_s8(v, min4, max4) : v);
            }
        }
#endif
        for (; oc < cout; oc += 4, blob += words) {
            uint32_t acc[4] = {(uint32_t)blob[0], (uint32_t)blob[1], (uint32_t)blob[2], (uint32_t)blob[3]};
            mcu_compact_dot1x4(col, blob + 4, kp, acc);
            const int32_t m = cout - oc < 4 ? cout - oc : 4;
            for (int32_t o = 0; o < m; ++o) {
                y[oc + o] = requant(acc[o], blob + 4 + kp + 2 * o, p);
            }
        }
    }
    return MCU_OK;
}
