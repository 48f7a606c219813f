/* Reduction of the middle axis of an [outer, reduce, inner] view: sum, mean, max or min (the dims a
 * model reduces are made adjacent by the compiler). Sums accumulate in index order. */
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_reduce_f32(const mcu_reduce_f32_params *p, const float *input, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->outer > 0 && p->reduce > 0 && p->inner > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE((int64_t)p->outer * p->reduce * p->inner <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    MCU_REQUIRE(p->op >= 0 && p->op < (int32_t)MCU_REDUCE_COUNT, MCU_ERR_INVALID_ARG);
    const size_t in_bytes = (size_t)p->outer * (size_t)p->reduce * (size_t)p->inner * sizeof(float);
    MCU_REQUIRE(!mcu_overlaps(input, in_bytes, output, (size_t)p->outer * (size_t)p->inner * sizeof(float)),
                MCU_ERR_INVALID_ARG);
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t i = 0; i < p->inner; ++i) {
            const float *x = input + ((size_t)o * (size_t)p->reduce) * (size_t)p->inner + (size_t)i;
            float acc = x[0];
            for (int32_t r = 1; r < p->reduce; ++r) {
                const float v = x[(size_t)r * (size_t)p->inner];
                switch ((mcu_reduce_op)p->op) {
                case MCU_REDUCE_SUM:
                case MCU_REDUCE_MEAN: acc += v; break;
                case MCU_REDUCE_MAX: acc = (v > acc || v != v) ? v : acc; break;
                case MCU_REDUCE_MIN: acc = (v < acc || v != v) ? v : acc; break;
                case MCU_REDUCE_COUNT: break;
                }
            }
            if (p->op == (int32_t)MCU_REDUCE_MEAN) {
                acc /= (float)p->reduce;
            }
            output[(size_t)o * (size_t)p->inner + (size_t)i] = acc;
        }
    }
    return MCU_OK;
}
