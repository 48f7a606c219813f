/* Internal: dot products of int16 activations with int8 weights stored as int16 at build time, the packed
 * 16x8 kernels' inner loop (static inline only). The weights are int32 words of two int16 values (low half
 * first) so that the array is word aligned; per block of 4 rows of n taps (starting at tap index 4 b n) the
 * block's quads come first, each the 4 rows' 4 taps in row order (16 values), then the n % 4 last taps of
 * each row in row order; rows after the last whole block follow as plain rows. Any chunk of a block that
 * starts at a multiple of 4 keeps the same form, so the exact sums split into MCU_S16_PART parts as in
 * dot_s16.h (the products are those of the int8 weights: at most 2^22). With no widening left, one LDRD of
 * activations and four of weights feed eight SMLADs: 15 instructions for 16 products on DSP cores, where
 * dot_s16.h's loop widens each weight word (26). */
#ifndef MCU_KERNELS_INTERNAL_DOT_PACKED_S16_H
#define MCU_KERNELS_INTERNAL_DOT_PACKED_S16_H

#include <stddef.h>
#include <stdint.h>

#include "dot_s16.h"
#include "requant_s16.h"
#include "simd_s8.h"

/* The int16 value at index i of a packed stream. */
static inline int32_t mcu_s16p_at(const int32_t *w, size_t i)
{
    const uint32_t v = ((uint32_t)w[i >> 1] >> (16u * (uint32_t)(i & 1u))) & 0xFFFFu;
    return v >= 0x8000u ? (int32_t)v - 0x10000 : (int32_t)v;
}

/* part[k] = x . (row k of the block at tap index `at`) over n (at most MCU_S16_PART) taps, `at` a multiple
 * of 4 (the block's start plus 4 times the chunk's first tap). */
static inline void mcu_s16p_dot4_part(const int16_t *x, const int32_t *w, size_t at, int32_t n, int32_t *part)
{
    int32_t p0 = 0, p1 = 0, p2 = 0, p3 = 0;
    int32_t q = 0;
#if MCU_S8_DSP_NATIVE
    /* LDRD needs word-aligned activations; the weights are (`at` is a multiple of 4 int16). */
    if ((((uintptr_t)x) & 3u) == 0 && n >= 4) {
        int32_t quads = n >> 2;
        const int16_t *xp = x;
        const int32_t *wp = w + (at >> 1);
        uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, xa, xb, ka, kb;
#define MCU_S16P_ROW(acc)                                  \
    "ldrd %[ka], %[kb], [%[w]], #8\n\t"                    \
    "smlad %[" acc "], %[xa], %[ka], %[" acc "]\n\t"       \
    "smlad %[" acc "], %[xb], %[kb], %[" acc "]\n\t"
        __asm__("1:\n\t"
                "ldrd %[xa], %[xb], [%[x]], #8\n\t" MCU_S16P_ROW("a0") MCU_S16P_ROW("a1") MCU_S16P_ROW("a2")
                    MCU_S16P_ROW("a3")
                "subs %[n], %[n], #1\n\t"
                "bne 1b"
                : [x] "+r"(xp), [w] "+r"(wp), [n] "+r"(quads), [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2),
                  [a3] "+r"(a3), [xa] "=&r"(xa), [xb] "=&r"(xb), [ka] "=&r"(ka), [kb] "=&r"(kb)
                :
                : "cc", "memory");
#undef MCU_S16P_ROW
        p0 = (int32_t)a0;
        p1 = (int32_t)a1;
        p2 = (int32_t)a2;
        p3 = (int32_t)a3;
        q = n >> 2;
    }
#endif
    for (; q < (n >> 2); ++q) {
        const size_t b = at + 16u * (size_t)q;
        for (int32_t t = 0; t < 4; ++t) {
            const int32_t v = x[4 * q + t];
            p0 += v * mcu_s16p_at(w, b + (size_t)t);
            p1 += v * mcu_s16p_at(w, b + 4u + (size_t)t);
            p2 += v * mcu_s16p_at(w, b + 8u + (size_t)t);
            p3 += v * mcu_s16p_at(w, b + 12u + (size_t)t);
        }
    }
    const int32_t whole = n & ~3, rest = n & 3;
    const size_t tail = at + 4u * (size_t)whole;
    for (int32_t t = 0; t < rest; ++t) {
        const int32_t v = x[whole + t];
        p0 += v * mcu_s16p_at(w, tail + (size_t)t);
        p1 += v * mcu_s16p_at(w, tail + (size_t)(rest + t));
        p2 += v * mcu_s16p_at(w, tail + (size_t)(2 * rest + t));
        p3 += v * mcu_s16p_at(w, tail + (size_t)(3 * rest + t));
    }
    part[0] = p0;
    part[1] = p1;
    part[2] = p2;
    part[3] = p3;
}

/* acc[k] += x . (row k of the block at tap index `at`) over n taps, exactly. */
static inline void mcu_s16p_dot4(const int16_t *x, const int32_t *w, size_t at, int32_t n, int64_t *acc)
{
    for (int32_t i = 0; i < n; i += MCU_S16_PART) {
        const int32_t len = n - i > MCU_S16_PART ? MCU_S16_PART : n - i;
        int32_t part[4];
        mcu_s16p_dot4_part(x + i, w, at + 4u * (size_t)i, len, part);
        acc[0] += part[0];
        acc[1] += part[1];
        acc[2] += part[2];
        acc[3] += part[3];
    }
}

/* acc += x . (the plain row at tap index `at`) over n taps, exactly. */
static inline void mcu_s16p_dot1(const int16_t *x, const int32_t *w, size_t at, int32_t n, int64_t *acc)
{
    for (int32_t i = 0; i < n; i += MCU_S16_PART) {
        const int32_t end = n - i > MCU_S16_PART ? i + MCU_S16_PART : n;
        int32_t part = 0;
        for (int32_t j = i; j < end; ++j) {
            part += (int32_t)x[j] * mcu_s16p_at(w, at + (size_t)j);
        }
        *acc += part;
    }
}

/* y[o] for every output channel o of one input vector x of n taps (NULL: all zero, a window wholly in the
 * padding): the channels' sums, bias, requantization and clamp as the plain 16x8 kernels do them. `small`:
 * n <= MCU_S16_PART and mcu_s16_small_layer, so each sum stays one int32. */
static inline void mcu_s16p_rows(const int16_t *x, const int32_t *w, int32_t n, int32_t channels,
                                 const int64_t *bias, const mcu_per_channel_quant *q, int small, int32_t act_min,
                                 int32_t act_max, int16_t *y)
{
    int32_t o = 0;
    for (; small && o + 4 <= channels; o += 4) {
        int32_t part[4] = {0, 0, 0, 0};
        if (x != NULL) {
            mcu_s16p_dot4_part(x, w, (size_t)o * (size_t)n, n, part);
        }
        for (int32_t j = 0; j < 4; ++j) {
            const int32_t acc = part[j] + (bias != NULL ? (int32_t)bias[o + j] : 0);
            y[o + j] = mcu_clamp_to_s16(mcu_requantize_s16_small(acc, q->multiplier[o + j], q->shift[o + j]),
                                        act_min, act_max);
        }
    }
    for (; o + 4 <= channels; o += 4) {
        int64_t acc[4];
        for (int32_t j = 0; j < 4; ++j) {
            acc[j] = bias != NULL ? bias[o + j] : 0;
        }
        if (x != NULL) {
            mcu_s16p_dot4(x, w, (size_t)o * (size_t)n, n, acc);
        }
        for (int32_t j = 0; j < 4; ++j) {
            y[o + j] = mcu_clamp_to_s16(mcu_requantize_s16_acc(acc[j], q->multiplier[o + j], q->shift[o + j]),
                                        act_min, act_max);
        }
    }
    for (; o < channels; ++o) {
        int64_t acc = bias != NULL ? bias[o] : 0;
        if (x != NULL) {
            mcu_s16p_dot1(x, w, (size_t)o * (size_t)n, n, &acc);
        }
        y[o] = mcu_clamp_to_s16(mcu_requantize_s16_acc(acc, q->multiplier[o], q->shift[o]), act_min, act_max);
    }
}

#endif /* MCU_KERNELS_INTERNAL_DOT_PACKED_S16_H */
