/* Load-time checks of each kernel's parameter words: the same conditions the
 * kernel tests on entry (ranges, geometry, quantization parameters), made
 * with the kernels' own predicates (kernels/internal), so that a malformed
 * parameter refuses the program at load instead of failing its first run.
 * Only what depends on the params alone is here: the bytes each operand must
 * hold are checked in mcu_program_kernels.c. */
#include <float.h>
#include <string.h>

#include "../kernels/pooling/adaptive.h"
#include "../kernels/elementwise/binary_s8.h"
#include "../kernels/common/check.h"
#include "../kernels/pooling/pool_f32.h"
#include "../kernels/pooling/pool_s8.h"
#include "../kernels/convolution/window_transposed.h"
#include "mcu/kernels_f32.h"
#include "mcu/kernels_generic.h"
#include "mcu/kernels_mixed.h"
#include "../kernels/common/requant_s16.h"
#include "mcu/kernels_s16.h"
#include "mcu/kernels_s8.h"
#include "mcu_program_internal.h"

/* The kernels' own predicate (kernels/common/check.h), once. */
MCU_PROGRAM_SHARED static int32_t checked_count(const int32_t *dims, int32_t rank, int32_t elem_size)
{
    return mcu_checked_count(dims, rank, elem_size);
}

static float as_float(int32_t w)
{
    float f;
    memcpy(&f, &w, sizeof(f));
    return f;
}

MCU_PROGRAM_SHARED static int shape4_ok(const mcu_shape4 *s, int32_t elem_size)
{
    return mcu_shape4_count(s, elem_size) > 0;
}

static int conv_f32_ok(const mcu_conv2d_f32_params *p)
{
    const mcu_shape4 in = p->input, out = p->output;
    if (!(p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
          p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->groups > 0 &&
          mcu_act_bounds_valid(p->act_min, p->act_max) && shape4_ok(&in, 4) && shape4_ok(&out, 4) &&
          out.n == in.n && in.c % p->groups == 0 && out.c % p->groups == 0)) {
        return 0;
    }
    const int32_t w_dims[4] = {out.c, p->kernel_h, p->kernel_w, in.c / p->groups};
    return checked_count(w_dims, 4, 4) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0);
}

/* Every element offset a window kernel forms along a row, (column - pad) * channels for any column a window
 * reaches, fits int32: a padding or a reach far past the row would pass mcu_window_fits yet overflow the
 * kernels' pointer arithmetic. */
static int row_reach_ok(int32_t in_w, int32_t channels, int32_t out_w, int32_t stride, int32_t kernel,
                        int32_t dilation, int32_t pad)
{
    const int64_t reach = (int64_t)(out_w - 1) * stride + (int64_t)(kernel - 1) * dilation;
    const int64_t span = (reach > in_w ? reach : in_w) + (int64_t)pad;
    return span * channels <= INT32_MAX;
}

static int conv_s8_ok(const mcu_conv2d_s8_params *p, int one_by_one)
{
    const mcu_shape4 in = p->input, out = p->output;
    if (!(mcu_conv2d_s8_params_valid(p) && shape4_ok(&in, 1) && shape4_ok(&out, 1) && out.n == in.n &&
          in.c % p->groups == 0 && out.c % p->groups == 0 && out.c <= INT32_MAX / 4)) {
        return 0;
    }
    if (one_by_one && !(p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                        p->pad_top == 0 && p->pad_left == 0 && p->groups == 1 && out.h == in.h && out.w == in.w)) {
        return 0;
    }
    const int32_t w_dims[4] = {out.c, p->kernel_h, p->kernel_w, in.c / p->groups};
    return checked_count(w_dims, 4, 1) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0) &&
           row_reach_ok(in.w, in.c, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left);
}

static int depthwise_s8_ok(const mcu_depthwise_conv2d_s8_params *p)
{
    const mcu_shape4 in = p->input, out = p->output;
    const int32_t w_dims[3] = {p->kernel_h, p->kernel_w, out.c};
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
           p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->ch_mult > 0 &&
           mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max) && shape4_ok(&in, 1) && shape4_ok(&out, 1) && out.n == in.n &&
           (int64_t)in.c * p->ch_mult == out.c && out.c <= INT32_MAX / 4 && checked_count(w_dims, 3, 1) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0) &&
           row_reach_ok(in.w, in.c, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left);
}

static int pool_f32_ok(const mcu_pool2d_f32_params *p, int average)
{
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
           p->dilation_w > 0 && p->pad_top >= 0 && p->pad_bottom >= 0 && p->pad_left >= 0 && p->pad_right >= 0 &&
           p->pad_top <= p->kernel_h / 2 && p->pad_bottom <= p->kernel_h / 2 && p->pad_left <= p->kernel_w / 2 &&
           p->pad_right <= p->kernel_w / 2 && mcu_act_bounds_valid(p->act_min, p->act_max) &&
           shape4_ok(&p->input, 4) && shape4_ok(&p->output, 4) && p->output.n == p->input.n &&
           p->output.c == p->input.c &&
           mcu_pool_dim_ok(p->input.h, p->output.h, p->kernel_h, p->stride_h, p->dilation_h, p->pad_top,
                           p->pad_bottom) &&
           mcu_pool_dim_ok(p->input.w, p->output.w, p->kernel_w, p->stride_w, p->dilation_w, p->pad_left,
                           p->pad_right) &&
           (!average || (p->dilation_h == 1 && p->dilation_w == 1 && p->divisor_override >= 0));
}

static int pool_s8_ok(const mcu_pool2d_s8_params *p, int average)
{
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->pad_top >= 0 &&
           p->pad_left >= 0 && mcu_act_s8_valid(p->act_min, p->act_max) && shape4_ok(&p->input, 1) &&
           shape4_ok(&p->output, 1) && p->output.n == p->input.n && p->output.c == p->input.c &&
           mcu_pool_s8_dim_ok(p->input.h, p->output.h, p->kernel_h, p->stride_h, p->pad_top) &&
           mcu_pool_s8_dim_ok(p->input.w, p->output.w, p->kernel_w, p->stride_w, p->pad_left) &&
           (!average || (int64_t)p->kernel_h * p->kernel_w <= ((int64_t)1 << 24));
}

static int binary_s8_ok(const mcu_binary_s8_params *p, int mul)
{
    if (!(p->rank >= 1 && p->rank <= MCU_MAX_DIMS && mcu_input_offset_valid(p->a_offset) &&
          mcu_input_offset_valid(p->b_offset) && mcu_output_offset_valid(p->output_offset) &&
          mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->out_multiplier, p->out_shift) &&
          checked_count(p->out_shape, p->rank, 1) > 0)) {
        return 0;
    }
    if (!mul && !(mcu_quant_valid(p->a_multiplier, p->a_shift) && mcu_quant_valid(p->b_multiplier, p->b_shift) &&
                  p->left_shift >= 0 && p->left_shift <= MCU_BINARY_S8_MAX_LEFT_SHIFT)) {
        return 0;
    }
    for (int32_t i = 0; i < p->rank; ++i) {
        if (p->a_strides[i] < 0 || p->b_strides[i] < 0) {
            return 0;
        }
    }
    return 1;
}

static int binary_f32_ok(const mcu_binary_f32_params *p)
{
    if (!(p->rank >= 1 && p->rank <= MCU_MAX_DIMS && mcu_act_bounds_valid(p->act_min, p->act_max) &&
          checked_count(p->out_shape, p->rank, 4) > 0)) {
        return 0;
    }
    for (int32_t i = 0; i < p->rank; ++i) {
        if (p->a_strides[i] < 0 || p->b_strides[i] < 0) {
            return 0;
        }
    }
    return 1;
}

static int permute_ok(const mcu_permute_params *p)
{
    int32_t seen = 0;
    if (p->rank < 1 || p->rank > MCU_MAX_DIMS) {
        return 0;
    }
    for (int32_t i = 0; i < p->rank; ++i) {
        const int32_t d = p->perm[i];
        if (d < 0 || d >= p->rank || (seen & (1 << d)) != 0) {
            return 0;
        }
        seen |= 1 << d;
    }
    return checked_count(p->in_shape, p->rank, 1) > 0;
}

static int scale_ok(float scale, int32_t zero_point)
{
    return scale > 0.0f && scale <= FLT_MAX && zero_point >= INT8_MIN && zero_point <= INT8_MAX;
}

int mcu_program_params_conv_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return conv_f32_ok(&u->conv_f32);
}

int mcu_program_params_linear_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)w;
    const int32_t in_dims[2] = {u->linear_f32.batch, u->linear_f32.in_features};
    const int32_t w_dims[2] = {u->linear_f32.out_features, u->linear_f32.in_features};
    const int32_t out_dims[2] = {u->linear_f32.batch, u->linear_f32.out_features};
    return mcu_act_bounds_valid(u->linear_f32.act_min, u->linear_f32.act_max) &&
           checked_count(in_dims, 2, 4) > 0 && checked_count(out_dims, 2, 4) > 0 &&
           checked_count(w_dims, 2, 4) > 0 &&
           (kernel != MCU_K_LINEAR_DYN_S8 || u->linear_f32.in_features <= 66000);
}

int mcu_program_params_max_pool2d_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return pool_f32_ok(&u->pool_f32, 0);
}

int mcu_program_params_avg_pool2d_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return pool_f32_ok(&u->pool_f32, 1);
}

int mcu_program_params_mean_hw_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)w;
    (void)kernel;
    return shape4_ok((const mcu_shape4 *)u->w, 4);
}

int mcu_program_params_binary_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return binary_f32_ok(&u->binary_f32);
}

int mcu_program_params_clamp_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] > 0 && w[0] <= INT32_MAX / 4 && mcu_act_bounds_valid(as_float(w[1]), as_float(w[2]));
}

int mcu_program_params_count_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] > 0 && w[0] <= INT32_MAX / 4;
}

int mcu_program_params_rows_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return checked_count(w, 3, 4) > 0;
}

int mcu_program_params_permute(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return permute_ok(&u->permute);
}

int mcu_program_params_conv_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return conv_s8_ok(&u->conv_s8, 0);
}

int mcu_program_params_conv_transpose2d_phased_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return conv_s8_ok(&u->conv_s8, 0) && u->conv_s8.groups == 1 && u->conv_s8.dilation_h == 1 &&
           u->conv_s8.dilation_w == 1;
}

int mcu_program_params_conv2d_1x1_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return conv_s8_ok(&u->conv_s8, 1);
}

int mcu_program_params_depthwise_conv2d_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return depthwise_s8_ok(&u->depthwise_s8);
}

int mcu_program_params_depthwise_conv2d_s8_inplace(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    /* the in-place kernel's own conditions: the output is the input's memory, same shape, and the ring
     * of pad_top + 1 rows must hold every row a window still reads */
    return depthwise_s8_ok(&u->depthwise_s8) && u->depthwise_s8.stride_h == 1 && u->depthwise_s8.stride_w == 1 &&
           u->depthwise_s8.dilation_h == 1 && u->depthwise_s8.dilation_w == 1 && u->depthwise_s8.ch_mult == 1 &&
           u->depthwise_s8.pad_top < u->depthwise_s8.kernel_h && u->depthwise_s8.pad_left < u->depthwise_s8.kernel_w &&
           u->depthwise_s8.output.h == u->depthwise_s8.input.h && u->depthwise_s8.output.w == u->depthwise_s8.input.w &&
           u->depthwise_s8.output.c == u->depthwise_s8.input.c;
}

int mcu_program_params_linear_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_linear_s8_params *p = &u->linear_s8;
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    return mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max) && checked_count(in_dims, 2, 1) > 0 &&
           checked_count(w_dims, 2, 1) > 0 && checked_count(out_dims, 2, 1) > 0 &&
           p->out_features <= INT32_MAX / 4;
}

int mcu_program_params_linear_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_linear_s16_params *p = &u->linear_s16;
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    return mcu_act_s16_valid(p->act_min, p->act_max) && checked_count(in_dims, 2, 2) > 0 &&
           checked_count(w_dims, 2, 1) > 0 && checked_count(out_dims, 2, 2) > 0 && p->out_features <= INT32_MAX / 8;
}

int mcu_program_params_conv_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_conv2d_s16_params *p = &u->conv_s16;
    const mcu_shape4 in = p->input, out = p->output;
    const int32_t w_dims[4] = {out.c, p->kernel_h, p->kernel_w, in.c};
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
           p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && mcu_act_s16_valid(p->act_min, p->act_max) &&
           shape4_ok(&in, 2) && shape4_ok(&out, 2) && out.n == in.n && out.c <= INT32_MAX / 8 &&
           checked_count(w_dims, 4, 1) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0);
}

int mcu_program_params_conv_transpose2d_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    /* the 16x8 convolution's conditions and the transposed window's (its coordinates stay inside int32) */
    const mcu_conv2d_s16_params *p = &u->conv_s16;
    return mcu_program_params_conv_s16(kernel, u, w) &&
           mcu_transposed_fits(p->output.h, p->kernel_h, p->dilation_h, p->pad_top) &&
           mcu_transposed_fits(p->output.w, p->kernel_w, p->dilation_w, p->pad_left);
}

int mcu_program_params_conv_transpose2d_phased_s16(uint32_t kernel, const mcu_program_params_view *u,
                                                   const int32_t *w)
{
    return mcu_program_params_conv_transpose2d_s16(kernel, u, w) && u->conv_s16.dilation_h == 1 &&
           u->conv_s16.dilation_w == 1;
}

int mcu_program_params_conv_grouped_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    /* the 16x8 convolution's conditions on the whole tensors, and groups dividing both channel counts */
    const mcu_conv2d_grouped_s16_params *p = &u->conv_grouped_s16;
    return p->groups > 0 && p->conv.input.c % p->groups == 0 && p->conv.output.c % p->groups == 0 &&
           mcu_program_params_conv_s16(kernel, u, w);
}

int mcu_program_params_conv_transpose2d_grouped_s16(uint32_t kernel, const mcu_program_params_view *u,
                                                    const int32_t *w)
{
    return mcu_program_params_conv_grouped_s16(kernel, u, w) && mcu_program_params_conv_transpose2d_s16(kernel, u, w);
}

int mcu_program_params_depthwise_conv2d_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_depthwise_conv2d_s16_params *p = &u->depthwise_s16;
    const mcu_shape4 in = p->input, out = p->output;
    const int32_t w_dims[3] = {p->kernel_h, p->kernel_w, out.c};
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
           p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->ch_mult > 0 && p->kernel_w <= 512 &&
           mcu_act_s16_valid(p->act_min, p->act_max) && shape4_ok(&in, 2) && shape4_ok(&out, 2) && out.n == in.n &&
           (int64_t)in.c * p->ch_mult == out.c && out.c <= INT32_MAX / 8 && checked_count(w_dims, 3, 1) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0);
}

int mcu_program_params_mean_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_mean_s16_params *p = &u->mean_s16;
    const int32_t in_dims[3] = {p->outer, p->axis, p->inner};
    const int32_t out_dims[2] = {p->outer, p->inner};
    return mcu_act_s16_valid(p->act_min, p->act_max) && mcu_quant_s16_valid(p->multiplier, p->shift) &&
           checked_count(in_dims, 3, 2) > 0 && checked_count(out_dims, 2, 2) > 0;
}

int mcu_program_params_add_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_add_s16_params *p = &u->add_s16;
    return p->size >= 0 && p->size <= INT32_MAX / 2 && mcu_quant_valid(p->a_multiplier, p->a_shift) &&
           mcu_quant_valid(p->b_multiplier, p->b_shift) && mcu_quant_valid(p->out_multiplier, p->out_shift) &&
           p->left_shift >= 0 && p->left_shift <= 15 && mcu_act_s16_valid(p->act_min, p->act_max);
}

int mcu_program_params_pool_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)w;
    const mcu_pool2d_s16_params *p = &u->pool_s16;
    const mcu_shape4 in = p->input, out = p->output;
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->pad_top >= 0 &&
           p->pad_left >= 0 && mcu_act_s16_valid(p->act_min, p->act_max) && shape4_ok(&in, 2) &&
           shape4_ok(&out, 2) && out.n == in.n && out.c == in.c &&
           (kernel != MCU_K_AVG_POOL2D_S16 || (int64_t)p->kernel_h * p->kernel_w <= 65536) &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, 1, p->pad_top, 0) && p->pad_top < p->kernel_h &&
           (int64_t)(out.h - 1) * p->stride_h - p->pad_top < in.h &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, 1, p->pad_left, 0) && p->pad_left < p->kernel_w &&
           (int64_t)(out.w - 1) * p->stride_w - p->pad_left < in.w;
}

/* A palette word: the index width 2-4, plus MCU_LUT_SHARED for one table. */
static int palette_word_ok(int32_t word)
{
    const int32_t bits = word & ~MCU_LUT_SHARED;
    return bits >= 2 && bits <= 4;
}

int mcu_program_params_palette_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    /* the int8 kernel's params, one group for the convolution, then the palette word */
    if (kernel == MCU_K_LINEAR_LUT_S8) {
        return mcu_program_params_linear_s8(kernel, u, w) && palette_word_ok(w[7]);
    }
    if (kernel == MCU_K_DEPTHWISE_CONV2D_LUT_S8) {
        return depthwise_s8_ok(&u->depthwise_s8) && palette_word_ok(w[21]);
    }
    return conv_s8_ok(&u->conv_s8, 0) && u->conv_s8.groups == 1 && palette_word_ok(w[21]);
}

int mcu_program_params_palette_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    /* the 16x8 kernel's params, then the palette word */
    if (kernel == MCU_K_LINEAR_LUT_S16) {
        return mcu_program_params_linear_s16(kernel, u, w) && palette_word_ok(w[5]);
    }
    if (kernel == MCU_K_DEPTHWISE_CONV2D_LUT_S16) {
        return mcu_program_params_depthwise_conv2d_s16(kernel, u, w) && palette_word_ok(w[19]);
    }
    return mcu_program_params_conv_s16(kernel, u, w) && palette_word_ok(w[18]);
}

int mcu_program_params_activation_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_activation_s16_params *p = &u->activation_s16;
    return p->size >= 0 && p->size <= INT32_MAX / 2 && p->input_multiplier > 0 && p->input_multiplier <= INT16_MAX &&
           p->input_shift >= 0 && p->input_shift <= 31 &&
           (p->kind == MCU_ACT_S16_SIGMOID || p->kind == MCU_ACT_S16_TANH);
}

int mcu_program_params_mul_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_mul_s16_params *p = &u->mul_s16;
    return p->size >= 0 && p->size <= INT32_MAX / 2 && mcu_quant_valid(p->out_multiplier, p->out_shift) &&
           mcu_act_s16_valid(p->act_min, p->act_max);
}

int mcu_program_params_div_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_div_s16_params *p = &u->div_s16;
    return p->size >= 0 && p->size <= INT32_MAX / 2 && p->frac_bits >= 0 && p->frac_bits <= MCU_DIV_S16_MAX_BITS &&
           mcu_quant_valid(p->out_multiplier, p->out_shift) && mcu_act_s16_valid(p->act_min, p->act_max);
}

int mcu_program_params_softmax_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_softmax_s16_params *p = &u->softmax_s16;
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    return checked_count(dims, 3, 2) > 0 && p->axis <= MCU_SOFTMAX_S16_MAX_AXIS &&
           mcu_quant_valid(p->input_multiplier, p->input_shift);
}

int mcu_program_params_softmax_masked_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_softmax_masked_s16_params *p = &u->softmax_masked_s16;
    const int32_t dims[2] = {p->outer, p->axis};
    return checked_count(dims, 2, 2) > 0 && p->inner == 1 && p->axis <= MCU_SOFTMAX_S16_MAX_AXIS &&
           mcu_quant_valid(p->input_multiplier, p->input_shift) && p->mask_rows > 0 && p->outer % p->mask_rows == 0;
}

int mcu_program_params_requantize_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_requantize_s16_params *p = &u->requantize_s16;
    return p->size >= 0 && p->size <= INT32_MAX / 2 && mcu_quant_valid(p->multiplier, p->shift) &&
           mcu_act_s16_valid(p->act_min, p->act_max);
}

int mcu_program_params_bmm_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_bmm_s16_params *p = &u->bmm_s16;
    const int32_t out_dims[3] = {p->batch, p->m, p->n};
    return p->k > 0 && p->k <= MCU_BMM_S16_MAX_K && p->a_batch_stride >= 0 && p->b_batch_stride >= 0 &&
           checked_count(out_dims, 3, 2) > 0 && mcu_quant_s16_valid(p->multiplier, p->shift) &&
           mcu_act_s16_valid(p->act_min, p->act_max);
}

int mcu_program_params_layer_norm_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_layer_norm_s16_params *p = &u->layer_norm_s16;
    return p->rows > 0 && p->cols > 0 && p->cols <= MCU_LAYER_NORM_S16_MAX_COLS &&
           p->rows <= INT32_MAX / 2 / p->cols && (uint32_t)p->eps_hi < (1u << 29) &&
           mcu_act_s16_valid(p->act_min, p->act_max) && (p->rms == 0 || p->rms == 1);
}

int mcu_program_params_log_softmax_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_log_softmax_s16_params *p = &u->log_softmax_s16;
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    return checked_count(dims, 3, 2) > 0 && p->axis <= MCU_SOFTMAX_S16_MAX_AXIS &&
           mcu_quant_valid(p->input_multiplier, p->input_shift) &&
           mcu_quant_valid(p->diff_multiplier, p->diff_shift) && mcu_quant_valid(p->log_multiplier, p->log_shift);
}

int mcu_program_params_binary_s8_add(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    /* add and sub, and maximum and minimum with the add's parameters */
    (void)kernel;
    (void)w;
    return binary_s8_ok(&u->binary_s8, 0);
}

int mcu_program_params_binary_s8_mul(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return binary_s8_ok(&u->binary_s8, 1);
}

int mcu_program_params_log_softmax_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    return checked_count(w, 3, 1) > 0 && u->log_softmax_s8.input_multiplier >= 0 &&
           u->log_softmax_s8.log_multiplier >= 0 && mcu_output_offset_valid(u->log_softmax_s8.output_offset);
}

int mcu_program_params_prelu_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return u->prelu_s8.size > 0 && u->prelu_s8.channels > 0 && u->prelu_s8.inner > 0 &&
           mcu_input_offset_valid(u->prelu_s8.input_offset) && mcu_output_offset_valid(u->prelu_s8.output_offset) &&
           mcu_act_s8_valid(u->prelu_s8.act_min, u->prelu_s8.act_max) &&
           mcu_quant_valid(u->prelu_s8.pos_multiplier, u->prelu_s8.pos_shift) &&
           mcu_quant_valid(u->prelu_s8.neg_multiplier, u->prelu_s8.neg_shift);
}

int mcu_program_params_max_pool2d_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return pool_s8_ok(&u->pool_s8, 0);
}

int mcu_program_params_avg_pool2d_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return pool_s8_ok(&u->pool_s8, 1);
}

int mcu_program_params_mean_hw_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)w;
    (void)kernel;
    const mcu_mean_hw_s8_params *p = &u->mean_hw_s8;
    return mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->multiplier, p->shift) &&
           shape4_ok(&p->input, 1) && (int64_t)p->input.h * p->input.w <= INT32_MAX / 255;
}

int mcu_program_params_softmax_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_softmax_s8_params *p = &u->softmax_s8;
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    return p->input_multiplier >= 0 && p->input_left_shift >= 0 && p->input_left_shift <= 31 &&
           p->diff_min <= 0 && checked_count(dims, 3, 1) > 0 && p->axis <= MCU_SOFTMAX_MAX_AXIS;
}

int mcu_program_params_softmax_masked_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_softmax_masked_s8_params *p = &u->softmax_masked_s8;
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    return p->input_multiplier >= 0 && p->input_left_shift >= 0 && p->input_left_shift <= 31 &&
           p->diff_min <= 0 && checked_count(dims, 3, 1) > 0 && p->axis <= MCU_SOFTMAX_MAX_AXIS && p->inner == 1 &&
           p->mask_rows > 0 && p->outer % p->mask_rows == 0;
}

int mcu_program_params_lut_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0;
}

int mcu_program_params_requantize_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0 && mcu_input_offset_valid(w[1]) && mcu_quant_valid(w[2], w[3]) &&
           mcu_output_offset_valid(w[4]) && mcu_act_s8_valid(w[5], w[6]);
}

int mcu_program_params_clamp_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0 && mcu_act_s8_valid(w[1], w[2]);
}

int mcu_program_params_requantize_s8_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0 && w[0] <= INT32_MAX / 2 && mcu_input_offset_valid(w[1]) && mcu_quant_valid(w[2], w[3]) &&
           mcu_act_s16_valid(w[4], w[5]);
}

int mcu_program_params_requantize_s16_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0 && w[0] <= INT32_MAX / 2 && mcu_quant_valid(w[1], w[2]) && mcu_output_offset_valid(w[3]) &&
           mcu_act_s8_valid(w[4], w[5]);
}

int mcu_program_params_clamp_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0 && w[0] <= INT32_MAX / 2 && mcu_act_s16_valid(w[1], w[2]);
}

int mcu_program_params_quantize_f32_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return w[0] >= 0 && w[0] <= INT32_MAX / 4 && scale_ok(as_float(w[1]), w[2]);
}

int mcu_program_params_linear_w4_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)w;
    const mcu_linear_w4_params *p = &u->linear_w4;
    const int32_t in_dims[2] = {p->batch, p->in_features};
    const int32_t w_dims[2] = {p->out_features, p->in_features};
    const int32_t out_dims[2] = {p->batch, p->out_features};
    return mcu_act_bounds_valid(p->act_min, p->act_max) && checked_count(in_dims, 2, 4) > 0 &&
           checked_count(out_dims, 2, 4) > 0 && checked_count(w_dims, 2, 1) > 0 && p->group_size > 0 &&
           p->group_size % 2 == 0 && p->in_features % p->group_size == 0 &&
           (kernel != MCU_K_LINEAR_W4_S8 || p->in_features <= 1000000);
}

int mcu_program_params_index_put(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_index_put_params *p = &u->index_put;
    const int32_t state_dims[3] = {p->outer, p->axis, p->inner};
    const int32_t value_dims[3] = {p->outer, p->count, p->inner};
    return checked_count(state_dims, 3, 4) > 0 && checked_count(value_dims, 3, 4) > 0;
}

int mcu_program_params_compare(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return u->compare.rank >= 1 && u->compare.rank <= MCU_MAX_DIMS && u->compare.cmp >= MCU_CMP_EQ &&
           u->compare.cmp <= MCU_CMP_GE && checked_count(u->compare.out_shape, u->compare.rank, 4) > 0;
}

int mcu_program_params_where(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return u->where.rank >= 1 && u->where.rank <= MCU_MAX_DIMS &&
           checked_count(u->where.out_shape, u->where.rank, 4) > 0;
}

int mcu_program_params_embedding(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const int32_t table[2] = {u->embedding.rows, u->embedding.cols};
    const int32_t out[2] = {u->embedding.count, u->embedding.cols};
    return checked_count(table, 2, 4) > 0 && checked_count(out, 2, 4) > 0;
}

int mcu_program_params_unary_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return u->unary_f32.size > 0 && u->unary_f32.size <= INT32_MAX / 4 && u->unary_f32.fn >= 0 &&
           u->unary_f32.fn < (int32_t)MCU_UNARY_COUNT;
}

int mcu_program_params_layer_norm_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    return checked_count(w, 2, 4) > 0 && u->layer_norm_f32.eps >= 0.0f;
}

int mcu_program_params_bmm_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_bmm_f32_params *p = &u->bmm_f32;
    const int32_t out_dims[3] = {p->batch, p->m, p->n};
    return p->k > 0 && p->a_batch_stride >= 0 && p->b_batch_stride >= 0 && checked_count(out_dims, 3, 4) > 0;
}

int mcu_program_params_reduce_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    return checked_count(w, 3, 4) > 0 && u->reduce_f32.op >= 0 && u->reduce_f32.op < (int32_t)MCU_REDUCE_COUNT;
}

int mcu_program_params_layer_norm_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_layer_norm_s8_params *p = &u->layer_norm_s8;
    return p->rows > 0 && p->cols > 0 && p->cols <= MCU_LAYER_NORM_S8_MAX_COLS && p->rows <= INT32_MAX / p->cols &&
           (uint32_t)p->eps_hi < (1u << 29) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max) && (p->rms == 0 || p->rms == 1) &&
           p->input_zero_point >= -128 && p->input_zero_point <= 127;
}

int mcu_program_params_group_norm_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    const mcu_group_norm_f32_params *p = &u->group_norm_f32;
    return checked_count(w, 3, 4) > 0 && p->groups > 0 && p->channels % p->groups == 0 &&
           (p->channels_last == 0 || p->channels_last == 1) && p->eps >= 0.0f;
}

int mcu_program_params_var_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    return checked_count(w, 3, 4) > 0 && u->var_f32.divisor >= 0.0f;
}

int mcu_program_params_argmax_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)u;
    return checked_count(w, 3, 1) > 0 && w[0] <= INT32_MAX / 4 / w[2];
}

int mcu_program_params_bmm_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_bmm_s8_params *p = &u->bmm_s8;
    const int32_t out_dims[3] = {p->batch, p->m, p->n};
    return p->k > 0 && p->k <= 32768 && p->a_batch_stride >= 0 && p->b_batch_stride >= 0 &&
           checked_count(out_dims, 3, 1) > 0 && mcu_input_offset_valid(p->a_offset) &&
           mcu_input_offset_valid(p->b_offset) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->multiplier, p->shift);
}

int mcu_program_params_reduce_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    const mcu_reduce_s8_params *p = &u->reduce_s8;
    return checked_count(w, 3, 1) > 0 && p->reduce <= INT32_MAX / 256 && p->op >= 0 &&
           p->op < (int32_t)MCU_REDUCE_COUNT && mcu_input_offset_valid(p->input_offset) &&
           mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max) &&
           mcu_quant_valid(p->multiplier, p->shift);
}

int mcu_program_params_prelu_f32(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    return u->prelu_f32.size > 0 && u->prelu_f32.size <= INT32_MAX / 4 && u->prelu_f32.channels > 0 &&
           u->prelu_f32.inner > 0;
}

int mcu_program_params_remap_gather(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    return u->remap.rank >= 1 && u->remap.rank <= MCU_MAX_DIMS && w[13] > 0 &&
           checked_count(u->remap.in_shape, u->remap.rank, w[13]) > 0 &&
           checked_count(u->remap.out_shape, u->remap.rank, w[13]) > 0;
}

int mcu_program_params_gather(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    int ok = 1;
    ok = u->gather.rank >= 1 && u->gather.rank <= MCU_MAX_DIMS && u->gather.dim >= 0 && u->gather.dim < u->gather.rank &&
         w[14] > 0 && checked_count(u->gather.in_shape, u->gather.rank, w[14]) > 0 &&
         checked_count(u->gather.out_shape, u->gather.rank, w[14]) > 0;
    for (int32_t d = 0; ok && d < u->gather.rank; ++d) {
        ok = d == u->gather.dim || u->gather.out_shape[d] <= u->gather.in_shape[d];
    }
    return ok;
}

int mcu_program_params_index_select(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    const mcu_index_select_params *p = &u->index_select;
    const int32_t in_dims[3] = {p->outer, p->axis, p->inner};
    const int32_t out_dims[3] = {p->outer, p->count, p->inner};
    return w[4] > 0 && checked_count(in_dims, 3, w[4]) > 0 && checked_count(out_dims, 3, w[4]) > 0;
}

int mcu_program_params_resample(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)w;
    const mcu_resample_f32_params *p = &u->resample_f32; /* the s8 struct has the same fields */
    const int32_t size = kernel == MCU_K_RESIZE_BILINEAR_F32 || kernel == MCU_K_ADAPTIVE_AVG_POOL_F32   ? 4
                         : kernel == MCU_K_RESIZE_BILINEAR_S16 || kernel == MCU_K_ADAPTIVE_AVG_POOL_S16 ? 2
                                                                                                         : 1;
    const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
    const int32_t out_dims[4] = {p->outer, p->out_h, p->out_w, p->inner};
    return checked_count(in_dims, 4, size) > 0 && checked_count(out_dims, 4, size) > 0 &&
           (kernel != MCU_K_ADAPTIVE_AVG_POOL_S8 || (int64_t)p->in_h * p->in_w <= INT32_MAX / 128) &&
           ((kernel != MCU_K_ADAPTIVE_AVG_POOL_F32 && kernel != MCU_K_ADAPTIVE_AVG_POOL_S8 &&
             kernel != MCU_K_ADAPTIVE_AVG_POOL_S16) ||
            mcu_adaptive_fits(p->in_h, p->in_w, p->out_h, p->out_w));
}

int mcu_program_params_recurrent_s8(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_recurrent_s8_params *p = &u->recurrent_s8;
    const int32_t in_dims[3] = {p->batch, p->steps, p->input_size};
    const int32_t out_dims[3] = {p->batch, p->steps, p->hidden};
    return checked_count(in_dims, 3, 1) > 0 && checked_count(out_dims, 3, 1) > 0 &&
           p->input_size <= MCU_RECURRENT_S8_MAX_FEATURES && p->hidden <= MCU_RECURRENT_S8_MAX_FEATURES &&
           p->hidden_zp >= INT8_MIN && p->hidden_zp <= INT8_MAX && p->out_mult >= 0 && p->out_shift >= -31 &&
           p->out_shift <= 30 && p->state_shift >= 0 && p->state_shift <= 15;
}

int mcu_program_params_lstm_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_lstm_s16_params *p = &u->lstm_s16;
    const int32_t in_dims[3] = {p->batch, p->steps, p->input_size};
    const int32_t out_dims[3] = {p->batch, p->steps, p->hidden};
    return checked_count(in_dims, 3, 2) > 0 && checked_count(out_dims, 3, 2) > 0 &&
           p->input_size <= MCU_LSTM_S16_MAX_FEATURES && p->hidden <= MCU_LSTM_S16_MAX_FEATURES &&
           p->cell_shift >= 0 && p->cell_shift <= 15 && mcu_quant_valid(p->forget_mult, p->forget_shift) &&
           mcu_quant_valid(p->input_mult, p->input_shift) && mcu_quant_valid(p->out_mult, p->out_shift);
}

int mcu_program_params_gru_s16(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    (void)kernel;
    (void)w;
    const mcu_gru_s16_params *p = &u->gru_s16;
    const int32_t in_dims[3] = {p->batch, p->steps, p->input_size};
    const int32_t out_dims[3] = {p->batch, p->steps, p->hidden};
    return checked_count(in_dims, 3, 2) > 0 && checked_count(out_dims, 3, 2) > 0 &&
           p->input_size <= MCU_LSTM_S16_MAX_FEATURES && p->hidden <= MCU_LSTM_S16_MAX_FEATURES &&
           mcu_quant_valid(p->cand_mult, p->cand_shift) && mcu_quant_valid(p->keep_mult, p->keep_shift) &&
           mcu_quant_valid(p->out_mult, p->out_shift);
}

int mcu_program_params_none(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w)
{
    /* concat, pad, slice: their checks in mcu_program_check_kernel cover the kernels' own */
    (void)kernel;
    (void)u;
    (void)w;
    int ok = 1;
    return ok;
}

mcu_status mcu_program_check_params(uint32_t kernel, const mcu_program_kernel_row *row, const int32_t *w,
                                    uint32_t n_params)
{
    mcu_program_params_view u;
    memset(&u, 0, sizeof(u));
    memcpy(&u, w, (n_params < MCU_PROGRAM_MAX_PARAMS ? n_params : MCU_PROGRAM_MAX_PARAMS) * sizeof(int32_t));
    return row->params(kernel, &u, w) ? MCU_OK : MCU_ERR_PROGRAM_INVALID;
}

/* Operands a and b (arena tensors, the kernel touching `na` and `nb` bytes) share bytes. Constants are
 * never written and never share memory with an arena. */
static int overlap(const mcu_operand_desc *a, uint32_t na, const mcu_operand_desc *b, uint32_t nb)
{
    return a->present && b->present && !a->constant && !b->constant && a->arena == b->arena && na != 0 &&
           nb != 0 && (uint64_t)a->offset < (uint64_t)b->offset + nb && (uint64_t)b->offset < (uint64_t)a->offset + na;
}

/* mcu_bad_window_overlap: the output may trail the input, never start at or after it inside it. */
static int window_ok(const mcu_operand_desc *in, uint32_t nin, const mcu_operand_desc *out, uint32_t nout)
{
    return !overlap(in, nin, out, nout) || out->offset < in->offset;
}

/* mcu_bad_alias: elementwise kernels run in place or on disjoint memory. */
MCU_PROGRAM_SHARED static int elementwise_ok(const mcu_operand_desc *in, uint32_t nin, const mcu_operand_desc *out,
                                             uint32_t nout)
{
    return !overlap(in, nin, out, nout) || in->offset == out->offset;
}

/* mcu_binary_*_alias_ok: an operand shares memory with the output only as the output itself, contiguous. */
MCU_PROGRAM_SHARED static int binary_alias_ok(const mcu_operand_desc *x, uint32_t nx, const mcu_operand_desc *out,
                                              uint32_t nout, const int32_t *p, const int32_t *strides)
{
    if (!overlap(x, nx, out, nout)) {
        return 1;
    }
    if (x->offset != out->offset) {
        return 0;
    }
    int64_t contiguous = 1;
    for (int32_t i = p[0] - 1; i >= 0; --i) {
        if (p[1 + i] != 1 && strides[i] != contiguous) {
            return 0;
        }
        contiguous *= p[1 + i];
    }
    return 1;
}

/* Per-channel multipliers and shifts (operands 3 and 4 of the int8 matmul kernels): constants whose every
 * entry the kernel accepts (mcu_quant_valid), so that no run can fail on them. */
MCU_PROGRAM_SHARED static int per_channel_ok(const mcu_operand_desc *ops, const uint32_t *bytes)
{
    if (!ops[3].present || !ops[4].present || !ops[3].constant || !ops[4].constant || bytes[3] != bytes[4]) {
        return 0;
    }
    for (uint32_t i = 0; i < bytes[3] / 4u; ++i) {
        int32_t m, s;
        memcpy(&m, ops[3].data + 4u * i, 4);
        memcpy(&s, ops[4].data + 4u * i, 4);
        if (!mcu_quant_valid(m, s)) {
            return 0;
        }
    }
    return 1;
}

/* The per-column shifts of mcu_layer_norm_s8 (a constant): every one inside the kernel's [1, 62]. */
static int shifts_ok(const mcu_operand_desc *op, uint32_t bytes)
{
    for (uint32_t i = 0; i < bytes / 4u; ++i) {
        int32_t v;
        memcpy(&v, op->data + 4u * i, 4);
        if (v < 1 || v > 62) {
            return 0;
        }
    }
    return 1;
}

/* Entry i of an int32 constant. */
static int32_t const_i32(const mcu_operand_desc *op, uint32_t i)
{
    int32_t v;
    memcpy(&v, op->data + 4u * i, 4);
    return v;
}

/* Entries [first, first + count) of an int32 constant all inside [lo, hi]. */
static int const_in(const mcu_operand_desc *op, uint32_t first, uint32_t count, int64_t lo, int64_t hi)
{
    for (uint32_t i = first; i < first + count; ++i) {
        const int32_t v = const_i32(op, i);
        if (v < lo || v > hi) {
            return 0;
        }
    }
    return 1;
}

/* An index operand: a constant is checked here as the kernel checks it on every run; an arena tensor holds
 * data the program does not know (token ids, positions), which the kernel checks when it runs. */
static int indices_ok(const mcu_operand_desc *op, uint32_t count, int64_t lo, int64_t hi)
{
    return !op->constant || const_in(op, 0, count, lo, hi);
}

/* The (i0, i1) or (i0, i1, f) entries of one axis of a bilinear resize's index table (the kernels' checks). */
static int resize_axis_ok(const mcu_operand_desc *op, uint32_t first, int32_t out, int32_t in, int s8)
{
    const uint32_t width = s8 ? 3u : 2u;
    for (uint32_t i = 0; i < (uint32_t)out; ++i) {
        const uint32_t e = first + width * i;
        if (!const_in(op, e, 2, 0, (int64_t)in - 1) || (s8 && !const_in(op, e + 2, 1, 0, 1024))) {
            return 0;
        }
    }
    return 1;
}

/* The per-row constants of the integer recurrent layers (bias and Q31 multiplier and shift of the input
 * product, then of the recurrent product) and their sigmoid table, as mcu_recurrent_check tests them on
 * every run; the scratch is read as int16. */
static int recurrent_ok(const mcu_operand_desc *ops, const int32_t *p, uint32_t gates)
{
    if (!ops[4].constant || !ops[5].constant || ops[0].offset % 2u != 0) {
        return 0;
    }
    for (uint32_t r = 0; r < gates * (uint32_t)p[3]; ++r) {
        int32_t q[6];
        for (uint32_t k = 0; k < 6; ++k) {
            q[k] = const_i32(&ops[4], 6u * r + k);
        }
        if (q[0] < -MCU_RECURRENT_S8_MAX_BIAS || q[0] > MCU_RECURRENT_S8_MAX_BIAS || q[3] < -MCU_RECURRENT_S8_MAX_BIAS ||
            q[3] > MCU_RECURRENT_S8_MAX_BIAS || !mcu_quant_valid(q[1], q[2]) || !mcu_quant_valid(q[4], q[5])) {
            return 0;
        }
    }
    int16_t prev = 0;
    for (uint32_t k = 0; k < MCU_RECURRENT_S8_TABLE_SIZE; ++k) { /* increasing in [0, 2^15) */
        int16_t t;
        memcpy(&t, ops[5].data + 2u * k, 2);
        if (t < 0 || t < prev) {
            return 0;
        }
        prev = t;
    }
    return 1;
}

/* The shape checks of the layout kernels, which count bytes with the element size (the output's dtype). */
static int shapes_ok(uint32_t kernel, const int32_t *p, int32_t esize)
{
    const int32_t rank = p[0];
    if (rank < 1 || rank > MCU_MAX_DIMS || checked_count(p + 1, rank, esize) <= 0) {
        return 0;
    }
    if (kernel == MCU_K_SLICE) { /* in_shape, out_shape, start, step */
        if (checked_count(p + 7, rank, esize) <= 0) {
            return 0;
        }
        for (int32_t d = 0; d < rank; ++d) {
            const int64_t last = (int64_t)p[13 + d] + (int64_t)(p[7 + d] - 1) * p[19 + d];
            if (p[19 + d] < 1 || p[13 + d] < 0 || last >= p[1 + d]) {
                return 0;
            }
        }
    } else if (kernel == MCU_K_PAD) { /* in_shape, pad_before, pad_after */
        int32_t out_dim[MCU_MAX_DIMS];
        for (int32_t d = 0; d < rank; ++d) {
            const int64_t n = (int64_t)p[1 + d] + p[7 + d] + p[13 + d];
            if (p[7 + d] < 0 || p[13 + d] < 0 || n > INT32_MAX) {
                return 0;
            }
            out_dim[d] = (int32_t)n;
        }
        return checked_count(out_dim, rank, esize) > 0;
    }
    return 1;
}

/* The index tables of the resampling and data movement kernels, entry by entry as the kernels check them:
 * remap's and resize's tables are the program's own constants; gather's and index_select's indices are
 * checked here when they are constants. */
static int tables_ok(uint32_t kernel, const mcu_operand_desc *t, const int32_t *p)
{
    switch (kernel) {
    case MCU_K_REMAP: { /* rank, in_shape[6], out_shape[6]: per dim, out_shape entries inside in_shape */
        if (!t->constant) {
            return 0;
        }
        uint32_t first = 0;
        for (int32_t d = 0; d < p[0]; ++d) {
            if (!const_in(t, first, (uint32_t)p[7 + d], 0, (int64_t)p[1 + d] - 1)) {
                return 0;
            }
            first += (uint32_t)p[7 + d];
        }
        return 1;
    }
    case MCU_K_GATHER: /* rank, in_shape[6], out_shape[6] (the index's), dim */
        return p[13] >= 0 && p[13] < p[0] && checked_count(p + 7, p[0], 1) > 0 &&
               indices_ok(t, (uint32_t)checked_count(p + 7, p[0], 1), 0, (int64_t)p[1 + p[13]] - 1);
    case MCU_K_INDEX_SELECT: /* outer, axis, inner, count */
        return indices_ok(t, (uint32_t)p[3], 0, (int64_t)p[1] - 1);
    case MCU_K_RESIZE_BILINEAR_F32: /* outer, in_h, in_w, out_h, out_w, inner */
    case MCU_K_RESIZE_BILINEAR_S8:
    case MCU_K_RESIZE_BILINEAR_S16: { /* (the 16-bit kernel reads the int8 one's tables) */
        const int s8 = kernel != MCU_K_RESIZE_BILINEAR_F32;
        return t->constant && resize_axis_ok(t, 0, p[3], p[1], s8) &&
               resize_axis_ok(t, (s8 ? 3u : 2u) * (uint32_t)p[3], p[4], p[2], s8);
    }
    default: return 1;
    }
}

int mcu_program_alias_window_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                const int32_t *p)
{
    /* conv2d, depthwise and grouped: the window contract of conv2d */
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return per_channel_ok(ops, bytes) && window_ok(&ops[0], bytes[0], out, nout) &&
           !overlap(&ops[5], (uint32_t)ops[5].nbytes, &ops[0], bytes[0]) &&
           !overlap(&ops[5], (uint32_t)ops[5].nbytes, out, nout);
}

int mcu_program_alias_linear_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return per_channel_ok(ops, bytes) && !overlap(&ops[0], bytes[0], out, nout) &&
           !overlap(&ops[5], (uint32_t)ops[5].nbytes, &ops[0], bytes[0]) &&
           !overlap(&ops[5], (uint32_t)ops[5].nbytes, out, nout);
}

int mcu_program_alias_palette_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                  uint32_t n_ops, const int32_t *p)
{
    /* the LUT convolution: the window contract with scratch for every channel's decoded weights (it runs
     * the int8 convolution on them), else no overlap of input and output (a channel at a time) */
    const uint64_t whole = (uint64_t)(uint32_t)p[3] * (uint32_t)p[7] * (uint32_t)p[8] * (uint32_t)p[9];
    return ops[5].present && (uint64_t)ops[5].nbytes >= whole /* the kernel's context is the whole tensor */
               ? mcu_program_alias_window_s8(kernel, ops, bytes, n_ops, p)
               : mcu_program_alias_linear_s8(kernel, ops, bytes, n_ops, p);
}

int mcu_program_alias_conv2d_1x1_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                    const int32_t *p)
{
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    /* The pixel loop runs forwards or backwards; some overlaps of input and output allow neither. */
    const int64_t pixels = (int64_t)p[0] * p[1] * p[2];
    const int64_t bi = p[3], bo = p[7];
    const int64_t d = (int64_t)out->offset - (int64_t)ops[0].offset;
    const int64_t fwd = bi - bo < pixels * (bi - bo) ? bi - bo : pixels * (bi - bo);
    const int64_t bwd = (pixels - 1) * (bi - bo) > 0 ? (pixels - 1) * (bi - bo) : 0;
    return per_channel_ok(ops, bytes) && ops[5].present &&
           !overlap(&ops[5], (uint32_t)bo, &ops[0], bytes[0]) && !overlap(&ops[5], (uint32_t)bo, out, nout) &&
           (!overlap(&ops[0], bytes[0], out, nout) || d <= fwd || d >= bwd);
}

int mcu_program_alias_depthwise_conv2d_s8_inplace(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                                  uint32_t n_ops, const int32_t *p)
{
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    const uint32_t ring = (uint32_t)(p[13] + 1) * (uint32_t)p[2] * (uint32_t)p[3]; /* pad_top + 1 rows */
    return per_channel_ok(ops, bytes) && ops[5].present && !overlap(&ops[5], ring, out, nout);
}

int mcu_program_alias_window(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                             const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return window_ok(&ops[0], bytes[0], out, nout);
}

int mcu_program_alias_input_apart(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                  const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return !overlap(&ops[0], bytes[0], out, nout);
}

int mcu_program_alias_movement(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                               const int32_t *p)
{
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return shapes_ok(kernel, p, (int32_t)mcu_dtype_size(out->dtype)) && !overlap(&ops[0], bytes[0], out, nout);
}

int mcu_program_alias_linear_dyn_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                    const int32_t *p)
{
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    const uint32_t count = (uint32_t)p[0] * (uint32_t)p[1]; /* the int8 copy of the input in scratch */
    return !overlap(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], count, &ops[1], bytes[1]) &&
           !overlap(&ops[0], count, out, nout);
}

int mcu_program_alias_compare(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                              const int32_t *p)
{
    /* bytes out, wider operands in: no overlap at all */
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
           (kernel != MCU_K_EMBEDDING || indices_ok(&ops[0], (uint32_t)p[2], 0, (int64_t)p[0] - 1));
}

int mcu_program_alias_embedding_s8_f32(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                       uint32_t n_ops, const int32_t *p)
{
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
           !overlap(&ops[2], bytes[2], out, nout) && indices_ok(&ops[0], (uint32_t)p[2], 0, (int64_t)p[0] - 1);
}

int mcu_program_alias_where(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                            const int32_t *p)
{
    /* an operand may be the output itself, laid out as it (the kernel checks strides) */
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return !overlap(&ops[0], bytes[0], out, nout) &&
           (!overlap(&ops[1], bytes[1], out, nout) || ops[1].offset == out->offset) &&
           (!overlap(&ops[2], bytes[2], out, nout) || ops[2].offset == out->offset);
}

int mcu_program_alias_index_put(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                const int32_t *p)
{
    /* writes rows of the state (its output): values and positions stay apart from it */
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
           indices_ok(&ops[0], (uint32_t)p[3], -(int64_t)p[1], (int64_t)p[1] - 1);
}

int mcu_program_alias_linear_w4_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                   const int32_t *p)
{
    /* the row's int16 copy in scratch, word-aligned */
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    const uint32_t count = 2u * (uint32_t)p[1];
    return !overlap(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], count, &ops[1], bytes[1]) &&
           !overlap(&ops[0], count, out, nout) && ops[0].offset % 4u == 0;
}

int mcu_program_alias_tables(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                             const int32_t *p)
{
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = 1;
    for (uint32_t i = 0; i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], out, nout);
    }
    ok = ok && tables_ok(kernel, &ops[0], p);
    return ok;
}

int mcu_program_alias_concat(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                             const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = 1;
    for (uint32_t i = 0; i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], out, nout);
    }
    return ok;
}

int mcu_program_alias_binary(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                             const int32_t *p)
{
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return binary_alias_ok(&ops[0], bytes[0], out, nout, p, p + 7) &&
           binary_alias_ok(&ops[1], bytes[1], out, nout, p, p + 13);
}

int mcu_program_alias_batch_norm_f32(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                     uint32_t n_ops, const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return elementwise_ok(&ops[2], bytes[2], out, nout) && !overlap(&ops[0], bytes[0], out, nout) &&
           !overlap(&ops[1], bytes[1], out, nout);
}

int mcu_program_alias_lut_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                             const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return elementwise_ok(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], 256, out, nout);
}

int mcu_program_alias_lut_s16(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                              const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return elementwise_ok(&ops[1], bytes[1], out, nout) &&
           !overlap(&ops[0], MCU_LUT_S16_ENTRIES * sizeof(int16_t), out, nout);
}

int mcu_program_alias_softmax_masked(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                     uint32_t n_ops, const int32_t *p)
{
    /* [hidden, in, out]: in and out exactly aliased or apart, the mask a constant apart from the output */
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return elementwise_ok(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], bytes[0], out, nout) &&
           ops[0].constant;
}

int mcu_program_alias_log_softmax_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                     uint32_t n_ops, const int32_t *p)
{
    /* [exp table, in, out] */
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return elementwise_ok(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], bytes[0], out, nout) &&
           ops[0].constant && const_in(&ops[0], 0, 256, 0, INT32_MAX);
}

int mcu_program_alias_rows_in_place(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                    const int32_t *p)
{
    /* rows (or groups) are read whole before they are written: in place is fine */
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = 1;
    ok = elementwise_ok(&ops[0], bytes[0], out, nout);
    for (uint32_t i = 1; i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], out, nout);
    }
    if (kernel == MCU_K_LAYER_NORM_S8 || kernel == MCU_K_LAYER_NORM_S16) {
        ok = ok && ops[2].constant && shifts_ok(&ops[2], bytes[2]);
    }
    return ok;
}

int mcu_program_alias_bmm_f32(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                              const int32_t *p)
{
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout);
}

int mcu_program_alias_recurrent(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                const int32_t *p)
{
    /* scratch, input and output all apart */
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = 1;
    for (uint32_t i = 0; i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], out, nout);
    }
    ok = ok && !overlap(&ops[0], bytes[0], &ops[1], bytes[1]) && recurrent_ok(ops, p, kernel == MCU_K_LSTM_S8 || kernel == MCU_K_LSTM_S4 ? 4 : 3);
    return ok;
}

int mcu_program_alias_lstm_final_cell_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                         uint32_t n_ops, const int32_t *p)
{
    /* every operand apart from the cell it writes, the scratch apart from the input and the hidden states (read
     * while the scratch is written), the int8 LSTM's constants valid */
    (void)kernel;
    const uint32_t last = n_ops - 1;
    int ok = ops[last].offset % 2u == 0;
    for (uint32_t i = 0; i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], &ops[last], bytes[last]);
    }
    return ok && !overlap(&ops[0], bytes[0], &ops[1], bytes[1]) && !overlap(&ops[0], bytes[0], &ops[6], bytes[6]) &&
           recurrent_ok(ops, p, 4);
}

int mcu_program_alias_gru_from_s8(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                  uint32_t n_ops, const int32_t *p)
{
    /* as mcu_gru_s8's, and the state apart from the scratch (copied into it) and the output */
    return mcu_program_alias_recurrent(kernel, ops, bytes, n_ops, p) && !overlap(&ops[0], bytes[0], &ops[6], bytes[6]);
}

int mcu_program_alias_lstm_s16(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                               const int32_t *p)
{
    /* scratch (the int16 cell), input, the initial states and output all apart (and the hidden states a final
     * cell reads, after the input); the per-row multipliers and 16x8 shifts constant and valid, as mcu_lstm_s16
     * tests them on every run */
    const uint32_t k = kernel == MCU_K_LSTM_FINAL_CELL_S16;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    const mcu_operand_desc *quant = &ops[7 + k];
    int ok = !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
             !overlap(&ops[0], bytes[0], &ops[1], bytes[1]) && ops[0].offset % 2u == 0 && quant->constant;
    for (uint32_t s = 2; ok && s < 4u + k; ++s) {
        ok = !overlap(&ops[s], bytes[s], out, nout) && !overlap(&ops[0], bytes[0], &ops[s], bytes[s]);
    }
    for (uint32_t r = 0; ok && r < 4u * (uint32_t)p[3]; ++r) {
        ok = mcu_quant_s16_valid(const_i32(quant, 4u * r), const_i32(quant, 4u * r + 1u)) &&
             mcu_quant_s16_valid(const_i32(quant, 4u * r + 2u), const_i32(quant, 4u * r + 3u));
    }
    return ok;
}

int mcu_program_alias_gru_s16(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                              const int32_t *p)
{
    /* scratch, input, state and output all apart; the per-row multipliers and 16x8 shifts constant and valid,
     * as mcu_gru_s16 tests them on every run */
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
             !overlap(&ops[0], bytes[0], &ops[1], bytes[1]) && ops[0].offset % 2u == 0 && ops[6].constant;
    if (ops[2].present) {
        ok = ok && !overlap(&ops[2], bytes[2], out, nout) && !overlap(&ops[0], bytes[0], &ops[2], bytes[2]);
    }
    for (uint32_t r = 0; ok && r < 3u * (uint32_t)p[3]; ++r) {
        ok = mcu_quant_s16_valid(const_i32(&ops[6], 4u * r), const_i32(&ops[6], 4u * r + 1u)) &&
             mcu_quant_s16_valid(const_i32(&ops[6], 4u * r + 2u), const_i32(&ops[6], 4u * r + 3u));
    }
    return ok;
}

int mcu_program_alias_same_count(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                  const int32_t *p)
{
    /* every operand apart from the output, or the output itself */
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    for (uint32_t i = 0; i < last; ++i) {
        if (!elementwise_ok(&ops[i], bytes[i], &ops[last], bytes[last])) {
            return 0;
        }
    }
    return 1;
}

int mcu_program_alias_elementwise(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes, uint32_t n_ops,
                                  const int32_t *p)
{
    /* clamp, sigmoid, tanh, hardswish, softmax, requantize, quantize, dequantize */
    (void)kernel;
    (void)p;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    return elementwise_ok(&ops[0], bytes[0], out, nout);
}

mcu_status mcu_program_check_operands(uint32_t kernel, const mcu_program_kernel_row *row, const mcu_operand_desc *ops,
                                      const uint32_t *bytes, uint32_t n_ops, const int32_t *p)
{
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = row->alias(kernel, ops, bytes, n_ops, p);
    /* Weights, biases, scales: the convolution and linear kernels refuse any that share the output's bytes. */
    for (uint32_t i = row->weights; row->weights != 0 && i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], out, nout);
    }
    return ok ? MCU_OK : MCU_ERR_PROGRAM_INVALID;
}
