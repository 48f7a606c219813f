/**
 * @file kernels_s8.h
 * @brief Portable int8 kernels with the TFLite int8 / CMSIS-NN arithmetic.
 *
 * Quantization: real = scale * (q - zero_point). Activations are asymmetric
 * per-tensor int8; weights are symmetric per output channel (zero-point 0,
 * values in [-127, 127]); biases are int32 with scale s_in * s_w[c].
 *
 * Requantization (mcu_requantize in common/requant.h, mirrored exactly by
 * mcu/quant/arith.py): a real multiplier M is stored as a Q31 `multiplier`
 * in [2^30, 2^31 - 1] (or 0) and a `shift` in [-31, 30] with
 * M = multiplier * 2^(shift - 31). Applying it to an int32 x:
 *   left = max(shift, 0), right = max(-shift, 0)
 *   x' = saturate_int32(x * 2^left)
 *   y = rounding_doubling_high_mul(x', multiplier)      // (x'*m + 2^30) >> 31, saturating on INT32_MIN^2
 *   y = rounding_divide_by_pot(y, right)               // round half away from zero
 * Layouts are physical: activations NHWC, convolution weights OHWI,
 * depthwise weights [kh][kw][out_c] (TFLite's 1HWO), linear weights [out][in].
 * Offsets follow CMSIS-NN: input_offset = -input_zero_point,
 * output_offset = +output_zero_point. Every kernel returns an mcu_status and
 * never allocates; scratch memory, where a kernel needs it, comes from the
 * caller in an mcu_context sized by the kernel's _get_buffer_size companion.
 */
#ifndef MCU_KERNELS_S8_H
#define MCU_KERNELS_S8_H

#include <stdint.h>

#include "mcu/status.h"
#include "mcu/tensor.h"

/** Caller-supplied scratch memory. */
typedef struct {
    void *buf;
    int32_t size;
} mcu_context;

/** Per-channel requantization: one multiplier and shift per output channel. */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
} mcu_per_channel_quant;

typedef struct {
    mcu_shape4 input;   /**< NHWC */
    mcu_shape4 output;  /**< NHWC */
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;      /**< bottom/right implied by the output size */
    int32_t dilation_h, dilation_w;
    int32_t groups;                 /**< 1 for plain convolution; input.c and output.c divisible by it */
    int32_t input_offset;           /**< -input zero-point, in [-127, 128] */
    int32_t output_offset;          /**< output zero-point, in [-128, 127] */
    int32_t act_min, act_max;       /**< clamp in the output's int8 domain */
} mcu_conv2d_s8_params;

/** Convolution (plain and grouped); weights OHWI [out_c][kh][kw][in_c/groups]; bias may be NULL. */
mcu_status mcu_conv2d_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output);
int32_t mcu_conv2d_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

typedef struct {
    mcu_shape4 input;
    mcu_shape4 output;              /**< output.c = input.c * ch_mult */
    int32_t ch_mult;
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t dilation_h, dilation_w;
    int32_t input_offset, output_offset;
    int32_t act_min, act_max;
} mcu_depthwise_conv2d_s8_params;

/** Depthwise convolution; weights [kh][kw][out_c], output channel o reads input channel o / ch_mult. */
mcu_status mcu_depthwise_conv2d_s8(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                   const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                   const int32_t *bias, int8_t *output);
int32_t mcu_depthwise_conv2d_s8_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p);

typedef struct {
    int32_t batch, in_features, out_features;
    int32_t input_offset, output_offset;
    int32_t act_min, act_max;
} mcu_linear_s8_params;

/** Fully connected with per-output-channel requantization; weights [out][in]; bias may be NULL. */
mcu_status mcu_linear_s8(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output);
int32_t mcu_linear_s8_get_buffer_size(const mcu_linear_s8_params *p);

/* 4-bit weights with int8 activations (w4a8): the int8 kernels' parameters and arithmetic, the weights
 * symmetric in [-8, 7] and packed two a byte in the int8 kernels' weight order, element 2i in the low
 * nibble of byte i and element 2i + 1 in its high nibble, an odd count ending in a half-used byte (the
 * packing of CMSIS-NN's s4 kernels). The output overlaps neither the input nor any constant. */

/** Convolution (any window, stride, padding, dilation, groups); weights OHWI, packed. */
mcu_status mcu_conv2d_s4(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output);
int32_t mcu_conv2d_s4_get_buffer_size(const mcu_conv2d_s8_params *p);

/** Depthwise convolution; weights [kh][kw][out_c], packed. */
mcu_status mcu_depthwise_conv2d_s4(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                   const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                   const int32_t *bias, int8_t *output);
int32_t mcu_depthwise_conv2d_s4_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p);

/** Fully connected; weights [out][in], packed (a row starts mid-byte when in_features is odd). */
mcu_status mcu_linear_s4(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                         const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output);
int32_t mcu_linear_s4_get_buffer_size(const mcu_linear_s8_params *p);

/* Look-up-table (palettized) weights with int8 activations (--weight-palette BITS): the int8 kernels'
 * parameters and arithmetic; each output channel's weights are `bits`-wide (2 to 4) indices into that
 * channel's table of 2^bits int8 values (the layout in kernels/common/lut.h: one byte-padded row of
 * indices per output channel, little-endian bit order). The kernels decode a channel (or the whole
 * depthwise tensor) into the scratch, which must hold the _get_buffer_size bytes and overlap nothing.
 * `bits` is the palette word: the index width, plus MCU_LUT_SHARED when one table of 2^bits values serves
 * every channel (--palette-per tensor). */
#define MCU_LUT_SHARED 16

/** Convolution, one group, a channel at a time: the output overlaps neither the input nor any constant;
 *  with scratch for the whole decoded tensor, the int8 convolution on it and its window contract. */
mcu_status mcu_conv2d_lut_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                             int32_t bits, const int8_t *input, const uint8_t *indices, const int8_t *table,
                             const int32_t *bias, int8_t *output);
int32_t mcu_conv2d_lut_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/** Depthwise convolution (rows per output channel, decoded to [kh][kw][out_c]); the window contract. */
mcu_status mcu_depthwise_conv2d_lut_s8(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                       const mcu_per_channel_quant *q, int32_t bits, const int8_t *input,
                                       const uint8_t *indices, const int8_t *table, const int32_t *bias,
                                       int8_t *output);
int32_t mcu_depthwise_conv2d_lut_s8_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p);

/** Fully connected (a row per output feature); the output overlaps neither the input nor any constant. */
mcu_status mcu_linear_lut_s8(const mcu_context *ctx, const mcu_linear_s8_params *p, const mcu_per_channel_quant *q,
                             int32_t bits, const int8_t *input, const uint8_t *indices, const int8_t *table,
                             const int32_t *bias, int8_t *output);
int32_t mcu_linear_lut_s8_get_buffer_size(const mcu_linear_s8_params *p);

/** Broadcasting elementwise parameters (strides in elements, 0 where broadcast). */
typedef struct {
    int32_t rank;
    int32_t out_shape[MCU_MAX_DIMS];
    int32_t a_strides[MCU_MAX_DIMS];
    int32_t b_strides[MCU_MAX_DIMS];
    int32_t a_offset, b_offset;     /**< -zero-points of the inputs */
    int32_t a_multiplier, a_shift;  /**< add only: input rescale (see below) */
    int32_t b_multiplier, b_shift;
    int32_t left_shift;             /**< add only: 20 for int8 */
    int32_t out_multiplier, out_shift;
    int32_t output_offset;
    int32_t act_min, act_max;
} mcu_binary_s8_params;

/** CMSIS-NN add: a' = rq((a + a_offset) << left_shift, a_mult, a_shift), same for b,
 *  out = clamp(rq(a' + b', out_mult, out_shift) + output_offset). Sub uses the same path
 *  with b' negated. May run in place on an operand with the output's contiguous strides. */
mcu_status mcu_add_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);
mcu_status mcu_sub_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);
/** CMSIS-NN mul: out = clamp(rq((a + a_offset) * (b + b_offset), out_mult, out_shift) + output_offset). */
mcu_status mcu_mul_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);
/* Integer maximum, minimum and division (with the add's and mul's requantization). */
/** TFLite MAXIMUM/MINIMUM: a' and b' as in mcu_add_s8, out = clamp(rq(max(a', b'), out_mult, out_shift) +
 *  output_offset) (min for mcu_minimum_s8); the add's parameters (mcu.quant.arith.add_params). */
mcu_status mcu_maximum_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);
mcu_status mcu_minimum_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);
/** a / b: q = round((a + a_offset) 2^16 / (b + b_offset)) (half away from zero), out = clamp(rq(q,
 *  out_mult, out_shift) + output_offset); a zero divisor gives act_max, act_min (or the zero for 0 / 0). The
 *  rescaling fields are unused (mcu.reference.elementwise.div_params). */
mcu_status mcu_div_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);

typedef struct {
    int32_t size;      /**< elements */
    int32_t channels;  /**< slopes; 1 shares one */
    int32_t inner;     /**< elements between consecutive channels in memory (1: channels last) */
    int32_t input_offset;
    int32_t pos_multiplier, pos_shift;  /**< s_in / s_out */
    int32_t neg_multiplier, neg_shift;  /**< s_in s_alpha / s_out */
    int32_t output_offset;
    int32_t act_min, act_max;
} mcu_prelu_s8_params;

/** TFLite PRELU: x' = x + input_offset; out = clamp((x' >= 0 ? rq(x', pos) : rq(x' alpha[c], neg)) +
 *  output_offset), c = (i / inner) % channels; int8 slopes (symmetric). May run in place. */
mcu_status mcu_prelu_s8(const mcu_prelu_s8_params *p, const int8_t *input, const int8_t *alpha, int8_t *output);

typedef struct {
    int32_t outer, axis, inner;  /**< the reduced axis of axis elements, inner apart in memory */
    int32_t input_multiplier;    /**< s_in / s_out in Q16 */
    int32_t log_multiplier;      /**< ln 2 / s_out in Q16 */
    int32_t output_offset;
} mcu_log_softmax_s8_params;

/** log_softmax: exp_table[k] = exp(-k s_in) in Q20 (exp_table[0] = 2^20); per row out = clamp(output_offset +
 *  round(((x - max) input_multiplier - round((log2_q16(sum exp_table[max - x]) - 20 2^16) log_multiplier /
 *  2^16)) / 2^16)) (mcu.reference.norm.log_softmax_s8). */
mcu_status mcu_log_softmax_s8(const mcu_log_softmax_s8_params *p, const int32_t *exp_table, const int8_t *input,
                              int8_t *output);

typedef struct {
    mcu_shape4 input, output;
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t act_min, act_max;
} mcu_pool2d_s8_params;

/** Max pooling over real (unpadded) positions, then clamp. Input and output share quantization. */
mcu_status mcu_max_pool2d_s8(const mcu_pool2d_s8_params *p, const int8_t *input, int8_t *output);
/** mcu_max_pool2d_s8 for windows one row high (kernel_h 1, pad_top 0: a MaxPool1d over [N, 1, L, C]), the
 *  optimized backend's; the same output bit for bit. MCU_ERR_UNSUPPORTED for taller windows. */
mcu_status mcu_max_pool1d_s8(const mcu_pool2d_s8_params *p, const int8_t *input, int8_t *output);

/** Bytes of each of ``outer`` [rows][cols] planes transposed: out[o][c][r] = in[o][r][c] (a one-row signal's
 *  layout change, [N, C, 1, L] <-> [N, 1, L, C], in the optimized backend). Output must not overlap input. */
mcu_status mcu_transpose_s8(int32_t outer, int32_t rows, int32_t cols, const int8_t *input, int8_t *output);
/** Average pooling over real positions (count excludes padding), CMSIS-NN rounding:
 *  sum > 0 ? (sum + count/2) / count : (sum - count/2) / count, then clamp. Shared quantization. */
mcu_status mcu_avg_pool2d_s8(const mcu_pool2d_s8_params *p, const int8_t *input, int8_t *output);

typedef struct {
    mcu_shape4 input;               /**< output is [n][c] */
    int32_t input_offset;           /**< -input zero-point */
    int32_t multiplier, shift;      /**< real multiplier s_in / (s_out * h * w) */
    int32_t output_offset;
    int32_t act_min, act_max;
} mcu_mean_hw_s8_params;

/** Mean over H and W: out = clamp(rq(sum(q + input_offset), multiplier, shift) + output_offset). */
mcu_status mcu_mean_hw_s8(const mcu_mean_hw_s8_params *p, const int8_t *input, int8_t *output);

typedef struct {
    int32_t outer, axis, inner;     /**< softmax over the middle axis of [outer][axis][inner] */
    int32_t input_multiplier;       /**< from beta * s_in with 5 integer bits, as TFLite/CMSIS-NN */
    int32_t input_left_shift;
    int32_t diff_min;
} mcu_softmax_s8_params;

/** The longest softmax axis mcu_softmax_s8 takes (longer: MCU_ERR_UNSUPPORTED). */
#define MCU_SOFTMAX_MAX_AXIS 4095

/** CMSIS-NN/TFLite int8 softmax (gemmlowp fixed-point exp); output scale 1/256, zero-point -128. */
mcu_status mcu_softmax_s8(const mcu_softmax_s8_params *p, const int8_t *input, int8_t *output);

typedef struct {
    int32_t outer, axis, inner;     /**< rows of axis values (inner must be 1) */
    int32_t input_multiplier, input_left_shift, diff_min; /**< as mcu_softmax_s8_params */
    int32_t mask_rows;              /**< rows of the mask; row r of the input reads mask row r % mask_rows */
} mcu_softmax_masked_s8_params;

/** mcu_softmax_s8 over the last axis where the positions hidden[r % mask_rows][k] != 0 are minus infinity (a
 *  constant attention mask): no part in the row's maximum and sum, output -128. Every row keeps a position
 *  (else MCU_ERR_INVALID_ARG). Exact aliasing of input and output is allowed. */
mcu_status mcu_softmax_masked_s8(const mcu_softmax_masked_s8_params *p, const uint8_t *hidden, const int8_t *input,
                                 int8_t *output);

/** Table lookup for pointwise nonlinearities: out[i] = table[in[i] + 128]. May run in place. */
mcu_status mcu_lut_s8(int32_t size, const int8_t *table, const int8_t *input, int8_t *output);

/** out = clamp(rq(q + input_offset, multiplier, shift) + output_offset, act_min, act_max). May run in place. */
mcu_status mcu_requantize_s8(int32_t size, int32_t input_offset, int32_t multiplier, int32_t shift,
                             int32_t output_offset, int32_t act_min, int32_t act_max, const int8_t *input,
                             int8_t *output);

/** Elementwise clamp in the int8 domain (ReLU with unchanged quantization). May run in place. */
mcu_status mcu_clamp_s8(int32_t size, int32_t act_min, int32_t act_max, const int8_t *input, int8_t *output);

/** q = clamp(round_half_even(x * inv_scale) + zero_point, -128, 127), float32 arithmetic (torch's rule). */
mcu_status mcu_quantize_f32_s8(int32_t size, float inv_scale, int32_t zero_point, const float *input,
                               int8_t *output);
/** x = (float)(q - zero_point) * scale. */
mcu_status mcu_dequantize_s8_f32(int32_t size, float scale, int32_t zero_point, const int8_t *input,
                                 float *output);

/* --- variants whose output may overlap their input (see mcu/contracts.py) ------------------------- */

/**
 * Depthwise convolution computed in place: `data` holds the input and receives
 * the output (stride 1, dilation 1, ch_mult 1, output size equal to input
 * size). Input rows still needed after the output has overwritten them are
 * kept in a ring of pad_top + 1 rows in ctx->buf. Bit-exact with
 * mcu_depthwise_conv2d_s8.
 */
mcu_status mcu_depthwise_conv2d_s8_inplace(const mcu_context *ctx, const mcu_depthwise_conv2d_s8_params *p,
                                           const mcu_per_channel_quant *q, int8_t *data, const int8_t *weight,
                                           const int32_t *bias);
int32_t mcu_depthwise_conv2d_s8_inplace_get_buffer_size(const mcu_depthwise_conv2d_s8_params *p);

/**
 * 1x1 convolution (stride 1, no padding, groups 1), one pixel at a time through
 * a pixel buffer in ctx->buf, in whichever direction the placement needs: with
 * d = output - input in bytes, Bi/Bo bytes per input/output pixel and P pixels,
 * forward when d <= min(Bi - Bo, P * (Bi - Bo)), backward when
 * d >= max(0, (P - 1) * (Bi - Bo)); any other overlap is MCU_ERR_INVALID_ARG.
 * Bit-exact with mcu_conv2d_s8.
 */
mcu_status mcu_conv2d_1x1_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const mcu_per_channel_quant *q,
                             const int8_t *input, const int8_t *weight, const int32_t *bias, int8_t *output);
int32_t mcu_conv2d_1x1_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/** Convolution (groups == 1, any window, stride, padding, dilation) and fully connected layers
 * (as a 1x1 convolution over batch rows) from a stream of 32-bit words (word-aligned) packed ahead
 * of time for the dual-MAC loop (mcu/backends/tuned.py, pack_layer): a header (MCU_PACKED_MAGIC,
 * flags (bit 0, MCU_PACKED_FLAG_RIGHT: every shift in [-23, -1]; bit 1, MCU_PACKED_FLAG_BYTES: the
 * weights as bytes, below; bit 2, MCU_PACKED_FLAG_GROUP: the weights sit in memory with wait states,
 * so a flat pointwise layer whose stream outgrows a flash cache runs its pixel pairs in groups that
 * share each read; bits 8-15: the output offset the stream was packed for),
 * output channels, taps per window padded to 4), then
 * one block per 4 output channels: their 4 biases; their weights as int16 pairs, window taps
 * padded to a multiple of 4 and, within each group of 4 taps, in the order 0, 2, 1, 3 that SXTB16
 * widening produces, tap pair j of the 4 channels as consecutive words; then per channel four
 * words: (K low, K high, multiplier, -shift - 1) when bit 0 is set, K = 2^30 + 2^(30-shift) +
 * output_offset 2^(31-shift) (convolution/gemm_s8_dsp.h), else (0, 0, multiplier, shift). The window (kh * kw * in_c, padded to 4) must be at most
 * MCU_CONV_PACKED_TAPS_MAX. Output pixels are written in memory order, each after its window is
 * read; a 1x1 stride-1 unpadded layer may overlap its input either way (the pixel-buffer contract
 * of mcu_conv2d_1x1_s8). */
#define MCU_CONV_PACKED_TAPS_MAX 640
#define MCU_PACKED_MAGIC 0x5043554D /* "MUCP" read as a little-endian word */
#define MCU_PACKED_HEADER_WORDS 4
/* With MCU_PACKED_FLAG_BYTES (a 1x1, stride-1, unpadded layer: fully connected) a block is its biases
 * 0, 0, 2, 2, then per column word (taps ta, tb of the 0, 2, 1, 3 order) two words, channels 0 and 1 then 2 and 3,
 * whose int16 halves are 256 w[B][t] + w[A][t] (A the even channel, B the odd one), then biases 1 and
 * 3, then the 16 requantization words; valid only where 256 wB + wA fits int16 and max |input + input
 * offset| sum |wB| < 2^23
 * (convolution/pair_bytes_s8_dsp.h). */
#define MCU_PACKED_FLAG_RIGHT 1u
#define MCU_PACKED_FLAG_BYTES 2u
#define MCU_PACKED_FLAG_GROUP 4u
/* With MCU_PACKED_FLAG_SCALED (and FLAG_RIGHT; a flat pointwise layer whose activation range starts at or
 * above its output offset) each channel's weights and bias are scaled by 2^e, e = 1 + MCU_PACKED_SCALED_SHIFT
 * - R in [2, 8], and a block's 16 requantization words are (multiplier, C) of its four channels, C = 2^(e-2)
 * + 2^(MCU_PACKED_SCALED_SHIFT-1) + output_offset 2^MCU_PACKED_SCALED_SHIFT, then 8 zeros
 * (mcu/backends/optimized/tuned.py, pack_layer_scaled). */
#define MCU_PACKED_FLAG_SCALED 8u
#define MCU_PACKED_SCALED_SHIFT 14
/* With MCU_PACKED_FLAG_ROWS (and FLAG_RIGHT, not SCALED; a 3x3 layer of 3 input channels, 4 to 16 output channels,
 * whose activation range is all of int8 from the output offset -128) the blocks are followed by the rows
 * section: per pair of output channels MCU_PACKED_ROWS_PAIR_WORDS words, their biases times 2^e, then per tap
 * word (window rows 0 and 1: taps 0-1, 2-3, 4-5, 6-7; row 2: those and 8 with a 0; then taps 8 of rows 0 and 1)
 * the two channels' words of int16 weights times 2^e, then (multiplier, C) of each channel, e and C as with FLAG_SCALED; then as many pairs again
 * with the window rows in reverse order (mcu/backends/optimized/tuned.py, rows_section;
 * convolution/conv_k3c3_rows_s8_dsp.h reads it). */
#define MCU_PACKED_FLAG_ROWS 16u
#define MCU_PACKED_ROWS_PAIR_WORDS 34
mcu_status mcu_conv2d_packed_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const int8_t *input,
                                const int32_t *packed, int8_t *output);
int32_t mcu_conv2d_packed_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/** A 3x3 depthwise layer computed in place (stride 1, dilation 1, ch_mult 1, output size equal to input size,
 * channels a multiple of 4) on the channel planes of cores with the DSP extension, its constants packed ahead of
 * time (mcu/backends/optimized/dwpack.py): a header (MCU_DWPL_MAGIC, channels, the output offset the words were
 * packed for), then per channel ten words: its kernel lines' doubled int16 lane pairs (w_i0 w_i1) (w_i1 w_i2)
 * in the planes' orientation (the lines along the image's longer side), twice its bias, its multiplier,
 * (2 output_offset + 1) 2^(R-1) and R = -shift, R in [1, 24] and the accumulator's bounds checked by the packer.
 * Only images of one band whose lines take one step each (lines of three pixels, or of six without a clamp of
 * the activation range); on the DSP paths any other layer is MCU_ERR_UNSUPPORTED. Builds without them (the M0+,
 * M3 and M55, and a host build of a firmware's generated C) compute the same layer from the same words, a channel
 * at a time, for images of at most MCU_DWPL_PLAIN_PIXELS pixels. Bit-exact with mcu_depthwise_conv2d_s8. */
#define MCU_DWPL_MAGIC 0x5057554D /* "MUWP" read as a little-endian word */
/* The scaled form, for layers whose range is all of int8 and output offset -128 (a ReLU folded into the range):
 * the weights and the bias times 2^e instead of 2, e = MCU_DWPL_PACKED_SCALE - R in [2, 8], the ninth word
 * 2^(e-2) + (2 output_offset + 1) 2^(MCU_DWPL_PACKED_SCALE - 2): an output is SMMLA and SSAT's shift. */
#define MCU_DWPL_MAGIC_SCALED 0x5357554D /* "MUWS" */
#define MCU_DWPL_PACKED_SCALE 14
#define MCU_DWPL_HEADER_WORDS 3
#define MCU_DWPL_PACKED_WORDS 10
#define MCU_DWPL_PLAIN_PIXELS 1024
mcu_status mcu_depthwise_conv2d_s8_planes(const mcu_depthwise_conv2d_s8_params *p, int8_t *data,
                                          const int32_t *packed);

/** mcu_conv2d_packed_s8's layers with int8 weights (the flash of the portable kernels' weights, no
 * more): a stream of 32-bit words (word-aligned; mcu/backends/compact.py, pack_compact): a header
 * (MCU_COMPACT_MAGIC, 0, output channels, taps per window padded to 4), then one block per 4 output
 * channels: their 4 biases; their weights, per group of 4 window taps (zero-padded) one word per
 * channel holding the 4 taps' bytes in order; then (multiplier, shift) per channel (padded channels:
 * zero weights, multiplier 0, shift 0). Scratch (ctx, 8-byte aligned, apart from input and output):
 * mcu_conv2d_compact_s8_get_buffer_size bytes. Same window bound and overlap rules as
 * mcu_conv2d_packed_s8; bit-exact with mcu_conv2d_s8. */
#define MCU_COMPACT_MAGIC 0x4B43554D /* "MUCK" read as a little-endian word */
#define MCU_COMPACT_HEADER_WORDS 4
mcu_status mcu_conv2d_compact_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p, const int8_t *input,
                                 const int32_t *stream, int8_t *output);
int32_t mcu_conv2d_compact_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/** Fully connected layers (weights [out][in], in_features <= MCU_CONV_PACKED_TAPS_MAX) from
 * mcu_conv2d_compact_s8's stream (taps: in_features padded to 4). Scratch (ctx, 8-byte aligned,
 * apart from input and output): mcu_linear_compact_s8_get_buffer_size bytes. The output overlaps
 * neither the input nor the stream. Bit-exact with mcu_linear_s8. */
mcu_status mcu_linear_compact_s8(const mcu_context *ctx, const mcu_linear_s8_params *p, const int8_t *input,
                                 const int32_t *stream, int8_t *output);
int32_t mcu_linear_compact_s8_get_buffer_size(const mcu_linear_s8_params *p);

/* --- normalisation, reductions and int8 activations ------------------------------------------ */

/** Largest cols of mcu_layer_norm_s8 (keeps every row's sums inside the kernel's 64-bit arithmetic). */
#define MCU_LAYER_NORM_S8_MAX_COLS 4096

typedef struct {
    int32_t rows, cols;          /**< normalise each row of `cols` contiguous values */
    int32_t eps_lo, eps_hi;      /**< the 64-bit eps term round(cols^3 * eps / s_in^2), low and high words */
    int32_t output_offset;       /**< output zero-point */
    int32_t act_min, act_max;
    int32_t rms;                 /**< 1: RMS norm, no mean: S = cols * input_zero_point */
    int32_t input_zero_point;    /**< (used by RMS norm only) */
} mcu_layer_norm_s8_params;

/** int8 layer normalisation with integer mean and variance (the arithmetic is in
 * mcu_layer_norm_s8.c and mcu/quant/norm.py): per column a signed multiplier and shift carrying
 * sqrt(cols) * weight / s_out, and a bias in 1/256 output steps. RMS norm is the same without the mean
 * (the values are taken from the input zero-point instead). May run in place. */
mcu_status mcu_layer_norm_s8(const mcu_layer_norm_s8_params *p, const int8_t *input, const int32_t *multipliers,
                             const int32_t *shifts, const int32_t *bias, int8_t *output);

typedef struct {
    int32_t outer, reduce, inner;
    int32_t op;                  /**< mcu_reduce_op (kernels_f32.h): sum, mean, max, min */
    int32_t input_offset;        /**< -input zero-point */
    int32_t multiplier, shift;   /**< s_in / s_out (divided by `reduce` for the mean) */
    int32_t output_offset;
    int32_t act_min, act_max;
} mcu_reduce_s8_params;

/** Reduction of the middle axis of [outer, reduce, inner] int8 codes: the int32 sum of (q + input_offset)
 * (or the largest or smallest q plus input_offset), requantized. The output must not overlap the input. */
mcu_status mcu_reduce_s8(const mcu_reduce_s8_params *p, const int8_t *input, int8_t *output);

typedef struct {
    int32_t batch, m, k, n;
    int32_t a_batch_stride, b_batch_stride;  /**< elements between batches; 0 broadcasts */
    int32_t a_offset, b_offset;              /**< -zero-points of a and b */
    int32_t multiplier, shift;               /**< s_a s_b / s_out */
    int32_t output_offset;
    int32_t act_min, act_max;
} mcu_bmm_s8_params;

/** out[b] = requantize(sum_t (a[b][i][t] + a_offset) (b[b][t][j] + b_offset)) for int8 a (m x k) and
 * b (k x n), both activations (k <= 32768 keeps the int32 sum exact). The output must not overlap an
 * operand. */
mcu_status mcu_bmm_s8(const mcu_bmm_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output);

/** argmax of int8 codes along the middle axis of [outer, reduce, inner] (the first on ties): the
 * argmax of the real values, since dequantization is increasing. */
mcu_status mcu_argmax_s8(int32_t outer, int32_t reduce, int32_t inner, const int8_t *input, int32_t *output);
/* --- resampling ---------------------------------------------------------------------------------- */

/** A tensor seen as [outer][h][w][inner] (as mcu_resample_f32_params). */
typedef struct {
    int32_t outer, in_h, in_w, out_h, out_w, inner;
} mcu_resample_s8_params;

/**
 * Bilinear resize in integers, in the style of TFLite's RESIZE_BILINEAR: `index` holds (y0, y1, fy)
 * for each output row, then (x0, x1, fx) for each output column, fy and fx the weights of y1 and x1
 * in units of 1/1024 (0..1024). With q the int8 inputs (the output keeps the input's scale and
 * zero-point, so the interpolation runs on the raw values),
 *   acc = q[y0][x0] (1024-fy)(1024-fx) + q[y0][x1] (1024-fy) fx + q[y1][x0] fy (1024-fx) + q[y1][x1] fy fx
 *   out = (acc + 2^19) / 2^20 for acc >= 0, (acc - 2^19) / 2^20 otherwise (C division: half away from zero).
 * Indices and weights are checked before anything is written. No overlap.
 */
mcu_status mcu_resize_bilinear_s8(const mcu_resample_s8_params *p, const int32_t *index, const int8_t *input,
                                  int8_t *output);

/** Adaptive average pooling on int8 values sharing the input's quantization: the int32 window sum
 *  divided by the window size, rounded half away from zero (as mcu_avg_pool2d_s8). No overlap. */
mcu_status mcu_adaptive_avg_pool_s8(const mcu_resample_s8_params *p, const int8_t *input, int8_t *output);
/* --- convolutions: transposed convolution ---------------------------------------------------- */

/** Transposed convolution with TFLite's TRANSPOSE_CONV int8 arithmetic: acc = bias + sum over the
 *  taps reaching an output pixel of (x + input_offset) * w (modulo 2^32), then the per-channel
 *  requantization of mcu_conv2d_s8. Params as mcu_conv2d_s8 (pad_top/pad_left: the transposed
 *  convolution's padding; the output size implies output_padding); weights OHWI
 *  [out_c][kh][kw][in_c/groups]; bias may be NULL. No scratch; the output must not overlap any
 *  operand. */
mcu_status mcu_conv_transpose2d_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                   const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                   const int32_t *bias, int8_t *output);
int32_t mcu_conv_transpose2d_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/** mcu_conv_transpose2d_s8 for dilation 1 and one group, bit for bit, with the weights packed by
 *  output phase (mcu/quant/reference_conv.py, phase_pack): each output pixel is one dot product per
 *  channel over its phase's taps, on the convolution's dual-MAC loop on DSP cores. */
mcu_status mcu_conv_transpose2d_phased_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                          const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                          const int32_t *bias, int8_t *output);
int32_t mcu_conv_transpose2d_phased_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/** mcu_conv2d_s8 for groups > 1 (not depthwise), bit for bit: on DSP cores every group's window of
 *  two output pixels is widened once and run on the dual-MAC matrix loop. Same contracts (window
 *  overlap, no scratch). */
mcu_status mcu_conv2d_grouped_s8(const mcu_context *ctx, const mcu_conv2d_s8_params *p,
                                 const mcu_per_channel_quant *q, const int8_t *input, const int8_t *weight,
                                 const int32_t *bias, int8_t *output);
int32_t mcu_conv2d_grouped_s8_get_buffer_size(const mcu_conv2d_s8_params *p);

/* --- integer recurrent layers ---------------------------------------------------------------- */

/** Largest input or hidden size of mcu_lstm_s8 / mcu_gru_s8 (keeps bias + sum(w * q) inside int32). */
#define MCU_RECURRENT_S8_MAX_FEATURES 4096
/** Entries of the sigmoid table both kernels take: T[k] = round(2^15 sigmoid(k / 32)), k = 0..256. */
#define MCU_RECURRENT_S8_TABLE_SIZE 257
/** Largest |bias| of a gate row (the compiler clamps to it). */
#define MCU_RECURRENT_S8_MAX_BIAS (1 << 30)

typedef struct {
    int32_t batch, steps;        /**< input [batch][steps][input_size], output [batch][steps][hidden] */
    int32_t input_size, hidden;
    int32_t hidden_zp;           /**< zero-point of the int8 hidden state (the output); the state starts at 0.0 */
    int32_t out_mult, out_shift; /**< 2^-30 / s_hidden: a Q0.30 product to hidden steps */
    int32_t state_shift;         /**< LSTM: cell scale 2^-state_shift; GRU: scale of Whn h + bhn; in [0, 15] */
} mcu_recurrent_s8_params;

/** Scratch bytes of mcu_lstm_s8: int16 gates [4H] and cell [H], the step's input and hidden state as
 *  int16 [input_size + H], the int8 hidden state [H]. */
int32_t mcu_lstm_s8_get_buffer_size(const mcu_recurrent_s8_params *p);

/** One LSTM layer over a whole sequence from the zero state, with TFLite Micro's integer LSTM arithmetic
 *  (mcu_lstm_s8.c and mcu/quant/recurrent.py state it): weights int8 [4H][input_size] and [4H][H] in
 *  PyTorch's gate order (i, f, g, o); `rows` [4H][6] int32 per gate row: bias and Q31 multiplier and shift
 *  of the input product, then of the recurrent product (zero-point corrections folded into the biases);
 *  `table` the sigmoid table. The output must not overlap the input. */
mcu_status mcu_lstm_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                       const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                       int8_t *output);

/** The final cell state [batch][hidden] (int16 at the cell's scale 2^-state_shift: nn.LSTM's c_n) of the layer
 *  mcu_lstm_s8 ran with the same arguments, from the hidden states [batch][steps][hidden] it wrote: each step's
 *  gates read the hidden state before it from them, so the cell runs through mcu_lstm_s8's values bit for bit
 *  (the output gate and the hidden state are not computed again). Scratch: mcu_lstm_s8_get_buffer_size's. The
 *  output overlaps neither an input, a constant nor the scratch. */
mcu_status mcu_lstm_final_cell_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                                  const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                                  const int8_t *hidden_states, int16_t *cell_out);

/** Scratch bytes of mcu_gru_s8: int16 gates [3H] and recurrent candidate [H], the step's input and hidden
 *  state as int16 [input_size + H], the int8 hidden state [H]. */
int32_t mcu_gru_s8_get_buffer_size(const mcu_recurrent_s8_params *p);

/** One GRU layer (PyTorch's cell, gate order r, z, n) over a whole sequence from the zero state, on the
 *  integer machinery of mcu_lstm_s8 (TFLite has no builtin GRU; mcu_gru_s8.c states the arithmetic).
 *  Operands as mcu_lstm_s8 with 3H gate rows. The output must not overlap the input. */
mcu_status mcu_gru_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                      const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                      int8_t *output);

/** mcu_gru_s8 from the hidden state `state` [batch][hidden] (int8 at the output's scale and zero point) instead
 *  of the zero state: an nn.GRUCell step is a sequence of one. Scratch: mcu_gru_s8_get_buffer_size. The state
 *  overlaps neither the output nor the scratch. */
mcu_status mcu_gru_from_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                           const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                           const int8_t *state, int8_t *output);

/** mcu_lstm_s8 with 4-bit weights: w_ih [4H][input_size] and w_hh [4H][H] as codes in [-8, 7] packed two a byte,
 *  continuous across rows (element 2i in the low nibble of byte i, CMSIS-NN's s4 layout), the other operands,
 *  the scratch (mcu_lstm_s8_get_buffer_size) and the arithmetic mcu_lstm_s8's. */
mcu_status mcu_lstm_s4(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                       const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                       int8_t *output);

/** mcu_lstm_final_cell_s8 of the layer mcu_lstm_s4 ran (its 4-bit weights, packed as there). */
mcu_status mcu_lstm_final_cell_s4(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                                  const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                                  const int8_t *hidden_states, int16_t *cell_out);

/** mcu_gru_s8 with 4-bit weights packed as mcu_lstm_s4's (3H gate rows); scratch: mcu_gru_s8_get_buffer_size. */
mcu_status mcu_gru_s4(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                      const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                      int8_t *output);

#endif /* MCU_KERNELS_S8_H */
