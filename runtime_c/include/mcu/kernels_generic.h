/**
 * @file kernels_generic.h
 * @brief Data-movement kernels that work on any dtype (element size in bytes).
 */
#ifndef MCU_KERNELS_GENERIC_H
#define MCU_KERNELS_GENERIC_H

#include <stdint.h>

#include "mcu/status.h"
#include "mcu/tensor.h"

typedef struct {
    int32_t rank;                  /**< 1..MCU_MAX_DIMS */
    int32_t in_shape[MCU_MAX_DIMS];
    int32_t perm[MCU_MAX_DIMS];    /**< output dim i is input dim perm[i] */
} mcu_permute_params;

/** Transpose a contiguous tensor. Output must not overlap input. */
mcu_status mcu_permute(const mcu_permute_params *p, int32_t elem_size, const void *input, void *output);

/** Concatenate along one axis of tensors viewed as [outer][chunk_i]:
 *  for each of `outer` rows, copy chunk_bytes[i] bytes of input i in order. */
mcu_status mcu_concat(int32_t outer, int32_t n_inputs, const int32_t *chunk_bytes,
                      const void *const *inputs, void *output);

typedef struct {
    int32_t rank;                  /**< 1..MCU_MAX_DIMS */
    int32_t in_shape[MCU_MAX_DIMS];
    int32_t pad_before[MCU_MAX_DIMS];
    int32_t pad_after[MCU_MAX_DIMS];
} mcu_pad_params;

/** Constant padding; `fill` points to one element of the fill value. */
mcu_status mcu_pad(const mcu_pad_params *p, int32_t elem_size, const void *fill, const void *input,
                   void *output);

typedef struct {
    int32_t rank;                  /**< 1..MCU_MAX_DIMS */
    int32_t in_shape[MCU_MAX_DIMS];
    int32_t out_shape[MCU_MAX_DIMS];
    int32_t start[MCU_MAX_DIMS];   /**< first input index along each dim */
    int32_t step[MCU_MAX_DIMS];    /**< >= 1 */
} mcu_slice_params;

/** out[i0..] = in[start0 + i0 * step0, ...]: a strided window of a contiguous tensor. No overlap. */
mcu_status mcu_slice(const mcu_slice_params *p, int32_t elem_size, const void *input, void *output);

/** Plain copy of `bytes` bytes (reshape that cannot alias). */
mcu_status mcu_copy(int32_t bytes, const void *input, void *output);

/* --- model state ---------------------------------------------------------------------------- */

/** A state tensor seen as [outer][axis][inner] elements, written at `count` positions along `axis`. */
typedef struct {
    int32_t outer;
    int32_t axis;
    int32_t inner;
    int32_t count; /**< positions written: values are [outer][count][inner] */
} mcu_index_put_params;

/**
 * In-place write of new positions into a state tensor (aten.index_put_ with one index tensor):
 *   state[o][pos][i] = values[o][j][i] with pos = indices[j] (+ axis when negative), j in order,
 * so a repeated position keeps the last value. Only the written rows are touched: the rest of
 * the state is neither read nor copied. An index outside [-axis, axis) is MCU_ERR_INVALID_ARG,
 * checked before anything is written. `values` must not overlap the state.
 */
mcu_status mcu_index_put(const mcu_index_put_params *p, int32_t elem_size, const int32_t *indices,
                         const void *values, void *state);

/* --- selection: embedding, comparisons, where ----------------------------------------------- */

/** Rows of a [rows][cols] table gathered by `count` indices: out[j] = table[indices[j]]. */
typedef struct {
    int32_t rows;  /**< the table's first dim (the vocabulary) */
    int32_t cols;  /**< elements per row */
    int32_t count; /**< indices */
} mcu_embedding_params;

/** aten.embedding: an index outside [0, rows) is MCU_ERR_INVALID_ARG, checked before anything is
 *  written. `out` must not overlap the table or the indices. */
mcu_status mcu_embedding(const mcu_embedding_params *p, int32_t elem_size, const int32_t *indices,
                         const void *table, void *out);

/** aten.embedding of an int8 table with a float scale per row: out[j][c] = table[i][c] * scale[i] with
 *  i = indices[j] (float32 products, exactly rounded). Indices are checked as in mcu_embedding. */
mcu_status mcu_embedding_s8_f32(const mcu_embedding_params *p, const int32_t *indices, const int8_t *table,
                                const float *scales, float *out);

/** The comparison of mcu_compare (generated code embeds the values: append only). */
typedef enum { MCU_CMP_EQ = 0, MCU_CMP_NE = 1, MCU_CMP_LT = 2, MCU_CMP_LE = 3, MCU_CMP_GT = 4, MCU_CMP_GE = 5 } mcu_cmp;

/** The element type of mcu_compare's operands. */
typedef enum { MCU_CMP_FLOAT32 = 0, MCU_CMP_INT32 = 1, MCU_CMP_INT8 = 2, MCU_CMP_UINT8 = 3 } mcu_cmp_type;

/** Broadcasting operands as strides (in elements) over the output's shape, as in mcu_binary_f32_params. */
typedef struct {
    int32_t rank;
    int32_t out_shape[MCU_MAX_DIMS];
    int32_t a_strides[MCU_MAX_DIMS];
    int32_t b_strides[MCU_MAX_DIMS];
    int32_t cmp;   /**< mcu_cmp */
    int32_t type;  /**< mcu_cmp_type of both operands */
} mcu_compare_params;

/** out = a <cmp> b as bytes 0/1 (torch.bool), broadcasting. NaN compares unequal to everything. */
mcu_status mcu_compare(const mcu_compare_params *p, const void *a, const void *b, uint8_t *out);

typedef struct {
    int32_t rank;
    int32_t out_shape[MCU_MAX_DIMS];
    int32_t c_strides[MCU_MAX_DIMS];
    int32_t a_strides[MCU_MAX_DIMS];
    int32_t b_strides[MCU_MAX_DIMS];
} mcu_where_params;

/** out = cond ? a : b elementwise with broadcasting (aten.where.self); elements of `elem_size` bytes.
 *  `out` must not overlap any operand unless it is that operand laid out like the output. */
mcu_status mcu_where(const mcu_where_params *p, int32_t elem_size, const uint8_t *cond, const void *a,
                     const void *b, void *out);
/* --- resampling and data movement ------------------------------------------------------------- */

typedef struct {
    int32_t rank;                  /**< 1..MCU_MAX_DIMS */
    int32_t in_shape[MCU_MAX_DIMS];
    int32_t out_shape[MCU_MAX_DIMS];
} mcu_remap_params;

/**
 * Per-dim index tables: out[i0]..[ik] = in[t0[i0]]..[tk[ik]], with `tables` the concatenation of
 * one table per dim (out_shape[d] entries, each in [0, in_shape[d])). One kernel serves nearest
 * upsampling, flip, repeat, expand, reflect and replicate padding and index_select with constant
 * indices: the compiler computes the tables. Every entry is checked before anything is written.
 * The output must not overlap the input.
 */
mcu_status mcu_remap(const mcu_remap_params *p, int32_t elem_size, const int32_t *tables, const void *input,
                     void *output);

/** A tensor seen as [outer][axis][inner] elements, read at `count` positions along `axis`. */
typedef struct {
    int32_t outer;
    int32_t axis;
    int32_t inner;
    int32_t count; /**< positions read: the output is [outer][count][inner] */
} mcu_index_select_params;

/**
 * out[o][j][i] = in[o][indices[j]][i] (aten.index_select with run-time indices). An index outside
 * [0, axis) is MCU_ERR_INVALID_ARG, checked before anything is written. No overlap.
 */
mcu_status mcu_index_select(const mcu_index_select_params *p, int32_t elem_size, const int32_t *indices,
                            const void *input, void *output);

typedef struct {
    int32_t rank;                  /**< 1..MCU_MAX_DIMS */
    int32_t in_shape[MCU_MAX_DIMS];
    int32_t out_shape[MCU_MAX_DIMS]; /**< the index tensor's shape; out_shape[d] <= in_shape[d] off `dim` */
    int32_t dim;
} mcu_gather_params;

/**
 * torch.gather: out[i] = in[i with coordinate `dim` replaced by index[i]], both row-major. An index
 * outside [0, in_shape[dim]) is MCU_ERR_INVALID_ARG, checked before anything is written. No overlap.
 */
mcu_status mcu_gather(const mcu_gather_params *p, int32_t elem_size, const int32_t *index, const void *input,
                      void *output);

#endif /* MCU_KERNELS_GENERIC_H */
