/* Pointwise convolution through a pixel buffer, so that its output may overlap
 * its input in either direction (the memory planner's choice). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/conv_s8_dsp.h"
#include "mve_pw_s8.h"
#include "../common/plain_dot_s8.h"
#include "../common/plain_s8.h"
#include "../common/requant.h"

int32_t mcu_conv2d_1x1_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    return p == NULL ? 0 : p->output.c;
}

static void pixel(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *x,
                  const int8_t *weight, const int32_t *bias, int8_t *y)
{
    const int32_t cin = p->input.c;
    for (int32_t oc = 0; oc < p->output.c; ++oc) {
        const int8_t *w = weight + oc * cin;
        /* Accumulate modulo 2^32 exactly as mcu_conv2d_s8 does. */
        uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
        for (int32_t ic = 0; ic < cin; ++ic) {
            acc += (uint32_t)((x[ic] + p->input_offset) * w[ic]);
        }
        y[oc] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[oc], q->shift[oc], p->output_offset,
                                     p->act_min, p->act_max);
    }
}

/* Not on MVE cores: there the MVE path serves every layer it can, and this path's 2.5 KiB column in
 * the kernel's frame would add to the MVE path's stack. */
#if MCU_S8_DSP && !MCU_S8_MVE
/* Pixels i and i + step (when inside [0, pixels)): both inputs are widened into 16-bit columns
 * before either output is written, so a pair keeps the pixel-buffer contract in either direction
 * (the writes of a pair land where a single pixel's would, after the same reads). */
static void pair_dsp(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                     const int8_t *weight, const int32_t *bias, int8_t *output, int64_t i, int64_t step,
                     int64_t pixels, int16_t *col)
{
    const int32_t cin = p->input.c;
    const int32_t cout = p->output.c;
    const int64_t j = i + step;
    const int pair = j >= 0 && j < pixels;
    mcu_expand_s8(input + i * cin, cin, p->input_offset, col);
    if (pair) {
        mcu_expand_s8(input + j * cin, cin, p->input_offset, col + MCU_S8_COL_MAX);
    }
    mcu_matrix_pixels_s8(col, col + MCU_S8_COL_MAX, cin, cout, weight, bias, q, p->output_offset, p->act_min,
                         p->act_max, output + i * cout, pair ? output + j * cout : NULL);
}
#endif

mcu_status mcu_conv2d_1x1_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                             const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL &&
                    input != NULL && weight != NULL && output != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
                    p->pad_left == 0 && p->groups == 1,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t in_count = mcu_shape4_count(&in, 1);
    const int32_t out_count = mcu_shape4_count(&out, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(out.n == in.n && out.h == in.h && out.w == in.w, MCU_ERR_SHAPE);
    MCU_REQUIRE(ctx->size >= out.c, MCU_ERR_BUFFER_TOO_SMALL);
    const int32_t w_dims[2] = {out.c, in.c};
    MCU_REQUIRE(mcu_checked_count(w_dims, 2, 1) > 0, MCU_ERR_SHAPE);
    for (int32_t oc = 0; oc < out.c; ++oc) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[oc], q->shift[oc]), MCU_ERR_INVALID_ARG);
    }
    int8_t *buf = (int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(buf, (size_t)out.c, input, (size_t)in_count) &&
                    !mcu_overlaps(buf, (size_t)out.c, output, (size_t)out_count),
                MCU_ERR_INVALID_ARG);

    const int64_t pixels = (int64_t)in.n * in.h * in.w;
    const int64_t bi = in.c;
    const int64_t bo = out.c;
    /* Integer difference of the addresses: relational comparison of unrelated pointers is undefined. */
    const int64_t d = (int64_t)((intptr_t)output - (intptr_t)input);
    const int64_t fwd = bi - bo < pixels * (bi - bo) ? bi - bo : pixels * (bi - bo);
    const int64_t bwd = (pixels - 1) * (bi - bo) > 0 ? (pixels - 1) * (bi - bo) : 0;
    const int disjoint = !mcu_overlaps(input, (size_t)in_count, output, (size_t)out_count);
#if MCU_S8_MVE
    if (in.c <= MCU_MVE_PW_N_MAX && out.c <= MCU_S8_MVE_OC_MAX) {
        /* four outputs times two pixels per pass, blocks of packed pixels (convolution/mve_pw_s8.h) */
        const int forward = disjoint || d <= fwd;
        MCU_REQUIRE(forward || d >= bwd, MCU_ERR_INVALID_ARG);
        mcu_mve_pointwise(input, pixels, in.c, out.c, weight, bias, p->input_offset, q, p->output_offset,
                          p->act_min, p->act_max, output, forward, NULL);
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP && !MCU_S8_MVE
    if (in.c <= MCU_S8_COL_MAX) {
        _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
        if (disjoint || d <= fwd) {
            for (int64_t i = 0; i < pixels; i += 2) {
                pair_dsp(p, q, input, weight, bias, output, i, 1, pixels, col);
            }
            return MCU_OK;
        }
        MCU_REQUIRE(d >= bwd, MCU_ERR_INVALID_ARG);
        for (int64_t i = pixels - 1; i >= 0; i -= 2) {
            pair_dsp(p, q, input, weight, bias, output, i, -1, pixels, col);
        }
        return MCU_OK;
    }
#endif
#if MCU_S8_WIDE
    if (2 * in.c <= MCU_S8_WIDE_WORDS) {
        /* Blocks of four pixels (common/plain_s8.h), each read whole into the column before any of
         * its outputs is written: the pixel-buffer contract holds for blocks as for pairs. */
        int32_t col[MCU_S8_WIDE_WORDS];
        if (disjoint || d <= fwd) {
            for (int64_t i = 0; i < pixels; i += 4) {
                const int32_t count = pixels - i < 4 ? (int32_t)(pixels - i) : 4;
                mcu_wide_pixels4(input + i * bi, in.c, count, p->input_offset, col);
                mcu_wide_block(col, in.c, 1, count, out.c, weight, bias, q, p->output_offset, p->act_min,
                               p->act_max, output + i * bo, out.c);
            }
            return MCU_OK;
        }
        MCU_REQUIRE(d >= bwd, MCU_ERR_INVALID_ARG);
        for (int64_t i = pixels; i > 0; i -= 4) {
            const int64_t first = i < 4 ? 0 : i - 4;
            const int32_t count = (int32_t)(i - first);
            mcu_wide_pixels4(input + first * bi, in.c, count, p->input_offset, col);
            mcu_wide_block(col, in.c, 1, count, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max,
                           output + first * bo, out.c);
        }
        return MCU_OK;
    }
#endif
#if MCU_S8_PLAIN
    if (in.c <= MCU_S8_PLAIN_PW_COL) {
        /* each pixel read whole into the column before its outputs are written (common/plain_dot_s8.h) */
        int32_t col[MCU_S8_PLAIN_PW_COL];
        const int forward = disjoint || d <= fwd;
        MCU_REQUIRE(forward || d >= bwd, MCU_ERR_INVALID_ARG);
        for (int64_t k = 0; k < pixels; ++k) {
            const int64_t i = forward ? k : pixels - 1 - k;
            mcu_plain_pw_pixel(input + i * bi, in.c, out.c, p->input_offset, weight, bias, q, p->output_offset,
                               p->act_min, p->act_max, col, output + i * bo);
        }
        return MCU_OK;
    }
#endif
    if (disjoint || d <= fwd) {
        for (int64_t i = 0; i < pixels; ++i) {
            pixel(p, q, input + i * bi, weight, bias, buf);
            memcpy(output + i * bo, buf, (size_t)bo);
        }
        return MCU_OK;
    }
    MCU_REQUIRE(d >= bwd, MCU_ERR_INVALID_ARG);
    for (int64_t i = pixels - 1; i >= 0; --i) {
        pixel(p, q, input + i * bi, weight, bias, buf);
        memcpy(output + i * bo, buf, (size_t)bo);
    }
    return MCU_OK;
}
