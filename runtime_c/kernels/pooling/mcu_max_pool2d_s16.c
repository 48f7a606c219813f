#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "pool_s16.h"

/* CMSIS-NN's arm_max_pool_s16: the largest of a window's taps inside the input, then the clamp. */
mcu_status mcu_max_pool2d_s16(const mcu_pool2d_s16_params *p, const int16_t *input, int16_t *output)
{
    MCU_CHECK(mcu_pool2d_s16_check(p, input, output));
    const mcu_shape4 *in = &p->input, *out = &p->output;
    const int32_t c = in->c;
    int16_t *y = output;
    for (int32_t n = 0; n < out->n; ++n) {
        const int16_t *img = input + (size_t)n * (size_t)in->h * (size_t)in->w * (size_t)c;
        for (int32_t oy = 0; oy < out->h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t ky0 = y0 < 0 ? -y0 : 0, ky1 = y0 + p->kernel_h > in->h ? in->h - y0 : p->kernel_h;
            for (int32_t ox = 0; ox < out->w; ++ox, y += c) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t kx0 = x0 < 0 ? -x0 : 0, kx1 = x0 + p->kernel_w > in->w ? in->w - x0 : p->kernel_w;
                for (int32_t ch = 0; ch < c; ++ch) {
                    int32_t m = INT16_MIN;
                    for (int32_t ky = ky0; ky < ky1; ++ky) {
                        /* (from the first tap inside the input: x0 itself may lie in the padding) */
                        const int16_t *row = img + ((size_t)(y0 + ky) * (size_t)in->w + (size_t)(x0 + kx0)) * (size_t)c;
                        for (int32_t kx = kx0; kx < kx1; ++kx) {
                            const int32_t v = row[(size_t)(kx - kx0) * (size_t)c + (size_t)ch];
                            m = v > m ? v : m;
                        }
                    }
                    y[ch] = mcu_clamp_to_s16(m, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
