#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_f32.h"

#include "adaptive.h"
#include "../common/check.h"

mcu_status mcu_adaptive_avg_pool_f32(const mcu_resample_f32_params *p, const float *input, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    MCU_CHECK(mcu_adaptive_check(in_dims, p->out_h, p->out_w, input, output, 4));
    const int32_t c = p->inner;
    const int32_t row = p->in_w * c;
    float *out = output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const float *plane = input + (size_t)o * (size_t)p->in_h * (size_t)row;
        for (int32_t y = 0; y < p->out_h; ++y) {
            const int32_t y0 = mcu_adaptive_start(y, p->in_h, p->out_h);
            const int32_t y1 = mcu_adaptive_end(y, p->in_h, p->out_h);
            for (int32_t x = 0; x < p->out_w; ++x) {
                const int32_t x0 = mcu_adaptive_start(x, p->in_w, p->out_w);
                const int32_t x1 = mcu_adaptive_end(x, p->in_w, p->out_w);
                const float count = (float)((y1 - y0) * (x1 - x0));
                for (int32_t k = 0; k < c; ++k) {
                    float sum = 0.0f;
                    for (int32_t iy = y0; iy < y1; ++iy) {
                        const float *r = plane + iy * row + k;
                        for (int32_t ix = x0; ix < x1; ++ix) {
                            sum += r[ix * c];
                        }
                    }
                    *out++ = sum / count;
                }
            }
        }
    }
    return MCU_OK;
}
