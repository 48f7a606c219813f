#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/mve_s8.h"
#include "pool_s8.h"
#include "../common/rq_s8_dsp.h"
#include "../common/window.h"

mcu_status mcu_max_pool2d_s8(const mcu_pool2d_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_CHECK(mcu_pool2d_check_s8(p, input, output));
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
#if MCU_S8_MVE
    /* 16 channels per VMAX (the last step predicated), pixels in memory order as below: each output
     * pixel's channels are written after their window is read (the window contract). */
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
                for (int32_t c = 0; c < in.c; c += 16) {
                    const mve_pred16_t pr = vctp8q((uint32_t)(in.c - c));
                    int8x16_t m = vdupq_n_s8(INT8_MIN);
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                        const int8_t *x_row = x_n + (ih0 + kh) * in.w * in.c + c;
                        for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                            m = vmaxq_s8(m, vldrbq_z_s8(x_row + (iw0 + kw) * in.c, pr));
                        }
                    }
                    m = vminq_s8(vmaxq_s8(m, vdupq_n_s8((int8_t)p->act_min)), vdupq_n_s8((int8_t)p->act_max));
                    vstrbq_p_s8(y + c, m, pr);
                }
            }
        }
    }
    return MCU_OK;
#endif
#if MCU_S8_DSP
    /* Four channels per step: SSUB8/SEL keep the larger byte of each lane (common/rq_s8_dsp.h), and
     * clamp to the activation range the same way. Pixels in memory order as below, each written after
     * its window is read (the window contract). */
    const uint32_t min4 = mcu_splat4_s8(p->act_min), max4 = mcu_splat4_s8(p->act_max);
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
                const int8_t *x_win = x_n + ((ih0 + kh_lo) * in.w + iw0 + kw_lo) * in.c;
                int32_t c = 0;
                for (; c + 4 <= in.c; c += 4) {
                    uint32_t m = 0x80808080u; /* INT8_MIN in every byte */
                    const int8_t *x_row = x_win + c;
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh, x_row += in.w * in.c) {
                        const int8_t *xp = x_row;
                        for (int32_t kw = kw_lo; kw < kw_hi; ++kw, xp += in.c) {
                            m = mcu_max4_s8(m, mcu_load_u32(xp));
                        }
                    }
                    mcu_store_u32(y + c, mcu_clamp4_s8(m, min4, max4));
                }
                for (; c < in.c; ++c) {
                    int32_t m = INT8_MIN;
                    const int8_t *x_row = x_win + c;
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh, x_row += in.w * in.c) {
                        for (int32_t kw = 0; kw < kw_hi - kw_lo; ++kw) {
                            const int32_t v = x_row[kw * in.c];
                            m = v > m ? v : m;
                        }
                    }
                    y[c] = (int8_t)mcu_clamp_s32(m, p->act_min, p->act_max);
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
                int8_t *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t c = 0; c < in.c; ++c) {
                    int32_t m = INT8_MIN;
                    for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                        const int8_t *x_row = x_n + (ih0 + kh) * in.w * in.c + c;
                        for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                            const int32_t v = x_row[(iw0 + kw) * in.c];
                            m = v > m ? v : m;
                        }
                    }
                    y[c] = (int8_t)mcu_clamp_s32(m, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
