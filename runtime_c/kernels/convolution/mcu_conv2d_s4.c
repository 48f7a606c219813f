#include <stddef.h>
#include <string.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/s4.h"
#include "../common/s4_dsp.h"
#include "conv_check_s8.h"

/* With scratch: the weights widened once per call into the word stream of mcu_conv2d_packed_s8 (the layout
 * mcu/kernels_s8.h gives: a header, then per block of 4 output channels 4 biases, the int16 weight pairs of
 * each tap pair in SXTB16 order, 4 requantization words per channel), which then runs the layer over every
 * output pixel: the widening costs a few instructions per weight, once, and the packed kernel's loops (two
 * pixels per weight load, assembly on DSP cores) run every MAC. The words of that stream, 0 when the packed
 * kernel does not take the layer (grouped, or a window over its MCU_CONV_PACKED_TAPS_MAX). */
#ifndef MCU_S4_STREAM
#define MCU_S4_STREAM 1 /* 0: a model's build none of whose layers has the stream's scratch (portable backend) */
#endif
static int64_t s4_stream_words(const mcu_conv2d_s8_params *p)
{
    if (p == NULL || p->groups != 1 || p->kernel_h <= 0 || p->kernel_w <= 0 || p->input.c <= 0 ||
        p->output.c <= 0 || p->kernel_h > MCU_CONV_PACKED_TAPS_MAX || p->kernel_w > MCU_CONV_PACKED_TAPS_MAX ||
        p->input.c > MCU_CONV_PACKED_TAPS_MAX) {
        return 0;
    }
    const int64_t kp = ((int64_t)p->kernel_h * p->kernel_w * p->input.c + 3) & ~(int64_t)3;
    if (kp > MCU_CONV_PACKED_TAPS_MAX) {
        return 0;
    }
    return MCU_PACKED_HEADER_WORDS + ((int64_t)p->output.c + 3) / 4 * (4 + 2 * kp + 16);
}

int32_t mcu_conv2d_s4_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    const int64_t words = s4_stream_words(p);
    return words <= INT32_MAX / 4 ? (int32_t)(words * 4) : 0;
}

#include "mve_conv_s4.h"


#if MCU_S4_STREAM && !MCU_S8_MVE /* (Helium cores widen to int8 instead: mve_conv_s4.h) */
/* Row `start` (a nibble index) of k packed weights as int8 values. */
static void s4_row(const int8_t *packed, int64_t start, int32_t k, int8_t *row)
{
    const uint8_t *b = (const uint8_t *)packed + (start >> 1);
    int32_t i = 0;
    if (start & 1) {
        row[i++] = (int8_t)mcu_s4_high(*b++);
    }
    for (; i + 1 < k; i += 2) {
        const uint32_t v = *b++;
        row[i] = (int8_t)mcu_s4_low(v);
        row[i + 1] = (int8_t)mcu_s4_high(v);
    }
    if (i < k) {
        row[i] = (int8_t)mcu_s4_low(*b);
    }
}

static uint32_t s4_pair(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}

/* The stream's words (s4_stream_words of them at s, word-aligned). Every shift a right shift in [-23, -1]
 * (and every multiplier non-negative): the K words the packed kernel's assembly requantizes from,
 * K = 2^30 + 2^(R+30) + output_offset 2^(R+31) (mcu_packed_rq_s8); else (0, 0, multiplier, shift).
 * Padded channels of a last partial block: weights, bias and multiplier 0, shift -1. */
static __attribute__((noinline)) void s4_fill_stream(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                                     const int8_t *weight, const int32_t *bias, int32_t *s)
{
    const int32_t cout = p->output.c;
    const int32_t k = p->kernel_h * p->kernel_w * p->input.c;
    const int32_t kp = (k + 3) & ~3;
    const int32_t off = p->output_offset;
    int right = 1;
    for (int32_t oc = 0; oc < cout; ++oc) {
        right &= q->shift[oc] >= -23 && q->shift[oc] <= -1 && q->multiplier[oc] >= 0;
    }
    s[0] = (int32_t)MCU_PACKED_MAGIC;
    s[1] = (int32_t)((uint32_t)right | (((uint32_t)off & 0xFFu) << 8));
    s[2] = cout;
    s[3] = kp;
    int8_t row[MCU_CONV_PACKED_TAPS_MAX];
    int32_t *blk = s + MCU_PACKED_HEADER_WORDS;
    for (int32_t oc0 = 0; oc0 < cout; oc0 += 4, blk += 4 + 2 * kp + 16) {
        uint32_t *wp = (uint32_t *)(blk + 4);
        for (int32_t o = 0; o < 4; ++o) {
            const int32_t oc = oc0 + o;
            const int real = oc < cout;
            const int32_t m = real ? q->multiplier[oc] : 0;
            const int32_t r = real ? -q->shift[oc] : 1;
            int32_t *rq = blk + 4 + 2 * kp + 4 * o;
            blk[o] = real && bias != NULL ? bias[oc] : 0;
            if (right) {
                rq[0] = (int32_t)((1u << 30) | (r == 1 ? 1u << 31 : 0u));
                rq[1] = (r >= 2 ? (int32_t)1 << (r - 2) : 0) + off * ((int32_t)1 << (r - 1));
                rq[3] = r - 1;
            } else {
                rq[0] = 0;
                rq[1] = 0;
                rq[3] = -r;
            }
            rq[2] = m;
            if (real) {
                s4_row(weight, (int64_t)oc * k, k, row);
            } else {
                memset(row, 0, (size_t)k);
            }
            memset(row + k, 0, (size_t)(kp - k));
            /* tap pair j of the 4 channels: words 4j .. 4j + 3; taps 4g, 4g + 2 are pair 2g, 4g + 1, 4g + 3 pair
             * 2g + 1 (the column's order, convolution/conv_column_s8.h) */
            for (int32_t g = 0; g < kp; g += 4) {
                wp[2 * g + o] = s4_pair(row[g], row[g + 2]);
                wp[2 * g + 4 + o] = s4_pair(row[g + 1], row[g + 3]);
            }
        }
    }
}

#endif

#if MCU_S8_DSP && !MCU_S8_MVE /* (Helium cores: mve_conv_s4.h takes every layer these would) */
/* The column of output pixel (oh, ow) of a groups == 1 convolution in the pair order of s4_dsp.h: taps
 * moved up by `lead` (0 or 1), over taps = n + (n odd) places, the place no tap takes 0. */
static void conv_s4_column(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow, int32_t n,
                           int32_t lead, int16_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const int32_t taps = n + (n & 1);
    const int groups8 = lead == 0 && in.c % 8 == 0; /* every tap's channels fill whole groups of 8 */
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    if (taps != n) {
        col[mcu_s4_col_index(lead != 0 ? 0 : n, taps)] = 0;
    }
    int32_t i = lead;
    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
        const int32_t ih = ih0 + ky * p->dilation_h;
        for (int32_t kx = 0; kx < p->kernel_w; ++kx, i += in.c) {
            const int32_t iw = iw0 + kx * p->dilation_w;
            const int inside = ih >= 0 && ih < in.h && iw >= 0 && iw < in.w;
            const int8_t *x = x_n + ((int64_t)ih * in.w + iw) * in.c;
            if (groups8) {
                for (int32_t c = 0; c < in.c; c += 8) {
                    if (inside) {
                        mcu_s4_expand8(x + c, off2, col + i + c);
                    } else {
                        memset(col + i + c, 0, 8 * sizeof(int16_t));
                    }
                }
                continue;
            }
            for (int32_t c = 0; c < in.c; ++c) {
                col[mcu_s4_col_index(i + c, taps)] = inside ? (int16_t)(x[c] + p->input_offset) : 0;
            }
        }
    }
}

/* The column of output pixel (oh, ow) as pixel `slot` of the 4 interleaved by groups of 8 taps that
 * mcu_s4_dot_quad reads (n a multiple of 8). */
static void conv_s4_column4(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow, int32_t slot,
                            int16_t *col4)
{
    const mcu_shape4 in = p->input;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    int32_t i = 0;
    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
        const int32_t ih = ih0 + ky * p->dilation_h;
        for (int32_t kx = 0; kx < p->kernel_w; ++kx, i += in.c) {
            const int32_t iw = iw0 + kx * p->dilation_w;
            const int inside = ih >= 0 && ih < in.h && iw >= 0 && iw < in.w;
            const int8_t *x = x_n + ((int64_t)ih * in.w + iw) * in.c;
            if (in.c % 8 == 0) {
                for (int32_t c = 0; c < in.c; c += 8) {
                    int16_t *dst = col4 + (((i + c) >> 3) * 4 + slot) * 8;
                    if (inside) {
                        mcu_s4_expand8(x + c, off2, dst);
                    } else {
                        memset(dst, 0, 8 * sizeof(int16_t));
                    }
                }
                continue;
            }
            for (int32_t c = 0; c < in.c; ++c) {
                const int32_t t = i + c;
                col4[((t >> 3) * 4 + slot) * 8 + (((t & 3) << 1) | ((t >> 2) & 1))] =
                    inside ? (int16_t)(x[c] + p->input_offset) : 0;
            }
        }
    }
}

/* Output pixels first .. first + 3 of image x_n: their 4 columns at col4 (then the sentinel), each channel's
 * row against all 4 (mcu_s4_dot_quad). */
static void conv_s4_quad(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *x_n,
                         const int8_t *weight, const int32_t *bias, int8_t *y_n, int32_t first, int16_t *col4)
{
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * p->input.c;
    for (int32_t s = 0; s < 4; ++s) {
        conv_s4_column4(p, x_n, (first + s) / out.w, (first + s) % out.w, s, col4);
    }
    int8_t *y = y_n + first * out.c;
    for (int32_t oc = 0; oc < out.c; ++oc) {
        const uint32_t b = bias != NULL ? (uint32_t)bias[oc] : 0u;
        uint32_t acc[4] = {b, b, b, b};
        mcu_s4_dot_quad(col4, weight + ((oc * n) >> 1), n >> 3, acc);
        const int32_t m = q->multiplier[oc], sh = q->shift[oc];
        for (int32_t s = 0; s < 4; ++s) {
            y[s * out.c + oc] = mcu_requantize_to_s8_fast(mcu_u32_to_s32(acc[s]), m, sh, p->output_offset,
                                                          p->act_min, p->act_max);
        }
    }
}

/* groups == 1 with a window of at most MCU_S8_COL_MAX taps (MCU_S8_COL_MAX / 2 - 1 when odd): two output
 * pixels (in memory order) at a time through mcu_s4_matrix_pixels, with one column each (two when the
 * window is odd). */
static __attribute__((noinline)) void conv_s4_dsp(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                        const int8_t *weight, const int32_t *bias, int8_t *output)
{
    _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int odd = n & 1;
    /* pixel b's columns MCU_S4_PIXEL_B values after pixel a's (half that for odd windows, two columns each) */
    int16_t *ca = col, *cb = col + (odd ? MCU_S4_PIXEL_B / 2 : MCU_S4_PIXEL_B);
    int16_t *ca2 = col + MCU_S4_PIXEL_B, *cb2 = ca2 + MCU_S4_PIXEL_B / 2;
    const int32_t hw = out.h * out.w;
    /* windows of a multiple of 8 taps whose 4 columns, the sentinel and a word fit the buffer */
    const int quads = n % 8 == 0 && 4 * n + 4 <= 2 * MCU_S8_COL_MAX;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        int8_t *y_n = output + (int64_t)b * hw * out.c;
        int32_t i = 0;
        if (quads) { /* four pixels at a time in the same buffer, the last hw % 4 two at a time below */
            mcu_store_u32(col + 4 * n, MCU_S4_QUAD_SENTINEL);
            for (; i + 4 <= hw; i += 4) {
                conv_s4_quad(p, q, x_n, weight, bias, y_n, i, col);
            }
        }
        for (; i < hw; i += 2) {
            conv_s4_column(p, x_n, i / out.w, i % out.w, n, 0, ca);
            if (odd) {
                conv_s4_column(p, x_n, i / out.w, i % out.w, n, 1, ca2);
            }
            int8_t *yb = NULL;
            if (i + 1 < hw) {
                conv_s4_column(p, x_n, (i + 1) / out.w, (i + 1) % out.w, n, 0, cb);
                if (odd) {
                    conv_s4_column(p, x_n, (i + 1) / out.w, (i + 1) % out.w, n, 1, cb2);
                }
                yb = y_n + (i + 1) * out.c;
            }
            mcu_s4_matrix_pixels(ca, ca2, n, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max,
                                 y_n + i * out.c, yb);
        }
    }
}
#endif

mcu_status mcu_conv2d_s4(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    /* Output pixels are written in memory order after their windows are read (two at a time on the DSP
     * path), so the output may start before the input as far as the window contract allows. */
    const mcu_status status = mcu_conv2d_s8_check(MCU_CONV_S4_FORWARD, p, q, input, weight, bias, output);
    if (status != MCU_OK) {
        return status;
    }
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    (void)ctx; /* (no path of this build takes scratch on a core without the DSP extension) */

#if MCU_S8_MVE
    if (mcu_mve_conv2d_s4(ctx, p, q, input, weight, bias, output)) { /* convolution/mve_conv_s4.h */
        return MCU_OK;
    }
#endif

#if MCU_S4_STREAM && !MCU_S8_MVE /* (Helium cores widen to int8 instead: mve_conv_s4.h) */
    const int64_t words = s4_stream_words(p);
    if (words > 0 && ctx != NULL && ctx->buf != NULL && (int64_t)ctx->size >= words * 4 &&
        ((uintptr_t)ctx->buf & 3u) == 0) {
        const size_t bytes = (size_t)words * 4u;
        const int32_t w_count = out.c * p->kernel_h * p->kernel_w * in.c;
        if (!mcu_overlaps(ctx->buf, bytes, input, (size_t)mcu_shape4_count(&in, 1)) &&
            !mcu_overlaps(ctx->buf, bytes, output, (size_t)mcu_shape4_count(&out, 1)) &&
            !mcu_overlaps(ctx->buf, bytes, weight, mcu_s4_bytes(w_count)) &&
            (bias == NULL || !mcu_overlaps(ctx->buf, bytes, bias, (size_t)out.c * sizeof(int32_t)))) {
            int32_t *stream = (int32_t *)ctx->buf;
            s4_fill_stream(p, q, weight, bias, stream);
            return mcu_conv2d_packed_s8(NULL, p, input, stream, output);
        }
    }
#endif

#if MCU_S8_DSP && !MCU_S8_MVE /* (Helium cores: mve_conv_s4.h takes every layer these would) */
    const int32_t window = p->kernel_h * p->kernel_w * (in.c / p->groups);
    if (p->groups == 1 && (window % 2 == 0 ? window <= MCU_S8_COL_MAX : window < MCU_S8_COL_MAX / 2)) {
        conv_s4_dsp(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
    const int32_t cg = in.c / p->groups;   /* input channels per group */
    const int32_t og = out.c / p->groups;  /* output channels per group */
    const int32_t taps = p->kernel_h * p->kernel_w * cg;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + (int64_t)b * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int8_t *y = output + (((int64_t)b * out.h + oh) * out.w + ow) * out.c;
                for (int32_t oc = 0; oc < out.c; ++oc) {
                    const int32_t c0 = (oc / og) * cg;
                    uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
                    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t ih = ih0 + ky * p->dilation_h;
                        if (ih < 0 || ih >= in.h) {
                            continue;
                        }
                        for (int32_t kx = 0; kx < p->kernel_w; ++kx) {
                            const int32_t iw = iw0 + kx * p->dilation_w;
                            if (iw < 0 || iw >= in.w) {
                                continue;
                            }
                            const int8_t *x = x_n + ((int64_t)ih * in.w + iw) * in.c + c0;
                            acc = mcu_s4_dot(acc, x, p->input_offset, weight,
                                             oc * taps + (ky * p->kernel_w + kx) * cg, cg);
                        }
                    }
                    y[oc] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[oc], q->shift[oc],
                                                 p->output_offset, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
