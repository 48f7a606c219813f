/**
 * @file program.h
 * @brief The program interpreter: load, verify and run mcu program files.
 *
 * A program file (schema: runtime_c/schema/program.fbs) holds named methods,
 * each a list of kernel calls over tensors that live in caller-supplied
 * arenas or in constant segments of the file. The interpreter reads the file
 * where it lies (flash or RAM) without copying it and never allocates.
 *
 * mcu_program_load() verifies the whole file before anything else may use
 * it: the header, sizes and CRC-32, every flatbuffer offset and length,
 * every tensor's shape, size, alignment and placement, every kernel id,
 * operand dtype and parameter count, and for every kernel call that each
 * operand holds at least the bytes the parameters make the kernel touch.
 * A malformed file gets a status code, never a fault. mcu_program_execute()
 * then checks that the caller's arenas are large enough.
 *
 * File layout (all little-endian):
 *
 *     offset  field
 *      0      magic "MCUP" (program) or "MCUW" (external weights)
 *      4      u32 format version (MCU_PROGRAM_FORMAT_VERSION)
 *      8      u32 header size (64)
 *     12      u32 total file size
 *     16      u32 flatbuffer offset (64; weights files: 64 with size 0)
 *     20      u32 flatbuffer size
 *     24      u32 data offset (a multiple of 16, after the flatbuffer)
 *     28      u32 data size (total size = data offset + data size)
 *     32      u8[16] content id (weights files: truncated SHA-256 of the data)
 *     48      u32 flags (bit 0: the program expects external weights; any other bit,
 *             or any bit in a weights file, is refused)
 *     52      u32[2] reserved, must be zero
 *     60      u32 CRC-32 (IEEE) of bytes [0, 60) followed by [64, total)
 *
 * The bytes between the flatbuffer and the data, and between and after the
 * segments of a data region (segments lie in the order of the segments
 * vector), are zero: the loader checks them, with or without the CRC.
 */
#ifndef MCU_PROGRAM_H
#define MCU_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/delegate.h"
#include "mcu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MCU_PROGRAM_FORMAT_VERSION 1u
#define MCU_PROGRAM_HEADER_SIZE 64u
/** Alignment of the file in memory, of arenas and of every segment. */
#define MCU_PROGRAM_ALIGN 16u
#define MCU_PROGRAM_MAX_ARENAS 4u
#define MCU_PROGRAM_MAX_RANK 8u
#define MCU_PROGRAM_MAX_OPERANDS 16u
#define MCU_PROGRAM_MAX_PARAMS 32u
/** Iterations of a MCU_K_LOOP (rows of the largest image a fused block runs a band at a time). */
#define MCU_PROGRAM_MAX_ITERATIONS 4096u

/** mcu_program_options.flags: skip the CRC-32s, the file's and the external
 *  segments' (for fuzzing the verifier). */
#define MCU_PROGRAM_SKIP_CHECKSUM 1u
/** Arena bytes a method may ask for when the caller names no limit: above the
 *  SRAM of any microcontroller the project targets. */
#define MCU_PROGRAM_DEFAULT_ARENA_LIMIT (16u << 20)

typedef enum {
    MCU_DTYPE_FLOAT32 = 0,
    MCU_DTYPE_INT8 = 1,
    MCU_DTYPE_INT16 = 2,
    MCU_DTYPE_INT32 = 3,
    MCU_DTYPE_UINT8 = 4,
    MCU_DTYPE_INT64 = 5 /* constants only: the 16x8 layers' biases */
} mcu_dtype;

/**
 * Kernel ids of Instruction.kernel, with each kernel's operands (tensor ids,
 * last one the output) and params (32-bit words: the params struct's fields
 * in declaration order, then the scalar arguments of the C call).
 * Keep in step with mcu/program/format.py (KERNEL_IDS).
 */
typedef enum {
    MCU_K_CONV2D_F32 = 1,         /**< [in, weight, bias?, out]; mcu_conv2d_f32_params */
    MCU_K_LINEAR_F32 = 2,         /**< [in, weight, bias?, out]; mcu_linear_f32_params */
    MCU_K_MAX_POOL2D_F32 = 3,     /**< [in, out]; mcu_pool2d_f32_params */
    MCU_K_AVG_POOL2D_F32 = 4,     /**< [in, out]; mcu_pool2d_f32_params */
    MCU_K_MEAN_HW_F32 = 5,        /**< [in, out]; mcu_shape4 */
    MCU_K_ADD_F32 = 6,            /**< [a, b, out]; mcu_binary_f32_params */
    MCU_K_SUB_F32 = 7,
    MCU_K_MUL_F32 = 8,
    MCU_K_DIV_F32 = 9,
    MCU_K_CLAMP_F32 = 10,         /**< [in, out]; size, min (f32), max (f32) */
    MCU_K_SIGMOID_F32 = 11,       /**< [in, out]; size */
    MCU_K_TANH_F32 = 12,
    MCU_K_HARDSWISH_F32 = 13,
    MCU_K_SOFTMAX_F32 = 14,       /**< [in, out]; outer, axis, inner */
    MCU_K_BATCH_NORM_F32 = 15,    /**< [scale, shift, in, out]; outer, channels, inner */
    MCU_K_PERMUTE = 16,           /**< [in, out] any dtype; mcu_permute_params */
    MCU_K_CONCAT = 17,            /**< [in_0 .. in_k-1, out] any dtype; outer, chunk_bytes[k] */
    MCU_K_PAD = 18,               /**< [in, out] f32 or int8; mcu_pad_params, fill value */
    /** [in, weight, bias?, multipliers, shifts, scratch?, out]; mcu_conv2d_s8_params. The scratch
     *  operand (an int8 arena tensor, or -1 for none) becomes the kernel's mcu_context. */
    MCU_K_CONV2D_S8 = 19,
    MCU_K_DEPTHWISE_CONV2D_S8 = 20, /**< as conv2d; mcu_depthwise_conv2d_s8_params */
    MCU_K_LINEAR_S8 = 21,         /**< as conv2d; mcu_linear_s8_params */
    MCU_K_ADD_S8 = 22,            /**< [a, b, out]; mcu_binary_s8_params */
    MCU_K_SUB_S8 = 23,
    MCU_K_MUL_S8 = 24,
    MCU_K_MAX_POOL2D_S8 = 25,     /**< [in, out]; mcu_pool2d_s8_params */
    MCU_K_AVG_POOL2D_S8 = 26,
    MCU_K_MEAN_HW_S8 = 27,        /**< [in, out]; mcu_mean_hw_s8_params */
    MCU_K_SOFTMAX_S8 = 28,        /**< [in, out]; mcu_softmax_s8_params */
    MCU_K_LUT_S8 = 29,            /**< [table, in, out]; size */
    MCU_K_REQUANTIZE_S8 = 30,     /**< [in, out]; size, input_offset, multiplier, shift, output_offset, act_min, act_max */
    MCU_K_CLAMP_S8 = 31,          /**< [in, out]; size, act_min, act_max */
    MCU_K_QUANTIZE_F32_S8 = 32,   /**< [in f32, out int8]; size, inv_scale (f32), zero_point */
    MCU_K_DEQUANTIZE_S8_F32 = 33, /**< [in int8, out f32]; size, scale (f32), zero_point */
    MCU_K_CONV2D_1X1_S8 = 34,     /**< as conv2d (pixel-buffer variant; scratch required) */
    /** as depthwise; runs in place on the output's memory (in and out share it); scratch required */
    MCU_K_DEPTHWISE_CONV2D_S8_INPLACE = 35,
    MCU_K_LINEAR_W8_F32 = 36,     /**< [in f32, weight int8, w_scale f32, bias f32, out f32]; mcu_linear_f32_params */
    MCU_K_LINEAR_DYN_S8 = 37,     /**< [scratch int8, in f32, weight int8, w_scale f32, bias f32, out f32]; as above */
    MCU_K_SLICE = 38,             /**< [in, out] any dtype; mcu_slice_params */
    /* convolutions: ids 100-139. */
    MCU_K_CONV_TRANSPOSE2D_F32 = 100, /**< as conv2d_f32; no operand may overlap the output */
    MCU_K_CONV_TRANSPOSE2D_S8 = 101,  /**< as conv2d_s8 (scratch unused); no operand may overlap the output */
    MCU_K_CONV_TRANSPOSE2D_PHASED_S8 = 102, /**< as conv_transpose2d_s8; weights by phase; dilation 1, one group */
    MCU_K_CONV2D_GROUPED_S8 = 103,    /**< as conv2d_s8 (groups > 1) */
    /* 4-bit weights two a byte with int8 activations (w4a8); the weight operand holds ceil(count / 2) bytes;
     * no operand may overlap the output */
    MCU_K_CONV2D_S4 = 104,            /**< as conv2d_s8 (scratch unused) */
    MCU_K_DEPTHWISE_CONV2D_S4 = 105,  /**< as depthwise_conv2d_s8 */
    MCU_K_LINEAR_S4 = 106,            /**< as linear_s8 */
    /* int16 activations with int8 weights (w8a16, runtime_c/include/mcu/kernels_s16.h): [in int16, weight int8,
     * bias int64?, multiplier int32, shift int32, scratch (unused), out int16]; no operand may overlap the output */
    MCU_K_LINEAR_S16 = 110,           /**< mcu_linear_s16_params */
    MCU_K_CONV2D_S16 = 111,           /**< mcu_conv2d_s16_params (weights OHWI, one group) */
    MCU_K_DEPTHWISE_CONV2D_S16 = 112, /**< mcu_depthwise_conv2d_s16_params (weights [kh][kw][out_c]) */
    MCU_K_MEAN_S16 = 113,             /**< [in int16, out int16]; mcu_mean_s16_params; no overlap */
    MCU_K_ADD_S16 = 114,              /**< [a int16, b int16, out int16]; mcu_add_s16_params (same shapes) */
    MCU_K_MAX_POOL2D_S16 = 115,       /**< [in int16, out int16]; mcu_pool2d_s16_params; no overlap */
    MCU_K_AVG_POOL2D_S16 = 116,       /**< as max_pool2d_s16 */
    MCU_K_CLAMP_S16 = 117,            /**< [in int16, out int16]; size, act_min, act_max */
    /** [scratch int8, in int16, w_ih int8, w_hh int8, bias int64, quant int32, out int16]; mcu_lstm_s16_params;
     *  no operand may overlap the output */
    MCU_K_LSTM_S16 = 118,
    /** [scratch int8, in int16, state int16 (absent: the zero state), w_ih int8, w_hh int8, bias int64,
     *  quant int32, out int16]; mcu_gru_s16_params; no operand may overlap the output */
    MCU_K_GRU_S16 = 119,
    MCU_K_ACTIVATION_S16 = 123,       /**< [in int16, out int16]; mcu_activation_s16_params (sigmoid, tanh) */
    MCU_K_MUL_S16 = 124,              /**< [a int16, b int16, out int16]; mcu_mul_s16_params (same shapes) */
    MCU_K_SOFTMAX_S16 = 125,          /**< [in int16, out int16]; mcu_softmax_s16_params */
    MCU_K_BMM_S16 = 131,              /**< [a int16, b int16, out int16]; mcu_bmm_s16_params */
    /** [in int16, multipliers int32, shifts int32, bias int32 (Q8), out int16]; mcu_layer_norm_s16_params */
    MCU_K_LAYER_NORM_S16 = 132,
    MCU_K_LOG_SOFTMAX_S16 = 133,      /**< [in int16, out int16]; mcu_log_softmax_s16_params */
    /** [hidden uint8, in int16, out int16]; mcu_softmax_masked_s16_params */
    MCU_K_SOFTMAX_MASKED_S16 = 170,
    /** [scratch int8, in int16, hidden states int16, state int16?, cell int16?, w_ih int8, w_hh int8, bias int64,
     *  quant int32, cell out int16]; mcu_lstm_s16_params (of the layer); no operand may overlap the output */
    MCU_K_LSTM_FINAL_CELL_S16 = 171,
    /** [in int16, weight int8 OHWI (in_c / groups), bias int64?, multipliers int32, shifts int32, scratch?, out
     *  int16]; mcu_conv2d_grouped_s16_params */
    MCU_K_CONV2D_GROUPED_S16 = 172,
    /** [scratch int8, in int8, w_ih int8, w_hh int8, rows int32, table int16, hidden states int8, cell out int16];
     *  mcu_recurrent_s8_params (of the layer) */
    MCU_K_LSTM_FINAL_CELL_S8 = 174,
    MCU_K_CONV_TRANSPOSE2D_GROUPED_S16 = 173,
    MCU_K_ADAPTIVE_AVG_POOL_S16 = 176, /**< [in int16, out int16]; mcu_resample_s8_params */
    MCU_K_QUANTIZE_F32_S16 = 178, /**< [in f32, out int16]; size, 1 / scale, zero point (w8a16) */
    MCU_K_DEQUANTIZE_S16_F32 = 177, /**< [in int16, out f32]; size, scale, zero point (w8a16's compare input) */
    MCU_K_ARGMAX_S16 = 175, /**< [in int16, out int32]; outer, reduce, inner */ /**< as MCU_K_CONV2D_GROUPED_S16, the transposed window */
    MCU_K_REQUANTIZE_S16 = 126,       /**< [in int16, out int16]; mcu_requantize_s16_params */
    MCU_K_SUB_S16 = 127,              /**< [a int16, b int16, out int16]; mcu_add_s16_params (same shapes) */
    MCU_K_LUT_S16 = 128,              /**< [table int16 (513), in int16, out int16]; size */
    MCU_K_MAXIMUM_S16 = 129,          /**< [a int16, b int16, out int16]; mcu_add_s16_params (same shapes) */
    MCU_K_MINIMUM_S16 = 130,
    /* The borders between int8 and int16 activations (--quantize mixed); the output overlaps no input byte. */
    /** [in int16, out int8]; size, multiplier, shift, output_offset, act_min, act_max */
    MCU_K_REQUANTIZE_S16_S8 = 138,
    /** [in int8, out int16]; size, input_offset, multiplier, shift, act_min, act_max */
    MCU_K_REQUANTIZE_S8_S16 = 139,
    /* Look-up-table weights (--weight-palette): [in, indices uint8, bias?, multipliers, shifts, scratch,
     * tables int8, out]; the int8 kernel's params, then the palette word: the index width in bits (2 to 4), plus
     * MCU_LUT_SHARED (16) for one table. Indices: a byte-padded row of ceil(taps * bits / 8) bytes per output
     * channel; tables: 2^bits per channel, or 2^bits in all; the
     * scratch (required) holds one channel's taps (the whole tensor for the depthwise one). */
    MCU_K_CONV2D_LUT_S8 = 120,        /**< as conv2d_s8, one group; no overlap of input and output */
    MCU_K_DEPTHWISE_CONV2D_LUT_S8 = 121, /**< as depthwise_conv2d_s8 */
    MCU_K_LINEAR_LUT_S8 = 122,        /**< as linear_s8 */
    /* The same with int16 activations (w8a16): the 16x8 kernel's params, then the palette word; the
     * scratch holds the whole decoded tensor. */
    MCU_K_CONV2D_LUT_S16 = 221,           /**< as conv2d_s16 */
    MCU_K_DEPTHWISE_CONV2D_LUT_S16 = 222, /**< as depthwise_conv2d_s16 */
    MCU_K_LINEAR_LUT_S16 = 223,           /**< as linear_s16 */
    /* 4-bit groupwise weights and model state: ids 230-239. */
    /** [in f32, weight uint8 (int4 pairs), w_scale f32, bias f32?, out f32]; mcu_linear_w4_params */
    MCU_K_LINEAR_W4_F32 = 230,
    /** [scratch int8 (2 * in bytes), in f32, weight uint8, w_scale f32, bias f32?, out f32]; as above */
    MCU_K_LINEAR_W4_S8 = 231,
    /** [indices int32, values, state] f32 or int8; mcu_index_put_params, element size. The state
     *  operand is written at the indexed rows only (it is the output). */
    MCU_K_INDEX_PUT = 232,
    /** [a, b, out uint8] a and b of the params' type; mcu_compare_params */
    MCU_K_COMPARE = 233,
    /** [cond uint8, a, b, out] a, b, out of one dtype; mcu_where_params, element size */
    MCU_K_WHERE = 234,
    /** [indices int32, table, out] f32 or int8; mcu_embedding_params, element size */
    MCU_K_EMBEDDING = 235,
    /** [indices int32, table int8, scales f32 (one per row), out f32]; mcu_embedding_params */
    MCU_K_EMBEDDING_S8_F32 = 236,
    /* normalisation, reductions and int8 activations: ids 180-219. */
    MCU_K_UNARY_F32 = 180,        /**< [in, out]; mcu_unary_f32_params */
    MCU_K_LAYER_NORM_F32 = 181,   /**< [in, weight?, bias?, out]; mcu_layer_norm_f32_params */
    MCU_K_BMM_F32 = 182,          /**< [a, b, out]; mcu_bmm_f32_params */
    MCU_K_REDUCE_F32 = 183,       /**< [in, out]; mcu_reduce_f32_params */
    MCU_K_MAXIMUM_F32 = 184,      /**< [a, b, out]; mcu_binary_f32_params */
    MCU_K_MINIMUM_F32 = 185,
    /** [in int8, multipliers int32, shifts int32, bias int32, out int8]; mcu_layer_norm_s8_params */
    MCU_K_LAYER_NORM_S8 = 186,
    MCU_K_GROUP_NORM_F32 = 187,   /**< [in, weight?, bias?, out]; mcu_group_norm_f32_params */
    MCU_K_VAR_F32 = 188,          /**< [in, out]; mcu_var_f32_params */
    MCU_K_ARGMAX_F32 = 189,       /**< [in f32, out int32]; outer, reduce, inner */
    MCU_K_ARGMAX_S8 = 190,        /**< [in int8, out int32]; outer, reduce, inner */
    MCU_K_LOG_SOFTMAX_F32 = 191,  /**< [in, out]; outer, axis, inner */
    MCU_K_PRELU_F32 = 192,        /**< [in, weight, out]; mcu_prelu_f32_params */
    MCU_K_COUNT = 255, /* one past the largest id (integer elementwise and softmax kernels: 250-259) */
    /* resampling and data movement: ids 140-179. */
    /** [tables int32, in, out] any dtype; mcu_remap_params, element size */
    MCU_K_REMAP = 140,
    /** [indices int32, in, out] any dtype; mcu_index_select_params, element size */
    MCU_K_INDEX_SELECT = 141,
    /** [index int32, in, out] any dtype; mcu_gather_params, element size */
    MCU_K_GATHER = 142,
    /** [index int32, lambda f32, in f32, out f32]; mcu_resample_f32_params */
    MCU_K_RESIZE_BILINEAR_F32 = 143,
    /** [index int32 (with 10-bit weights), in int8, out int8]; mcu_resample_s8_params */
    MCU_K_RESIZE_BILINEAR_S8 = 144,
    MCU_K_ADAPTIVE_AVG_POOL_F32 = 145, /**< [in, out]; mcu_resample_f32_params */
    MCU_K_ADAPTIVE_AVG_POOL_S8 = 146,  /**< [in, out]; mcu_resample_s8_params */
    MCU_K_AMAX_S16 = 147,         /**< [in int16, out int16]; mcu_mean_s16_params; no overlap */
    MCU_K_AMIN_S16 = 148,         /**< as MCU_K_AMAX_S16 */
    /** [index int32 (with 10-bit weights), in int16, out int16]; mcu_resample_s8_params */
    MCU_K_RESIZE_BILINEAR_S16 = 149,
    /** [in int16, weight int8 OHWI, bias int64?, multipliers, shifts, scratch?, out int16]; mcu_conv2d_s16_params
     *  with the transposed window */
    MCU_K_CONV_TRANSPOSE2D_S16 = 163,
    MCU_K_DIV_S16 = 164,          /**< [a, b, out] int16; mcu_div_s16_params */
    MCU_K_CONV_TRANSPOSE2D_PHASED_S16 = 165, /**< as MCU_K_CONV_TRANSPOSE2D_S16, dilation 1, weights by phase */
    MCU_K_REDUCE_S8 = 193,        /**< [in, out]; mcu_reduce_s8_params */
    MCU_K_RMS_NORM_F32 = 194,     /**< [in, weight?, out]; mcu_layer_norm_f32_params */
    MCU_K_BMM_S8 = 195,           /**< [a, b, out] int8; mcu_bmm_s8_params */
    MCU_K_SOFTMAX_MASKED_S8 = 196, /**< [hidden uint8, in, out]; mcu_softmax_masked_s8_params */
    /* integer recurrent layers: ids 240-249. */
    /** [scratch int8, in int8, w_ih int8, w_hh int8, rows int32, table int16, out int8]; mcu_recurrent_s8_params */
    MCU_K_LSTM_S8 = 240,
    MCU_K_GRU_S8 = 241,           /**< operands and params as MCU_K_LSTM_S8 */
    /** as MCU_K_LSTM_S8, MCU_K_GRU_S8 and MCU_K_LSTM_FINAL_CELL_S8 with w_ih and w_hh 4-bit, packed two a byte */
    MCU_K_LSTM_S4 = 215,
    MCU_K_GRU_S4 = 216,
    MCU_K_LSTM_FINAL_CELL_S4 = 217,
    /** [scratch, in, w_ih, w_hh, rows, table, state int8 [batch][hidden], out] as MCU_K_GRU_S8 from the given
     *  state; mcu_recurrent_s8_params */
    MCU_K_GRU_FROM_S8 = 227,
    /* integer elementwise and softmax kernels: ids 250-259. */
    MCU_K_MAXIMUM_S8 = 250,       /**< [a, b, out]; mcu_binary_s8_params (the add's rescaling) */
    MCU_K_MINIMUM_S8 = 251,
    MCU_K_DIV_S8 = 252,           /**< [a, b, out]; mcu_binary_s8_params (out multiplier only) */
    MCU_K_PRELU_S8 = 253,         /**< [in, alpha int8, out]; mcu_prelu_s8_params */
    MCU_K_LOG_SOFTMAX_S8 = 254,   /**< [exp table int32 (256), in, out]; mcu_log_softmax_s8_params */
    /** A delegated partition: params delegate index (its payload and handle), number of outputs (the last operands). */
    MCU_K_DELEGATE = 255,
    /* Steps of the interpreter itself (no kernel, no row in mcu_kernels.def): ids above 255. */
    /** No operands; params count, body: the next `body` instructions run `count` times in order. A body
     *  instruction runs at the iterations [first, end) of its `iterations` field (absent: all) with each
     *  operand `strides[k] * (iteration - first)` bytes further into its arena; the loader checks every
     *  iteration's operands against the arena and the kernel's contract. Neither loops nor delegates nest. */
    MCU_K_LOOP = 256,
    /** [out]; params the value (-128..255) every byte of out takes (a ring's padding rows: a zero point). */
    MCU_K_FILL = 257,
    /** [in, out], arena tensors of equal size that may overlap (memmove): rows a ring keeps for the next pass. */
    MCU_K_MOVE = 258,
    /** A streamed prefix (mcu/program/prefix.py): [table int32 constant, rings int8 arena or -1, streamed
     *  input or -1]; params ops, rings, consumers, body, steps, descriptors. The next `body` instructions are
     *  the row calls of the prefix's ops, each at its tensors' first rows; the table's steps, each (op, rows),
     *  say which op makes its next rows, and op `ops` reads the streamed input's next rows through the
     *  caller's mcu_program_input_rows_fn. Each ring of rows keeps the rows its consumers still read, moving
     *  them to its start when the next rows would not fit; a body operand's place moves by its descriptor's
     *  row (y * s + c, y the step's first row) less its ring's first kept row, times its row bytes. The
     *  loader replays the whole schedule and checks every call at every step (rings, row ranges, arena
     *  bounds, the kernel's contract). Table (int32 words): steps [op, rows] x steps; ops [height, ring] x
     *  (ops + 1), the last the streamed input's; rings [offset, row bytes, capacity in rows, first consumer,
     *  consumers] x rings; consumers [op, stride, padding] x consumers; body [op, first row, last row, rows,
     *  first descriptor, descriptors] x body; descriptors [operand, ring or -1, s, c, row bytes] x descriptors. */
    MCU_K_ROWS = 259
} mcu_program_kernel;

/** Most ops (and rings) of one MCU_K_ROWS prefix. */
#define MCU_PROGRAM_MAX_ROWS_OPS 64u

/**
 * Writes rows `first_row` .. `first_row + rows - 1` of a method's streamed input (its memory order,
 * channels last, a row `nbytes / height` bytes) to `rows_out` and returns MCU_OK, or a status that ends
 * the run. The method asks for its rows top to bottom, each once; `context` is the caller's, passed
 * through (the same contract as the generated C's `<model>_input_rows`).
 */
typedef mcu_status (*mcu_program_input_rows_fn)(void *context, int32_t first_row, int32_t rows, void *rows_out);


/** Optional inputs of mcu_program_load(); NULL means none of them. */
typedef struct {
    const void *weights;        /**< external weights file (16-byte aligned), or NULL */
    uint32_t weights_size;
    /** The delegate registry (runtime_c/include/mcu/delegate.h): backends this build links. */
    const mcu_delegate_backend *const *delegates;
    uint32_t n_delegates;
    uint32_t flags;             /**< MCU_PROGRAM_SKIP_CHECKSUM */
    /** Caller-owned storage for one handle per delegated partition of the program (its
     * `delegates` vector); mcu_program_load() fails with MCU_ERR_BUFFER_TOO_SMALL when short. */
    void **delegate_handles;
    uint32_t n_delegate_handles;
    /** The most arena bytes one method may ask for (the platform's RAM for arenas);
     *  0: MCU_PROGRAM_DEFAULT_ARENA_LIMIT. A method asking for more fails to load
     *  with MCU_ERR_ARENA_LIMIT. */
    uint32_t arena_limit;
} mcu_program_options;

/** A verified program. Plain data pointing into the caller's buffers. */
typedef struct {
    const uint8_t *fb;          /**< the flatbuffer */
    uint32_t fb_size;
    uint32_t root;              /**< offset of the root table in fb */
    const uint8_t *data;        /**< inline segment data */
    uint32_t data_size;
    const uint8_t *weights;     /**< external segment data (NULL if none) */
    uint32_t weights_size;
    const mcu_delegate_backend *const *delegates;
    uint32_t n_delegates;
    void **delegate_handles;    /**< one per program delegate, made at load */
    uint32_t n_methods;
} mcu_program;

typedef struct {
    const char *name;
    uint32_t n_inputs, n_outputs;
    uint32_t n_instructions;
    uint32_t n_bundled;         /**< bundled test vectors */
    uint32_t n_arenas;
    uint32_t arena_sizes[MCU_PROGRAM_MAX_ARENAS];
} mcu_program_method_info;

typedef struct {
    const char *name;
    uint32_t dtype;             /**< mcu_dtype */
    uint32_t rank;
    int32_t shape[MCU_PROGRAM_MAX_RANK];     /**< logical order */
    uint8_t dim_order[MCU_PROGRAM_MAX_RANK]; /**< memory order of the logical dims */
    uint32_t arena;
    uint32_t offset;            /**< bytes into the arena */
    uint32_t nbytes;
    uint32_t quantized;         /**< 1 when scale/zero_point hold per-tensor parameters */
    float scale;
    int32_t zero_point;
    uint32_t streamed;          /**< an input read by rows through mcu_program_input_rows_fn: in no arena */
} mcu_program_tensor_info;

/**
 * The total size a program or weights file declares, read from the header
 * alone (for a file in a flash region larger than the file).
 * Fails with MCU_ERR_PROGRAM_INVALID (bad magic), MCU_ERR_PROGRAM_VERSION or
 * MCU_ERR_PROGRAM_TRUNCATED (declared size beyond `size`).
 */
mcu_status mcu_program_declared_size(const void *buffer, uint32_t size, uint32_t *total);

/**
 * Verify `buffer` (exactly the file's bytes, 16-byte aligned) and fill `program`.
 * Status: MCU_ERR_PROGRAM_TRUNCATED / _OVERSIZED when `size` differs from the
 * declared size, _CHECKSUM for corrupted bytes of the program, _VERSION,
 * _INVALID for any structural fault, MCU_ERR_WEIGHTS_MISMATCH for missing or
 * foreign external weights (or a weights file that is none: magic, version,
 * sizes), MCU_ERR_WEIGHTS_CORRUPT when the weights file's own CRC-32 fails or
 * an external weights segment's bytes differ from the CRC-32 the program
 * records for it (a weights file with a changed byte and its own header CRC
 * recomputed), MCU_ERR_ARENA_LIMIT when a
 * method's arenas add up to more than options->arena_limit,
 * MCU_ERR_UNSUPPORTED for a kernel or backend this build lacks,
 * MCU_ERR_BUFFER_TOO_SMALL for too few delegate handles, and a delegate's
 * init() status (MCU_ERR_DELEGATE_*) for a payload its backend refuses.
 */
mcu_status mcu_program_load(mcu_program *program, const void *buffer, uint32_t size,
                            const mcu_program_options *options);

/** Destroys the handle of every delegated partition (made at load by the backend's init()). */
void mcu_program_unload(mcu_program *program);

mcu_status mcu_program_method(const mcu_program *program, uint32_t method, mcu_program_method_info *info);
/** Index of the method called `name`, or MCU_ERR_NOT_FOUND. */
mcu_status mcu_program_find_method(const mcu_program *program, const char *name, uint32_t *method);
/** Input (`output` = 0) or output (`output` = 1) number `index` of a method. */
mcu_status mcu_program_io(const mcu_program *program, uint32_t method, uint32_t output, uint32_t index,
                          mcu_program_tensor_info *info);

/**
 * Run a method on inputs already placed in the arenas (see mcu_program_io:
 * input i lives at arenas[info.arena] + info.offset; outputs likewise).
 * `arenas` must be 16-byte aligned and at least the method's arena sizes
 * (MCU_ERR_BUFFER_TOO_SMALL otherwise).
 */
mcu_status mcu_program_execute(const mcu_program *program, uint32_t method, uint8_t *const *arenas,
                               const uint32_t *arena_sizes, uint32_t n_arenas);

/** Copy inputs into the arenas, execute, copy outputs out (nbytes each). A streamed input is read from
 *  `inputs` a band of rows at a time, as the method asks for it. */
mcu_status mcu_program_run(const mcu_program *program, uint32_t method, uint8_t *const *arenas,
                           const uint32_t *arena_sizes, uint32_t n_arenas, const void *const *inputs,
                           void *const *outputs);

/** As mcu_program_execute(), the method's streamed input (mcu_program_io: `streamed`) read through
 *  `input_rows` (with `context`). A method without one never calls it; one with it and no reader fails
 *  with MCU_ERR_NULL_POINTER when it first asks for rows. */
mcu_status mcu_program_execute_streamed(const mcu_program *program, uint32_t method, uint8_t *const *arenas,
                                        const uint32_t *arena_sizes, uint32_t n_arenas,
                                        mcu_program_input_rows_fn input_rows, void *context);

/** As mcu_program_run(), the streamed input read through `input_rows` (its entry of `inputs` unused: it
 *  may be NULL). */
mcu_status mcu_program_run_streamed(const mcu_program *program, uint32_t method, uint8_t *const *arenas,
                                    const uint32_t *arena_sizes, uint32_t n_arenas, const void *const *inputs,
                                    void *const *outputs, mcu_program_input_rows_fn input_rows, void *context);

/**
 * Bundled test vector `vector` of a method: the bytes of input (`expected` = 0)
 * or expected output (`expected` = 1) number `index`, and that output's
 * tolerance (negative: bit-exact).
 */
mcu_status mcu_program_bundled(const mcu_program *program, uint32_t method, uint32_t vector, uint32_t expected,
                               uint32_t index, const uint8_t **data, uint32_t *size, float *tolerance);

#ifdef __cplusplus
}
#endif

#endif /* MCU_PROGRAM_H */
