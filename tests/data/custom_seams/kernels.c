/* Custom kernels for tests/seams/test_seams_custom.py: each is a ReLU (fp32) or a copy (int8) with one
 * deliberate bug, selected at compile time by SEAM_BUG, so the host check and the firmware's write
 * guards can be shown to name it. SEAM_OVER is how many elements past the output a bug writes. */
#include <stdint.h>

#include "mcu/custom.h"

#ifndef SEAM_OVER
#define SEAM_OVER 1
#endif

mcu_status seam_relu(const mcu_custom_call *call);
mcu_status seam_copy_s8(const mcu_custom_call *call);

mcu_status seam_relu(const mcu_custom_call *call)
{
    const int32_t n = call->params->numel;
    const float *x = (const float *)call->inputs[0];
    float *y = (float *)call->output;
    int32_t end = n;
#if SEAM_BUG == 1 /* writes SEAM_OVER elements past its output */
    end = n + SEAM_OVER;
#endif
    for (int32_t i = 0; i < end; ++i) {
        y[i] = i < n && x[i] > 0.0f ? x[i] : 0.0f;
    }
#if SEAM_BUG == 2 /* writes one element before its output */
    y[-1] = 0.0f;
#elif SEAM_BUG == 3 /* writes into its input */
    ((float *)call->inputs[0])[1] = 0.0f;
#elif SEAM_BUG == 4 /* reads one element past its input */
    volatile float past = x[n];
    (void)past;
#elif SEAM_BUG == 5 /* signed overflow */
    volatile int32_t big = 2147483647 - 2;
    y[0] = y[0] + 0.0f * (float)(big + n);
#elif SEAM_BUG == 6 /* a wild pointer */
    volatile float *volatile nowhere = (float *)(uintptr_t)64u;
    *nowhere = y[0];
#elif SEAM_BUG == 7 /* writes one element past its output, only for an input above 100 */
    for (int32_t i = 0; i < n; ++i) {
        if (x[i] > 100.0f) {
            y[n] = x[i];
        }
    }
#elif SEAM_BUG == 8 /* never returns */
    volatile int spin = 1;
    while (spin) {
    }
#endif
    return MCU_OK;
}

mcu_status seam_copy_s8(const mcu_custom_call *call)
{
    const int32_t n = call->params->numel;
    const int8_t *x = (const int8_t *)call->inputs[0];
    int8_t *y = (int8_t *)call->output;
    int32_t end = n;
#if SEAM_BUG == 1
    end = n + SEAM_OVER;
#endif
    for (int32_t i = 0; i < end; ++i) {
        y[i] = i < n ? x[i] : (int8_t)0x5a;
    }
    return MCU_OK;
}
