/* Helium (MVE) blocks of the 4-bit-weight kernels (weights packed two a byte, element 2i in the low nibble
 * of byte i, as common/s4.h reads them): the weights widened to int8 16 bytes at a time, and one input row
 * against every output channel's packed row without widening it (mcu_mve_s4_matrix_row). Internal: static
 * inline only; empty where MCU_S8_MVE is 0.
 *
 * A byte of weights gives a vector of low nibbles (shifted left then right by 4, arithmetic: sign-extended)
 * and one of high nibbles (shifted right by 4), and those pair with the even and the odd inputs. So the input
 * row is split once into even and odd elements (mcu_mve_s4_split: per 32 values, 16 even then 16 odd), and
 * every byte of a row of weights is loaded once for its two inputs. A row of an odd length starts mid-byte
 * every other channel: such a row's first element takes the high nibble of the byte it starts in (a scalar
 * product), and its others pair with a second split copy of the input starting at element 1. The input
 * offset is accumulated with the products: sum((x + off) w) = sum(x w) + sum(off (w_lo + w_hi)) over the
 * bytes, all in VMLADAVA (int8 lanes, sums modulo 2^32 as the plain kernels'). An offset of 128 does not fit
 * int8: the copies then hold ~x = -x - 1 and the offset -127, whose sum is -sum((x + 128) w), negated. */
#ifndef MCU_KERNELS_INTERNAL_MVE_S4_H
#define MCU_KERNELS_INTERNAL_MVE_S4_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "mve_s8.h"
#include "requant.h"
#include "s4.h"

#if MCU_S8_MVE

#include <arm_mve.h>

/* Longest input row (elements) the matrix row splits on the stack: two copies of at most this many bytes. */
#define MCU_S4_MVE_ROW_MAX 1024

/* out[k] = element k of the packed array, k < count: 32 elements per step (VST2 interleaves the low and
 * high nibbles back into memory order), the last count % 32 one at a time. */
static inline void mcu_mve_s4_widen(const int8_t *packed, int32_t count, int8_t *out)
{
    int32_t k = 0;
    for (; k + 32 <= count; k += 32) {
        const int8x16_t b = vldrbq_s8(packed + (k >> 1));
        int8x16x2_t v;
        v.val[0] = vshrq_n_s8(vshlq_n_s8(b, 4), 4);
        v.val[1] = vshrq_n_s8(b, 4);
        vst2q_s8(out + k, v);
    }
    for (; k < count; ++k) {
        out[k] = (int8_t)mcu_s4_at(packed, k);
    }
}

/* x[0 .. n) split for the nibbles: per 32 values, the 16 even ones then the 16 odd ones (complemented when
 * `invert`), into buf (n rounded up to 32 bytes; the bytes past x's are 0 or -1 and never accumulate). */
static inline void mcu_mve_s4_split(const int8_t *x, int32_t n, int invert, int8_t *buf)
{
    _Alignas(16) int8_t last[32];
    for (int32_t i = 0; i < n; i += 32) {
        const int8_t *src = x + i;
        if (n - i < 32) { /* nothing past x[n - 1] is read */
            mcu_mve_fill_s8(last, 0, 32);
            mcu_mve_copy_s8(last, src, n - i);
            src = last;
        }
        int8x16x2_t v = vld2q_s8(src);
        if (invert) {
            v.val[0] = vmvnq_s8(v.val[0]);
            v.val[1] = vmvnq_s8(v.val[1]);
        }
        vstrbq_s8(buf + i, v.val[0]);
        vstrbq_s8(buf + i + 16, v.val[1]);
    }
}

/* a0 += sum over bytes j < nbytes of w0[j] against split values (xs: mcu_mve_s4_split) plus off, a1 the same
 * for w1: per 16 bytes, the two halves of 32 split values, each row's low and high nibbles and their sum
 * against the offset. A tail-predicated loop (WLSTP skips nbytes == 0; the last step loads and accumulates
 * only the remaining lanes, so nothing past w0[nbytes - 1] or w1[nbytes - 1] is read), in assembly for the
 * reasons mve_s8.h gives. */
static inline void mcu_mve_s4_dot2(const int8_t *xs, const int8_t *w0, const int8_t *w1, int32_t nbytes,
                                   int8x16_t off, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1;
    __asm__ volatile("   wlstp.8 lr, %[nb], 2f\n"
                     "1: vldrb.8 q1, [%[x], #16]\n"
                     "   vldrb.8 q0, [%[x]], #32\n"
                     "   vldrb.8 q2, [%[w0]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a0], q1, q2\n"
                     "   vmladava.s8 %[a0], q0, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[a0], %q[off], q3\n"
                     "   vldrb.8 q2, [%[w1]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a1], q1, q2\n"
                     "   vmladava.s8 %[a1], q0, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[a1], %q[off], q3\n"
                     "   letp lr, 1b\n"
                     "2:\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [x] "+r"(xs), [w0] "+r"(w0), [w1] "+r"(w1)
                     : [nb] "r"(nbytes), [off] "w"(off)
                     : "q0", "q1", "q2", "q3", "lr", "memory");
    *s0 = a0;
    *s1 = a1;
}

/* The sums of four rows that start on a byte (w0 .. w3; a row may repeat) against the split values of a row
 * starting on a byte (xs), nbytes bytes each (> 0), plus the offset: as mcu_mve_s4_dot2, each pair of split
 * vectors loaded once for the four rows. */
static inline int32x4_t mcu_mve_s4_dot4(const int8_t *xs, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                                        const int8_t *w3, int32_t nbytes, int8x16_t off)
{
    const int8_t *w = w0;
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    __asm__ volatile("   dlstp.8 lr, %[nb]\n"
                     "1: vldrb.8 q1, [%[x], #16]\n"
                     "   vldrb.8 q0, [%[x]], #32\n"
                     "   vldrb.8 q2, [%[w0]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a0], q1, q2\n"
                     "   vmladava.s8 %[a0], q0, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[a0], %q[off], q3\n"
                     "   vldrb.8 q2, [%[w1]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a1], q1, q2\n"
                     "   vmladava.s8 %[a1], q0, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[a1], %q[off], q3\n"
                     "   vldrb.8 q2, [%[w2]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a2], q1, q2\n"
                     "   vmladava.s8 %[a2], q0, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[a2], %q[off], q3\n"
                     "   vldrb.8 q2, [%[w3]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a3], q1, q2\n"
                     "   vmladava.s8 %[a3], q0, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[a3], %q[off], q3\n"
                     "   letp lr, 1b\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3), [x] "+r"(xs), [w0] "+r"(w),
                       [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)
                     : [nb] "r"(nbytes), [off] "w"(off)
                     : "q0", "q1", "q2", "q3", "lr", "memory");
    int32x4_t v = vdupq_n_s32(0);
    v = vsetq_lane_s32(a0, v, 0);
    v = vsetq_lane_s32(a1, v, 1);
    v = vsetq_lane_s32(a2, v, 2);
    return vsetq_lane_s32(a3, v, 3);
}

/* Two rows that start on a byte (w0, w1) against two split rows (xa, xb: two output pixels' columns), nbytes
 * bytes each (> 0): each weight byte loaded once for both pixels and the offset's products, the same for both,
 * taken once per row. acc: pixel a's two rows, then pixel b's. */
static inline void mcu_mve_s4_dot2x2(const int8_t *xa, const int8_t *xb, const int8_t *w0, const int8_t *w1,
                                     int32_t nbytes, int8x16_t off, int32_t acc[4])
{
    int32_t a0 = 0, a1 = 0, b0 = 0, b1 = 0, o0 = 0, o1 = 0;
    __asm__ volatile("   dlstp.8 lr, %[nb]\n"
                     "1: vldrb.8 q0, [%[xa]], #16\n"
                     "   vldrb.8 q2, [%[w0]], #16\n"
                     "   vshl.i8 q3, q2, #4\n"
                     "   vshr.s8 q2, q2, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vmladava.s8 %[a0], q0, q3\n"
                     "   vldrb.8 q1, [%[xb]], #16\n"
                     "   vmladava.s8 %[b0], q1, q3\n"
                     "   vadd.i8 q3, q3, q2\n"
                     "   vmladava.s8 %[o0], %q[off], q3\n"
                     "   vldrb.8 q3, [%[w1]], #16\n"
                     "   vshl.i8 q4, q3, #4\n"
                     "   vshr.s8 q3, q3, #4\n"
                     "   vshr.s8 q4, q4, #4\n"
                     "   vmladava.s8 %[a1], q0, q4\n"
                     "   vmladava.s8 %[b1], q1, q4\n"
                     "   vldrb.8 q0, [%[xa]], #16\n"
                     "   vldrb.8 q1, [%[xb]], #16\n"
                     "   vmladava.s8 %[a0], q0, q2\n"
                     "   vmladava.s8 %[b0], q1, q2\n"
                     "   vmladava.s8 %[a1], q0, q3\n"
                     "   vmladava.s8 %[b1], q1, q3\n"
                     "   vadd.i8 q4, q4, q3\n"
                     "   vmladava.s8 %[o1], %q[off], q4\n"
                     "   letp lr, 1b\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [b0] "+Te"(b0), [b1] "+Te"(b1), [o0] "+Te"(o0), [o1] "+Te"(o1),
                       [xa] "+r"(xa), [xb] "+r"(xb), [w0] "+r"(w0), [w1] "+r"(w1)
                     : [nb] "r"(nbytes), [off] "w"(off)
                     : "q0", "q1", "q2", "q3", "q4", "lr", "memory");
    acc[0] = mcu_u32_to_s32((uint32_t)a0 + (uint32_t)o0);
    acc[1] = mcu_u32_to_s32((uint32_t)a1 + (uint32_t)o1);
    acc[2] = mcu_u32_to_s32((uint32_t)b0 + (uint32_t)o0);
    acc[3] = mcu_u32_to_s32((uint32_t)b1 + (uint32_t)o1);
}

/* One input row of n values (0 < n <= MCU_S4_MVE_ROW_MAX) made ready for mcu_mve_s4_matrix_row. */
typedef struct {
    const int8_t *x;   /* the row */
    int32_t n;
    int32_t offset;    /* input_offset */
    int neg;           /* offset 128: the copies hold ~x and the vector sums come out negated */
    int8x16_t off;     /* the offset the vector sums add: input_offset, or -127 when neg */
    const int8_t *from0; /* x split from element 0 */
    const int8_t *from1; /* x + 1 split (n - 1 values), for the rows that start mid-byte (n odd) */
} mcu_mve_s4_input;

/* buf: 2 * MCU_S4_MVE_ROW_MAX bytes (16-byte aligned); MCU_S4_MVE_ROW_MAX suffice for an even n (from1, one past
 * them, is then never read). */
static inline mcu_mve_s4_input mcu_mve_s4_input_make(const int8_t *x, int32_t n, int32_t input_offset, int8_t *buf)
{
    mcu_mve_s4_input in;
    in.x = x;
    in.n = n;
    in.offset = input_offset;
    in.neg = input_offset > 127;
    in.off = vdupq_n_s8((int8_t)(in.neg ? -127 : input_offset));
    mcu_mve_s4_split(x, n, in.neg, buf);
    in.from0 = buf;
    in.from1 = buf + MCU_S4_MVE_ROW_MAX;
    if (n & 1) {
        mcu_mve_s4_split(x + 1, n - 1, in.neg, buf + MCU_S4_MVE_ROW_MAX);
    }
    return in;
}

/* Where row r's whole bytes start, which split copy they pair with, and the product of its one element
 * outside them (its first when the row starts mid-byte, its last when it starts on a byte and n is odd). */
typedef struct {
    const int8_t *w;
    const int8_t *xs;
    uint32_t lone;
} mcu_mve_s4_row;

static inline mcu_mve_s4_row mcu_mve_s4_row_at(const mcu_mve_s4_input *in, const int8_t *weight, int32_t r)
{
    const int64_t start = (int64_t)r * in->n;
    const uint8_t *b = (const uint8_t *)weight + (start >> 1);
    mcu_mve_s4_row row;
    if (start & 1) {
        row.lone = (uint32_t)((in->x[0] + in->offset) * mcu_s4_high(*b));
        row.w = (const int8_t *)b + 1;
        row.xs = in->from1;
    } else {
        row.lone = (in->n & 1) ? (uint32_t)((in->x[in->n - 1] + in->offset) * mcu_s4_low(b[in->n >> 1])) : 0u;
        row.w = (const int8_t *)b;
        row.xs = in->from0;
    }
    return row;
}

/* Rows r0 and r1 (the same split copy: r0 == r1, or n even, or r1 - r0 even): their sums into acc[0], acc[1]
 * from the biases (NULL: 0), modulo 2^32. */
static inline void mcu_mve_s4_rows2(const mcu_mve_s4_input *in, const int8_t *weight, const int32_t *bias, int32_t r0,
                                    int32_t r1, int32_t acc[2])
{
    const mcu_mve_s4_row a = mcu_mve_s4_row_at(in, weight, r0);
    const mcu_mve_s4_row b = mcu_mve_s4_row_at(in, weight, r1);
    int32_t s0 = 0, s1 = 0;
    mcu_mve_s4_dot2(a.xs, a.w, b.w, in->n >> 1, in->off, &s0, &s1);
    const uint32_t v0 = in->neg ? 0u - (uint32_t)s0 : (uint32_t)s0;
    const uint32_t v1 = in->neg ? 0u - (uint32_t)s1 : (uint32_t)s1;
    acc[0] = mcu_u32_to_s32((bias != NULL ? (uint32_t)bias[r0] : 0u) + v0 + a.lone);
    acc[1] = mcu_u32_to_s32((bias != NULL ? (uint32_t)bias[r1] : 0u) + v1 + b.lone);
}

/* y[oc] for every output channel oc < out_c: the input row against packed weight row oc (element oc * n on),
 * plus bias[oc] (bias may be NULL), requantized with q's channel oc, four channels per requantization. Rows of
 * an even length all start on a byte: four a loop (mcu_mve_s4_dot4), a last group of fewer repeating its last
 * row. Odd lengths: rows (oc, oc + 2) and (oc + 1, oc + 3), which start alike (both on a byte or both
 * mid-byte), the last out_c % 4 one at a time. Writes only y[0 .. out_c). */
static inline void mcu_mve_s4_matrix_row(const mcu_mve_s4_input *in, int32_t out_c, const int8_t *weight,
                                         const int32_t *bias, const mcu_per_channel_quant *q, int32_t output_offset,
                                         int32_t act_min, int32_t act_max, int8_t *y)
{
    _Alignas(16) int32_t acc[4];
    int32_t oc = 0;
    if (in->n % 2 == 0) { /* every row on a byte: four rows a loop (a last group of fewer repeats its last) */
        const int32_t stride = in->n / 2;
        const int32x4_t zero = vdupq_n_s32(0);
        for (; oc < out_c; oc += 4) {
            const int32_t rest = out_c - oc;
            const int8_t *w0 = weight + (int64_t)oc * stride;
            const int8_t *w1 = rest > 1 ? w0 + stride : w0;
            const int8_t *w2 = rest > 2 ? w1 + stride : w1;
            const int8_t *w3 = rest > 3 ? w2 + stride : w2;
            int32x4_t a = mcu_mve_s4_dot4(in->from0, w0, w1, w2, w3, stride, in->off);
            if (in->neg) {
                a = vsubq_s32(zero, a);
            }
            const mve_pred16_t p = vctp32q((uint32_t)(rest < 4 ? rest : 4));
            if (bias != NULL) {
                a = vaddq_s32(a, vldrwq_z_s32(bias + oc, p));
            }
            if (rest >= 4) {
                mcu_mve_store4(a, q, oc, output_offset, act_min, act_max, y);
            } else {
                mcu_mve_store_tail(a, q, oc, rest, output_offset, act_min, act_max, y);
            }
        }
        return;
    }
    for (; oc + 4 <= out_c; oc += 4) {
        int32_t even[2], odd[2];
        mcu_mve_s4_rows2(in, weight, bias, oc, oc + 2, even);
        mcu_mve_s4_rows2(in, weight, bias, oc + 1, oc + 3, odd);
        acc[0] = even[0];
        acc[1] = odd[0];
        acc[2] = even[1];
        acc[3] = odd[1];
        mcu_mve_store4(vldrwq_s32(acc), q, oc, output_offset, act_min, act_max, y);
    }
    if (oc < out_c) {
        const int32_t rest = out_c - oc;
        for (int32_t k = 0; k < rest; ++k) {
            int32_t two[2];
            mcu_mve_s4_rows2(in, weight, bias, oc + k, oc + k, two);
            acc[k] = two[0];
        }
        mcu_mve_store_tail(vldrwq_s32(acc), q, oc, rest, output_offset, act_min, act_max, y);
    }
}

/* Two input rows of the same even length (a and b, made by mcu_mve_s4_input_make with one input offset) against
 * every packed weight row, as mcu_mve_s4_matrix_row for each (ya, yb): two rows a loop for both (the rows of an
 * even length start on a byte), so that each weight byte is read once for both. */
static inline void mcu_mve_s4_matrix_rows2(const mcu_mve_s4_input *a, const mcu_mve_s4_input *b, int32_t out_c,
                                           const int8_t *weight, const int32_t *bias, const mcu_per_channel_quant *q,
                                           int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *ya,
                                           int8_t *yb)
{
    const int32_t stride = a->n / 2;
    _Alignas(16) int32_t acc[2][4];
    for (int32_t oc = 0; oc < out_c; oc += 4) {
        const int32_t rest = out_c - oc < 4 ? out_c - oc : 4;
        for (int32_t k = 0; k < rest; k += 2) {
            const int8_t *w0 = weight + (int64_t)(oc + k) * stride;
            int32_t four[4];
            mcu_mve_s4_dot2x2(a->from0, b->from0, w0, k + 1 < rest ? w0 + stride : w0, stride, a->off, four);
            acc[0][k] = four[0];
            acc[0][k + 1] = four[1];
            acc[1][k] = four[2];
            acc[1][k + 1] = four[3];
        }
        const mve_pred16_t p = vctp32q((uint32_t)rest);
        const int32x4_t bv = bias != NULL ? vldrwq_z_s32(bias + oc, p) : vdupq_n_s32(0);
        for (int32_t i = 0; i < 2; ++i) {
            int32x4_t v = vldrwq_s32(acc[i]);
            v = vaddq_s32(a->neg ? vsubq_s32(vdupq_n_s32(0), v) : v, bv);
            if (rest == 4) {
                mcu_mve_store4(v, q, oc, output_offset, act_min, act_max, i == 0 ? ya : yb);
            } else {
                mcu_mve_store_tail(v, q, oc, rest, output_offset, act_min, act_max, i == 0 ? ya : yb);
            }
        }
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_S4_H */
