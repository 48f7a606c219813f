#include <float.h>
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"

/* clamp(round_half_even(v) + zero_point, -128, 127) without libm: beyond
 * +-384 every zero-point saturates, and inside that range truncation plus the
 * exact fractional part decides the rounding. NaN maps to the zero-point. */
static inline int8_t mcu_quantize_one(float v, int32_t zero_point)
{
    if (v != v) {
        return (int8_t)zero_point;
    }
    if (v > 384.0f) {
        return INT8_MAX;
    }
    if (v < -384.0f) {
        return INT8_MIN;
    }
    int32_t t = (int32_t)v;          /* toward zero, exact */
    const float frac = v - (float)t; /* exact: |v| < 2^23 */
    if (frac > 0.5f || (frac == 0.5f && (t & 1) != 0)) {
        ++t;
    } else if (frac < -0.5f || (frac == -0.5f && (t & 1) != 0)) {
        --t;
    }
    t += zero_point;
    return (int8_t)(t < INT8_MIN ? INT8_MIN : t > INT8_MAX ? INT8_MAX : t);
}

mcu_status mcu_quantize_f32_s8(int32_t size, float inv_scale, int32_t zero_point, const float *input,
                               int8_t *output)
{
    MCU_REQUIRE(input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(inv_scale > 0.0f && inv_scale <= FLT_MAX && zero_point >= INT8_MIN && zero_point <= INT8_MAX,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(size >= 0 && size <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    /* Output byte i belongs to input element i / 4, which has been read by
     * then, so the output may start at the input; no other overlap. */
    MCU_REQUIRE((const void *)input == (const void *)output ||
                    !mcu_overlaps(input, (size_t)size * sizeof(float), output, (size_t)size),
                MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < size; ++i) {
        /* float32 product, as torch's input * (1.0 / scale). */
        const float v = input[i] * inv_scale;
        output[i] = mcu_quantize_one(v, zero_point);
    }
    return MCU_OK;
}
