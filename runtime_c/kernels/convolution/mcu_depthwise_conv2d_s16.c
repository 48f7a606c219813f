#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"
#include "../common/dot_s16.h"
#include "../common/dot_packed_s16.h" /* the chunk requantization (mcu_s16p_rq) */

/* Products of int16 and int8 are at most 2^22 in magnitude: 256 of them fit an int32 partial sum. */
#define MCU_DW_S16_PART 256

int32_t mcu_depthwise_conv2d_s16_get_buffer_size(const mcu_depthwise_conv2d_s16_params *p)
{
    (void)p;
    return 0;
}

/* The taps [*lo, *hi) of a window starting at `start` that fall inside [0, size). */
static void mcu_dw_s16_taps(int32_t start, int32_t kernel, int32_t dilation, int32_t size, int32_t *lo, int32_t *hi)
{
    int32_t a = 0;
    while (a < kernel && start + a * dilation < 0) {
        ++a;
    }
    int32_t b = kernel;
    while (b > a && start + (b - 1) * dilation >= size) {
        --b;
    }
    *lo = a;
    *hi = b;
}

/* The window taps [*lo, *hi) for a start of `start` and a dilation of 1, without mcu_dw_s16_taps' loops. */
static inline void mcu_dw_s16_taps1(int32_t start, int32_t kernel, int32_t size, int32_t *lo, int32_t *hi)
{
    const int32_t a = start < 0 ? -start : 0;
    const int32_t b = size - start < kernel ? size - start : kernel;
    *lo = a < kernel ? a : kernel;
    *hi = b > *lo ? b : *lo;
}

/* Windows of up to MCU_DW_S16_TAPS taps take mcu_dw_s16_quads: a channel quad's weights widened once to
 * int16 pairs on the stack (512 bytes). */
#define MCU_DW_S16_TAPS 64

/* One channel per input channel, windows of at most MCU_DW_S16_TAPS taps, biases and shifts of
 * mcu_s16_small_layer: four channels at a time over every output pixel, so that their weights are widened
 * (to the pairs (w0, w1), (w2, w3)) and their requantization constants made once per quad rather than per
 * pixel; per tap two activation words, one weight pair load and four halfword multiply-accumulates. */
static void mcu_dw_s16_quads(const mcu_depthwise_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                             const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output,
                             int32_t channels)
{
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const int32_t c_all = in->c, kw = p->kernel_w, taps = p->kernel_h * p->kernel_w;
    const int32_t x_step = p->dilation_w * c_all, x_row = p->dilation_h * in->w * c_all;
#if MCU_S8_DSP_NATIVE
    const int32_t x_step_bytes = x_step * (int32_t)sizeof(int16_t);
    /* from a 3x3 window row's last tap to the next row's first */
    const int32_t x_row3_bytes = (x_row - 2 * x_step) * (int32_t)sizeof(int16_t);
    const int full3 = p->kernel_h == 3 && kw == 3;
#endif
    const int clamp = mcu_s16p_clamp_kind(p->act_min, p->act_max);
    uint32_t wq[2 * MCU_DW_S16_TAPS];
    mcu_s16p_rq t;
    for (int32_t o = 0; o < channels; o += 4) {
        for (int32_t i = 0; i < taps; ++i) {
            const int8_t *wi = weight + (size_t)i * (size_t)c_all + o;
            wq[2 * i] = (uint32_t)(uint16_t)wi[0] | ((uint32_t)(uint16_t)wi[1] << 16);
            wq[2 * i + 1] = (uint32_t)(uint16_t)wi[2] | ((uint32_t)(uint16_t)wi[3] << 16);
        }
        mcu_s16p_rq_init(&t, bias, q, o, 4);
        int16_t *y = output + o;
        for (int32_t n = 0; n < out->n; ++n) {
            const int16_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)c_all + o;
            for (int32_t oy = 0; oy < out->h; ++oy) {
                const int32_t y0 = oy * p->stride_h - p->pad_top;
                int32_t ky0, ky1;
                if (p->dilation_h == 1) {
                    mcu_dw_s16_taps1(y0, p->kernel_h, in->h, &ky0, &ky1);
                } else {
                    mcu_dw_s16_taps(y0, p->kernel_h, p->dilation_h, in->h, &ky0, &ky1);
                }
                for (int32_t ox = 0; ox < out->w; ++ox, y += out->c) {
                    const int32_t x0 = ox * p->stride_w - p->pad_left;
                    int32_t kx0, kx1;
                    if (p->dilation_w == 1) {
                        mcu_dw_s16_taps1(x0, kw, in->w, &kx0, &kx1);
                    } else {
                        mcu_dw_s16_taps(x0, kw, p->dilation_w, in->w, &kx0, &kx1);
                    }
                    const int32_t cols = kx1 - kx0;
                    const int16_t *xc = img + ((size_t)(y0 + ky0 * p->dilation_h) * (size_t)in->w +
                                               (size_t)(x0 + kx0 * p->dilation_w)) * (size_t)c_all;
                    const uint32_t *wc = wq + 2 * (ky0 * kw + kx0);
                    uint32_t a0 = (uint32_t)t.bias[0], a1 = (uint32_t)t.bias[1], a2 = (uint32_t)t.bias[2],
                             a3 = (uint32_t)t.bias[3];
                    int32_t r_end = ky1;
#if MCU_S8_DSP_NATIVE
                    if (full3 && ky1 - ky0 == 3 && cols == 3) {
                        /* a 3x3 window wholly inside: its nine taps straight-line, 8 instructions a tap */
#define MCU_DW3_TAP(off, step)                                                                            \
    "ldr %[x01], [%[xt]]\n\t"                                                                             \
    "ldr %[x23], [%[xt], #4]\n\t"                                                                         \
    "ldrd %[w01], %[w23], [%[wq], #" off "]\n\t"                                                          \
    "add %[xt], %[xt], %[" step "]\n\t"                                                                   \
    "smlabb %[a0], %[x01], %[w01], %[a0]\n\t"                                                             \
    "smlatt %[a1], %[x01], %[w01], %[a1]\n\t"                                                             \
    "smlabb %[a2], %[x23], %[w23], %[a2]\n\t"                                                             \
    "smlatt %[a3], %[x23], %[w23], %[a3]\n\t"
                        const int16_t *xt = xc;
                        uint32_t x01, x23, w01, w23;
                        __asm__ volatile(MCU_DW3_TAP("0", "step") MCU_DW3_TAP("8", "step") MCU_DW3_TAP("16", "row")
                                             MCU_DW3_TAP("24", "step") MCU_DW3_TAP("32", "step")
                                                 MCU_DW3_TAP("40", "row") MCU_DW3_TAP("48", "step")
                                                     MCU_DW3_TAP("56", "step") MCU_DW3_TAP("64", "step")
                                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xt] "+r"(xt),
                                           [x01] "=&r"(x01), [x23] "=&r"(x23), [w01] "=&r"(w01), [w23] "=&r"(w23)
                                         : [wq] "r"(wq), [step] "r"(x_step_bytes), [row] "r"(x_row3_bytes), "m"(wq)
                                         : "cc");
#undef MCU_DW3_TAP
                        r_end = ky0; /* done: no rows left for the loop below */
                    }
#endif
                    for (int32_t r = ky0; r < r_end; ++r, xc += x_row, wc += 2 * kw) {
                        const int16_t *xt = xc;
                        const uint32_t *wt = wc;
#if MCU_S8_DSP_NATIVE
                        /* the row's taps: 10 instructions a tap (unaligned activation words are single LDRs). The
                         * assembly reads the widened weights (an input operand, so their stores stay before it)
                         * and the input, which nothing here writes: no memory clobber, which would have the loop
                         * reload its state from the stack every pixel. */
                        const uint32_t *we = wc + 2 * cols;
                        uint32_t x01, x23, w01, w23;
                        if (cols > 0) {
                            __asm__ volatile("1:\n\t"
                                             "ldr %[x01], [%[xt]]\n\t"
                                             "ldr %[x23], [%[xt], #4]\n\t"
                                             "add %[xt], %[xt], %[step]\n\t"
                                             "ldrd %[w01], %[w23], [%[wt]], #8\n\t"
                                             "smlabb %[a0], %[x01], %[w01], %[a0]\n\t"
                                             "smlatt %[a1], %[x01], %[w01], %[a1]\n\t"
                                             "smlabb %[a2], %[x23], %[w23], %[a2]\n\t"
                                             "smlatt %[a3], %[x23], %[w23], %[a3]\n\t"
                                             "cmp %[wt], %[we]\n\t"
                                             "bne 1b"
                                             : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                                               [xt] "+r"(xt), [wt] "+r"(wt), [x01] "=&r"(x01), [x23] "=&r"(x23),
                                               [w01] "=&r"(w01), [w23] "=&r"(w23)
                                             : [we] "r"(we), [step] "r"(x_step_bytes), "m"(wq)
                                             : "cc");
                        }
#else
                        for (int32_t c = 0; c < cols; ++c, xt += x_step, wt += 2) {
#if MCU_S8_DSP
                            const uint32_t x01 = mcu_load_u32(xt), x23 = mcu_load_u32(xt + 2);
                            const uint32_t w01 = wt[0], w23 = wt[1];
                            a0 = mcu_smlabb(x01, w01, a0);
                            a1 = mcu_smlatt(x01, w01, a1);
                            a2 = mcu_smlabb(x23, w23, a2);
                            a3 = mcu_smlatt(x23, w23, a3);
#else
                            a0 += (uint32_t)((int32_t)xt[0] * (int32_t)(int16_t)(uint16_t)(wt[0] & 0xFFFFu));
                            a1 += (uint32_t)((int32_t)xt[1] * (int32_t)(int16_t)(uint16_t)(wt[0] >> 16));
                            a2 += (uint32_t)((int32_t)xt[2] * (int32_t)(int16_t)(uint16_t)(wt[1] & 0xFFFFu));
                            a3 += (uint32_t)((int32_t)xt[3] * (int32_t)(int16_t)(uint16_t)(wt[1] >> 16));
#endif
                        }
#endif
                    }
                    /* the bias below 2^30 plus at most 256 products of 2^22: the sums are the int32 values */
                    mcu_s16p_store4(mcu_s16p_rq_apply(mcu_u32_to_s32(a0), &t.ch[0]),
                                    mcu_s16p_rq_apply(mcu_u32_to_s32(a1), &t.ch[1]),
                                    mcu_s16p_rq_apply(mcu_u32_to_s32(a2), &t.ch[2]),
                                    mcu_s16p_rq_apply(mcu_u32_to_s32(a3), &t.ch[3]), clamp, p->act_min, p->act_max, y);
                }
            }
        }
    }
}

/* CMSIS-NN's arm_depthwise_conv_s16 conventions: NHWC int16 input and output (zero point 0), weights
 * [kh][kw][out_c] int8 with out_c = in_c * ch_mult (output channel ic * ch_mult + m reads input channel ic),
 * an int64 bias per output channel, per-channel requantization of the exact 64-bit window sum. */
mcu_status mcu_depthwise_conv2d_s16(const mcu_context *ctx, const mcu_depthwise_conv2d_s16_params *p,
                                    const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                    const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
                    p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->ch_mult > 0 &&
                    mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const int32_t in_count = mcu_shape4_count(in, 2);
    const int32_t out_count = mcu_shape4_count(out, 2);
    const int32_t w_dims[3] = {p->kernel_h, p->kernel_w, out->c};
    const int32_t w_count = mcu_checked_count(w_dims, 3, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0 && w_count > 0 && in->n == out->n &&
                    (int64_t)in->c * p->ch_mult == out->c &&
                    mcu_window_fits(in->h, out->h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                    mcu_window_fits(in->w, out->w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0),
                MCU_ERR_SHAPE);
    /* A kernel row's products must fit an int32 partial sum: 512 of at most 2^22. */
    MCU_REQUIRE(p->kernel_w <= 512, MCU_ERR_UNSUPPORTED);
    for (int32_t o = 0; o < out->c; ++o) {
        MCU_REQUIRE(mcu_quant_s16_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count, output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out->c * sizeof(int64_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t cin = in->c, cout = out->c, mult = p->ch_mult;
    /* Element strides of the taps in the input and in the weights. */
    const int32_t x_step = p->dilation_w * cin, x_row = p->dilation_h * in->w * cin;
    const int32_t w_row = p->kernel_w * cout;
    /* biases and shifts for which a window's int32 sum plus the bias requantizes the short way */
    const int small_rq = mcu_s16_small_layer(bias, q->shift, cout);
    /* the channel quads over the whole output first, then the channels left over pixel by pixel */
    const int32_t quads = mult == 1 && small_rq && (int64_t)p->kernel_h * p->kernel_w <= MCU_DW_S16_TAPS
                              ? cout & ~3
                              : 0;
    if (quads > 0) {
        mcu_dw_s16_quads(p, q, input, weight, bias, output, quads);
    }
    int16_t *y = output;
    for (int32_t n = 0; n < out->n; ++n) {
        const int16_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)cin;
        for (int32_t oy = 0; oy < out->h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            int32_t ky0, ky1;
            mcu_dw_s16_taps(y0, p->kernel_h, p->dilation_h, in->h, &ky0, &ky1);
            for (int32_t ox = 0; ox < out->w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                int32_t kx0, kx1;
                mcu_dw_s16_taps(x0, p->kernel_w, p->dilation_w, in->w, &kx0, &kx1);
                const int32_t rows = ky1 - ky0, cols = kx1 - kx0;
                /* the window's first in-bounds tap, channel 0 */
                const int16_t *xw = img + ((size_t)(y0 + ky0 * p->dilation_h) * (size_t)in->w +
                                           (size_t)(x0 + kx0 * p->dilation_w)) * (size_t)cin;
                const int8_t *ww = weight + ((size_t)ky0 * (size_t)p->kernel_w + (size_t)kx0) * (size_t)cout;
                /* Padding (zero point 0) adds nothing. A window of up to MCU_DW_S16_PART taps sums in int32;
                 * larger ones in int32 parts of a kernel row at a time (at most 512 taps, checked above). */
                const int small = (int64_t)rows * cols <= MCU_DW_S16_PART;
                int32_t o = quads;
                y += quads;
                /* One channel per input channel: four channels a step share the tap loop's pointer steps. */
                for (; small && mult == 1 && o + 4 <= cout; o += 4, y += 4) {
                    const int16_t *xc = xw + o;
                    const int8_t *wc = ww + o;
                    int32_t p0 = 0, p1 = 0, p2 = 0, p3 = 0;
                    for (int32_t r = 0; r < rows; ++r, xc += x_row, wc += w_row) {
                        const int16_t *xt = xc;
                        const int8_t *wt = wc;
#if MCU_S8_DSP
                        /* Per tap two int16 channel pairs and four weights widened by SXTB16 to (w0, w2) and
                         * (w1, w3): each channel's product is one halfword multiply-accumulate. */
                        uint32_t a0 = (uint32_t)p0, a1 = (uint32_t)p1, a2 = (uint32_t)p2, a3 = (uint32_t)p3;
                        for (int32_t c = 0; c < cols; ++c, xt += x_step, wt += cout) {
                            const uint32_t x01 = mcu_load_u32(xt), x23 = mcu_load_u32(xt + 2);
                            const uint32_t k = mcu_load_u32(wt);
                            const uint32_t w02 = mcu_sxtb16(k), w13 = mcu_sxtb16_ror8(k);
                            a0 = mcu_smlabb(x01, w02, a0);
                            a1 = mcu_s16_smlatb(x01, w13, a1);
                            a2 = mcu_s16_smlabt(x23, w02, a2);
                            a3 = mcu_smlatt(x23, w13, a3);
                        }
                        p0 = (int32_t)a0;
                        p1 = (int32_t)a1;
                        p2 = (int32_t)a2;
                        p3 = (int32_t)a3;
#else
                        for (int32_t c = 0; c < cols; ++c, xt += x_step, wt += cout) {
                            p0 += (int32_t)xt[0] * (int32_t)wt[0];
                            p1 += (int32_t)xt[1] * (int32_t)wt[1];
                            p2 += (int32_t)xt[2] * (int32_t)wt[2];
                            p3 += (int32_t)xt[3] * (int32_t)wt[3];
                        }
#endif
                    }
                    const int32_t parts[4] = {p0, p1, p2, p3};
                    for (int32_t k = 0; k < 4; ++k) {
                        const int64_t acc = (bias != NULL ? bias[o + k] : 0) + parts[k];
                        const int32_t v = mcu_requantize_s16_acc(acc, q->multiplier[o + k],
                                                             q->shift[o + k]);
                        y[k] = mcu_clamp_to_s16(v, p->act_min, p->act_max);
                    }
                }
                for (; o < cout; ++o) {
                    const int16_t *xc = xw + o / mult;
                    const int8_t *wc = ww + o;
                    int64_t acc = bias != NULL ? bias[o] : 0;
                    int32_t part = 0;
                    for (int32_t r = 0; r < rows; ++r, xc += x_row, wc += w_row) {
                        const int16_t *xt = xc;
                        const int8_t *wt = wc;
                        for (int32_t c = 0; c < cols; ++c, xt += x_step, wt += cout) {
                            part += (int32_t)*xt * (int32_t)*wt;
                        }
                        if (!small) {
                            acc += part;
                            part = 0;
                        }
                    }
                    acc += part;
                    const int32_t v =
                        mcu_requantize_s16_acc(acc, q->multiplier[o], q->shift[o]);
                    *y++ = mcu_clamp_to_s16(v, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
