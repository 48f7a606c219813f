/* Adaptive average pooling to any output size, 16-bit (ours: CMSIS-NN has arm_avgpool_s16 but no adaptive pool;
 * mcu_adaptive_avg_pool_s8's windows on int16 codes): each cell averages rows [floor(i H / oh), ceil((i + 1) H / oh))
 * and the columns alike, the exact sum divided by the window's size with arm_avgpool_s16's rounding (half
 * away from zero), on the input's scale. */
#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s16.h"

#include "adaptive.h"
#include "../common/check.h"

mcu_status mcu_adaptive_avg_pool_s16(const mcu_resample_s8_params *p, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    MCU_CHECK(mcu_adaptive_check(in_dims, p->out_h, p->out_w, input, output, 2));
    /* A window spans fewer than in / out + 2 rows (columns); at most 65,534 int16 values keep its sum and the
     * rounding's half count inside int32 (no 64-bit division on the device). */
    MCU_REQUIRE(mcu_adaptive_window_max(p->in_h, p->in_w, p->out_h, p->out_w) <= MCU_ADAPTIVE_S16_WINDOW_MAX,
                MCU_ERR_SHAPE);
    const int32_t c = p->inner;
    const int32_t row = p->in_w * c;
    int16_t *out = output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const int16_t *plane = input + (size_t)o * (size_t)p->in_h * (size_t)row;
        for (int32_t y = 0; y < p->out_h; ++y) {
            const int32_t y0 = mcu_adaptive_start(y, p->in_h, p->out_h);
            const int32_t y1 = mcu_adaptive_end(y, p->in_h, p->out_h);
            for (int32_t x = 0; x < p->out_w; ++x) {
                const int32_t x0 = mcu_adaptive_start(x, p->in_w, p->out_w);
                const int32_t x1 = mcu_adaptive_end(x, p->in_w, p->out_w);
                const int32_t count = (y1 - y0) * (x1 - x0);
                for (int32_t k = 0; k < c; ++k) {
                    int32_t sum = 0;
                    for (int32_t iy = y0; iy < y1; ++iy) {
                        const int16_t *r = plane + (size_t)iy * (size_t)row + (size_t)k;
                        for (int32_t ix = x0; ix < x1; ++ix) {
                            sum += r[(size_t)ix * (size_t)c];
                        }
                    }
                    sum = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    *out++ = (int16_t)sum; /* (an average of int16 values is one) */
                }
            }
        }
    }
    return MCU_OK;
}
