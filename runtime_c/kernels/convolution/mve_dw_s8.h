/* Helium (MVE) depthwise convolution (ch_mult 1, dilation 1, at most 16 taps, channels a multiple of
 * 4, no left shift in the requantization) as one VMLADAVA per channel and output pixel.
 *
 * The input rows of a chunk of channels are copied into a ring of kernel_h rows laid out
 * [channel][padded column][ring slot], padded columns and padded rows holding the input zero-point:
 * a channel's plane holds wp * kh bytes. Then the kh * kw taps of one channel of one output pixel are
 * kh * kw consecutive bytes of its plane (column-major: lane j * kh + s holds column j, ring slot s),
 * and one contiguous 16-byte load (VLDRB.U8) reads them all; one VMLADAVA multiplies them with the
 * channel's taps in the same lane order (a 16-byte row of a per-chunk table, zero past the last tap,
 * so that the bytes the load reads beyond the window add nothing) into a 32-bit accumulator that
 * starts from the folded bias (mve_s8.h: padded taps hold the zero-point, so bias + off * sum(w) +
 * sum(x * w) is the plain kernels' sum modulo 2^32). The ring slot of input row ih is ih mod kh, so
 * each input row is copied once (a byte scatter into the planes), and the slot of tap row i depends on
 * the output row's phase (ih0 mod kh): the chunk has one table per phase, each with the taps permuted
 * to that phase's slots, all made once per chunk. Four channels make one vector for the
 * requantization of mcu_mve_requantize (no left shift).
 *
 * The cost per channel and pixel is the load of the window, the load of the taps and the VMLADAVA,
 * plus a quarter of the bias loads, the requantization and the store; no gather in the pixel loop (a
 * gather takes a cycle per element on the Cortex-M55, docs/cycles.md). Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_MVE_DW_S8_H
#define MCU_KERNELS_INTERNAL_MVE_DW_S8_H

#include <stdint.h>

#include "../common/mve_s8.h"

#if MCU_S8_MVE

/* The stack buffer of the layer: a chunk's tables (kernel_h of them, 112 bytes per quad of channels
 * and 32 for the row loop's steps each), its ring (kernel_h rows of the padded columns per channel)
 * and 16 bytes that the last window's 16-byte load may read past the ring, 5 KiB in all. */
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
    const int32_t kh = p->kernel_h;
    const int32_t wp = (p->output.w - 1) * p->stride_w + p->kernel_w; /* padded columns the windows cover */
    const int32_t chunk = (MCU_MVE_DWG_BUF - 32 * kh - 16) / (wp * kh * 4 + MCU_MVE_DWG_QUAD_BYTES * kh) * 4;
    return chunk < c ? chunk : c;
}

/* One output row of a chunk: for each of the row's pixels, nq quads of channels. xb: the first pixel's
 * window in channel 0's plane of the ring; plane: bytes per channel of the ring; tab: the table of the
 * row's phase, followed by five words: the step of xb from the end of a pixel's channels to the next
 * pixel, the step of y likewise, the pixel count (counted down here), nq and the table's bytes; lo:
 * act_min - output_offset in every lane (the clamp before the offset, as in mcu_mve_matrix_block); hi:
 * act_max - output_offset. One assembly block for the row, so that every pointer stays in a register
 * (the accumulators' registers carry the steps between pixels). Each window load follows a vector
 * multiply-accumulate, so that its first beats overlap that instruction's last. */
static inline void mcu_mve_dwg_row(const int8_t *xb, int32_t *tab, int8_t *y, int32_t nq, int32_t plane, int32x4_t lo,
                                   int32x4_t hi, int32_t off)
{
    int32_t a0 = nq, a1, a2, a3;
    __asm__ volatile("2: dls lr, %[a0]\n"
                     "1: ldrd %[a0], %[a1], [%[t]], #8\n"
                     "   ldrd %[a2], %[a3], [%[t]], #8\n"
                     "   vldrb.u8 q0, [%[xb]]\n"
                     "   add %[xb], %[pl]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a0], q0, q1\n"
                     "   vldrb.u8 q0, [%[xb]]\n"
                     "   add %[xb], %[pl]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a1], q0, q1\n"
                     "   vldrb.u8 q0, [%[xb]]\n"
                     "   add %[xb], %[pl]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a2], q0, q1\n"
                     "   vldrb.u8 q0, [%[xb]]\n"
                     "   add %[xb], %[pl]\n"
                     "   vldrb.u8 q1, [%[t]], #16\n"
                     "   vmladava.s8 %[a3], q0, q1\n"
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
                     "   vmin.s32 q2, q2, %q[hi]\n"
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
                     : [pl] "r"(plane), [lo] "w"(lo), [hi] "w"(hi), [off] "r"(off)
                     : "q0", "q1", "q2", "lr", "cc", "memory");
}

/* The chunk's kh tables, one per phase ph (the ring slot of the window's top row), tw words apart:
 * per quad the folded biases, each channel's taps as 16 bytes (tap (i, j) in lane j * kh + (i + ph)
 * mod kh, zero past the last tap: a scatter of the four channels' bytes per tap and phase), the
 * multipliers and the shifts; every weight and parameter read once. */
static inline void mcu_mve_dwg_tables(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                      const int8_t *weight, const int32_t *bias, int32_t c0, int32_t chunk, int32_t tw,
                                      int32_t *tab)
{
    const int32_t kh = p->kernel_h, kw = p->kernel_w, ch = p->input.c;
    const uint32x4_t lanes = vmulq_n_u32(vidupq_n_u32(0, 1), 16); /* channel l's taps at 16 * l */
    for (int32_t ph = 0; ph < kh; ++ph) {
        mcu_mve_fill_s8((int8_t *)(tab + ph * tw), 0, chunk / 4 * MCU_MVE_DWG_QUAD_BYTES);
    }
    for (int32_t k = 0; k < chunk; k += 4) {
        int32_t *t = tab + k / 4 * (MCU_MVE_DWG_QUAD_BYTES / 4);
        int8_t *wt = (int8_t *)(t + 4);
        const int32_t c = c0 + k;
        int32x4_t sum = vdupq_n_s32(0);
        for (int32_t i = 0; i < kh; ++i) {
            for (int32_t j = 0; j < kw; ++j) {
                const int32x4_t w = vldrbq_s32(weight + (i * kw + j) * ch + c);
                sum = vaddq_s32(sum, w);
                for (int32_t ph = 0, s = i; ph < kh; ++ph, s = s + 1 == kh ? 0 : s + 1) {
                    vstrbq_scatter_offset_s32(wt + ph * 4 * tw + j * kh + s, lanes, w);
                }
            }
        }
        const int32x4_t b = bias != NULL ? vldrwq_s32(bias + c) : vdupq_n_s32(0);
        const int32x4_t kb = vmlaq_n_s32(b, sum, p->input_offset); /* modulo 2^32 */
        const int32x4_t m = vldrwq_s32(q->multiplier + c);
        const int32x4_t sh = vldrwq_s32(q->shift + c);
        for (int32_t ph = 0; ph < kh; ++ph, t += tw) {
            vstrwq_s32(t, kb);
            vstrwq_s32(t + 20, m);
            vstrwq_s32(t + 24, sh);
        }
    }
}

/* Input row ih (zero-points when outside the image) into ring slot ih mod kh of every channel plane
 * of the chunk: per group of eight channels (four for the last of a chunk that is not a multiple of
 * eight), column by column, their bytes scattered plane bytes apart. */
static inline void mcu_mve_dwg_load_row(const mcu_depthwise_conv2d_s8_params *p, const int8_t *x_n, int32_t ih,
                                        int32_t c0, int32_t chunk, int32_t wp, int32_t plane, int8_t *ring)
{
    const int32_t kh = p->kernel_h, ch = p->input.c, w = p->input.w;
    const int32_t slot = ((ih % kh) + kh) % kh;
    const uint16x8_t so = vmulq_n_u16(vidupq_n_u16(0, 1), (uint16_t)plane);
    const uint32x4_t so4 = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)plane);
    const int32_t cols = w < wp - p->pad_left ? w : wp - p->pad_left;
    if (cols <= 0) {
        return;
    }
    int8_t *dst0 = ring + p->pad_left * kh + slot;
    if (ih < 0 || ih >= p->input.h) {
        const int16x8_t zp = vdupq_n_s16((int16_t)-p->input_offset);
        for (int32_t k = 0; k < chunk; k += 8) {
            const mve_pred16_t pr = vctp16q((uint32_t)(chunk - k));
            for (int32_t iw = 0; iw < cols; ++iw) {
                vstrbq_scatter_offset_p_s16(dst0 + k * plane + iw * kh, so, zp, pr);
            }
        }
        return;
    }
    const int8_t *src0 = x_n + (size_t)ih * (size_t)w * (size_t)ch + (size_t)c0;
    int32_t k = 0;
    for (; k + 8 <= chunk; k += 8) {
        const int8_t *src = src0 + k;
        int8_t *dst = dst0 + k * plane;
        __asm__ volatile("   dls lr, %[n]\n"
                         "1: vldrb.s16 q0, [%[s]]\n"
                         "   add %[s], %[cs]\n"
                         "   vstrb.16 q0, [%[d], %q[so]]\n"
                         "   add %[d], %[kh]\n"
                         "   le lr, 1b\n"
                         : [s] "+l"(src), [d] "+r"(dst)
                         : [n] "r"(cols), [cs] "r"(ch), [kh] "r"(kh), [so] "w"(so)
                         : "q0", "lr", "memory");
    }
    if (k < chunk) { /* four channels */
        const int8_t *src = src0 + k;
        int8_t *dst = dst0 + k * plane;
        __asm__ volatile("   dls lr, %[n]\n"
                         "1: vldrb.s32 q0, [%[s]]\n"
                         "   add %[s], %[cs]\n"
                         "   vstrb.32 q0, [%[d], %q[so]]\n"
                         "   add %[d], %[kh]\n"
                         "   le lr, 1b\n"
                         : [s] "+l"(src), [d] "+r"(dst)
                         : [n] "r"(cols), [cs] "r"(ch), [kh] "r"(kh), [so] "w"(so4)
                         : "q0", "lr", "memory");
    }
}

/* Output image n of the layer, channels [c0, c0 + chunk) (chunk from mcu_mve_dwg_chunk). Output row r
 * is written after the ring holds every input row its windows read, and rows enter the ring in order
 * and no earlier than the first output row that reads them: an output that lands on its own input
 * (mcu_depthwise_conv2d_s8_inplace: row r on row r, rows <= r already copied) reads nothing it wrote.
 * tab: kernel_h tables of 112 bytes per quad and 8 words each, ring after them, both 16-byte aligned,
 * and 16 readable bytes after the ring. */
static inline void mcu_mve_dwg_chunk_run(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                         const int8_t *x_n, const int8_t *weight, const int32_t *bias, int32_t c0,
                                         int32_t chunk, int8_t *y_n, int8_t *ring, int32_t *tab)
{
    const int32_t kh = p->kernel_h, kw = p->kernel_w, ch = p->input.c;
    const int32_t wp = (p->output.w - 1) * p->stride_w + kw;
    const int32_t plane = wp * kh;
    const int32_t nq = chunk / 4;
    const int32_t tab_words = nq * (MCU_MVE_DWG_QUAD_BYTES / 4) + 8; /* one phase's table and its steps */
    mcu_mve_dwg_tables(p, q, weight, bias, c0, chunk, tab_words, tab);
    for (int32_t ph = 0; ph < kh; ++ph) {
        int32_t *t = tab + ph * tab_words;
        /* the row loop's steps between pixels, after the table (mcu_mve_dwg_row) */
        int32_t *tail = t + nq * (MCU_MVE_DWG_QUAD_BYTES / 4);
        tail[0] = p->stride_w * kh - chunk * plane;
        tail[1] = ch - chunk;
        tail[3] = nq;
        tail[4] = nq * MCU_MVE_DWG_QUAD_BYTES;
    }
    mcu_mve_fill_s8(ring, (int8_t)-p->input_offset, chunk * plane);
    const int32x4_t lo = vdupq_n_s32(p->act_min - p->output_offset);
    const int32x4_t hi = vdupq_n_s32(p->act_max - p->output_offset);
    int32_t next = -p->pad_top; /* the next input row to copy */
    for (int32_t r = 0; r < p->output.h; ++r) {
        const int32_t ih0 = r * p->stride_h - p->pad_top;
        next = next > ih0 ? next : ih0;
        for (; next < ih0 + kh; ++next) {
            mcu_mve_dwg_load_row(p, x_n, next, c0, chunk, wp, plane, ring);
        }
        int32_t *t = tab + (((ih0 % kh) + kh) % kh) * tab_words;
        t[nq * (MCU_MVE_DWG_QUAD_BYTES / 4) + 2] = p->output.w;
        mcu_mve_dwg_row(ring, t, y_n + (size_t)r * (size_t)p->output.w * (size_t)ch + (size_t)c0, nq, plane, lo, hi,
                        p->output_offset);
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
                                  output + (size_t)n * out_img,
                                  (int8_t *)buf + p->kernel_h * (chunk / 4 * MCU_MVE_DWG_QUAD_BYTES + 32), buf);
        }
    }
}

#endif /* MCU_S8_MVE */

#endif /* MCU_KERNELS_INTERNAL_MVE_DW_S8_H */
