/* Look-up-table (palettized) weights: each output channel's weights are indices into that channel's
 * table of 2^bits int8 values. Storage, as the compiler writes it (mcu/layouts.py, pack_palette):
 * - indices: one row per output channel, its weights in the int8 kernel's order for that channel,
 *   each index `bits` wide, little-endian bit order (index i of a row takes bits [i * bits, (i + 1) *
 *   bits) of the row, bit k being bit k % 8 of byte k / 8), every row padded to a whole byte;
 * - tables: 2^bits int8 entries per output channel, channel after channel; or, with MCU_LUT_SHARED in the
 *   palette word, one table of 2^bits entries that every channel reads.
 * The kernels take a palette word: the index width (2-4), plus MCU_LUT_SHARED for the shared table (one
 * word, so the int8 kernels' signatures and program rows serve both forms).
 * Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_LUT_H
#define MCU_KERNELS_INTERNAL_LUT_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "check.h"
#include "simd_s8.h"

static inline int mcu_lut_bits_valid(int32_t word)
{
    const int32_t bits = word & ~MCU_LUT_SHARED;
    return bits >= 2 && bits <= 4;
}

/* The index width of a valid palette word. */
static inline int32_t mcu_lut_width(int32_t word)
{
    return word & ~MCU_LUT_SHARED;
}

/* Bytes of the tables of `channels` channels (channels <= INT32_MAX / 16). */
static inline size_t mcu_lut_table_bytes(int32_t word, int32_t channels)
{
    return (word & MCU_LUT_SHARED ? (size_t)1 : (size_t)channels) << mcu_lut_width(word);
}

/* Channel c's table. */
static inline const int8_t *mcu_lut_table_of(const int8_t *tables, int32_t word, int32_t c)
{
    return word & MCU_LUT_SHARED ? tables : tables + ((size_t)c << mcu_lut_width(word));
}

/* Bytes of one channel's row of `count` indices (count > 0, bits valid: no overflow below 2^29). */
static inline int32_t mcu_lut_row_bytes(int32_t count, int32_t bits)
{
    return (int32_t)(((int64_t)count * bits + 7) / 8);
}

/* Decodes a row of `count` indices into out[0], out[step], ..., reading only the row's bytes: whole bytes
 * (4 and 2 bits: two and four indices a byte) or whole 3-byte groups (3 bits: eight indices) at a time,
 * then the rest index by index. */
static inline void mcu_lut_decode(const uint8_t *row, const int8_t *table, int32_t bits, int32_t count,
                                  int8_t *out, int32_t step)
{
    int32_t i = 0;
    if (bits == 4) {
        for (; i + 2 <= count; i += 2) {
            const uint32_t b = *row++;
            out[0] = table[b & 15u];
            out[step] = table[b >> 4];
            out += 2 * step;
        }
    } else if (bits == 2) {
        for (; i + 4 <= count; i += 4) {
            const uint32_t b = *row++;
            out[0] = table[b & 3u];
            out[step] = table[(b >> 2) & 3u];
            out[2 * step] = table[(b >> 4) & 3u];
            out[3 * step] = table[b >> 6];
            out += 4 * step;
        }
    } else {
        for (; i + 8 <= count; i += 8) {
            uint32_t v = (uint32_t)row[0] | ((uint32_t)row[1] << 8) | ((uint32_t)row[2] << 16);
            row += 3;
            for (int32_t k = 0; k < 8; ++k, v >>= 3) {
                *out = table[v & 7u];
                out += step;
            }
        }
    }
    /* the rest starts on a byte boundary: i is a multiple of 8 / gcd(8, bits) indices */
    const uint32_t mask = (1u << bits) - 1u;
    uint32_t acc = 0;
    int32_t have = 0;
    for (; i < count; ++i) {
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

/* Every channel's row of `count` indices decoded: channel c to out[c * count + i] (OHWI and [out][in]), or
 * with `interleaved` to out[i * channels + c] (the depthwise [kh][kw][out_c]). */
static inline void mcu_lut_decode_all(const uint8_t *indices, const int8_t *tables, int32_t word, int32_t channels,
                                      int32_t count, int8_t *out, int interleaved)
{
    const int32_t bits = mcu_lut_width(word);
    const size_t row_bytes = (size_t)mcu_lut_row_bytes(count, bits);
    for (int32_t c = 0; c < channels; ++c) {
        mcu_lut_decode(indices + (size_t)c * row_bytes, mcu_lut_table_of(tables, word, c), bits, count,
                       interleaved ? out + c : out + (size_t)c * (size_t)count, interleaved ? channels : 1);
    }
}

/* The 16x8 look-up-table kernels' checks: the palette word, the sizes (in_bytes and out_bytes as
 * mcu_checked_count gives them, `count` weights in `channels` rows), that the scratch holds `span` >= one row of
 * decoded weights and they overlap nothing, that the output overlaps neither the input nor the constants. */
static inline mcu_status mcu_lut_check_s16(const mcu_context *ctx, int32_t word, int32_t channels, int32_t count,
                                           int32_t span, const uint8_t *indices, const int8_t *tables,
                                           const void *input, int32_t in_bytes, const void *output, int32_t out_bytes)
{
    MCU_REQUIRE(mcu_lut_bits_valid(word), MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(count > 0 && in_bytes > 0 && out_bytes > 0 && channels > 0 && channels <= INT32_MAX / 16 &&
                    count % channels == 0,
                MCU_ERR_SHAPE);
    const int32_t taps = count / channels;
    MCU_REQUIRE(ctx->size >= span && span >= taps, MCU_ERR_BUFFER_TOO_SMALL);
    const size_t idx_bytes = (size_t)mcu_lut_row_bytes(taps, mcu_lut_width(word)) * (size_t)channels;
    const size_t table_bytes = mcu_lut_table_bytes(word, channels);
    const int8_t *w = (const int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(w, (size_t)span, input, (size_t)in_bytes) &&
                    !mcu_overlaps(w, (size_t)span, output, (size_t)out_bytes) &&
                    !mcu_overlaps(w, (size_t)span, indices, idx_bytes) &&
                    !mcu_overlaps(w, (size_t)span, tables, table_bytes) &&
                    !mcu_overlaps(input, (size_t)in_bytes, output, (size_t)out_bytes) &&
                    !mcu_overlaps(indices, idx_bytes, output, (size_t)out_bytes) &&
                    !mcu_overlaps(tables, table_bytes, output, (size_t)out_bytes),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

/* mcu_lut_check_s16 with the whole tensor's span, then every channel decoded there (mcu_lut_decode_all). */
static inline mcu_status mcu_lut_decode_s16(const mcu_context *ctx, int32_t word, int32_t channels, int32_t count,
                                            const uint8_t *indices, const int8_t *tables, int interleaved,
                                            const void *input, int32_t in_bytes, const void *output, int32_t out_bytes)
{
    const mcu_status status =
        mcu_lut_check_s16(ctx, word, channels, count, count, indices, tables, input, in_bytes, output, out_bytes);
    if (status == MCU_OK) {
        mcu_lut_decode_all(indices, tables, word, channels, count / channels, (int8_t *)ctx->buf, interleaved);
    }
    return status;
}

/* acc + the sum of (x[c] + off) * w[c] over n values, modulo 2^32; on DSP cores four at a time (two SMLADs,
 * the lanes as in common/simd_s8.h). */
static inline uint32_t mcu_lut_dot(const int8_t *x, const int8_t *w, int32_t n, int32_t off, uint32_t acc)
{
    int32_t c = 0;
#if MCU_S8_DSP
    const uint32_t off2 = mcu_offset_pair(off);
    for (; c + 4 <= n; c += 4) {
        const uint32_t xv = mcu_load_u32(x + c);
        const uint32_t wv = mcu_load_u32(w + c);
        acc = mcu_smlad(mcu_sxtab16(off2, xv), mcu_sxtb16(wv), acc);
        acc = mcu_smlad(mcu_sxtab16_ror8(off2, xv), mcu_sxtb16_ror8(wv), acc);
    }
#endif
    for (; c < n; ++c) {
        acc += (uint32_t)((x[c] + off) * w[c]);
    }
    return acc;
}

/* mcu_lut_dot for two weight rows at once, each input word loaded and offset once for both. */
static inline void mcu_lut_dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t off,
                                uint32_t acc[2])
{
    int32_t c = 0;
    uint32_t a0 = acc[0], a1 = acc[1];
#if MCU_S8_DSP
    const uint32_t off2 = mcu_offset_pair(off);
    for (; c + 4 <= n; c += 4) {
        const uint32_t xv = mcu_load_u32(x + c);
        const uint32_t xe = mcu_sxtab16(off2, xv), xo = mcu_sxtab16_ror8(off2, xv);
        const uint32_t v0 = mcu_load_u32(w0 + c), v1 = mcu_load_u32(w1 + c);
        a0 = mcu_smlad(xo, mcu_sxtb16_ror8(v0), mcu_smlad(xe, mcu_sxtb16(v0), a0));
        a1 = mcu_smlad(xo, mcu_sxtb16_ror8(v1), mcu_smlad(xe, mcu_sxtb16(v1), a1));
    }
#endif
    for (; c < n; ++c) {
        const int32_t xv = x[c] + off;
        a0 += (uint32_t)(xv * w0[c]);
        a1 += (uint32_t)(xv * w1[c]);
    }
    acc[0] = a0;
    acc[1] = a1;
}

#endif /* MCU_KERNELS_INTERNAL_LUT_H */
