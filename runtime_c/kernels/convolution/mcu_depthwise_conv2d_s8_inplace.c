/* Depthwise convolution that overwrites its own input, row by row. Output row
 * r lands on input row r; the input rows that later output rows still read
 * are copied into a ring of pad_top + 1 rows first. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s8.h"

/* 3x3 layers of four-channel groups take the pixel path (convolution/dw_px_s8_dsp.h) here; the row
 * path's own 3x3 loop would only serve the few it refuses (rows wider than its ring, channels not a
 * multiple of 4), so it is left out for flash (those run the row path's generic pixel). */
#define MCU_DW4_ROW_NO_RUN3X3 1
/* ... which leaves room for the pixel path's widened loop with and without the clamp. */
#define MCU_DWPX_WIDE_SPLIT 1
/* The 5x5 loop is left out too: same-size 5x5 layers are rare, its ~1 KB of code would sit in every
 * firmware with an in-place depthwise, and its test would cost every other row a compare. */
#define MCU_DW4_ROW_NO_RUN5X5 1

#include "../common/check.h"
#include "../common/conv_s8_dsp.h"
#include "dw_plain_s8.h"
#include "dw_plane_s8_dsp.h"
#include "dw_px_s8_dsp.h"
#include "../common/dw_s8_dsp.h"
#include "mve_dw_s8.h"
#include "../common/mve_s8.h"
#include "../common/plain_s8.h"
#include "../common/requant.h"
#include "../common/window.h"

int32_t mcu_depthwise_conv2d_s8_inplace_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p)
{
    if (p == NULL || p->pad_top < 0 || p->input.w <= 0 || p->input.c <= 0) {
        return 0;
    }
    const int64_t bytes = (int64_t)(p->pad_top + 1) * p->input.w * p->input.c;
    return bytes > INT32_MAX ? 0 : (int32_t)bytes;
}

#if MCU_S8_DSP
/* One group of four channels (then each remaining channel) over the whole image at a time. Output
 * row r of a group overwrites only that group's bytes of input row r, after they were copied to the
 * ring: later groups still find their own bytes of every row in data, and output row r of this
 * group reads rows <= r of this group from the ring (rows r - pad_top .. r are there) and rows > r
 * from data, untouched yet. The ring and its size are those of the row-by-row path. */
static __attribute__((noinline)) void mcu_dsp_inplace(const mcu_dw4_geom *g, const mcu_depthwise_conv2d_s8_params *p,
                            const mcu_per_channel_quant *q, int8_t *data, const int8_t *weight, const int32_t *bias,
                            int8_t *ring, int32_t ring_rows)
{
    const mcu_shape4 in = p->input;
    const int32_t kh = p->kernel_h, kw = p->kernel_w, ch = in.c;
    const size_t row_bytes = (size_t)in.w * (size_t)ch;
    mcu_dw4_group t;
    mcu_dw4_run run;
    const uint32_t *wrow[MCU_S8_DW_ROWS_MAX];
    mcu_dw4_zero(&t);
    const int8_t *rows[MCU_S8_DW_ROWS_MAX];
    for (int32_t n = 0; n < in.n; ++n) {
        int8_t *img = data + (size_t)n * (size_t)in.h * row_bytes;
        int32_t c = 0;
        for (; c + 4 <= ch; c += 4) {
            mcu_dw4_group_init(&t, g, c, weight, bias, q);
            mcu_dw4_run_init(&run, &t, g);
            const uint32_t(*b)[4] = NULL;
            int32_t cfg_lo = -1, cfg_hi = -1;
            int8_t *y = img + c;
            int32_t slot_r = 0; /* ring slot of row r: r % ring_rows, kept without a division */
            for (int32_t r = 0; r < in.h; ++r, y += row_bytes, slot_r = slot_r + 1 == ring_rows ? 0 : slot_r + 1) {
                int8_t *slot = ring + (size_t)slot_r * row_bytes + c;
                for (int32_t col = 0; col < in.w * ch; col += ch) {
                    mcu_store_u32(slot + col, mcu_load_u32(y + col));
                }
                /* kernel rows inside the input: ih = r - pad_top + i in [0, h) */
                const int32_t lo = p->pad_top > r ? p->pad_top - r : 0;
                const int32_t hi = in.h + p->pad_top - r < kh ? in.h + p->pad_top - r : kh;
                if (lo != cfg_lo || hi != cfg_hi) { /* the first rows, the last rows, and once between */
                    b = mcu_dw4_tables(&t, g, lo, hi, wrow);
                    cfg_lo = lo;
                    cfg_hi = hi;
                }
                for (int32_t i = 0; i < kh; ++i) {
                    /* a row outside reads the nearest row inside (against zero weights) */
                    const int32_t i_in = i < lo ? lo : i >= hi ? hi - 1 : i;
                    const int32_t above = p->pad_top - i_in; /* r - ih */
                    if (above >= 0) {                          /* rows <= r: from the ring */
                        const int32_t sl = slot_r - above;
                        rows[i] = ring + (size_t)(sl < 0 ? sl + ring_rows : sl) * row_bytes + c;
                    } else {
                        rows[i] = y - (ptrdiff_t)above * (ptrdiff_t)row_bytes;
                    }
                }
                mcu_dw4_row(&t, g, &run, rows, wrow, b, y);
            }
        }
        for (; c < ch; ++c) { /* channels past the last group of four, one at a time */
            for (int32_t r = 0; r < in.h; ++r) {
                int8_t *y = img + (size_t)r * row_bytes;
                int8_t *slot = ring + (size_t)(r % ring_rows) * row_bytes;
                for (int32_t col = 0; col < in.w; ++col) {
                    slot[col * ch + c] = y[col * ch + c];
                }
                for (int32_t i = 0; i < kh; ++i) {
                    const int32_t r_in = r - p->pad_top + i;
                    rows[i] = r_in < 0 || r_in >= in.h ? NULL
                              : r_in <= r              ? ring + (size_t)(r_in % ring_rows) * row_bytes
                                                       : img + (size_t)r_in * row_bytes;
                }
                for (int32_t ow = 0; ow < in.w; ++ow) {
                    const int32_t iw0 = ow - p->pad_left;
                    int32_t kw_lo, kw_hi;
                    mcu_window_taps(iw0, kw, 1, in.w, &kw_lo, &kw_hi);
                    mcu_dw_pixel_tail_s8(rows, kh, kw, iw0, kw_lo, kw_hi, ch, c, c + 1, p->input_offset, weight, bias,
                                         q, p->output_offset, p->act_min, p->act_max, y + ow * ch);
                }
            }
        }
    }
}
#endif

#if MCU_S8_DSP
/* Small 3x3 images pixel by pixel over chunks of channels (convolution/dw_px_s8_dsp.h): the path's
 * own ring of padded rows holds every input row an output row reads before that output row is
 * written over its input row, so the output goes straight into data and the ring of ctx is unused.
 * Later chunks find their own bytes of every row in data. */
static void mcu_dsp_inplace_pixels(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                                   int8_t *data, const int8_t *weight, const int32_t *bias)
{
    const mcu_shape4 in = p->input;
    const int32_t ch = in.c;
    const int32_t row_bytes = in.w * ch;
    mcu_dwpx_chunk k;
    mcu_dwpx_layer(&k, ch, in.h, in.w, in.w, 1, 1, p->pad_top, p->pad_left, p->input_offset, p->act_min, p->act_max,
                   1); /* the widened ring */
    for (int32_t n = 0; n < in.n; ++n) {
        int8_t *img = data + n * in.h * row_bytes;
        for (int32_t c0 = 0; c0 < ch;) {
            const int32_t groups = mcu_dwpx_chunk_init(&k, c0, weight, bias, q, p->input_offset, p->output_offset);
            mcu_dwpx_rows(&k, img + c0, 0, in.h, img + c0, row_bytes, 1);
            c0 += 4 * groups;
        }
    }
}
#endif

#if MCU_S8_MVE
/* Row by row as the plain path below (the same ring of pad_top + 1 rows: output row r lands on
 * input row r after that row was copied to the ring), eight channels per step
 * (common/mve_s8.h). */
static void inplace_mve(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q, int8_t *data,
                        const int8_t *weight, const int32_t *bias, int8_t *ring)
{
    const mcu_shape4 in = p->input;
    const int32_t kh = p->kernel_h;
    const int32_t kw = p->kernel_w;
    const int32_t ring_rows = p->pad_top + 1;
    const int32_t row_bytes = in.w * in.c;
    const int8_t *rows[MCU_S8_MVE_DW_ROWS_MAX];
    _Alignas(16) int32_t kbias[MCU_S8_MVE_OC_MAX];
    mcu_mve_dw_fold_bias(weight, kh * kw, in.c, bias, p->input_offset, kbias);
    const int noleft = mcu_mve_no_left_shift(q, in.c);
    for (int32_t n = 0; n < in.n; ++n) {
        int8_t *img = data + (size_t)n * (size_t)in.h * (size_t)row_bytes;
        for (int32_t r = 0; r < in.h; ++r) {
            int8_t *y = img + (size_t)r * (size_t)row_bytes;
            mcu_mve_copy_s8(ring + (size_t)(r % ring_rows) * (size_t)row_bytes, y, row_bytes);
            for (int32_t i = 0; i < kh; ++i) {
                const int32_t ih = r - p->pad_top + i;
                rows[i] = ih < 0 || ih >= in.h ? NULL
                          : ih <= r        ? ring + (size_t)(ih % ring_rows) * (size_t)row_bytes
                                           : img + (size_t)ih * (size_t)row_bytes;
            }
            mcu_mve_depthwise_row_s8(rows, kh, kw, in.w, in.w, 1, p->pad_left, in.c, p->input_offset, weight, kbias, q,
                                     p->output_offset, p->act_min, p->act_max, y, noleft);
        }
    }
}
#endif

mcu_status mcu_depthwise_conv2d_s8_inplace(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                           const mcu_per_channel_quant *q, int8_t *data, const int8_t *weight,
                                           const int32_t *bias)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL &&
                    data != NULL && weight != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    MCU_REQUIRE(p->stride_h == 1 && p->stride_w == 1 && p->dilation_h == 1 && p->dilation_w == 1 &&
                    p->ch_mult == 1 && p->kernel_h > 0 && p->kernel_w > 0 && p->pad_top >= 0 &&
                    p->pad_left >= 0 && p->pad_top < p->kernel_h && p->pad_left < p->kernel_w,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const int32_t count = mcu_shape4_count(&in, 1);
    MCU_REQUIRE(count > 0 && out.n == in.n && out.h == in.h && out.w == in.w && out.c == in.c, MCU_ERR_SHAPE);
    const int32_t ring_rows = p->pad_top + 1;
    const int32_t row_bytes = in.w * in.c;
    MCU_REQUIRE(ctx->size >= mcu_depthwise_conv2d_s8_inplace_get_buffer_size(p) && ctx->size > 0,
                MCU_ERR_BUFFER_TOO_SMALL);
    int8_t *ring = (int8_t *)ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(ring, (size_t)ring_rows * (size_t)row_bytes, data, (size_t)count), MCU_ERR_INVALID_ARG);
    const int32_t kh = p->kernel_h;
    const int32_t kw = p->kernel_w;
#if MCU_S8_MVE
    MCU_REQUIRE(mcu_mve_quant_all_valid(q, in.c), MCU_ERR_INVALID_ARG); /* four at a time */
#else
#if MCU_S8_DSP
    mcu_dwpl_geom pg;
    /* the plane plan checks every channel's requantization, within narrower bounds (mcu_dwpl_quant_ok) */
    const int planes = mcu_dwpl_plan(&pg, kh, kw, in.c, in.h, in.w, q, bias, p->output_offset);
#else
    const int planes = 0;
#endif
    for (int32_t c = 0; !planes && c < in.c; ++c) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[c], q->shift[c]), MCU_ERR_INVALID_ARG);
    }
#endif

#if MCU_S8_MVE
    const int32_t chunk = mcu_mve_dwg_chunk(p, q);
    if (chunk > 0) { /* one gather per channel and pixel (convolution/mve_dw_s8.h) */
        mcu_mve_dwg_layer(p, q, data, weight, bias, data, chunk);
        return MCU_OK;
    }
    if (kh <= MCU_S8_MVE_DW_ROWS_MAX && in.c <= MCU_S8_MVE_OC_MAX) {
        inplace_mve(p, q, data, weight, bias, ring);
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP && !MCU_S8_MVE
    if (planes) { /* 3x3: one channel plane at a time, in bands */
        mcu_dwpl_layer(&pg, in.n, in.h, in.w, in.c, p->pad_top, p->pad_left, p->input_offset, p->output_offset,
                       p->act_min, p->act_max, q, data, weight, bias, data);
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP
    if (mcu_dwpx_applies(kh, kw, in.c, in.w, 1, 1, q)) { /* stride 1: at any size (see MCU_DWPX_MAX_PIXELS) */
        mcu_dsp_inplace_pixels(p, q, data, weight, bias);
        return MCU_OK;
    }
    mcu_dw4_geom g;
    if ((int64_t)in.h * in.w >= MCU_DW_ROW_MIN_PIXELS &&
        mcu_dw4_plan(&g, kh, kw, in.c, 1, p->pad_left, in.w, in.w, p->input_offset, p->output_offset, p->act_min,
                     p->act_max)) {
        mcu_dsp_inplace(&g, p, q, data, weight, bias, ring, ring_rows);
        return MCU_OK;
    }
#endif
    for (int32_t n = 0; n < in.n; ++n) {
        int8_t *img = data + (size_t)n * (size_t)in.h * (size_t)row_bytes;
        for (int32_t r = 0; r < in.h; ++r) {
            /* Input row r is about to be overwritten: keep it for output rows r+1 .. r+pad_top. */
            memcpy(ring + (size_t)(r % ring_rows) * (size_t)row_bytes, img + (size_t)r * (size_t)row_bytes,
                   (size_t)row_bytes);
            int8_t *y = img + (size_t)r * (size_t)row_bytes;
#if MCU_S8_PLAIN_DW
            if (mcu_plain_dw_applies(kh, kw)) {
                /* the whole output row after the input row went to the ring, through the offset table
                 * (convolution/dw_plain_s8.h) */
                const int8_t *rows[MCU_S8_PLAIN_DW_TAPS];
                for (int32_t i = 0; i < kh; ++i) {
                    const int32_t ih = r - p->pad_top + i;
                    rows[i] = ih < 0 || ih >= in.h ? NULL
                              : ih <= r        ? ring + (size_t)(ih % ring_rows) * (size_t)row_bytes
                                               : img + (size_t)ih * (size_t)row_bytes;
                }
                mcu_plain_dw_row(rows, kh, kw, in.w, in.w, 1, p->pad_left, in.c, p->input_offset, weight, bias, q,
                                 p->output_offset, p->act_min, p->act_max, y);
                continue;
            }
#endif
#if MCU_S8_WIDE
            if (mcu_wide_dw_applies(kh, kw)) {
                /* the whole output row after the input row went to the ring (common/plain_s8.h) */
                const int8_t *rows[MCU_S8_DW_ROWS_MAX];
                for (int32_t i = 0; i < kh; ++i) {
                    const int32_t ih = r - p->pad_top + i;
                    rows[i] = ih < 0 || ih >= in.h ? NULL
                              : ih <= r        ? ring + (size_t)(ih % ring_rows) * (size_t)row_bytes
                                               : img + (size_t)ih * (size_t)row_bytes;
                }
                mcu_wide_dw_row(rows, kh, kw, in.w, in.w, 1, p->pad_left, in.c, p->input_offset, weight, bias, q,
                                p->output_offset, p->act_min, p->act_max, y);
                continue;
            }
#endif
#if MCU_S8_DSP
            if (kh <= MCU_S8_DW_ROWS_MAX) {
                const int8_t *rows[MCU_S8_DW_ROWS_MAX];
                for (int32_t i = 0; i < kh; ++i) {
                    const int32_t ih = r - p->pad_top + i;
                    rows[i] = ih < 0 || ih >= in.h ? NULL
                              : ih <= r        ? ring + (size_t)(ih % ring_rows) * (size_t)row_bytes
                                               : img + (size_t)ih * (size_t)row_bytes;
                }
                for (int32_t ow = 0; ow < in.w; ++ow) {
                    const int32_t iw0 = ow - p->pad_left;
                    int32_t kw_lo, kw_hi;
                    mcu_window_taps(iw0, kw, 1, in.w, &kw_lo, &kw_hi);
                    mcu_depthwise_pixel_s8(rows, kh, kw, iw0, kw_lo, kw_hi, in.c, p->input_offset, weight, bias, q,
                                           p->output_offset, p->act_min, p->act_max, y + ow * in.c);
                }
                continue;
            }
#endif
            for (int32_t ow = 0; ow < in.w; ++ow) {
                for (int32_t c = 0; c < in.c; ++c) {
                    /* Same tap order and modulo-2^32 accumulation as mcu_depthwise_conv2d_s8. */
                    uint32_t acc = bias != NULL ? (uint32_t)bias[c] : 0u;
                    for (int32_t i = 0; i < kh; ++i) {
                        const int32_t ih = r - p->pad_top + i;
                        if (ih < 0 || ih >= in.h) {
                            continue;
                        }
                        /* Rows <= r come from the ring (their originals are gone), later rows from data. */
                        const int8_t *row = ih <= r ? ring + (size_t)(ih % ring_rows) * (size_t)row_bytes
                                                    : img + (size_t)ih * (size_t)row_bytes;
                        for (int32_t j = 0; j < kw; ++j) {
                            const int32_t iw = ow - p->pad_left + j;
                            if (iw < 0 || iw >= in.w) {
                                continue;
                            }
                            acc += (uint32_t)((row[iw * in.c + c] + p->input_offset) *
                                              weight[(i * kw + j) * in.c + c]);
                        }
                    }
                    y[ow * in.c + c] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[c], q->shift[c],
                                                            p->output_offset, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
