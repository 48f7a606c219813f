/* Look-up-table (palettized) weights: each output channel's weights are indices into that channel's
 * table of 2^bits int8 values. Storage, as the compiler writes it (mcu/layouts.py, pack_palette):
 * - indices: one row per output channel, its weights in the int8 kernel's order for that channel,
 *   each index `bits` wide, little-endian bit order (index i of a row takes bits [i * bits, (i + 1) *
 *   bits) of the row, bit k being bit k % 8 of byte k / 8), every row padded to a whole byte;
 * - tables: 2^bits int8 entries per output channel, channel after channel.
 * Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_LUT_H
#define MCU_KERNELS_INTERNAL_LUT_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"

static inline int mcu_lut_bits_valid(int32_t bits)
{
    return bits >= 2 && bits <= 4;
}

/* Bytes of one channel's row of `count` indices (count > 0, bits valid: no overflow below 2^29). */
static inline int32_t mcu_lut_row_bytes(int32_t count, int32_t bits)
{
    return (int32_t)(((int64_t)count * bits + 7) / 8);
}

/* Decodes a row of `count` indices into out[0], out[step], ..., reading only the row's bytes. */
static inline void mcu_lut_decode(const uint8_t *row, const int8_t *table, int32_t bits, int32_t count,
                                  int8_t *out, int32_t step)
{
    const uint32_t mask = (1u << bits) - 1u;
    uint32_t acc = 0;
    int32_t have = 0;
    for (int32_t i = 0; i < count; ++i) {
        if (have < bits) {
            acc |= (uint32_t)*row++ << have;
            have += 8;
        }
        *out = table[acc & mask];
        out += step;
        acc >>= bits;
        have -= bits;
    }
}

#endif /* MCU_KERNELS_INTERNAL_LUT_H */
