/**
 * @file kernels_s16.h
 * @brief int16 activations with int8 weights (16x8), the arithmetic of CMSIS-NN's and TFLite Micro's s16
 * kernels.
 *
 * Activations are symmetric per-tensor int16 (zero point 0, so no offsets); weights symmetric int8 per
 * output channel; biases int64 with scale s_in * s_w[c]; products are accumulated in 64 bits.
 * Requantization (mcu/reference/s16.py mirrors it): the Q31 multiplier of kernels_s8.h is reduced to
 * Q15, r = (multiplier < 0x7FFF0000) ? (multiplier + 2^15) >> 16 : 0x7FFF, then
 *   y = (int32)((acc * r) >> (14 - shift));  y = (y + 1) >> 1
 * which needs shift in [-31, 14]. Outputs are clamped to [act_min, act_max] within int16.
 */
#ifndef MCU_KERNELS_S16_H
#define MCU_KERNELS_S16_H

#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "mcu/status.h"

typedef struct {
    int32_t batch, in_features, out_features;
    int32_t act_min, act_max;
} mcu_linear_s16_params;

/** Fully connected, weights [out][in], per-output-channel requantization; bias may be NULL. The output
 * overlaps neither the input nor a constant. */
mcu_status mcu_linear_s16(const mcu_context *ctx, const mcu_linear_s16_params *p, const mcu_per_channel_quant *q,
                          const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output);
int32_t mcu_linear_s16_get_buffer_size(const mcu_linear_s16_params *p);

/** mcu_linear_s16 with the weights widened to int16 at build time (twice their flash, for DSP cores), in
 * the packed order of runtime_c/kernels/common/dot_packed_s16.h as int32 words (mcu/backends/optimized/packed16.py
 * makes it). Same outputs, bit for bit; no scratch. */
mcu_status mcu_linear_packed_s16(const mcu_context *ctx, const mcu_linear_s16_params *p,
                                 const mcu_per_channel_quant *q, const int16_t *input, const int32_t *weight,
                                 const int64_t *bias, int16_t *output);

typedef struct {
    mcu_shape4 input;  /**< NHWC */
    mcu_shape4 output; /**< NHWC */
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left; /**< bottom/right implied by the output size */
    int32_t dilation_h, dilation_w;
    int32_t act_min, act_max;
} mcu_conv2d_s16_params;

/** Convolution (one group), weights OHWI [out_c][kh][kw][in_c], per-output-channel requantization; bias may
 * be NULL. The output overlaps neither the input nor a constant. */
mcu_status mcu_conv2d_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                          const int16_t *input, const int8_t *weight, const int64_t *bias, int16_t *output);
int32_t mcu_conv2d_s16_get_buffer_size(const mcu_conv2d_s16_params *p);

/** mcu_conv2d_s16 with packed int16 weights as mcu_linear_packed_s16's (rows: output channels, taps: the
 * OHWI window). A kernel larger than 1x1 needs the scratch of mcu_conv2d_s16_get_buffer_size, word aligned
 * (one window column). Same outputs, bit for bit. */
mcu_status mcu_conv2d_packed_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
                                 const mcu_per_channel_quant *q, const int16_t *input, const int32_t *weight,
                                 const int64_t *bias, int16_t *output);

/** Transposed convolution (one group; ours, as CMSIS-NN has no 16x8 one): TFLite's TRANSPOSE_CONV on int16 codes
 * (zero point 0) with weights OHWI [out_c][kh][kw][in_c]: every output pixel takes the exact 64-bit sum of the taps
 * that reach it (o = i * stride - pad + k * dilation) plus its int64 bias, then arm_convolve_s16's per-channel
 * requantization; bias may be NULL. The padding is the transposed one (the output's), the output size implies
 * output_padding. The output overlaps neither the input nor a constant. */
mcu_status mcu_conv_transpose2d_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
                                    const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                    const int64_t *bias, int16_t *output);
int32_t mcu_conv_transpose2d_s16_get_buffer_size(const mcu_conv2d_s16_params *p);
/** mcu_conv_transpose2d_s16 for dilation 1 with the weights packed by output phase (mcu/reference/conv.py,
 * phase_pack; as mcu_conv_transpose2d_phased_s8's): each phase's window one contiguous dot product per output
 * channel. Same outputs, bit for bit; no scratch. */
mcu_status mcu_conv_transpose2d_phased_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p,
                                           const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                           const int64_t *bias, int16_t *output);
int32_t mcu_conv_transpose2d_phased_s16_get_buffer_size(const mcu_conv2d_s16_params *p);

/** Adaptive average pooling of int16 codes [outer][in_h][in_w][inner] to [outer][out_h][out_w][inner] (ours, as
 * mcu_adaptive_avg_pool_s8 with arm_avgpool_s16's rounding; the output on the input's scale). The output must not
 * overlap the input. */
mcu_status mcu_adaptive_avg_pool_s16(const mcu_resample_s8_params *p, const int16_t *input, int16_t *output);

/** argmax of int16 codes along the middle axis of [outer, reduce, inner] (the first on ties): the argmax of the
 * real values, since dequantization is increasing (ours, mcu_argmax_s8's form). The output must not overlap the
 * input. */
mcu_status mcu_argmax_s16(int32_t outer, int32_t reduce, int32_t inner, const int16_t *input, int32_t *output);

typedef struct {
    mcu_conv2d_s16_params conv; /**< the window; conv.input.c and conv.output.c count every group's channels */
    int32_t groups;             /**< at least 1, dividing both channel counts */
} mcu_conv2d_grouped_s16_params;

/** Grouped convolution (ours: CMSIS-NN's arm_convolve_s8 takes groups, arm_convolve_s16 does not): output channel
 * oc of group g = oc / (out.c / groups) reads input channels [g * icg, (g + 1) * icg), icg = in.c / groups, with
 * weights OHWI [out_c][kh][kw][icg]; per output channel the exact 64-bit sum plus the int64 bias, then
 * arm_convolve_s16's requantization (as mcu_conv2d_s16 on each group's channels). Bias may be NULL; no scratch.
 * The output overlaps neither the input nor a constant. */
mcu_status mcu_conv2d_grouped_s16(const mcu_context *ctx, const mcu_conv2d_grouped_s16_params *p,
                                  const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                  const int64_t *bias, int16_t *output);
int32_t mcu_conv2d_grouped_s16_get_buffer_size(const mcu_conv2d_grouped_s16_params *p);

/** Grouped transposed convolution (ours): mcu_conv_transpose2d_s16 with the groups of mcu_conv2d_grouped_s16
 * (weights OHWI [out_c][kh][kw][icg], output channel oc gathering the taps of its group's input channels). Bias
 * may be NULL; no scratch. The output overlaps neither the input nor a constant. */
mcu_status mcu_conv_transpose2d_grouped_s16(const mcu_context *ctx, const mcu_conv2d_grouped_s16_params *p,
                                            const mcu_per_channel_quant *q, const int16_t *input,
                                            const int8_t *weight, const int64_t *bias, int16_t *output);
int32_t mcu_conv_transpose2d_grouped_s16_get_buffer_size(const mcu_conv2d_grouped_s16_params *p);

typedef struct {
    mcu_shape4 input;  /**< NHWC */
    mcu_shape4 output; /**< NHWC, output.c = input.c * ch_mult */
    int32_t ch_mult;
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left; /**< bottom/right implied by the output size */
    int32_t dilation_h, dilation_w;
    int32_t act_min, act_max;
} mcu_depthwise_conv2d_s16_params;

/** Depthwise convolution with CMSIS-NN's arm_depthwise_conv_s16 conventions: weights [kh][kw][out_c],
 * per-output-channel requantization; bias may be NULL. The output overlaps neither the input nor a constant. */
mcu_status mcu_depthwise_conv2d_s16(const mcu_context *ctx, const mcu_depthwise_conv2d_s16_params *p,
                                    const mcu_per_channel_quant *q, const int16_t *input, const int8_t *weight,
                                    const int64_t *bias, int16_t *output);
int32_t mcu_depthwise_conv2d_s16_get_buffer_size(const mcu_depthwise_conv2d_s16_params *p);

/* Look-up-table (palettized) weights with int16 activations (--weight-palette BITS --quantize w8a16): the
 * indices and tables of kernels_s8.h's look-up-table kernels (`word`: the index width, plus MCU_LUT_SHARED for
 * one table shared by every channel), decoded into the scratch (the _get_buffer_size bytes: the whole weight
 * tensor, overlapping nothing), then the 16x8 kernel's arithmetic and contracts on them. */
mcu_status mcu_conv2d_lut_s16(const mcu_context *ctx, const mcu_conv2d_s16_params *p, const mcu_per_channel_quant *q,
                              int32_t word, const int16_t *input, const uint8_t *indices, const int8_t *table,
                              const int64_t *bias, int16_t *output);
int32_t mcu_conv2d_lut_s16_get_buffer_size(const mcu_conv2d_s16_params *p);
mcu_status mcu_depthwise_conv2d_lut_s16(const mcu_context *ctx, const mcu_depthwise_conv2d_s16_params *p,
                                        const mcu_per_channel_quant *q, int32_t word, const int16_t *input,
                                        const uint8_t *indices, const int8_t *table, const int64_t *bias,
                                        int16_t *output);
int32_t mcu_depthwise_conv2d_lut_s16_get_buffer_size(const mcu_depthwise_conv2d_s16_params *p);
mcu_status mcu_linear_lut_s16(const mcu_context *ctx, const mcu_linear_s16_params *p, const mcu_per_channel_quant *q,
                              int32_t word, const int16_t *input, const uint8_t *indices, const int8_t *table,
                              const int64_t *bias, int16_t *output);
int32_t mcu_linear_lut_s16_get_buffer_size(const mcu_linear_s16_params *p);

typedef struct {
    int32_t outer, axis, inner; /**< the mean over the middle axis of [outer][axis][inner] */
    int32_t multiplier, shift;  /**< s_in / (s_out * axis), Q31 (reduced to Q15 as above) */
    int32_t act_min, act_max;
} mcu_mean_s16_params;

/** The mean over an axis (global average pooling: [n][h*w][c]); ours, with the 16x8 requantization of the
 * exact 64-bit sum. The output overlaps not the input. */
mcu_status mcu_mean_s16(const mcu_mean_s16_params *p, const int16_t *input, int16_t *output);
/** Bilinear resize of int16 codes with mcu_resize_bilinear_s8's tables (1/1024 weights), parameters and rounding
 *  (half away from zero), the sum in int64; ours. The output keeps the input's scale. No overlap. */
mcu_status mcu_resize_bilinear_s16(const mcu_resample_s8_params *p, const int32_t *index, const int16_t *input,
                                   int16_t *output);
/** The largest code along the axis (torch.amax), requantized by s_in / s_out (multiplier and shift; axis plays no
 *  part in them) with mcu_mean_s16's arithmetic: ours, as CMSIS-NN has no 16x8 reduction. No overlap. */
mcu_status mcu_amax_s16(const mcu_mean_s16_params *p, const int16_t *input, int16_t *output);
/** The smallest code along the axis (torch.amin), as mcu_amax_s16. */
mcu_status mcu_amin_s16(const mcu_mean_s16_params *p, const int16_t *input, int16_t *output);

typedef struct {
    int32_t size;                  /**< elements of each operand and of the output (same shapes) */
    int32_t a_multiplier, a_shift; /**< s_a / (2 max(s_a, s_b)) */
    int32_t b_multiplier, b_shift; /**< s_b / (2 max(s_a, s_b)) */
    int32_t left_shift;            /**< 15 */
    int32_t out_multiplier, out_shift; /**< 2 max(s_a, s_b) / (2^left_shift s_out) */
    int32_t act_min, act_max;
} mcu_add_s16_params;

/** The 16x8 add of CMSIS-NN's arm_elementwise_add_s16 (zero points 0); an operand may be the output, exactly. */
mcu_status mcu_add_s16(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);
/** a - b with mcu_add_s16's parameters and arithmetic (TFLite's 16x8 SUB); an operand may be the output, exactly. */
mcu_status mcu_sub_s16(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);
/** max(a, b) of the add's rescaled operands, requantized to the output (mcu_add_s16_params); in place as the add. */
mcu_status mcu_maximum_s16(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);
/** min(a, b) as mcu_maximum_s16. */
mcu_status mcu_minimum_s16(const mcu_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);

typedef struct {
    mcu_shape4 input;  /**< NHWC */
    mcu_shape4 output; /**< NHWC, output.c = input.c */
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left; /**< bottom/right implied by the output size; padded taps are left out */
    int32_t act_min, act_max;
} mcu_pool2d_s16_params;

/** Max pooling as CMSIS-NN's arm_max_pool_s16 (input and output share one scale). No overlap. */
mcu_status mcu_max_pool2d_s16(const mcu_pool2d_s16_params *p, const int16_t *input, int16_t *output);
/** Average pooling as CMSIS-NN's arm_avgpool_s16: over the taps inside the input, rounded half away from
 * zero. No overlap. */
mcu_status mcu_avg_pool2d_s16(const mcu_pool2d_s16_params *p, const int16_t *input, int16_t *output);

/** A ReLU or clamp on int16 codes (input and output share one scale). May run in place (exactly). */
mcu_status mcu_clamp_s16(int32_t size, int32_t act_min, int32_t act_max, const int16_t *input, int16_t *output);

typedef enum {
    MCU_ACT_S16_SIGMOID = 0, /**< output scale 2^-15, codes 0..32767 */
    MCU_ACT_S16_TANH = 1,    /**< output scale 2^-15 */
} mcu_activation_s16_kind;

typedef struct {
    int32_t size;             /**< elements of the input and of the output */
    int32_t input_multiplier; /**< in [1, 32767]: s_in * 3 * 2^12 * 2^input_shift (TFLite's int16 LOGISTIC/TANH) */
    int32_t input_shift;      /**< right shift in [0, 31] of input * input_multiplier, with rounding */
    int32_t kind;             /**< mcu_activation_s16_kind */
} mcu_activation_s16_params;

/** Sigmoid or tanh on int16 codes (zero point 0) as CMSIS-NN's arm_nn_activation_s16: the input brought to
 *  steps of 1/(3 * 2^12), read in the table of sigmoid(k / 24) with linear interpolation (tanh as
 *  2 sigmoid(2x) - 1); any input scale, where CMSIS-NN takes powers of two (TFLite's general multiplier). The
 *  output may be the input, exactly; no other overlap. */
mcu_status mcu_activation_s16(const mcu_activation_s16_params *p, const int16_t *input, int16_t *output);

typedef struct {
    int32_t size;                      /**< elements of each operand and of the output (same shapes) */
    int32_t out_multiplier, out_shift; /**< s_a s_b / s_out */
    int32_t act_min, act_max;
} mcu_mul_s16_params;

/** The 16x8 elementwise product of CMSIS-NN's arm_elementwise_mul_s16 (zero points 0): a * b in int32
 *  requantized to the output. An operand may be the output, exactly; no other overlap. */
mcu_status mcu_mul_s16(const mcu_mul_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);

/** Fractional bits of mcu_div_s16's quotient at most. */
#define MCU_DIV_S16_MAX_BITS 31

typedef struct {
    int32_t size;                      /**< elements of each operand and of the output (same shapes) */
    int32_t frac_bits;                 /**< D in [0, MCU_DIV_S16_MAX_BITS]: the quotient's fractional bits */
    int32_t out_multiplier, out_shift; /**< s_a / (s_b s_out 2^D), in [2^-16, 2^-15) where D allows */
    int32_t act_min, act_max;
} mcu_div_s16_params;

/** a / b of int16 codes (zero points 0; ours, as CMSIS-NN and TFLite have no 16x8 division): q = |a| 2^D / |b|
 *  rounded half away from zero and saturated at INT32_MAX, with the sign of a / b, requantized as
 *  mcu_mul_s16's product, then clamped; a zero divisor gives act_max (act_min) for a positive (negative) numerator
 *  and the clamped 0 for 0 / 0, as mcu_div_s8. An operand may be the output, exactly; no other overlap. */
mcu_status mcu_div_s16(const mcu_div_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);

typedef struct {
    int32_t size;              /**< elements of the input and of the output */
    int32_t multiplier, shift; /**< s_in / s_out */
    int32_t act_min, act_max;
} mcu_requantize_s16_params;

/** int16 codes to another int16 scale (zero points 0) with kernels_s8.h's int32 requantization, clamped: ours,
 *  TFLite's int16-to-int16 QUANTIZE (CMSIS-NN has none). The output may be the input, exactly. */
mcu_status mcu_requantize_s16(const mcu_requantize_s16_params *p, const int16_t *input, int16_t *output);

/** Entries of mcu_lut_s16's table. */
#define MCU_LUT_S16_ENTRIES 513

/** An elementwise function of int16 codes as a table of MCU_LUT_S16_ENTRIES int16 entries over the input's
 *  codes (entry i at code -32768 + 128 i), read with a 7-bit linear interpolation (TFLite's int16 LUT). The
 *  output may be the input, exactly; the table overlaps not the output. */
mcu_status mcu_lut_s16(int32_t size, const int16_t *table, const int16_t *input, int16_t *output);

/** Longest softmax axis of mcu_softmax_s16 (the int32 sum of its exponentials stays below 2^31). */
#define MCU_SOFTMAX_S16_MAX_AXIS 65535

typedef struct {
    int32_t outer, axis, inner;        /**< element (o, a, i) at (o * axis + a) * inner + i */
    int32_t input_multiplier, input_shift; /**< s_in / (10 / 65535): the differences to the exp table's steps */
} mcu_softmax_s16_params;

/** Softmax of int16 codes (zero point 0) to the output scale 2^-15 as CMSIS-NN's arm_softmax_s16: exp from a
 *  513-entry table over [-10, 0], 1 / (1 + x) from one over [0, 1], both interpolated; the reciprocal's table
 *  input saturated as TFLite's reference does (CMSIS-NN wraps it; mcu_softmax_s16.c says when that differs).
 *  The output may be the input, exactly; no other overlap. */
mcu_status mcu_softmax_s16(const mcu_softmax_s16_params *p, const int16_t *input, int16_t *output);

typedef struct {
    int32_t outer, axis, inner;            /**< rows of axis values (inner must be 1) */
    int32_t input_multiplier, input_shift; /**< as mcu_softmax_s16_params */
    int32_t mask_rows;                     /**< rows of the mask; row r of the input reads mask row r % mask_rows */
} mcu_softmax_masked_s16_params;

/** mcu_softmax_s16 over the last axis where the positions hidden[r % mask_rows][k] != 0 are minus infinity (a
 *  constant attention mask; CMSIS-NN's softmax has none): no part in the row's maximum and sum, output 0. Every
 *  mask row keeps a position (else MCU_ERR_INVALID_ARG, before anything is written). The output may be the
 *  input, exactly; no other overlap. */
mcu_status mcu_softmax_masked_s16(const mcu_softmax_masked_s16_params *p, const uint8_t *hidden, const int16_t *input,
                                  int16_t *output);
/** The borders between int8 and int16 activations (--quantize mixed): int8 codes (input_offset = -zero
 * point) to symmetric int16, clamp(requantize(q + input_offset, multiplier, shift), act_min, act_max) with
 * kernels_s8.h's int32 requantization (shift up to 30: the int16 scale is the finer one). The output overlaps
 * no input byte. */
mcu_status mcu_requantize_s8_s16(int32_t size, int32_t input_offset, int32_t multiplier, int32_t shift,
                                 int32_t act_min, int32_t act_max, const int8_t *input, int16_t *output);
/** Symmetric int16 to int8: clamp(requantize(q, multiplier, shift) + output_offset, act_min, act_max), as
 * mcu_requantize_s8 with input offset 0. The output overlaps no input byte. */
mcu_status mcu_requantize_s16_s8(int32_t size, int32_t multiplier, int32_t shift, int32_t output_offset,
                                 int32_t act_min, int32_t act_max, const int16_t *input, int8_t *output);

typedef struct {
    int32_t batch, m, k, n;                 /**< a [batch][m][k], b [batch][k][n], out [batch][m][n] */
    int32_t a_batch_stride, b_batch_stride; /**< elements between batches (0: one matrix for every batch) */
    int32_t multiplier, shift;              /**< s_a s_b / s_out (Q31; applied rounded to Q15) */
    int32_t act_min, act_max;
} mcu_bmm_s16_params;

/** Largest k of mcu_bmm_s16 (the exact sum of k int16 products stays inside int64 with room to spare). */
#define MCU_BMM_S16_MAX_K 65536

/** Batched product of two int16 activations (zero points 0) as CMSIS-NN's arm_batch_matmul_s16: the exact
 *  64-bit sum of a's row times b's column, requantized as the 16x8 layers (Q15 multiplier, one rounding),
 *  then clamped. b is read as [k][n] (arm_batch_matmul_s16 takes it transposed; the sums are the same). The
 *  output must not overlap an operand. */
mcu_status mcu_bmm_s16(const mcu_bmm_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output);

/** Largest row of mcu_layer_norm_s16. */
#define MCU_LAYER_NORM_S16_MAX_COLS 4096

typedef struct {
    int32_t rows, cols;     /**< the input and the output: rows x cols int16, normalised along cols */
    int32_t eps_lo, eps_hi; /**< E = round(cols^2 eps / s_in^2) as two words, below 2^61 */
    int32_t act_min, act_max;
    int32_t rms;            /**< 1: RMS norm (no mean subtracted) */
} mcu_layer_norm_s16_params;

/** Layer norm (or RMS norm) of int16 codes (zero point 0) along each row, the affine weight and bias per column
 *  folded into a multiplier, a right shift in [1, 62] and a Q8 bias (mcu_layer_norm_s16.c states the
 *  arithmetic; CMSIS-NN has no int16 layer norm). The output may be the input, exactly; no other overlap. */
mcu_status mcu_layer_norm_s16(const mcu_layer_norm_s16_params *p, const int16_t *input, const int32_t *multipliers,
                              const int32_t *shifts, const int32_t *bias, int16_t *output);

typedef struct {
    int32_t outer, axis, inner;              /**< element (o, a, i) at (o * axis + a) * inner + i */
    int32_t input_multiplier, input_shift;   /**< s_in / (10 / 65535): differences to the exp table's steps */
    int32_t diff_multiplier, diff_shift;     /**< s_in / s_out */
    int32_t log_multiplier, log_shift;       /**< 2^-15 / s_out: the row's ln(sum of exp) in Q15 to the output */
} mcu_log_softmax_s16_params;

/** Log-softmax of int16 codes (zero point 0) along an axis of at most MCU_SOFTMAX_S16_MAX_AXIS: the differences
 *  from the row's maximum less ln(sum of exp), exp from mcu_softmax_s16's table (0 below its -10) and ln from a
 *  513-entry table of ln(1 + f) (mcu_log_softmax_s16.c; CMSIS-NN has no int16 log-softmax). The output may be
 *  the input, exactly; no other overlap. */
mcu_status mcu_log_softmax_s16(const mcu_log_softmax_s16_params *p, const int16_t *input, int16_t *output);

/** Largest input or hidden size of mcu_lstm_s16. */
#define MCU_LSTM_S16_MAX_FEATURES 4096

typedef struct {
    int32_t batch, steps;                /**< input [batch][steps][input_size], output [batch][steps][hidden] */
    int32_t input_size, hidden;
    int32_t cell_shift;                  /**< the int16 cell's scale is 2^-cell_shift, in [0, 15] */
    int32_t forget_mult, forget_shift;   /**< f c (Q0.15 times the cell) to the cell: 2^-15 */
    int32_t input_mult, input_shift;     /**< i g (Q0.30) to the cell: 2^(cell_shift - 30) */
    int32_t out_mult, out_shift;         /**< o tanh(c) (Q0.30) to the hidden state: 2^-30 / s_hidden */
} mcu_lstm_s16_params;

/** Scratch bytes of mcu_lstm_s16: the int16 cell [hidden], the step's input and hidden state in the dual-MAC
 *  order [input_size + hidden] (int16, used on DSP cores); 0 for invalid sizes. */
int32_t mcu_lstm_s16_get_buffer_size(const mcu_lstm_s16_params *p);

/** One LSTM layer over a whole sequence with CMSIS-NN's arm_lstm_unidirectional_s16 arithmetic (batch major;
 *  mcu_lstm_s16.c and mcu/reference/lstm_s16.py state it): int16 input and hidden state (zero point 0), from
 *  `state` [batch][hidden] (int16 at the hidden state's scale) and `cell` [batch][hidden] (int16 at the cell's
 *  scale 2^-cell_shift), each NULL for zeros; weights int8 [4H][input_size] and [4H][H] in PyTorch's gate order (i, f, g, o),
 *  `bias` int64 [4H] of the input product (the recurrent product has none), `quant` [4H][4] int32 per gate
 *  row: the 16x8 multiplier and shift of the input product to Q3.12, then of the recurrent product. The
 *  output overlaps neither the input, the states, a constant nor the scratch (the kernel reads the previous
 *  step's hidden state from it). */
mcu_status mcu_lstm_s16(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                        const int16_t *state, const int16_t *cell, const int8_t *w_ih, const int8_t *w_hh,
                        const int64_t *bias, const int32_t *quant, int16_t *output);

/** Scratch bytes of mcu_lstm_final_cell_s16: the step's input and hidden state in the dual-MAC order
 *  [input_size + hidden] (int16, used on DSP cores); 0 for invalid sizes. */
int32_t mcu_lstm_final_cell_s16_get_buffer_size(const mcu_lstm_s16_params *p);

/** The final cell state [batch][hidden] (int16 at the cell's scale 2^-cell_shift: nn.LSTM's c_n) of the layer
 *  mcu_lstm_s16 ran with the same arguments, from the hidden states [batch][steps][hidden] it wrote: each step's
 *  gates read the hidden state before it from them (the cell is mcu_lstm_s16's bit for bit). The output overlaps
 *  neither an input, a constant nor the scratch. */
mcu_status mcu_lstm_final_cell_s16(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                                   const int16_t *hidden_states, const int16_t *state, const int16_t *cell,
                                   const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias, const int32_t *quant,
                                   int16_t *cell_out);

typedef struct {
    int32_t batch, steps;                /**< input [batch][steps][input_size], output [batch][steps][hidden] */
    int32_t input_size, hidden;          /**< each at most MCU_LSTM_S16_MAX_FEATURES */
    int32_t cand_mult, cand_shift;       /**< r hn (Q0.15 times hn's 2^-cs) to Q3.12: 2^-(cs + 3) */
    int32_t keep_mult, keep_shift;       /**< z h (Q0.15 times the hidden state) to the hidden state: 2^-15 */
    int32_t out_mult, out_shift;         /**< (1 - z) n (Q0.30) to the hidden state: 2^-30 / s_hidden */
} mcu_gru_s16_params;

/** Scratch bytes of mcu_gru_s16: the step's input and hidden state in the dual-MAC order
 *  [input_size + hidden] (int16, used on DSP cores); 0 for invalid sizes. */
int32_t mcu_gru_s16_get_buffer_size(const mcu_gru_s16_params *p);

/** One GRU layer over a sequence (PyTorch's GRU cell; CMSIS-NN has none) on mcu_lstm_s16's conventions: int16
 *  input and hidden state (zero point 0), Q3.12 gates, its sigmoid and tanh (mcu_gru_s16.c and
 *  mcu/reference/gru_s16.py state the arithmetic). Batch major, from `state` [batch][hidden] (int16 at the
 *  hidden state's scale; NULL: the zero state). Weights int8 [3H][input_size] and [3H][H] in PyTorch's gate
 *  order (r, z, n); `bias` int64 [4H]: the input product's of the 3H rows, then the n rows' recurrent ones;
 *  `quant` [3H][4] int32 per gate row: the 16x8 multiplier and shift of the input product to Q3.12, then of
 *  the recurrent product (to Q3.12; the n rows' to their power-of-two scale 2^-cs). The output overlaps
 *  neither the input, the state, a constant nor the scratch. */
mcu_status mcu_gru_s16(const mcu_context *ctx, const mcu_gru_s16_params *p, const int16_t *input,
                       const int16_t *state, const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias,
                       const int32_t *quant, int16_t *output);

/** q = clamp(round_half_even(x * inv_scale) + zero_point, -32768, 32767), float32 arithmetic (torch's rule). */
mcu_status mcu_quantize_f32_s16(int32_t size, float inv_scale, int32_t zero_point, const float *input,
                                int16_t *output);
/** x = (float)(q - zero_point) * scale. */
mcu_status mcu_dequantize_s16_f32(int32_t size, float scale, int32_t zero_point, const int16_t *input,
                                  float *output);

#endif /* MCU_KERNELS_S16_H */
