/* The interpreter's kernel table: each kernel id's operand dtypes and param
 * count, the bytes its params make it touch in every operand (checked at
 * load), and the call itself.
 *
 * A firmware that runs known programs may keep only some kernels: define
 * MCU_PROGRAM_KERNEL_SUBSET and MCU_PROGRAM_HAS_<KERNEL>=1 for each kernel
 * to keep (names as in mcu_program_kernel without MCU_K_). A program that
 * uses a kernel left out fails to load with MCU_ERR_UNSUPPORTED. */
#include <stddef.h>
#include <string.h>

#include "mcu/kernels_f32.h"
#include "mcu/kernels_generic.h"
#include "mcu/kernels_mixed.h"
#include "mcu/kernels_s8.h"
#include "mcu_program_internal.h"

#ifdef MCU_PROGRAM_KERNEL_SUBSET
#define MCU_PROGRAM_KERNEL_DEFAULT 0
#else
#define MCU_PROGRAM_KERNEL_DEFAULT 1
#endif
#ifndef MCU_PROGRAM_HAS_CONV2D_F32
#define MCU_PROGRAM_HAS_CONV2D_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LINEAR_F32
#define MCU_PROGRAM_HAS_LINEAR_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MAX_POOL2D_F32
#define MCU_PROGRAM_HAS_MAX_POOL2D_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_AVG_POOL2D_F32
#define MCU_PROGRAM_HAS_AVG_POOL2D_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MEAN_HW_F32
#define MCU_PROGRAM_HAS_MEAN_HW_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_ADD_F32
#define MCU_PROGRAM_HAS_ADD_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_SUB_F32
#define MCU_PROGRAM_HAS_SUB_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MUL_F32
#define MCU_PROGRAM_HAS_MUL_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_DIV_F32
#define MCU_PROGRAM_HAS_DIV_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CLAMP_F32
#define MCU_PROGRAM_HAS_CLAMP_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_SIGMOID_F32
#define MCU_PROGRAM_HAS_SIGMOID_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_TANH_F32
#define MCU_PROGRAM_HAS_TANH_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_HARDSWISH_F32
#define MCU_PROGRAM_HAS_HARDSWISH_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_SOFTMAX_F32
#define MCU_PROGRAM_HAS_SOFTMAX_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_BATCH_NORM_F32
#define MCU_PROGRAM_HAS_BATCH_NORM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_PERMUTE
#define MCU_PROGRAM_HAS_PERMUTE MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CONCAT
#define MCU_PROGRAM_HAS_CONCAT MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_PAD
#define MCU_PROGRAM_HAS_PAD MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CONV2D_S8
#define MCU_PROGRAM_HAS_CONV2D_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8
#define MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LINEAR_S8
#define MCU_PROGRAM_HAS_LINEAR_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_ADD_S8
#define MCU_PROGRAM_HAS_ADD_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_SUB_S8
#define MCU_PROGRAM_HAS_SUB_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MUL_S8
#define MCU_PROGRAM_HAS_MUL_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MAX_POOL2D_S8
#define MCU_PROGRAM_HAS_MAX_POOL2D_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_AVG_POOL2D_S8
#define MCU_PROGRAM_HAS_AVG_POOL2D_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MEAN_HW_S8
#define MCU_PROGRAM_HAS_MEAN_HW_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_SOFTMAX_S8
#define MCU_PROGRAM_HAS_SOFTMAX_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LUT_S8
#define MCU_PROGRAM_HAS_LUT_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_REQUANTIZE_S8
#define MCU_PROGRAM_HAS_REQUANTIZE_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CLAMP_S8
#define MCU_PROGRAM_HAS_CLAMP_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_QUANTIZE_F32_S8
#define MCU_PROGRAM_HAS_QUANTIZE_F32_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_DEQUANTIZE_S8_F32
#define MCU_PROGRAM_HAS_DEQUANTIZE_S8_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CONV2D_1X1_S8
#define MCU_PROGRAM_HAS_CONV2D_1X1_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8_INPLACE
#define MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8_INPLACE MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LINEAR_W8_F32
#define MCU_PROGRAM_HAS_LINEAR_W8_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LINEAR_DYN_S8
#define MCU_PROGRAM_HAS_LINEAR_DYN_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_SLICE
#define MCU_PROGRAM_HAS_SLICE MCU_PROGRAM_KERNEL_DEFAULT
#endif
/* 4-bit groupwise weights and model state (issue 17) */
#ifndef MCU_PROGRAM_HAS_LINEAR_W4_F32
#define MCU_PROGRAM_HAS_LINEAR_W4_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LINEAR_W4_S8
#define MCU_PROGRAM_HAS_LINEAR_W4_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_INDEX_PUT
#define MCU_PROGRAM_HAS_INDEX_PUT MCU_PROGRAM_KERNEL_DEFAULT
#endif
/* normalisation, reductions and int8 activations (issue 18) */
#ifndef MCU_PROGRAM_HAS_UNARY_F32
#define MCU_PROGRAM_HAS_UNARY_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LAYER_NORM_F32
#define MCU_PROGRAM_HAS_LAYER_NORM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_BMM_F32
#define MCU_PROGRAM_HAS_BMM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_REDUCE_F32
#define MCU_PROGRAM_HAS_REDUCE_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MAXIMUM_F32
#define MCU_PROGRAM_HAS_MAXIMUM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MINIMUM_F32
#define MCU_PROGRAM_HAS_MINIMUM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LAYER_NORM_S8
#define MCU_PROGRAM_HAS_LAYER_NORM_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_GROUP_NORM_F32
#define MCU_PROGRAM_HAS_GROUP_NORM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_VAR_F32
#define MCU_PROGRAM_HAS_VAR_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_ARGMAX_F32
#define MCU_PROGRAM_HAS_ARGMAX_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_ARGMAX_S8
#define MCU_PROGRAM_HAS_ARGMAX_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LOG_SOFTMAX_F32
#define MCU_PROGRAM_HAS_LOG_SOFTMAX_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_COMPARE
#define MCU_PROGRAM_HAS_COMPARE MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_WHERE
#define MCU_PROGRAM_HAS_WHERE MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_EMBEDDING_S8_F32
#define MCU_PROGRAM_HAS_EMBEDDING_S8_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_EMBEDDING
#define MCU_PROGRAM_HAS_EMBEDDING MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_PRELU_F32
#define MCU_PROGRAM_HAS_PRELU_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
/* resampling and data movement (issue 18) */
#ifndef MCU_PROGRAM_HAS_REMAP
#define MCU_PROGRAM_HAS_REMAP MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_INDEX_SELECT
#define MCU_PROGRAM_HAS_INDEX_SELECT MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_GATHER
#define MCU_PROGRAM_HAS_GATHER MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_RESIZE_BILINEAR_F32
#define MCU_PROGRAM_HAS_RESIZE_BILINEAR_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_RESIZE_BILINEAR_S8
#define MCU_PROGRAM_HAS_RESIZE_BILINEAR_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_F32
#define MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_S8
#define MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_REDUCE_S8
#define MCU_PROGRAM_HAS_REDUCE_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_RMS_NORM_F32
#define MCU_PROGRAM_HAS_RMS_NORM_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_BMM_S8
#define MCU_PROGRAM_HAS_BMM_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
/* convolutions (issue 18) */
#ifndef MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_F32
#define MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_F32 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_S8
#define MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_PHASED_S8
#define MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_PHASED_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_CONV2D_GROUPED_S8
#define MCU_PROGRAM_HAS_CONV2D_GROUPED_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
/* integer recurrent layers (issue 18) */
#ifndef MCU_PROGRAM_HAS_LSTM_S8
#define MCU_PROGRAM_HAS_LSTM_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_GRU_S8
#define MCU_PROGRAM_HAS_GRU_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
/* int8 islands made integer (issue 18) */
#ifndef MCU_PROGRAM_HAS_MAXIMUM_S8
#define MCU_PROGRAM_HAS_MAXIMUM_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_MINIMUM_S8
#define MCU_PROGRAM_HAS_MINIMUM_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_DIV_S8
#define MCU_PROGRAM_HAS_DIV_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_PRELU_S8
#define MCU_PROGRAM_HAS_PRELU_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif
#ifndef MCU_PROGRAM_HAS_LOG_SOFTMAX_S8
#define MCU_PROGRAM_HAS_LOG_SOFTMAX_S8 MCU_PROGRAM_KERNEL_DEFAULT
#endif

/* The params struct of each kernel is its words in declaration order. */
_Static_assert(sizeof(mcu_conv2d_f32_params) == 19 * 4, "conv2d_f32 params layout");
_Static_assert(sizeof(mcu_linear_f32_params) == 5 * 4, "linear_f32 params layout");
_Static_assert(sizeof(mcu_pool2d_f32_params) == 22 * 4, "pool2d_f32 params layout");
_Static_assert(sizeof(mcu_shape4) == 4 * 4, "shape4 layout");
_Static_assert(sizeof(mcu_binary_f32_params) == 21 * 4, "binary_f32 params layout");
_Static_assert(sizeof(mcu_permute_params) == 13 * 4, "permute params layout");
_Static_assert(sizeof(mcu_pad_params) == 19 * 4, "pad params layout");
_Static_assert(sizeof(mcu_slice_params) == 25 * 4, "slice params layout");
_Static_assert(sizeof(mcu_conv2d_s8_params) == 21 * 4, "conv2d_s8 params layout");
_Static_assert(sizeof(mcu_depthwise_conv2d_s8_params) == 21 * 4, "depthwise_conv2d_s8 params layout");
_Static_assert(sizeof(mcu_linear_s8_params) == 7 * 4, "linear_s8 params layout");
_Static_assert(sizeof(mcu_binary_s8_params) == 31 * 4, "binary_s8 params layout");
_Static_assert(sizeof(mcu_pool2d_s8_params) == 16 * 4, "pool2d_s8 params layout");
_Static_assert(sizeof(mcu_mean_hw_s8_params) == 10 * 4, "mean_hw_s8 params layout");
_Static_assert(sizeof(mcu_softmax_s8_params) == 6 * 4, "softmax_s8 params layout");
_Static_assert(sizeof(mcu_linear_w4_params) == 6 * 4, "linear_w4 params layout");
_Static_assert(sizeof(mcu_index_put_params) == 4 * 4, "index_put params layout");
_Static_assert(sizeof(mcu_compare_params) == 21 * 4, "compare params layout");
_Static_assert(sizeof(mcu_where_params) == 25 * 4, "where params layout");
_Static_assert(sizeof(mcu_embedding_params) == 3 * 4, "embedding params layout");
_Static_assert(sizeof(mcu_unary_f32_params) == 4 * 4, "unary_f32 params layout");
_Static_assert(sizeof(mcu_layer_norm_f32_params) == 3 * 4, "layer_norm_f32 params layout");
_Static_assert(sizeof(mcu_bmm_f32_params) == 6 * 4, "bmm_f32 params layout");
_Static_assert(sizeof(mcu_reduce_f32_params) == 4 * 4, "reduce_f32 params layout");
_Static_assert(sizeof(mcu_layer_norm_s8_params) == 9 * 4, "layer_norm_s8 params layout");
_Static_assert(sizeof(mcu_group_norm_f32_params) == 6 * 4, "group_norm_f32 params layout");
_Static_assert(sizeof(mcu_var_f32_params) == 4 * 4, "var_f32 params layout");
_Static_assert(sizeof(mcu_prelu_f32_params) == 3 * 4, "prelu_f32 params layout");
_Static_assert(sizeof(mcu_remap_params) == 13 * 4, "remap params layout");
_Static_assert(sizeof(mcu_index_select_params) == 4 * 4, "index_select params layout");
_Static_assert(sizeof(mcu_gather_params) == 14 * 4, "gather params layout");
_Static_assert(sizeof(mcu_resample_f32_params) == 6 * 4, "resample_f32 params layout");
_Static_assert(sizeof(mcu_resample_s8_params) == 6 * 4, "resample_s8 params layout");
_Static_assert(sizeof(mcu_reduce_s8_params) == 10 * 4, "reduce_s8 params layout");
_Static_assert(sizeof(mcu_bmm_s8_params) == 13 * 4, "bmm_s8 params layout");
_Static_assert(sizeof(mcu_recurrent_s8_params) == 8 * 4, "recurrent_s8 params layout");
_Static_assert(sizeof(mcu_prelu_s8_params) == 11 * 4, "prelu_s8 params layout");
_Static_assert(sizeof(mcu_log_softmax_s8_params) == 6 * 4, "log_softmax_s8 params layout");

/* Operand signatures: F float32, B int8, I int32, U uint8, H int16, X the output's dtype;
 * lower case: may be absent (-1). Concat has its own rule. The int8 matmul
 * kernels' sixth operand is their scratch buffer (mcu_context). */
enum { S_NONE, S_FFFF_BIAS, S_FF, S_FFF, S_FFFF, S_XX, S_MATMUL_S8, S_BBB, S_BB, S_FB, S_BF, S_W8, S_DYN,
       S_W4, S_W4_DYN, S_IXX, S_NORM, S_LN_S8, S_FI, S_BI, S_CMP, S_UXXX, S_IBFF, S_IFFF, S_IBB, S_RMS,
       S_RNN_S8 };
static const char SIGS[][8] = {"", "FFfF", "FF", "FFF", "FFFF", "XX", "BBiIIbB", "BBB", "BB", "FB", "BF",
                               "FBFFF", "BFBFFF", "FUFfF", "BFUFfF", "IXX", "FffF", "BIIIB", "FI", "BI",
                               "**U", "UXXX", "IBFF", "IFFF", "IBB", "FfF", "BBBBIHB"};

/* Param words and signature of each kernel id; bit 7 of `sig`: in this build. */
typedef struct {
    uint8_t n_params;
    uint8_t sig;
} mcu_kernel_desc;

#define K(id, has, n, s) [id] = {n, (uint8_t)((s) | ((has) ? 0x80 : 0))}
static const mcu_kernel_desc KERNELS[MCU_K_COUNT] = {
    K(MCU_K_CONV2D_F32, MCU_PROGRAM_HAS_CONV2D_F32, 19, S_FFFF_BIAS),
    K(MCU_K_LINEAR_F32, MCU_PROGRAM_HAS_LINEAR_F32, 5, S_FFFF_BIAS),
    K(MCU_K_MAX_POOL2D_F32, MCU_PROGRAM_HAS_MAX_POOL2D_F32, 22, S_FF),
    K(MCU_K_AVG_POOL2D_F32, MCU_PROGRAM_HAS_AVG_POOL2D_F32, 22, S_FF),
    K(MCU_K_MEAN_HW_F32, MCU_PROGRAM_HAS_MEAN_HW_F32, 4, S_FF),
    K(MCU_K_ADD_F32, MCU_PROGRAM_HAS_ADD_F32, 21, S_FFF),
    K(MCU_K_SUB_F32, MCU_PROGRAM_HAS_SUB_F32, 21, S_FFF),
    K(MCU_K_MUL_F32, MCU_PROGRAM_HAS_MUL_F32, 21, S_FFF),
    K(MCU_K_DIV_F32, MCU_PROGRAM_HAS_DIV_F32, 21, S_FFF),
    K(MCU_K_CLAMP_F32, MCU_PROGRAM_HAS_CLAMP_F32, 3, S_FF),
    K(MCU_K_SIGMOID_F32, MCU_PROGRAM_HAS_SIGMOID_F32, 1, S_FF),
    K(MCU_K_TANH_F32, MCU_PROGRAM_HAS_TANH_F32, 1, S_FF),
    K(MCU_K_HARDSWISH_F32, MCU_PROGRAM_HAS_HARDSWISH_F32, 1, S_FF),
    K(MCU_K_SOFTMAX_F32, MCU_PROGRAM_HAS_SOFTMAX_F32, 3, S_FF),
    K(MCU_K_BATCH_NORM_F32, MCU_PROGRAM_HAS_BATCH_NORM_F32, 3, S_FFFF),
    K(MCU_K_PERMUTE, MCU_PROGRAM_HAS_PERMUTE, 13, S_XX),
    K(MCU_K_CONCAT, MCU_PROGRAM_HAS_CONCAT, 0, S_NONE),
    K(MCU_K_PAD, MCU_PROGRAM_HAS_PAD, 20, S_XX),
    K(MCU_K_CONV2D_S8, MCU_PROGRAM_HAS_CONV2D_S8, 21, S_MATMUL_S8),
    K(MCU_K_DEPTHWISE_CONV2D_S8, MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8, 21, S_MATMUL_S8),
    K(MCU_K_LINEAR_S8, MCU_PROGRAM_HAS_LINEAR_S8, 7, S_MATMUL_S8),
    K(MCU_K_ADD_S8, MCU_PROGRAM_HAS_ADD_S8, 31, S_BBB),
    K(MCU_K_SUB_S8, MCU_PROGRAM_HAS_SUB_S8, 31, S_BBB),
    K(MCU_K_MUL_S8, MCU_PROGRAM_HAS_MUL_S8, 31, S_BBB),
    K(MCU_K_MAX_POOL2D_S8, MCU_PROGRAM_HAS_MAX_POOL2D_S8, 16, S_BB),
    K(MCU_K_AVG_POOL2D_S8, MCU_PROGRAM_HAS_AVG_POOL2D_S8, 16, S_BB),
    K(MCU_K_MEAN_HW_S8, MCU_PROGRAM_HAS_MEAN_HW_S8, 10, S_BB),
    K(MCU_K_SOFTMAX_S8, MCU_PROGRAM_HAS_SOFTMAX_S8, 6, S_BB),
    K(MCU_K_LUT_S8, MCU_PROGRAM_HAS_LUT_S8, 1, S_BBB),
    K(MCU_K_REQUANTIZE_S8, MCU_PROGRAM_HAS_REQUANTIZE_S8, 7, S_BB),
    K(MCU_K_CLAMP_S8, MCU_PROGRAM_HAS_CLAMP_S8, 3, S_BB),
    K(MCU_K_QUANTIZE_F32_S8, MCU_PROGRAM_HAS_QUANTIZE_F32_S8, 3, S_FB),
    K(MCU_K_DEQUANTIZE_S8_F32, MCU_PROGRAM_HAS_DEQUANTIZE_S8_F32, 3, S_BF),
    K(MCU_K_CONV2D_1X1_S8, MCU_PROGRAM_HAS_CONV2D_1X1_S8, 21, S_MATMUL_S8),
    K(MCU_K_DEPTHWISE_CONV2D_S8_INPLACE, MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8_INPLACE, 21, S_MATMUL_S8),
    K(MCU_K_LINEAR_W8_F32, MCU_PROGRAM_HAS_LINEAR_W8_F32, 5, S_W8),
    K(MCU_K_LINEAR_DYN_S8, MCU_PROGRAM_HAS_LINEAR_DYN_S8, 5, S_DYN),
    K(MCU_K_SLICE, MCU_PROGRAM_HAS_SLICE, 25, S_XX),
    /* 4-bit groupwise weights and model state (issue 17) */
    K(MCU_K_LINEAR_W4_F32, MCU_PROGRAM_HAS_LINEAR_W4_F32, 6, S_W4),
    K(MCU_K_LINEAR_W4_S8, MCU_PROGRAM_HAS_LINEAR_W4_S8, 6, S_W4_DYN),
    K(MCU_K_INDEX_PUT, MCU_PROGRAM_HAS_INDEX_PUT, 5, S_IXX),
    K(MCU_K_COMPARE, MCU_PROGRAM_HAS_COMPARE, 21, S_CMP),
    K(MCU_K_WHERE, MCU_PROGRAM_HAS_WHERE, 26, S_UXXX),
    K(MCU_K_EMBEDDING, MCU_PROGRAM_HAS_EMBEDDING, 4, S_IXX),
    K(MCU_K_EMBEDDING_S8_F32, MCU_PROGRAM_HAS_EMBEDDING_S8_F32, 3, S_IBFF),
    /* normalisation, reductions and int8 activations (issue 18) */
    K(MCU_K_UNARY_F32, MCU_PROGRAM_HAS_UNARY_F32, 4, S_FF),
    K(MCU_K_LAYER_NORM_F32, MCU_PROGRAM_HAS_LAYER_NORM_F32, 3, S_NORM),
    K(MCU_K_BMM_F32, MCU_PROGRAM_HAS_BMM_F32, 6, S_FFF),
    K(MCU_K_REDUCE_F32, MCU_PROGRAM_HAS_REDUCE_F32, 4, S_FF),
    K(MCU_K_MAXIMUM_F32, MCU_PROGRAM_HAS_MAXIMUM_F32, 21, S_FFF),
    K(MCU_K_MINIMUM_F32, MCU_PROGRAM_HAS_MINIMUM_F32, 21, S_FFF),
    K(MCU_K_LAYER_NORM_S8, MCU_PROGRAM_HAS_LAYER_NORM_S8, 9, S_LN_S8),
    K(MCU_K_GROUP_NORM_F32, MCU_PROGRAM_HAS_GROUP_NORM_F32, 6, S_NORM),
    K(MCU_K_VAR_F32, MCU_PROGRAM_HAS_VAR_F32, 4, S_FF),
    K(MCU_K_ARGMAX_F32, MCU_PROGRAM_HAS_ARGMAX_F32, 3, S_FI),
    K(MCU_K_ARGMAX_S8, MCU_PROGRAM_HAS_ARGMAX_S8, 3, S_BI),
    K(MCU_K_LOG_SOFTMAX_F32, MCU_PROGRAM_HAS_LOG_SOFTMAX_F32, 3, S_FF),
    K(MCU_K_PRELU_F32, MCU_PROGRAM_HAS_PRELU_F32, 3, S_FFF),
    /* resampling and data movement (issue 18) */
    K(MCU_K_REMAP, MCU_PROGRAM_HAS_REMAP, 14, S_IXX),
    K(MCU_K_INDEX_SELECT, MCU_PROGRAM_HAS_INDEX_SELECT, 5, S_IXX),
    K(MCU_K_GATHER, MCU_PROGRAM_HAS_GATHER, 15, S_IXX),
    K(MCU_K_RESIZE_BILINEAR_F32, MCU_PROGRAM_HAS_RESIZE_BILINEAR_F32, 6, S_IFFF),
    K(MCU_K_RESIZE_BILINEAR_S8, MCU_PROGRAM_HAS_RESIZE_BILINEAR_S8, 6, S_IBB),
    K(MCU_K_ADAPTIVE_AVG_POOL_F32, MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_F32, 6, S_FF),
    K(MCU_K_ADAPTIVE_AVG_POOL_S8, MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_S8, 6, S_BB),
    K(MCU_K_REDUCE_S8, MCU_PROGRAM_HAS_REDUCE_S8, 10, S_BB),
    K(MCU_K_RMS_NORM_F32, MCU_PROGRAM_HAS_RMS_NORM_F32, 3, S_RMS),
    K(MCU_K_BMM_S8, MCU_PROGRAM_HAS_BMM_S8, 13, S_BBB),
    /* convolutions (issue 18) */
    K(MCU_K_CONV_TRANSPOSE2D_F32, MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_F32, 19, S_FFFF_BIAS),
    K(MCU_K_CONV_TRANSPOSE2D_S8, MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_S8, 21, S_MATMUL_S8),
    K(MCU_K_CONV_TRANSPOSE2D_PHASED_S8, MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_PHASED_S8, 21, S_MATMUL_S8),
    K(MCU_K_CONV2D_GROUPED_S8, MCU_PROGRAM_HAS_CONV2D_GROUPED_S8, 21, S_MATMUL_S8),
    /* integer recurrent layers (issue 18) */
    K(MCU_K_LSTM_S8, MCU_PROGRAM_HAS_LSTM_S8, 8, S_RNN_S8),
    K(MCU_K_GRU_S8, MCU_PROGRAM_HAS_GRU_S8, 8, S_RNN_S8),
    /* int8 islands made integer (issue 18) */
    K(MCU_K_MAXIMUM_S8, MCU_PROGRAM_HAS_MAXIMUM_S8, 31, S_BBB),
    K(MCU_K_MINIMUM_S8, MCU_PROGRAM_HAS_MINIMUM_S8, 31, S_BBB),
    K(MCU_K_DIV_S8, MCU_PROGRAM_HAS_DIV_S8, 31, S_BBB),
    K(MCU_K_PRELU_S8, MCU_PROGRAM_HAS_PRELU_S8, 11, S_BBB),
    K(MCU_K_LOG_SOFTMAX_S8, MCU_PROGRAM_HAS_LOG_SOFTMAX_S8, 6, S_IBB),
};
#undef K

/* Element counts saturate at CAP, above any tensor the verifier accepts
 * (INT32_MAX bytes), so a saturated count never fits an operand. */
#define CAP 0xFFFFFFFFu

static uint32_t mulcap(uint32_t a, int32_t b)
{
    const uint64_t r = (uint64_t)a * (uint32_t)(b < 0 ? 0x7FFFFFFF : b);
    return b < 0 || r > CAP ? CAP : (uint32_t)r;
}

static uint32_t prod(const int32_t *dims, int32_t n)
{
    uint32_t r = 1;
    for (int32_t i = 0; i < n; ++i) {
        r = mulcap(r, dims[i]);
    }
    return r;
}

static uint32_t ceil_div(uint32_t a, uint32_t b)
{
    return a / b + (a % b != 0u);
}

/* Elements a strided operand spans: 1 + sum((shape - 1) * stride). */
static uint32_t extent(const int32_t *shape, const int32_t *strides, int32_t rank)
{
    uint64_t last = 1;
    for (int32_t i = 0; i < rank; ++i) {
        if (shape[i] < 1 || strides[i] < 0) {
            return CAP;
        }
        last += mulcap((uint32_t)shape[i] - 1u, strides[i]);
    }
    return last > CAP ? CAP : (uint32_t)last;
}

mcu_status mcu_program_check_kernel(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                    const int32_t *p, uint32_t n_params)
{
    MCU_REQUIRE(kernel != 0 && kernel < MCU_K_COUNT && n_ops >= 2 && n_ops <= MCU_PROGRAM_MAX_OPERANDS,
                MCU_ERR_PROGRAM_INVALID);
    const mcu_kernel_desc *d = &KERNELS[kernel];
    MCU_REQUIRE((d->sig & 0x80u) != 0, MCU_ERR_UNSUPPORTED);
    const char *sig = SIGS[d->sig & 0x7Fu];
    /* The operand count is the signature's length, counted inside its own row: a row may be full (no NUL),
     * and reading past it would read the next kernel's signature. */
    uint32_t sig_len = 0;
    while (sig_len < sizeof(SIGS[0]) && sig[sig_len] != '\0') {
        ++sig_len;
    }
    const int concat = kernel == MCU_K_CONCAT;
    MCU_REQUIRE(concat ? n_params == n_ops : (n_params == d->n_params && n_ops == sig_len),
                MCU_ERR_PROGRAM_INVALID);
    const mcu_operand_desc *out = &ops[n_ops - 1];
    MCU_REQUIRE(out->present && !out->constant, MCU_ERR_PROGRAM_INVALID);
    for (uint32_t i = 0; i < n_ops; ++i) {
        const char c = concat ? 'X' : sig[i];
        if (!ops[i].present) {
            MCU_REQUIRE(c == 'f' || c == 'i' || c == 'b', MCU_ERR_PROGRAM_INVALID);
            continue;
        }
        if (c == '*') {
            continue; /* any dtype: the kernel's case below checks it */
        }
        const uint32_t want = (c == 'F' || c == 'f')   ? MCU_DTYPE_FLOAT32
                              : (c == 'B' || c == 'b') ? MCU_DTYPE_INT8
                              : (c == 'I' || c == 'i') ? MCU_DTYPE_INT32
                              : c == 'U'               ? MCU_DTYPE_UINT8
                              : c == 'H'               ? MCU_DTYPE_INT16
                                                       : out->dtype;
        MCU_REQUIRE(ops[i].dtype == want, MCU_ERR_PROGRAM_INVALID);
    }

    /* Elements each operand must hold for the kernel's accesses. */
    uint32_t need[MCU_PROGRAM_MAX_OPERANDS] = {0};
    const uint32_t last = n_ops - 1;
    switch (kernel) {
    case MCU_K_CONV2D_F32:
    case MCU_K_CONV2D_S8:
    case MCU_K_CONV2D_1X1_S8:
    case MCU_K_CONV_TRANSPOSE2D_F32: /* the same params, operands and weight shape (issue 18) */
    case MCU_K_CONV_TRANSPOSE2D_S8:
    case MCU_K_CONV_TRANSPOSE2D_PHASED_S8:
    case MCU_K_CONV2D_GROUPED_S8: {
        /* The scratch: only the 1x1 kernel takes one (a pixel's outputs); the others ignore it. */
        MCU_REQUIRE(p[16] > 0, MCU_ERR_PROGRAM_INVALID);
        const int32_t w[4] = {p[7], p[8], p[9], p[3] / p[16]};
        need[0] = prod(p, 4);
        need[1] = prod(w, 4);
        need[2] = need[3] = need[4] = mulcap(1, p[7]);
        need[5] = kernel == MCU_K_CONV2D_1X1_S8 ? mulcap(1, p[7]) : 0;
        need[last] = prod(p + 4, 4);
        break;
    }
    case MCU_K_DEPTHWISE_CONV2D_S8:
    case MCU_K_DEPTHWISE_CONV2D_S8_INPLACE: {
        const int32_t w[3] = {p[9], p[10], p[7]};
        need[0] = prod(p, 4);
        need[1] = prod(w, 3);
        need[2] = need[3] = need[4] = mulcap(1, p[7]);
        need[last] = prod(p + 4, 4);
        if (kernel == MCU_K_DEPTHWISE_CONV2D_S8_INPLACE && need[0] > need[last]) {
            need[last] = need[0]; /* the output's memory is also the input */
        }
        if (kernel == MCU_K_DEPTHWISE_CONV2D_S8_INPLACE) { /* the scratch: a ring of pad_top + 1 input rows */
            need[5] = p[13] >= 0 && p[13] < INT32_MAX ? mulcap(mulcap(mulcap(1, p[2]), p[3]), p[13] + 1) : CAP;
        }
        break;
    }
    case MCU_K_LINEAR_F32:
    case MCU_K_LINEAR_S8:
        need[0] = prod(p, 2);
        need[1] = prod(p + 1, 2);
        need[2] = need[3] = need[4] = mulcap(1, p[2]);
        need[last] = mulcap(mulcap(1, p[0]), p[2]);
        break;
    case MCU_K_LINEAR_W8_F32:
    case MCU_K_LINEAR_DYN_S8: {
        /* [scratch,] input, weight, w_scale, bias, output; the scratch holds the input as int8. */
        const uint32_t k = kernel == MCU_K_LINEAR_DYN_S8;
        need[0] = k ? prod(p, 2) : 0;
        need[k] = prod(p, 2);
        need[k + 1] = prod(p + 1, 2);
        need[k + 2] = need[k + 3] = mulcap(1, p[2]);
        need[last] = mulcap(mulcap(1, p[0]), p[2]);
        break;
    }
    case MCU_K_MAX_POOL2D_F32:
    case MCU_K_AVG_POOL2D_F32:
    case MCU_K_MAX_POOL2D_S8:
    case MCU_K_AVG_POOL2D_S8:
        need[0] = prod(p, 4);
        need[1] = prod(p + 4, 4);
        break;
    case MCU_K_MEAN_HW_F32:
    case MCU_K_MEAN_HW_S8:
        need[0] = prod(p, 4);
        need[1] = mulcap(mulcap(1, p[0]), p[3]);
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
    case MCU_K_MAXIMUM_S8: /* int8 islands made integer (issue 18) */
    case MCU_K_MINIMUM_S8:
    case MCU_K_DIV_S8:
        MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
        need[0] = extent(p + 1, p + 7, p[0]);
        need[1] = extent(p + 1, p + 13, p[0]);
        need[2] = prod(p + 1, p[0]);
        break;
    case MCU_K_SOFTMAX_F32:
    case MCU_K_SOFTMAX_S8:
        need[0] = need[1] = prod(p, 3);
        break;
    case MCU_K_BATCH_NORM_F32:
        need[0] = need[1] = mulcap(1, p[1]);
        need[2] = need[3] = prod(p, 3);
        break;
    case MCU_K_LUT_S8:
        need[0] = 256;
        need[1] = need[2] = mulcap(1, p[0]);
        break;
    case MCU_K_PERMUTE:
    case MCU_K_SLICE: /* slice: in_shape, then out_shape; the kernel keeps every index inside in_shape */
        MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
        need[0] = prod(p + 1, p[0]);
        need[1] = prod(p + (kernel == MCU_K_SLICE ? 7 : 1), p[0]);
        break;
    case MCU_K_PAD: {
        MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
        uint32_t out_count = 1;
        for (int32_t i = 0; i < p[0]; ++i) {
            const int64_t dim = (int64_t)p[1 + i] + p[7 + i] + p[13 + i];
            MCU_REQUIRE(p[7 + i] >= 0 && p[13 + i] >= 0 && dim <= INT32_MAX, MCU_ERR_PROGRAM_INVALID);
            out_count = mulcap(out_count, (int32_t)dim);
        }
        need[0] = prod(p + 1, p[0]);
        need[1] = out_count;
        break;
    }
    case MCU_K_CONCAT: {
        /* Params are bytes here: outer, then one chunk per input. */
        const uint32_t esize = mcu_dtype_size(out->dtype);
        uint32_t row = 0;
        MCU_REQUIRE(p[0] >= 1, MCU_ERR_PROGRAM_INVALID);
        for (uint32_t i = 0; i < last; ++i) {
            MCU_REQUIRE(p[1 + i] >= 0 && row + (uint32_t)p[1 + i] >= row, MCU_ERR_PROGRAM_INVALID);
            row += (uint32_t)p[1 + i];
            need[i] = ceil_div(mulcap((uint32_t)p[0], p[1 + i]), esize);
        }
        need[last] = ceil_div(mulcap(row, p[0]), esize);
        break;
    }
    case MCU_K_LINEAR_W4_F32:
    case MCU_K_LINEAR_W4_S8: { /* [scratch,] batch, in, out, group_size: two weights a byte, a scale per group */
        const uint32_t k = kernel == MCU_K_LINEAR_W4_S8; /* the scratch: the input row as int16 */
        MCU_REQUIRE(p[3] > 0 && p[3] % 2 == 0 && p[1] > 0 && p[1] % p[3] == 0, MCU_ERR_PROGRAM_INVALID);
        need[0] = k ? mulcap(2, p[1]) : 0;
        need[k] = prod(p, 2);
        need[k + 1] = mulcap(mulcap(1, p[2]), p[1] / 2);
        need[k + 2] = mulcap(mulcap(1, p[2]), p[1] / p[3]);
        need[k + 3] = mulcap(1, p[2]);
        need[last] = mulcap(mulcap(1, p[0]), p[2]);
        break;
    }
    case MCU_K_COMPARE: { /* rank, out_shape, a_strides, b_strides, cmp, type */
        static const uint32_t TYPES[4] = {MCU_DTYPE_FLOAT32, MCU_DTYPE_INT32, MCU_DTYPE_INT8, MCU_DTYPE_UINT8};
        MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS && p[20] >= 0 && p[20] <= 3, MCU_ERR_PROGRAM_INVALID);
        MCU_REQUIRE(ops[0].dtype == TYPES[p[20]] && ops[1].dtype == TYPES[p[20]], MCU_ERR_PROGRAM_INVALID);
        need[0] = extent(p + 1, p + 7, p[0]);
        need[1] = extent(p + 1, p + 13, p[0]);
        need[2] = prod(p + 1, p[0]);
        break;
    }
    case MCU_K_WHERE: /* rank, out_shape, c_strides, a_strides, b_strides, element size */
        MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS && p[25] == (int32_t)mcu_dtype_size(out->dtype),
                    MCU_ERR_PROGRAM_INVALID);
        need[0] = extent(p + 1, p + 7, p[0]);
        need[1] = extent(p + 1, p + 13, p[0]);
        need[2] = extent(p + 1, p + 19, p[0]);
        need[3] = prod(p + 1, p[0]);
        break;
    case MCU_K_EMBEDDING: /* rows, cols, count, element size */
        MCU_REQUIRE(p[3] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
        need[0] = mulcap(1, p[2]);
        need[1] = prod(p, 2);
        need[2] = prod(p + 1, 2);
        break;
    case MCU_K_EMBEDDING_S8_F32: /* rows, cols, count */
        need[0] = mulcap(1, p[2]);
        need[1] = prod(p, 2);
        need[2] = mulcap(1, p[0]);
        need[3] = prod(p + 1, 2);
        break;
    case MCU_K_INDEX_PUT: { /* outer, axis, inner, count, element size */
        const int32_t values[3] = {p[0], p[3], p[2]};
        MCU_REQUIRE(p[4] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
        need[0] = mulcap(1, p[3]);
        need[1] = prod(values, 3);
        need[last] = prod(p, 3);
        break;
    }
    /* normalisation, reductions and int8 activations (issue 18) */
    case MCU_K_LAYER_NORM_F32: /* rows, cols */
    case MCU_K_LAYER_NORM_S8:
        need[0] = need[last] = prod(p, 2);
        need[1] = need[2] = mulcap(1, p[1]);
        need[3] = kernel == MCU_K_LAYER_NORM_S8 ? mulcap(1, p[1]) : need[0];
        break;
    case MCU_K_RMS_NORM_F32: /* rows, cols */
        need[0] = need[last] = prod(p, 2);
        need[1] = mulcap(1, p[1]);
        break;
    case MCU_K_GROUP_NORM_F32: /* batch, channels, spatial */
        need[0] = need[last] = prod(p, 3);
        need[1] = need[2] = mulcap(1, p[1]);
        break;
    case MCU_K_BMM_F32: /* batch, m, k, n, a_batch_stride, b_batch_stride */
    case MCU_K_BMM_S8: {
        MCU_REQUIRE(p[0] >= 1 && p[4] >= 0 && p[5] >= 0, MCU_ERR_PROGRAM_INVALID);
        const uint64_t a = (uint64_t)mulcap((uint32_t)p[0] - 1u, p[4]) + prod(p + 1, 2);
        const uint64_t b = (uint64_t)mulcap((uint32_t)p[0] - 1u, p[5]) + prod(p + 2, 2);
        const int32_t out_dims[3] = {p[0], p[1], p[3]};
        need[0] = a > CAP ? CAP : (uint32_t)a;
        need[1] = b > CAP ? CAP : (uint32_t)b;
        need[2] = prod(out_dims, 3);
        break;
    }
    case MCU_K_REDUCE_F32: /* outer, reduce, inner */
    case MCU_K_REDUCE_S8:
    case MCU_K_VAR_F32:
    case MCU_K_ARGMAX_F32:
    case MCU_K_ARGMAX_S8:
        need[0] = prod(p, 3);
        need[1] = mulcap(mulcap(1, p[0]), p[2]);
        break;
    case MCU_K_LOG_SOFTMAX_F32: need[0] = need[1] = prod(p, 3); break;
    case MCU_K_LOG_SOFTMAX_S8: /* (int8 islands made integer, issue 18) the table, then in and out */
        need[0] = 256;
        need[1] = need[2] = prod(p, 3);
        break;
    case MCU_K_PRELU_F32: /* size, channels, inner */
    case MCU_K_PRELU_S8:  /* (int8 islands made integer, issue 18) */
        need[0] = need[2] = mulcap(1, p[0]);
        need[1] = mulcap(1, p[1]);
        break;
    /* resampling and data movement (issue 18) */
    case MCU_K_REMAP:   /* rank, in_shape[6], out_shape[6], element size; tables: one entry per output index */
    case MCU_K_GATHER: { /* rank, in_shape[6], out_shape[6] (the index's), dim, element size */
        MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
        MCU_REQUIRE(p[kernel == MCU_K_REMAP ? 13 : 14] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
        uint32_t sum = 0;
        for (int32_t i = 0; i < p[0]; ++i) {
            MCU_REQUIRE(p[7 + i] >= 1 && p[7 + i] <= INT32_MAX / 8, MCU_ERR_PROGRAM_INVALID);
            sum += (uint32_t)p[7 + i]; /* at most 6 terms below 2^28 */
        }
        need[0] = kernel == MCU_K_REMAP ? sum : prod(p + 7, p[0]);
        need[1] = prod(p + 1, p[0]);
        need[2] = prod(p + 7, p[0]);
        break;
    }
    case MCU_K_INDEX_SELECT: { /* outer, axis, inner, count, element size */
        const int32_t out_dims[3] = {p[0], p[3], p[2]};
        MCU_REQUIRE(p[4] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
        need[0] = mulcap(1, p[3]);
        need[1] = prod(p, 3);
        need[2] = prod(out_dims, 3);
        break;
    }
    case MCU_K_RESIZE_BILINEAR_F32:
    case MCU_K_RESIZE_BILINEAR_S8:
    case MCU_K_ADAPTIVE_AVG_POOL_F32:
    case MCU_K_ADAPTIVE_AVG_POOL_S8: { /* outer, in_h, in_w, out_h, out_w, inner */
        const int32_t in_dims[4] = {p[0], p[1], p[2], p[5]};
        const int32_t out_dims[4] = {p[0], p[3], p[4], p[5]};
        MCU_REQUIRE(p[3] >= 1 && p[4] >= 1 && p[3] <= INT32_MAX / 8 && p[4] <= INT32_MAX / 8, MCU_ERR_PROGRAM_INVALID);
        const uint32_t axes = (uint32_t)p[3] + (uint32_t)p[4];
        uint32_t k = 0;
        if (kernel == MCU_K_RESIZE_BILINEAR_F32) { /* (i0, i1) and (1 - l, l) per row and column */
            need[0] = need[1] = 2u * axes;
            k = 2;
        } else if (kernel == MCU_K_RESIZE_BILINEAR_S8) { /* (i0, i1, f) per row and column */
            need[0] = 3u * axes;
            k = 1;
        }
        need[k] = prod(in_dims, 4);
        need[k + 1] = prod(out_dims, 4);
        break;
    }
    /* integer recurrent layers (issue 18) */
    case MCU_K_LSTM_S8: /* batch, steps, input_size, hidden, ... */
    case MCU_K_GRU_S8: {
        const int32_t rows = kernel == MCU_K_LSTM_S8 ? 4 : 3;
        const int32_t in_dims[3] = {p[0], p[1], p[2]};
        const int32_t out_dims[3] = {p[0], p[1], p[3]};
        need[0] = mulcap(kernel == MCU_K_LSTM_S8 ? 13u : 11u, p[3]) + mulcap(2u, p[2]); /* < 2^17 once checked */
        need[1] = prod(in_dims, 3);
        need[2] = mulcap(mulcap((uint32_t)rows, p[3]), p[2]);
        need[3] = mulcap(mulcap((uint32_t)rows, p[3]), p[3]);
        need[4] = mulcap(6u * (uint32_t)rows, p[3]);
        need[5] = MCU_RECURRENT_S8_TABLE_SIZE;
        need[6] = prod(out_dims, 3);
        break;
    }
    default: /* the elementwise kernels (and mcu_unary_f32): params[0] is the element count */
        need[0] = need[1] = mulcap(1, p[0]);
        break;
    }
    uint32_t bytes[MCU_PROGRAM_MAX_OPERANDS];
    for (uint32_t i = 0; i < n_ops; ++i) {
        MCU_REQUIRE(!ops[i].present || (uint64_t)need[i] * mcu_dtype_size(ops[i].dtype) <= ops[i].nbytes,
                    MCU_ERR_PROGRAM_INVALID);
        bytes[i] = ops[i].present ? need[i] * mcu_dtype_size(ops[i].dtype) : 0u;
    }
    MCU_CHECK(mcu_program_check_params(kernel, p, n_params));
    return mcu_program_check_operands(kernel, ops, bytes, n_ops, p);
}

mcu_status mcu_program_dispatch(uint32_t kernel, void *const *o, const uint32_t *sizes, uint32_t n_ops,
                                const int32_t *params, uint32_t n_params, int32_t elem_size)
{
    mcu_program_params_view u;
    MCU_REQUIRE(n_params <= MCU_PROGRAM_MAX_PARAMS && n_ops >= 2 && n_ops <= MCU_PROGRAM_MAX_OPERANDS,
                MCU_ERR_PROGRAM_INVALID);
    memcpy(&u, params, n_params * sizeof(int32_t));
    /* The int8 matmul kernels: per-channel multipliers and shifts are operands 3 and 4, scratch is 5. */
    const mcu_context ctx = {o[5 % n_ops], (int32_t)sizes[5 % n_ops]};
    const mcu_per_channel_quant quant = {(const int32_t *)o[3 % n_ops], (const int32_t *)o[4 % n_ops]};
    const int32_t *w = u.w;
    (void)ctx;
    (void)quant;
    (void)w;
    (void)elem_size;
    switch (kernel) {
#if MCU_PROGRAM_HAS_CONV2D_F32
    case MCU_K_CONV2D_F32: return mcu_conv2d_f32(&u.conv_f32, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_LINEAR_F32
    case MCU_K_LINEAR_F32: return mcu_linear_f32(&u.linear_f32, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_MAX_POOL2D_F32
    case MCU_K_MAX_POOL2D_F32: return mcu_max_pool2d_f32(&u.pool_f32, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_AVG_POOL2D_F32
    case MCU_K_AVG_POOL2D_F32: return mcu_avg_pool2d_f32(&u.pool_f32, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_MEAN_HW_F32
    case MCU_K_MEAN_HW_F32: return mcu_mean_hw_f32(&u.shape4, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_ADD_F32
    case MCU_K_ADD_F32: return mcu_add_f32(&u.binary_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_SUB_F32
    case MCU_K_SUB_F32: return mcu_sub_f32(&u.binary_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_MUL_F32
    case MCU_K_MUL_F32: return mcu_mul_f32(&u.binary_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_DIV_F32
    case MCU_K_DIV_F32: return mcu_div_f32(&u.binary_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_CLAMP_F32
    case MCU_K_CLAMP_F32: return mcu_clamp_f32(w[0], u.f[1], u.f[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_SIGMOID_F32
    case MCU_K_SIGMOID_F32: return mcu_sigmoid_f32(w[0], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_TANH_F32
    case MCU_K_TANH_F32: return mcu_tanh_f32(w[0], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_HARDSWISH_F32
    case MCU_K_HARDSWISH_F32: return mcu_hardswish_f32(w[0], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_SOFTMAX_F32
    case MCU_K_SOFTMAX_F32: return mcu_softmax_f32(w[0], w[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_BATCH_NORM_F32
    case MCU_K_BATCH_NORM_F32: return mcu_batch_norm_f32(w[0], w[1], w[2], o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_PERMUTE
    case MCU_K_PERMUTE: return mcu_permute(&u.permute, elem_size, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_CONCAT
    case MCU_K_CONCAT: return mcu_concat(w[0], (int32_t)n_ops - 1, w + 1, (const void *const *)o, o[n_ops - 1]);
#endif
#if MCU_PROGRAM_HAS_PAD
    case MCU_K_PAD: return mcu_pad(&u.pad, elem_size, &w[19], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_CONV2D_S8
    case MCU_K_CONV2D_S8: return mcu_conv2d_s8(&ctx, &u.conv_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
#if MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8
    case MCU_K_DEPTHWISE_CONV2D_S8:
        return mcu_depthwise_conv2d_s8(&ctx, &u.depthwise_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
#if MCU_PROGRAM_HAS_LINEAR_S8
    case MCU_K_LINEAR_S8: return mcu_linear_s8(&ctx, &u.linear_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
#if MCU_PROGRAM_HAS_ADD_S8
    case MCU_K_ADD_S8: return mcu_add_s8(&u.binary_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_SUB_S8
    case MCU_K_SUB_S8: return mcu_sub_s8(&u.binary_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_MUL_S8
    case MCU_K_MUL_S8: return mcu_mul_s8(&u.binary_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_MAX_POOL2D_S8
    case MCU_K_MAX_POOL2D_S8: return mcu_max_pool2d_s8(&u.pool_s8, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_AVG_POOL2D_S8
    case MCU_K_AVG_POOL2D_S8: return mcu_avg_pool2d_s8(&u.pool_s8, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_MEAN_HW_S8
    case MCU_K_MEAN_HW_S8: return mcu_mean_hw_s8(&u.mean_hw_s8, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_SOFTMAX_S8
    case MCU_K_SOFTMAX_S8: return mcu_softmax_s8(&u.softmax_s8, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_LUT_S8
    case MCU_K_LUT_S8: return mcu_lut_s8(w[0], o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_REQUANTIZE_S8
    case MCU_K_REQUANTIZE_S8: return mcu_requantize_s8(w[0], w[1], w[2], w[3], w[4], w[5], w[6], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_CLAMP_S8
    case MCU_K_CLAMP_S8: return mcu_clamp_s8(w[0], w[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_QUANTIZE_F32_S8
    case MCU_K_QUANTIZE_F32_S8: return mcu_quantize_f32_s8(w[0], u.f[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_DEQUANTIZE_S8_F32
    case MCU_K_DEQUANTIZE_S8_F32: return mcu_dequantize_s8_f32(w[0], u.f[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_CONV2D_1X1_S8
    case MCU_K_CONV2D_1X1_S8: return mcu_conv2d_1x1_s8(&ctx, &u.conv_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
#if MCU_PROGRAM_HAS_DEPTHWISE_CONV2D_S8_INPLACE
    case MCU_K_DEPTHWISE_CONV2D_S8_INPLACE:
        return mcu_depthwise_conv2d_s8_inplace(&ctx, &u.depthwise_s8, &quant, o[6], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_LINEAR_W8_F32
    case MCU_K_LINEAR_W8_F32: return mcu_linear_w8_f32(&u.linear_f32, o[0], o[1], o[2], o[3], o[4]);
#endif
#if MCU_PROGRAM_HAS_LINEAR_DYN_S8
    case MCU_K_LINEAR_DYN_S8: {
        const mcu_context scratch = {o[0], (int32_t)sizes[0]};
        return mcu_linear_dyn_s8(&scratch, &u.linear_f32, o[1], o[2], o[3], o[4], o[5]);
    }
#endif
#if MCU_PROGRAM_HAS_SLICE
    case MCU_K_SLICE: return mcu_slice(&u.slice, elem_size, o[0], o[1]);
#endif
    /* 4-bit groupwise weights and model state (issue 17) */
#if MCU_PROGRAM_HAS_LINEAR_W4_F32
    case MCU_K_LINEAR_W4_F32: return mcu_linear_w4_f32(&u.linear_w4, o[0], o[1], o[2], o[3], o[4]);
#endif
#if MCU_PROGRAM_HAS_INDEX_PUT
    case MCU_K_INDEX_PUT: return mcu_index_put(&u.index_put, w[4], o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_COMPARE
    case MCU_K_COMPARE: return mcu_compare(&u.compare, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_WHERE
    case MCU_K_WHERE: return mcu_where(&u.where, w[25], o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_EMBEDDING_S8_F32
    case MCU_K_EMBEDDING_S8_F32: return mcu_embedding_s8_f32(&u.embedding, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_EMBEDDING
    case MCU_K_EMBEDDING: return mcu_embedding(&u.embedding, w[3], o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_LINEAR_W4_S8
    case MCU_K_LINEAR_W4_S8: {
        const mcu_context scratch = {o[0], (int32_t)sizes[0]};
        return mcu_linear_w4_s8(&scratch, &u.linear_w4, o[1], o[2], o[3], o[4], o[5]);
    }
#endif
    /* normalisation, reductions and int8 activations (issue 18) */
#if MCU_PROGRAM_HAS_UNARY_F32
    case MCU_K_UNARY_F32: return mcu_unary_f32(&u.unary_f32, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_LAYER_NORM_F32
    case MCU_K_LAYER_NORM_F32: return mcu_layer_norm_f32(&u.layer_norm_f32, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_BMM_F32
    case MCU_K_BMM_F32: return mcu_bmm_f32(&u.bmm_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_REDUCE_F32
    case MCU_K_REDUCE_F32: return mcu_reduce_f32(&u.reduce_f32, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_MAXIMUM_F32
    case MCU_K_MAXIMUM_F32: return mcu_maximum_f32(&u.binary_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_MINIMUM_F32
    case MCU_K_MINIMUM_F32: return mcu_minimum_f32(&u.binary_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_LAYER_NORM_S8
    case MCU_K_LAYER_NORM_S8: return mcu_layer_norm_s8(&u.layer_norm_s8, o[0], o[1], o[2], o[3], o[4]);
#endif
#if MCU_PROGRAM_HAS_GROUP_NORM_F32
    case MCU_K_GROUP_NORM_F32: return mcu_group_norm_f32(&u.group_norm_f32, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_VAR_F32
    case MCU_K_VAR_F32: return mcu_var_f32(&u.var_f32, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_ARGMAX_F32
    case MCU_K_ARGMAX_F32: return mcu_argmax_f32(w[0], w[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_ARGMAX_S8
    case MCU_K_ARGMAX_S8: return mcu_argmax_s8(w[0], w[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_LOG_SOFTMAX_F32
    case MCU_K_LOG_SOFTMAX_F32: return mcu_log_softmax_f32(w[0], w[1], w[2], o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_PRELU_F32
    case MCU_K_PRELU_F32: return mcu_prelu_f32(&u.prelu_f32, o[0], o[1], o[2]);
#endif
    /* resampling and data movement (issue 18) */
#if MCU_PROGRAM_HAS_REMAP
    case MCU_K_REMAP: return mcu_remap(&u.remap, w[13], o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_INDEX_SELECT
    case MCU_K_INDEX_SELECT: return mcu_index_select(&u.index_select, w[4], o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_GATHER
    case MCU_K_GATHER: return mcu_gather(&u.gather, w[14], o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_RESIZE_BILINEAR_F32
    case MCU_K_RESIZE_BILINEAR_F32: return mcu_resize_bilinear_f32(&u.resample_f32, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_RESIZE_BILINEAR_S8
    case MCU_K_RESIZE_BILINEAR_S8: return mcu_resize_bilinear_s8(&u.resample_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_F32
    case MCU_K_ADAPTIVE_AVG_POOL_F32: return mcu_adaptive_avg_pool_f32(&u.resample_f32, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_ADAPTIVE_AVG_POOL_S8
    case MCU_K_ADAPTIVE_AVG_POOL_S8: return mcu_adaptive_avg_pool_s8(&u.resample_s8, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_REDUCE_S8
    case MCU_K_REDUCE_S8: return mcu_reduce_s8(&u.reduce_s8, o[0], o[1]);
#endif
#if MCU_PROGRAM_HAS_RMS_NORM_F32
    case MCU_K_RMS_NORM_F32: return mcu_rms_norm_f32(&u.layer_norm_f32, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_BMM_S8
    case MCU_K_BMM_S8: return mcu_bmm_s8(&u.bmm_s8, o[0], o[1], o[2]);
#endif
    /* convolutions (issue 18) */
#if MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_F32
    case MCU_K_CONV_TRANSPOSE2D_F32: return mcu_conv_transpose2d_f32(&u.conv_f32, o[0], o[1], o[2], o[3]);
#endif
#if MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_S8
    case MCU_K_CONV_TRANSPOSE2D_S8:
        return mcu_conv_transpose2d_s8(&ctx, &u.conv_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
#if MCU_PROGRAM_HAS_CONV_TRANSPOSE2D_PHASED_S8
    case MCU_K_CONV_TRANSPOSE2D_PHASED_S8:
        return mcu_conv_transpose2d_phased_s8(&ctx, &u.conv_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
#if MCU_PROGRAM_HAS_CONV2D_GROUPED_S8
    case MCU_K_CONV2D_GROUPED_S8: return mcu_conv2d_grouped_s8(&ctx, &u.conv_s8, &quant, o[0], o[1], o[2], o[6]);
#endif
    /* integer recurrent layers (issue 18) */
#if MCU_PROGRAM_HAS_LSTM_S8
    case MCU_K_LSTM_S8: {
        const mcu_context scratch = {o[0], (int32_t)sizes[0]};
        return mcu_lstm_s8(&scratch, &u.recurrent_s8, o[1], o[2], o[3], o[4], o[5], o[6]);
    }
#endif
#if MCU_PROGRAM_HAS_GRU_S8
    case MCU_K_GRU_S8: {
        const mcu_context scratch = {o[0], (int32_t)sizes[0]};
        return mcu_gru_s8(&scratch, &u.recurrent_s8, o[1], o[2], o[3], o[4], o[5], o[6]);
    }
#endif
    /* int8 islands made integer (issue 18) */
#if MCU_PROGRAM_HAS_MAXIMUM_S8
    case MCU_K_MAXIMUM_S8: return mcu_maximum_s8(&u.binary_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_MINIMUM_S8
    case MCU_K_MINIMUM_S8: return mcu_minimum_s8(&u.binary_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_DIV_S8
    case MCU_K_DIV_S8: return mcu_div_s8(&u.binary_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_PRELU_S8
    case MCU_K_PRELU_S8: return mcu_prelu_s8(&u.prelu_s8, o[0], o[1], o[2]);
#endif
#if MCU_PROGRAM_HAS_LOG_SOFTMAX_S8
    case MCU_K_LOG_SOFTMAX_S8: return mcu_log_softmax_s8(&u.log_softmax_s8, o[0], o[1], o[2]);
#endif
    default: return MCU_ERR_UNSUPPORTED;
    }
}
