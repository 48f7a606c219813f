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
#include "mcu/kernels_f32.h"
#include "mcu/kernels_generic.h"
#include "mcu/kernels_mixed.h"
#include "mcu/kernels_s8.h"
#include "mcu_program_internal.h"

static float as_float(int32_t w)
{
    float f;
    memcpy(&f, &w, sizeof(f));
    return f;
}

static int shape4_ok(const mcu_shape4 *s, int32_t elem_size)
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
    return mcu_checked_count(w_dims, 4, 4) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0);
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
    return mcu_checked_count(w_dims, 4, 1) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0);
}

static int depthwise_s8_ok(const mcu_depthwise_conv2d_s8_params *p)
{
    const mcu_shape4 in = p->input, out = p->output;
    const int32_t w_dims[3] = {p->kernel_h, p->kernel_w, out.c};
    return p->kernel_h > 0 && p->kernel_w > 0 && p->stride_h > 0 && p->stride_w > 0 && p->dilation_h > 0 &&
           p->dilation_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->ch_mult > 0 &&
           mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
           mcu_act_s8_valid(p->act_min, p->act_max) && shape4_ok(&in, 1) && shape4_ok(&out, 1) && out.n == in.n &&
           (int64_t)in.c * p->ch_mult == out.c && out.c <= INT32_MAX / 4 && mcu_checked_count(w_dims, 3, 1) > 0 &&
           mcu_window_fits(in.h, out.h, p->stride_h, p->kernel_h, p->dilation_h, p->pad_top, 0) &&
           mcu_window_fits(in.w, out.w, p->stride_w, p->kernel_w, p->dilation_w, p->pad_left, 0);
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
          mcu_checked_count(p->out_shape, p->rank, 1) > 0)) {
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
          mcu_checked_count(p->out_shape, p->rank, 4) > 0)) {
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
    return mcu_checked_count(p->in_shape, p->rank, 1) > 0;
}

static int scale_ok(float scale, int32_t zero_point)
{
    return scale > 0.0f && scale <= FLT_MAX && zero_point >= INT8_MIN && zero_point <= INT8_MAX;
}

mcu_status mcu_program_check_params(uint32_t kernel, const int32_t *w, uint32_t n_params)
{
    mcu_program_params_view u;
    memset(&u, 0, sizeof(u));
    memcpy(&u, w, (n_params < MCU_PROGRAM_MAX_PARAMS ? n_params : MCU_PROGRAM_MAX_PARAMS) * sizeof(int32_t));
    int ok = 1;
    switch (kernel) {
    case MCU_K_CONV2D_F32:
    case MCU_K_CONV_TRANSPOSE2D_F32: ok = conv_f32_ok(&u.conv_f32); break;
    case MCU_K_LINEAR_F32:
    case MCU_K_LINEAR_W8_F32:
    case MCU_K_LINEAR_DYN_S8: {
        const int32_t in_dims[2] = {u.linear_f32.batch, u.linear_f32.in_features};
        const int32_t w_dims[2] = {u.linear_f32.out_features, u.linear_f32.in_features};
        const int32_t out_dims[2] = {u.linear_f32.batch, u.linear_f32.out_features};
        ok = mcu_act_bounds_valid(u.linear_f32.act_min, u.linear_f32.act_max) &&
             mcu_checked_count(in_dims, 2, 4) > 0 && mcu_checked_count(out_dims, 2, 4) > 0 &&
             mcu_checked_count(w_dims, 2, 4) > 0 &&
             (kernel != MCU_K_LINEAR_DYN_S8 || u.linear_f32.in_features <= 66000);
        break;
    }
    case MCU_K_MAX_POOL2D_F32: ok = pool_f32_ok(&u.pool_f32, 0); break;
    case MCU_K_AVG_POOL2D_F32: ok = pool_f32_ok(&u.pool_f32, 1); break;
    case MCU_K_MEAN_HW_F32: ok = shape4_ok((const mcu_shape4 *)u.w, 4); break;
    case MCU_K_ADD_F32:
    case MCU_K_SUB_F32:
    case MCU_K_MUL_F32:
    case MCU_K_DIV_F32: ok = binary_f32_ok(&u.binary_f32); break;
    case MCU_K_CLAMP_F32:
        ok = w[0] > 0 && w[0] <= INT32_MAX / 4 && mcu_act_bounds_valid(as_float(w[1]), as_float(w[2]));
        break;
    case MCU_K_SIGMOID_F32:
    case MCU_K_TANH_F32:
    case MCU_K_HARDSWISH_F32: ok = w[0] > 0 && w[0] <= INT32_MAX / 4; break;
    case MCU_K_SOFTMAX_F32:
    case MCU_K_BATCH_NORM_F32: ok = mcu_checked_count(w, 3, 4) > 0; break;
    case MCU_K_PERMUTE: ok = permute_ok(&u.permute); break;
    case MCU_K_CONV2D_S8:
    case MCU_K_CONV_TRANSPOSE2D_S8: ok = conv_s8_ok(&u.conv_s8, 0); break;
    case MCU_K_CONV_TRANSPOSE2D_PHASED_S8:
        ok = conv_s8_ok(&u.conv_s8, 0) && u.conv_s8.groups == 1 && u.conv_s8.dilation_h == 1 &&
             u.conv_s8.dilation_w == 1;
        break;
    case MCU_K_CONV2D_GROUPED_S8: ok = conv_s8_ok(&u.conv_s8, 0); break;
    case MCU_K_CONV2D_1X1_S8: ok = conv_s8_ok(&u.conv_s8, 1); break;
    case MCU_K_DEPTHWISE_CONV2D_S8: ok = depthwise_s8_ok(&u.depthwise_s8); break;
    case MCU_K_DEPTHWISE_CONV2D_S8_INPLACE:
        /* the in-place kernel's own conditions: the output is the input's memory, same shape, and the ring
         * of pad_top + 1 rows must hold every row a window still reads */
        ok = depthwise_s8_ok(&u.depthwise_s8) && u.depthwise_s8.stride_h == 1 && u.depthwise_s8.stride_w == 1 &&
             u.depthwise_s8.dilation_h == 1 && u.depthwise_s8.dilation_w == 1 && u.depthwise_s8.ch_mult == 1 &&
             u.depthwise_s8.pad_top < u.depthwise_s8.kernel_h && u.depthwise_s8.pad_left < u.depthwise_s8.kernel_w &&
             u.depthwise_s8.output.h == u.depthwise_s8.input.h && u.depthwise_s8.output.w == u.depthwise_s8.input.w &&
             u.depthwise_s8.output.c == u.depthwise_s8.input.c;
        break;
    case MCU_K_LINEAR_S8: {
        const mcu_linear_s8_params *p = &u.linear_s8;
        const int32_t in_dims[2] = {p->batch, p->in_features};
        const int32_t w_dims[2] = {p->out_features, p->in_features};
        const int32_t out_dims[2] = {p->batch, p->out_features};
        ok = mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
             mcu_act_s8_valid(p->act_min, p->act_max) && mcu_checked_count(in_dims, 2, 1) > 0 &&
             mcu_checked_count(w_dims, 2, 1) > 0 && mcu_checked_count(out_dims, 2, 1) > 0 &&
             p->out_features <= INT32_MAX / 4;
        break;
    }
    case MCU_K_ADD_S8:
    case MCU_K_SUB_S8:
    case MCU_K_MAXIMUM_S8: /* int8 islands made integer (issue 18): the add's parameters */
    case MCU_K_MINIMUM_S8: ok = binary_s8_ok(&u.binary_s8, 0); break;
    case MCU_K_DIV_S8: ok = binary_s8_ok(&u.binary_s8, 1); break;
    case MCU_K_LOG_SOFTMAX_S8:
        ok = mcu_checked_count(w, 3, 1) > 0 && u.log_softmax_s8.input_multiplier >= 0 &&
             u.log_softmax_s8.log_multiplier >= 0 && mcu_output_offset_valid(u.log_softmax_s8.output_offset);
        break;
    case MCU_K_PRELU_S8:
        ok = u.prelu_s8.size > 0 && u.prelu_s8.channels > 0 && u.prelu_s8.inner > 0 &&
             mcu_input_offset_valid(u.prelu_s8.input_offset) && mcu_output_offset_valid(u.prelu_s8.output_offset) &&
             mcu_act_s8_valid(u.prelu_s8.act_min, u.prelu_s8.act_max) &&
             mcu_quant_valid(u.prelu_s8.pos_multiplier, u.prelu_s8.pos_shift) &&
             mcu_quant_valid(u.prelu_s8.neg_multiplier, u.prelu_s8.neg_shift);
        break;
    case MCU_K_MUL_S8: ok = binary_s8_ok(&u.binary_s8, 1); break;
    case MCU_K_MAX_POOL2D_S8: ok = pool_s8_ok(&u.pool_s8, 0); break;
    case MCU_K_AVG_POOL2D_S8: ok = pool_s8_ok(&u.pool_s8, 1); break;
    case MCU_K_MEAN_HW_S8: {
        const mcu_mean_hw_s8_params *p = &u.mean_hw_s8;
        ok = mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
             mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->multiplier, p->shift) &&
             shape4_ok(&p->input, 1) && (int64_t)p->input.h * p->input.w <= INT32_MAX / 255;
        break;
    }
    case MCU_K_SOFTMAX_S8: {
        const mcu_softmax_s8_params *p = &u.softmax_s8;
        const int32_t dims[3] = {p->outer, p->axis, p->inner};
        ok = p->input_multiplier >= 0 && p->input_left_shift >= 0 && p->input_left_shift <= 31 &&
             p->diff_min <= 0 && mcu_checked_count(dims, 3, 1) > 0 && p->axis <= MCU_SOFTMAX_MAX_AXIS;
        break;
    }
    case MCU_K_LUT_S8: ok = w[0] >= 0; break;
    case MCU_K_REQUANTIZE_S8:
        ok = w[0] >= 0 && mcu_input_offset_valid(w[1]) && mcu_quant_valid(w[2], w[3]) &&
             mcu_output_offset_valid(w[4]) && mcu_act_s8_valid(w[5], w[6]);
        break;
    case MCU_K_CLAMP_S8: ok = w[0] >= 0 && mcu_act_s8_valid(w[1], w[2]); break;
    case MCU_K_QUANTIZE_F32_S8:
    case MCU_K_DEQUANTIZE_S8_F32: ok = w[0] >= 0 && w[0] <= INT32_MAX / 4 && scale_ok(as_float(w[1]), w[2]); break;
    /* 4-bit groupwise weights and model state (issue 17) */
    case MCU_K_LINEAR_W4_F32:
    case MCU_K_LINEAR_W4_S8: {
        const mcu_linear_w4_params *p = &u.linear_w4;
        const int32_t in_dims[2] = {p->batch, p->in_features};
        const int32_t w_dims[2] = {p->out_features, p->in_features};
        const int32_t out_dims[2] = {p->batch, p->out_features};
        ok = mcu_act_bounds_valid(p->act_min, p->act_max) && mcu_checked_count(in_dims, 2, 4) > 0 &&
             mcu_checked_count(out_dims, 2, 4) > 0 && mcu_checked_count(w_dims, 2, 1) > 0 && p->group_size > 0 &&
             p->group_size % 2 == 0 && p->in_features % p->group_size == 0 &&
             (kernel != MCU_K_LINEAR_W4_S8 || p->in_features <= 1000000);
        break;
    }
    case MCU_K_INDEX_PUT: {
        const mcu_index_put_params *p = &u.index_put;
        const int32_t state_dims[3] = {p->outer, p->axis, p->inner};
        const int32_t value_dims[3] = {p->outer, p->count, p->inner};
        ok = mcu_checked_count(state_dims, 3, 4) > 0 && mcu_checked_count(value_dims, 3, 4) > 0;
        break;
    }
    case MCU_K_COMPARE:
        ok = u.compare.rank >= 1 && u.compare.rank <= MCU_MAX_DIMS && u.compare.cmp >= MCU_CMP_EQ &&
             u.compare.cmp <= MCU_CMP_GE && mcu_checked_count(u.compare.out_shape, u.compare.rank, 4) > 0;
        break;
    case MCU_K_WHERE:
        ok = u.where.rank >= 1 && u.where.rank <= MCU_MAX_DIMS &&
             mcu_checked_count(u.where.out_shape, u.where.rank, 4) > 0;
        break;
    case MCU_K_EMBEDDING:
    case MCU_K_EMBEDDING_S8_F32: {
        const int32_t table[2] = {u.embedding.rows, u.embedding.cols};
        const int32_t out[2] = {u.embedding.count, u.embedding.cols};
        ok = mcu_checked_count(table, 2, 4) > 0 && mcu_checked_count(out, 2, 4) > 0;
        break;
    }
    /* normalisation, reductions and int8 activations (issue 18) */
    case MCU_K_UNARY_F32:
        ok = u.unary_f32.size > 0 && u.unary_f32.size <= INT32_MAX / 4 && u.unary_f32.fn >= 0 &&
             u.unary_f32.fn < (int32_t)MCU_UNARY_COUNT;
        break;
    case MCU_K_LAYER_NORM_F32:
    case MCU_K_RMS_NORM_F32: ok = mcu_checked_count(w, 2, 4) > 0 && u.layer_norm_f32.eps >= 0.0f; break;
    case MCU_K_BMM_F32: {
        const mcu_bmm_f32_params *p = &u.bmm_f32;
        const int32_t out_dims[3] = {p->batch, p->m, p->n};
        ok = p->k > 0 && p->a_batch_stride >= 0 && p->b_batch_stride >= 0 && mcu_checked_count(out_dims, 3, 4) > 0;
        break;
    }
    case MCU_K_REDUCE_F32:
        ok = mcu_checked_count(w, 3, 4) > 0 && u.reduce_f32.op >= 0 && u.reduce_f32.op < (int32_t)MCU_REDUCE_COUNT;
        break;
    case MCU_K_MAXIMUM_F32:
    case MCU_K_MINIMUM_F32: ok = binary_f32_ok(&u.binary_f32); break;
    case MCU_K_LAYER_NORM_S8: {
        const mcu_layer_norm_s8_params *p = &u.layer_norm_s8;
        ok = p->rows > 0 && p->cols > 0 && p->cols <= MCU_LAYER_NORM_S8_MAX_COLS && p->rows <= INT32_MAX / p->cols &&
             (uint32_t)p->eps_hi < (1u << 29) && mcu_output_offset_valid(p->output_offset) &&
             mcu_act_s8_valid(p->act_min, p->act_max) && (p->rms == 0 || p->rms == 1) &&
             p->input_zero_point >= -128 && p->input_zero_point <= 127;
        break;
    }
    case MCU_K_GROUP_NORM_F32: {
        const mcu_group_norm_f32_params *p = &u.group_norm_f32;
        ok = mcu_checked_count(w, 3, 4) > 0 && p->groups > 0 && p->channels % p->groups == 0 &&
             (p->channels_last == 0 || p->channels_last == 1) && p->eps >= 0.0f;
        break;
    }
    case MCU_K_VAR_F32: ok = mcu_checked_count(w, 3, 4) > 0 && u.var_f32.divisor >= 0.0f; break;
    case MCU_K_ARGMAX_F32:
    case MCU_K_LOG_SOFTMAX_F32: ok = mcu_checked_count(w, 3, 4) > 0; break;
    case MCU_K_ARGMAX_S8: ok = mcu_checked_count(w, 3, 1) > 0 && w[0] <= INT32_MAX / 4 / w[2]; break;
    case MCU_K_BMM_S8: {
        const mcu_bmm_s8_params *p = &u.bmm_s8;
        const int32_t out_dims[3] = {p->batch, p->m, p->n};
        ok = p->k > 0 && p->k <= 32768 && p->a_batch_stride >= 0 && p->b_batch_stride >= 0 &&
             mcu_checked_count(out_dims, 3, 1) > 0 && mcu_input_offset_valid(p->a_offset) &&
             mcu_input_offset_valid(p->b_offset) && mcu_output_offset_valid(p->output_offset) &&
             mcu_act_s8_valid(p->act_min, p->act_max) && mcu_quant_valid(p->multiplier, p->shift);
        break;
    }
    case MCU_K_REDUCE_S8: {
        const mcu_reduce_s8_params *p = &u.reduce_s8;
        ok = mcu_checked_count(w, 3, 1) > 0 && p->reduce <= INT32_MAX / 256 && p->op >= 0 &&
             p->op < (int32_t)MCU_REDUCE_COUNT && mcu_input_offset_valid(p->input_offset) &&
             mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max) &&
             mcu_quant_valid(p->multiplier, p->shift);
        break;
    }
    case MCU_K_PRELU_F32:
        ok = u.prelu_f32.size > 0 && u.prelu_f32.size <= INT32_MAX / 4 && u.prelu_f32.channels > 0 &&
             u.prelu_f32.inner > 0;
        break;
    /* resampling and data movement (issue 18) */
    case MCU_K_REMAP:
        ok = u.remap.rank >= 1 && u.remap.rank <= MCU_MAX_DIMS && w[13] > 0 &&
             mcu_checked_count(u.remap.in_shape, u.remap.rank, w[13]) > 0 &&
             mcu_checked_count(u.remap.out_shape, u.remap.rank, w[13]) > 0;
        break;
    case MCU_K_GATHER:
        ok = u.gather.rank >= 1 && u.gather.rank <= MCU_MAX_DIMS && u.gather.dim >= 0 && u.gather.dim < u.gather.rank &&
             w[14] > 0 && mcu_checked_count(u.gather.in_shape, u.gather.rank, w[14]) > 0 &&
             mcu_checked_count(u.gather.out_shape, u.gather.rank, w[14]) > 0;
        for (int32_t d = 0; ok && d < u.gather.rank; ++d) {
            ok = d == u.gather.dim || u.gather.out_shape[d] <= u.gather.in_shape[d];
        }
        break;
    case MCU_K_INDEX_SELECT: {
        const mcu_index_select_params *p = &u.index_select;
        const int32_t in_dims[3] = {p->outer, p->axis, p->inner};
        const int32_t out_dims[3] = {p->outer, p->count, p->inner};
        ok = w[4] > 0 && mcu_checked_count(in_dims, 3, w[4]) > 0 && mcu_checked_count(out_dims, 3, w[4]) > 0;
        break;
    }
    case MCU_K_RESIZE_BILINEAR_F32:
    case MCU_K_RESIZE_BILINEAR_S8:
    case MCU_K_ADAPTIVE_AVG_POOL_F32:
    case MCU_K_ADAPTIVE_AVG_POOL_S8: {
        const mcu_resample_f32_params *p = &u.resample_f32; /* the s8 struct has the same fields */
        const int32_t size = kernel == MCU_K_RESIZE_BILINEAR_F32 || kernel == MCU_K_ADAPTIVE_AVG_POOL_F32 ? 4 : 1;
        const int32_t in_dims[4] = {p->outer, p->in_h, p->in_w, p->inner};
        const int32_t out_dims[4] = {p->outer, p->out_h, p->out_w, p->inner};
        ok = mcu_checked_count(in_dims, 4, size) > 0 && mcu_checked_count(out_dims, 4, size) > 0 &&
             (kernel != MCU_K_ADAPTIVE_AVG_POOL_S8 || (int64_t)p->in_h * p->in_w <= INT32_MAX / 128) &&
             ((kernel != MCU_K_ADAPTIVE_AVG_POOL_F32 && kernel != MCU_K_ADAPTIVE_AVG_POOL_S8) ||
              mcu_adaptive_fits(p->in_h, p->in_w, p->out_h, p->out_w));
        break;
    }
    case MCU_K_LSTM_S8: /* integer recurrent layers (issue 18) */
    case MCU_K_GRU_S8: {
        const mcu_recurrent_s8_params *p = &u.recurrent_s8;
        const int32_t in_dims[3] = {p->batch, p->steps, p->input_size};
        const int32_t out_dims[3] = {p->batch, p->steps, p->hidden};
        ok = mcu_checked_count(in_dims, 3, 1) > 0 && mcu_checked_count(out_dims, 3, 1) > 0 &&
             p->input_size <= MCU_RECURRENT_S8_MAX_FEATURES && p->hidden <= MCU_RECURRENT_S8_MAX_FEATURES &&
             p->hidden_zp >= INT8_MIN && p->hidden_zp <= INT8_MAX && p->out_mult >= 0 && p->out_shift >= -31 &&
             p->out_shift <= 30 && p->state_shift >= 0 && p->state_shift <= 15;
        break;
    }
    default: break; /* concat, pad, slice: their checks in mcu_program_check_kernel cover the kernels' own */
    }
    return ok ? MCU_OK : MCU_ERR_PROGRAM_INVALID;
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
static int elementwise_ok(const mcu_operand_desc *in, uint32_t nin, const mcu_operand_desc *out, uint32_t nout)
{
    return !overlap(in, nin, out, nout) || in->offset == out->offset;
}

/* mcu_binary_*_alias_ok: an operand shares memory with the output only as the output itself, contiguous. */
static int binary_alias_ok(const mcu_operand_desc *x, uint32_t nx, const mcu_operand_desc *out, uint32_t nout,
                           const int32_t *p, const int32_t *strides)
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
static int per_channel_ok(const mcu_operand_desc *ops, const uint32_t *bytes)
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
    if (rank < 1 || rank > MCU_MAX_DIMS || mcu_checked_count(p + 1, rank, esize) <= 0) {
        return 0;
    }
    if (kernel == MCU_K_SLICE) { /* in_shape, out_shape, start, step */
        if (mcu_checked_count(p + 7, rank, esize) <= 0) {
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
        return mcu_checked_count(out_dim, rank, esize) > 0;
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
        return p[13] >= 0 && p[13] < p[0] && mcu_checked_count(p + 7, p[0], 1) > 0 &&
               indices_ok(t, (uint32_t)mcu_checked_count(p + 7, p[0], 1), 0, (int64_t)p[1 + p[13]] - 1);
    case MCU_K_INDEX_SELECT: /* outer, axis, inner, count */
        return indices_ok(t, (uint32_t)p[3], 0, (int64_t)p[1] - 1);
    case MCU_K_RESIZE_BILINEAR_F32: /* outer, in_h, in_w, out_h, out_w, inner */
    case MCU_K_RESIZE_BILINEAR_S8: {
        const int s8 = kernel == MCU_K_RESIZE_BILINEAR_S8;
        return t->constant && resize_axis_ok(t, 0, p[3], p[1], s8) &&
               resize_axis_ok(t, (s8 ? 3u : 2u) * (uint32_t)p[3], p[4], p[2], s8);
    }
    default: return 1;
    }
}

mcu_status mcu_program_check_operands(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                      uint32_t n_ops, const int32_t *p)
{
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const uint32_t nout = bytes[last];
    int ok = 1;
    switch (kernel) {
    case MCU_K_CONV2D_S8:
    case MCU_K_DEPTHWISE_CONV2D_S8:
    case MCU_K_CONV2D_GROUPED_S8: /* convolutions (issue 18): the window contract of conv2d */
        ok = per_channel_ok(ops, bytes) && window_ok(&ops[0], bytes[0], out, nout) &&
             !overlap(&ops[5], (uint32_t)ops[5].nbytes, &ops[0], bytes[0]) &&
             !overlap(&ops[5], (uint32_t)ops[5].nbytes, out, nout);
        break;
    case MCU_K_LINEAR_S8:
        ok = per_channel_ok(ops, bytes) && !overlap(&ops[0], bytes[0], out, nout) &&
             !overlap(&ops[5], (uint32_t)ops[5].nbytes, &ops[0], bytes[0]) &&
             !overlap(&ops[5], (uint32_t)ops[5].nbytes, out, nout);
        break;
    case MCU_K_CONV2D_1X1_S8: {
        /* The pixel loop runs forwards or backwards; some overlaps of input and output allow neither. */
        const int64_t pixels = (int64_t)p[0] * p[1] * p[2];
        const int64_t bi = p[3], bo = p[7];
        const int64_t d = (int64_t)out->offset - (int64_t)ops[0].offset;
        const int64_t fwd = bi - bo < pixels * (bi - bo) ? bi - bo : pixels * (bi - bo);
        const int64_t bwd = (pixels - 1) * (bi - bo) > 0 ? (pixels - 1) * (bi - bo) : 0;
        ok = per_channel_ok(ops, bytes) && ops[5].present &&
             !overlap(&ops[5], (uint32_t)bo, &ops[0], bytes[0]) && !overlap(&ops[5], (uint32_t)bo, out, nout) &&
             (!overlap(&ops[0], bytes[0], out, nout) || d <= fwd || d >= bwd);
        break;
    }
    case MCU_K_DEPTHWISE_CONV2D_S8_INPLACE: {
        const uint32_t ring = (uint32_t)(p[13] + 1) * (uint32_t)p[2] * (uint32_t)p[3]; /* pad_top + 1 rows */
        ok = per_channel_ok(ops, bytes) && ops[5].present && !overlap(&ops[5], ring, out, nout);
        break;
    }
    case MCU_K_CONV2D_F32:
    case MCU_K_MAX_POOL2D_F32:
    case MCU_K_AVG_POOL2D_F32:
    case MCU_K_MAX_POOL2D_S8:
    case MCU_K_AVG_POOL2D_S8: ok = window_ok(&ops[0], bytes[0], out, nout); break;
    case MCU_K_LINEAR_F32:
    case MCU_K_LINEAR_W8_F32:
    case MCU_K_LINEAR_W4_F32:
    case MCU_K_MEAN_HW_F32:
    case MCU_K_MEAN_HW_S8: ok = !overlap(&ops[0], bytes[0], out, nout); break;
    case MCU_K_PERMUTE:
    case MCU_K_PAD:
    case MCU_K_SLICE:
        ok = shapes_ok(kernel, p, (int32_t)mcu_dtype_size(out->dtype)) && !overlap(&ops[0], bytes[0], out, nout);
        break;
    case MCU_K_LINEAR_DYN_S8: {
        const uint32_t count = (uint32_t)p[0] * (uint32_t)p[1]; /* the int8 copy of the input in scratch */
        ok = !overlap(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], count, &ops[1], bytes[1]) &&
             !overlap(&ops[0], count, out, nout);
        break;
    }
    case MCU_K_COMPARE: /* bytes out, wider operands in: no overlap at all */
    case MCU_K_EMBEDDING:
        ok = !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
             (kernel != MCU_K_EMBEDDING || indices_ok(&ops[0], (uint32_t)p[2], 0, (int64_t)p[0] - 1));
        break;
    case MCU_K_EMBEDDING_S8_F32:
        ok = !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
             !overlap(&ops[2], bytes[2], out, nout) && indices_ok(&ops[0], (uint32_t)p[2], 0, (int64_t)p[0] - 1);
        break;
    case MCU_K_WHERE: /* an operand may be the output itself, laid out as it (the kernel checks strides) */
        ok = !overlap(&ops[0], bytes[0], out, nout) &&
             (!overlap(&ops[1], bytes[1], out, nout) || ops[1].offset == out->offset) &&
             (!overlap(&ops[2], bytes[2], out, nout) || ops[2].offset == out->offset);
        break;
    case MCU_K_INDEX_PUT: /* writes rows of the state (its output): values and positions stay apart from it */
        ok = !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout) &&
             indices_ok(&ops[0], (uint32_t)p[3], -(int64_t)p[1], (int64_t)p[1] - 1);
        break;
    /* convolutions (issue 18): an output pixel reads input on both sides of its position */
    case MCU_K_CONV_TRANSPOSE2D_F32: ok = !overlap(&ops[0], bytes[0], out, nout); break;
    case MCU_K_CONV_TRANSPOSE2D_S8:
    case MCU_K_CONV_TRANSPOSE2D_PHASED_S8:
        ok = per_channel_ok(ops, bytes) && !overlap(&ops[0], bytes[0], out, nout) &&
             !overlap(&ops[5], (uint32_t)ops[5].nbytes, &ops[0], bytes[0]) &&
             !overlap(&ops[5], (uint32_t)ops[5].nbytes, out, nout);
        break;
    case MCU_K_LINEAR_W4_S8: { /* the row's int16 copy in scratch, word-aligned */
        const uint32_t count = 2u * (uint32_t)p[1];
        ok = !overlap(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], count, &ops[1], bytes[1]) &&
             !overlap(&ops[0], count, out, nout) && ops[0].offset % 4u == 0;
        break;
    }
    /* resampling and data movement (issue 18): the output overlaps nothing the kernel reads */
    case MCU_K_REMAP:
    case MCU_K_INDEX_SELECT:
    case MCU_K_GATHER:
    case MCU_K_RESIZE_BILINEAR_F32:
    case MCU_K_RESIZE_BILINEAR_S8:
        for (uint32_t i = 0; i < last; ++i) {
            ok = ok && !overlap(&ops[i], bytes[i], out, nout);
        }
        ok = ok && tables_ok(kernel, &ops[0], p);
        break;
    case MCU_K_ADAPTIVE_AVG_POOL_F32:
    case MCU_K_ADAPTIVE_AVG_POOL_S8: ok = !overlap(&ops[0], bytes[0], out, nout); break;
    case MCU_K_CONCAT:
        for (uint32_t i = 0; i < last; ++i) {
            ok = ok && !overlap(&ops[i], bytes[i], out, nout);
        }
        break;
    case MCU_K_ADD_F32:
    case MCU_K_SUB_F32:
    case MCU_K_MUL_F32:
    case MCU_K_DIV_F32:
    case MCU_K_ADD_S8:
    case MCU_K_SUB_S8:
    case MCU_K_MUL_S8:
    case MCU_K_MAXIMUM_F32:
    case MCU_K_MINIMUM_F32:
    case MCU_K_MAXIMUM_S8:
    case MCU_K_MINIMUM_S8:
    case MCU_K_DIV_S8:
        ok = binary_alias_ok(&ops[0], bytes[0], out, nout, p, p + 7) &&
             binary_alias_ok(&ops[1], bytes[1], out, nout, p, p + 13);
        break;
    case MCU_K_BATCH_NORM_F32:
        ok = elementwise_ok(&ops[2], bytes[2], out, nout) && !overlap(&ops[0], bytes[0], out, nout) &&
             !overlap(&ops[1], bytes[1], out, nout);
        break;
    case MCU_K_LUT_S8: ok = elementwise_ok(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], 256, out, nout); break;
    case MCU_K_LOG_SOFTMAX_S8: /* (int8 islands made integer, issue 18) [exp table, in, out] */
        ok = elementwise_ok(&ops[1], bytes[1], out, nout) && !overlap(&ops[0], bytes[0], out, nout) &&
             ops[0].constant && const_in(&ops[0], 0, 256, 0, INT32_MAX);
        break;
    /* normalisation, reductions and int8 activations (issue 18) */
    case MCU_K_LAYER_NORM_F32: /* rows (or groups) are read whole before they are written: in place is fine */
    case MCU_K_GROUP_NORM_F32:
    case MCU_K_LAYER_NORM_S8:
    case MCU_K_PRELU_F32:
    case MCU_K_PRELU_S8: /* (int8 islands made integer, issue 18) */
    case MCU_K_RMS_NORM_F32:
        ok = elementwise_ok(&ops[0], bytes[0], out, nout);
        for (uint32_t i = 1; i < last; ++i) {
            ok = ok && !overlap(&ops[i], bytes[i], out, nout);
        }
        if (kernel == MCU_K_LAYER_NORM_S8) {
            ok = ok && ops[2].constant && shifts_ok(&ops[2], bytes[2]);
        }
        break;
    case MCU_K_BMM_F32:
    case MCU_K_BMM_S8: ok = !overlap(&ops[0], bytes[0], out, nout) && !overlap(&ops[1], bytes[1], out, nout); break;
    case MCU_K_REDUCE_F32:
    case MCU_K_REDUCE_S8:
    case MCU_K_VAR_F32:
    case MCU_K_ARGMAX_F32:
    case MCU_K_ARGMAX_S8: ok = !overlap(&ops[0], bytes[0], out, nout); break;
    case MCU_K_LSTM_S8: /* integer recurrent layers (issue 18): scratch, input and output all apart */
    case MCU_K_GRU_S8:
        for (uint32_t i = 0; i < last; ++i) {
            ok = ok && !overlap(&ops[i], bytes[i], out, nout);
        }
        ok = ok && !overlap(&ops[0], bytes[0], &ops[1], bytes[1]) && recurrent_ok(ops, p, kernel == MCU_K_LSTM_S8 ? 4 : 3);
        break;
    default: /* clamp, sigmoid, tanh, hardswish, softmax, requantize, quantize, dequantize */
        ok = elementwise_ok(&ops[0], bytes[0], out, nout);
        break;
    }
    /* Weights, biases, scales: the convolution and linear kernels refuse any that share the output's bytes. */
    const uint32_t first = kernel == MCU_K_LINEAR_DYN_S8 || kernel == MCU_K_LINEAR_W4_S8 ? 2u : 1u;
    const int weighted = kernel == MCU_K_CONV2D_F32 || kernel == MCU_K_LINEAR_F32 || kernel == MCU_K_CONV2D_S8 ||
                         kernel == MCU_K_DEPTHWISE_CONV2D_S8 || kernel == MCU_K_LINEAR_S8 ||
                         kernel == MCU_K_CONV2D_1X1_S8 || kernel == MCU_K_LINEAR_W8_F32 ||
                         kernel == MCU_K_LINEAR_DYN_S8 || kernel == MCU_K_LINEAR_W4_F32 ||
                         kernel == MCU_K_LINEAR_W4_S8 || kernel == MCU_K_CONV_TRANSPOSE2D_F32 ||
                         kernel == MCU_K_CONV_TRANSPOSE2D_S8 || kernel == MCU_K_CONV_TRANSPOSE2D_PHASED_S8 ||
                         kernel == MCU_K_CONV2D_GROUPED_S8;
    for (uint32_t i = first; weighted && i < last; ++i) {
        ok = ok && !overlap(&ops[i], bytes[i], out, nout);
    }
    return ok ? MCU_OK : MCU_ERR_PROGRAM_INVALID;
}
