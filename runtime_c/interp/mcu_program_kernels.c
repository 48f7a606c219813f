/* The interpreter's kernels, from the table mcu_kernels.def: each kernel id's operand dtypes and
 * param count, the elements its params make it touch in every operand (checked at load), and the
 * call itself.
 *
 * A firmware that runs known programs may keep only some kernels: define
 * MCU_PROGRAM_KERNEL_SUBSET and MCU_PROGRAM_HAS_<KERNEL>=1 for each kernel
 * to keep (names as in mcu_program_kernel without MCU_K_). A program that
 * uses a kernel left out fails to load with MCU_ERR_UNSUPPORTED. Without the subset, a kernel
 * defined MCU_PROGRAM_HAS_<KERNEL>=0 is left out. */
#include <stddef.h>
#include <string.h>

#include "mcu/kernels_f32.h"
#include "mcu/kernels_generic.h"
#include "mcu/kernels_mixed.h"
#include "mcu/kernels_s16.h"
#include "mcu/kernels_s8.h"
#include "mcu_program_internal.h"

/* MCU_PROGRAM_KEPT(NAME) is the token 1 when this build keeps kernel NAME, else 0 (a token, not an
 * expression, so that MCU_PROGRAM_CASE can paste it): the preprocessor cannot test whether a macro is
 * defined inside another macro, so the value of MCU_PROGRAM_HAS_<NAME> is pasted onto a prefix that exists
 * only for the spellings 1 (or 0): an undefined MCU_PROGRAM_HAS_<NAME> pastes to a name that is no macro. */
#define MCU_PROGRAM_SECOND(a, b, ...) b
#define MCU_PROGRAM_IS1_1 ~, 1
#define MCU_PROGRAM_IS0_0 ~, 1
#define MCU_PROGRAM_IS(prefix, x) MCU_PROGRAM_IS_(prefix, x)
#define MCU_PROGRAM_IS_(prefix, x) MCU_PROGRAM_IS__(prefix##x)
#define MCU_PROGRAM_IS__(probe) MCU_PROGRAM_SECOND(probe, 0, ~)
#define MCU_PROGRAM_NOT(x) MCU_PROGRAM_NOT_(x)
#define MCU_PROGRAM_NOT_(x) MCU_PROGRAM_NOT_##x
#define MCU_PROGRAM_NOT_0 1
#define MCU_PROGRAM_NOT_1 0
#ifdef MCU_PROGRAM_KERNEL_SUBSET
#define MCU_PROGRAM_KEPT(name) MCU_PROGRAM_IS(MCU_PROGRAM_IS1_, MCU_PROGRAM_HAS_##name)
#else
#define MCU_PROGRAM_KEPT(name) MCU_PROGRAM_NOT(MCU_PROGRAM_IS(MCU_PROGRAM_IS0_, MCU_PROGRAM_HAS_##name))
#endif
/* `case MCU_K_<NAME>: <call>` when the build keeps the kernel, nothing otherwise. */
#define MCU_PROGRAM_CASE(kept, id, ...) MCU_PROGRAM_CASE_(kept, id, __VA_ARGS__)
#define MCU_PROGRAM_CASE_(kept, id, ...) MCU_PROGRAM_CASE_##kept(id, __VA_ARGS__)
#define MCU_PROGRAM_CASE_1(id, ...) case id: __VA_ARGS__
#define MCU_PROGRAM_CASE_0(id, ...)

/* The table's ids are the public enum's. */
#define MCU_KERNEL(name, id, ...) _Static_assert(MCU_K_##name == (id), "mcu_kernels.def: id of " #name);
#include "mcu_kernels.def"
#undef MCU_KERNEL

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
_Static_assert(sizeof(mcu_linear_s16_params) == 5 * 4, "linear_s16 params layout");
_Static_assert(sizeof(mcu_conv2d_s16_params) == 18 * 4, "conv2d_s16 params layout");
_Static_assert(sizeof(mcu_mean_s16_params) == 7 * 4, "mean_s16 params layout");
_Static_assert(sizeof(mcu_add_s16_params) == 10 * 4, "add_s16 params layout");
_Static_assert(sizeof(mcu_activation_s16_params) == 4 * 4, "activation_s16 params layout");
_Static_assert(sizeof(mcu_mul_s16_params) == 5 * 4, "mul_s16 params layout");
_Static_assert(sizeof(mcu_div_s16_params) == 6 * 4, "div_s16 params layout");
_Static_assert(sizeof(mcu_softmax_s16_params) == 5 * 4, "softmax_s16 params layout");
_Static_assert(sizeof(mcu_softmax_masked_s16_params) == 6 * 4, "softmax_masked_s16 params layout");
_Static_assert(sizeof(mcu_bmm_s16_params) == 10 * 4, "bmm_s16 params layout");
_Static_assert(sizeof(mcu_layer_norm_s16_params) == 7 * 4, "layer_norm_s16 params layout");
_Static_assert(sizeof(mcu_log_softmax_s16_params) == 9 * 4, "log_softmax_s16 params layout");
_Static_assert(sizeof(mcu_requantize_s16_params) == 5 * 4, "requantize_s16 params layout");
_Static_assert(sizeof(mcu_pool2d_s16_params) == 16 * 4, "pool2d_s16 params layout");
_Static_assert(sizeof(mcu_depthwise_conv2d_s16_params) == 19 * 4, "depthwise_conv2d_s16 params layout");
/* (mcu_program_need_depthwise reads ch_mult, kernel_h and kernel_w where the int8 struct has them) */
_Static_assert(offsetof(mcu_depthwise_conv2d_s16_params, kernel_w) ==
                   offsetof(mcu_depthwise_conv2d_s8_params, kernel_w),
               "depthwise_conv2d_s16 params layout");
_Static_assert(sizeof(mcu_binary_s8_params) == 31 * 4, "binary_s8 params layout");
_Static_assert(sizeof(mcu_pool2d_s8_params) == 16 * 4, "pool2d_s8 params layout");
_Static_assert(sizeof(mcu_mean_hw_s8_params) == 10 * 4, "mean_hw_s8 params layout");
_Static_assert(sizeof(mcu_softmax_s8_params) == 6 * 4, "softmax_s8 params layout");
_Static_assert(sizeof(mcu_softmax_masked_s8_params) == 7 * 4, "softmax_masked_s8 params layout");
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
_Static_assert(sizeof(mcu_lstm_s16_params) == 11 * 4, "lstm_s16 params layout");
_Static_assert(sizeof(mcu_gru_s16_params) == 10 * 4, "gru_s16 params layout");
_Static_assert(sizeof(mcu_prelu_s8_params) == 11 * 4, "prelu_s8 params layout");
_Static_assert(sizeof(mcu_log_softmax_s8_params) == 6 * 4, "log_softmax_s8 params layout");

/* MCU_PROGRAM_ROW(kept, ...) is the row when the build keeps the kernel, nothing otherwise: the check
 * functions of a kernel left out are not linked. */
#define MCU_PROGRAM_ROW(kept, ...) MCU_PROGRAM_ROW_(kept, __VA_ARGS__)
#define MCU_PROGRAM_ROW_(kept, ...) MCU_PROGRAM_ROW_##kept(__VA_ARGS__)
#define MCU_PROGRAM_ROW_1(...) {__VA_ARGS__},
#define MCU_PROGRAM_ROW_0(...)

/* The kept kernels' rows, then an end row (id 0, which names no kernel). The loader finds a kernel's row
 * by its id: a search at load time only, cheaper in flash than a table indexed by id. */
static const mcu_program_kernel_row ROWS[] = {
#define MCU_KERNEL(name, id, n_params, operands, weights, need, params, alias, ...)                                  \
    MCU_PROGRAM_ROW(MCU_PROGRAM_KEPT(name), operands, mcu_program_need_##need, mcu_program_params_##params,          \
                    mcu_program_alias_##alias, n_params, weights, id)
#include "mcu_kernels.def"
#undef MCU_KERNEL
    {"", NULL, NULL, NULL, 0, 0, 0},
};
_Static_assert(MCU_K_COUNT <= 256, "a kernel id is one byte in a row");

/* Element counts saturate at CAP, above any tensor the verifier accepts
 * (INT32_MAX bytes), so a saturated count never fits an operand. */
#define CAP 0xFFFFFFFFu

MCU_PROGRAM_SHARED static uint32_t mulcap(uint32_t a, int32_t b)
{
    const uint64_t r = (uint64_t)a * (uint32_t)(b < 0 ? 0x7FFFFFFF : b);
    return b < 0 || r > CAP ? CAP : (uint32_t)r;
}

MCU_PROGRAM_SHARED static uint32_t prod(const int32_t *dims, int32_t n)
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

/* Bytes of `count` 4-bit weights two a byte (a saturated count stays saturated). */
static uint32_t s4_bytes(uint32_t count)
{
    return count == CAP ? CAP : ceil_div(count, 2u);
}

/* Elements a strided operand spans: 1 + sum((shape - 1) * stride). */
MCU_PROGRAM_SHARED static uint32_t extent(const int32_t *shape, const int32_t *strides, int32_t rank)
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

mcu_status mcu_program_need_conv(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                 uint32_t *need)
{
    /* conv2d (f32, int8, 1x1, grouped) and the transposed convolutions: the same params, operands and
     * weight shape */
    (void)ops;
    const uint32_t last = n_ops - 1;
    /* The scratch: only the 1x1 kernel takes one (a pixel's outputs); the others ignore it. */
    MCU_REQUIRE(p[16] > 0, MCU_ERR_PROGRAM_INVALID);
    const int32_t w[4] = {p[7], p[8], p[9], p[3] / p[16]};
    need[0] = prod(p, 4);
    need[1] = kernel == MCU_K_CONV2D_S4 ? s4_bytes(prod(w, 4)) : prod(w, 4);
    need[2] = need[3] = need[4] = mulcap(1, p[7]);
    need[5] = kernel == MCU_K_CONV2D_1X1_S8 ? mulcap(1, p[7]) : 0;
    need[last] = prod(p + 4, 4);
    return MCU_OK;
}

mcu_status mcu_program_need_conv_s16(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                     uint32_t *need)
{
    /* the 16x8 convolution: one group, weights OHWI, no scratch */
    (void)kernel;
    (void)ops;
    const uint32_t last = n_ops - 1;
    const int32_t w[4] = {p[7], p[8], p[9], p[3]};
    need[0] = prod(p, 4);
    need[1] = prod(w, 4);
    need[2] = need[3] = need[4] = mulcap(1, p[7]);
    need[last] = prod(p + 4, 4);
    return MCU_OK;
}

mcu_status mcu_program_need_conv_grouped_s16(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                             const int32_t *p, uint32_t *need)
{
    /* the grouped 16x8 convolutions: weights OHWI with a group's input channels (p[18] groups), no scratch */
    (void)kernel;
    (void)ops;
    MCU_REQUIRE(p[18] > 0, MCU_ERR_PROGRAM_INVALID);
    const uint32_t last = n_ops - 1;
    const int32_t w[4] = {p[7], p[8], p[9], p[3] / p[18]};
    need[0] = prod(p, 4);
    need[1] = prod(w, 4);
    need[2] = need[3] = need[4] = mulcap(1, p[7]);
    need[last] = prod(p + 4, 4);
    return MCU_OK;
}

mcu_status mcu_program_need_same_count(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                       uint32_t *need)
{
    /* params[0] elements in every operand (the 16x8 add: no broadcasting) */
    (void)kernel;
    (void)ops;
    for (uint32_t i = 0; i < n_ops; ++i) {
        need[i] = mulcap(1, p[0]);
    }
    return MCU_OK;
}

mcu_status mcu_program_need_depthwise(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                      uint32_t *need)
{
    (void)ops;
    const uint32_t last = n_ops - 1;
    const int32_t w[3] = {p[9], p[10], p[7]};
    need[0] = prod(p, 4);
    need[1] = kernel == MCU_K_DEPTHWISE_CONV2D_S4 ? s4_bytes(prod(w, 3)) : prod(w, 3);
    need[2] = need[3] = need[4] = mulcap(1, p[7]);
    need[last] = prod(p + 4, 4);
    if (kernel == MCU_K_DEPTHWISE_CONV2D_S8_INPLACE && need[0] > need[last]) {
        need[last] = need[0]; /* the output's memory is also the input */
    }
    if (kernel == MCU_K_DEPTHWISE_CONV2D_S8_INPLACE) { /* the scratch: a ring of pad_top + 1 input rows */
        need[5] = p[13] >= 0 && p[13] < INT32_MAX ? mulcap(mulcap(mulcap(1, p[2]), p[3]), p[13] + 1) : CAP;
    }
    return MCU_OK;
}

mcu_status mcu_program_need_linear(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                   uint32_t *need)
{
    (void)ops;
    const uint32_t last = n_ops - 1;
    need[0] = prod(p, 2);
    need[1] = kernel == MCU_K_LINEAR_S4 ? s4_bytes(prod(p + 1, 2)) : prod(p + 1, 2);
    need[2] = need[3] = need[4] = mulcap(1, p[2]);
    need[last] = mulcap(mulcap(1, p[0]), p[2]);
    return MCU_OK;
}

mcu_status mcu_program_need_palette(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                    uint32_t *need)
{
    /* [in, indices, bias?, multipliers, shifts, scratch, tables, out]: the palette word is the word after
     * the int8 (or 16x8) kernel's params; the scratch is required. */
    (void)n_ops;
    const int s16 = kernel == MCU_K_CONV2D_LUT_S16 || kernel == MCU_K_DEPTHWISE_CONV2D_LUT_S16 ||
                    kernel == MCU_K_LINEAR_LUT_S16;
    const int linear = kernel == MCU_K_LINEAR_LUT_S8 || kernel == MCU_K_LINEAR_LUT_S16;
    const int depthwise = kernel == MCU_K_DEPTHWISE_CONV2D_LUT_S8 || kernel == MCU_K_DEPTHWISE_CONV2D_LUT_S16;
    const int32_t word = linear ? p[s16 ? 5 : 7] : depthwise && s16 ? p[19] : s16 ? p[18] : p[21];
    const int32_t bits = word & ~MCU_LUT_SHARED;
    MCU_REQUIRE(bits >= 2 && bits <= 4 && ops[5].present && (s16 || linear || depthwise || p[16] > 0),
                MCU_ERR_PROGRAM_INVALID);
    const int32_t conv_taps[3] = {p[8], p[9], s16 || linear || depthwise ? p[3] : p[3] / p[16]};
    const uint32_t channels = linear ? mulcap(1, p[2]) : mulcap(1, p[7]);
    const uint32_t taps = linear ? mulcap(1, p[1]) : depthwise ? prod(p + 9, 2) : prod(conv_taps, 3);
    const uint32_t row_bytes = taps == CAP ? CAP : ceil_div(mulcap(taps, bits), 8u);
    const int32_t n_channels = channels > 0x7FFFFFFFu ? -1 : (int32_t)channels;
    need[0] = linear ? prod(p, 2) : prod(p, 4);
    need[1] = mulcap(row_bytes, n_channels);
    need[2] = need[3] = need[4] = channels;
    /* the scratch: the whole tensor for the depthwise and 16x8 convolutions, else one channel's taps */
    need[5] = depthwise || (s16 && !linear) ? (taps == CAP ? CAP : mulcap(taps, n_channels)) : taps;
    need[6] = word & MCU_LUT_SHARED ? 1u << bits : mulcap(channels, 1 << bits);
    need[7] = linear ? mulcap(mulcap(1, p[0]), p[2]) : prod(p + 4, 4);
    return MCU_OK;
}

mcu_status mcu_program_need_linear_scaled(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                          const int32_t *p, uint32_t *need)
{
    (void)ops;
    const uint32_t last = n_ops - 1;
    /* [scratch,] input, weight, w_scale, bias, output; the scratch holds the input as int8. */
    const uint32_t k = kernel == MCU_K_LINEAR_DYN_S8;
    need[0] = k ? prod(p, 2) : 0;
    need[k] = prod(p, 2);
    need[k + 1] = prod(p + 1, 2);
    need[k + 2] = need[k + 3] = mulcap(1, p[2]);
    need[last] = mulcap(mulcap(1, p[0]), p[2]);
    return MCU_OK;
}

mcu_status mcu_program_need_pool(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                 uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = prod(p, 4);
    need[1] = prod(p + 4, 4);
    return MCU_OK;
}

mcu_status mcu_program_need_mean_hw_f32(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                        uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = prod(p, 4);
    need[1] = mulcap(mulcap(1, p[0]), p[3]);
    return MCU_OK;
}

mcu_status mcu_program_need_binary(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                   uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
    need[0] = extent(p + 1, p + 7, p[0]);
    need[1] = extent(p + 1, p + 13, p[0]);
    need[2] = prod(p + 1, p[0]);
    return MCU_OK;
}

mcu_status mcu_program_need_softmax(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                    uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = need[1] = prod(p, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_softmax_masked(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                           const int32_t *p, uint32_t *need)
{
    /* [hidden, in, out]: mask_rows rows of the axis, then outer rows of it (the 16x8 params have no diff_min) */
    (void)ops;
    (void)n_ops;
    const int32_t mask_rows = p[kernel == MCU_K_SOFTMAX_MASKED_S16 ? 5 : 6];
    need[0] = mulcap(mask_rows > 0 ? (uint32_t)mask_rows : 0u, p[1]);
    need[1] = need[2] = prod(p, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_batch_norm_f32(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                           const int32_t *p, uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = need[1] = mulcap(1, p[1]);
    need[2] = need[3] = prod(p, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_lut_s8(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                   uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = 256;
    need[1] = need[2] = mulcap(1, p[0]);
    return MCU_OK;
}

mcu_status mcu_program_need_lut_s16(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                    uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = MCU_LUT_S16_ENTRIES;
    need[1] = need[2] = mulcap(1, p[0]);
    return MCU_OK;
}

mcu_status mcu_program_need_permute_slice(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                          const int32_t *p, uint32_t *need)
{
    /* slice: in_shape, then out_shape; the kernel keeps every index inside in_shape */
    (void)ops;
    (void)n_ops;
    MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
    need[0] = prod(p + 1, p[0]);
    need[1] = prod(p + (kernel == MCU_K_SLICE ? 7 : 1), p[0]);
    return MCU_OK;
}

mcu_status mcu_program_need_pad(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                uint32_t *need)
{
    (void)kernel;
    (void)ops;
    (void)n_ops;
    MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS, MCU_ERR_PROGRAM_INVALID);
    uint32_t out_count = 1;
    for (int32_t i = 0; i < p[0]; ++i) {
        const int64_t dim = (int64_t)p[1 + i] + p[7 + i] + p[13 + i];
        MCU_REQUIRE(p[7 + i] >= 0 && p[13 + i] >= 0 && dim <= INT32_MAX, MCU_ERR_PROGRAM_INVALID);
        out_count = mulcap(out_count, (int32_t)dim);
    }
    need[0] = prod(p + 1, p[0]);
    need[1] = out_count;
    return MCU_OK;
}

mcu_status mcu_program_need_concat(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                   uint32_t *need)
{
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
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
    return MCU_OK;
}

mcu_status mcu_program_need_linear_w4(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                      uint32_t *need)
{
    /* [scratch,] batch, in, out, group_size: two weights a byte, a scale per group */
    (void)ops;
    const uint32_t last = n_ops - 1;
    const uint32_t k = kernel == MCU_K_LINEAR_W4_S8; /* the scratch: the input row as int16 */
    MCU_REQUIRE(p[3] > 0 && p[3] % 2 == 0 && p[1] > 0 && p[1] % p[3] == 0, MCU_ERR_PROGRAM_INVALID);
    need[0] = k ? mulcap(2, p[1]) : 0;
    need[k] = prod(p, 2);
    need[k + 1] = mulcap(mulcap(1, p[2]), p[1] / 2);
    need[k + 2] = mulcap(mulcap(1, p[2]), p[1] / p[3]);
    need[k + 3] = mulcap(1, p[2]);
    need[last] = mulcap(mulcap(1, p[0]), p[2]);
    return MCU_OK;
}

mcu_status mcu_program_need_compare(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                    uint32_t *need)
{
    /* rank, out_shape, a_strides, b_strides, cmp, type */
    (void)kernel;
    (void)n_ops;
    static const uint32_t TYPES[4] = {MCU_DTYPE_FLOAT32, MCU_DTYPE_INT32, MCU_DTYPE_INT8, MCU_DTYPE_UINT8};
    MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS && p[20] >= 0 && p[20] <= 3, MCU_ERR_PROGRAM_INVALID);
    MCU_REQUIRE(ops[0].dtype == TYPES[p[20]] && ops[1].dtype == TYPES[p[20]], MCU_ERR_PROGRAM_INVALID);
    need[0] = extent(p + 1, p + 7, p[0]);
    need[1] = extent(p + 1, p + 13, p[0]);
    need[2] = prod(p + 1, p[0]);
    return MCU_OK;
}

mcu_status mcu_program_need_where(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                  uint32_t *need)
{
    /* rank, out_shape, c_strides, a_strides, b_strides, element size */
    (void)kernel;
    const mcu_operand_desc *out = &ops[n_ops - 1];
    MCU_REQUIRE(p[0] >= 1 && p[0] <= MCU_MAX_DIMS && p[25] == (int32_t)mcu_dtype_size(out->dtype),
                MCU_ERR_PROGRAM_INVALID);
    need[0] = extent(p + 1, p + 7, p[0]);
    need[1] = extent(p + 1, p + 13, p[0]);
    need[2] = extent(p + 1, p + 19, p[0]);
    need[3] = prod(p + 1, p[0]);
    return MCU_OK;
}

mcu_status mcu_program_need_embedding(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                      uint32_t *need)
{
    /* rows, cols, count, element size */
    (void)kernel;
    const mcu_operand_desc *out = &ops[n_ops - 1];
    MCU_REQUIRE(p[3] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
    need[0] = mulcap(1, p[2]);
    need[1] = prod(p, 2);
    need[2] = prod(p + 1, 2);
    return MCU_OK;
}

mcu_status mcu_program_need_embedding_s8_f32(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                             const int32_t *p, uint32_t *need)
{
    /* rows, cols, count */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = mulcap(1, p[2]);
    need[1] = prod(p, 2);
    need[2] = mulcap(1, p[0]);
    need[3] = prod(p + 1, 2);
    return MCU_OK;
}

mcu_status mcu_program_need_index_put(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                      uint32_t *need)
{
    /* outer, axis, inner, count, element size */
    (void)kernel;
    const uint32_t last = n_ops - 1;
    const mcu_operand_desc *out = &ops[last];
    const int32_t values[3] = {p[0], p[3], p[2]};
    MCU_REQUIRE(p[4] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
    need[0] = mulcap(1, p[3]);
    need[1] = prod(values, 3);
    need[last] = prod(p, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_layer_norm(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                       uint32_t *need)
{
    /* rows, cols */
    (void)ops;
    const uint32_t last = n_ops - 1;
    need[0] = need[last] = prod(p, 2);
    need[1] = need[2] = mulcap(1, p[1]);
    need[3] = kernel == MCU_K_LAYER_NORM_S8 || kernel == MCU_K_LAYER_NORM_S16 ? mulcap(1, p[1]) : need[0];
    return MCU_OK;
}

mcu_status mcu_program_need_rms_norm_f32(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                         uint32_t *need)
{
    /* rows, cols */
    (void)kernel;
    (void)ops;
    const uint32_t last = n_ops - 1;
    need[0] = need[last] = prod(p, 2);
    need[1] = mulcap(1, p[1]);
    return MCU_OK;
}

mcu_status mcu_program_need_group_norm_f32(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                           const int32_t *p, uint32_t *need)
{
    /* batch, channels, spatial */
    (void)kernel;
    (void)ops;
    const uint32_t last = n_ops - 1;
    need[0] = need[last] = prod(p, 3);
    need[1] = need[2] = mulcap(1, p[1]);
    return MCU_OK;
}

mcu_status mcu_program_need_bmm(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                uint32_t *need)
{
    /* batch, m, k, n, a_batch_stride, b_batch_stride */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    MCU_REQUIRE(p[0] >= 1 && p[4] >= 0 && p[5] >= 0, MCU_ERR_PROGRAM_INVALID);
    const uint64_t a = (uint64_t)mulcap((uint32_t)p[0] - 1u, p[4]) + prod(p + 1, 2);
    const uint64_t b = (uint64_t)mulcap((uint32_t)p[0] - 1u, p[5]) + prod(p + 2, 2);
    const int32_t out_dims[3] = {p[0], p[1], p[3]};
    need[0] = a > CAP ? CAP : (uint32_t)a;
    need[1] = b > CAP ? CAP : (uint32_t)b;
    need[2] = prod(out_dims, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_reduce(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                   uint32_t *need)
{
    /* outer, reduce, inner */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = prod(p, 3);
    need[1] = mulcap(mulcap(1, p[0]), p[2]);
    return MCU_OK;
}

mcu_status mcu_program_need_log_softmax_s8(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                           const int32_t *p, uint32_t *need)
{
    /* the table, then in and out */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = 256;
    need[1] = need[2] = prod(p, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_prelu(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                  uint32_t *need)
{
    /* size, channels, inner */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = need[2] = mulcap(1, p[0]);
    need[1] = mulcap(1, p[1]);
    return MCU_OK;
}

mcu_status mcu_program_need_remap_gather(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                         uint32_t *need)
{
    /* remap: rank, in_shape[6], out_shape[6], element size; tables: one entry per output index.
     * gather: rank, in_shape[6], out_shape[6] (the index's), dim, element size */
    const mcu_operand_desc *out = &ops[n_ops - 1];
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
    return MCU_OK;
}

mcu_status mcu_program_need_index_select(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                         uint32_t *need)
{
    /* outer, axis, inner, count, element size */
    (void)kernel;
    const mcu_operand_desc *out = &ops[n_ops - 1];
    const int32_t out_dims[3] = {p[0], p[3], p[2]};
    MCU_REQUIRE(p[4] == (int32_t)mcu_dtype_size(out->dtype), MCU_ERR_PROGRAM_INVALID);
    need[0] = mulcap(1, p[3]);
    need[1] = prod(p, 3);
    need[2] = prod(out_dims, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_resample(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                     uint32_t *need)
{
    /* outer, in_h, in_w, out_h, out_w, inner */
    (void)ops;
    (void)n_ops;
    const int32_t in_dims[4] = {p[0], p[1], p[2], p[5]};
    const int32_t out_dims[4] = {p[0], p[3], p[4], p[5]};
    MCU_REQUIRE(p[3] >= 1 && p[4] >= 1 && p[3] <= INT32_MAX / 8 && p[4] <= INT32_MAX / 8, MCU_ERR_PROGRAM_INVALID);
    const uint32_t axes = (uint32_t)p[3] + (uint32_t)p[4];
    uint32_t k = 0;
    if (kernel == MCU_K_RESIZE_BILINEAR_F32) { /* (i0, i1) and (1 - l, l) per row and column */
        need[0] = need[1] = 2u * axes;
        k = 2;
    } else if (kernel == MCU_K_RESIZE_BILINEAR_S8 || kernel == MCU_K_RESIZE_BILINEAR_S16) { /* (i0, i1, f) each */
        need[0] = 3u * axes;
        k = 1;
    }
    need[k] = prod(in_dims, 4);
    need[k + 1] = prod(out_dims, 4);
    return MCU_OK;
}

mcu_status mcu_program_need_recurrent(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                      uint32_t *need)
{
    /* batch, steps, input_size, hidden, ... */
    (void)ops;
    (void)n_ops;
    const int lstm = kernel == MCU_K_LSTM_S8 || kernel == MCU_K_LSTM_S4;
    const int s4 = kernel == MCU_K_LSTM_S4 || kernel == MCU_K_GRU_S4;
    const int32_t rows = lstm ? 4 : 3;
    const int32_t in_dims[3] = {p[0], p[1], p[2]};
    const int32_t out_dims[3] = {p[0], p[1], p[3]};
    need[0] = mulcap(lstm ? 13u : 11u, p[3]) + mulcap(2u, p[2]); /* < 2^17 once checked */
    need[1] = prod(in_dims, 3);
    need[2] = mulcap(mulcap((uint32_t)rows, p[3]), p[2]);
    need[3] = mulcap(mulcap((uint32_t)rows, p[3]), p[3]);
    if (s4) {
        need[2] = s4_bytes(need[2]);
        need[3] = s4_bytes(need[3]);
    }
    need[4] = mulcap(6u * (uint32_t)rows, p[3]);
    need[5] = MCU_RECURRENT_S8_TABLE_SIZE;
    need[6] = prod(out_dims, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_lstm_final_cell_s8(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                               const int32_t *p, uint32_t *need)
{
    /* the int8 LSTM's operands, its hidden states [batch][steps][hidden] read, the cell [batch][hidden] written */
    const int32_t cell_dims[2] = {p[0], p[3]};
    MCU_CHECK(mcu_program_need_recurrent(kernel == MCU_K_LSTM_FINAL_CELL_S4 ? MCU_K_LSTM_S4 : MCU_K_LSTM_S8, ops,
                                         n_ops, p, need));
    need[7] = prod(cell_dims, 2);
    return MCU_OK;
}

mcu_status mcu_program_need_gru_from_s8(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                       uint32_t *need)
{
    /* the int8 GRU's operands, the state [batch][hidden] read before the output */
    (void)kernel;
    const int32_t state_dims[2] = {p[0], p[3]};
    MCU_CHECK(mcu_program_need_recurrent(MCU_K_GRU_S8, ops, n_ops, p, need));
    need[7] = need[6];
    need[6] = prod(state_dims, 2);
    return MCU_OK;
}

mcu_status mcu_program_need_lstm_s16(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                     uint32_t *need)
{
    /* batch, steps, input_size, hidden, ...: the scratch bytes (mcu_lstm_s16_get_buffer_size,
     * mcu_lstm_final_cell_s16_get_buffer_size), the operands; the final cell reads the hidden states after the
     * input and writes [batch][hidden] */
    (void)ops;
    (void)n_ops;
    const uint32_t k = kernel == MCU_K_LSTM_FINAL_CELL_S16;
    const int32_t in_dims[3] = {p[0], p[1], p[2]};
    const int32_t out_dims[3] = {p[0], p[1], p[3]};
    const int32_t state_dims[2] = {p[0], p[3]};
    need[0] = mulcap(k ? 2u : 4u, p[3]) + mulcap(2u, p[2]); /* < 2^15 once checked */
    need[1] = prod(in_dims, 3);
    need[2] = prod(out_dims, 3);
    need[2 + k] = need[3 + k] = prod(state_dims, 2);
    need[4 + k] = mulcap(mulcap(4u, p[3]), p[2]);
    need[5 + k] = mulcap(mulcap(4u, p[3]), p[3]);
    need[6 + k] = mulcap(4u, p[3]);
    need[7 + k] = mulcap(16u, p[3]);
    need[8 + k] = k ? prod(state_dims, 2) : prod(out_dims, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_gru_s16(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                    uint32_t *need)
{
    /* batch, steps, input_size, hidden, ...: the scratch bytes (mcu_gru_s16_get_buffer_size), the operands */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    const int32_t in_dims[3] = {p[0], p[1], p[2]};
    const int32_t out_dims[3] = {p[0], p[1], p[3]};
    const int32_t state_dims[2] = {p[0], p[3]};
    need[0] = mulcap(2u, p[3]) + mulcap(2u, p[2]); /* < 2^15 once checked */
    need[1] = prod(in_dims, 3);
    need[2] = prod(state_dims, 2);
    need[3] = mulcap(mulcap(3u, p[3]), p[2]);
    need[4] = mulcap(mulcap(3u, p[3]), p[3]);
    need[5] = mulcap(4u, p[3]);
    need[6] = mulcap(12u, p[3]);
    need[7] = prod(out_dims, 3);
    return MCU_OK;
}

mcu_status mcu_program_need_elementwise(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *p,
                                        uint32_t *need)
{
    /* the elementwise kernels (and mcu_unary_f32): params[0] is the element count */
    (void)kernel;
    (void)ops;
    (void)n_ops;
    need[0] = need[1] = mulcap(1, p[0]);
    return MCU_OK;
}

mcu_status mcu_program_check_kernel(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                    const int32_t *p, uint32_t n_params)
{
    MCU_REQUIRE(kernel != 0 && kernel < MCU_K_COUNT && n_ops >= 2 && n_ops <= MCU_PROGRAM_MAX_OPERANDS,
                MCU_ERR_PROGRAM_INVALID);
    const mcu_program_kernel_row *row = ROWS;
    while (row->id != 0 && row->id != kernel) {
        ++row;
    }
    MCU_REQUIRE(row->id != 0, MCU_ERR_UNSUPPORTED);
    const char *sig = row->sig;
    uint32_t sig_len = 0; /* the operand count */
    while (sig[sig_len] != '\0') {
        ++sig_len;
    }
    const int concat = kernel == MCU_K_CONCAT;
    MCU_REQUIRE(concat ? n_params == n_ops : (n_params == row->n_params && n_ops == sig_len),
                MCU_ERR_PROGRAM_INVALID);
    const mcu_operand_desc *out = &ops[n_ops - 1];
    MCU_REQUIRE(out->present && !out->constant, MCU_ERR_PROGRAM_INVALID);
    for (uint32_t i = 0; i < n_ops; ++i) {
        const char c = concat ? 'X' : sig[i];
        if (!ops[i].present) {
            MCU_REQUIRE(c == 'f' || c == 'i' || c == 'b' || c == 'h' || c == 'l', MCU_ERR_PROGRAM_INVALID);
            continue;
        }
        if (c == '*') {
            continue; /* any dtype: the kernel's case below checks it */
        }
        const uint32_t want = (c == 'F' || c == 'f')   ? MCU_DTYPE_FLOAT32
                              : (c == 'B' || c == 'b') ? MCU_DTYPE_INT8
                              : (c == 'I' || c == 'i') ? MCU_DTYPE_INT32
                              : c == 'U'               ? MCU_DTYPE_UINT8
                              : (c == 'H' || c == 'h') ? MCU_DTYPE_INT16
                              : (c == 'L' || c == 'l') ? MCU_DTYPE_INT64
                                                       : out->dtype;
        MCU_REQUIRE(ops[i].dtype == want, MCU_ERR_PROGRAM_INVALID);
    }

    /* Elements each operand must hold for the kernel's accesses. */
    uint32_t need[MCU_PROGRAM_MAX_OPERANDS] = {0};
    MCU_CHECK(row->need(kernel, ops, n_ops, p, need));
    uint32_t bytes[MCU_PROGRAM_MAX_OPERANDS];
    for (uint32_t i = 0; i < n_ops; ++i) {
        MCU_REQUIRE(!ops[i].present || (uint64_t)need[i] * mcu_dtype_size(ops[i].dtype) <= ops[i].nbytes,
                    MCU_ERR_PROGRAM_INVALID);
        bytes[i] = ops[i].present ? need[i] * mcu_dtype_size(ops[i].dtype) : 0u;
    }
    MCU_CHECK(mcu_program_check_params(kernel, row, p, n_params));
    return mcu_program_check_operands(kernel, row, ops, bytes, n_ops, p);
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
#define MCU_KERNEL(name, id, n_params, operands, weights, need, params, alias, ...)                                  \
    MCU_PROGRAM_CASE(MCU_PROGRAM_KEPT(name), MCU_K_##name, __VA_ARGS__)
#include "mcu_kernels.def"
#undef MCU_KERNEL
    default: return MCU_ERR_UNSUPPORTED;
    }
}
