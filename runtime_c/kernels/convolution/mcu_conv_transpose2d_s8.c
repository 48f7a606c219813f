/* Transposed 2-D convolution, int8 with TFLite's TRANSPOSE_CONV arithmetic: per output channel
 * acc = bias + sum((x + input_offset) * w) over the taps that reach the output pixel (modulo
 * 2^32, as int32 accumulators on the device), then the per-channel requantization of
 * convolution. Gathered per output pixel (convolution/window_transposed.h), with the pixel's int32
 * accumulators on the stack, MCU_CONVT_BLOCK output channels at a time. With the DSP extension
 * each input pixel a tap reaches is widened once to (x + input_offset) int16 lanes, then dual
 * MACs (SMLAD) run it against every output channel's weights (common/conv_s8_dsp.h). */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "conv_check_s8.h"
#include "../common/conv_s8_dsp.h"
#include "../common/requant.h"
#include "window_transposed.h"

#define MCU_CONVT_BLOCK 64

int32_t mcu_conv_transpose2d_s8_get_buffer_size(const mcu_conv2d_s8_params *p)
{
    (void)p;
    return 0;
}

/* One output pixel's channels [oc0, oc0 + block) from the taps that reach it, on top of acc. */
static void convt_pixel(const mcu_conv2d_s8_params *p, const int8_t *x_n, const int8_t *weight, int32_t oh,
                        int32_t ow, int32_t oc0, int32_t block, uint32_t *acc)
{
    const mcu_shape4 in = p->input;
    const int32_t icg = in.c / p->groups;
    const int32_t ocg = p->output.c / p->groups;
    const int32_t w_per_oc = p->kernel_h * p->kernel_w * icg;
#if MCU_S8_DSP
    _Alignas(4) int16_t col[MCU_S8_COL_MAX];
    const int dsp = in.c <= MCU_S8_COL_MAX;
#endif
    const int32_t kh0 = mcu_transposed_first_tap(oh, p->stride_h, p->pad_top, p->dilation_h);
    const int32_t kh_step = mcu_transposed_tap_step(p->stride_h, p->dilation_h);
    const int32_t kw0 = mcu_transposed_first_tap(ow, p->stride_w, p->pad_left, p->dilation_w);
    const int32_t kw_step = mcu_transposed_tap_step(p->stride_w, p->dilation_w);
    for (int32_t kh = kh0; kh < p->kernel_h; kh += kh_step) {
        const int32_t ih = mcu_transposed_source(oh, kh, p->stride_h, p->pad_top, p->dilation_h, in.h);
        if (ih < 0) {
            continue;
        }
        for (int32_t kw = kw0; kw < p->kernel_w; kw += kw_step) {
            const int32_t iw = mcu_transposed_source(ow, kw, p->stride_w, p->pad_left, p->dilation_w, in.w);
            if (iw < 0) {
                continue;
            }
            const int8_t *xv = x_n + (ih * in.w + iw) * in.c;
            const int32_t tap = (kh * p->kernel_w + kw) * icg;
#if MCU_S8_DSP
            if (dsp) {
                /* each group widened on its own, so its lanes pair with its weights from their start */
                for (int32_t g = 0; g < p->groups; ++g) {
                    mcu_expand_s8(xv + g * icg, icg, p->input_offset, col + g * icg);
                }
                for (int32_t j = 0; j < block; ++j) {
                    const int32_t oc = oc0 + j;
                    acc[j] = mcu_dot_1x1(col + (oc / ocg) * icg, weight + oc * w_per_oc + tap, icg, acc[j]);
                }
                continue;
            }
#endif
            for (int32_t j = 0; j < block; ++j) {
                const int32_t oc = oc0 + j;
                const int8_t *xg = xv + (oc / ocg) * icg;
                const int8_t *wv = weight + oc * w_per_oc + tap;
                uint32_t a = acc[j];
                for (int32_t ic = 0; ic < icg; ++ic) {
                    a += (uint32_t)((xg[ic] + p->input_offset) * wv[ic]);
                }
                acc[j] = a;
            }
        }
    }
}

mcu_status mcu_conv_transpose2d_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                   const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                   const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_CHECK(mcu_conv2d_s8_check(MCU_CONV_S8_TRANSPOSED, p, q, input, weight, bias, output));
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;

    uint32_t acc[MCU_CONVT_BLOCK];
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            for (int32_t ow = 0; ow < out.w; ++ow) {
                int8_t *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t oc0 = 0; oc0 < out.c; oc0 += MCU_CONVT_BLOCK) {
                    const int32_t block = out.c - oc0 < MCU_CONVT_BLOCK ? out.c - oc0 : MCU_CONVT_BLOCK;
                    for (int32_t j = 0; j < block; ++j) {
                        acc[j] = bias != NULL ? (uint32_t)bias[oc0 + j] : 0u;
                    }
                    convt_pixel(p, x_n, weight, oh, ow, oc0, block, acc);
                    for (int32_t j = 0; j < block; ++j) {
                        const int32_t oc = oc0 + j;
                        y[oc] = mcu_requantize_to_s8(mcu_u32_to_s32(acc[j]), q->multiplier[oc], q->shift[oc],
                                                     p->output_offset, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
