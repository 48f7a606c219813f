/**
 * @file custom.h
 * @brief The interface of a user's own kernel (a custom op, mcu/custom.py).
 *
 * A custom kernel is one function `mcu_status f(const mcu_custom_call *call)`.
 * Tensors are in memory order; int8 tensors come with their scale and
 * zero-point. In generated code the call is direct (the kernel links only
 * into builds that use it); a program file runs it through the delegate
 * registry (delegate.h) with a small adapter per function, the backend id
 * "custom:<function>", whose payload holds the params below.
 */
#ifndef MCU_CUSTOM_H
#define MCU_CUSTOM_H

#include <stdint.h>

#include "mcu/delegate.h"
#include "mcu/status.h"

#define MCU_CUSTOM_MAX_INPUTS 4
#define MCU_CUSTOM_MAX_ARGS 8
#define MCU_CUSTOM_MAX_RANK 6

/** What the compiler knows of one call: constant for the op. */
typedef struct {
    int32_t n_inputs;
    int32_t numel;                               /**< output elements */
    int32_t rank;
    int32_t shape[MCU_CUSTOM_MAX_RANK];          /**< output dims in memory order, padded with 1s */
    int32_t input_numel[MCU_CUSTOM_MAX_INPUTS];
    float input_scale[MCU_CUSTOM_MAX_INPUTS];    /**< int8 inputs; 1 for float ones */
    int32_t input_zero_point[MCU_CUSTOM_MAX_INPUTS];
    float output_scale;                          /**< int8 output; 1 for a float one */
    int32_t output_zero_point;
    int32_t n_args;
    float args[MCU_CUSTOM_MAX_ARGS];             /**< the op's constant scalar arguments, in order */
    int32_t scratch_bytes;                       /**< the planned scratch buffer's size (0: none) */
} mcu_custom_params;

typedef struct {
    const mcu_custom_params *params;
    const void *const *inputs; /**< params->n_inputs pointers */
    void *output;
    void *scratch;             /**< the planned scratch buffer, or NULL */
    int32_t scratch_bytes;
} mcu_custom_call;

typedef mcu_status (*mcu_custom_fn)(const mcu_custom_call *call);

/** Payload magic of custom calls in program files. */
#define MCU_CUSTOM_MAGIC "MCUX"
#define MCU_CUSTOM_VERSION 1u

/**
 * Delegate adapter pieces (runtime_c/src/mcu_custom.c): init() checks that the
 * payload is a whole mcu_custom_params and points the handle at it; the
 * per-function adapter's execute() calls mcu_custom_run(). In a program file
 * the tensors are the inputs, then the scratch buffer when scratch_bytes > 0,
 * then the output.
 */
mcu_status mcu_custom_init(const uint8_t *payload, uint32_t size, void *arena, uint32_t arena_size, void **handle);
void mcu_custom_destroy(void *handle);
mcu_status mcu_custom_run(mcu_custom_fn fn, void *handle, void *const *tensors, const uint32_t *tensor_bytes,
                          uint32_t n_inputs, uint32_t n_outputs);

#endif /* MCU_CUSTOM_H */
