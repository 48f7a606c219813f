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

#if MCU_S8_DSP_NATIVE
/* One quad: 4 taps of x (r4) against the 4 rows' 4 taps (r5, two LDM of two rows each) into r0-r3. */
#define MCU_S16P_QUAD                                                                                     \
    "ldrd r12, lr, [r4], #8\n\t"                                                                          \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlad r0, r12, r8, r0\n\t"                                                                           \
    "smlad r0, lr, r9, r0\n\t"                                                                            \
    "smlad r1, r12, r10, r1\n\t"                                                                          \
    "smlad r1, lr, r11, r1\n\t"                                                                           \
    "ldmia r5!, {r8, r9, r10, r11}\n\t"                                                                   \
    "smlad r2, r12, r8, r2\n\t"                                                                           \
    "smlad r2, lr, r9, r2\n\t"                                                                            \
    "smlad r3, r12, r10, r3\n\t"                                                                          \
    "smlad r3, lr, r11, r3\n\t"
#endif

/* acc[k] += x . (row k of a block) over `quads` quads of 4 taps, the block's quads starting at word w
 * (modulo 2^32: exact while the caller keeps the sums inside int32). On the core, with word-aligned x:
 * 11 instructions per quad (one LDRD of activations, two LDM of four weight words, eight SMLAD), the
 * loop's compare and branch once per four quads; the odd quads first. (Always inlined: a call per block
 * cost its registers' saving and the accumulators' trip through memory.) */
static inline __attribute__((always_inline)) void mcu_s16p_quads(const int16_t *x, const int32_t *w, int32_t quads,
                                                                   uint32_t acc[4])
{
#if MCU_S8_DSP_NATIVE
    if ((((uintptr_t)x) & 3u) == 0) {
        register uint32_t a0 __asm__("r0") = acc[0];
        register uint32_t a1 __asm__("r1") = acc[1];
        register uint32_t a2 __asm__("r2") = acc[2];
        register uint32_t a3 __asm__("r3") = acc[3];
        register const int16_t *xp __asm__("r4") = x;
        register const int32_t *wp __asm__("r5") = w;
        register int32_t n __asm__("r6") = quads;
        __asm__ volatile("tst r6, #1\n\t"
                         "beq 1f\n\t" MCU_S16P_QUAD "1:\n\t"
                         "tst r6, #2\n\t"
                         "beq 2f\n\t" MCU_S16P_QUAD MCU_S16P_QUAD "2:\n\t"
                         "lsrs r6, r6, #2\n\t"
                         "beq 4f\n\t"
                         "3:\n\t" MCU_S16P_QUAD MCU_S16P_QUAD MCU_S16P_QUAD MCU_S16P_QUAD
                         "subs r6, r6, #1\n\t"
                         "bne 3b\n\t"
                         "4:\n\t"
                         : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(xp), "+r"(wp), "+r"(n)
                         :
                         : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        return;
    }
#endif
#if MCU_S8_DSP
    /* the words as the assembly pairs them (unaligned activation words are single LDRs on the core) */
    for (int32_t q = 0; q < quads; ++q, x += 4, w += 8) {
        const uint32_t xa = mcu_load_u32(x), xb = mcu_load_u32(x + 2);
        for (int32_t k = 0; k < 4; ++k) {
            acc[k] = mcu_smlad(xb, (uint32_t)w[2 * k + 1], mcu_smlad(xa, (uint32_t)w[2 * k], acc[k]));
        }
    }
#else
    for (int32_t q = 0; q < quads; ++q) {
        for (int32_t k = 0; k < 4; ++k) {
            for (int32_t t = 0; t < 4; ++t) {
                acc[k] += (uint32_t)((int32_t)x[4 * q + t] * mcu_s16p_at(w, (size_t)(16 * q + 4 * k + t)));
            }
        }
    }
#endif
}

/* acc[k] += x . (row k of the block at tap index `at`) over its last `rest` (< 4) taps, starting at
 * activation x and at tap index `tail` of the block's tail (each row's rest taps in row order). */
static inline void mcu_s16p_tail(const int16_t *x, const int32_t *w, size_t tail, int32_t rest, uint32_t acc[4])
{
    for (int32_t t = 0; t < rest; ++t) {
        const int32_t v = x[t];
        for (int32_t k = 0; k < 4; ++k) {
            acc[k] += (uint32_t)(v * mcu_s16p_at(w, tail + (size_t)(k * rest + t)));
        }
    }
}

/* part[k] = x . (row k of the block at tap index `at`) over n (at most MCU_S16_PART) taps, `at` a multiple
 * of 4 (the block's start plus 4 times the chunk's first tap). */
static inline void mcu_s16p_dot4_part(const int16_t *x, const int32_t *w, size_t at, int32_t n, int32_t *part)
{
    uint32_t acc[4] = {0, 0, 0, 0};
    const int32_t whole = n & ~3;
    mcu_s16p_quads(x, w + (at >> 1), n >> 2, acc);
    mcu_s16p_tail(x + whole, w, at + 4u * (size_t)whole, n & 3, acc);
    for (int32_t k = 0; k < 4; ++k) {
        part[k] = mcu_u32_to_s32(acc[k]);
    }
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
 * padding): the channels' exact 64-bit sums, bias, requantization and clamp as the plain 16x8 kernels do them
 * (the layers whose biases or shifts mcu_s16p_rq_init refuses). */
static inline void mcu_s16p_rows(const int16_t *x, const int32_t *w, int32_t n, int32_t channels,
                                 const int64_t *bias, const mcu_per_channel_quant *q, int32_t act_min, int32_t act_max,
                                 int16_t *y)
{
    int32_t o = 0;
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

/* The fast path of layers whose biases and shifts are mcu_s16_small_layer's (windows past MCU_S16_PART taps
 * in parts): each channel's constants of mcu_requantize_s16_small made once per call and chunk of channels
 * (not once per pixel), the bias taken into the accumulators before the products (the sum stays inside
 * int32), and the rounding's addition done by the multiply (SMLAWB). */
#define MCU_S16P_CHUNK 32 /* channels per table: 512 bytes of stack */

typedef struct {
    int32_t m15;  /* the Q15 multiplier */
    int32_t half; /* 2^(k-1) */
    int32_t k;    /* -1 - shift, in [1, 30] */
} mcu_s16p_ch;

/* One block of four channels: the biases first, so that one LDM puts them in the accumulators. */
typedef struct {
    int32_t bias[4];
    mcu_s16p_ch ch[4];
} mcu_s16p_rq;

/* The activation bounds as one of three clamps: the whole int16 range (SSAT), ReLU's (USAT), any other. */
enum { MCU_S16P_CLAMP_ANY, MCU_S16P_CLAMP_S16, MCU_S16P_CLAMP_RELU };

static inline int mcu_s16p_clamp_kind(int32_t act_min, int32_t act_max)
{
    if (act_max != INT16_MAX) {
        return MCU_S16P_CLAMP_ANY;
    }
    return act_min == INT16_MIN ? MCU_S16P_CLAMP_S16 : (act_min == 0 ? MCU_S16P_CLAMP_RELU : MCU_S16P_CLAMP_ANY);
}

/* mcu_reduce_multiplier_q15 of a multiplier >= 0: the saturating add leaves 0x7FFF for every multiplier
 * from 0x7FFF0000 up, as the reference's bound does, in two instructions on the core. */
static inline int32_t mcu_s16p_q15(int32_t multiplier)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t r;
    __asm__("qadd %0, %1, %2" : "=r"(r) : "r"(multiplier), "r"((int32_t)0x8000));
    return r >> 16;
#else
    return mcu_reduce_multiplier_q15(multiplier);
#endif
}

/* t[0..count / 4) for the channels from o0 (count a multiple of 4). Returns 1 when every one of them has the
 * shift and bias of mcu_s16_small_layer (then a window of at most MCU_S16_PART products requantizes from the
 * table, a wider one in parts: mcu_s16p_chunk_wide), checked here rather than in a pass of its own. */
static inline int mcu_s16p_rq_init(mcu_s16p_rq *t, const int64_t *bias, const mcu_per_channel_quant *q, int32_t o0,
                                   int32_t count)
{
    const int32_t *mul = q->multiplier + o0, *sh = q->shift + o0;
    uint32_t bad = 0;
    for (int32_t b = 0; b < count; b += 4, ++t) {
        for (int32_t j = 0; j < 4; ++j) {
            const int32_t k = -1 - sh[b + j];
            int32_t b32 = 0;
            if (bias != NULL) {
                const int64_t v = bias[o0 + b + j];
                /* |v| < 2^30 */
                bad |= (uint32_t)((uint64_t)v + (uint64_t)(MCU_S16_SMALL_BIAS - 1) >
                                  (uint64_t)(2 * MCU_S16_SMALL_BIAS - 2));
                b32 = (int32_t)v;
            }
            bad |= (uint32_t)(k < 1);
            t->bias[j] = b32;
            t->ch[j].m15 = mcu_s16p_q15(mul[b + j]);
            t->ch[j].half = (int32_t)1 << ((k - 1) & 31); /* (a shift past -2 fails the check) */
            t->ch[j].k = k;
        }
    }
    return bad == 0;
}

/* mcu_requantize_s16_small(acc, ...) from the channel's constants: floor(acc m15 / 2^16) + 2^(k-1), shifted
 * right by k (the sum stays below 2^30 in magnitude: no overflow, so SMLAWB's is the same). */
static inline int32_t mcu_s16p_rq_apply(int32_t acc, const mcu_s16p_ch *t)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t s;
    __asm__("smlawb %0, %1, %2, %3" : "=r"(s) : "r"(acc), "r"(t->m15), "r"(t->half));
#else
    const int32_t s = (int32_t)mcu_asr64((int64_t)acc * t->m15, 16) + t->half;
#endif
    return mcu_asr32(s, t->k);
}

static inline int32_t mcu_s16p_sat_s16(int32_t v)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t r;
    __asm__("ssat %0, #16, %1" : "=r"(r) : "r"(v));
    return r;
#else
    return mcu_clamp_to_s16(v, INT16_MIN, INT16_MAX);
#endif
}

static inline int32_t mcu_s16p_sat_relu(int32_t v)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t r;
    __asm__("usat %0, #15, %1" : "=r"(r) : "r"(v));
    return r;
#else
    return mcu_clamp_to_s16(v, 0, INT16_MAX);
#endif
}

/* y[0..4) from the block's four requantized sums (not yet clamped); written out so that the sums stay in
 * registers. */
static inline __attribute__((always_inline)) void mcu_s16p_store4(int32_t v0, int32_t v1, int32_t v2, int32_t v3,
                                                                  int clamp, int32_t act_min, int32_t act_max,
                                                                  int16_t *y)
{
    if (clamp == MCU_S16P_CLAMP_S16) {
        v0 = mcu_s16p_sat_s16(v0);
        v1 = mcu_s16p_sat_s16(v1);
        v2 = mcu_s16p_sat_s16(v2);
        v3 = mcu_s16p_sat_s16(v3);
    } else if (clamp == MCU_S16P_CLAMP_RELU) {
        v0 = mcu_s16p_sat_relu(v0);
        v1 = mcu_s16p_sat_relu(v1);
        v2 = mcu_s16p_sat_relu(v2);
        v3 = mcu_s16p_sat_relu(v3);
    } else {
        v0 = mcu_clamp_to_s16(v0, act_min, act_max);
        v1 = mcu_clamp_to_s16(v1, act_min, act_max);
        v2 = mcu_clamp_to_s16(v2, act_min, act_max);
        v3 = mcu_clamp_to_s16(v3, act_min, act_max);
    }
    /* every value lies inside int16 now */
    y[0] = (int16_t)v0;
    y[1] = (int16_t)v1;
    y[2] = (int16_t)v2;
    y[3] = (int16_t)v3;
}

#if MCU_S8_DSP_NATIVE
/* One block on the core, x word-aligned and n a multiple of 4: the biases into the accumulators (one LDM),
 * the quads (as mcu_s16p_quads), then each channel's SMLAWB and shift from the table (one LDM each).
 * Returns the four requantized sums; the table's address comes from memory, as every register but r7
 * (kept for a frame pointer) holds something. */
static inline __attribute__((always_inline)) void mcu_s16p_block(const int16_t *x, const int32_t *w, int32_t quads,
                                                                 const mcu_s16p_rq *t, int32_t v[4])
{
    register uint32_t a0 __asm__("r0");
    register uint32_t a1 __asm__("r1");
    register uint32_t a2 __asm__("r2");
    register uint32_t a3 __asm__("r3");
    register const int16_t *xp __asm__("r4") = x;
    register const int32_t *wp __asm__("r5") = w;
    register int32_t n __asm__("r6") = quads;
    const mcu_s16p_rq *tp = t;
#define MCU_S16P_RQ(acc)                                                                                  \
    "ldmia r12!, {r8, r9, r10}\n\t"                                                                       \
    "smlawb " acc ", " acc ", r8, r9\n\t"                                                                 \
    "asr " acc ", " acc ", r10\n\t"
    __asm__ volatile("ldr r12, %[tab]\n\t"
                     "ldmia r12, {r0, r1, r2, r3}\n\t"
                     "tst r6, #1\n\t"
                     "beq 1f\n\t" MCU_S16P_QUAD "1:\n\t"
                     "tst r6, #2\n\t"
                     "beq 2f\n\t" MCU_S16P_QUAD MCU_S16P_QUAD "2:\n\t"
                     "lsrs r6, r6, #2\n\t"
                     "beq 4f\n\t"
                     "3:\n\t" MCU_S16P_QUAD MCU_S16P_QUAD MCU_S16P_QUAD MCU_S16P_QUAD
                     "subs r6, r6, #1\n\t"
                     "bne 3b\n\t"
                     "4:\n\t"
                     "ldr r12, %[tab]\n\t"
                     "add r12, r12, #16\n\t" MCU_S16P_RQ("r0") MCU_S16P_RQ("r1") MCU_S16P_RQ("r2") MCU_S16P_RQ("r3")
                     : "=&r"(a0), "=&r"(a1), "=&r"(a2), "=&r"(a3), "+r"(xp), "+r"(wp), "+r"(n)
                     : [tab] "m"(tp)
                     : "r8", "r9", "r10", "r11", "r12", "lr", "cc", "memory");
#undef MCU_S16P_RQ
    v[0] = (int32_t)a0;
    v[1] = (int32_t)a1;
    v[2] = (int32_t)a2;
    v[3] = (int32_t)a3;
}
#endif

/* y[0..count) (count a multiple of 4) for one input vector x of n taps (NULL: all zero, a window wholly in
 * the padding) and the whole blocks from word w, with the chunk's table t (one entry a block). */
static inline __attribute__((always_inline)) void mcu_s16p_chunk_as(const int16_t *x, const int32_t *w, int32_t n,
                                                                     const mcu_s16p_rq *t, int32_t count, int clamp,
                                                                     int32_t act_min, int32_t act_max, int16_t *y)
{
    const int32_t quads = n >> 2, rest = n & 3, whole = n & ~3;
    for (int32_t b = 0; b < count; b += 4, w += 2 * n, ++t, y += 4) {
        int32_t v[4];
#if MCU_S8_DSP_NATIVE
        if (x != NULL && rest == 0 && (((uintptr_t)x) & 3u) == 0) {
            mcu_s16p_block(x, w, quads, t, v);
            mcu_s16p_store4(v[0], v[1], v[2], v[3], clamp, act_min, act_max, y);
            continue;
        }
#endif
        uint32_t acc[4] = {(uint32_t)t->bias[0], (uint32_t)t->bias[1], (uint32_t)t->bias[2], (uint32_t)t->bias[3]};
        if (x != NULL) {
            mcu_s16p_quads(x, w, quads, acc);
            if (rest != 0) {
                mcu_s16p_tail(x + whole, w, 4u * (size_t)whole, rest, acc);
            }
        }
        for (int32_t j = 0; j < 4; ++j) {
            v[j] = mcu_s16p_rq_apply(mcu_u32_to_s32(acc[j]), &t->ch[j]);
        }
        mcu_s16p_store4(v[0], v[1], v[2], v[3], clamp, act_min, act_max, y);
    }
}

/* mcu_s16p_chunk for windows past MCU_S16_PART taps: the exact sum in int32 parts of at most MCU_S16_PART
 * products (the first from the bias, below 2^30), added in 64 bits; a total inside int32 requantizes from the
 * table, any other as mcu_requantize_s16_acc does (mcu_requantize_s64). */
static inline void mcu_s16p_chunk_wide(const int16_t *x, const int32_t *w, int32_t n, const mcu_s16p_rq *t,
                                       int32_t count, int clamp, int32_t act_min, int32_t act_max, int16_t *y)
{
    const int32_t rest = n & 3, whole = n & ~3;
    for (int32_t b = 0; b < count; b += 4, w += 2 * n, ++t, y += 4) {
        int64_t acc[4] = {t->bias[0], t->bias[1], t->bias[2], t->bias[3]};
        if (x != NULL) {
            for (int32_t i = 0; i < whole; i += MCU_S16_PART) {
                const int32_t len = whole - i < MCU_S16_PART ? whole - i : MCU_S16_PART;
                uint32_t part[4] = {0, 0, 0, 0};
                mcu_s16p_quads(x + i, w + 2 * i, len >> 2, part);
                for (int32_t j = 0; j < 4; ++j) {
                    acc[j] += mcu_u32_to_s32(part[j]);
                }
            }
            if (rest != 0) {
                uint32_t part[4] = {0, 0, 0, 0};
                mcu_s16p_tail(x + whole, w, 4u * (size_t)whole, rest, part);
                for (int32_t j = 0; j < 4; ++j) {
                    acc[j] += mcu_u32_to_s32(part[j]);
                }
            }
        }
        int32_t v[4];
        for (int32_t j = 0; j < 4; ++j) {
            v[j] = acc[j] >= INT32_MIN && acc[j] <= INT32_MAX
                       ? mcu_s16p_rq_apply((int32_t)acc[j], &t->ch[j])
                       : mcu_requantize_s64(acc[j], t->ch[j].m15, -1 - t->ch[j].k);
        }
        mcu_s16p_store4(v[0], v[1], v[2], v[3], clamp, act_min, act_max, y);
    }
}

/* mcu_s16p_chunk_as with the clamp kind a constant in each copy (no test of it per block). */
static inline void mcu_s16p_chunk(const int16_t *x, const int32_t *w, int32_t n, const mcu_s16p_rq *t, int32_t count,
                                  int clamp, int32_t act_min, int32_t act_max, int16_t *y)
{
    if (n > MCU_S16_PART) {
        mcu_s16p_chunk_wide(x, w, n, t, count, clamp, act_min, act_max, y);
    } else if (clamp == MCU_S16P_CLAMP_S16) {
        mcu_s16p_chunk_as(x, w, n, t, count, MCU_S16P_CLAMP_S16, act_min, act_max, y);
    } else if (clamp == MCU_S16P_CLAMP_RELU) {
        mcu_s16p_chunk_as(x, w, n, t, count, MCU_S16P_CLAMP_RELU, act_min, act_max, y);
    } else {
        mcu_s16p_chunk_as(x, w, n, t, count, MCU_S16P_CLAMP_ANY, act_min, act_max, y);
    }
}

/* y[o] for the channels after the last whole block (plain rows), for one input vector (NULL: all zero). */
static inline void mcu_s16p_rest_rows(const int16_t *x, const int32_t *w, int32_t n, int32_t from, int32_t channels,
                                      const int64_t *bias, const mcu_per_channel_quant *q, int32_t act_min,
                                      int32_t act_max, int16_t *y)
{
    for (int32_t o = from; o < channels; ++o) {
        int64_t acc = bias != NULL ? bias[o] : 0;
        if (x != NULL) {
            mcu_s16p_dot1(x, w, (size_t)o * (size_t)n, n, &acc);
        }
        y[o] = mcu_clamp_to_s16(mcu_requantize_s16_acc(acc, q->multiplier[o], q->shift[o]), act_min, act_max);
    }
}

#endif /* MCU_KERNELS_INTERNAL_DOT_PACKED_S16_H */
