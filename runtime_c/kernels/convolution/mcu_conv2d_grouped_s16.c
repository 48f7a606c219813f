/* Grouped convolution (groups > 1, not depthwise: ResNeXt/RegNet blocks, grouped Conv1d), 16x8. Ours: CMSIS-NN's
 * arm_convolve_s8 takes groups but arm_convolve_s16 does not, and TFLite's 16x8 CONV_2D runs a group as its
 * filter's input depth over the input's channels the same way. Each output channel sums the taps of its group's
 * input channels exactly in 64 bits (int32 parts of at most MCU_S16_PART products, common/dot_s16.h) plus its
 * int64 bias, then arm_convolve_s16's requantization: the arithmetic of mcu_conv2d_s16 group by group. Four output
 * channels of a group share each tap's activation loads, then two, then one. */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/check_s16.h"
#include "../common/window.h"
#include "grouped_s16.h"

int32_t mcu_conv2d_grouped_s16_get_buffer_size(const mcu_conv2d_grouped_s16_params *p)
{
    (void)p;
    return 0;
}

mcu_status mcu_conv2d_grouped_s16(const mcu_context *ctx, const mcu_conv2d_grouped_s16_params *p,
                                  const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                  const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch */
    const mcu_status bad = mcu_conv2d_grouped_s16_check(p, q, input, weight, bias, output);
    if (bad != MCU_OK) {
        return bad;
    }
    const mcu_conv2d_s16_params *c = &p->conv;
    const mcu_shape4 in = c->input, out = c->output;
    const int32_t icg = in.c / p->groups, ocg = out.c / p->groups;
    const int32_t filter = c->kernel_h * c->kernel_w * icg; /* one output channel's weights */
    int16_t *y = output;
    for (int32_t n = 0; n < out.n; ++n) {
        const int16_t *img = input + (size_t)n * (size_t)in.h * (size_t)in.w * (size_t)in.c;
        for (int32_t oy = 0; oy < out.h; ++oy) {
            const int32_t y0 = oy * c->stride_h - c->pad_top;
            int32_t ky0, ky1;
            mcu_window_taps(y0, c->kernel_h, c->dilation_h, in.h, &ky0, &ky1);
            for (int32_t ox = 0; ox < out.w; ++ox, y += out.c) {
                const int32_t x0 = ox * c->stride_w - c->pad_left;
                int32_t kx0, kx1;
                mcu_window_taps(x0, c->kernel_w, c->dilation_w, in.w, &kx0, &kx1);
                for (int32_t o = 0; o < out.c;) {
                    int64_t acc[4];
                    const int32_t k = mcu_grouped_s16_block(o, ocg, bias, acc);
                    const int16_t *x_g = img + (size_t)(o / ocg) * (size_t)icg;
                    const int8_t *w = weight + (size_t)o * (size_t)filter;
                    for (int32_t ky = ky0; ky < ky1; ++ky) {
                        const int16_t *xr = x_g + (size_t)(y0 + ky * c->dilation_h) * (size_t)in.w * (size_t)in.c;
                        for (int32_t kx = kx0; kx < kx1; ++kx) {
                            const int16_t *xs = xr + (size_t)(x0 + kx * c->dilation_w) * (size_t)in.c;
                            mcu_grouped_s16_tap(xs, w + (size_t)(ky * c->kernel_w + kx) * (size_t)icg, filter, icg, k,
                                                acc);
                        }
                    }
                    mcu_grouped_s16_store(acc, o, k, q, c->act_min, c->act_max, y);
                    o += k;
                }
            }
        }
    }
    return MCU_OK;
}
