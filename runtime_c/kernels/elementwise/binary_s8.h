/* The strided broadcast loop behind the int8 add/sub/mul (and maximum/minimum). Internal:
 * static inline only; each operator's file instantiates it with a constant op. */
#ifndef MCU_KERNELS_INTERNAL_BINARY_S8_H
#define MCU_KERNELS_INTERNAL_BINARY_S8_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "../common/check.h"
#include "mve_add_s8.h"
#include "../common/mve_s8.h"
#include "../common/requant.h"
#include "../common/rq_s8_dsp.h"

typedef enum {
    MCU_BINARY_S8_ADD,
    MCU_BINARY_S8_SUB,
    MCU_BINARY_S8_MUL,
    /* TFLite's MAXIMUM/MINIMUM with the add's rescaling: both operands are brought to the add's common
     * scale, the larger (smaller) is requantized to the output, so the operands and the output may each
     * have their own scale and zero-point */
    MCU_BINARY_S8_MAX,
    MCU_BINARY_S8_MIN,
    /* a / b: the quotient of the offset codes in Q16 (rounded half away from zero), requantized by the
     * output multiplier s_a / (s_b s_out 2^16); a zero divisor gives the ends */
    MCU_BINARY_S8_DIV
} mcu_binary_s8_op;

/* Fractional bits of the int8 division's quotient (|a + a_offset| <= 255, so the Q16 numerator fits). */
#define MCU_BINARY_S8_DIV_BITS 16

/* Largest left_shift for which (q + offset) * 2^left_shift fits int32 (|q + offset| <= 255). */
#define MCU_BINARY_S8_MAX_LEFT_SHIFT 23

static inline int8_t mcu_binary_s8_apply(mcu_binary_s8_op op, const mcu_binary_s8_params *p, int32_t a,
                                         int32_t b)
{
    int32_t acc;
    if (op == MCU_BINARY_S8_DIV) {
        const int32_t num = a + p->a_offset;
        const int32_t den = b + p->b_offset;
        if (den == 0) { /* +-inf saturates; 0/0 is the output's zero */
            const int32_t z = p->output_offset < p->act_min ? p->act_min
                              : p->output_offset > p->act_max ? p->act_max : p->output_offset;
            return (int8_t)(num > 0 ? p->act_max : num < 0 ? p->act_min : z);
        }
        const int32_t n = (num < 0 ? -num : num) * ((int32_t)1 << MCU_BINARY_S8_DIV_BITS);
        const int32_t d = den < 0 ? -den : den;
        const int32_t q = (n + d / 2) / d;
        acc = (num < 0) != (den < 0) ? -q : q;
    } else if (op == MCU_BINARY_S8_MUL) {
        acc = (a + p->a_offset) * (b + p->b_offset);
    } else {
        const int32_t scale = (int32_t)1 << p->left_shift;
        const int32_t a1 = mcu_requantize((a + p->a_offset) * scale, p->a_multiplier, p->a_shift);
        const int32_t b1 = mcu_requantize((b + p->b_offset) * scale, p->b_multiplier, p->b_shift);
        /* Saturating: never reached with TFLite's parameters (|a'|, |b'| < 2^28),
         * but the kernel accepts any multiplier. */
        if (op == MCU_BINARY_S8_MAX || op == MCU_BINARY_S8_MIN) {
            acc = (op == MCU_BINARY_S8_MAX) == (a1 >= b1) ? a1 : b1;
        } else {
            acc = op == MCU_BINARY_S8_ADD ? mcu_sat_s32((int64_t)a1 + b1) : mcu_sat_s32((int64_t)a1 - b1);
        }
    }
    return mcu_requantize_to_s8(acc, p->out_multiplier, p->out_shift, p->output_offset, p->act_min, p->act_max);
}

#if MCU_S8_DSP
/* Add and subtract of at least this many elements rescale each operand through a table of its 256
 * possible values (built with the same mcu_requantize as mcu_binary_s8_apply): two table loads and a
 * saturating QADD/QSUB per element instead of two requantizations. */
#define MCU_BINARY_S8_LUT_MIN 256

/* lut[v + 128] = requantize((v + offset) 2^left_shift, multiplier, shift), as mcu_binary_s8_apply.
 *
 * For shift <= 0 (R = -shift) without the general requantization per entry: with x = (v + offset)
 * 2^left_shift and P = x multiplier, rounding_doubling_high_mul is y = floor((P + 2^30) / 2^31) and
 * rounding_divide_by_pot(y, R) = floor((y + 2^(R-1) - [y < 0]) / 2^R) for R >= 1; the nested floors
 * merge into floor((P + 2^30 + 2^(R+30) - [x < 0] 2^31) / 2^(31+R)) ([y < 0] may be [x < 0]: they
 * differ only where y == 0, which both give; common/rq_s8_dsp.h derives the same for mcu_rq_ch).
 * P moves on by multiplier 2^left_shift per entry, so each entry is a 64-bit add and a shift of its
 * high word: |P| < 2^62 (|v + offset| <= 255, left_shift <= 23) and the sum stays inside int64. The
 * doubling multiply cannot saturate (|x| < 2^31). A left shift keeps the general loop. */
static inline void mcu_binary_s8_lut(int32_t *lut, int32_t offset, int32_t left_shift, int32_t multiplier,
                                     int32_t shift)
{
    const int32_t scale = (int32_t)1 << left_shift;
    if (shift > 0) {
        for (int32_t v = -128; v < 128; ++v) {
            lut[v + 128] = mcu_requantize((v + offset) * scale, multiplier, shift);
        }
        return;
    }
    const int32_t r = -shift;
    const int64_t step = (int64_t)multiplier * scale;
    if (r == 0) {
        int64_t s = (int64_t)(offset - 128) * step + ((int64_t)1 << 30);
        for (int32_t v = -128; v < 128; ++v, s += step) {
            lut[v + 128] = (int32_t)mcu_asr64(s, 31);
        }
        return;
    }
    /* the sum with the fixup of a negative x (v < -offset), which the loop drops where x turns 0 */
    int64_t s = (int64_t)(offset - 128) * step + ((int64_t)1 << 30) + ((int64_t)1 << (r + 30)) - ((int64_t)1 << 31);
    const int32_t zero = -offset; /* in [-128, 127] (mcu_input_offset_valid) */
    for (int32_t v = -128; v < 128; ++v, s += step) {
        if (v == zero) {
            s += (int64_t)1 << 31;
        }
        /* the high word of s is floor(s / 2^32): its bits, int64_t being two's complement */
        lut[v + 128] = mcu_asr32(mcu_u32_to_s32((uint32_t)((uint64_t)s >> 32)), r - 1);
    }
}

/* One row of an add or subtract through the tables (la, lb: the entries for value 0) and the output
 * requantization rq when `fast` (mcu_rq_ch: shift in [-24, -1]), else mcu_requantize_to_s8. */
static inline void mcu_binary_s8_row_lut(int sub, const mcu_binary_s8_params *p, const int32_t *la,
                                         const int32_t *lb, const mcu_rq_ch *rq, int fast, const int8_t *ar,
                                         int32_t sai, const int8_t *br, int32_t sbi, int8_t *out, int32_t inner)
{
    if (fast && !sub && sai == 1 && sbi == 1 && p->act_min == -128 && p->act_max == 127) {
        /* the common case (residual adds): contiguous operands, the clamp is SSAT's */
#if MCU_S8_DSP_NATIVE
        /* Assembly loops with the requantization's constants in registers: per element two LDRSB, two
         * table loads, QADD, mcu_rq_ch_apply as AND, ADDS and ADC (K[acc < 0] = K[0] - [acc < 0] 2^31
         * from the words of K[0], as in convolution/gemm_s8_dsp.h) then SMLAL, ASR and SSAT, and STRB.
         * Four elements a pass with immediate offsets (13 cycles an element in the timing model, the
         * pass's count and branch 4 more), element 0 last so that its post-indexed loads and store
         * move the three rows on; each element's operands are read before its output is written, so an
         * operand may be the output itself. The rest one at a time, a count up to 0 indexing the rows. */
        const uint32_t klo = (uint32_t)(uint64_t)rq->k[0];
        const uint32_t khi = (uint32_t)((uint64_t)rq->k[0] >> 32);
        uint32_t a, b, hi;
#define MCU_ADD_LUT_ELEMENT(ld_a, ld_b, st)                                                               \
    "ldrsb %[a], " ld_a "\n\t"                                                                           \
    "ldrsb %[b], " ld_b "\n\t"                                                                           \
    "ldr %[a], [%[la], %[a], lsl #2]\n\t"                                                                \
    "ldr %[b], [%[lb], %[b], lsl #2]\n\t"                                                                \
    "qadd %[a], %[a], %[b]\n\t"                                                                          \
    "and %[b], %[a], #0x80000000\n\t"                                                                    \
    "adds %[b], %[klo], %[b]\n\t"                                                                        \
    "adc %[hi], %[khi], %[a], asr #31\n\t"                                                               \
    "smlal %[b], %[hi], %[a], %[m]\n\t"                                                                  \
    "asr %[hi], %[hi], %[sh]\n\t"                                                                        \
    "ssat %[a], #8, %[hi]\n\t"                                                                           \
    "strb %[a], " st "\n\t"
        int32_t quads = inner / 4;
        if (quads > 0) {
            const int8_t *ap = ar, *bp = br;
            int8_t *op = out;
            __asm__ volatile("1:\n\t" MCU_ADD_LUT_ELEMENT("[%[ap], #1]", "[%[bp], #1]", "[%[op], #1]")
                                 MCU_ADD_LUT_ELEMENT("[%[ap], #2]", "[%[bp], #2]", "[%[op], #2]")
                                     MCU_ADD_LUT_ELEMENT("[%[ap], #3]", "[%[bp], #3]", "[%[op], #3]")
                                         MCU_ADD_LUT_ELEMENT("[%[ap]], #4", "[%[bp]], #4", "[%[op]], #4")
                             "subs %[n], %[n], #1\n\t"
                             "bne 1b\n\t"
                             : [n] "+r"(quads), [ap] "+r"(ap), [bp] "+r"(bp), [op] "+r"(op), [a] "=&r"(a),
                               [b] "=&r"(b), [hi] "=&r"(hi)
                             : [la] "r"(la), [lb] "r"(lb), [klo] "r"(klo), [khi] "r"(khi), [m] "r"(rq->multiplier),
                               [sh] "r"(rq->rshift)
                             : "cc", "memory");
        }
        const int32_t done = inner & ~3;
        if (done < inner) {
            int32_t i = done - inner;
            __asm__ volatile("1:\n\t" MCU_ADD_LUT_ELEMENT("[%[ap], %[i]]", "[%[bp], %[i]]", "[%[op], %[i]]")
                             "adds %[i], %[i], #1\n\t"
                             "bne 1b\n\t"
                             : [i] "+r"(i), [a] "=&r"(a), [b] "=&r"(b), [hi] "=&r"(hi)
                             : [ap] "r"(ar + inner), [bp] "r"(br + inner), [op] "r"(out + inner), [la] "r"(la),
                               [lb] "r"(lb), [klo] "r"(klo), [khi] "r"(khi), [m] "r"(rq->multiplier),
                               [sh] "r"(rq->rshift)
                             : "cc", "memory");
        }
#undef MCU_ADD_LUT_ELEMENT
        return;
#endif
        for (int32_t i = 0; i < inner; ++i) {
            out[i] = (int8_t)mcu_rq_ch_apply(rq, mcu_qadd(la[ar[i]], lb[br[i]]));
        }
        return;
    }
    for (int32_t i = 0; i < inner; ++i) {
        const int32_t a1 = la[ar[i * sai]];
        const int32_t b1 = lb[br[i * sbi]];
        const int32_t acc = sub ? mcu_qsub(a1, b1) : mcu_qadd(a1, b1); /* = mcu_sat_s32 of the sum */
        out[i] = fast ? (int8_t)mcu_clamp_s32(mcu_rq_ch_apply(rq, acc), p->act_min, p->act_max)
                      : mcu_requantize_to_s8(acc, p->out_multiplier, p->out_shift, p->output_offset, p->act_min,
                                             p->act_max);
    }
}

/* One row of a multiply with the output requantization rq (mcu_rq_ch: shift in [-24, -1]): the product
 * of the offset codes (|.| <= 255 * 255) in one MUL, then mcu_rq_ch_apply's SMLAL instead of
 * mcu_requantize_to_s8's 64-bit rounding multiply and divide. A per-channel operand (squeeze-excite's
 * x * gate with a (N, C, 1, 1) gate: rows of C channels, the gate's stride 0 outside them) comes here
 * with both inner strides 1, the common case of the contiguous loop. A function of its own: inlined
 * into mcu_binary_s8's odometer the loop kept its constants on the stack. */
static __attribute__((noinline)) void mcu_binary_s8_row_mul(const mcu_binary_s8_params *p, const mcu_rq_ch *rq,
                                                            const int8_t *ar, int32_t sai, const int8_t *br,
                                                            int32_t sbi, int8_t *out, int32_t inner)
{
    const int32_t ao = p->a_offset, bo = p->b_offset, lo = p->act_min, hi = p->act_max;
#if MCU_S8_DSP_NATIVE
    if (sai == 1 && sbi == 1 && lo == -128 && hi == 127 && inner > 0) {
        /* the clamp is SSAT's: per element two LDRSB, the offsets, MUL, then mcu_rq_ch_apply as in
         * mcu_binary_s8_row_lut's loop (K[acc < 0] from K[0]'s words by AND, ADDS, ADC; SMLAL, ASR,
         * SSAT), STRB and a count up to 0 that indexes all three rows */
        const uint32_t klo = (uint32_t)(uint64_t)rq->k[0];
        const uint32_t khi = (uint32_t)((uint64_t)rq->k[0] >> 32);
        int32_t i = -inner;
        uint32_t a, b, h;
        __asm__ volatile("1:\n\t"
                         "ldrsb %[a], [%[ap], %[i]]\n\t"
                         "ldrsb %[b], [%[bp], %[i]]\n\t"
                         "add %[a], %[a], %[ao]\n\t"
                         "add %[b], %[b], %[bo]\n\t"
                         "mul %[a], %[a], %[b]\n\t"
                         "and %[b], %[a], #0x80000000\n\t"
                         "adds %[b], %[klo], %[b]\n\t"
                         "adc %[h], %[khi], %[a], asr #31\n\t"
                         "smlal %[b], %[h], %[a], %[m]\n\t"
                         "asr %[h], %[h], %[sh]\n\t"
                         "ssat %[a], #8, %[h]\n\t"
                         "strb %[a], [%[op], %[i]]\n\t"
                         "adds %[i], %[i], #1\n\t"
                         "bne 1b\n\t"
                         : [i] "+r"(i), [a] "=&r"(a), [b] "=&r"(b), [h] "=&r"(h)
                         : [ap] "r"(ar + inner), [bp] "r"(br + inner), [op] "r"(out + inner), [ao] "r"(ao),
                           [bo] "r"(bo), [klo] "r"(klo), [khi] "r"(khi), [m] "r"(rq->multiplier), [sh] "r"(rq->rshift)
                         : "cc", "memory");
        return;
    }
#endif
    if (sai == 1 && sbi == 1) {
        for (int32_t i = 0; i < inner; ++i) {
            out[i] = (int8_t)mcu_clamp_s32(mcu_rq_ch_apply(rq, (ar[i] + ao) * (br[i] + bo)), lo, hi);
        }
        return;
    }
    for (int32_t i = 0; i < inner; ++i) {
        out[i] = (int8_t)mcu_clamp_s32(mcu_rq_ch_apply(rq, (ar[i * sai] + ao) * (br[i * sbi] + bo)), lo, hi);
    }
}
#endif

#if MCU_S8_MVE
/* A multiply by a per-channel operand (squeeze-excite's x * gate, the gate (N, C, 1, 1)) on Helium
 * cores: eight channels at a time over every pixel, their offset gate codes G = g + g_offset in
 * 16-bit lanes once, then per pixel the offset inputs (|x + x_offset| <= 255) in 16-bit lanes,
 * VMULLB/VMULLT to the exact products in two 32-bit vectors (even and odd channels), the lanes'
 * requantization of mcu_mve_binary_lanes (mcu_mve_requantize_1 without its left shift, which is 0 for
 * the shifts taken here), and VMOVNB/VMOVNT back to channel order for one byte store. */
static inline int mcu_binary_s8_gate_applies(const mcu_binary_s8_params *p)
{
    return p->out_shift <= 0;
}

static inline int32x4_t mcu_binary_s8_gate_rq(int32x4_t acc, const mcu_binary_s8_params *p, int32_t fix)
{
    int32x4_t y = vqrdmulhq_n_s32(acc, p->out_multiplier);
    y = vmlaq_n_s32(y, vshrq_n_s32(y, 31), fix);
    y = vqaddq_n_s32(vrshlq_n_s32(y, p->out_shift), p->output_offset);
    return vminq_s32(vmaxq_s32(y, vdupq_n_s32(p->act_min)), vdupq_n_s32(p->act_max));
}

static __attribute__((noinline)) void mcu_binary_s8_mul_gate(const mcu_binary_s8_params *p, const int8_t *x,
                                                             int32_t xo, const int8_t *gate, int32_t go, int8_t *out,
                                                             int32_t pixels, int32_t ch)
{
    const int32_t fix = p->out_shift < 0 ? 1 : 0;
    for (int32_t c = 0; c < ch; c += 8) {
        const mve_pred16_t pr = vctp16q((uint32_t)(ch - c));
        const int16x8_t g = vaddq_n_s16(vldrbq_z_s16(gate + c, pr), (int16_t)go);
        const int8_t *xr = x + c;
        int8_t *yr = out + c;
        for (int32_t px = 0; px < pixels; ++px, xr += ch, yr += ch) {
            const int16x8_t v = vaddq_n_s16(vldrbq_z_s16(xr, pr), (int16_t)xo);
            const int32x4_t even = mcu_binary_s8_gate_rq(vmullbq_int_s16(v, g), p, fix);
            const int32x4_t odd = mcu_binary_s8_gate_rq(vmulltq_int_s16(v, g), p, fix);
            vstrbq_p_s16(yr, vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), even), odd), pr);
        }
    }
}
#endif

#if !MCU_S8_DSP && !MCU_S8_MVE
/* A multiply by a per-channel operand (squeeze-excite's x * gate, the gate (N, C, 1, 1)) on cores
 * without the DSP extension, whose 64-bit multiply is a library call (ARMv6-M) or a long sequence.
 * Within a channel the gate's offset code G = g + g_offset is fixed, so acc * multiplier =
 * (x + x_offset) * F with F = G * multiplier (|F| < 2^39) computed once per channel. Split
 * F = fh 2^16 + fl (fl in [0, 2^16)): both (x + x_offset) fh and (x + x_offset) fl fit int32
 * (|x + x_offset| <= 255, |fh| < 2^23), so the exact 64-bit product is two 32-bit multiplies, a
 * shift and an add. The requantization is then mcu_rq_ch's (common/rq_s8_dsp.h): for shift in
 * [-24, -1], with R = -shift, z + output_offset = floor((P + K[P < 0]) / 2^(31 + R)),
 * K[0] = 2^30 + 2^(R+30) + output_offset 2^(31+R), K[1] = K[0] - 2^31 (P < 0 exactly when acc < 0,
 * the multiplier being positive; with a zero multiplier both K give output_offset), then the clamp
 * (which also saturates to int8). */
#define MCU_BINARY_S8_GATE_CHUNK 32

/* 1 when the output shift lets the per-channel path requantize (shift in [-24, -1]). */
static inline int mcu_binary_s8_gate_applies(const mcu_binary_s8_params *p)
{
    return p->out_shift <= -1 && p->out_shift >= -24;
}

/* out[px, c] = x[px, c] * gate[c] for `pixels` rows of `ch` channels, contiguous; xo and go the
 * operands' offsets. */
static __attribute__((noinline)) void mcu_binary_s8_mul_gate(const mcu_binary_s8_params *p, const int8_t *x,
                                                             int32_t xo, const int8_t *gate, int32_t go, int8_t *out,
                                                             int32_t pixels, int32_t ch)
{
    const int32_t r = -p->out_shift, lo = p->act_min, hi = p->act_max;
    const int64_t k0 = ((int64_t)1 << 30) + ((int64_t)1 << (r + 30)) + (int64_t)p->output_offset * ((int64_t)1 << (r + 31));
    const int64_t k1 = k0 - ((int64_t)1 << 31);
    int32_t fh[MCU_BINARY_S8_GATE_CHUNK], fl[MCU_BINARY_S8_GATE_CHUNK];
    for (int32_t c0 = 0; c0 < ch; c0 += MCU_BINARY_S8_GATE_CHUNK) {
        const int32_t n = ch - c0 < MCU_BINARY_S8_GATE_CHUNK ? ch - c0 : MCU_BINARY_S8_GATE_CHUNK;
        for (int32_t k = 0; k < n; ++k) {
            const int64_t f = (int64_t)(gate[c0 + k] + go) * p->out_multiplier;
            fl[k] = (int32_t)(f & 0xFFFF);
            fh[k] = (int32_t)mcu_asr64(f - fl[k], 16);
        }
        for (int32_t px = 0; px < pixels; ++px) {
            const int8_t *xr = x + px * ch + c0;
            int8_t *yr = out + px * ch + c0;
            for (int32_t k = 0; k < n; ++k) {
                const int32_t xv = xr[k] + xo;
                const int64_t prod = (int64_t)(xv * fh[k]) * 65536 + xv * fl[k];
                const int64_t s = prod + (prod < 0 ? k1 : k0);
                const int32_t z = mcu_asr32((int32_t)mcu_asr64(s, 32), r - 1);
                yr[k] = (int8_t)mcu_clamp_s32(z, lo, hi);
            }
        }
    }
}
#endif

/* Elements spanned by an operand with these strides, or -1 if it does not
 * fit int32_t (negative strides are rejected by the caller first). */
static inline int64_t mcu_binary_s8_extent(const mcu_binary_s8_params *p, const int32_t *strides)
{
    int64_t last = 0;
    for (int32_t i = 0; i < p->rank; ++i) {
        last += (int64_t)(p->out_shape[i] - 1) * strides[i];
    }
    return last + 1 > INT32_MAX ? -1 : last + 1;
}

static inline mcu_status mcu_binary_s8(mcu_binary_s8_op op, const mcu_binary_s8_params *p, const int8_t *a,
                                       const int8_t *b, int8_t *out)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && out != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->rank >= 1 && p->rank <= MCU_MAX_DIMS, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_input_offset_valid(p->a_offset) && mcu_input_offset_valid(p->b_offset) &&
                    mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max) &&
                    mcu_quant_valid(p->out_multiplier, p->out_shift),
                MCU_ERR_INVALID_ARG);
    if (op != MCU_BINARY_S8_MUL && op != MCU_BINARY_S8_DIV) { /* add, sub, maximum, minimum: the rescaling */
        MCU_REQUIRE(mcu_quant_valid(p->a_multiplier, p->a_shift) && mcu_quant_valid(p->b_multiplier, p->b_shift) &&
                        p->left_shift >= 0 && p->left_shift <= MCU_BINARY_S8_MAX_LEFT_SHIFT,
                    MCU_ERR_INVALID_ARG);
    }
    const int32_t total = mcu_checked_count(p->out_shape, p->rank, 1);
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    for (int32_t i = 0; i < p->rank; ++i) {
        MCU_REQUIRE(p->a_strides[i] >= 0 && p->b_strides[i] >= 0, MCU_ERR_SHAPE);
    }
    const int64_t a_bytes = mcu_binary_s8_extent(p, p->a_strides);
    const int64_t b_bytes = mcu_binary_s8_extent(p, p->b_strides);
    MCU_REQUIRE(a_bytes > 0 && b_bytes > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_strided_alias_ok(p->rank, p->out_shape, p->a_strides, a, (size_t)a_bytes, out, (size_t)total) &&
                    mcu_strided_alias_ok(p->rank, p->out_shape, p->b_strides, b, (size_t)b_bytes, out, (size_t)total),
                MCU_ERR_INVALID_ARG);

    /* Drop size-1 dims and merge neighbours that both operands traverse
     * contiguously, so the inner row is long and the odometer runs rarely. */
    int32_t shape[MCU_MAX_DIMS];
    int32_t sa[MCU_MAX_DIMS];
    int32_t sb[MCU_MAX_DIMS];
    int32_t r = 0;
    for (int32_t i = 0; i < p->rank; ++i) {
        const int32_t n = p->out_shape[i];
        if (n == 1) {
            continue;
        }
        if (r > 0 && (int64_t)sa[r - 1] == (int64_t)p->a_strides[i] * n &&
            (int64_t)sb[r - 1] == (int64_t)p->b_strides[i] * n) {
            shape[r - 1] *= n;
            sa[r - 1] = p->a_strides[i];
            sb[r - 1] = p->b_strides[i];
        } else {
            shape[r] = n;
            sa[r] = p->a_strides[i];
            sb[r] = p->b_strides[i];
            ++r;
        }
    }
    if (r == 0) {
        shape[0] = 1;
        sa[0] = 0;
        sb[0] = 0;
        r = 1;
    }

    const int32_t inner = shape[r - 1];
    const int32_t sai = sa[r - 1];
    const int32_t sbi = sb[r - 1];
    const int32_t rows = total / inner;
    int32_t idx[MCU_MAX_DIMS] = {0};
#if MCU_S8_MVE || !MCU_S8_DSP
    /* rows of channels times one row of a per-channel operand (stride 0 over the rows) */
    if (op == MCU_BINARY_S8_MUL && r >= 2 && sai == 1 && sbi == 1 && mcu_binary_s8_gate_applies(p) &&
        ((sa[r - 2] == inner && sb[r - 2] == 0) || (sa[r - 2] == 0 && sb[r - 2] == inner))) {
        const int gate_b = sb[r - 2] == 0;
        const int32_t pixels = shape[r - 2];
        int64_t xoff = 0, goff = 0;
        for (int32_t row = 0; row < rows; row += pixels) {
            if (gate_b) {
                mcu_binary_s8_mul_gate(p, a + xoff, p->a_offset, b + goff, p->b_offset, out, pixels, inner);
            } else {
                mcu_binary_s8_mul_gate(p, b + xoff, p->b_offset, a + goff, p->a_offset, out, pixels, inner);
            }
            out += pixels * inner;
            for (int32_t d = r - 3; d >= 0; --d) { /* the odometer below over the dims outside the rows */
                xoff += gate_b ? sa[d] : sb[d];
                goff += gate_b ? sb[d] : sa[d];
                if (++idx[d] < shape[d]) {
                    break;
                }
                xoff -= (int64_t)(gate_b ? sa[d] : sb[d]) * shape[d];
                goff -= (int64_t)(gate_b ? sb[d] : sa[d]) * shape[d];
                idx[d] = 0;
            }
        }
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP
    int32_t lut[2][256];
    mcu_rq_ch rq = {{0, 0}, 0, 0}; /* set below when used (initialized for the compilers' flow analysis) */
    int fast = 0;
    /* not on Helium cores: their rows take mcu_mve_binary_row_s8 */
    const int use_lut = !MCU_S8_MVE && (op == MCU_BINARY_S8_ADD || op == MCU_BINARY_S8_SUB) &&
                        total >= MCU_BINARY_S8_LUT_MIN;
    if (use_lut) {
        mcu_binary_s8_lut(lut[0], p->a_offset, p->left_shift, p->a_multiplier, p->a_shift);
        mcu_binary_s8_lut(lut[1], p->b_offset, p->left_shift, p->b_multiplier, p->b_shift);
        fast = mcu_rq_ch_init(&rq, p->out_multiplier, p->out_shift, p->output_offset);
    }
    /* not on Helium cores either (mcu_mve_binary_row_s8); the output shift decides */
    const int use_mul = !MCU_S8_MVE && op == MCU_BINARY_S8_MUL &&
                        mcu_rq_ch_init(&rq, p->out_multiplier, p->out_shift, p->output_offset);
#endif
#if MCU_S8_MVE && MCU_S8_DSP
    /* Helium add and subtract of at least MCU_BINARY_S8_LUT_MIN elements: contiguous rows through the
     * operands' tables 16 elements per step (elementwise/mve_add_s8.h), the tables in `lut` */
    mcu_mve_add_out mo;
    const int mve_lut = mcu_mve_add_out_make(p, &mo) && (op == MCU_BINARY_S8_ADD || op == MCU_BINARY_S8_SUB) &&
                        total >= MCU_BINARY_S8_LUT_MIN;
    if (mve_lut) {
        mcu_mve_add_lut(lut[0], p->a_offset, p->left_shift, p->a_multiplier, p->a_shift, 0);
        mcu_mve_add_lut(lut[1], p->b_offset, p->left_shift, p->b_multiplier, p->b_shift, op == MCU_BINARY_S8_SUB);
    }
#endif
    /* 64-bit so that the odometer's transient offsets cannot overflow. */
    int64_t a_off = 0;
    int64_t b_off = 0;
    for (int32_t row = 0; row < rows; ++row) {
        const int8_t *ar = a + a_off;
        const int8_t *br = b + b_off;
#if MCU_S8_MVE
#if MCU_S8_DSP
        if (mve_lut && sai == 1 && sbi == 1 && inner >= 16) {
            const int32_t done = inner & ~15;
            mcu_mve_add_lut_rows(lut[0], lut[1], &mo, ar, br, out, inner / 16);
            if (p->act_min != -128 || p->act_max != 127) {
                mcu_mve_clamp_s8(out, done, p->act_min, p->act_max);
            }
            if (done < inner) {
                mcu_mve_binary_row_s8(op == MCU_BINARY_S8_ADD ? 0 : 1, p, ar + done, 1, br + done, 1, out + done,
                                      inner - done);
            }
        } else
#endif
        if (op <= MCU_BINARY_S8_MUL && (sai == 0 || sai == 1) && (sbi == 0 || sbi == 1)) {
            mcu_mve_binary_row_s8(op == MCU_BINARY_S8_ADD ? 0 : op == MCU_BINARY_S8_SUB ? 1 : 2, p, ar, sai, br, sbi,
                                  out, inner);
        } else
#endif
#if MCU_S8_DSP
        if (use_lut) {
            mcu_binary_s8_row_lut(op == MCU_BINARY_S8_SUB, p, lut[0] + 128, lut[1] + 128, &rq, fast, ar, sai, br, sbi,
                                  out, inner);
        } else if (use_mul) {
            mcu_binary_s8_row_mul(p, &rq, ar, sai, br, sbi, out, inner);
        } else
#endif
        for (int32_t i = 0; i < inner; ++i) {
            out[i] = mcu_binary_s8_apply(op, p, ar[i * sai], br[i * sbi]);
        }
        out += inner;
        for (int32_t d = r - 2; d >= 0; --d) {
            a_off += sa[d];
            b_off += sb[d];
            if (++idx[d] < shape[d]) {
                break;
            }
            a_off -= (int64_t)sa[d] * shape[d];
            b_off -= (int64_t)sb[d] * shape[d];
            idx[d] = 0;
        }
    }
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_BINARY_S8_H */
