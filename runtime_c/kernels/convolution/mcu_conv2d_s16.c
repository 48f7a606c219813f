#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"

/* Products of int16 and int8 are at most 2^22 in magnitude: 256 of them fit an int32 partial sum. */
#define MCU_S16_PART 256

int32_t mcu_conv2d_s16_get_buffer_size(const mcu_conv2d_s16_params *p)
{
    (void)p;
    return 0;
}

mcu_status mcu_conv2d_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                          const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
                    p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 &&
                    mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const int32_t in_count = mcu_shape4_count(in, 2);
    const int32_t out_count = mcu_shape4_count(out, 2);
    const int32_t w_dims[4] = {out->c, p->kernel_h, p->kernel_w, in->c};
    const int32_t w_count = mcu_checked_count(w_dims, 4, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0 && w_count > 0 && in->n == out->n &&
                    mcu_window_fits(in->h, out->h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                    mcu_window_fits(in->w, out->w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0),
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < out->c; ++o) {
        MCU_REQUIRE(mcu_quant_s16_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count, output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out->c * sizeof(int64_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t cin = in->c;
    int16_t *y = output;
    for (int32_t n = 0; n < out->n; ++n) {
        const int16_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)cin;
        for (int32_t oy = 0; oy < out->h; ++oy) {
            for (int32_t ox = 0; ox < out->w; ++ox) {
                const int32_t y0 = oy * p->stride_h - p->pad_top;
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (int32_t o = 0; o < out->c; ++o) {
                    const int8_t *w = weight + (size_t)o * (size_t)p->kernel_h * (size_t)p->kernel_w * (size_t)cin;
                    int64_t acc = bias != NULL ? bias[o] : 0;
                    int32_t part = 0, taken = 0;
                    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t iy = y0 + ky * p->dilation_h;
                        for (int32_t kx = 0; kx < p->kernel_w; ++kx, w += cin) {
                            const int32_t ix = x0 + kx * p->dilation_w;
                            if (iy < 0 || iy >= in->h || ix < 0 || ix >= in->w) {
                                continue; /* padding: zero point 0 contributes nothing */
                            }
                            const int16_t *x = img + ((size_t)iy * (size_t)in->w + (size_t)ix) * (size_t)cin;
                            for (int32_t c = 0; c < cin; ++c) {
                                part += (int32_t)x[c] * (int32_t)w[c];
                                if (++taken == MCU_S16_PART) {
                                    acc += part;
                                    part = 0;
                                    taken = 0;
                                }
                            }
                        }
                    }
                    acc += part;
                    const int32_t v =
                        mcu_requantize_s64(acc, mcu_reduce_multiplier_q15(q->multiplier[o]), q->shift[o]);
                    *y++ = mcu_clamp_s16(v, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
