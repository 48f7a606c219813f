/* Dual 16-bit MAC building blocks of the optimised int8 kernels, and a
 * requantization specialised to the parameters the kernels have validated.
 * Internal: static inline only.
 *
 * MCU_S8_DSP is 1 when the kernels take their SIMD paths:
 *  - on Arm cores with the DSP extension (__ARM_FEATURE_DSP: Cortex-M4, M7,
 *    M33, M55) the helpers are single instructions (SXTB16, SXTAB16, SMLAD,
 *    SMLABB/SMLATT);
 *  - anywhere else when MCU_S8_DSP_EMULATE is defined: the same helpers are
 *    portable C with the instructions' exact lane arithmetic, so the SIMD
 *    paths (their data layout, tails and blocking) run and are tested on the
 *    host. Defining MCU_S8_NO_DSP forces the plain paths.
 *
 * Lane arithmetic: a uint32_t holds two 16-bit lanes (bits 0-15 "bottom",
 * 16-31 "top"). SXTB16 sign-extends bytes 0 and 2 into the lanes; with a
 * rotation by 8 it takes bytes 1 and 3. SXTAB16 adds those to the lanes of
 * another word (modulo 2^16 per lane). SMLAD adds both signed lane products
 * to a 32-bit accumulator modulo 2^32, which is exactly the kernels'
 * modulo-2^32 accumulation: the SIMD paths sum the same products in another
 * order, which modular addition does not notice. (x + input_offset) lies in
 * [-255, 255] and weights in [-128, 127], so every lane value and product is
 * exact in 16/32 bits. */
#ifndef MCU_KERNELS_INTERNAL_SIMD_S8_H
#define MCU_KERNELS_INTERNAL_SIMD_S8_H

#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "window.h"

#if !defined(MCU_S8_NO_DSP) && defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#define MCU_S8_DSP 1
#define MCU_S8_DSP_NATIVE 1
#elif !defined(MCU_S8_NO_DSP) && defined(MCU_S8_DSP_EMULATE)
#define MCU_S8_DSP 1
#define MCU_S8_DSP_NATIVE 0
#else
#define MCU_S8_DSP 0
#define MCU_S8_DSP_NATIVE 0
#endif

/* Largest im2col window (elements per output pixel) the SIMD convolution keeps on the stack, two
 * pixels at a time as 16-bit values: 2 * 640 * 2 = 2560 bytes. Larger windows take the plain path.
 * Channel counts that are not a multiple of 4 gather the window as bytes first, in at most
 * MCU_S8_RAW_MAX more bytes. Depthwise kernels keep one row pointer per kernel row. */
#define MCU_S8_COL_MAX 640
#define MCU_S8_RAW_MAX 256
#define MCU_S8_DW_ROWS_MAX 16

/* The signed 16-bit lane (0: bits 0-15, 1: bits 16-31) of a word: the DSP emulation's operand and
 * the lane sums of kernels that keep two 16-bit counts in a word. */
static inline int32_t mcu_lane_s16(uint32_t x, int lane)
{
    /* Shifts rather than a mask and compare: GCC makes these one SXTH or ASR. */
    return mcu_u32_to_s32(lane ? x : x << 16) >> 16;
}

#if MCU_S8_DSP

/* Unaligned 32-bit load (one LDR on Cortex-M3 and later). */
static inline uint32_t mcu_load_u32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void mcu_store_u32(void *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

#if MCU_S8_DSP_NATIVE

/* Inline assembly rather than arm_acle.h: the rotated forms are one instruction each, and the
 * operands stay plain uint32_t (no ACLE vector typedefs, no implementation-defined conversions). */
static inline uint32_t mcu_sxtb16(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1" : "=r"(r) : "r"(x));
    return r;
}

static inline uint32_t mcu_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}

static inline uint32_t mcu_sxtab16(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

static inline uint32_t mcu_sxtab16_ror8(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}

static inline uint32_t mcu_smlad(uint32_t a, uint32_t b, uint32_t acc)
{
    uint32_t r;
    __asm__("smlad %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
}

/* acc + bottom(a) * bottom(b) and acc + top(a) * top(b). */
static inline uint32_t mcu_smlabb(uint32_t a, uint32_t b, uint32_t acc)
{
    uint32_t r;
    __asm__("smlabb %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
}

static inline uint32_t mcu_smlatt(uint32_t a, uint32_t b, uint32_t acc)
{
    uint32_t r;
    __asm__("smlatt %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
}

#else /* portable emulation with the instructions' exact arithmetic */

static inline int32_t mcu_lane_s8(uint32_t x, int byte)
{
    const int32_t v = (int32_t)((x >> (8 * byte)) & 0xFFu);
    return v >= 128 ? v - 256 : v;
}

static inline uint32_t mcu_pack16(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | (((uint32_t)hi & 0xFFFFu) << 16);
}

static inline uint32_t mcu_sxtb16(uint32_t x)
{
    return mcu_pack16(mcu_lane_s8(x, 0), mcu_lane_s8(x, 2));
}

static inline uint32_t mcu_sxtb16_ror8(uint32_t x)
{
    return mcu_pack16(mcu_lane_s8(x, 1), mcu_lane_s8(x, 3));
}

static inline uint32_t mcu_sxtab16(uint32_t a, uint32_t x)
{
    return mcu_pack16(mcu_lane_s16(a, 0) + mcu_lane_s8(x, 0), mcu_lane_s16(a, 1) + mcu_lane_s8(x, 2));
}

static inline uint32_t mcu_sxtab16_ror8(uint32_t a, uint32_t x)
{
    return mcu_pack16(mcu_lane_s16(a, 0) + mcu_lane_s8(x, 1), mcu_lane_s16(a, 1) + mcu_lane_s8(x, 3));
}

static inline uint32_t mcu_smlad(uint32_t a, uint32_t b, uint32_t acc)
{
    return acc + (uint32_t)(mcu_lane_s16(a, 0) * mcu_lane_s16(b, 0)) +
           (uint32_t)(mcu_lane_s16(a, 1) * mcu_lane_s16(b, 1));
}

static inline uint32_t mcu_smlabb(uint32_t a, uint32_t b, uint32_t acc)
{
    return acc + (uint32_t)(mcu_lane_s16(a, 0) * mcu_lane_s16(b, 0));
}

static inline uint32_t mcu_smlatt(uint32_t a, uint32_t b, uint32_t acc)
{
    return acc + (uint32_t)(mcu_lane_s16(a, 1) * mcu_lane_s16(b, 1));
}

#endif /* MCU_S8_DSP_NATIVE */

/* Both lanes set to the input offset (which fits a lane: it is in [-127, 128]). */
static inline uint32_t mcu_offset_pair(int32_t input_offset)
{
    const uint32_t lane = (uint32_t)input_offset & 0xFFFFu;
    return lane | (lane << 16);
}

/* Expands n int8 values to (x + input_offset) as 16-bit lanes in "reordered" groups of four:
 * bytes x0 x1 x2 x3 become the words (x0, x2) and (x1, x3), which pair with the weight words
 * SXTB16(w) and SXTB16(w ror 8). A tail of n % 4 values is stored in natural order. */
static inline void mcu_expand_s8(const int8_t *x, int32_t n, int32_t off, int16_t *col)
{
    const uint32_t off2 = mcu_offset_pair(off);
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t v = mcu_load_u32(x + i);
        mcu_store_u32(col + i, mcu_sxtab16(off2, v));
        mcu_store_u32(col + i + 2, mcu_sxtab16_ror8(off2, v));
    }
    for (; i < n; ++i) {
        col[i] = (int16_t)(x[i] + off);
    }
}

#endif /* MCU_S8_DSP */

/* Saturating a + b and a - b (QADD, QSUB on the core; portable elsewhere). */
static inline int32_t mcu_qadd(int32_t a, int32_t b)
{
#if MCU_S8_DSP_NATIVE
    int32_t r;
    __asm__("qadd %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    return mcu_sat_s32((int64_t)a + b);
#endif
}

static inline int32_t mcu_qsub(int32_t a, int32_t b)
{
#if MCU_S8_DSP_NATIVE
    int32_t r;
    __asm__("qsub %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    return mcu_sat_s32((int64_t)a - b);
#endif
}

/* Zero / zero-point fills and a copy written as loops: the kernels reference no libc function at
 * all (tests/kernels/test_kernels_s8.py checks their objects); the empty asm keeps GCC from turning the
 * loops back into memset/memcpy calls. (The copies are a window tap's few channels.) */
static inline void mcu_zero_s16(int16_t *dst, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        dst[i] = 0;
        __asm__("" ::: "memory");
    }
}

static inline void mcu_fill_s8(int8_t *dst, int8_t v, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        dst[i] = v;
        __asm__("" ::: "memory");
    }
}

static inline void mcu_copy_s8(int8_t *dst, const int8_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        dst[i] = src[i];
        __asm__("" ::: "memory");
    }
}

/* A window row of n contiguous bytes (the few input channels of a first layer times the kernel
 * width): four bytes per unaligned word where the core has them, the byte loop elsewhere. */
static inline void mcu_copy_run_s8(int8_t *dst, const int8_t *src, int32_t n)
{
#if MCU_S8_DSP
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        mcu_store_u32(dst + i, mcu_load_u32(src + i));
        __asm__("" ::: "memory");
    }
    mcu_copy_s8(dst + i, src + i, n - i);
#else
    mcu_copy_s8(dst, src, n);
#endif
}

/* col[0..kp) from kp bytes (kp a multiple of 4): (x + off) in the 0, 2, 1, 3 order per group. col is
 * word-aligned (every caller's column is an _Alignas(8) array at a multiple of 4 taps). */
static inline void mcu_column_s8(const int8_t *x, int32_t kp, int32_t off, int16_t *col)
{
#if MCU_S8_DSP_NATIVE
    /* 16 bytes per pass: 4 LDR (unaligned), 8 SXTAB16, 4 STRD and the loop; then 8, then 4 */
    const uint32_t off2 = mcu_offset_pair(off);
    const int8_t *end16 = x + (kp & ~15);
    const int8_t *end = x + kp;
    uint32_t a, b, c, d;
    if (x != end16) {
        __asm__ volatile("1:\n\t"
                         "ldr %[a], [%[x]], #4\n\t"
                         "ldr %[c], [%[x]], #4\n\t"
                         "sxtab16 %[b], %[o], %[a], ror #8\n\t"
                         "sxtab16 %[a], %[o], %[a]\n\t"
                         "sxtab16 %[d], %[o], %[c], ror #8\n\t"
                         "sxtab16 %[c], %[o], %[c]\n\t"
                         "strd %[a], %[b], [%[y]], #8\n\t"
                         "strd %[c], %[d], [%[y]], #8\n\t"
                         "ldr %[a], [%[x]], #4\n\t"
                         "ldr %[c], [%[x]], #4\n\t"
                         "sxtab16 %[b], %[o], %[a], ror #8\n\t"
                         "sxtab16 %[a], %[o], %[a]\n\t"
                         "sxtab16 %[d], %[o], %[c], ror #8\n\t"
                         "sxtab16 %[c], %[o], %[c]\n\t"
                         "strd %[a], %[b], [%[y]], #8\n\t"
                         "strd %[c], %[d], [%[y]], #8\n\t"
                         "cmp %[x], %[e]\n\t"
                         "bne 1b\n\t"
                         : [x] "+r"(x), [y] "+r"(col), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d)
                         : [o] "r"(off2), [e] "r"(end16)
                         : "cc", "memory");
    }
    if (kp & 8) {
        __asm__ volatile("ldr %[a], [%[x]], #4\n\t"
                         "ldr %[c], [%[x]], #4\n\t"
                         "sxtab16 %[b], %[o], %[a], ror #8\n\t"
                         "sxtab16 %[a], %[o], %[a]\n\t"
                         "sxtab16 %[d], %[o], %[c], ror #8\n\t"
                         "sxtab16 %[c], %[o], %[c]\n\t"
                         "strd %[a], %[b], [%[y]], #8\n\t"
                         "strd %[c], %[d], [%[y]], #8\n\t"
                         : [x] "+r"(x), [y] "+r"(col), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d)
                         : [o] "r"(off2)
                         : "memory");
    }
    if (x != end) { /* 4 bytes */
        const uint32_t v = mcu_load_u32(x);
        mcu_store_u32(col, mcu_sxtab16(off2, v));
        mcu_store_u32(col + 2, mcu_sxtab16_ror8(off2, v));
    }
#elif MCU_S8_DSP
    const uint32_t off2 = mcu_offset_pair(off);
    for (int32_t i = 0; i < kp; i += 4) {
        const uint32_t v = mcu_load_u32(x + i);
        mcu_store_u32(col + i, mcu_sxtab16(off2, v));
        mcu_store_u32(col + i + 2, mcu_sxtab16_ror8(off2, v));
    }
#else
    for (int32_t i = 0; i < kp; i += 4) {
        col[i] = (int16_t)(x[i] + off);
        col[i + 1] = (int16_t)(x[i + 2] + off);
        col[i + 2] = (int16_t)(x[i + 1] + off);
        col[i + 3] = (int16_t)(x[i + 3] + off);
    }
#endif
}

/* The column of a window whose rows are whole 4-byte groups (in_c % 4 == 0, dilation_w 1) at input
 * row ih0 and column iw0: each kernel row's in-input taps through mcu_column_s8, padded taps 0. */
static inline void mcu_window_rows_s16(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t ih0, int32_t iw0,
                                       int16_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t c = in.c;
    const int32_t kw = p->kernel_w;
    for (int32_t i = 0; i < p->kernel_h; ++i) {
        const int32_t ih = ih0 + i * p->dilation_h;
        int16_t *dst = col + i * kw * c;
        if (ih < 0 || ih >= in.h) {
            mcu_zero_s16(dst, kw * c);
            continue;
        }
        int32_t lo, hi;
        mcu_window_taps(iw0, kw, 1, in.w, &lo, &hi);
        mcu_zero_s16(dst, lo * c);
        mcu_column_s8(x_n + (ih * in.w + iw0 + lo) * c, (hi - lo) * c, p->input_offset, dst + lo * c);
        mcu_zero_s16(dst + hi * c, (kw - hi) * c);
    }
}

/* mcu_requantize_to_s8 for parameters a kernel has validated (multiplier in [0, 2^31 - 1], shift
 * in [-31, 30]); the same function, in fewer instructions:
 *  - the multiplier is never INT32_MIN, so the high multiply cannot saturate and its result
 *    (x * m + 2^30) >> 31 always fits int32;
 *  - offsets are in [-128, 127] and the clamp lies inside int8, so clamping y to [-256, 256]
 *    before adding the offset changes nothing after the final clamp (and needs no 64-bit add). */
static inline int8_t mcu_requantize_to_s8_fast(int32_t acc, int32_t multiplier, int32_t shift,
                                               int32_t output_offset, int32_t act_min, int32_t act_max)
{
    int32_t x = acc;
    if (shift > 0) {
        x = mcu_sat_shl32(x, shift);
    }
    int32_t y = (int32_t)mcu_asr64((int64_t)x * multiplier + ((int64_t)1 << 30), 31);
    if (shift < 0) {
        y = mcu_rounding_divide_by_pot(y, -shift);
    }
    y = y < -256 ? -256 : y > 256 ? 256 : y;
    return (int8_t)mcu_clamp_s32(y + output_offset, act_min, act_max);
}

#endif /* MCU_KERNELS_INTERNAL_SIMD_S8_H */
