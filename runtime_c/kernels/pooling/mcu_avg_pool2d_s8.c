#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/mve_s8.h"
#include "pool_s8.h"
#include "../common/window.h"

mcu_status mcu_avg_pool2d_s8(const mcu_pool2d_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_CHECK(mcu_pool2d_check_s8(p, input, output));
    /* The int32 sum of up to kernel_h * kernel_w values of magnitude <= 128. */
    MCU_REQUIRE((int64_t)p->kernel_h * p->kernel_w <= ((int64_t)1 << 24), MCU_ERR_UNSUPPORTED);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
#if MCU_S8_MVE
    /* Window sums of four channels per step in 32-bit lanes (VLDRB.S32 + VADD per tap), then the
     * same rounded division per channel as below (MVE has no vector division). Pixels in memory
     * order, each written after its window is read (the window contract). */
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        int8_t *y = output + n * out.h * out.w * out.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, 1, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow, y += out.c) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, 1, in.w, &kw_lo, &kw_hi);
                const int32_t count = (kh_hi - kh_lo) * (kw_hi - kw_lo);
                for (int32_t c = 0; c < in.c; c += 4) {
                    const mve_pred16_t pr = vctp32q((uint32_t)(in.c - c));
                    int32x4_t s = vdupq_n_s32(0);
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                        const int8_t *x_row = x_n + (ih0 + kh) * in.w * in.c + c;
                        for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                            s = vaddq_s32(s, vldrbq_z_s32(x_row + (iw0 + kw) * in.c, pr));
                        }
                    }
                    _Alignas(16) int32_t sums[4];
                    vstrwq_s32(sums, s);
                    const int32_t lanes = in.c - c < 4 ? in.c - c : 4;
                    for (int32_t k = 0; k < lanes; ++k) {
                        const int32_t sum = sums[k];
                        const int32_t q = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                        y[c + k] = (int8_t)mcu_clamp_s32(q, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
#endif
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, 1, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, 1, in.w, &kw_lo, &kw_hi);
                /* Padding is excluded from the count (never 0: checked). */
                const int32_t count = (kh_hi - kh_lo) * (kw_hi - kw_lo);
                int8_t *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t c = 0; c < in.c; ++c) {
                    int32_t sum = 0;
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                        const int8_t *x_row = x_n + (ih0 + kh) * in.w * in.c + c;
                        for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                            sum += x_row[(iw0 + kw) * in.c];
                        }
                    }
                    /* CMSIS-NN rounding: half away from zero. */
                    sum = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    y[c] = (int8_t)mcu_clamp_s32(sum, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
