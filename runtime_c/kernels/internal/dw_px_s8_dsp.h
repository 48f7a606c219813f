/* 3x3 depthwise convolution (ch_mult 1, dilation 1) pixel by pixel over chunks of channels, for
 * the DSP paths (MCU_S8_DSP, see simd_s8.h) of images too small for the row path of
 * internal/dw_s8_dsp.h to pay back its per-group set-up. Internal: static inline only.
 *
 * On small images (MobileNet's 12x12, 6x6 and 3x3 layers, DS-CNN's 25x5) the row path spends as
 * much on set-up as on arithmetic: per group of four channels it builds weight tables for every
 * column shift, biases for every border configuration, and per output row it makes three calls of
 * its pixel loop (left border, interior, right border). Here a chunk of up to MCU_DWPX_GROUPS
 * groups is set up once (widened weights, the bias with the input offset folded in over all nine
 * taps, the requantization of internal/rq_s8_dsp.h), then every output pixel runs all groups of the
 * chunk with the same unrolled taps. Borders need no tables: a tap outside the input reads the
 * input zero-point from a small buffer, and (zero-point + input_offset) is 0, so
 * zero-point x w = -input_offset x w cancels that tap's share of the folded bias, modulo 2^32 like
 * the accumulation itself. So every pixel, border or not, computes exactly the plain kernel's sum. */
#ifndef MCU_KERNELS_INTERNAL_DW_PX_S8_DSP_H
#define MCU_KERNELS_INTERNAL_DW_PX_S8_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "dw_s8_dsp.h"
#include "rq_s8_dsp.h"
#include "simd_s8.h"

#if MCU_S8_DSP

/* Groups of four channels per chunk: 8 x 184 bytes of tables on the stack. */
#define MCU_DWPX_GROUPS 8
/* Output pixels per image up to which the pixel path is taken (measured on the M33: at 12x12 and
 * below it beats the row path, at 24x24 the row path's set-up is paid back). */
#define MCU_DWPX_MAX_PIXELS 200

typedef struct {
    uint32_t w[18]; /* tap t = 3 i + j at 2 t: lanes (w0, w2), (w1, w3) of the group's channels */
    uint32_t bias[4]; /* bias + input_offset x (sum of the nine weights), modulo 2^32 */
    mcu_rq_ch rq[4];
} mcu_dwpx_group;

typedef struct {
    mcu_dwpx_group g[MCU_DWPX_GROUPS];
    int32_t groups;                    /* in this chunk */
    int32_t ch, in_w, in_h, out_w, stride_w, pad_left;
    uint32_t min4, max4;
    int clamp;                         /* the activation range is narrower than int8 */
    _Alignas(4) int8_t zp[4 * MCU_DWPX_GROUPS]; /* the input zero-point: what a tap outside the input reads */
} mcu_dwpx_chunk;

/* Whether the pixel path serves a layer: 3x3, channels a multiple of 4, every requantization in
 * mcu_rq_ch's range (shift in [-24, -1]). */
static inline int mcu_dwpx_applies(int32_t kh, int32_t kw, int32_t ch, const mcu_per_channel_quant *q)
{
    if (kh != 3 || kw != 3 || ch % 4 != 0) {
        return 0;
    }
    for (int32_t c = 0; c < ch; ++c) {
        if (q->shift[c] > -1 || q->shift[c] < -24) {
            return 0;
        }
    }
    return 1;
}

/* The fields fixed for a layer. */
static inline void mcu_dwpx_layer(mcu_dwpx_chunk *k, int32_t ch, int32_t in_h, int32_t in_w, int32_t out_w,
                                  int32_t stride_w, int32_t pad_left, int32_t input_offset, int32_t act_min,
                                  int32_t act_max)
{
    k->ch = ch;
    k->in_h = in_h;
    k->in_w = in_w;
    k->out_w = out_w;
    k->stride_w = stride_w;
    k->pad_left = pad_left;
    k->min4 = mcu_splat4_s8(act_min);
    k->max4 = mcu_splat4_s8(act_max);
    k->clamp = act_min > -128 || act_max < 127;
    for (int32_t i = 0; i < 4 * MCU_DWPX_GROUPS; ++i) {
        k->zp[i] = (int8_t)-input_offset; /* input_offset in [-127, 128]: an int8 zero-point */
        __asm__("" ::: "memory");       /* no memset call: the kernels reference no libc function */
    }
}

/* The tables of channels [c0, c0 + 4 groups); weights in [3][3][ch] order (mcu_dwpx_applies held). */
static inline void mcu_dwpx_chunk_init(mcu_dwpx_chunk *k, int32_t c0, int32_t groups, const int8_t *weight,
                                       const int32_t *bias, const mcu_per_channel_quant *q, int32_t input_offset,
                                       int32_t output_offset)
{
    const int32_t ch = k->ch;
    k->groups = groups;
    for (int32_t gi = 0; gi < groups; ++gi) {
        mcu_dwpx_group *t = &k->g[gi];
        const int32_t c = c0 + 4 * gi;
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* |sum| <= 9 x 128 */
        for (int32_t tap = 0; tap < 9; ++tap) {
            const int8_t *wp = weight + tap * ch + c;
            const uint32_t wv = mcu_load_u32(wp);
            t->w[2 * tap] = mcu_sxtb16(wv);
            t->w[2 * tap + 1] = mcu_sxtb16_ror8(wv);
            s0 += wp[0];
            s1 += wp[1];
            s2 += wp[2];
            s3 += wp[3];
        }
        const int32_t sums[4] = {s0, s1, s2, s3};
        for (int32_t o = 0; o < 4; ++o) {
            t->bias[o] = (bias != NULL ? (uint32_t)bias[c + o] : 0u) + (uint32_t)(input_offset * sums[o]);
            (void)mcu_rq_ch_init(&t->rq[o], q->multiplier[c + o], q->shift[c + o], output_offset);
        }
    }
}

/* Requantizes, clamps and stores a group's four accumulators. */
static inline void mcu_dwpx_store(const mcu_dwpx_chunk *k, const mcu_dwpx_group *t, uint32_t a0, uint32_t a1,
                                  uint32_t a2, uint32_t a3, int8_t *y)
{
    const uint32_t v = mcu_rq4_pack_s8(t->rq, a0, a1, a2, a3);
    mcu_store_u32(y, k->clamp ? mcu_clamp4_s8(v, k->min4, k->max4) : v);
}

/* One pixel of the chunk: kernel row i's three taps at x[i], x[i] + ch, x[i] + 2 ch (offset to the
 * chunk's first channel). */
static MCU_DW4_NOINLINE void mcu_dwpx_pixel(const mcu_dwpx_chunk *k, const int8_t *x0, const int8_t *x1,
                                            const int8_t *x2, int32_t ch, int8_t *y)
{
    const mcu_dwpx_group *t = k->g;
    const mcu_dwpx_group *end = t + k->groups;
    for (; t != end; ++t, x0 += 4, x1 += 4, x2 += 4, y += 4) {
        uint32_t a0 = t->bias[0], a1 = t->bias[1], a2 = t->bias[2], a3 = t->bias[3];
        MCU_DW4_ROW3(x0, t->w);
        MCU_DW4_ROW3(x1, t->w + 6);
        MCU_DW4_ROW3(x2, t->w + 12);
        mcu_dwpx_store(k, t, a0, a1, a2, a3, y);
    }
}

/* One output row of the chunk: rows[i] is kernel row i's input row offset to the chunk's first
 * channel, NULL outside the input; y the output row, offset likewise. Pixels left to right, each
 * written after its own reads. A pixel whose window crosses the border first gathers its window
 * (the zero-point where a tap falls outside) into `win`, 3 x 3 taps of the chunk's channels. */
static inline void mcu_dwpx_row(const mcu_dwpx_chunk *k, const int8_t *const *rows, int8_t *y)
{
    const int32_t ch = k->ch, in_w = k->in_w, bytes = 4 * k->groups;
    const int full = rows[0] != NULL && rows[1] != NULL && rows[2] != NULL;
    _Alignas(4) int8_t win[9 * 4 * MCU_DWPX_GROUPS];
    const uint32_t zp4 = mcu_load_u32(k->zp);
    int32_t iw0 = -k->pad_left;
    for (int32_t ow = 0; ow < k->out_w; ++ow, iw0 += k->stride_w, y += ch) {
        if (full && iw0 >= 0 && iw0 + 3 <= in_w) {
            mcu_dwpx_pixel(k, rows[0] + iw0 * ch, rows[1] + iw0 * ch, rows[2] + iw0 * ch, ch, y);
            continue;
        }
        int8_t *dst = win;
        for (int32_t i = 0; i < 3; ++i) {
            for (int32_t j = 0; j < 3; ++j, dst += 4 * MCU_DWPX_GROUPS) {
                const int32_t iw = iw0 + j;
                if (rows[i] != NULL && iw >= 0 && iw < in_w) {
                    const int8_t *src = rows[i] + iw * ch;
                    for (int32_t b = 0; b < bytes; b += 4) {
                        mcu_store_u32(dst + b, mcu_load_u32(src + b));
                        __asm__("" ::: "memory"); /* no memcpy call */
                    }
                } else {
                    for (int32_t b = 0; b < bytes; b += 4) {
                        mcu_store_u32(dst + b, zp4);
                        __asm__("" ::: "memory");
                    }
                }
            }
        }
        mcu_dwpx_pixel(k, win, win + 12 * MCU_DWPX_GROUPS, win + 24 * MCU_DWPX_GROUPS, 4 * MCU_DWPX_GROUPS, y);
    }
}

#endif /* MCU_S8_DSP */

#endif /* MCU_KERNELS_INTERNAL_DW_PX_S8_DSP_H */
