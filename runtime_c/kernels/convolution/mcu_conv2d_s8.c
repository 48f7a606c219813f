#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "conv_check_s8.h"
#include "../common/conv_s8_dsp.h"
#include "mve_conv3_s8.h"
#include "mve_conv_narrow_s8.h"
#include "mve_pw_s8.h"
#include "../common/mve_s8.h"
#include "../common/plain_dot_s8.h"
#include "../common/plain_s8.h"
#include "../common/requant.h"
#include "../common/window.h"

int32_t mcu_conv2d_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_MVE
/* groups == 1 with a window of at most MCU_S8_MVE_COL_MAX bytes and at most MCU_S8_MVE_OC_MAX
 * output channels: blocks of consecutive output pixels (in memory order) im2col'd as raw int8 into
 * one buffer, then mcu_mve_matrix_block: four output channels at a time over the block's pixels,
 * 16 taps per VMLADAVA, on top of biases with the input offset folded in (mve_s8.h). All of a
 * block's windows are gathered before any of its outputs is written, which keeps the window overlap
 * contract (the reads only move earlier). */
static int conv_mve_applies(const mcu_conv2d_s8_params *p)
{
    return p->groups == 1 && p->kernel_h * p->kernel_w * p->input.c <= MCU_S8_MVE_COL_MAX &&
           p->output.c <= MCU_S8_MVE_OC_MAX;
}

/* mcu_mve_im2col_s8, with the window of a pixel that lies inside the input (dilation 1) copied as kh
 * runs of the input without the per-row bounds (most pixels of a layer). */
static inline void conv_mve_window(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow,
                                   int8_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    if (p->dilation_h == 1 && p->dilation_w == 1 && ih0 >= 0 && iw0 >= 0 && ih0 + p->kernel_h <= in.h &&
        iw0 + p->kernel_w <= in.w) {
        const int32_t run = p->kernel_w * in.c;
        const int8_t *src = x_n + ((int64_t)ih0 * in.w + iw0) * in.c;
        for (int32_t i = 0; i < p->kernel_h; ++i, src += in.w * in.c) {
            mcu_mve_copy_s8(col + i * run, src, run);
        }
        return;
    }
    mcu_mve_im2col_s8(p, x_n, oh, ow, col);
}

static void conv_mve(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                     const int8_t *weight, const int32_t *bias, int8_t *output)
{
    _Alignas(16) int8_t col[MCU_S8_MVE_COL_MAX];
    _Alignas(16) int32_t kbias[MCU_S8_MVE_OC_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int32_t block = MCU_S8_MVE_COL_MAX / n; /* >= 1 (conv_mve_applies) */
    const int32_t hw = out.h * out.w;
    mcu_mve_fold_bias(weight, n, out.c, bias, p->input_offset, kbias);
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + b * in.h * in.w * in.c;
        int8_t *y = output + b * hw * out.c;
        int32_t oh = 0, ow = 0;
        for (int32_t i = 0; i < hw; i += block) {
            const int32_t count = hw - i < block ? hw - i : block;
            for (int32_t k = 0; k < count; ++k) {
                conv_mve_window(p, x_n, oh, ow, col + k * n);
                if (++ow == out.w) {
                    ow = 0;
                    ++oh;
                }
            }
            mcu_mve_matrix_block(col, count, n, out.c, weight, kbias, q, p->output_offset, p->act_min, p->act_max,
                                 y + i * out.c);
        }
    }
}

#endif

#if MCU_S8_DSP
/* groups == 1 with a window of at most MCU_S8_COL_MAX values: im2col two output pixels (in memory
 * order) into 16-bit columns, then both pixels times two output channels per step. Both pixels'
 * reads finish before either is written, which keeps the window overlap contract. */
static int conv_dsp_applies(const mcu_conv2d_s8_params *p)
{
    const int32_t n = p->kernel_h * p->kernel_w * p->input.c;
    return p->groups == 1 && n <= MCU_S8_COL_MAX &&
           ((p->input.c % 4 == 0 && p->dilation_w == 1) || n <= MCU_S8_RAW_MAX);
}

static void conv_dsp(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                     const int8_t *weight, const int32_t *bias, int8_t *output)
{
    _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
    int8_t raw[MCU_S8_RAW_MAX];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int32_t hw = out.h * out.w;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + b * in.h * in.w * in.c;
        int8_t *y_n = output + b * hw * out.c;
        for (int32_t i = 0; i < hw; i += 2) {
            mcu_im2col_s8(p, x_n, i / out.w, i % out.w, col, raw);
            int8_t *yb = NULL;
            if (i + 1 < hw) {
                mcu_im2col_s8(p, x_n, (i + 1) / out.w, (i + 1) % out.w, col + MCU_S8_COL_MAX, raw);
                yb = y_n + (i + 1) * out.c;
            }
            mcu_matrix_pixels_s8(col, col + MCU_S8_COL_MAX, n, out.c, weight, bias, q, p->output_offset, p->act_min,
                                 p->act_max, y_n + i * out.c, yb);
        }
    }
}
#endif

#if MCU_S8_WIDE
/* groups == 1 with a window of at most MCU_S8_WIDE_WORDS taps (common/plain_s8.h): the windows
 * of four output pixels (two for windows over half that) in memory order become one column, then
 * every output channel reads it. The block's windows are read before any of its outputs is
 * written, which keeps the window overlap contract. */
static void conv_wide(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                      const int8_t *weight, const int32_t *bias, int8_t *output)
{
    int32_t col[MCU_S8_WIDE_WORDS];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    const int four = 2 * n <= MCU_S8_WIDE_WORDS;
    const int32_t block = four ? 4 : 2;
    const int32_t stride = four ? 2 : 1;
    const int32_t hw = out.h * out.w;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + b * in.h * in.w * in.c;
        int8_t *y_n = output + b * hw * out.c;
        int32_t oh = 0, ow = 0;
        for (int32_t i = 0; i < hw; i += block) {
            const int32_t count = hw - i < block ? hw - i : block;
            for (int32_t j = 0; j < block; ++j) {
                int32_t *lane = col + (j >> 1);
                if (j < count) {
                    mcu_wide_gather(p, x_n, oh, ow, lane, stride, j & 1);
                    if (++ow == out.w) {
                        ow = 0;
                        ++oh;
                    }
                } else if ((j & 1) == 0) {
                    mcu_wide_zero(lane, stride, n);
                }
            }
            mcu_wide_block(col, n, four, count, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max,
                           y_n + i * out.c, out.c);
        }
    }
}
#endif

#if MCU_S8_PLAIN
/* Largest window (kernel_h * kernel_w * input channels) of the column: 2,560 bytes of stack. */
#define MCU_S8_PLAIN_CONV_COL 640

/* groups == 1 with a window of at most MCU_S8_PLAIN_CONV_COL values: each output pixel's window
 * (input offset added, taps in the padding zero) becomes a column of words that two output channels
 * at a time read (common/plain_dot_s8.h). The window is read before any of the pixel's outputs is
 * written, which keeps the window overlap contract. */
static void conv_plain(const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                       const int8_t *weight, const int32_t *bias, int8_t *output)
{
    int32_t col[MCU_S8_PLAIN_CONV_COL];
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t n = p->kernel_h * p->kernel_w * in.c;
    int8_t *y = output;
    for (int32_t b = 0; b < in.n; ++b) {
        const int8_t *x_n = input + b * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t ow = 0; ow < out.w; ++ow, y += out.c) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t *c = col;
                for (int32_t i = 0; i < p->kernel_h; ++i) {
                    const int32_t ih = ih0 + i * p->dilation_h;
                    for (int32_t j = 0; j < p->kernel_w; ++j, c += in.c) {
                        const int32_t iw = iw0 + j * p->dilation_w;
                        if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) {
                            for (int32_t k = 0; k < in.c; ++k) {
                                c[k] = 0;
                            }
                            continue;
                        }
                        const int8_t *x = x_n + (ih * in.w + iw) * in.c;
                        for (int32_t k = 0; k < in.c; ++k) {
                            c[k] = x[k] + p->input_offset;
                        }
                    }
                }
                mcu_plain_pw_outputs(col, n, out.c, weight, bias, q, p->output_offset, p->act_min, p->act_max, y);
            }
        }
    }
}
#endif

mcu_status mcu_conv2d_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    (void)ctx; /* optional: the Helium three-pixel convolution copies its weights there when it holds them */
    MCU_CHECK(mcu_conv2d_s8_check(MCU_CONV_S8_FORWARD, p, q, input, weight, bias, output));
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t icg = in.c / p->groups;
    const int32_t ocg = out.c / p->groups;

#if MCU_S8_MVE
    /* 1x1 without padding (strided: ResNet's shortcuts): the pair path (convolution/mve_pw_s8.h) */
    if (p->kernel_h == 1 && p->kernel_w == 1 && p->pad_top == 0 && p->pad_left == 0 && p->groups == 1 &&
        in.c <= MCU_MVE_PW_N_MAX && out.c <= MCU_S8_MVE_OC_MAX && (out.h - 1) * p->stride_h < in.h &&
        (out.w - 1) * p->stride_w < in.w) {
        mcu_mve_pointwise(input, (int64_t)out.n * out.h * out.w, in.c, out.c, weight, bias, p->input_offset, q,
                          p->output_offset, p->act_min, p->act_max, output, 1, p);
        return MCU_OK;
    }
    if (mcu_mve_narrow_applies(p)) { /* 1 to 4 input channels (convolution/mve_conv_narrow_s8.h) */
        mcu_mve_conv_narrow(p, q, input, weight, bias, output);
        return MCU_OK;
    }
    if (mcu_mve_conv3_applies(p, q)) { /* input channels a multiple of 16 (convolution/mve_conv3_s8.h) */
        mcu_mve_conv3(ctx, p, q, input, weight, bias, output);
        return MCU_OK;
    }
    if (conv_mve_applies(p)) {
        conv_mve(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP
    if (conv_dsp_applies(p)) {
        conv_dsp(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
#if MCU_S8_WIDE
    if (p->groups == 1 && p->kernel_h * p->kernel_w * in.c <= MCU_S8_WIDE_WORDS) {
        conv_wide(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
#if MCU_S8_PLAIN
    if (p->groups == 1 && p->kernel_h * p->kernel_w * in.c <= MCU_S8_PLAIN_CONV_COL) {
        conv_plain(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
    const int32_t in_offset = p->input_offset;
    const int32_t w_per_oc = p->kernel_h * p->kernel_w * icg;
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, p->dilation_h, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, p->dilation_w, in.w, &kw_lo, &kw_hi);
                int8_t *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t g = 0; g < p->groups; ++g) {
                    const int8_t *x_g = x_n + g * icg;
                    for (int32_t m = 0; m < ocg; ++m) {
                        const int32_t oc = g * ocg + m;
                        const int8_t *w_oc = weight + oc * w_per_oc;
                        /* Accumulate modulo 2^32 (CMSIS-NN's int32 accumulator
                         * on the device) without signed overflow. */
                        uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u;
                        for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                            const int32_t ih = ih0 + kh * p->dilation_h;
                            const int8_t *x_row = x_g + ih * in.w * in.c;
                            const int8_t *w_row = w_oc + kh * p->kernel_w * icg;
                            for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                                const int32_t iw = iw0 + kw * p->dilation_w;
                                const int8_t *xv = x_row + iw * in.c;
                                const int8_t *wv = w_row + kw * icg;
                                for (int32_t ic = 0; ic < icg; ++ic) {
                                    acc += (uint32_t)((xv[ic] + in_offset) * wv[ic]);
                                }
                            }
                        }
                        y[oc] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[oc], q->shift[oc],
                                                     p->output_offset, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
