#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"
#include "../common/simd_s8.h"

/* Products of int16 and int8 are at most 2^22 in magnitude, so MCU_S16_PART of them fit an int32 partial sum
 * before it joins the 64-bit total (the order of additions does not change an exact sum). */
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

/* Two output rows over columns [i, end): four columns a step, each input word pair rearranged to
 * (x0, x2) and (x1, x3) to meet SXTB16's (w0, w2) and (w1, w3) lanes, so one input load feeds four SMLADs. */
static void mcu_s16_two_rows(const int16_t *x, const int8_t *w0, const int8_t *w1, int32_t i, int32_t end,
                             int32_t *part0, int32_t *part1)
{
    uint32_t a0 = (uint32_t)*part0;
    uint32_t a1 = (uint32_t)*part1;
    for (; i + 4 <= end; i += 4) {
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
    int32_t p0 = (int32_t)a0, p1 = (int32_t)a1;
    for (; i < end; ++i) {
        p0 += (int32_t)x[i] * (int32_t)w0[i];
        p1 += (int32_t)x[i] * (int32_t)w1[i];
    }
    *part0 = p0;
    *part1 = p1;
}
#endif

int32_t mcu_linear_s16_get_buffer_size(const mcu_linear_s16_params *p)
{
    (void)p;
    return 0;
}

mcu_status mcu_linear_s16(const mcu_context *ctx, const mcu_linear_s16_params *p, const mcu_per_channel_quant *q,
                          const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_act_s16_valid(p->act_min, p->act_max), MCU_ERR_INVALID_ARG);
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    const int32_t in_count = mcu_checked_count(in_dims, 2, 1);
    const int32_t w_count = mcu_checked_count(w_dims, 2, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 2, 1);
    MCU_REQUIRE(in_count > 0 && w_count > 0 && out_count > 0 && out_count <= INT32_MAX / 2 &&
                    in_count <= INT32_MAX / 2,
                MCU_ERR_SHAPE);
    for (int32_t o = 0; o < p->out_features; ++o) {
        MCU_REQUIRE(mcu_quant_s16_valid(q->multiplier[o], q->shift[o]), MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count * sizeof(int16_t), output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count, output, out_bytes) &&
                    (bias == NULL ||
                     !mcu_overlaps(bias, (size_t)p->out_features * sizeof(int64_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

    const int32_t nin = p->in_features;
    for (int32_t b = 0; b < p->batch; ++b) {
        const int16_t *x = input + (size_t)b * (size_t)nin;
        int16_t *y = output + (size_t)b * (size_t)p->out_features;
        const int8_t *w = weight;
        int32_t o = 0;
#if MCU_S8_DSP
        for (; o + 2 <= p->out_features; o += 2) {
            int64_t acc0 = bias != NULL ? bias[o] : 0;
            int64_t acc1 = bias != NULL ? bias[o + 1] : 0;
            for (int32_t i = 0; i < nin; i += MCU_S16_PART) {
                const int32_t end = nin - i > MCU_S16_PART ? i + MCU_S16_PART : nin;
                int32_t part0 = 0, part1 = 0;
                mcu_s16_two_rows(x, w, w + nin, i, end, &part0, &part1);
                acc0 += part0;
                acc1 += part1;
            }
            w += 2 * nin;
            const int32_t v0 = mcu_requantize_s64(acc0, mcu_reduce_multiplier_q15(q->multiplier[o]), q->shift[o]);
            const int32_t v1 =
                mcu_requantize_s64(acc1, mcu_reduce_multiplier_q15(q->multiplier[o + 1]), q->shift[o + 1]);
            y[o] = mcu_clamp_s16(v0, p->act_min, p->act_max);
            y[o + 1] = mcu_clamp_s16(v1, p->act_min, p->act_max);
        }
#endif
        for (; o < p->out_features; ++o) {
            int64_t acc = bias != NULL ? bias[o] : 0;
            int32_t i = 0;
            while (i < nin) {
                const int32_t end = nin - i > MCU_S16_PART ? i + MCU_S16_PART : nin;
                int32_t part = 0;
                for (; i < end; ++i) {
                    part += (int32_t)x[i] * (int32_t)w[i];
                }
                acc += part;
            }
            w += nin;
            const int32_t v = mcu_requantize_s64(acc, mcu_reduce_multiplier_q15(q->multiplier[o]), q->shift[o]);
            y[o] = mcu_clamp_s16(v, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
