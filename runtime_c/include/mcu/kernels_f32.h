/**
 * @file kernels_f32.h
 * @brief Portable fp32 kernels. Layouts are physical: 4-D activations are
 *        NHWC, convolution weights are OHWI ([out_c][kh][kw][in_c/groups]),
 *        linear weights are [out_features][in_features].
 *
 * Every kernel validates its arguments and returns an mcu_status; none of
 * them allocates. Unless a kernel says otherwise its output must not overlap
 * its inputs.
 */
#ifndef MCU_KERNELS_F32_H
#define MCU_KERNELS_F32_H

#include <stdint.h>

#include "mcu/status.h"
#include "mcu/tensor.h"

/** Convolution parameters. Padding at the bottom/right is implied by the
 *  output size; padded input positions read as zero. */
typedef struct {
    mcu_shape4 input;   /**< NHWC */
    mcu_shape4 output;  /**< NHWC; output.n == input.n */
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t dilation_h, dilation_w;
    int32_t groups;     /**< input.c and output.c are multiples of groups */
    float act_min, act_max; /**< fused activation clamp; +-INFINITY for none */
} mcu_conv2d_f32_params;

/** 2-D convolution (general, grouped and depthwise). bias may be NULL. */
mcu_status mcu_conv2d_f32(const mcu_conv2d_f32_params *p, const float *input,
                          const float *weight, const float *bias, float *output);

typedef struct {
    int32_t batch;
    int32_t in_features;
    int32_t out_features;
    float act_min, act_max;
} mcu_linear_f32_params;

/** output[b][o] = clamp(bias[o] + sum_i input[b][i] * weight[o][i]). bias may be NULL. */
mcu_status mcu_linear_f32(const mcu_linear_f32_params *p, const float *input,
                          const float *weight, const float *bias, float *output);

/** Pooling window parameters shared by max and average pooling. */
typedef struct {
    mcu_shape4 input;   /**< NHWC */
    mcu_shape4 output;  /**< NHWC; same n and c as input */
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left, pad_bottom, pad_right;
    int32_t dilation_h, dilation_w; /**< max pooling only; 1 for average pooling */
    int32_t count_include_pad;      /**< average pooling: PyTorch's flag */
    int32_t divisor_override;       /**< average pooling: 0 for none */
    float act_min, act_max;
} mcu_pool2d_f32_params;

/** Max pooling; padded positions never win (PyTorch semantics). */
mcu_status mcu_max_pool2d_f32(const mcu_pool2d_f32_params *p, const float *input, float *output);

/** Average pooling with PyTorch's divisor rules (count_include_pad counts the
 *  window clipped to the padded input; otherwise only real input positions). */
mcu_status mcu_avg_pool2d_f32(const mcu_pool2d_f32_params *p, const float *input, float *output);

/** Mean over H and W of an NHWC tensor: output is [n][c]. */
mcu_status mcu_mean_hw_f32(const mcu_shape4 *input_shape, const float *input, float *output);

/** Broadcasting binary ops over a physical output shape. Strides are in
 *  elements, 0 where an operand is broadcast along that dimension. The output
 *  may alias an input whose strides equal the output's contiguous strides. */
typedef struct {
    int32_t rank;                      /**< 1..MCU_MAX_DIMS */
    int32_t out_shape[MCU_MAX_DIMS];
    int32_t a_strides[MCU_MAX_DIMS];
    int32_t b_strides[MCU_MAX_DIMS];
    float act_min, act_max;
} mcu_binary_f32_params;

mcu_status mcu_add_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output);
mcu_status mcu_sub_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output);
mcu_status mcu_mul_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output);
mcu_status mcu_div_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output);

/** Elementwise clamp (ReLU, ReLU6, hardtanh, clamp). May run in place. */
mcu_status mcu_clamp_f32(int32_t size, float min, float max, const float *input, float *output);
/** Elementwise logistic sigmoid. May run in place. */
mcu_status mcu_sigmoid_f32(int32_t size, const float *input, float *output);
/** Elementwise tanh. May run in place. */
mcu_status mcu_tanh_f32(int32_t size, const float *input, float *output);
/** x * relu6(x + 3) / 6. May run in place. */
mcu_status mcu_hardswish_f32(int32_t size, const float *input, float *output);

/** Softmax over the middle axis of a tensor viewed as [outer][axis][inner]. */
mcu_status mcu_softmax_f32(int32_t outer, int32_t axis, int32_t inner, const float *input, float *output);

/** Inference batch norm with precomputed per-channel scale and shift over a
 *  tensor viewed as [outer][channels][inner]. May run in place. */
mcu_status mcu_batch_norm_f32(int32_t outer, int32_t channels, int32_t inner, const float *scale,
                              const float *shift, const float *input, float *output);

/* --- more math, normalisation, reductions, products ------------------------------------------ */

mcu_status mcu_maximum_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output);
mcu_status mcu_minimum_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output);

/** The function of mcu_unary_f32 (values are part of the generated code's ABI: append only). */
typedef enum {
    MCU_UNARY_GELU = 0,        /**< x/2 (1 + erf(x / sqrt 2)) */
    MCU_UNARY_GELU_TANH = 1,   /**< the tanh approximation */
    MCU_UNARY_SILU = 2,
    MCU_UNARY_HARDSIGMOID = 3,
    MCU_UNARY_LEAKY_RELU = 4,  /**< alpha: negative slope */
    MCU_UNARY_ELU = 5,         /**< alpha */
    MCU_UNARY_SOFTPLUS = 6,    /**< alpha: threshold, beta */
    MCU_UNARY_EXP = 7,
    MCU_UNARY_LOG = 8,
    MCU_UNARY_SQRT = 9,
    MCU_UNARY_RSQRT = 10,
    MCU_UNARY_ABS = 11,
    MCU_UNARY_NEG = 12,
    MCU_UNARY_RECIPROCAL = 13,
    MCU_UNARY_ERF = 14,
    MCU_UNARY_POW = 15,        /**< x ** alpha */
    MCU_UNARY_LOG_SIGMOID = 16,
    MCU_UNARY_AFFINE = 17,     /**< x * alpha + beta (scalar add, sub, mul, div) */
    MCU_UNARY_RSUB = 18,       /**< beta - x * alpha */
    MCU_UNARY_MISH = 19,       /**< x tanh(softplus(x)) */
    MCU_UNARY_COUNT = 20
} mcu_unary_fn;

typedef struct {
    int32_t size;
    int32_t fn;         /**< mcu_unary_fn */
    float alpha, beta;  /**< the function's scalar parameters */
} mcu_unary_f32_params;

/** Elementwise math (mcu_unary_fn). May run in place. */
mcu_status mcu_unary_f32(const mcu_unary_f32_params *p, const float *input, float *output);

typedef struct {
    int32_t rows, cols;  /**< normalise each row of `cols` contiguous values */
    float eps;
} mcu_layer_norm_f32_params;

/** Layer normalisation of each row, then * weight + bias (each may be NULL). May run in place. */
mcu_status mcu_layer_norm_f32(const mcu_layer_norm_f32_params *p, const float *input, const float *weight,
                              const float *bias, float *output);

typedef struct {
    int32_t batch, m, k, n;
    int32_t a_batch_stride, b_batch_stride;  /**< elements between batches; 0 broadcasts */
} mcu_bmm_f32_params;

/** out[b] = a[b] @ b[b]. The output must not overlap an operand. */
mcu_status mcu_bmm_f32(const mcu_bmm_f32_params *p, const float *a, const float *b, float *output);

typedef enum {
    MCU_REDUCE_SUM = 0,
    MCU_REDUCE_MEAN = 1,
    MCU_REDUCE_MAX = 2,
    MCU_REDUCE_MIN = 3,
    MCU_REDUCE_COUNT = 4
} mcu_reduce_op;

typedef struct {
    int32_t outer, reduce, inner;
    int32_t op;  /**< mcu_reduce_op */
} mcu_reduce_f32_params;

/** Reduce the middle axis of [outer, reduce, inner]. The output must not overlap the input. */
mcu_status mcu_reduce_f32(const mcu_reduce_f32_params *p, const float *input, float *output);

/* --- normalisation, reductions and int8 activations ------------------------------------------ */

typedef struct {
    int32_t batch, channels, spatial;  /**< [batch, channels, spatial] logical shape */
    int32_t groups;                    /**< channels % groups == 0 */
    int32_t channels_last;             /**< 1: memory [batch, spatial, channels]; 0: [batch, channels, spatial] */
    float eps;
} mcu_group_norm_f32_params;

/** Group normalisation (torch's native_group_norm; instance norm with groups == channels): each
 * (batch, group) normalised over its channels and spatial positions (biased variance), then
 * * weight[c] + bias[c] (each may be NULL). May run in place. */
mcu_status mcu_group_norm_f32(const mcu_group_norm_f32_params *p, const float *input, const float *weight,
                              const float *bias, float *output);

typedef struct {
    int32_t outer, reduce, inner;
    float divisor;  /**< max(0, reduce - correction), from aten.var.correction */
} mcu_var_f32_params;

/** Variance of the middle axis of [outer, reduce, inner] (two passes: mean, then squared differences).
 * The output must not overlap the input. */
mcu_status mcu_var_f32(const mcu_var_f32_params *p, const float *input, float *output);

/** Index of the largest value along the middle axis of [outer, reduce, inner] (the first one on ties;
 * a NaN counts as the largest, as in torch.argmax). The output must not overlap the input. */
mcu_status mcu_argmax_f32(int32_t outer, int32_t reduce, int32_t inner, const float *input, int32_t *output);

/** log_softmax along the middle axis of [outer, axis, inner]. May run in place. */
mcu_status mcu_log_softmax_f32(int32_t outer, int32_t axis, int32_t inner, const float *input, float *output);

typedef struct {
    int32_t size;
    int32_t channels;  /**< weight entries; 1 shares one slope */
    int32_t inner;     /**< elements between consecutive channels in memory (1: channels last) */
} mcu_prelu_f32_params;

/** PReLU: x > 0 ? x : weight[(i / inner) % channels] * x. May run in place. */
mcu_status mcu_prelu_f32(const mcu_prelu_f32_params *p, const float *input, const float *weight, float *output);
/* --- resampling ---------------------------------------------------------------------------------- */

/** A tensor seen as [outer][h][w][inner]: NCHW is outer = N*C, inner = 1; NHWC is outer = N, inner = C. */
typedef struct {
    int32_t outer, in_h, in_w, out_h, out_w, inner;
} mcu_resample_f32_params;

/**
 * Bilinear resize with the source rows and columns the compiler computed (align_corners and the
 * scale as PyTorch defines them): `index` holds (y0, y1) for each output row, then (x0, x1) for each
 * output column; `lambda` holds (1 - ly, ly) for each row, then (1 - lx, lx) for each column, and
 *   out = (1-ly) * ((1-lx) * in[y0][x0] + lx * in[y0][x1]) + ly * ((1-lx) * in[y1][x0] + lx * in[y1][x1]).
 * Indices are checked before anything is written. No overlap.
 */
mcu_status mcu_resize_bilinear_f32(const mcu_resample_f32_params *p, const int32_t *index, const float *lambda,
                                   const float *input, float *output);

/** Adaptive average pooling: output cell (i, j) averages rows [floor(i*in_h/out_h), ceil((i+1)*in_h/out_h))
 *  and the columns alike (aten._adaptive_avg_pool2d). No overlap. */
mcu_status mcu_adaptive_avg_pool_f32(const mcu_resample_f32_params *p, const float *input, float *output);

/** RMS normalisation of each row (torch's rms_norm): x * rsqrt(mean(x^2) + eps) * weight (weight may be
 * NULL). Params as layer norm's. May run in place. */
mcu_status mcu_rms_norm_f32(const mcu_layer_norm_f32_params *p, const float *input, const float *weight,
                            float *output);
/* --- convolutions: transposed convolution ---------------------------------------------------- */

/** Transposed convolution (ConvTranspose2d; ConvTranspose1d as H == 1) with the convolution's
 *  params: pad_top/pad_left are the transposed convolution's padding, the output size implies
 *  output_padding. Weights OHWI [out_c][kh][kw][in_c/groups]; bias may be NULL. The output must
 *  not overlap any operand. */
mcu_status mcu_conv_transpose2d_f32(const mcu_conv2d_f32_params *p, const float *input, const float *weight,
                                    const float *bias, float *output);

#endif /* MCU_KERNELS_F32_H */
