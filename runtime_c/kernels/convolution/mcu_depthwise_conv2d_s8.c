#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/conv_s8_dsp.h"
#include "dw_direct_s8_dsp.h"
#include "dw_plain_s8.h"
#include "dw_plane_s8_dsp.h"
#include "dw_px_s8_dsp.h"
#include "../common/dw_s8_dsp.h"
#include "mve_dw_s8.h"
#include "../common/mve_s8.h"
#include "../common/plain_s8.h"
#include "../common/requant.h"
#include "../common/window.h"

int32_t mcu_depthwise_conv2d_s8_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p)
{
    (void)p;
    return 0;
}

#if MCU_S8_DSP
/* Channels [c, ch) of output row oh of image x_n with plain arithmetic, pixel by pixel. */
static void mcu_dsp_tail_row(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                             const int8_t *x_n, const int8_t *weight, const int32_t *bias, int32_t oh, int32_t c,
                             int8_t *y_row)
{
    const mcu_shape4 in = p->input;
    const int32_t kh = p->kernel_h, kw = p->kernel_w, ch = in.c;
    const int8_t *rows[MCU_S8_DW_ROWS_MAX];
    const int32_t ih0 = oh * p->stride_h - p->pad_top;
    for (int32_t i = 0; i < kh; ++i) {
        rows[i] = ih0 + i >= 0 && ih0 + i < in.h ? x_n + (ih0 + i) * in.w * ch : NULL;
    }
    for (int32_t ow = 0; ow < p->output.w; ++ow) {
        const int32_t iw0 = ow * p->stride_w - p->pad_left;
        int32_t kw_lo, kw_hi;
        mcu_window_taps(iw0, kw, 1, in.w, &kw_lo, &kw_hi);
        mcu_dw_pixel_tail_s8(rows, kh, kw, iw0, kw_lo, kw_hi, ch, c, ch, p->input_offset, weight, bias, q,
                             p->output_offset, p->act_min, p->act_max, y_row + ow * ch);
    }
}

/* ch_mult 1, dilation 1, groups of four channels a whole row at a time (common/dw_s8_dsp.h).
 * With the output apart from the input (`apart`), any order of writes is safe: one group runs over
 * the whole image with its tables built once. Otherwise the output may overlap the input as far as
 * the window contract allows, which holds for pixels written in order each after its own reads; a
 * band of rows is then assembled on the stack and written after all of its reads, which keeps every
 * write of the band below the inputs later rows read (the contract's bound for the band's last
 * pixel). */
static void mcu_dsp_groups(const mcu_dw4_geom *g, const mcu_depthwise_conv2d_s8_params *p,
                           const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                           const int32_t *bias, int8_t *output, int apart)
{
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t kh = p->kernel_h, ch = in.c;
    const int32_t in_row = in.w * ch, out_row = out.w * ch;
    const int32_t groups_end = ch / 4 * 4;
    mcu_dw4_group t;
    mcu_dw4_run run;
    const uint32_t *wrow[MCU_S8_DW_ROWS_MAX];
    mcu_dw4_zero(&t);
    int32_t ih[MCU_S8_DW_ROWS_MAX];
    const int8_t *rows[MCU_S8_DW_ROWS_MAX];
    int8_t row_buf[MCU_DW_ROW_BYTES];
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in_row;
        int8_t *y_n = output + n * out.h * out_row;
        if (apart) {
            for (int32_t c = 0; c < groups_end; c += 4) {
                mcu_dw4_group_init(&t, g, c, weight, bias, q);
                mcu_dw4_run_init(&run, &t, g);
                for (int32_t oh = 0; oh < out.h; ++oh) {
                    int32_t lo, hi;
                    mcu_dw4_rows(oh, p->stride_h, p->pad_top, kh, in.h, &lo, &hi, ih);
                    const uint32_t(*b)[4] = mcu_dw4_tables(&t, g, lo, hi, wrow);
                    for (int32_t i = 0; i < kh; ++i) {
                        rows[i] = x_n + ih[i] * in_row + c;
                    }
                    mcu_dw4_row(&t, g, &run, rows, wrow, b, y_n + oh * out_row + c);
                }
            }
            if (groups_end < ch) {
                for (int32_t oh = 0; oh < out.h; ++oh) {
                    mcu_dsp_tail_row(p, q, x_n, weight, bias, oh, groups_end, y_n + oh * out_row);
                }
            }
            continue;
        }
        /* as many output rows at a time as the stack buffer holds: the tables are built once per band */
        const int32_t band = MCU_DW_ROW_BYTES / out_row;
        for (int32_t oh0 = 0, oh1; oh0 < out.h; oh0 = oh1) {
            oh1 = out.h - oh0 < band ? out.h : oh0 + band;
            if (kh == 5 && p->kernel_w == 5) {
                /* The output advances slower than the input it reads (stride 2): once the rows from oh0 on
                 * end at or below the first input row they read, they are written in place, as one band
                 * (fewer tables built). 5x5 only: the other sizes keep their measured counts. */
                const int32_t ih_first = oh0 * p->stride_h - p->pad_top;
                const uintptr_t read = (uintptr_t)(x_n + (ih_first > 0 ? ih_first : 0) * in_row);
                const uintptr_t y0 = (uintptr_t)(y_n + oh0 * out_row);
                const int64_t direct = y0 <= read ? (int64_t)((read - y0) / (uintptr_t)out_row) : 0;
                if (direct > oh1 - oh0) {
                    const int32_t end = direct < out.h - oh0 ? oh0 + (int32_t)direct : out.h;
                    for (int32_t c = 0; c < groups_end; c += 4) {
                        mcu_dw4_group_init(&t, g, c, weight, bias, q);
                        mcu_dw4_run_init(&run, &t, g);
                        for (int32_t oh = oh0; oh < end; ++oh) {
                            int32_t lo, hi;
                            mcu_dw4_rows(oh, p->stride_h, p->pad_top, kh, in.h, &lo, &hi, ih);
                            const uint32_t(*b)[4] = mcu_dw4_tables(&t, g, lo, hi, wrow);
                            for (int32_t i = 0; i < kh; ++i) {
                                rows[i] = x_n + ih[i] * in_row + c;
                            }
                            mcu_dw4_row(&t, g, &run, rows, wrow, b, y_n + oh * out_row + c);
                        }
                    }
                    if (groups_end < ch) {
                        for (int32_t oh = oh0; oh < end; ++oh) {
                            mcu_dsp_tail_row(p, q, x_n, weight, bias, oh, groups_end, y_n + oh * out_row);
                        }
                    }
                    oh1 = end;
                    continue;
                }
            }
            for (int32_t c = 0; c < groups_end; c += 4) {
                mcu_dw4_group_init(&t, g, c, weight, bias, q);
                mcu_dw4_run_init(&run, &t, g);
                for (int32_t oh = oh0; oh < oh1; ++oh) {
                    int32_t lo, hi;
                    mcu_dw4_rows(oh, p->stride_h, p->pad_top, kh, in.h, &lo, &hi, ih);
                    const uint32_t(*b)[4] = mcu_dw4_tables(&t, g, lo, hi, wrow);
                    for (int32_t i = 0; i < kh; ++i) {
                        rows[i] = x_n + ih[i] * in_row + c;
                    }
                    mcu_dw4_row(&t, g, &run, rows, wrow, b, row_buf + (oh - oh0) * out_row + c);
                }
            }
            if (groups_end < ch) {
                for (int32_t oh = oh0; oh < oh1; ++oh) {
                    mcu_dsp_tail_row(p, q, x_n, weight, bias, oh, groups_end, row_buf + (oh - oh0) * out_row);
                }
            }
            /* After every read of the band: the contract keeps the band's writes below the inputs of
             * the rows after it. Word copies; the empty asm keeps GCC from calling memcpy (the
             * kernels reference no libc function). */
            int8_t *y = y_n + oh0 * out_row;
            const int32_t bytes = (oh1 - oh0) * out_row;
            int32_t i = 0;
            for (; i + 4 <= bytes; i += 4) {
                mcu_store_u32(y + i, mcu_load_u32(row_buf + i));
                __asm__("" ::: "memory");
            }
            for (; i < bytes; ++i) {
                y[i] = row_buf[i];
                __asm__("" ::: "memory");
            }
        }
    }
}
#endif

#if MCU_S8_DSP
/* Small 3x3 images pixel by pixel over chunks of channels (convolution/dw_px_s8_dsp.h). Apart from the
 * input, straight into the output with each chunk set up once; otherwise as mcu_dsp_groups: bands
 * of rows assembled on the stack and written after all of their reads. */
static void mcu_dsp_pixels(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                           const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output, int apart)
{
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t ch = in.c;
    const int32_t in_row = in.w * ch, out_row = out.w * ch;
    mcu_dwpx_chunk k;
    mcu_dwpx_layer(&k, ch, in.h, in.w, out.w, p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->input_offset,
                   p->act_min, p->act_max, 0); /* the raw ring (see mcu_dwpx_rows) */
    int8_t row_buf[MCU_DW_ROW_BYTES];
    const int32_t band = apart ? out.h : MCU_DW_ROW_BYTES / out_row;
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in_row;
        int8_t *y_n = output + n * out.h * out_row;
        for (int32_t oh0 = 0; oh0 < out.h; oh0 += band) {
            const int32_t oh1 = out.h - oh0 < band ? out.h : oh0 + band;
            for (int32_t c0 = 0; c0 < ch;) {
                const int32_t groups =
                    mcu_dwpx_chunk_init(&k, c0, weight, bias, q, p->input_offset, p->output_offset);
                mcu_dwpx_rows(&k, x_n + c0, oh0, oh1, (apart ? y_n + oh0 * out_row : row_buf) + c0, out_row, 0);
                c0 += 4 * groups;
            }
            if (apart) {
                continue;
            }
            /* after every read of the band (word copies; no memcpy call, see mcu_dsp_groups) */
            int8_t *y = y_n + oh0 * out_row;
            const int32_t bytes = (oh1 - oh0) * out_row; /* a multiple of 4: ch is */
            for (int32_t i = 0; i < bytes; i += 4) {
                mcu_store_u32(y + i, mcu_load_u32(row_buf + i));
                __asm__("" ::: "memory");
            }
        }
    }
}
#endif

#if MCU_S8_MVE
/* ch_mult 1, dilation 1: eight channels per step (common/mve_s8.h), pixels in memory order, each
 * pixel's outputs written after its window's inputs of the same channels are read (the window
 * contract). */
static void dw_mve(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                   const int8_t *weight, const int32_t *bias, int8_t *output)
{
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int8_t *rows[MCU_S8_MVE_DW_ROWS_MAX];
    _Alignas(16) int32_t kbias[MCU_S8_MVE_OC_MAX];
    mcu_mve_dw_fold_bias(weight, p->kernel_h * p->kernel_w, in.c, bias, p->input_offset, kbias);
    const int noleft = mcu_mve_no_left_shift(q, in.c);
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t i = 0; i < p->kernel_h; ++i) {
                const int32_t ih = ih0 + i;
                rows[i] = ih >= 0 && ih < in.h ? x_n + ih * in.w * in.c : NULL;
            }
            mcu_mve_depthwise_row_s8(rows, p->kernel_h, p->kernel_w, in.w, out.w, p->stride_w, p->pad_left, in.c,
                                     p->input_offset, weight, kbias, q, p->output_offset, p->act_min, p->act_max,
                                     output + (n * out.h + oh) * out.w * out.c, noleft);
        }
    }
}
#endif

#if MCU_S8_WIDE
/* ch_mult 1, dilation 1, row by row (common/plain_s8.h). A row's pixels are not computed in
 * memory order, so an output that overlaps the input goes through a row buffer, written after all
 * of the row's reads: the window contract bounds those writes as it does the row's last pixel. */
static void dw_wide(const mcu_depthwise_conv2d_s8_params *p, const mcu_per_channel_quant *q, const int8_t *input,
                    const int8_t *weight, const int32_t *bias, int8_t *output, int apart)
{
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t out_row = out.w * out.c;
    const int8_t *rows[MCU_S8_DW_ROWS_MAX];
    int8_t row_buf[MCU_S8_WIDE_DW_ROW_BYTES];
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            for (int32_t i = 0; i < p->kernel_h; ++i) {
                const int32_t ih = ih0 + i;
                rows[i] = ih >= 0 && ih < in.h ? x_n + ih * in.w * in.c : NULL;
            }
            int8_t *y = output + (n * out.h + oh) * out_row;
            mcu_wide_dw_row(rows, p->kernel_h, p->kernel_w, in.w, out.w, p->stride_w, p->pad_left, in.c,
                            p->input_offset, weight, bias, q, p->output_offset, p->act_min, p->act_max,
                            apart ? y : row_buf);
            if (!apart) {
                for (int32_t i = 0; i < out_row; ++i) {
                    y[i] = row_buf[i];
                    __asm__("" ::: "memory"); /* no memcpy call: the kernels reference no libc function */
                }
            }
        }
    }
}
#endif

#if MCU_S8_DSP && !MCU_S8_MVE
enum { MCU_DWPL_PLAN_NONE, MCU_DWPL_PLAN_ROWS, MCU_DWPL_PLAN_S2, MCU_DWPL_PLAN_DIRECT };

/* Which channel-plane path takes the layer (dw_plane_s8_dsp.h), its geometry in g: a band of rows of a
 * taller image (row calls: 3x3 stride 1), or 3x3 stride 2 in bands of output rows (lines of three
 * outputs at any count). */
static int mcu_dsp_plane_plan(mcu_dwpl_geom *g, const mcu_depthwise_conv2d_s8_params *p,
                              const mcu_per_channel_quant *q, const int32_t *bias, const int8_t *input,
                              size_t in_bytes, const int8_t *output, size_t out_bytes)
{
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    if (p->ch_mult != 1 || p->dilation_h != 1 || p->dilation_w != 1 || in.n != 1) {
        return MCU_DWPL_PLAN_NONE;
    }
    /* one or two output rows at stride 2 (a streamed prefix's or a fused block's row calls) take the planes,
     * not the direct path: mobilenet_v1 --stream-input on mps2-an505 9,828,197 -> 9,770,151 instructions */
    const int row_call = p->stride_h == 2 && p->stride_w == 2 && out.h <= 2 && out.w >= MCU_DWPL_S2_ROW_CALL_W;
    /* small images straight from the channels (dw_direct_s8_dsp.h), an output on the input staged */
    if (!row_call && mcu_dwd_applies(p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, in.c, out.h, out.w,
                        mcu_dwd_staged(input, in_bytes, output, out_bytes, in.c), q, bias, p->output_offset,
                        p->act_min, p->act_max)) {
        return MCU_DWPL_PLAN_DIRECT;
    }
    if (p->stride_h == 1 && p->stride_w == 1) {
        return mcu_dwpl_plan_rows(g, p->kernel_h, p->kernel_w, in.c, in.h, out.h, in.w, out.w, p->pad_top,
                                  p->pad_left, q, bias, p->output_offset)
                   ? MCU_DWPL_PLAN_ROWS
                   : MCU_DWPL_PLAN_NONE;
    }
    if (p->stride_h == 2 && p->stride_w == 2 && ((int64_t)out.h * out.w > MCU_DWPL_S2_MIN_PIXELS || out.w == 3 || row_call)) {
        const int apart = !mcu_overlaps(input, in_bytes, output, out_bytes);
        return mcu_dwpl_plan_s2(g, p->kernel_h, p->kernel_w, in.c, in.w, out.h, out.w, p->pad_left, apart,
                                MCU_DWPL_S2_ROW_BYTES, q, bias, p->output_offset)
                   ? MCU_DWPL_PLAN_S2
                   : MCU_DWPL_PLAN_NONE;
    }
    return MCU_DWPL_PLAN_NONE;
}
#endif

mcu_status mcu_depthwise_conv2d_s8(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                   const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                   const int32_t *bias, int8_t *output)
{
    (void)ctx; /* no scratch needed */
    MCU_REQUIRE(p != NULL && q != NULL && q->multiplier != NULL && q->shift != NULL && input != NULL &&
                    weight != NULL && output != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 &&
                    p->dilation_h > 0 && p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 &&
                    p->ch_mult > 0,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);

    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    const int32_t in_count = mcu_shape4_count(&in, 1);
    const int32_t out_count = mcu_shape4_count(&out, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(out.n == in.n && (int64_t)in.c * p->ch_mult == out.c, MCU_ERR_SHAPE);
    const int32_t w_dims[3] = {p->kernel_h, p->kernel_w, out.c};
    const int32_t w_count = mcu_checked_count(w_dims, 3, 1);
    MCU_REQUIRE(w_count > 0 && out.c <= INT32_MAX / 4, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
                    mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0),
                MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)out_count;
#if MCU_S8_MVE
    MCU_REQUIRE(mcu_mve_quant_all_valid(q, out.c), MCU_ERR_INVALID_ARG); /* four at a time */
#else
#if MCU_S8_DSP
    mcu_dwpl_geom pg;
    /* a plane plan checks every channel's requantization, within narrower bounds (mcu_dwpl_quant_ok) */
    const int planes = mcu_dsp_plane_plan(&pg, p, q, bias, input, (size_t)in_count, output, out_bytes);
#else
    const int planes = 0;
#endif
    for (int32_t oc = 0; !planes && oc < out.c; ++oc) {
        MCU_REQUIRE(mcu_quant_valid(q->multiplier[oc], q->shift[oc]), MCU_ERR_INVALID_ARG);
    }
#endif
    MCU_REQUIRE(!mcu_bad_window_overlap(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(weight, (size_t)w_count, output, out_bytes) &&
                    (bias == NULL || !mcu_overlaps(bias, (size_t)out.c * sizeof(int32_t), output, out_bytes)),
                MCU_ERR_INVALID_ARG);

#if MCU_S8_MVE
    /* One gather per channel and pixel (convolution/mve_dw_s8.h); an output on the input in one chunk. */
    const int32_t chunk = mcu_mve_dwg_chunk(p, q);
    if (chunk > 0 && (chunk >= in.c || !mcu_overlaps(input, (size_t)in_count, output, out_bytes))) {
        mcu_mve_dwg_layer(p, q, input, weight, bias, output, chunk);
        return MCU_OK;
    }
    if (p->ch_mult == 1 && p->dilation_h == 1 && p->dilation_w == 1 && p->kernel_h <= MCU_S8_MVE_DW_ROWS_MAX &&
        in.c <= MCU_S8_MVE_OC_MAX) {
        dw_mve(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP && !MCU_S8_MVE
    if (planes == MCU_DWPL_PLAN_ROWS) {
        mcu_dwpl_rows(&pg, in.h, in.w, in.c, p->pad_top, p->pad_left, p->input_offset, p->output_offset, p->act_min,
                      p->act_max, q, input, weight, bias, output);
        return MCU_OK;
    }
    if (planes == MCU_DWPL_PLAN_DIRECT) {
        mcu_dwd_layer(in.h, in.w, in.c, out.h, out.w, p->pad_top, p->pad_left, p->input_offset, p->output_offset, q,
                      input, weight, bias, output, mcu_dwd_staged(input, (size_t)in_count, output, out_bytes, in.c));
        return MCU_OK;
    }
    if (planes == MCU_DWPL_PLAN_S2) {
        mcu_dwpl_layer_s2(&pg, in.h, in.w, in.c, p->pad_top, p->pad_left, p->input_offset, p->output_offset,
                          p->act_min, p->act_max, q, input, weight, bias, output,
                          !mcu_overlaps(input, (size_t)in_count, output, out_bytes) ||
                              mcu_dwpl_s2_own_bands(&pg, input, output, in.c, in.w, p->pad_top));
        return MCU_OK;
    }
#endif
#if MCU_S8_DSP
    if (p->ch_mult == 1 && p->dilation_h == 1 && p->dilation_w == 1 &&
        ((p->stride_h == 1 && p->stride_w == 1) || (int64_t)out.h * out.w <= MCU_DWPX_MAX_PIXELS) &&
        mcu_dwpx_applies(p->kernel_h, p->kernel_w, in.c, out.w, p->stride_w, 0, q)) {
        const int apart = !mcu_overlaps(input, (size_t)in_count, output, out_bytes);
        if (apart || (int64_t)out.w * out.c <= MCU_DW_ROW_BYTES) {
            mcu_dsp_pixels(p, q, input, weight, bias, output, apart);
            return MCU_OK;
        }
    }
    mcu_dw4_geom g;
    if (p->ch_mult == 1 && p->dilation_h == 1 && p->dilation_w == 1 &&
        (int64_t)out.h * out.w >= MCU_DW_ROW_MIN_PIXELS &&
        mcu_dw4_plan(&g, p->kernel_h, p->kernel_w, in.c, p->stride_w, p->pad_left, in.w, out.w, p->input_offset,
                     p->output_offset, p->act_min, p->act_max)) {
        const int apart = !mcu_overlaps(input, (size_t)in_count, output, out_bytes);
        if (apart || (int64_t)out.w * out.c <= MCU_DW_ROW_BYTES) {
            mcu_dsp_groups(&g, p, q, input, weight, bias, output, apart);
            return MCU_OK;
        }
    }
    if (p->ch_mult == 1 && p->dilation_h == 1 && p->dilation_w == 1 && p->kernel_h <= MCU_S8_DW_ROWS_MAX) {
        /* Four channels per step with per-lane multiply-accumulate; pixels in memory order. */
        const int8_t *rows[MCU_S8_DW_ROWS_MAX];
        for (int32_t n = 0; n < in.n; ++n) {
            const int8_t *x_n = input + n * in.h * in.w * in.c;
            for (int32_t oh = 0; oh < out.h; ++oh) {
                const int32_t ih0 = oh * p->stride_h - p->pad_top;
                for (int32_t i = 0; i < p->kernel_h; ++i) {
                    const int32_t ih = ih0 + i;
                    rows[i] = ih >= 0 && ih < in.h ? x_n + ih * in.w * in.c : NULL;
                }
                for (int32_t ow = 0; ow < out.w; ++ow) {
                    const int32_t iw0 = ow * p->stride_w - p->pad_left;
                    int32_t kw_lo, kw_hi;
                    mcu_window_taps(iw0, p->kernel_w, 1, in.w, &kw_lo, &kw_hi);
                    mcu_depthwise_pixel_s8(rows, p->kernel_h, p->kernel_w, iw0, kw_lo, kw_hi, in.c, p->input_offset,
                                           weight, bias, q, p->output_offset, p->act_min, p->act_max,
                                           output + ((n * out.h + oh) * out.w + ow) * out.c);
                }
            }
        }
        return MCU_OK;
    }
#endif
#if MCU_S8_WIDE
    if (p->ch_mult == 1 && p->dilation_h == 1 && p->dilation_w == 1 && mcu_wide_dw_applies(p->kernel_h, p->kernel_w)) {
        const int apart = !mcu_overlaps(input, (size_t)in_count, output, out_bytes);
        if (apart || (int64_t)out.w * out.c <= MCU_S8_WIDE_DW_ROW_BYTES) {
            dw_wide(p, q, input, weight, bias, output, apart);
            return MCU_OK;
        }
    }
#endif
#if MCU_S8_PLAIN_DW
    /* windows of up to MCU_S8_PLAIN_DW_TAPS taps through the offset table (convolution/dw_plain_s8.h) */
    if (p->ch_mult == 1 && p->dilation_h == 1 && p->dilation_w == 1 && mcu_plain_dw_applies(p->kernel_h, p->kernel_w)) {
        mcu_plain_dw_layer(p, q, input, weight, bias, output);
        return MCU_OK;
    }
#endif
    const int32_t in_offset = p->input_offset;
    const int32_t cm = p->ch_mult;
    for (int32_t n = 0; n < in.n; ++n) {
        const int8_t *x_n = input + n * in.h * in.w * in.c;
        for (int32_t oh = 0; oh < out.h; ++oh) {
            const int32_t ih0 = oh * p->stride_h - p->pad_top;
            int32_t kh_lo, kh_hi;
            mcu_window_taps(ih0, p->kernel_h, p->dilation_h, in.h, &kh_lo, &kh_hi);
            for (int32_t ow = 0; ow < out.w; ++ow) {
                const int32_t iw0 = ow * p->stride_w - p->pad_left;
                int32_t kw_lo, kw_hi;
                mcu_window_taps(iw0, p->kernel_w, p->dilation_w, in.w, &kw_lo, &kw_hi);
                int8_t *y = output + ((n * out.h + oh) * out.w + ow) * out.c;
                for (int32_t ic = 0; ic < in.c; ++ic) {
                    for (int32_t m = 0; m < cm; ++m) {
                        const int32_t oc = ic * cm + m;
                        uint32_t acc = bias != NULL ? (uint32_t)bias[oc] : 0u; /* modulo 2^32 */
                        for (int32_t kh = kh_lo; kh < kh_hi; ++kh) {
                            const int32_t ih = ih0 + kh * p->dilation_h;
                            const int8_t *x_row = x_n + ih * in.w * in.c + ic;
                            const int8_t *w_row = weight + kh * p->kernel_w * out.c + oc;
                            for (int32_t kw = kw_lo; kw < kw_hi; ++kw) {
                                const int32_t iw = iw0 + kw * p->dilation_w;
                                acc += (uint32_t)((x_row[iw * in.c] + in_offset) * w_row[kw * out.c]);
                            }
                        }
                        y[oc] = mcu_requantize_to_s8(mcu_u32_to_s32(acc), q->multiplier[oc], q->shift[oc],
                                                     p->output_offset, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
    return MCU_OK;
}
