#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/mve_s8.h"
#include "../common/requant.h"
#include "../common/rq_s8_dsp.h"

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
    /* Four channels per step: SXTAB16 adds the bytes of a word into two pairs of 16-bit lanes, at most
     * 256 pixels at a time (|sum| <= 256 * 128 fits a lane), then into the int32 sums; the offset
     * term hw * input_offset is added once (the same int32 sum as below: it fits, checked above). */
    /* The four sums requantized in one SMLAL each and stored as a word (rq_s8_dsp.h) when the shift
     * allows it: the generic requantization was most of the kernel's time on small images
     * (mobilenet_v1's 3 x 3 x 256: about 100 cycles a channel). */
    mcu_rq_ch rq[4] = {{{0, 0}, 0, 0}};
    const int fast = mcu_rq_ch_init(&rq[0], p->multiplier, p->shift, p->output_offset);
    rq[1] = rq[0];
    rq[2] = rq[0];
    rq[3] = rq[0];
    const uint32_t min4 = mcu_splat4_s8(p->act_min), max4 = mcu_splat4_s8(p->act_max);
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * hw * in.c;
        int8_t *y = output + n * in.c;
        int32_t c = 0;
        for (; c + 4 <= in.c; c += 4) {
            int32_t s0 = hw * p->input_offset, s1 = s0, s2 = s0, s3 = s0;
            const int8_t *xp = x_n + c;
            for (int32_t i = 0; i < hw;) {
                const int32_t end = hw - i > 256 ? i + 256 : hw;
                uint32_t a02 = 0, a13 = 0;
                for (; i + 2 <= end; i += 2, xp += 2 * in.c) {
                    const uint32_t v0 = mcu_load_u32(xp);
                    const uint32_t v1 = mcu_load_u32(xp + in.c);
                    a02 = mcu_sxtab16(a02, v0);
                    a13 = mcu_sxtab16_ror8(a13, v0);
                    a02 = mcu_sxtab16(a02, v1);
                    a13 = mcu_sxtab16_ror8(a13, v1);
                }
                if (i < end) {
                    const uint32_t v0 = mcu_load_u32(xp);
                    a02 = mcu_sxtab16(a02, v0);
                    a13 = mcu_sxtab16_ror8(a13, v0);
                    ++i;
                    xp += in.c;
                }
                s0 += mcu_lane16(a02, 0);
                s1 += mcu_lane16(a13, 0);
                s2 += mcu_lane16(a02, 1);
                s3 += mcu_lane16(a13, 1);
            }
            if (fast) {
                const uint32_t v = mcu_rq4_pack_s8(rq, (uint32_t)s0, (uint32_t)s1, (uint32_t)s2, (uint32_t)s3);
                mcu_store_u32(y + c, mcu_clamp4_s8(v, min4, max4));
                continue;
            }
            const int32_t sums[4] = {s0, s1, s2, s3};
            for (int32_t k = 0; k < 4; ++k) { /* one copy of the requantization: code size */
                y[c + k] = mcu_requantize_to_s8(sums[k], p->multiplier, p->shift, p->output_offset, p->act_min,
                                                p->act_max);
            }
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
