#include <stddef.h>
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check_s16.h"
#include "../common/dot_packed_s16.h"
#include "../common/requant_s16.h"

/* n int16 from src to dst, a word at a time where the core loads unaligned words (newlib-nano's memcpy
 * copies bytes; the empty asm keeps GCC from turning the loop back into that call). */
static void mcu_copy_s16(int16_t *dst, const int16_t *src, int32_t n)
{
    int32_t i = 0;
#if MCU_S8_DSP
    for (; i + 2 <= n; i += 2) {
        mcu_store_u32(dst + i, mcu_load_u32(src + i));
        __asm__("" ::: "memory");
    }
#endif
    for (; i < n; ++i) {
        dst[i] = src[i];
        __asm__("" ::: "memory");
    }
}

/* The input vector of the output pixel whose window starts at (y0, x0) of image img: the pixel itself for
 * a 1x1 kernel (NULL when it lies in the padding: zero point 0, its products add nothing), else the window
 * gathered into col (a row of taps in one copy when the whole row lies inside the image). */
static const int16_t *mcu_conv_s16_vector(const mcu_conv2d_s16_params *p, const int16_t *img, int32_t y0, int32_t x0,
                                          int16_t *col)
{
    const mcu_shape4 *in = &p->input;
    const int32_t cin = in->c;
    if (col == NULL) {
        return y0 >= 0 && y0 < in->h && x0 >= 0 && x0 < in->w
                   ? img + ((size_t)y0 * (size_t)in->w + (size_t)x0) * (size_t)cin
                   : NULL;
    }
    const int32_t row = p->kernel_w * cin;
    const int whole_row = p->dilation_w == 1 && x0 >= 0 && x0 + p->kernel_w <= in->w;
    int16_t *c = col;
    for (int32_t ky = 0; ky < p->kernel_h; ++ky, c += row) {
        const int32_t iy = y0 + ky * p->dilation_h;
        if (iy < 0 || iy >= in->h) {
            mcu_zero_s16(c, row);
        } else if (whole_row) {
            mcu_copy_s16(c, img + ((size_t)iy * (size_t)in->w + (size_t)x0) * (size_t)cin, row);
        } else {
            for (int32_t kx = 0; kx < p->kernel_w; ++kx) {
                const int32_t ix = x0 + kx * p->dilation_w;
                if (ix < 0 || ix >= in->w) {
                    mcu_zero_s16(c + kx * cin, cin);
                } else {
                    mcu_copy_s16(c + kx * cin, img + ((size_t)iy * (size_t)in->w + (size_t)ix) * (size_t)cin, cin);
                }
            }
        }
    }
    return col;
}

mcu_status mcu_conv2d_packed_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
                                 const mcu_per_channel_quant *q, const int16_t *input, const int32_t *weight,
                                 const int64_t *bias, int16_t *output)
{
    const mcu_status bad = mcu_conv2d_s16_check(p, q, input, weight, 2, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const size_t in_bytes = (size_t)mcu_shape4_count(in, 2) * sizeof(int16_t);
    const size_t out_bytes = (size_t)mcu_shape4_count(out, 2) * sizeof(int16_t);
    const int32_t cin = in->c, cout = out->c;
    const int32_t filter = p->kernel_h * p->kernel_w * cin; /* one output channel's weights */
    const int pointwise = p->kernel_h == 1 && p->kernel_w == 1;
    /* A larger window is gathered into one column first (the packed rows run over the whole window; a word
     * aligned column takes the assembly loop). */
    const int32_t col_bytes = pointwise ? 0 : filter * (int32_t)sizeof(int16_t);
    int16_t *col = NULL;
    if (!pointwise) {
        MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && ctx->size >= col_bytes && ((uintptr_t)ctx->buf & 1u) == 0,
                    MCU_ERR_INVALID_ARG);
        col = (int16_t *)ctx->buf;
        MCU_REQUIRE(!mcu_overlaps(col, (size_t)col_bytes, output, out_bytes) &&
                        !mcu_overlaps(col, (size_t)col_bytes, input, in_bytes),
                    MCU_ERR_INVALID_ARG);
    }
    const size_t image = (size_t)in->h * (size_t)in->w * (size_t)cin;
    /* A chunk of channels' requantization constants at a time, over every output pixel (a window is
     * gathered again per chunk: far fewer instructions than its products); a chunk with biases or shifts past
     * mcu_s16_small_layer's takes the 64-bit rows. */
    const int32_t whole = cout & ~3;
    const int clamp = mcu_s16p_clamp_kind(p->act_min, p->act_max);
    mcu_s16p_rq t[MCU_S16P_CHUNK / 4];
    for (int32_t o0 = 0; o0 < cout; o0 += MCU_S16P_CHUNK) {
        const int32_t count = whole - o0 < MCU_S16P_CHUNK ? whole - o0 : MCU_S16P_CHUNK;
        const int last = o0 + MCU_S16P_CHUNK >= cout; /* the channels after the last whole block go with it */
        const int fast = count > 0 && mcu_s16p_rq_init(t, bias, q, o0, count);
        const int32_t *w = weight + (size_t)o0 * (size_t)filter / 2u;
        const mcu_per_channel_quant qo = {q->multiplier + o0, q->shift + o0};
        int16_t *y = output + o0;
        for (int32_t n = 0; n < out->n; ++n) {
            for (int32_t oy = 0; oy < out->h; ++oy) {
                for (int32_t ox = 0; ox < out->w; ++ox, y += cout) {
                    const int16_t *x = mcu_conv_s16_vector(p, input + (size_t)n * image, oy * p->stride_h - p->pad_top,
                                                           ox * p->stride_w - p->pad_left, col);
                    if (fast) {
                        mcu_s16p_chunk(x, w, filter, t, count, clamp, p->act_min, p->act_max, y);
                    } else if (count > 0) {
                        mcu_s16p_rows(x, w, filter, count, bias != NULL ? bias + o0 : NULL, &qo, p->act_min,
                                      p->act_max, y);
                    }
                    if (last && whole < cout) {
                        mcu_s16p_rest_rows(x, weight, filter, whole, cout, bias, q, p->act_min, p->act_max, y - o0);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
