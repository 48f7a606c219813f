#include <stddef.h>
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check_s16.h"
#include "../common/dot_s16.h"
#include "../common/requant_s16.h"

/* The taps [*lo, *hi) of a window starting at `start` that fall inside [0, size). */
static void mcu_s16_taps(int32_t start, int32_t kernel, int32_t dilation, int32_t size, int32_t *lo, int32_t *hi)
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

int32_t mcu_conv2d_s16_get_buffer_size(const mcu_conv2d_s16_params *p)
{
    /* A window's values as one int16 column (a kernel larger than 1x1); without it the kernel sums each
     * kernel row's in-bounds run where it lies. */
    if (p == NULL || (p->kernel_h == 1 && p->kernel_w == 1)) {
        return 0;
    }
    const int32_t dims[3] = {p->kernel_h, p->kernel_w, p->input.c};
    const int32_t count = mcu_checked_count(dims, 3, 2);
    return count > 0 ? count * (int32_t)sizeof(int16_t) : 0;
}

/* The window at (y0, x0) as one column [kh][kw][cin], zeros where it lies in the padding (zero point 0). */
static void mcu_conv2d_s16_column(const mcu_conv2d_s16_params *p, const int16_t *img, int32_t y0, int32_t x0,
                                  int16_t *col)
{
    const int32_t cin = p->input.c;
    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
        const int32_t iy = y0 + ky * p->dilation_h;
        for (int32_t kx = 0; kx < p->kernel_w; ++kx, col += cin) {
            const int32_t ix = x0 + kx * p->dilation_w;
            if (iy < 0 || iy >= p->input.h || ix < 0 || ix >= p->input.w) {
                memset(col, 0, (size_t)cin * sizeof(int16_t));
            } else {
                memcpy(col, img + ((size_t)iy * (size_t)p->input.w + (size_t)ix) * (size_t)cin,
                       (size_t)cin * sizeof(int16_t));
            }
        }
    }
}

mcu_status mcu_conv2d_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                          const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output)
{
    const mcu_status bad = mcu_conv2d_s16_check(p, q, input, weight, 1, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const size_t in_bytes = (size_t)mcu_shape4_count(in, 2) * sizeof(int16_t);
    const size_t out_bytes = (size_t)mcu_shape4_count(out, 2) * sizeof(int16_t);

    const int32_t cin = in->c, kw = p->kernel_w, dw = p->dilation_w;
    const size_t filter = (size_t)p->kernel_h * (size_t)kw * (size_t)cin; /* one output channel's weights */
    /* With the scratch the buffer size asks for, every window is one column and one run. */
    const int32_t col_bytes = mcu_conv2d_s16_get_buffer_size(p);
    int16_t *col = ctx != NULL && ctx->buf != NULL && col_bytes > 0 && ctx->size >= col_bytes &&
                           ((uintptr_t)ctx->buf & 1u) == 0
                       ? (int16_t *)ctx->buf
                       : NULL;
    MCU_REQUIRE(col == NULL || (!mcu_overlaps(col, (size_t)col_bytes, output, out_bytes) &&
                                !mcu_overlaps(col, (size_t)col_bytes, input, in_bytes)),
                MCU_ERR_INVALID_ARG);
    /* A window of one run of at most MCU_S16_PART values sums in one int32 part with the bias added in int32
     * and the short requantization (the common case). */
    const int small = filter <= MCU_S16_PART && mcu_s16_small_layer(bias, q->shift, out->c);
    int16_t *y = output;
    for (int32_t n = 0; n < out->n; ++n) {
        const int16_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)cin;
        for (int32_t oy = 0; oy < out->h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            int32_t ky0, ky1;
            mcu_s16_taps(y0, p->kernel_h, p->dilation_h, in->h, &ky0, &ky1);
            for (int32_t ox = 0; ox < out->w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                int32_t kx0, kx1;
                mcu_s16_taps(x0, kw, dw, in->w, &kx0, &kx1);
                /* Padding (zero point 0) adds nothing: only the taps inside the input are summed. With dilation 1
                 * a kernel row's taps are one run of (kx1 - kx0) * cin values in the input and the weights. */
                int32_t run = dw == 1 ? (kx1 - kx0) * cin : cin;
                int32_t runs = dw == 1 ? (kx1 > kx0 ? 1 : 0) : kx1 - kx0;
                const int16_t *base = img;
                int32_t row_stride = in->w * cin, first_y = y0, first_x = x0, first_ky = ky0, last_ky = ky1;
                if (col != NULL) { /* one run: the whole column */
                    mcu_conv2d_s16_column(p, img, y0, x0, col);
                    base = col;
                    run = (int32_t)filter;
                    runs = 1;
                    row_stride = 0;
                    first_y = first_x = kx0 = first_ky = 0;
                    last_ky = 1;
                }
                int32_t o = 0;
                if (small && last_ky - first_ky == 1 && runs == 1 && run == (int32_t)filter) {
                    const int16_t *xs = base + (size_t)(first_y + first_ky * p->dilation_h) * (size_t)row_stride +
                                        (size_t)(first_x + kx0 * dw) * (size_t)cin;
                    for (; o + 4 <= out->c; o += 4) {
                        int32_t part[4];
                        mcu_s16_dot4_part(xs, weight + (size_t)o * filter, (int32_t)filter, run, part);
                        for (int32_t j = 0; j < 4; ++j) {
                            const int32_t acc = part[j] + (bias != NULL ? (int32_t)bias[o + j] : 0);
                            y[o + j] = mcu_clamp_to_s16(
                                mcu_requantize_s16_small(acc, q->multiplier[o + j], q->shift[o + j]), p->act_min,
                                p->act_max);
                        }
                    }
                }
                /* Four output channels a step share each activation load, then two, then one. */
                while (o < out->c) {
                    const int32_t k = out->c - o >= 4 ? 4 : (out->c - o >= 2 ? 2 : 1);
                    const int8_t *w = weight + (size_t)o * filter;
                    int64_t acc[4] = {0, 0, 0, 0};
                    for (int32_t j = 0; j < k; ++j) {
                        acc[j] = bias != NULL ? bias[o + j] : 0;
                    }
                    for (int32_t ky = first_ky; ky < last_ky; ++ky) {
                        const int16_t *xr = base + (size_t)(first_y + ky * p->dilation_h) * (size_t)row_stride;
                        const int8_t *wr = w + (size_t)ky * (size_t)kw * (size_t)cin;
                        for (int32_t r = 0; r < runs; ++r) {
                            const int32_t kx = kx0 + r;
                            const int16_t *xs = xr + (size_t)(first_x + kx * dw) * (size_t)cin;
                            const int8_t *ws = wr + (size_t)kx * (size_t)cin;
                            if (k == 4) {
                                mcu_s16_dot4(xs, ws, (int32_t)filter, run, acc);
                            } else if (k == 2) {
                                mcu_s16_dot2(xs, ws, ws + filter, run, &acc[0], &acc[1]);
                            } else {
                                mcu_s16_dot1(xs, ws, run, &acc[0]);
                            }
                        }
                    }
                    for (int32_t j = 0; j < k; ++j, ++o) {
                        y[o] = mcu_clamp_to_s16(
                            mcu_requantize_s16_acc(acc[j], q->multiplier[o], q->shift[o]),
                            p->act_min, p->act_max);
                    }
                }
                y += out->c;
            }
        }
    }
    return MCU_OK;
}
