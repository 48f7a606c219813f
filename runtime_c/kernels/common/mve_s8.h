/* Helium (MVE, Armv8.1-M integer vector extension) building blocks of the int8 kernels: dot
 * products of 16 int8 lanes per instruction, per-lane multiply-accumulate, and a 4-lane
 * requantization that is bit-exact with mcu_requantize_to_s8. Internal: static inline only.
 *
 * MCU_S8_MVE is 1 when the compiler targets integer MVE (__ARM_FEATURE_MVE bit 0: Cortex-M55 and
 * M85). Defining MCU_S8_NO_MVE forces the other paths. On every other
 * target (the host, Cortex-M0/M3/M4/M33) this header defines nothing else, so those builds and
 * their code size are unchanged. Kernels test MCU_S8_MVE before MCU_S8_DSP: the M55 also has
 * the DSP extension, and its MVE path is the faster one.
 *
 * The input offset. Matrix kernels multiply the raw int8 inputs (x) by the weights and add
 * input_offset * sum(w) once per output channel ("folded bias"): sum((x + off) * w) equals
 * sum(x * w) + off * sum(w) modulo 2^32, which is the kernels' modulo-2^32 accumulation, so
 * the result is the same bits as the plain kernels'. Padded taps are filled with the input
 * zero-point (-off), whose term (zp + off) * w is 0 as in the plain kernels. VMLADAVA adds
 * 16 int8 x int8 products to a 32-bit register modulo 2^32, VADD on 32-bit lanes likewise.
 *
 * The hot loops are inline assembly (tail-predicated DLSTP/LETP loops, accumulators pinned in
 * registers): GCC 12 forms no tail-predicated loops and spills around the intrinsics' loops, and
 * the instruction count of these loops is the kernels' cost. Each block names its clobbers. */
#ifndef MCU_KERNELS_INTERNAL_MVE_S8_H
#define MCU_KERNELS_INTERNAL_MVE_S8_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "requant.h"
#include "window.h"

#if !defined(MCU_S8_NO_MVE) && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define MCU_S8_MVE 1
#else
#define MCU_S8_MVE 0
#endif

/* Largest im2col window (kh * kw * in_c bytes) the MVE convolution gathers on the stack, and
 * the most output channels whose folded bias it keeps there (4 bytes each): at most 1 KiB + 2 KiB
 * of the board's stack, in a function of its own; larger layers take another path. */
#define MCU_S8_MVE_COL_MAX 1024
#define MCU_S8_MVE_OC_MAX 512
/* Depthwise kernels keep one row pointer per kernel row. */
#define MCU_S8_MVE_DW_ROWS_MAX 16
/* Bytes of a depthwise row's stack copy of its taps (3 x 3 taps of 128 channels). */
#define MCU_S8_MVE_DW_WCOPY 1152

#if MCU_S8_MVE

#include <arm_mve.h>

/* clamp(requantize(acc) + output_offset) per lane, as int32 lanes in [act_min, act_max]; the
 * same function as mcu_requantize_to_s8 for multipliers in [0, 2^31 - 1] and shifts in
 * [-31, 30] (what the kernels validate):
 *  - VQSHL by left = max(shift, 0) is saturate_int32(x * 2^left);
 *  - VQRDMULH is (2 * x * m + 2^31) >> 32 = (x * m + 2^30) >> 31, saturating only for
 *    INT32_MIN * INT32_MIN: mcu_rounding_doubling_high_mul;
 *  - rounding_divide_by_pot(y, right), half away from zero: VRSHL by -right rounds half up,
 *    (y + 2^(right-1)) >> right exactly; for negative y (and right > 0) subtracting 1 first
 *    turns that into half down. The saturating subtract only matters for y = INT32_MIN, which
 *    is a multiple of 2^right either way;
 *  - the saturating add of the offset is mcu_sat_s32 of the exact sum. */
static inline int32x4_t mcu_mve_requantize(int32x4_t acc, int32x4_t multiplier, int32x4_t shift,
                                           int32_t output_offset, int32_t act_min, int32_t act_max)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t left = vmaxq_s32(shift, zero);
    const int32x4_t right = vminq_s32(shift, zero); /* -right, <= 0 */
    int32x4_t y = vqrdmulhq_s32(vqshlq_s32(acc, left), multiplier);
    const int32x4_t fixup = vshrq_n_s32(vandq_s32(y, right), 31); /* -1 where y < 0 and right > 0 */
    y = vrshlq_s32(vqaddq_s32(y, fixup), right);
    y = vqaddq_n_s32(y, output_offset);
    y = vmaxq_s32(y, vdupq_n_s32(act_min));
    return vminq_s32(y, vdupq_n_s32(act_max));
}

/* mcu_requantize per lane for one multiplier m in [0, 2^31 - 1] and shift (left = max(shift, 0),
 * right = max(-shift, 0)), all scalar operands: no vector registers for parameters. The
 * round-half-away fixup is a plain add of -1 for negative y (when right > 0): y > INT32_MIN
 * because m < 2^31, so it cannot wrap. */
typedef struct {
    int32_t m, left, neg_right, fix; /* fix: 1 when right > 0 */
} mcu_mve_rq1;

static inline mcu_mve_rq1 mcu_mve_rq1_make(int32_t multiplier, int32_t shift)
{
    const mcu_mve_rq1 r = {multiplier, shift > 0 ? shift : 0, shift < 0 ? shift : 0, shift < 0 ? 1 : 0};
    return r;
}

static inline int32x4_t mcu_mve_requantize_1(int32x4_t x, const mcu_mve_rq1 *r)
{
    int32x4_t y = vqrdmulhq_n_s32(vqshlq_r_s32(x, r->left), r->m);
    y = vmlaq_n_s32(y, vshrq_n_s32(y, 31), r->fix);
    return vrshlq_n_s32(y, r->neg_right);
}

static inline int32x4_t mcu_mve_binary_lanes(int op, const mcu_binary_s8_params *p, const mcu_mve_rq1 *ra,
                                             const mcu_mve_rq1 *rb, const mcu_mve_rq1 *ro, int32_t a_add,
                                             int32_t b_add, int32x4_t scale, int32x4_t x, int32x4_t y)
{
    int32x4_t acc;
    if (op == 2) {
        acc = vmulq_s32(vaddq_n_s32(x, p->a_offset), vaddq_n_s32(y, p->b_offset));
    } else {
        /* (q + offset) * 2^left_shift = q * 2^left_shift + offset * 2^left_shift: one VMLAS */
        x = mcu_mve_requantize_1(vmlasq_n_s32(x, scale, a_add), ra);
        y = mcu_mve_requantize_1(vmlasq_n_s32(y, scale, b_add), rb);
        acc = op == 0 ? vqaddq_s32(x, y) : vqsubq_s32(x, y);
    }
    acc = vqaddq_n_s32(mcu_mve_requantize_1(acc, ro), p->output_offset);
    return vminq_s32(vmaxq_s32(acc, vdupq_n_s32(p->act_min)), vdupq_n_s32(p->act_max));
}

/* One contiguous output row of the int8 add, sub (`op` 0, 1) or mul (2) (elementwise/binary_s8.h), four
 * elements per step, the last step predicated. Operand strides are 1 or 0 (broadcast: one value).
 * Lane arithmetic equals mcu_binary_s8_apply: (q + offset) * 2^left_shift fits int32 (checked by the
 * caller), the input rescales are mcu_requantize (mcu_mve_requantize_1), the sum or difference
 * saturates (VQADD/VQSUB = mcu_sat_s32), the product of two values of magnitude <= 255 is exact, and
 * the output offset is added with saturation as in mcu_requantize_to_s8. Each step reads its
 * elements before it writes them, so an operand may be the output itself. */
static inline void mcu_mve_binary_row_s8(int op, const mcu_binary_s8_params *p, const int8_t *a, int32_t sa,
                                         const int8_t *b, int32_t sb, int8_t *out, int32_t n)
{
    const int32_t ls = op == 2 ? 0 : p->left_shift;
    const int32x4_t scale = vdupq_n_s32((int32_t)1 << ls);
    const int32_t a_add = p->a_offset * ((int32_t)1 << ls);
    const int32_t b_add = p->b_offset * ((int32_t)1 << ls);
    const mcu_mve_rq1 ra = mcu_mve_rq1_make(p->a_multiplier, p->a_shift);
    const mcu_mve_rq1 rb = mcu_mve_rq1_make(p->b_multiplier, p->b_shift);
    const mcu_mve_rq1 ro = mcu_mve_rq1_make(p->out_multiplier, p->out_shift);
    int32_t i = 0;
    if (sa == 1 && sb == 1) {
        for (; i + 4 <= n; i += 4) {
            vstrbq_s32(out + i, mcu_mve_binary_lanes(op, p, &ra, &rb, &ro, a_add, b_add, scale, vldrbq_s32(a + i),
                                                     vldrbq_s32(b + i)));
        }
    }
    for (; i < n; i += 4) {
        const mve_pred16_t pr = vctp32q((uint32_t)(n - i));
        const int32x4_t x = sa != 0 ? vldrbq_z_s32(a + i, pr) : vdupq_n_s32(a[0]);
        const int32x4_t y = sb != 0 ? vldrbq_z_s32(b + i, pr) : vdupq_n_s32(b[0]);
        vstrbq_p_s32(out + i, mcu_mve_binary_lanes(op, p, &ra, &rb, &ro, a_add, b_add, scale, x, y), pr);
    }
}

/* Output channels oc .. oc + 3 of one pixel from their accumulators (all four lanes valid). */
static inline void mcu_mve_store4(int32x4_t acc, const mcu_per_channel_quant *q, int32_t oc, int32_t output_offset,
                                  int32_t act_min, int32_t act_max, int8_t *y)
{
    const int32x4_t r = mcu_mve_requantize(acc, vldrwq_s32(q->multiplier + oc), vldrwq_s32(q->shift + oc),
                                           output_offset, act_min, act_max);
    vstrbq_s32(y + oc, r);
}

/* The same for the first `count` (1..3) lanes only: nothing else is read or written. */
static inline void mcu_mve_store_tail(int32x4_t acc, const mcu_per_channel_quant *q, int32_t oc, int32_t count,
                                      int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y)
{
    const mve_pred16_t p = vctp32q((uint32_t)count);
    const int32x4_t r = mcu_mve_requantize(acc, vldrwq_z_s32(q->multiplier + oc, p), vldrwq_z_s32(q->shift + oc, p),
                                           output_offset, act_min, act_max);
    vstrbq_p_s32(y + oc, r, p);
}

/* sum(w[0..n)) (|sum| < 2^31 for n < 2^24), n > 0: a tail-predicated loop of VADDVA (see
 * mcu_mve_dot4 for why assembly). */
static inline int32_t mcu_mve_sum_s8(const int8_t *w, int32_t n)
{
    int32_t s = 0;
    __asm__ volatile("   dlstp.8 lr, %[n]\n"
                     "1: vldrb.8 q0, [%[w]], #16\n"
                     "   vaddva.s8 %[s], q0\n"
                     "   letp lr, 1b\n"
                     : [s] "+Te"(s), [w] "+r"(w)
                     : [n] "r"(n)
                     : "q0", "lr", "memory");
    return s;
}

/* Folded biases of `rows` weight rows of n values: kbias[r] = bias[r] + off * sum(w_r), modulo
 * 2^32 (bias may be NULL). */
static inline void mcu_mve_fold_bias(const int8_t *weight, int32_t n, int32_t rows, const int32_t *bias,
                                     int32_t input_offset, int32_t *kbias)
{
    for (int32_t r = 0; r < rows; ++r) {
        const uint32_t b = bias != NULL ? (uint32_t)bias[r] : 0u;
        kbias[r] = mcu_u32_to_s32(b + (uint32_t)input_offset * (uint32_t)mcu_mve_sum_s8(weight + r * n, n));
    }
}

/* kb[k] + x . w_k over n > 0 values for the four rows w_k (a row may repeat: the caller discards
 * those lanes; kb[0..3] must be readable). A tail-predicated low-overhead loop (DLSTP/LETP): 16 taps
 * per iteration, and in the last one only the remaining n % 16 lanes load (nothing past x[n - 1] or
 * w_k[n - 1] is read) and accumulate. Written in assembly because GCC 12 neither forms
 * tail-predicated loops nor keeps this loop free of register copies; "Te" is GCC's constraint for
 * the even registers that VMLADAVA accumulates in. The four sums go to the vector with two VMOVs. */
static inline int32x4_t mcu_mve_dot4(const int8_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                                     const int8_t *w3, int32_t n, const int32_t *kb)
{
    int32_t a0, a1, a2, a3;
    int32x4_t v;
    __asm__ volatile("   ldrd %[a0], %[a1], [%[kb]]\n"
                     "   ldrd %[a2], %[a3], [%[kb], #8]\n"
                     "   dlstp.8 lr, %[n]\n"
                     "1: vldrb.8 q0, [%[x]], #16\n"
                     "   vldrb.8 q1, [%[w0]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.8 q1, [%[w1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q1\n"
                     "   vldrb.8 q1, [%[w2]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.8 q1, [%[w3]], #16\n"
                     "   vmladava.s8 %[a3], q0, q1\n"
                     "   letp lr, 1b\n"
                     "   vmov %q[v][2], %q[v][0], %[a0], %[a2]\n"
                     "   vmov %q[v][3], %q[v][1], %[a1], %[a3]\n"
                     : [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [v] "=w"(v),
                       [x] "+r"(x), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)
                     : [n] "r"(n), [kb] "r"(kb)
                     : "q0", "q1", "lr", "memory");
    return v;
}

/* For one input row x of n > 0 values and the weight rows w0, w1: r[k] = x . w_k and s[k] = sum(w_k)
 * in one pass (a matrix kernel that sees each weight row once gains nothing from folding the
 * biases first). Tail-predicated loop as in mcu_mve_dot4. */
static inline void mcu_mve_dot2_sum(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t r[2],
                                    int32_t s[2])
{
    int32_t a0 = 0, a1 = 0, s0 = 0, s1 = 0;
    __asm__ volatile("   dlstp.8 lr, %[n]\n"
                     "1: vldrb.8 q0, [%[x]], #16\n"
                     "   vldrb.8 q1, [%[w0]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vaddva.s8 %[s0], q1\n"
                     "   vldrb.8 q1, [%[w1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q1\n"
                     "   vaddva.s8 %[s1], q1\n"
                     "   letp lr, 1b\n"
                     : [a0] "+Te"(a0), [a1] "+Te"(a1), [s0] "+Te"(s0), [s1] "+Te"(s1), [x] "+r"(x), [w0] "+r"(w0),
                       [w1] "+r"(w1)
                     : [n] "r"(n)
                     : "q0", "q1", "lr", "memory");
    r[0] = a0;
    r[1] = a1;
    s[0] = s0;
    s[1] = s1;
}

/* b[k] + (x + off) . w_k for the four weight rows w, w + n, w + 2n, w + 3n over n > 0 values, when
 * the input offset fits int8: each 16 taps add x . w_k and off . w_k (VMLADAVA against a vector of
 * the offset) to the same accumulator, so the weight sums cost no accumulators of their own. Sums
 * modulo 2^32 as everywhere; tail-predicated as mcu_mve_dot4 (the inactive lanes of the offset
 * vector add nothing). */
static inline int32x4_t mcu_mve_dot4_off(const int8_t *x, const int8_t *w, int32_t n, int8x16_t off,
                                         const int32_t *b)
{
    const int8_t *w1 = w + n;
    const int8_t *w2 = w1 + n;
    const int8_t *w3 = w2 + n;
    int32_t a0, a1, a2, a3;
    int32x4_t v;
    __asm__ volatile("   ldrd %[a0], %[a1], [%[b]]\n"
                     "   ldrd %[a2], %[a3], [%[b], #8]\n"
                     "   dlstp.8 lr, %[n]\n"
                     "1: vldrb.8 q0, [%[x]], #16\n"
                     "   vldrb.8 q1, [%[w0]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vmladava.s8 %[a0], %q[off], q1\n"
                     "   vldrb.8 q1, [%[w1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q1\n"
                     "   vmladava.s8 %[a1], %q[off], q1\n"
                     "   vldrb.8 q1, [%[w2]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vmladava.s8 %[a2], %q[off], q1\n"
                     "   vldrb.8 q1, [%[w3]], #16\n"
                     "   vmladava.s8 %[a3], q0, q1\n"
                     "   vmladava.s8 %[a3], %q[off], q1\n"
                     "   letp lr, 1b\n"
                     "   vmov %q[v][2], %q[v][0], %[a0], %[a2]\n"
                     "   vmov %q[v][3], %q[v][1], %[a1], %[a3]\n"
                     : [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [v] "=w"(v), [x] "+r"(x),
                       [w0] "+r"(w), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)
                     : [n] "r"(n), [b] "r"(b), [off] "w"(off)
                     : "q0", "q1", "lr", "memory");
    return v;
}

/* mcu_quant_valid for every one of the n > 0 channels of q: four per step (the smallest multiplier and
 * the extremes of the shifts), the last step predicated. */
static inline int mcu_mve_quant_all_valid(const mcu_per_channel_quant *q, int32_t n)
{
    int32_t mmin = 0, smin = 0, smax = 0;
    for (int32_t c = 0; c < n; c += 4) {
        const mve_pred16_t p = vctp32q((uint32_t)(n - c));
        const int32x4_t s = vldrwq_z_s32(q->shift + c, p);
        mmin = vminvq_p_s32(mmin, vldrwq_z_s32(q->multiplier + c, p), p);
        smin = vminvq_p_s32(smin, s, p);
        smax = vmaxvq_p_s32(smax, s, p);
    }
    return mmin >= 0 && smin >= -31 && smax <= 30;
}

/* One output pixel of a matrix kernel: y[oc] for every output channel from the n int8 values
 * of x (the pixel's im2col column or input row) and weight rows weight + oc * n, starting
 * from the folded biases kbias[oc] (an array of a multiple of 4 entries). Writes only y[0 .. out_c). */
static inline void mcu_mve_matrix_pixel(const int8_t *x, int32_t n, int32_t out_c, const int8_t *weight,
                                        const int32_t *kbias, const mcu_per_channel_quant *q, int32_t output_offset,
                                        int32_t act_min, int32_t act_max, int8_t *y)
{
    int32_t oc = 0;
    const int32_t *m = q->multiplier;
    const int32_t *sh = q->shift;
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t lo = vdupq_n_s32(act_min);
    const int32x4_t hi = vdupq_n_s32(act_max);
    const int8_t *w = weight;
    int8_t *yo = y;
    for (; oc + 4 <= out_c; oc += 4, w += 4 * n, m += 4, sh += 4, yo += 4) {
        int32x4_t acc = mcu_mve_dot4(x, w, w + n, w + 2 * n, w + 3 * n, n, kbias + oc);
        /* mcu_mve_requantize, written out so that the constants stay in registers */
        const int32x4_t s = vldrwq_s32(sh);
        const int32x4_t right = vminq_s32(s, zero);
        acc = vqrdmulhq_s32(vqshlq_s32(acc, vmaxq_s32(s, zero)), vldrwq_s32(m));
        acc = vrshlq_s32(vqaddq_s32(acc, vshrq_n_s32(vandq_s32(acc, right), 31)), right);
        acc = vminq_s32(vmaxq_s32(vqaddq_n_s32(acc, output_offset), lo), hi);
        vstrbq_s32(yo, acc);
    }
    if (oc < out_c) {
        const int32_t rest = out_c - oc;
        const int8_t *w = weight + oc * n;
        const int8_t *w1 = rest > 1 ? w + n : w;
        const int8_t *w2 = rest > 2 ? w + 2 * n : w;
        const int32x4_t acc = mcu_mve_dot4(x, w, w1, w2, w, n, kbias + oc); /* kbias has room for 4 */
        mcu_mve_store_tail(acc, q, oc, rest, output_offset, act_min, act_max, y);
    }
}

/* The pixel loop of mcu_mve_matrix_block for one group of four output channels (weight rows w,
 * w + n, w + 2n, w + 3n) when n is a multiple of 16 and no shift of the group is positive (no left
 * shift): one assembly block for all pixels (at least one) so that every pointer, accumulator and
 * parameter stays in a register. The dot products are those of mcu_mve_dot4 (whole iterations
 * only: each pointer ends exactly n bytes on, so x moves to the next pixel by itself and the rows
 * step back by n); the requantization is mcu_mve_requantize with left shift 0 (VQSHL by 0 is the
 * identity) and the offset and clamp of mcu_mve_matrix_block. kb: the group's folded biases;
 * c: lane 0 the output pixel stride, lane 1 the end of x (x + pixels * n), lane 2 the output offset
 * (the loop ends when x reaches it: at -Os and -O1 no register is left for a pixel counter). */
static inline void mcu_mve_matrix_group_asm(const int8_t *x, int32_t n, const int8_t *w, int8_t *y,
                                            int32x4_t kb, int32x4_t m, int32x4_t right, int32x4_t lo, int32x4_t hi,
                                            int32x4_t c)
{
    const int8_t *w1 = w + n;
    const int8_t *w2 = w1 + n;
    const int8_t *w3 = w2 + n;
    int32_t a0, a1, a2, a3;
    __asm__ volatile("1: vmov %[a0], %[a2], %q[kb][2], %q[kb][0]\n"
                     "   vmov %[a1], %[a3], %q[kb][3], %q[kb][1]\n"
                     "   dlstp.8 lr, %[n]\n"
                     "2: vldrb.8 q0, [%[x]], #16\n"
                     "   vldrb.8 q1, [%[w0]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.8 q1, [%[w1]], #16\n"
                     "   vmladava.s8 %[a1], q0, q1\n"
                     "   vldrb.8 q1, [%[w2]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.8 q1, [%[w3]], #16\n"
                     "   vmladava.s8 %[a3], q0, q1\n"
                     "   letp lr, 2b\n"
                     "   vmov q0[2], q0[0], %[a0], %[a2]\n"
                     "   vmov q0[3], q0[1], %[a1], %[a3]\n"
                     "   vqrdmulh.s32 q0, q0, %q[m]\n"
                     "   vand q1, q0, %q[r]\n"
                     "   vshr.s32 q1, q1, #31\n"
                     "   vqadd.s32 q0, q0, q1\n"
                     "   vrshl.s32 q0, q0, %q[r]\n"
                     "   vmax.s32 q0, q0, %q[lo]\n"
                     "   vmin.s32 q0, q0, %q[hi]\n"
                     "   vmov %[a0], %[a2], %q[c][2], %q[c][0]\n"
                     "   vadd.i32 q0, q0, %[a2]\n"
                     "   vstrb.32 q0, [%[y]]\n"
                     "   add %[y], %[y], %[a0]\n"
                     "   sub %[w0], %[w0], %[n]\n"
                     "   sub %[w1], %[w1], %[n]\n"
                     "   sub %[w2], %[w2], %[n]\n"
                     "   sub %[w3], %[w3], %[n]\n"
                     "   vmov %[a1], %[a3], %q[c][3], %q[c][1]\n"
                     "   cmp %[x], %[a1]\n"
                     "   bne 1b\n"
                     : [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [x] "+r"(x), [w0] "+r"(w),
                       [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [y] "+l"(y)
                     : [n] "r"(n), [kb] "w"(kb), [m] "w"(m), [r] "w"(right), [lo] "w"(lo), [hi] "w"(hi), [c] "w"(c)
                     : "q0", "q1", "lr", "cc", "memory");
}

/* Several output pixels of a matrix kernel: pixel i's n int8 values are x[i * n .. i * n + n) and its
 * out_c outputs go to y[i * out_c ..] (the rest as mcu_mve_matrix_pixel). Output channels outer,
 * pixels inner: a group of four channels keeps its requantization parameters in registers across
 * the pixels, so each pixel pays only its dot products and the arithmetic of the requantization.
 * The offset and the clamp: clamp(sat(y + off), lo, hi) equals clamp(y, lo - off, hi - off) + off
 * (a sum that would saturate lies beyond the bounds either way). Writes only y's pixels' channels
 * [0, out_c); all of x is read before y is written only when the caller gave it a copy. */
static __attribute__((noinline, unused)) void
mcu_mve_matrix_block(const int8_t *x, int32_t pixels, int32_t n, int32_t out_c, const int8_t *weight,
                     const int32_t *kbias, const mcu_per_channel_quant *q, int32_t output_offset, int32_t act_min,
                     int32_t act_max, int8_t *y)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t lo = vdupq_n_s32(act_min - output_offset);
    const int32x4_t hi = vdupq_n_s32(act_max - output_offset);
    int32_t oc = 0;
    for (; oc + 4 <= out_c; oc += 4) {
        const int8_t *w = weight + oc * n;
        const int32x4_t s = vldrwq_s32(q->shift + oc);
        const int32x4_t left = vmaxq_s32(s, zero);
        const int32x4_t right = vminq_s32(s, zero);
        const int32x4_t m = vldrwq_s32(q->multiplier + oc);
        const int8_t *xp = x;
        int8_t *yp = y + oc;
        /* (the assembly loop runs at least once) */
        if (n % 16 == 0 && vmaxvq_s32(INT32_MIN, s) <= 0 && pixels > 0) {
            int32x4_t c = vsetq_lane_s32(output_offset, vdupq_n_s32(out_c), 2);
            c = vsetq_lane_s32((int32_t)(uintptr_t)(xp + pixels * n), c, 1);
            mcu_mve_matrix_group_asm(xp, n, w, yp, vldrwq_s32(kbias + oc), m, right, lo, hi, c);
            continue;
        }
        for (int32_t i = 0; i < pixels; ++i, xp += n, yp += out_c) {
            int32x4_t acc = mcu_mve_dot4(xp, w, w + n, w + 2 * n, w + 3 * n, n, kbias + oc);
            acc = vqrdmulhq_s32(vqshlq_s32(acc, left), m);
            acc = vrshlq_s32(vqaddq_s32(acc, vshrq_n_s32(vandq_s32(acc, right), 31)), right);
            vstrbq_s32(yp, vaddq_n_s32(vminq_s32(vmaxq_s32(acc, lo), hi), output_offset));
        }
    }
    if (oc < out_c) {
        const int32_t rest = out_c - oc;
        const int8_t *w = weight + oc * n;
        const int8_t *w1 = rest > 1 ? w + n : w;
        const int8_t *w2 = rest > 2 ? w + 2 * n : w;
        for (int32_t i = 0; i < pixels; ++i) {
            const int32x4_t acc = mcu_mve_dot4(x + i * n, w, w1, w2, w, n, kbias + oc); /* kbias has room for 4 */
            mcu_mve_store_tail(acc, q, oc, rest, output_offset, act_min, act_max, y + i * out_c);
        }
    }
}

/* Copies and fills of n >= 0 bytes, 16 per instruction: tail-predicated loops (WLSTP skips n == 0),
 * in assembly as mcu_mve_dot4. Only dst[0 .. n) is written, only src[0 .. n) read. */
static inline void mcu_mve_copy_s8(int8_t *dst, const int8_t *src, int32_t n)
{
    __asm__ volatile("   wlstp.8 lr, %[n], 2f\n"
                     "1: vldrb.8 q0, [%[s]], #16\n"
                     "   vstrb.8 q0, [%[d]], #16\n"
                     "   letp lr, 1b\n"
                     "2:\n"
                     : [d] "+r"(dst), [s] "+r"(src)
                     : [n] "r"(n)
                     : "q0", "lr", "memory");
}

static inline void mcu_mve_fill_s8(int8_t *dst, int8_t v, int32_t n)
{
    const int8x16_t vv = vdupq_n_s8(v);
    __asm__ volatile("   wlstp.8 lr, %[n], 2f\n"
                     "1: vstrb.8 %q[v], [%[d]], #16\n"
                     "   letp lr, 1b\n"
                     "2:\n"
                     : [d] "+r"(dst)
                     : [n] "r"(n), [v] "w"(vv)
                     : "lr", "memory");
}

/* The im2col column of one output pixel of a groups == 1 convolution: the window's taps in
 * weight order (kh, kw, ic) as raw int8, padded taps filled with the zero-point. */
static inline void mcu_mve_im2col_s8(const mcu_conv2d_s8_params *p, const int8_t *x_n, int32_t oh, int32_t ow,
                                     int8_t *col)
{
    const mcu_shape4 in = p->input;
    const int32_t c = in.c;
    const int32_t kw = p->kernel_w;
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    const int32_t iw0 = ow * p->stride_w - p->pad_left;
    const int8_t zp = (int8_t)-p->input_offset; /* (zp + off) == 0: a padded tap */
    for (int32_t i = 0; i < p->kernel_h; ++i) {
        const int32_t ih = ih0 + i * p->dilation_h;
        int8_t *dst = col + i * kw * c;
        if (ih < 0 || ih >= in.h) {
            mcu_mve_fill_s8(dst, zp, kw * c);
            continue;
        }
        const int8_t *row = x_n + ih * in.w * c;
        if (p->dilation_w == 1) {
            /* The taps inside the input are one contiguous run of the row. */
            int32_t lo = iw0 < 0 ? -iw0 : 0;
            int32_t hi = in.w - iw0 < kw ? in.w - iw0 : kw;
            lo = lo < kw ? lo : kw;
            hi = hi > lo ? hi : lo;
            if (lo > 0) {
                mcu_mve_fill_s8(dst, zp, lo * c);
            }
            mcu_mve_copy_s8(dst + lo * c, row + (iw0 + lo) * c, (hi - lo) * c);
            if (hi < kw) {
                mcu_mve_fill_s8(dst + hi * c, zp, (kw - hi) * c);
            }
            continue;
        }
        for (int32_t j = 0; j < kw; ++j) {
            const int32_t iw = iw0 + j * p->dilation_w;
            if (iw < 0 || iw >= in.w) {
                mcu_mve_fill_s8(dst + j * c, zp, c);
            } else {
                mcu_mve_copy_s8(dst + j * c, row + iw * c, c);
            }
        }
    }
}

/* 1 when no shift of q's `channels` channels is positive (no requantization needs a left shift). */
static inline int mcu_mve_no_left_shift(const mcu_per_channel_quant *q, int32_t channels)
{
    int32_t m = INT32_MIN;
    for (int32_t c = 0; c < channels; c += 4) {
        const mve_pred16_t p = vctp32q((uint32_t)(channels - c));
        m = vmaxvq_p_s32(m, vldrwq_z_s32(q->shift + c, p), p);
    }
    return m <= 0;
}

/* Depthwise (ch_mult 1) folded biases: kbias[c] = bias[c] + off * sum over all taps of w[t][c]. */
static inline void mcu_mve_dw_fold_bias(const int8_t *weight, int32_t taps, int32_t channels, const int32_t *bias,
                                        int32_t input_offset, int32_t *kbias)
{
    for (int32_t c = 0; c < channels; c += 4) {
        const mve_pred16_t p = vctp32q((uint32_t)(channels - c));
        int32x4_t s = vdupq_n_s32(0);
        for (int32_t t = 0; t < taps; ++t) {
            s = vaddq_s32(s, vldrbq_z_s32(weight + t * channels + c, p));
        }
        const int32x4_t b = bias != NULL ? vldrwq_z_s32(bias + c, p) : vdupq_n_s32(0);
        vstrwq_p_s32(kbias + c, vmlaq_n_s32(b, s, input_offset), p);
    }
    /* Every full group of eight channels as its even channels then its odd ones, the order of the
     * accumulators of mcu_mve_dw_taps (a partial last group stays in channel order). */
    const uint32x4_t even = vmulq_n_u32(vidupq_n_u32(0, 1), 2);
    for (int32_t c = 0; c + 8 <= channels; c += 8) {
        const int32x4_t e = vldrwq_gather_shifted_offset_s32(kbias + c, even);
        const int32x4_t o = vldrwq_gather_shifted_offset_s32(kbias + c + 1, even);
        vstrwq_s32(kbias + c, e);
        vstrwq_s32(kbias + c + 4, o);
    }
}

/* A run of taps of one depthwise pixel: n > 0 taps starting at input x (channel 0), x advancing
 * by xs per tap (0 for a run of padded taps over a zero-point row). */
typedef struct {
    const int8_t *x;
    int32_t xs;
    int32_t n;
} mcu_mve_dw_seg;

/* acc += x_t * w_t per channel over a pixel's list of runs of taps (in weight order; w_t = w + t * ws;
 * a run's taps start at x + pix * xs + c, so one list serves every pixel of a row whose window lies
 * inside the input: pix moves its real runs, not its padded ones),
 * for 16 channels from c (a[0], a[1]: even and odd channels of the first eight, a[2], a[3] of the
 * next eight) or, with `half`, the first eight only. MVE has no vector-by-vector multiply-accumulate:
 * each tap widens the bytes to 16-bit lanes and VMULLB/VMULLT multiply the even and the odd lanes
 * into exact 32-bit products, added to the accumulators. One assembly block for the whole window,
 * so that the accumulators stay in registers (GCC 12 spills them around separate loops). */
static inline void mcu_mve_dw_segs(int32x4_t a[4], const mcu_mve_dw_seg *seg, int32_t nseg, int32_t c, int32_t pix,
                                   const int8_t *w, int32_t ws, int half)
{
    int32x4_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    const int8_t *x;
    int32_t xs, n;
    if (half) {
        __asm__ volatile("2: ldrd %[x], %[xs], [%[seg]], #12\n"
                         "   ldr %[n], [%[seg], #-4]\n"
                         "   mla %[x], %[pix], %[xs], %[x]\n"
                         "   add %[x], %[x], %[c]\n"
                         "   dls lr, %[n]\n"
                         "1: vldrb.s16 q4, [%[x]]\n"
                         "   vldrb.s16 q5, [%[w]]\n"
                         "   vmullb.s16 q6, q4, q5\n"
                         "   vadd.i32 %q[a0], %q[a0], q6\n"
                         "   vmullt.s16 q6, q4, q5\n"
                         "   vadd.i32 %q[a1], %q[a1], q6\n"
                         "   add %[x], %[xs]\n"
                         "   add %[w], %[ws]\n"
                         "   le lr, 1b\n"
                         "   subs %[cnt], %[cnt], #1\n"
                         "   bne 2b\n"
                         : [a0] "+w"(a0), [a1] "+w"(a1), [x] "=&l"(x), [xs] "=&r"(xs), [n] "=&r"(n), [seg] "+r"(seg),
                           [cnt] "+r"(nseg), [w] "+l"(w)
                         : [c] "r"(c), [ws] "r"(ws), [pix] "r"(pix)
                         : "q4", "q5", "q6", "lr", "cc", "memory");
    } else {
        __asm__ volatile("2: ldrd %[x], %[xs], [%[seg]], #12\n"
                         "   ldr %[n], [%[seg], #-4]\n"
                         "   mla %[x], %[pix], %[xs], %[x]\n"
                         "   add %[x], %[x], %[c]\n"
                         "   dls lr, %[n]\n"
                         "1: vldrb.s16 q4, [%[x]]\n"
                         "   vldrb.s16 q5, [%[w]]\n"
                         "   vmullb.s16 q6, q4, q5\n"
                         "   vadd.i32 %q[a0], %q[a0], q6\n"
                         "   vmullt.s16 q6, q4, q5\n"
                         "   vadd.i32 %q[a1], %q[a1], q6\n"
                         "   vldrb.s16 q4, [%[x], #8]\n"
                         "   vldrb.s16 q5, [%[w], #8]\n"
                         "   vmullb.s16 q6, q4, q5\n"
                         "   vadd.i32 %q[a2], %q[a2], q6\n"
                         "   vmullt.s16 q6, q4, q5\n"
                         "   vadd.i32 %q[a3], %q[a3], q6\n"
                         "   add %[x], %[xs]\n"
                         "   add %[w], %[ws]\n"
                         "   le lr, 1b\n"
                         "   subs %[cnt], %[cnt], #1\n"
                         "   bne 2b\n"
                         : [a0] "+w"(a0), [a1] "+w"(a1), [a2] "+w"(a2), [a3] "+w"(a3), [x] "=&l"(x), [xs] "=&r"(xs),
                           [n] "=&r"(n), [seg] "+r"(seg), [cnt] "+r"(nseg), [w] "+l"(w)
                         : [c] "r"(c), [ws] "r"(ws), [pix] "r"(pix)
                         : "q4", "q5", "q6", "lr", "cc", "memory");
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* Requantizes the even/odd accumulators of eight channels c .. c + 7 and stores them in channel
 * order: stride-2 gathers (offsets from VIDUP, which takes its start from an even register) load
 * the channels' parameters, the lanes are requantized as in mcu_mve_requantize, and the offset and
 * the clamp are applied to all eight at once on 16-bit lanes: VQMOVNB/VQMOVNT narrow the even and
 * the odd lanes with saturation to int16 and interleave them into channel order. That is the same
 * as clamp(sat32(y + offset)) per lane: the bounds lie in [-128, 127] and |offset| <= 128
 * (mcu_output_offset_valid), so a y that saturates to int16 lands beyond the bounds with or
 * without the offset, and otherwise y + offset is exact either way. One assembly block with
 * temporaries of its own, so that nothing of the surrounding pixel loop is spilled around it. */
static inline void mcu_mve_dw_store8(int32x4_t ev, int32x4_t od, const mcu_per_channel_quant *q, int32_t c,
                                     int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y, int noleft)
{
    const int32_t *mp = q->multiplier + c;
    const int32_t *sp = q->shift + c;
    int32x4_t t0, t1, t2, t3, t4, t5;
    int32_t k;
    if (noleft) {
        /* No shift of these channels is positive: the shift is the (non-positive) VRSHL count itself
         * and there is no left shift (VQSHL by 0 is the identity). */
        __asm__ volatile("   movs %[k], #0\n"
                         "   vidup.u32 %q[t0], %[k], #2\n"
                         "   vldrw.u32 %q[t1], [%[mp], %q[t0], uxtw #2]\n"
                         "   vldrw.u32 %q[t2], [%[sp], %q[t0], uxtw #2]\n"
                         "   vqrdmulh.s32 %q[ev], %q[ev], %q[t1]\n"
                         "   vand %q[t4], %q[ev], %q[t2]\n"
                         "   vshr.s32 %q[t4], %q[t4], #31\n"
                         "   vqadd.s32 %q[ev], %q[ev], %q[t4]\n"
                         "   vrshl.s32 %q[ev], %q[ev], %q[t2]\n"
                         "   movs %[k], #1\n"
                         "   vidup.u32 %q[t0], %[k], #2\n"
                         "   vldrw.u32 %q[t1], [%[mp], %q[t0], uxtw #2]\n"
                         "   vldrw.u32 %q[t2], [%[sp], %q[t0], uxtw #2]\n"
                         "   vqrdmulh.s32 %q[od], %q[od], %q[t1]\n"
                         "   vand %q[t4], %q[od], %q[t2]\n"
                         "   vshr.s32 %q[t4], %q[t4], #31\n"
                         "   vqadd.s32 %q[od], %q[od], %q[t4]\n"
                         "   vrshl.s32 %q[od], %q[od], %q[t2]\n"
                         "   vqmovnb.s32 %q[t5], %q[ev]\n"
                         "   vqmovnt.s32 %q[t5], %q[od]\n"
                         "   vqadd.s16 %q[t5], %q[t5], %[off]\n"
                         "   vdup.16 %q[t4], %[lo]\n"
                         "   vmax.s16 %q[t5], %q[t5], %q[t4]\n"
                         "   vdup.16 %q[t4], %[hi]\n"
                         "   vmin.s16 %q[t5], %q[t5], %q[t4]\n"
                         "   vstrb.16 %q[t5], [%[y]]\n"
                         : [ev] "+w"(ev), [od] "+w"(od), [t0] "=&w"(t0), [t1] "=&w"(t1), [t2] "=&w"(t2),
                           [t4] "=&w"(t4), [t5] "=&w"(t5), [k] "=&Te"(k)
                         : [mp] "r"(mp), [sp] "r"(sp), [off] "r"(output_offset), [lo] "r"(act_min),
                           [hi] "r"(act_max), [y] "l"(y + c)
                         : "memory");
        return;
    }
    __asm__ volatile("   movs %[k], #0\n"
                     "   vidup.u32 %q[t0], %[k], #2\n"
                     "   vldrw.u32 %q[t1], [%[mp], %q[t0], uxtw #2]\n"
                     "   vldrw.u32 %q[t2], [%[sp], %q[t0], uxtw #2]\n"
                     "   vmov.i32 %q[t3], #0\n"
                     "   vmax.s32 %q[t4], %q[t2], %q[t3]\n"
                     "   vmin.s32 %q[t2], %q[t2], %q[t3]\n"
                     "   vqshl.s32 %q[ev], %q[ev], %q[t4]\n"
                     "   vqrdmulh.s32 %q[ev], %q[ev], %q[t1]\n"
                     "   vand %q[t4], %q[ev], %q[t2]\n"
                     "   vshr.s32 %q[t4], %q[t4], #31\n"
                     "   vqadd.s32 %q[ev], %q[ev], %q[t4]\n"
                     "   vrshl.s32 %q[ev], %q[ev], %q[t2]\n"
                     "   movs %[k], #1\n"
                     "   vidup.u32 %q[t0], %[k], #2\n"
                     "   vldrw.u32 %q[t1], [%[mp], %q[t0], uxtw #2]\n"
                     "   vldrw.u32 %q[t2], [%[sp], %q[t0], uxtw #2]\n"
                     "   vmax.s32 %q[t4], %q[t2], %q[t3]\n"
                     "   vmin.s32 %q[t2], %q[t2], %q[t3]\n"
                     "   vqshl.s32 %q[od], %q[od], %q[t4]\n"
                     "   vqrdmulh.s32 %q[od], %q[od], %q[t1]\n"
                     "   vand %q[t4], %q[od], %q[t2]\n"
                     "   vshr.s32 %q[t4], %q[t4], #31\n"
                     "   vqadd.s32 %q[od], %q[od], %q[t4]\n"
                     "   vrshl.s32 %q[od], %q[od], %q[t2]\n"
                     "   vqmovnb.s32 %q[t5], %q[ev]\n"
                     "   vqmovnt.s32 %q[t5], %q[od]\n"
                     "   vqadd.s16 %q[t5], %q[t5], %[off]\n"
                     "   vdup.16 %q[t4], %[lo]\n"
                     "   vmax.s16 %q[t5], %q[t5], %q[t4]\n"
                     "   vdup.16 %q[t4], %[hi]\n"
                     "   vmin.s16 %q[t5], %q[t5], %q[t4]\n"
                     "   vstrb.16 %q[t5], [%[y]]\n"
                     : [ev] "+w"(ev), [od] "+w"(od), [t0] "=&w"(t0), [t1] "=&w"(t1), [t2] "=&w"(t2), [t3] "=&w"(t3),
                       [t4] "=&w"(t4), [t5] "=&w"(t5), [k] "=&Te"(k)
                     : [mp] "r"(mp), [sp] "r"(sp), [off] "r"(output_offset), [lo] "r"(act_min), [hi] "r"(act_max),
                       [y] "l"(y + c)
                     : "memory");
}

/* Eight channels of one depthwise pixel, channels c .. c + 7 (only the first `count` when
 * `partial`; the predicate p then covers them): the last (fewer than eight) channels of
 * mcu_mve_depthwise_pixel_s8, whose folded biases are in channel order. MVE has no vector-by-vector multiply-accumulate,
 * so each tap widens eight bytes of x and w to 16-bit lanes and VMULLB/VMULLT multiply the even
 * and the odd lanes into 32-bit products (exact: |x|, |w| <= 128), added to two accumulators:
 * `ev` holds channels c, c+2, c+4, c+6 and `od` c+1, c+3, c+5, c+7. The requantization loads
 * those channels' parameters with stride-2 gathers, and VMOVNB/VMOVNT interleave the results
 * back into channel order for one 8-byte store. */
static inline void mcu_mve_dw_block8(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t iw0, int32_t kw_lo,
                                     int32_t kw_hi, int32_t cs, int32_t c, int32_t zp, const int8_t *weight,
                                     const int32_t *kbias, const mcu_per_channel_quant *q, int32_t output_offset,
                                     int32_t act_min, int32_t act_max, int8_t *y, int partial, int32_t count)
{
    const mve_pred16_t p = vctp16q((uint32_t)count);
    const mve_pred16_t p32 = vctp32q((uint32_t)((count + 1) / 2)); /* even channels < count */
    const mve_pred16_t p32o = vctp32q((uint32_t)(count / 2));      /* odd channels < count */
    const uint32x4_t even = vmulq_n_u32(vidupq_n_u32(0, 1), 2);    /* 0, 2, 4, 6 */
    int32x4_t ev = partial ? vldrwq_gather_shifted_offset_z_s32(kbias + c, even, p32)
                           : vldrwq_gather_shifted_offset_s32(kbias + c, even);
    int32x4_t od = partial ? vldrwq_gather_shifted_offset_z_s32(kbias + c + 1, even, p32o)
                           : vldrwq_gather_shifted_offset_s32(kbias + c + 1, even);
    const int16x8_t vzp = vdupq_n_s16((int16_t)zp);
    const int8_t *wp = weight + c;
    for (int32_t i = 0; i < kh; ++i) {
        const int8_t *row = rows[i];
        for (int32_t j = 0; j < kw; ++j, wp += cs) {
            const int16x8_t w = partial ? vldrbq_z_s16(wp, p) : vldrbq_s16(wp);
            int16x8_t x = vzp; /* a padded tap */
            if (row != NULL && j >= kw_lo && j < kw_hi) {
                const int8_t *xp = row + (iw0 + j) * cs + c;
                x = partial ? vldrbq_z_s16(xp, p) : vldrbq_s16(xp);
            }
            ev = vaddq_s32(ev, vmullbq_int_s16(x, w));
            od = vaddq_s32(od, vmulltq_int_s16(x, w));
        }
    }
    int32x4_t m = partial ? vldrwq_gather_shifted_offset_z_s32(q->multiplier + c, even, p32)
                          : vldrwq_gather_shifted_offset_s32(q->multiplier + c, even);
    int32x4_t sh = partial ? vldrwq_gather_shifted_offset_z_s32(q->shift + c, even, p32)
                           : vldrwq_gather_shifted_offset_s32(q->shift + c, even);
    const int32x4_t re = mcu_mve_requantize(ev, m, sh, output_offset, act_min, act_max);
    m = partial ? vldrwq_gather_shifted_offset_z_s32(q->multiplier + c + 1, even, p32o)
                : vldrwq_gather_shifted_offset_s32(q->multiplier + c + 1, even);
    sh = partial ? vldrwq_gather_shifted_offset_z_s32(q->shift + c + 1, even, p32o)
                 : vldrwq_gather_shifted_offset_s32(q->shift + c + 1, even);
    const int32x4_t ro = mcu_mve_requantize(od, m, sh, output_offset, act_min, act_max);
    const int16x8_t r = vmovntq_s32(vmovnbq_s32(vuninitializedq_s16(), re), ro);
    if (partial) {
        vstrbq_p_s16(y + c, r, p);
    } else {
        vstrbq_s16(y + c, r);
    }
}

/* The channel blocks of one depthwise pixel: 16 channels per step, then 8, then a predicated rest
 * (mcu_mve_dw_block8, which takes the window from rows/iw0/kw_lo/kw_hi). */
static inline void mcu_mve_dw_pixel_blocks(const mcu_mve_dw_seg *seg, int32_t nseg, int32_t pix,
                                           const int8_t *const *rows, int32_t kh, int32_t kw, int32_t iw0,
                                           int32_t kw_lo, int32_t kw_hi, int32_t channels, int32_t input_offset,
                                           const int8_t *weight, const int32_t *kbias, const mcu_per_channel_quant *q,
                                           int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *y,
                                           int noleft)
{
    int32_t c = 0;
    for (; c + 8 <= channels;) {
        const int half = c + 16 > channels;
        int32x4_t a[4] = {vldrwq_s32(kbias + c), vldrwq_s32(kbias + c + 4), vdupq_n_s32(0), vdupq_n_s32(0)};
        if (!half) {
            a[2] = vldrwq_s32(kbias + c + 8);
            a[3] = vldrwq_s32(kbias + c + 12);
        }
        mcu_mve_dw_segs(a, seg, nseg, c, pix, weight + c, channels, half);
        mcu_mve_dw_store8(a[0], a[1], q, c, output_offset, act_min, act_max, y, noleft);
        if (!half) {
            mcu_mve_dw_store8(a[2], a[3], q, c + 8, output_offset, act_min, act_max, y, noleft);
        }
        c += half ? 8 : 16;
    }
    if (c < channels) {
        mcu_mve_dw_block8(rows, kh, kw, iw0, kw_lo, kw_hi, channels, c, -input_offset, weight, kbias, q,
                          output_offset, act_min, act_max, y, 1, channels - c);
    }
}

/* Depthwise convolution (ch_mult 1) of one output row from row pointers: rows[i] is the input row
 * of tap row i (NULL when outside the input); output pixel ow's window starts at input column
 * ow * stride_w - pad_left. Every tap of a window is accumulated, padded ones with x = zp, on top
 * of the folded biases (see the header comment). The window as runs of taps: one list, made once
 * per row, for the pixels whose window lies inside the input (the runs move with the pixel), and a
 * list of its own for each pixel at the left or right edge. Pixels in order; each writes only its
 * own channels, after reading all of its window's inputs of the same channels (a channel's output
 * depends only on that channel's inputs). noleft: mcu_mve_no_left_shift(q, channels). */
static inline void mcu_mve_depthwise_row_s8(const int8_t *const *rows, int32_t kh, int32_t kw, int32_t in_w,
                                            int32_t out_w, int32_t stride_w, int32_t pad_left, int32_t channels,
                                            int32_t input_offset, const int8_t *weight, const int32_t *kbias,
                                            const mcu_per_channel_quant *q, int32_t output_offset, int32_t act_min,
                                            int32_t act_max, int8_t *y, int noleft)
{
    /* Padded runs read a row of zero-points (with stride 0). */
    _Alignas(16) int8_t zps[MCU_S8_MVE_OC_MAX];
    mcu_mve_fill_s8(zps, (int8_t)-input_offset, channels);
    /* Every pixel reads all the taps: with more than one pixel they are read from a stack copy, once
     * a row from wherever the model's constants live (a flash with wait states on some boards). */
    _Alignas(16) int8_t wcopy[MCU_S8_MVE_DW_WCOPY];
    if (out_w > 1 && kh * kw * channels <= MCU_S8_MVE_DW_WCOPY) {
        mcu_mve_copy_s8(wcopy, weight, kh * kw * channels);
        weight = wcopy;
    }
    const int32_t cs = channels;
    mcu_mve_dw_seg inner[MCU_S8_MVE_DW_ROWS_MAX];
    for (int32_t i = 0; i < kh; ++i) {
        inner[i] = rows[i] == NULL ? (mcu_mve_dw_seg){zps, 0, kw} : (mcu_mve_dw_seg){rows[i], cs, kw};
    }
    mcu_mve_dw_seg seg[3 * MCU_S8_MVE_DW_ROWS_MAX];
    for (int32_t ow = 0; ow < out_w; ++ow, y += cs) {
        const int32_t iw0 = ow * stride_w - pad_left;
        int32_t kw_lo, kw_hi;
        mcu_window_taps(iw0, kw, 1, in_w, &kw_lo, &kw_hi);
        /* One call site, so that the pixel's blocks are inlined into this loop. */
        const int edge = kw_lo != 0 || kw_hi != kw;
        int32_t nseg = 0;
        for (int32_t i = 0; edge && i < kh; ++i) {
            if (rows[i] == NULL || kw_hi <= kw_lo) {
                seg[nseg++] = (mcu_mve_dw_seg){zps, 0, kw};
                continue;
            }
            if (kw_lo > 0) {
                seg[nseg++] = (mcu_mve_dw_seg){zps, 0, kw_lo};
            }
            seg[nseg++] = (mcu_mve_dw_seg){rows[i] + (iw0 + kw_lo) * cs, cs, kw_hi - kw_lo};
            if (kw_hi < kw) {
                seg[nseg++] = (mcu_mve_dw_seg){zps, 0, kw - kw_hi};
            }
        }
        mcu_mve_dw_pixel_blocks(edge ? seg : inner, edge ? nseg : kh, edge ? 0 : iw0, rows, kh, kw, iw0, kw_lo, kw_hi,
                                channels, input_offset, weight, kbias, q, output_offset, act_min, act_max, y,
                                noleft);
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_S8_H */
