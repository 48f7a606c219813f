#include <float.h>
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"

/* clamp(round_half_even(v) + zero_point, -32768, 32767) without libm, as mcu_quantize_f32_s8 does it:
 * beyond +-98304 every zero-point saturates, and inside that range truncation plus the exact fractional
 * part decides the rounding. NaN maps to the zero-point. */
static inline int16_t mcu_quantize_one_s16(float v, int32_t zero_point)
{
    if (v != v) {
        return (int16_t)zero_point;
    }
    if (v > 98304.0f) {
        return INT16_MAX;
    }
    if (v < -98304.0f) {
        return INT16_MIN;
    }
    int32_t t = (int32_t)v;          /* toward zero, exact */
    const float frac = v - (float)t; /* exact: |v| < 2^23 */
    if (frac > 0.5f || (frac == 0.5f && (t & 1) != 0)) {
        ++t;
    } else if (frac < -0.5f || (frac == -0.5f && (t & 1) != 0)) {
        --t;
    }
    t += zero_point;
    return (int16_t)(t < INT16_MIN ? INT16_MIN : t > INT16_MAX ? INT16_MAX : t);
}

mcu_status mcu_quantize_f32_s16(int32_t size, float inv_scale, int32_t zero_point, const float *input,
                                int16_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(inv_scale > 0.0f && inv_scale <= FLT_MAX && zero_point >= INT16_MIN && zero_point <= INT16_MAX,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    /* Output element i (bytes 2i, 2i+1) lies in input element i / 2, read by then, so the output may start
     * at the input; no other overlap. */
    MCU_REQUIRE((const void *)input == (const void *)output ||
                    !mcu_overlaps(input, (size_t)size * sizeof(float), output, (size_t)size * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        /* float32 product, as torch's input * (1.0 / scale). */
        const float v = input[i] * inv_scale;
        output[i] = mcu_quantize_one_s16(v, zero_point);
    }
    return MCU_OK;
}
