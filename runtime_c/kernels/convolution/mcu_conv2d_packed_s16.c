#include <stddef.h>
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check_s16.h"
#include "../common/dot_packed_s16.h"
#include "../common/requant_s16.h"

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
    const int32_t cin = in->c;
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
    const int small = filter <= MCU_S16_PART && mcu_s16_small_layer(bias, q->shift, out->c);
    int16_t *y = output;
    for (int32_t n = 0; n < out->n; ++n) {
        const int16_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)cin;
        for (int32_t oy = 0; oy < out->h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (int32_t ox = 0; ox < out->w; ++ox, y += out->c) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int16_t *x = NULL;
                if (pointwise) { /* the pixel, or none in the padding (zero point 0: its products add nothing) */
                    if (y0 >= 0 && y0 < in->h && x0 >= 0 && x0 < in->w) {
                        x = img + ((size_t)y0 * (size_t)in->w + (size_t)x0) * (size_t)cin;
                    }
                } else {
                    int16_t *c = col;
                    for (int32_t ky = 0; ky < p->kernel_h; ++ky) {
                        const int32_t iy = y0 + ky * p->dilation_h;
                        for (int32_t kx = 0; kx < p->kernel_w; ++kx, c += cin) {
                            const int32_t ix = x0 + kx * p->dilation_w;
                            if (iy < 0 || iy >= in->h || ix < 0 || ix >= in->w) {
                                memset(c, 0, (size_t)cin * sizeof(int16_t));
                            } else {
                                memcpy(c, img + ((size_t)iy * (size_t)in->w + (size_t)ix) * (size_t)cin,
                                       (size_t)cin * sizeof(int16_t));
                            }
                        }
                    }
                    x = col;
                }
                mcu_s16p_rows(x, weight, filter, out->c, bias, q, small, p->act_min, p->act_max, y);
            }
        }
    }
    return MCU_OK;
}
