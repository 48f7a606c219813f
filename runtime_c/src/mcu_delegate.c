#include <stddef.h>

#include "mcu/delegate.h"

static int same_id(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b) {
        ++a;
        ++b;
    }
    return *a == *b;
}

const mcu_delegate_backend *mcu_delegate_find(const mcu_delegate_backend *const *registry, uint32_t n,
                                              const char *id)
{
    if (registry == NULL || id == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < n; ++i) {
        if (registry[i] != NULL && registry[i]->id != NULL && same_id(registry[i]->id, id)) {
            return registry[i];
        }
    }
    return NULL;
}

mcu_status mcu_delegate_init(const mcu_delegate_backend *backend, const uint8_t *payload, uint32_t size,
                             void *arena, uint32_t arena_size, void **handle)
{
    MCU_REQUIRE(backend != NULL && payload != NULL && handle != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(arena != NULL || arena_size == 0, MCU_ERR_NULL_POINTER);
    *handle = NULL;
    MCU_REQUIRE(size >= MCU_DELEGATE_HEADER_BYTES, MCU_ERR_DELEGATE_BACKEND);
    for (uint32_t i = 0; i < 4; ++i) {
        MCU_REQUIRE(payload[i] == backend->magic[i], MCU_ERR_DELEGATE_BACKEND);
    }
    const uint32_t version = (uint32_t)payload[4] | ((uint32_t)payload[5] << 8) | ((uint32_t)payload[6] << 16) |
                             ((uint32_t)payload[7] << 24);
    MCU_REQUIRE(version == backend->version, MCU_ERR_DELEGATE_VERSION);
    return backend->init(payload, size, arena, arena_size, handle);
}

mcu_status mcu_delegate_execute(const mcu_delegate_backend *backend, void *handle, void *const *tensors,
                                const uint32_t *tensor_bytes, uint32_t n_inputs, uint32_t n_outputs)
{
    MCU_REQUIRE(backend != NULL && handle != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(tensors != NULL && tensor_bytes != NULL, MCU_ERR_NULL_POINTER);
    return backend->execute(handle, tensors, tensor_bytes, n_inputs, n_outputs);
}

void mcu_delegate_destroy(const mcu_delegate_backend *backend, void **handle)
{
    if (backend != NULL && handle != NULL && *handle != NULL) {
        backend->destroy(*handle);
        *handle = NULL;
    }
}
