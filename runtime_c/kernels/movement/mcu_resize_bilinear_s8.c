#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"

#define ONE 1024 /* weights in units of 1/1024 */

static int check_axis(const int32_t *t, int32_t out, int32_t in)
{
    for (int32_t i = 0; i < out; ++i) {
        const int32_t *e = t + 3 * i;
        if (e[0] < 0 || e[0] >= in || e[1] < 0 || e[1] >= in || e[2] < 0 || e[2] > ONE) {
            return 0;
        }
    }
    return 1;
}

mcu_status mcu_resize_bilinear_s8(const mcu_resample_s8_params *p, const int32_t *index, const int8_t *input,
                                  int8_t *output)
{
    MCU_REQUIRE(p != NULL && index != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    const int32_t out_dims[4] = {p->outer, p->out_h, p->out_w, p->inner};
    const int32_t in_count = mcu_checked_count(in_dims, 4, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 4, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, (size_t)out_count), MCU_ERR_INVALID_ARG);
    const int32_t *ys = index;
    const int32_t *xs = index + 3 * p->out_h;
    MCU_REQUIRE(check_axis(ys, p->out_h, p->in_h) && check_axis(xs, p->out_w, p->in_w), MCU_ERR_INVALID_ARG);
    const int32_t c = p->inner;
    const int32_t row = p->in_w * c;
    int8_t *out = output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const int8_t *plane = input + (size_t)o * (size_t)p->in_h * (size_t)row;
        for (int32_t y = 0; y < p->out_h; ++y) {
            const int8_t *r0 = plane + ys[3 * y] * row;
            const int8_t *r1 = plane + ys[3 * y + 1] * row;
            const int32_t fy = ys[3 * y + 2];
            for (int32_t x = 0; x < p->out_w; ++x) {
                const int32_t x0 = xs[3 * x] * c;
                const int32_t x1 = xs[3 * x + 1] * c;
                const int32_t fx = xs[3 * x + 2];
                /* The four weights sum to 2^20; |acc| <= 128 * 2^20 fits int32. */
                const int32_t w00 = (ONE - fy) * (ONE - fx);
                const int32_t w01 = (ONE - fy) * fx;
                const int32_t w10 = fy * (ONE - fx);
                const int32_t w11 = fy * fx;
                for (int32_t k = 0; k < c; ++k) {
                    const int32_t acc = r0[x0 + k] * w00 + r0[x1 + k] * w01 + r1[x0 + k] * w10 + r1[x1 + k] * w11;
                    /* (acc +- 2^19) / 2^20 truncated, as one arithmetic shift: a negative sum rounds
                     * half away from zero through the -1 (ceil of a quotient is the floor of it plus
                     * the divisor less one). A weighted mean of int8 codes stays inside int8. */
                    *out++ = (int8_t)mcu_asr32(acc + (1 << 19) - (acc < 0), 20);
                }
            }
        }
    }
    return MCU_OK;
}
