/* Internal: dot products of int16 activations with int8 weights, the 16x8 kernels' inner loop (static
 * inline only). Sums are exact: products are at most 2^22 in magnitude, so MCU_S16_PART of them fit an int32
 * partial sum before it joins the 64-bit total (the order of additions does not change an exact sum). */
#ifndef MCU_KERNELS_INTERNAL_DOT_S16_H
#define MCU_KERNELS_INTERNAL_DOT_S16_H

#include <stdint.h>

#include "simd_s8.h"

#define MCU_S16_PART 256

#if MCU_S8_DSP
/* (lo's low half, hi's low half) and (lo's high half, hi's high half): PKHBT and PKHTB, which GCC does not
 * pick for the shifts and masks. */
static inline uint32_t mcu_s16_pair_low(uint32_t lo, uint32_t hi)
{
#if MCU_S8_DSP_NATIVE
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
    return r;
#else
    return (lo & 0xFFFFu) | (hi << 16);
#endif
}

static inline uint32_t mcu_s16_pair_high(uint32_t lo, uint32_t hi)
{
#if MCU_S8_DSP_NATIVE
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(hi), "r"(lo));
    return r;
#else
    return (lo >> 16) | (hi & 0xFFFF0000u);
#endif
}

/* acc + (a's top half) x (b's bottom half), and acc + (a's bottom half) x (b's top half): SMLATB and
 * SMLABT, which simd_s8.h leaves out (the depthwise 16x8 kernel pairs int16 channel pairs with SXTB16's
 * lanes). */
static inline uint32_t mcu_s16_smlatb(uint32_t a, uint32_t b, uint32_t acc)
{
#if MCU_S8_DSP_NATIVE
    uint32_t r;
    __asm__("smlatb %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
#else
    return acc + (uint32_t)(mcu_lane_s16(a, 1) * mcu_lane_s16(b, 0));
#endif
}

static inline uint32_t mcu_s16_smlabt(uint32_t a, uint32_t b, uint32_t acc)
{
#if MCU_S8_DSP_NATIVE
    uint32_t r;
    __asm__("smlabt %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
#else
    return acc + (uint32_t)(mcu_lane_s16(a, 0) * mcu_lane_s16(b, 1));
#endif
}
#endif

/* Two weight rows against one activation run of n (at most MCU_S16_PART) values: int32 partial sums. On DSP
 * cores four values a step, each input word pair rearranged to (x0, x2) and (x1, x3) to meet SXTB16's
 * (w0, w2) and (w1, w3) lanes, so one input load feeds four SMLADs. */
static inline void mcu_s16_dot2_part(const int16_t *x, const int8_t *w0, const int8_t *w1, int32_t n,
                                     int32_t *part0, int32_t *part1)
{
    int32_t i = 0;
#if MCU_S8_DSP
    uint32_t a0 = (uint32_t)*part0;
    uint32_t a1 = (uint32_t)*part1;
    for (; i + 4 <= n; i += 4) {
        const uint32_t lo = mcu_load_u32(x + i);
        const uint32_t hi = mcu_load_u32(x + i + 2);
        const uint32_t even = mcu_s16_pair_low(lo, hi);
        const uint32_t odd = mcu_s16_pair_high(lo, hi);
        const uint32_t k0 = mcu_load_u32(w0 + i);
        const uint32_t k1 = mcu_load_u32(w1 + i);
        a0 = mcu_smlad(mcu_sxtb16(k0), even, a0);
        a0 = mcu_smlad(mcu_sxtb16_ror8(k0), odd, a0);
        a1 = mcu_smlad(mcu_sxtb16(k1), even, a1);
        a1 = mcu_smlad(mcu_sxtb16_ror8(k1), odd, a1);
    }
    *part0 = (int32_t)a0;
    *part1 = (int32_t)a1;
#endif
    int32_t p0 = *part0, p1 = *part1;
    for (; i < n; ++i) {
        p0 += (int32_t)x[i] * (int32_t)w0[i];
        p1 += (int32_t)x[i] * (int32_t)w1[i];
    }
    *part0 = p0;
    *part1 = p1;
}

/* Four weight rows (stride `row` apart) against one activation run of n (at most MCU_S16_PART) values: each
 * rearranged input pair feeds eight SMLADs on DSP cores. */
static inline void mcu_s16_dot4_part(const int16_t *x, const int8_t *w, int32_t row, int32_t n, int32_t *part)
{
    int32_t i = 0;
    const int8_t *w0 = w, *w1 = w + row, *w2 = w + 2 * row, *w3 = w + 3 * row;
#if MCU_S8_DSP_NATIVE
    /* One loop in assembly, 26 instructions for 16 products: the compiled form of the loop below spilled
     * its row pointers. Rows 0 and 2 are walked by pointer, rows 1 and 3 read `row` bytes past them. */
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32_t quads = n >> 2;
    if (quads > 0) {
        const int16_t *xp = x;
        const int8_t *wa = w0, *wb = w2;
        uint32_t lo, hi, ev, s;
#define MCU_S16_ROW(load, acc)                                                                \
    load "\n\t"                                                                               \
    "sxtb16 %[s], %[lo]\n\t"                                                                  \
    "smlad %[" acc "], %[s], %[ev], %[" acc "]\n\t"                                           \
    "sxtb16 %[s], %[lo], ror #8\n\t"                                                          \
    "smlad %[" acc "], %[s], %[hi], %[" acc "]\n\t"
        __asm__("1:\n\t"
                "ldr %[hi], [%[x], #4]\n\t"
                "ldr %[lo], [%[x]], #8\n\t"
                "pkhbt %[ev], %[lo], %[hi], lsl #16\n\t"
                "pkhtb %[hi], %[hi], %[lo], asr #16\n\t" MCU_S16_ROW("ldr %[lo], [%[wa], %[row]]", "a1")
                    MCU_S16_ROW("ldr %[lo], [%[wa]], #4", "a0") MCU_S16_ROW("ldr %[lo], [%[wb], %[row]]", "a3")
                        MCU_S16_ROW("ldr %[lo], [%[wb]], #4", "a2")
                "subs %[n], %[n], #1\n\t"
                "bne 1b"
                : [x] "+r"(xp), [wa] "+r"(wa), [wb] "+r"(wb), [n] "+r"(quads), [a0] "+r"(a0), [a1] "+r"(a1),
                  [a2] "+r"(a2), [a3] "+r"(a3), [lo] "=&r"(lo), [hi] "=&r"(hi), [ev] "=&r"(ev), [s] "=&r"(s)
                : [row] "r"(row)
                : "cc", "memory");
#undef MCU_S16_ROW
        i = n & ~3;
    }
    int32_t p0 = (int32_t)a0, p1 = (int32_t)a1, p2 = (int32_t)a2, p3 = (int32_t)a3;
#elif MCU_S8_DSP
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t lo = mcu_load_u32(x + i);
        const uint32_t hi = mcu_load_u32(x + i + 2);
        const uint32_t even = mcu_s16_pair_low(lo, hi);
        const uint32_t odd = mcu_s16_pair_high(lo, hi);
        const uint32_t k0 = mcu_load_u32(w0 + i);
        const uint32_t k1 = mcu_load_u32(w1 + i);
        const uint32_t k2 = mcu_load_u32(w2 + i);
        const uint32_t k3 = mcu_load_u32(w3 + i);
        a0 = mcu_smlad(mcu_sxtb16(k0), even, a0);
        a0 = mcu_smlad(mcu_sxtb16_ror8(k0), odd, a0);
        a1 = mcu_smlad(mcu_sxtb16(k1), even, a1);
        a1 = mcu_smlad(mcu_sxtb16_ror8(k1), odd, a1);
        a2 = mcu_smlad(mcu_sxtb16(k2), even, a2);
        a2 = mcu_smlad(mcu_sxtb16_ror8(k2), odd, a2);
        a3 = mcu_smlad(mcu_sxtb16(k3), even, a3);
        a3 = mcu_smlad(mcu_sxtb16_ror8(k3), odd, a3);
    }
    int32_t p0 = (int32_t)a0, p1 = (int32_t)a1, p2 = (int32_t)a2, p3 = (int32_t)a3;
#else
    int32_t p0 = 0, p1 = 0, p2 = 0, p3 = 0;
#endif
    for (; i < n; ++i) {
        const int32_t v = x[i];
        p0 += v * (int32_t)w0[i];
        p1 += v * (int32_t)w1[i];
        p2 += v * (int32_t)w2[i];
        p3 += v * (int32_t)w3[i];
    }
    part[0] = p0;
    part[1] = p1;
    part[2] = p2;
    part[3] = p3;
}

/* acc[k] += x . (row k of w, rows `row` apart) for k < 4, over n values, exactly. */
static inline void mcu_s16_dot4(const int16_t *x, const int8_t *w, int32_t row, int32_t n, int64_t *acc)
{
    for (int32_t i = 0; i < n; i += MCU_S16_PART) {
        const int32_t len = n - i > MCU_S16_PART ? MCU_S16_PART : n - i;
        int32_t part[4];
        mcu_s16_dot4_part(x + i, w + i, row, len, part);
        acc[0] += part[0];
        acc[1] += part[1];
        acc[2] += part[2];
        acc[3] += part[3];
    }
}

/* acc0 += x . w0 and acc1 += x . w1 over n values, exactly. */
static inline void mcu_s16_dot2(const int16_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int64_t *acc0,
                                int64_t *acc1)
{
    for (int32_t i = 0; i < n; i += MCU_S16_PART) {
        const int32_t len = n - i > MCU_S16_PART ? MCU_S16_PART : n - i;
        int32_t part0 = 0, part1 = 0;
        mcu_s16_dot2_part(x + i, w0 + i, w1 + i, len, &part0, &part1);
        *acc0 += part0;
        *acc1 += part1;
    }
}

/* acc += x . w over n values, exactly. */
static inline void mcu_s16_dot1(const int16_t *x, const int8_t *w, int32_t n, int64_t *acc)
{
    for (int32_t i = 0; i < n; i += MCU_S16_PART) {
        const int32_t end = n - i > MCU_S16_PART ? i + MCU_S16_PART : n;
        int32_t part = 0;
        for (int32_t j = i; j < end; ++j) {
            part += (int32_t)x[j] * (int32_t)w[j];
        }
        *acc += part;
    }
}

#endif /* MCU_KERNELS_INTERNAL_DOT_S16_H */
