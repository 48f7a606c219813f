/* Reading 4-bit weights packed two a byte (element 2i in the low nibble of byte i, 2i + 1 in the high
 * one) and their dot products with int8 activations. Internal: static inline only.
 *
 * A nibble is sign-extended as (v ^ 8) - 8, which needs no shift of a negative value. Sums are taken
 * modulo 2^32 (as uint32_t), as the int8 kernels and the reference accumulate. */
#ifndef MCU_KERNELS_INTERNAL_S4_H
#define MCU_KERNELS_INTERNAL_S4_H

#include <stddef.h>
#include <stdint.h>

static inline int32_t mcu_s4_low(uint32_t byte)
{
    return (int32_t)((byte & 0x0Fu) ^ 0x08u) - 8;
}

static inline int32_t mcu_s4_high(uint32_t byte)
{
    return (int32_t)(((byte >> 4) & 0x0Fu) ^ 0x08u) - 8;
}

/* Element k of a packed array. */
static inline int32_t mcu_s4_at(const int8_t *packed, int32_t k)
{
    const uint32_t byte = (uint8_t)packed[k >> 1];
    return (k & 1) ? mcu_s4_high(byte) : mcu_s4_low(byte);
}

/* The bytes that hold `count` packed elements. */
static inline size_t mcu_s4_bytes(int32_t count)
{
    return ((size_t)count + 1u) / 2u;
}

/* sum over i < n of (x[i] + offset) * w[k + i], w packed, added to acc modulo 2^32. */
static inline uint32_t mcu_s4_dot(uint32_t acc, const int8_t *x, int32_t offset, const int8_t *packed, int32_t k,
                                  int32_t n)
{
    const uint8_t *w = (const uint8_t *)packed + (k >> 1);
    int32_t i = 0;
    if ((k & 1) && n > 0) {
        acc += (uint32_t)((x[0] + offset) * mcu_s4_high(*w++));
        i = 1;
    }
    for (; i + 1 < n; i += 2) {
        const uint32_t byte = *w++;
        acc += (uint32_t)((x[i] + offset) * mcu_s4_low(byte) + (x[i + 1] + offset) * mcu_s4_high(byte));
    }
    if (i < n) {
        acc += (uint32_t)((x[i] + offset) * mcu_s4_low(*w));
    }
    return acc;
}

#endif /* MCU_KERNELS_INTERNAL_S4_H */
