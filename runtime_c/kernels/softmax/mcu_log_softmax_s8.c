/* int8 log-softmax along one axis, integer only. Per row: m = max(x); S = sum of
 * exp_table[m - x] (exp(-k s_in) in Q20, computed at compile time); log2(S) in Q16 by the bitwise
 * squaring method (exact for the bits it gives); out = clamp(output_offset + round(((x - m) A -
 * (log2(S) - 20) C) / 2^16)) with A = s_in / s_out and C = ln 2 / s_out in Q16. */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"

/* floor(log2(s)) and 16 fractional bits of log2(s), s >= 1. */
static int64_t log2_q16(uint64_t s)
{
    int32_t msb = 63;
    while (((s >> msb) & 1u) == 0u) {
        --msb;
    }
    uint64_t f = msb >= 30 ? s >> (msb - 30) : s << (30 - msb); /* [2^30, 2^31): 1.30 fixed point */
    int64_t frac = 0;
    for (int32_t i = 0; i < 16; ++i) {
        f = (f * f) >> 30;
        frac <<= 1;
        if (f >= ((uint64_t)1 << 31)) {
            f >>= 1;
            frac |= 1;
        }
    }
    return ((int64_t)msb << 16) + frac;
}

/* round(v / 2^16), halves up (floor of v + 2^15), for either sign. */
static int64_t round_q16(int64_t v)
{
    const int64_t t = v + ((int64_t)1 << 15);
    return t >= 0 ? t / 65536 : -((-t + 65535) / 65536);
}

mcu_status mcu_log_softmax_s8(const mcu_log_softmax_s8_params *p, const int32_t *exp_table, const int8_t *input,
                              int8_t *output)
{
    MCU_REQUIRE(p != NULL && exp_table != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->outer > 0 && p->axis > 0 && p->inner > 0, MCU_ERR_SHAPE);
    const int64_t total = (int64_t)p->outer * p->axis * p->inner;
    MCU_REQUIRE(total <= INT32_MAX, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->input_multiplier >= 0 && p->log_multiplier >= 0 && mcu_output_offset_valid(p->output_offset),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)total;
    /* a row (its own elements, inner apart) is read whole before it is written: exactly in place is fine */
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(!mcu_overlaps(exp_table, 256 * sizeof(int32_t), output, bytes), MCU_ERR_INVALID_ARG);
    for (int32_t i = 0; i < 256; ++i) {
        MCU_REQUIRE(exp_table[i] >= 0, MCU_ERR_INVALID_ARG);
    }
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t in = 0; in < p->inner; ++in) {
            const int8_t *x = input + (size_t)o * p->axis * p->inner + in;
            int8_t *y = output + (size_t)o * p->axis * p->inner + in;
            int32_t m = -128;
            for (int32_t k = 0; k < p->axis; ++k) {
                m = x[k * p->inner] > m ? x[k * p->inner] : m;
            }
            uint64_t s = 0;
            for (int32_t k = 0; k < p->axis; ++k) {
                s += (uint64_t)exp_table[m - x[k * p->inner]];
            }
            /* exp_table[0] is 2^20: s >= 2^20, so the log is not negative */
            const int64_t l = s > 0 ? log2_q16(s) - ((int64_t)20 << 16) : 0;
            const int64_t b = round_q16(l * p->log_multiplier); /* log(sum) / s_out in Q16 */
            for (int32_t k = 0; k < p->axis; ++k) {
                const int64_t v = (int64_t)(x[k * p->inner] - m) * p->input_multiplier - b;
                const int64_t r = p->output_offset + round_q16(v);
                y[k * p->inner] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
            }
        }
    }
    return MCU_OK;
}
