#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "pool_s8.h"
#include "../common/rq_s8_dsp.h"
#include "../common/simd_s8.h"
#include "../common/window.h"

/* The windows of a MaxPool1d, which runs as a pool one row high: each output row reads one input row, so
 * the row loops and their clipping go, and a window of two taps (MaxPool1d(2), the usual one) is two loads
 * and one SSUB8/SEL pair per four channels with no tap loop. The clamp is skipped when the activation range
 * is the whole int8 range, where it changes nothing. Pixels are visited in memory order and each output
 * pixel's channels are written after its window is read, as in mcu_max_pool2d_s8 (the window contract). */
mcu_status mcu_max_pool1d_s8(const mcu_pool2d_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_CHECK(mcu_pool2d_check_s8(p, input, output));
    MCU_REQUIRE(p->kernel_h == 1 && p->pad_top == 0, MCU_ERR_UNSUPPORTED);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t c_n = in.c;
    const int full_range = p->act_min == INT8_MIN && p->act_max == INT8_MAX;
#if MCU_S8_DSP
    const uint32_t min4 = mcu_splat4_s8(p->act_min), max4 = mcu_splat4_s8(p->act_max);
#endif
    int8_t *y = output;
    for (int32_t row = 0; row < in.n * out.h; ++row) {
        const int32_t n = row / out.h, oh = row - n * out.h;
        const int8_t *x_row = input + (n * in.h + oh * p->stride_h) * in.w * c_n;
        for (int32_t ow = 0; ow < out.w; ++ow, y += c_n) {
            const int32_t iw0 = ow * p->stride_w - p->pad_left;
            int32_t lo, hi;
            mcu_window_taps(iw0, p->kernel_w, 1, in.w, &lo, &hi);
            const int8_t *x_win = x_row + (iw0 + lo) * c_n;
            const int32_t taps = hi - lo;
            int32_t c = 0;
#if MCU_S8_DSP
            if (taps == 2) {
                for (; c + 4 <= c_n; c += 4) {
                    const uint32_t m = mcu_max4_s8(mcu_load_u32(x_win + c), mcu_load_u32(x_win + c_n + c));
                    mcu_store_u32(y + c, full_range ? m : mcu_clamp4_s8(m, min4, max4));
                }
            } else {
                for (; c + 4 <= c_n; c += 4) {
                    const int8_t *xp = x_win + c;
                    uint32_t m = mcu_load_u32(xp);
                    for (int32_t t = 1; t < taps; ++t) {
                        xp += c_n;
                        m = mcu_max4_s8(m, mcu_load_u32(xp));
                    }
                    mcu_store_u32(y + c, full_range ? m : mcu_clamp4_s8(m, min4, max4));
                }
            }
#endif
            for (; c < c_n; ++c) {
                int32_t m = INT8_MIN;
                for (int32_t t = 0; t < taps; ++t) {
                    const int32_t v = x_win[t * c_n + c];
                    m = v > m ? v : m;
                }
                y[c] = (int8_t)(full_range ? m : mcu_clamp_s32(m, p->act_min, p->act_max));
            }
        }
    }
    return MCU_OK;
}
