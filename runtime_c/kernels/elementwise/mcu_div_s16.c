#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"

/* |a| 2^bits / |b| (n <= 2^15, 1 <= d <= 2^15) rounded half up, saturated at INT32_MAX: long division in steps
 * of at most 16 bits, each remainder below d, so every step stays in 32 bits (kernels link no 64-bit division
 * helper). Once the quotient cannot take k more bits it is past INT32_MAX, and the bits still to come only
 * raise it. */
static uint32_t mcu_div_s16_quotient(uint32_t n, uint32_t d, int32_t bits)
{
    uint32_t q = n / d, r = n % d;
    while (bits > 0) {
        const int32_t k = bits > 16 ? 16 : bits;
        if (q > ((uint32_t)INT32_MAX >> k)) {
            return (uint32_t)INT32_MAX;
        }
        const uint32_t wide = r << k;
        q = (q << k) + wide / d;
        r = wide % d;
        bits -= k;
    }
    return 2u * r >= d && q < (uint32_t)INT32_MAX ? q + 1u : q;
}

/* Ours (CMSIS-NN and TFLite have no 16x8 division), mcu_div_s8's form on int16 codes: the quotient in frac_bits
 * fractional bits, then mcu_mul_s16's int32 requantization (kernels_s16.h states the arithmetic).
 * mcu/reference/s16_act.py computes the same. */
mcu_status mcu_div_s16(const mcu_div_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->size >= 0 && p->size <= INT32_MAX / 2, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->frac_bits >= 0 && p->frac_bits <= MCU_DIV_S16_MAX_BITS &&
                    mcu_quant_valid(p->out_multiplier, p->out_shift) && mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)p->size * sizeof(int16_t);
    /* Element i is read before it is written: an operand may be the output, exactly; no other overlap. */
    MCU_REQUIRE(((const void *)a == (const void *)output || !mcu_overlaps(a, bytes, output, bytes)) &&
                    ((const void *)b == (const void *)output || !mcu_overlaps(b, bytes, output, bytes)),
                MCU_ERR_INVALID_ARG);
    const int16_t zero = mcu_clamp_to_s16(0, p->act_min, p->act_max);
    for (int32_t i = 0; i < p->size; ++i) {
        const int32_t num = a[i], den = b[i];
        if (den == 0) {
            output[i] = num > 0 ? (int16_t)p->act_max : (num < 0 ? (int16_t)p->act_min : zero);
            continue;
        }
        const uint32_t mag = mcu_div_s16_quotient((uint32_t)(num < 0 ? -num : num), (uint32_t)(den < 0 ? -den : den),
                                                  p->frac_bits);
        const int32_t quotient = (num < 0) != (den < 0) ? -(int32_t)mag : (int32_t)mag;
        output[i] = mcu_clamp_to_s16(mcu_requantize(quotient, p->out_multiplier, p->out_shift), p->act_min,
                                     p->act_max);
    }
    return MCU_OK;
}
