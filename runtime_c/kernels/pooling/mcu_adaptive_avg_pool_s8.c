#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"

#include "adaptive.h"
#include "../common/check.h"

mcu_status mcu_adaptive_avg_pool_s8(const mcu_resample_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    MCU_CHECK(mcu_adaptive_check(in_dims, p->out_h, p->out_w, input, output, 1));
    /* The int32 sum of a window of at most in_h * in_w values of magnitude <= 128. */
    MCU_REQUIRE((int64_t)p->in_h * p->in_w <= INT32_MAX / 128, MCU_ERR_SHAPE);
    const int32_t c = p->inner;
    const int32_t row = p->in_w * c;
    int8_t *out = output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const int8_t *plane = input + (size_t)o * (size_t)p->in_h * (size_t)row;
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
                        const int8_t *r = plane + iy * row + k;
                        for (int32_t ix = x0; ix < x1; ++ix) {
                            sum += r[ix * c];
                        }
                    }
                    /* CMSIS-NN rounding: half away from zero. */
                    sum = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    *out++ = (int8_t)mcu_clamp_s32(sum, -128, 127);
                }
            }
        }
    }
    return MCU_OK;
}
