#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/lut.h"
#include "../common/requant.h"
#include "conv_check_s8.h"

/* One output channel's decoded window of weights (kh * kw * in_c, OHWI order): the least it runs with;
 * with twice that it takes two output channels a pass; with the whole tensor's bytes (out_c times that) it
 * decodes every channel once and runs mcu_conv2d_s8 and its core's paths instead. */
int32_t mcu_conv2d_lut_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t dims[3] = {p->kernel_h, p->kernel_w, p->input.c};
    const int32_t count = mcu_checked_count(dims, 3, 1);
    return count > 0 ? count : 0;
}

mcu_status mcu_conv2d_lut_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                             int32_t word, const int8_t *input, const uint8_t *indices, const int8_t *table,
                             const int32_t *bias, int8_t *output)
{
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && indices != NULL && table != NULL, MCU_ERR_NULL_POINTER);
    /* The weights are checked below; the shared check sees the indices only as non-NULL. */
    const mcu_status status =
        mcu_conv2d_s8_check(MCU_CONV_LUT_FORWARD, p, q, input, (const int8_t *)indices, bias, output);
    if (status != MCU_OK) {
        return status;
    }
    MCU_REQUIRE(mcu_lut_bits_valid(word) && p->groups == 1, MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t taps = mcu_conv2d_lut_s8_get_buffer_size(p);
    MCU_REQUIRE(ctx->size >= taps && out.c <= INT32_MAX / 16, MCU_ERR_BUFFER_TOO_SMALL);
    const int32_t bits = mcu_lut_width(word);
    const int32_t row_bytes = mcu_lut_row_bytes(taps, bits);
    const size_t idx_bytes = (size_t)row_bytes * (size_t)out.c;
    const size_t table_bytes = mcu_lut_table_bytes(word, out.c);
    const size_t in_bytes = (size_t)mcu_shape4_count(&in, 1);
    const size_t out_bytes = (size_t)mcu_shape4_count(&out, 1);
    int8_t *w = (int8_t *)ctx->buf;
    /* the scratch the channel loop uses: one channel's weights, or two */
    const size_t span = (size_t)ctx->size >= 2u * (size_t)taps ? 2u * (size_t)taps : (size_t)taps;
    MCU_REQUIRE(!mcu_overlaps(indices, idx_bytes, output, out_bytes) &&
                    !mcu_overlaps(table, table_bytes, output, out_bytes) &&
                    !mcu_overlaps(w, span, input, in_bytes) && !mcu_overlaps(w, span, output, out_bytes) &&
                    !mcu_overlaps(w, span, indices, idx_bytes) && !mcu_overlaps(w, span, table, table_bytes),
                MCU_ERR_INVALID_ARG);

    const size_t w_count = (size_t)taps * (size_t)out.c;
    if ((size_t)ctx->size >= w_count && !mcu_overlaps(w, w_count, input, in_bytes) &&
        !mcu_overlaps(w, w_count, output, out_bytes) && !mcu_overlaps(w, w_count, indices, idx_bytes) &&
        !mcu_overlaps(w, w_count, table, table_bytes)) {
        for (int32_t oc = 0; oc < out.c; ++oc) {
            mcu_lut_decode(indices + (size_t)oc * (size_t)row_bytes, mcu_lut_table_of(table, word, oc), bits, taps,
                           w + (size_t)oc * (size_t)taps, 1);
        }
        return mcu_conv2d_s8(NULL, p, q, input, w, bias, output); /* the window contract */
    }
    /* Output channels outer, two at a time when the scratch holds both (else one): their weights decoded
     * once, then every output pixel's window for them; the output is written across its whole extent
     * channel by channel, so it may not overlap the input at all. */
    MCU_REQUIRE(!mcu_overlaps(input, in_bytes, output, out_bytes), MCU_ERR_INVALID_ARG);
    const int32_t step = (size_t)ctx->size >= 2u * (size_t)taps ? 2 : 1;
    for (int32_t oc = 0; oc < out.c; oc += step) {
        const int two = step == 2 && oc + 1 < out.c;
        int8_t *w1 = two ? w + taps : w;
        mcu_lut_decode(indices + (size_t)oc * (size_t)row_bytes, mcu_lut_table_of(table, word, oc), bits, taps, w, 1);
        if (two) {
            mcu_lut_decode(indices + (size_t)(oc + 1) * (size_t)row_bytes, mcu_lut_table_of(table, word, oc + 1), bits,
                           taps, w1, 1);
        }
        for (int32_t b = 0; b < in.n; ++b) {
            const int8_t *x_n = input + (size_t)b * (size_t)in.h * (size_t)in.w * (size_t)in.c;
            for (int32_t oh = 0; oh < out.h; ++oh) {
                const int32_t ih0 = oh * p->stride_h - p->pad_top;
                for (int32_t ow = 0; ow < out.w; ++ow) {
                    const int32_t iw0 = ow * p->stride_w - p->pad_left;
                    uint32_t acc[2] = {bias != NULL ? (uint32_t)bias[oc] : 0u,
                                       bias != NULL && two ? (uint32_t)bias[oc + 1] : 0u};
                    /* a window row inside the input with dilation 1 is one run of kernel_w * in.c bytes */
                    const int whole_rows = p->dilation_w == 1 && iw0 >= 0 && iw0 + p->kernel_w <= in.w;
                    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t ih = ih0 + ky * p->dilation_h;
                        if (ih < 0 || ih >= in.h) {
                            continue;
                        }
                        const int8_t *x_row = x_n + (size_t)ih * (size_t)in.w * (size_t)in.c;
                        const int32_t at = ky * p->kernel_w * in.c;
                        for (int32_t kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t iw = iw0 + kx * p->dilation_w;
                            if (iw < 0 || iw >= in.w) {
                                continue;
                            }
                            const int32_t run = whole_rows ? p->kernel_w * in.c : in.c;
                            const int8_t *x = x_row + (size_t)iw * (size_t)in.c;
                            const int32_t k = at + kx * in.c;
                            if (two) {
                                mcu_lut_dot2(x, w + k, w1 + k, run, p->input_offset, acc);
                            } else {
                                acc[0] = mcu_lut_dot(x, w + k, run, p->input_offset, acc[0]);
                            }
                            if (whole_rows) {
                                break;
                            }
                        }
                    }
                    int8_t *y = output + (((size_t)b * (size_t)out.h + (size_t)oh) * (size_t)out.w + (size_t)ow) *
                                             (size_t)out.c + (size_t)oc;
                    y[0] = mcu_requantize_to_s8(mcu_u32_to_s32(acc[0]), q->multiplier[oc], q->shift[oc],
                                                p->output_offset, p->act_min, p->act_max);
                    if (two) {
                        y[1] = mcu_requantize_to_s8(mcu_u32_to_s32(acc[1]), q->multiplier[oc + 1], q->shift[oc + 1],
                                                    p->output_offset, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
