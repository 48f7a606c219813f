/* Helium (MVE) depthwise convolution (ch_mult 1, dilation 1, at most 16 taps, channels a multiple of
 * 4, no left shift in the requantization) as one VMLADAVA per channel and output pixel.
 *
 * The input rows of a chunk of channels are copied into a ring of kernel_h rows laid out
 * [quad of channels][padded column][ring slot][4 channels], padded columns and padded rows holding the
 * input zero-point. Then the kh * kw taps of one channel of one output pixel lie within 16 * kh * kw
 * bytes of the pixel's base in its quad: one byte gather (VLDRB.U8 with a vector of 8-bit offsets, tap
 * t = j * kh + i at (j * kh + slot(i)) * 4 + channel) loads them all, and one VMLADAVA multiplies them
 * with the channel's taps (a 16-byte row of a per-chunk table, zero past the last tap) into a 32-bit
 * accumulator that starts from the folded bias (mve_s8.h: padded taps hold the zero-point, so
 * bias + off * sum(w) + sum(x * w) is the plain kernels' sum modulo 2^32). The ring slot of input row
 * ih is ih mod kh, so each input row is copied once; the offsets of each ring phase are made once per
 * chunk. Four channels make one vector for the requantization of mcu_mve_requantize (no left shift).
 *
 * The cost per channel and pixel is the gather, the load of the taps and the VMLADAVA, plus a quarter
 * of the bias loads, the requantization and the store: the metric here is instructions, and a byte
 * gather counts as one (on silicon it takes about one beat per byte). Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_MVE_DW_S8_H
#define MCU_KERNELS_INTERNAL_MVE_DW_S8_H

#include <stdint.h>

#include "../common/mve_s8.h"

#if MCU_S8_MVE

/* The stack buffer of the layer: a chunk's table (112 bytes per quad of channels and 32 for the row
 * loop's steps) and its ring (kernel_h rows of the padded columns per quad), 5 KiB in all. */
#define MCU_MVE_DWG_BUF 5120
#define MCU_MVE_DWG_TAPS 16
/* Per quad of channels: folded biases, the four channels' taps, multipliers, shifts. */
#define MCU_MVE_DWG_QUAD_BYTES 112

/* Channels per chunk (a multiple of 4) for this layer, or 0 when the path does not apply. */
static inline int32_t mcu_mve_dwg_chunk(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q)
{
    const int32_t c = p->input.c;
    if (p->ch_mult != 1 || p->dilation_h != 1 || p->dilation_w != 1 || c % 4 != 0 ||
        p->kernel_h * p->kernel_w > MCU_MVE_DWG_TAPS || p->stride_w > 16 || p->output.w > MCU_MVE_DWG_BUF ||
        !mcu_mve_no_left_shift(q, c)) {
        return 0;
    }
    const int32_t wp = (p->output.w - 1) * p->stride_w + p->kernel_w; /* padded columns the windows cover */
    const int32_t chunk = (MCU_MVE_DWG_BUF - 32) / (wp * p->kernel_h * 4 + MCU_MVE_DWG_QUAD_BYTES) * 4;
    return chunk < c ? chunk : c;
}

/* One output row of a chunk: for each of the row's pixels, nq quads of channels. xb: the first pixel's
 * window in quad 0 of the ring; qs: bytes per quad of the ring; tab: the chunk's table, followed by
 * five words: the step of xb from the end of a pixel's quads to the next pixel, the step of y
 * likewise, the pixel count (counted down here), nq and the table's bytes; o0..o3: the gather offsets
 * of channels 0..3 of a quad; lo: act_min - output_offset in every lane (the clamp before the offset,
 * as in mcu_mve_matrix_block); hi: act_max - output_offset. One assembly block for the row, so that
 * every pointer stays in a register (the accumulators' registers carry the steps between pixels). */
static inline void mcu_mve_dwg_row(const int8_t *xb, int32_t *tab, int8_t *y, int32_t nq, int32_t qs, uint8x16_t o0,
                                   uint8x16_t o1, uint8x16_t o2, uint8x16_t o3, int32x4_t lo, int32_t hi, int32_t off)
{
    int32_t a0 = nq, a1, a2, a3;
    __asm__ volatile("2: dls lr, %[a0]\n"
                     "1: ldrd %[a0], %[a1], [%[t]], #8\n"
                     "   ldrd %[a2], %[a3], [%[t]], #8\n"
                     "   vldrb.u8 q0, [%[xb], %q[o0]]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.u8 q0, [%[xb], %q[o1]]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a1], q0, q1\n"
                     "   vldrb.u8 q0, [%[xb], %q[o2]]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.u8 q0, [%[xb], %q[o3]]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a3], q0, q1\n"
                     "   add %[xb], %[qs]\n"
                     "   vmov q2[2], q2[0], %[a0], %[a2]\n"
                     "   vmov q2[3], q2[1], %[a1], %[a3]\n"
                     "   vldrw.u32 q0, [%[t]], #16\n"
                     "   vldrw.u32 q1, [%[t]], #16\n"
                     "   vqrdmulh.s32 q2, q2, q0\n"
                     "   vand q0, q2, q1\n"
                     "   vshr.s32 q0, q0, #31\n"
                     "   vqadd.s32 q2, q2, q0\n"
                     "   vrshl.s32 q2, q2, q1\n"
                     "   vmax.s32 q2, q2, %q[lo]\n"
                     "   vdup.32 q0, %[hi]\n"
                     "   vmin.s32 q2, q2, q0\n"
                     "   vadd.i32 q2, q2, %[off]\n"
                     "   vstrb.32 q2, [%[y]], #4\n"
                     "   le lr, 1b\n"
                     "   ldrd %[a1], %[a2], [%[t]]\n"
                     "   add %[xb], %[a1]\n"
                     "   add %[y], %[a2]\n"
                     "   ldrd %[a1], %[a0], [%[t], #8]\n"
                     "   ldr %[a2], [%[t], #16]\n"
                     "   subs %[a1], %[a1], #1\n"
                     "   str %[a1], [%[t], #8]\n"
                     "   sub %[t], %[t], %[a2]\n"
                     "   bne 2b\n"
                     : [a0] "+&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2), [a3] "=&Te"(a3), [xb] "+r"(xb), [t] "+r"(tab),
                       [y] "+r"(y)
                     : [qs] "r"(qs), [o0] "w"(o0), [o1] "w"(o1), [o2] "w"(o2), [o3] "w"(o3), [lo] "w"(lo),
                       [hi] "r"(hi), [off] "r"(off)
                     : "q0", "q1", "q2", "lr", "cc", "memory");
}

/* The chunk's table: per quad the folded biases, each channel's taps as 16 bytes (tap (i, j) in lane
 * j * kh + i, zero past the last tap: a scatter of the four channels' bytes per tap), the multipliers
 * and the shifts. */
static inline void mcu_mve_dwg_table(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                     const int8_t *weight, const int32_t *bias, int32_t c0, int32_t chunk,
                                     int32_t *tab)
{
    const int32_t kh = p->kernel_h, kw = p->kernel_w, ch = p->input.c;
    const uint32x4_t lanes = vmulq_n_u32(vidupq_n_u32(0, 1), 16); /* channel l's taps at 16 * l */
    mcu_mve_fill_s8((int8_t *)tab, 0, chunk / 4 * MCU_MVE_DWG_QUAD_BYTES);
    for (int32_t k = 0; k < chunk; k += 4) {
        int32_t *t = tab + k / 4 * (MCU_MVE_DWG_QUAD_BYTES / 4);
        int8_t *wt = (int8_t *)(t + 4);
        const int32_t c = c0 + k;
        int32x4_t sum = vdupq_n_s32(0);
        for (int32_t i = 0; i < kh; ++i) {
            for (int32_t j = 0; j < kw; ++j) {
                const int32x4_t w = vldrbq_s32(weight + (i * kw + j) * ch + c);
                sum = vaddq_s32(sum, w);
                vstrbq_scatter_offset_s32(wt + j * kh + i, lanes, w);
            }
        }
        const int32x4_t b = bias != NULL ? vldrwq_s32(bias + c) : vdupq_n_s32(0);
        vstrwq_s32(t, vmlaq_n_s32(b, sum, p->input_offset)); /* modulo 2^32 */
        vstrwq_s32(t + 20, vldrwq_s32(q->multiplier + c));
        vstrwq_s32(t + 24, vldrwq_s32(q->shift + c));
    }
}

/* Input row ih (zero-points when outside the image) into ring slot ih mod kh of every quad of the
 * chunk: 16 channels per step, one word per quad scattered qs bytes apart. */
static inline void mcu_mve_dwg_load_row(const mcu_depthwise_conv2d_s8_params *p, const int8_t *x_n, int32_t ih,
                                        int32_t c0, int32_t chunk, int32_t wp, int32_t qs, int8_t *ring)
{
    const int32_t kh = p->kernel_h, ch = p->input.c, w = p->input.w;
    const int32_t slot = ((ih % kh) + kh) % kh;
    const uint32x4_t so = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)qs);
    const int32_t iw_end = w < wp - p->pad_left ? w : wp - p->pad_left;
    const int inside = ih >= 0 && ih < p->input.h;
    const int8x16_t zp = vdupq_n_s8((int8_t)-p->input_offset);
    for (int32_t iw = 0; iw < iw_end; ++iw) {
        const int8_t *src = x_n + ((size_t)ih * (size_t)w + (size_t)iw) * (size_t)ch + (size_t)c0;
        int8_t *dst = ring + ((iw + p->pad_left) * kh + slot) * 4;
        for (int32_t k = 0; k < chunk; k += 16, src += 16, dst += 4 * qs) {
            const int32_t rest = chunk - k;
            if (rest >= 16) {
                const int32x4_t v = inside ? vreinterpretq_s32_s8(vldrbq_s8(src)) : vreinterpretq_s32_s8(zp);
                vstrwq_scatter_offset_s32((int32_t *)dst, so, v);
            } else {
                const mve_pred16_t pr = vctp32q((uint32_t)(rest / 4));
                const int32x4_t v =
                    inside ? vreinterpretq_s32_s8(vldrbq_z_s8(src, vctp8q((uint32_t)rest))) : vreinterpretq_s32_s8(zp);
                vstrwq_scatter_offset_p_s32((int32_t *)dst, so, v, pr);
            }
        }
    }
}

/* Output image n of the layer, channels [c0, c0 + chunk) (chunk from mcu_mve_dwg_chunk). Output row r
 * is written after the ring holds every input row its windows read, and rows enter the ring in order
 * and no earlier than the first output row that reads them: an output that lands on its own input
 * (mcu_depthwise_conv2d_s8_inplace: row r on row r, rows <= r already copied) reads nothing it wrote.
 * tab: 112 bytes per quad and 5 words, ring after it, both 16-byte aligned. */
static inline void mcu_mve_dwg_chunk_run(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                         const int8_t *x_n, const int8_t *weight, const int32_t *bias, int32_t c0,
                                         int32_t chunk, int8_t *y_n, int8_t *ring, int32_t *tab)
{
    const int32_t kh = p->kernel_h, kw = p->kernel_w, ch = p->input.c;
    const int32_t taps = kh * kw;
    const int32_t wp = (p->output.w - 1) * p->stride_w + kw;
    const int32_t qs = wp * kh * 4;
    const int32_t nq = chunk / 4;
    mcu_mve_dwg_table(p, q, weight, bias, c0, chunk, tab);
    mcu_mve_fill_s8(ring, (int8_t)-p->input_offset, nq * qs);
    /* Gather offsets of each ring phase (the slot of tap row 0), channel 0 of a quad. */
    _Alignas(16) uint8_t offs[MCU_S8_MVE_DW_ROWS_MAX][16];
    for (int32_t ph = 0; ph < kh; ++ph) {
        for (int32_t l = 0; l < 16; ++l) {
            const int32_t j = l / kh, i = l % kh;
            offs[ph][l] = l < taps ? (uint8_t)((j * kh + (ph + i) % kh) * 4) : 0u;
        }
    }
    const int32x4_t lo = vdupq_n_s32(p->act_min - p->output_offset);
    const int32_t hi = p->act_max - p->output_offset;
    /* the row loop's steps between pixels, after the table (mcu_mve_dwg_row) */
    int32_t *tail = tab + nq * (MCU_MVE_DWG_QUAD_BYTES / 4);
    tail[0] = p->stride_w * kh * 4 - nq * qs;
    tail[1] = ch - chunk;
    tail[3] = nq;
    tail[4] = nq * MCU_MVE_DWG_QUAD_BYTES;
    int32_t next = -p->pad_top; /* the next input row to copy */
    for (int32_t r = 0; r < p->output.h; ++r) {
        const int32_t ih0 = r * p->stride_h - p->pad_top;
        next = next > ih0 ? next : ih0;
        for (; next < ih0 + kh; ++next) {
            mcu_mve_dwg_load_row(p, x_n, next, c0, chunk, wp, qs, ring);
        }
        tail[2] = p->output.w;
        const uint8x16_t o0 = vldrbq_u8(offs[((ih0 % kh) + kh) % kh]);
        const uint8x16_t o1 = vaddq_n_u8(o0, 1);
        const uint8x16_t o2 = vaddq_n_u8(o0, 2);
        const uint8x16_t o3 = vaddq_n_u8(o0, 3);
        mcu_mve_dwg_row(ring, tab, y_n + (size_t)r * (size_t)p->output.w * (size_t)ch + (size_t)c0, nq, qs, o0, o1,
                        o2, o3, lo, hi, p->output_offset);
    }
}

/* The whole layer, image by image and chunk by chunk of channels (chunk: mcu_mve_dwg_chunk). A chunk
 * writes only its own channels and reads only its own, so chunks may follow each other on an output
 * that is the input itself (the in-place kernel); an output that overlaps the input otherwise must
 * take a single chunk. Not inlined: its stack buffers stay out of the callers' frames. */
static __attribute__((noinline, unused)) void mcu_mve_dwg_layer(const mcu_depthwise_conv2d_s8_params *p,
                                                                const mcu_per_channel_quant *q, const int8_t *input,
                                                                const int8_t *weight, const int32_t *bias,
                                                                int8_t *output, int32_t chunk)
{
    _Alignas(16) int32_t buf[MCU_MVE_DWG_BUF / 4];
    const size_t in_img = (size_t)p->input.h * (size_t)p->input.w * (size_t)p->input.c;
    const size_t out_img = (size_t)p->output.h * (size_t)p->output.w * (size_t)p->output.c;
    for (int32_t n = 0; n < p->input.n; ++n) {
        for (int32_t c0 = 0; c0 < p->input.c; c0 += chunk) {
            const int32_t rest = p->input.c - c0;
            mcu_mve_dwg_chunk_run(p, q, input + (size_t)n * in_img, weight, bias, c0, rest < chunk ? rest : chunk,
                                  output + (size_t)n * out_img, (int8_t *)buf + chunk / 4 * MCU_MVE_DWG_QUAD_BYTES + 32,
                                  buf);
        }
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_DW_S8_H */
