#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/s4.h"
#include "../common/s4_dsp.h"
#include "mve_fc_s4.h"

/* The paths a build carries on DSP cores. A model's build defines 0 for those none of its layers takes
 * (mcu/backends/portable/s4_linear.py), so that their code stays out of its flash; absent, every path is built
 * (program files). A layer that would take a path left out is refused with MCU_ERR_UNSUPPORTED, never run another
 * way. MCU_S4_FC_ANY_SHIFT 0: the three-row path requantizes only shifts in [-24, -1]. */
#ifndef MCU_S4_FC_ROWS3
#define MCU_S4_FC_ROWS3 1
#endif
#ifndef MCU_S4_FC_ANY_SHIFT
#define MCU_S4_FC_ANY_SHIFT 1
#endif
#ifndef MCU_S4_FC_PAIRS
#define MCU_S4_FC_PAIRS 1
#endif
#ifndef MCU_S4_FC_PLAIN
#define MCU_S4_FC_PLAIN 1
#endif

int32_t mcu_linear_s4_get_buffer_size(const mcu_linear_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_DSP && MCU_S4_FC_ROWS3
/* Requantization as mcu_requantize_to_s8_fast, for shifts in [-24, -1] by one SMLAL (the merged rounding of
 * rq_s8_dsp.h) with its constant made from the shift in registers: with R = -shift and c = 2 output_offset + 1,
 * K[0] = 2^30 + c 2^(R+30), and t = c << (R - 1) (|t| < 255 2^23) gives K[0]'s high word t >> 1 and low word
 * 2^30 + (t << 31) (bit 31: R = 1, where t is odd). The borrow of K[1] and the final shift are rq_s8_dsp.h's. */
typedef struct {
    int32_t c; /* 2 output_offset + 1 */
    int32_t output_offset, act_min, act_max; /* copies: the assembly's memory clobbers would reload p's */
} linear_s4_rq;

static inline int8_t linear_s4_requantize(const linear_s4_rq *rq, int32_t acc, int32_t multiplier, int32_t shift)
{
#if MCU_S4_FC_ANY_SHIFT
    if (shift > -1 || shift < -24) {
        return mcu_requantize_to_s8_fast(acc, multiplier, shift, rq->output_offset, rq->act_min, rq->act_max);
    }
#endif
    const int32_t rs = -shift - 1;
    int32_t z;
#if MCU_S8_DSP_NATIVE
    uint32_t t, lo, hi, bw;
    __asm__("lsl %[t], %[c], %[rs]\n\t"
            "mov %[lo], #0x40000000\n\t"
            "orr %[lo], %[lo], %[t], lsl #31\n\t"
            "asr %[hi], %[t], #1\n\t"
            "smlal %[lo], %[hi], %[acc], %[m]\n\t"
            "bic %[bw], %[acc], %[lo]\n\t"
            "add %[hi], %[hi], %[bw], asr #31\n\t"
            "asr %[hi], %[hi], %[rs]\n\t"
            "ssat %[z], #8, %[hi]"
            : [z] "=r"(z), [t] "=&r"(t), [lo] "=&r"(lo), [hi] "=&r"(hi), [bw] "=&r"(bw)
            : [acc] "r"(acc), [m] "r"(multiplier), [c] "r"(rq->c), [rs] "r"(rs));
#else
    const uint32_t t = (uint32_t)rq->c << rs;
    const int64_t k = (int64_t)mcu_asr32(mcu_u32_to_s32(t), 1) * 4294967296 + (int64_t)(0x40000000u | (t << 31));
    const int64_t sum = k + (int64_t)acc * multiplier;
    const uint32_t lo = (uint32_t)sum;
    const int32_t hi = (int32_t)mcu_asr64(sum, 32) - (int32_t)(((uint32_t)acc & ~lo) >> 31);
    z = mcu_clamp_s32(mcu_asr32(hi, rs), -128, 127);
#endif
    return (int8_t)mcu_clamp_s32(z, rq->act_min, rq->act_max);
}

/* Output channels a block, their sums kept for the requantization loop after the block's passes: the passes then
 * hold no requantization values across the assembly (which takes every register), and the loop none of theirs. */
#define LINEAR_S4_BLOCK 48

/* One row of input (in_features a multiple of 8): its column in the pair order of s4_dsp.h, then three output
 * channels per pass (mcu_s4_dot_rows3, in chunks of at most MCU_S4_ROWS3_GROUPS groups), a block's last
 * channels % 3 by the same rows again (recomputed, stored once more with the same value). Refused at the first
 * shift outside [-24, -1] when the build leaves their requantization out (the blocks before it written). */
static __attribute__((noinline)) mcu_status linear_s4_rows3(const mcu_linear_s8_params *p,
                                                            const mcu_per_channel_quant *q, const int8_t *input,
                                                            const int8_t *weight, const int32_t *bias,
                                                            int8_t *output)
{
    _Alignas(8) int16_t col[MCU_S8_COL_MAX];
    uint32_t sums[LINEAR_S4_BLOCK + 2]; /* a block takes up to 2 more channels rather than leave fewer than 3 */
    const int32_t nin = p->in_features;
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    for (int32_t i = 0; i < nin; i += 8) {
        mcu_s4_expand8(input + i, off2, col + i);
    }
    const int32_t stride = nin / 2, groups = nin / 8;
    const int32_t first = groups < MCU_S4_ROWS3_GROUPS ? groups : MCU_S4_ROWS3_GROUPS;
    const linear_s4_rq rq = {.c = 2 * p->output_offset + 1, .output_offset = p->output_offset,
                             .act_min = p->act_min, .act_max = p->act_max};
    const int32_t nout = p->out_features;
    for (int32_t b0 = 0; b0 < nout;) {
        const int32_t nb = nout - b0 >= LINEAR_S4_BLOCK + 3 ? LINEAR_S4_BLOCK : nout - b0;
        for (int32_t o = 0; o < nb; o += 3) {
            const int32_t r = o + 3 <= nb ? o : nb - 3;
            const int8_t *w = weight + (b0 + r) * stride;
            uint32_t s[3]; /* 4096 times a chunk's dot products */
            mcu_s4_dot_rows3(col, w, stride, first, s);
            uint32_t *a = sums + r;
            a[0] = (uint32_t)mcu_asr32(mcu_u32_to_s32(s[0]), 12);
            a[1] = (uint32_t)mcu_asr32(mcu_u32_to_s32(s[1]), 12);
            a[2] = (uint32_t)mcu_asr32(mcu_u32_to_s32(s[2]), 12);
            if (bias != NULL) {
                a[0] += (uint32_t)bias[b0 + r];
                a[1] += (uint32_t)bias[b0 + r + 1];
                a[2] += (uint32_t)bias[b0 + r + 2];
            }
            for (int32_t g = first; g < groups; g += MCU_S4_ROWS3_GROUPS) {
                const int32_t n = groups - g < MCU_S4_ROWS3_GROUPS ? groups - g : MCU_S4_ROWS3_GROUPS;
                mcu_s4_dot_rows3(col + 8 * g, w + 4 * g, stride, n, s);
                a[0] += (uint32_t)mcu_asr32(mcu_u32_to_s32(s[0]), 12);
                a[1] += (uint32_t)mcu_asr32(mcu_u32_to_s32(s[1]), 12);
                a[2] += (uint32_t)mcu_asr32(mcu_u32_to_s32(s[2]), 12);
            }
        }
        const int32_t *const mult = q->multiplier + b0, *const shift = q->shift + b0;
        int8_t *const y = output + b0;
        for (int32_t k = 0; k < nb; ++k) {
#if !MCU_S4_FC_ANY_SHIFT
            if (shift[k] > -1 || shift[k] < -24) {
                return MCU_ERR_UNSUPPORTED;
            }
#endif
            y[k] = linear_s4_requantize(&rq, mcu_u32_to_s32(sums[k]), mult[k], shift[k]);
        }
        b0 += nb;
    }
    return MCU_OK;
}
#endif

#if MCU_S8_DSP && MCU_S4_FC_PAIRS
/* Two batch rows at a time as columns in the pair order of s4_dsp.h (two each when nin is odd); a function of
 * its own, so that its columns are not on the stack while linear_s4_rows3 runs. */
static __attribute__((noinline)) void linear_s4_pairs(const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                                                      const int8_t *input, const int8_t *weight,
                                                      const int32_t *bias, int8_t *output)
{
    const int32_t nin = p->in_features;
    _Alignas(8) int16_t col[2 * MCU_S8_COL_MAX];
    const int odd = nin & 1;
    const int32_t taps = nin + odd;
    const int32_t step = odd ? MCU_S4_PIXEL_B / 2 : MCU_S4_PIXEL_B; /* row r, column lead: (r + 2 lead) steps */
    const uint32_t off2 = mcu_offset_pair(p->input_offset);
    for (int32_t b = 0; b < p->batch; b += 2) {
        const int two = b + 1 < p->batch;
        for (int32_t r = 0; r <= two; ++r) {
            const int8_t *x = input + (b + r) * nin;
            for (int32_t lead = 0; lead <= odd; ++lead) {
                int16_t *c = col + (r + 2 * lead) * step;
                int32_t i = 0;
                if (!odd) {
                    for (; i + 8 <= nin; i += 8) {
                        mcu_s4_expand8(x + i, off2, c + i);
                    }
                } else {
                    c[mcu_s4_col_index(lead != 0 ? 0 : nin, taps)] = 0;
                }
                for (; i < nin; ++i) {
                    c[mcu_s4_col_index(i + lead, taps)] = (int16_t)(x[i] + p->input_offset);
                }
            }
        }
        mcu_s4_matrix_pixels(col, col + 2 * step, nin, p->out_features, weight, bias, q, p->output_offset,
                             p->act_min, p->act_max, output + b * p->out_features,
                             two ? output + (b + 1) * p->out_features : NULL);
    }
}
#endif

mcu_status mcu_linear_s4(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, 1);
    const int32_t w_count = mcu_checked_count(w_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 1);
    MCU_REQUIRE(in_count > 0 && w_count > 0 && out_count > 0 && p->out_features <= INT32_MAX / 4,
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(weight, mcu_s4_bytes(w_count), output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(int32_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t nin = p->in_features;
#if MCU_S8_MVE
    if (mcu_mve_linear_s4(p, q, input, weight, bias, output)) { /* fully_connected/mve_fc_s4.h */
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP
    if (p->batch == 1 && nin % 8 == 0 && nin <= MCU_S8_COL_MAX && p->out_features >= 3) {
#if MCU_S4_FC_ROWS3
        return linear_s4_rows3(p, q, input, weight, bias, output);
#else
        return MCU_ERR_UNSUPPORTED;
#endif
    }
    if (nin % 2 == 0 ? nin <= MCU_S8_COL_MAX : nin < MCU_S8_COL_MAX / 2) {
#if MCU_S4_FC_PAIRS
        linear_s4_pairs(p, q, input, weight, bias, output);
        return MCU_OK;
#else
        return MCU_ERR_UNSUPPORTED;
#endif
    }
#if !MCU_S4_FC_PLAIN
    return MCU_ERR_UNSUPPORTED;
#endif
#endif
    for (int32_t b = 0; b < p->batch; ++b) {
        const int8_t *x = input + b * nin;
        int8_t *y = output + b * p->out_features;
        for (int32_t o = 0; o < p->out_features; ++o) {
            const uint32_t acc = mcu_s4_dot(bias != NULL ? (uint32_t)bias[o] : 0u, x, p->input_offset, weight,
                                            o * nin, nin);
            y[o] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[o], q->shift[o], p->output_offset,
                                        p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
