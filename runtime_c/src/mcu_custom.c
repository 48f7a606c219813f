/* Custom kernels in program files: the payload checks and the call every per-function adapter shares. */
#include "mcu/custom.h"

#include <stddef.h>
#include <string.h>

/* The params follow the 8-byte header, 4-byte aligned within the payload (program files align payloads). */
mcu_status mcu_custom_init(const uint8_t *payload, uint32_t size, void *arena, uint32_t arena_size, void **handle)
{
    (void)arena;
    (void)arena_size;
    if (payload == NULL || handle == NULL) {
        return MCU_ERR_NULL_POINTER;
    }
    if (size != MCU_DELEGATE_HEADER_BYTES + (uint32_t)sizeof(mcu_custom_params) ||
        ((uintptr_t)(payload + MCU_DELEGATE_HEADER_BYTES) % sizeof(int32_t)) != 0u) {
        return MCU_ERR_DELEGATE_PAYLOAD;
    }
    const mcu_custom_params *p = (const mcu_custom_params *)(const void *)(payload + MCU_DELEGATE_HEADER_BYTES);
    if (p->n_inputs < 1 || p->n_inputs > MCU_CUSTOM_MAX_INPUTS || p->rank < 0 || p->rank > MCU_CUSTOM_MAX_RANK ||
        p->numel < 0 || p->n_args < 0 || p->n_args > MCU_CUSTOM_MAX_ARGS || p->scratch_bytes < 0) {
        return MCU_ERR_DELEGATE_PAYLOAD;
    }
    *handle = (void *)(uintptr_t)p;
    return MCU_OK;
}

mcu_status mcu_custom_run(mcu_custom_fn fn, void *handle, void *const *tensors, const uint32_t *tensor_bytes,
                          uint32_t n_inputs, uint32_t n_outputs)
{
    const mcu_custom_params *p = (const mcu_custom_params *)handle;
    if (fn == NULL || p == NULL || tensors == NULL || tensor_bytes == NULL) {
        return MCU_ERR_NULL_POINTER;
    }
    const uint32_t has_scratch = p->scratch_bytes > 0 ? 1u : 0u;
    if (n_outputs != 1u || n_inputs != (uint32_t)p->n_inputs + has_scratch) {
        return MCU_ERR_SHAPE;
    }
    const void *inputs[MCU_CUSTOM_MAX_INPUTS] = {NULL};
    for (uint32_t i = 0; i < n_inputs + n_outputs; ++i) {
        if (tensors[i] == NULL) {
            return MCU_ERR_NULL_POINTER;
        }
        if (i < (uint32_t)p->n_inputs) {
            inputs[i] = tensors[i];
        }
    }
    if (has_scratch && tensor_bytes[p->n_inputs] < (uint32_t)p->scratch_bytes) {
        return MCU_ERR_BUFFER_TOO_SMALL;
    }
    const mcu_custom_call call = {p, inputs, tensors[n_inputs], has_scratch ? tensors[p->n_inputs] : NULL,
                                  has_scratch ? p->scratch_bytes : 0};
    return fn(&call);
}

/* The handle points into the payload, which the program owns: nothing to release. */
void mcu_custom_destroy(void *handle)
{
    (void)handle;
}
