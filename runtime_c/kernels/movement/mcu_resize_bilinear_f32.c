#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_resize_bilinear_f32(const mcu_resample_f32_params *p, const int32_t *index, const float *lambda,
                                   const float *input, float *output)
{
    MCU_REQUIRE(p != NULL && index != NULL && lambda != NULL && input != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    const int32_t out_dims[4] = {p->outer, p->out_h, p->out_w, p->inner};
    const int32_t in_count = mcu_checked_count(in_dims, 4, 4);
    const int32_t out_count = mcu_checked_count(out_dims, 4, 4);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * 4u, output, (size_t)out_count * 4u), MCU_ERR_INVALID_ARG);
    const int32_t *ys = index;
    const int32_t *xs = index + 2 * p->out_h;
    for (int32_t i = 0; i < 2 * p->out_h; ++i) {
        MCU_REQUIRE(ys[i] >= 0 && ys[i] < p->in_h, MCU_ERR_INVALID_ARG);
    }
    for (int32_t i = 0; i < 2 * p->out_w; ++i) {
        MCU_REQUIRE(xs[i] >= 0 && xs[i] < p->in_w, MCU_ERR_INVALID_ARG);
    }
    const float *ly = lambda;
    const float *lx = lambda + 2 * p->out_h;
    const int32_t c = p->inner;
    const int32_t row = p->in_w * c;
    float *out = output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const float *plane = input + (size_t)o * (size_t)p->in_h * (size_t)row;
        for (int32_t y = 0; y < p->out_h; ++y) {
            const float *r0 = plane + ys[2 * y] * row;
            const float *r1 = plane + ys[2 * y + 1] * row;
            const float h0 = ly[2 * y];
            const float h1 = ly[2 * y + 1];
            for (int32_t x = 0; x < p->out_w; ++x) {
                const int32_t x0 = xs[2 * x] * c;
                const int32_t x1 = xs[2 * x + 1] * c;
                const float w0 = lx[2 * x];
                const float w1 = lx[2 * x + 1];
                for (int32_t k = 0; k < c; ++k) {
                    *out++ = h0 * (w0 * r0[x0 + k] + w1 * r0[x1 + k]) + h1 * (w0 * r1[x0 + k] + w1 * r1[x1 + k]);
                }
            }
        }
    }
    return MCU_OK;
}
