#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s16.h"

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

/* Ours (CMSIS-NN has no resize): mcu_resize_bilinear_s8's tables and rounding on int16 codes. The four weights
 * sum to 2^20, so the weighted sum of int16 codes needs 36 bits: it is kept in int64. */
mcu_status mcu_resize_bilinear_s16(const mcu_resample_s8_params *p, const int32_t *index, const int16_t *input,
                                   int16_t *output)
{
    MCU_REQUIRE(p != NULL && index != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    const int32_t out_dims[4] = {p->outer, p->out_h, p->out_w, p->inner};
    const int32_t in_count = mcu_checked_count(in_dims, 4, 2);
    const int32_t out_count = mcu_checked_count(out_dims, 4, 2);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, (size_t)out_count * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    const int32_t *ys = index;
    const int32_t *xs = index + 3 * p->out_h;
    MCU_REQUIRE(check_axis(ys, p->out_h, p->in_h) && check_axis(xs, p->out_w, p->in_w), MCU_ERR_INVALID_ARG);
    const int32_t c = p->inner;
    const int32_t row = p->in_w * c;
    int16_t *out = output;
    for (int32_t o = 0; o < p->outer; ++o) {
        const int16_t *plane = input + (size_t)o * (size_t)p->in_h * (size_t)row;
        for (int32_t y = 0; y < p->out_h; ++y) {
            const int16_t *r0 = plane + ys[3 * y] * row;
            const int16_t *r1 = plane + ys[3 * y + 1] * row;
            const int32_t fy = ys[3 * y + 2];
            for (int32_t x = 0; x < p->out_w; ++x) {
                const int32_t x0 = xs[3 * x] * c;
                const int32_t x1 = xs[3 * x + 1] * c;
                const int32_t fx = xs[3 * x + 2];
                const int64_t w00 = (int64_t)(ONE - fy) * (ONE - fx);
                const int64_t w01 = (int64_t)(ONE - fy) * fx;
                const int64_t w10 = (int64_t)fy * (ONE - fx);
                const int64_t w11 = (int64_t)fy * fx;
                for (int32_t k = 0; k < c; ++k) {
                    const int64_t acc = r0[x0 + k] * w00 + r0[x1 + k] * w01 + r1[x0 + k] * w10 + r1[x1 + k] * w11;
                    /* half away from zero, as the int8 kernel; a weighted mean of int16 codes stays in int16 */
                    const int64_t half = (int64_t)1 << 19;
                    const int64_t q = acc >= 0 ? (acc + half) / ((int64_t)1 << 20) : -((-acc + half) / ((int64_t)1 << 20));
                    *out++ = (int16_t)q;
                }
            }
        }
    }
    return MCU_OK;
}
