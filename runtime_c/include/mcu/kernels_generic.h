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

/* --- model state (issue 17) -------------------------------------------------------------------- */

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

/* --- resampling and data movement (issue 18) ---------------------------------------------------- */

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
