#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/mve_s8.h"
#include "../common/requant.h"
#include "../common/rq_s8_dsp.h"

#if MCU_S8_DSP
/* The four sums requantized with one table (mcu_rq_ch_apply: one per-tensor multiplier and shift) and
 * packed as bytes in memory order, not yet clamped to the activation range. On the core the table's
 * four words stay in registers over the four lanes: 7 instructions a lane, no loads. */
static inline uint32_t mcu_mean4_rq(const mcu_rq_ch *t, int32_t s0, int32_t s1, int32_t s2, int32_t s3)
{
#if MCU_S8_DSP_NATIVE
    const uint32_t klo = (uint32_t)t->k[0], khi = (uint32_t)((uint64_t)t->k[0] >> 32);
    const uint32_t m = (uint32_t)t->multiplier, sh = (uint32_t)t->rshift;
    uint32_t lo, hi;
#define MCU_MEAN_LANE(a)                                                                          \
    "mov %[lo], %[klo]\n\t"                                                                        \
    "mov %[hi], %[khi]\n\t"                                                                        \
    "smlal %[lo], %[hi], %[" a "], %[m]\n\t"                                                       \
    "bic %[lo], %[" a "], %[lo]\n\t"                                                               \
    "add %[hi], %[hi], %[lo], asr #31\n\t"                                                         \
    "asr %[hi], %[hi], %[sh]\n\t"                                                                  \
    "ssat %[" a "], #8, %[hi]\n\t"
    __asm__(MCU_MEAN_LANE("a0") MCU_MEAN_LANE("a1") MCU_MEAN_LANE("a2") MCU_MEAN_LANE("a3")
            "pkhbt %[a0], %[a0], %[a2], lsl #16\n\t"
            "pkhbt %[a1], %[a1], %[a3], lsl #16\n\t"
            "and %[a0], %[a0], #0x00FF00FF\n\t"
            "and %[a1], %[a1], #0x00FF00FF\n\t"
            "orr %[a0], %[a0], %[a1], lsl #8"
            : [a0] "+r"(s0), [a1] "+r"(s1), [a2] "+r"(s2), [a3] "+r"(s3), [lo] "=&r"(lo), [hi] "=&r"(hi)
            : [klo] "r"(klo), [khi] "r"(khi), [m] "r"(m), [sh] "r"(sh));
#undef MCU_MEAN_LANE
    return (uint32_t)s0;
#else
    return ((uint32_t)mcu_rq_ch_apply(t, s0) & 0xFFu) | (((uint32_t)mcu_rq_ch_apply(t, s1) & 0xFFu) << 8) |
           (((uint32_t)mcu_rq_ch_apply(t, s2) & 0xFFu) << 16) | (((uint32_t)mcu_rq_ch_apply(t, s3) & 0xFFu) << 24);
#endif
}

/* Four channels' sums requantized by the generic function (shifts outside mcu_rq_ch_init's range):
 * one out-of-line copy, so that the fast form below stays inline. */
static __attribute__((noinline)) void mcu_mean4_generic(const mcu_mean_hw_s8_params *p, int8_t *y, int32_t s0,
                                                        int32_t s1, int32_t s2, int32_t s3)
{
    const int32_t sums[4] = {s0, s1, s2, s3};
    for (int32_t k = 0; k < 4; ++k) {
        y[k] = mcu_requantize_to_s8(sums[k], p->multiplier, p->shift, p->output_offset, p->act_min, p->act_max);
    }
}

/* Four channels' sums requantized, clamped to [min4, max4] (the bounds in every byte) and stored as a
 * word at y. */
static inline __attribute__((always_inline)) void mcu_mean4_out(const mcu_mean_hw_s8_params *p, const mcu_rq_ch *rq,
                                                                int fast, uint32_t min4, uint32_t max4, int8_t *y,
                                                                int32_t s0, int32_t s1, int32_t s2, int32_t s3)
{
    if (fast) {
        mcu_store_u32(y, mcu_clamp4_s8(mcu_mean4_rq(rq, s0, s1, s2, s3), min4, max4));
    } else {
        mcu_mean4_generic(p, y, s0, s1, s2, s3);
    }
}

/* The 16-bit lane sums over run <= 256 pixels (step bytes apart) of the 4 * words channels at xp:
 * l[0] channels 0 and 2, l[1] 1 and 3 (SXTB16 and its ROR 8 form), l[2] and l[3] the next four. The run
 * starts with its odd pixel, so the pair loop has no tail. words is a constant where this is inlined. */
static inline void mcu_mean_lanes(const int8_t *xp, int32_t step, int32_t run, int words, uint32_t *l)
{
    uint32_t a02 = 0, a13 = 0, b02 = 0, b13 = 0;
    if (run & 1) {
        const uint32_t v = mcu_load_u32(xp);
        a02 = mcu_sxtb16(v);
        a13 = mcu_sxtb16_ror8(v);
        if (words == 2) {
            const uint32_t w = mcu_load_u32(xp + 4);
            b02 = mcu_sxtb16(w);
            b13 = mcu_sxtb16_ror8(w);
        }
        xp += step;
    }
    for (int32_t k = run >> 1; k > 0; --k) {
        const uint32_t v0 = mcu_load_u32(xp);
        const uint32_t v1 = mcu_load_u32(xp + step);
        a02 = mcu_sxtab16(a02, v0);
        a13 = mcu_sxtab16_ror8(a13, v0);
        a02 = mcu_sxtab16(a02, v1);
        a13 = mcu_sxtab16_ror8(a13, v1);
        if (words == 2) {
            const uint32_t w0 = mcu_load_u32(xp + 4);
            const uint32_t w1 = mcu_load_u32(xp + step + 4);
            b02 = mcu_sxtab16(b02, w0);
            b13 = mcu_sxtab16_ror8(b13, w0);
            b02 = mcu_sxtab16(b02, w1);
            b13 = mcu_sxtab16_ror8(b13, w1);
        }
        xp += 2 * step;
    }
    l[0] = a02;
    l[1] = a13;
    l[2] = b02;
    l[3] = b13;
}
#endif

mcu_status mcu_mean_hw_s8(const mcu_mean_hw_s8_params *p, const int8_t *input, int8_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->multiplier, p->shift),
                MCU_ERR_INVALID_ARG);
    const mcu_shape4 in = p->input;
    const int32_t in_count = mcu_shape4_count(&in, 1);
    MCU_REQUIRE(in_count > 0, MCU_ERR_SHAPE);
    const int32_t hw = in.h * in.w;
    /* The int32 sum of hw values of magnitude <= 255. */
    MCU_REQUIRE(hw <= INT32_MAX / 255, MCU_ERR_UNSUPPORTED);
    const size_t out_bytes = (size_t)in.n * (size_t)in.c;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, out_bytes), MCU_ERR_INVALID_ARG);

#if MCU_S8_MVE
    /* Sixteen channels per step in two vectors of 16-bit lanes, at most 256 pixels at a time
     * (|sum| <= 256 * 128 fits a lane), then into the int32 sums of the even and odd channels; the
     * offset term hw * input_offset is added once (the same int32 sum as below: it fits, checked above).
     * Four 32-bit lanes per pixel instead cost twice the loads and adds. */
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * hw * in.c;
        int8_t *y = output + n * in.c;
        for (int32_t c = 0; c < in.c; c += 16) {
            const mve_pred16_t pa = vctp16q((uint32_t)(in.c - c));
            const mve_pred16_t pb = vctp16q(in.c - c > 8 ? (uint32_t)(in.c - c - 8) : 0u);
            int32x4_t ev_a = vdupq_n_s32(hw * p->input_offset), od_a = ev_a, ev_b = ev_a, od_b = ev_a;
            const int8_t *xp = x_n + c;
            for (int32_t i = 0; i < hw;) {
                const int32_t end = hw - i > 256 ? i + 256 : hw;
                int16x8_t a = vdupq_n_s16(0), b = vdupq_n_s16(0);
                if (in.c - c >= 16) { /* unpredicated loads: no VPST per load */
                    for (; i < end; ++i, xp += in.c) {
                        a = vaddq_s16(a, vldrbq_s16(xp));
                        b = vaddq_s16(b, vldrbq_s16(xp + 8));
                    }
                }
                for (; i < end; ++i, xp += in.c) {
                    a = vaddq_s16(a, vldrbq_z_s16(xp, pa));
                    b = vaddq_s16(b, vldrbq_z_s16(xp + 8, pb));
                }
                ev_a = vaddq_s32(ev_a, vmovlbq_s16(a));
                od_a = vaddq_s32(od_a, vmovltq_s16(a));
                ev_b = vaddq_s32(ev_b, vmovlbq_s16(b));
                od_b = vaddq_s32(od_b, vmovltq_s16(b));
            }
            const int32x4_t mult = vdupq_n_s32(p->multiplier), shift = vdupq_n_s32(p->shift);
            const int32x4_t ra_e = mcu_mve_requantize(ev_a, mult, shift, p->output_offset, p->act_min, p->act_max);
            const int32x4_t ra_o = mcu_mve_requantize(od_a, mult, shift, p->output_offset, p->act_min, p->act_max);
            const int32x4_t rb_e = mcu_mve_requantize(ev_b, mult, shift, p->output_offset, p->act_min, p->act_max);
            const int32x4_t rb_o = mcu_mve_requantize(od_b, mult, shift, p->output_offset, p->act_min, p->act_max);
            /* Even channels into the bottom halves, odd into the top: channel order again. */
            vstrbq_p_s16(y + c, vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), ra_e), ra_o), pa);
            vstrbq_p_s16(y + c + 8, vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), rb_e), rb_o), pb);
        }
    }
    return MCU_OK;
#endif
#if MCU_S8_DSP
    /* SXTAB16 adds the bytes of a word into two pairs of 16-bit lanes, at most 256 pixels at a time
     * (|sum| <= 256 * 128 fits a lane), then into the int32 sums (SXTAH: one instruction a lane); the
     * offset term hw * input_offset is added once (the same int32 sum as below: it fits, checked
     * above). Up to 256 pixels, eight channels a step (two words a pixel: half the loop set-ups and
     * counters); then four a step, in runs of 256 pixels. The sums are requantized with the
     * per-tensor constants held in registers (mcu_mean4_out): the table loads, the lane extraction and
     * the loop set-up were most of the kernel's time on small images (mobilenet_v1's 3 x 3 x 256:
     * 11.7 k instructions, 180 a group of four channels). */
    mcu_rq_ch rq = {{0, 0}, 0, 0}; /* (stores, not a memset call) */
    const int fast = mcu_rq_ch_init(&rq, p->multiplier, p->shift, p->output_offset);
    const uint32_t min4 = mcu_splat4_s8(p->act_min), max4 = mcu_splat4_s8(p->act_max);
    const int32_t off = hw * p->input_offset;
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * hw * in.c;
        int8_t *y = output + n * in.c;
        int32_t c = 0;
        uint32_t next02 = 0, next13 = 0; /* the lanes of channels c .. c + 3 when have_next */
        int have_next = 0;
        for (; c + 4 <= in.c; c += 4) {
            int32_t s0 = off, s1 = off, s2 = off, s3 = off;
            uint32_t l[4];
            if (have_next) {
                l[0] = next02;
                l[1] = next13;
                have_next = 0;
            } else if (hw <= 256 && c + 8 <= in.c) {
                mcu_mean_lanes(x_n + c, in.c, hw, 2, l);
                next02 = l[2];
                next13 = l[3];
                have_next = 1;
            } else {
                const int8_t *xp = x_n + c;
                for (int32_t left = hw; left > 256; left -= 256, xp += 256 * in.c) {
                    mcu_mean_lanes(xp, in.c, 256, 1, l);
                    s0 += mcu_lane_s16(l[0], 0);
                    s1 += mcu_lane_s16(l[1], 0);
                    s2 += mcu_lane_s16(l[0], 1);
                    s3 += mcu_lane_s16(l[1], 1);
                }
                mcu_mean_lanes(xp, in.c, (hw - 1) % 256 + 1, 1, l);
            }
            mcu_mean4_out(p, &rq, fast, min4, max4, y + c, s0 + mcu_lane_s16(l[0], 0), s1 + mcu_lane_s16(l[1], 0),
                          s2 + mcu_lane_s16(l[0], 1), s3 + mcu_lane_s16(l[1], 1));
        }
        for (; c < in.c; ++c) {
            int32_t sum = 0;
            for (int32_t i = 0; i < hw; ++i) {
                sum += x_n[i * in.c + c] + p->input_offset;
            }
            y[c] = mcu_requantize_to_s8(sum, p->multiplier, p->shift, p->output_offset, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
#endif
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * hw * in.c;
        int8_t *y = output + n * in.c;
        for (int32_t c = 0; c < in.c; ++c) {
            int32_t sum = 0;
            for (int32_t i = 0; i < hw; ++i) {
                sum += x_n[i * in.c + c] + p->input_offset;
            }
            y[c] = mcu_requantize_to_s8(sum, p->multiplier, p->shift, p->output_offset, p->act_min, p->act_max);
        }
    }
    return MCU_OK;
}
