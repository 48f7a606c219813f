/**
 * @file delegate.h
 * @brief The delegate backend registry: one interface for every backend that
 * runs a partition of the graph from a payload (XNNPACK, an NPU, ...).
 *
 * A payload is bytes made by the backend's Python `preprocess` (mcu/backends):
 * it starts with the backend's 4-byte magic and a little-endian u32 version.
 * mcu_delegate_init() checks both before the backend sees the payload, so a
 * payload for another backend or another version is refused with a status
 * code; the backend's own init() refuses a corrupt body.
 *
 * Generated code and the program interpreter both go through this interface:
 * init once per partition (the caller owns the handle's storage), execute per
 * inference, destroy at deinit. A build links only the backends it names, and
 * a model without delegated partitions links none of this.
 */
#ifndef MCU_DELEGATE_H
#define MCU_DELEGATE_H

#include <stdint.h>

#include "mcu/status.h"

#define MCU_DELEGATE_HEADER_BYTES 8u /**< magic (4 bytes) + version (u32 little-endian) */

typedef struct mcu_delegate_backend {
    const char *id;      /**< the Python Backend.id, e.g. "xnnpack" */
    uint8_t magic[4];    /**< the payload's first four bytes */
    uint32_t version;    /**< the payload version this build reads */
    /**
     * Build a runnable partition from `payload` (header included). `arena` is
     * memory the caller lends for the partition's lifetime (may be NULL with
     * `arena_size` 0 for backends that allocate on their own, e.g. on Linux).
     */
    mcu_status (*init)(const uint8_t *payload, uint32_t size, void *arena, uint32_t arena_size, void **handle);
    /**
     * Run the partition: `tensors` holds its inputs then its outputs (in the
     * order of the payload's boundary), `tensor_bytes` their sizes.
     */
    mcu_status (*execute)(void *handle, void *const *tensors, const uint32_t *tensor_bytes, uint32_t n_inputs,
                          uint32_t n_outputs);
    void (*destroy)(void *handle);
} mcu_delegate_backend;

/** The backend called `id` among `registry[0..n)`, or NULL. */
const mcu_delegate_backend *mcu_delegate_find(const mcu_delegate_backend *const *registry, uint32_t n,
                                              const char *id);

/**
 * Check the payload header against `backend`, then call its init().
 * MCU_ERR_DELEGATE_BACKEND: the magic is another backend's (or the payload is
 * shorter than a header); MCU_ERR_DELEGATE_VERSION: another version;
 * MCU_ERR_DELEGATE_PAYLOAD (from the backend): a corrupt body.
 */
mcu_status mcu_delegate_init(const mcu_delegate_backend *backend, const uint8_t *payload, uint32_t size,
                             void *arena, uint32_t arena_size, void **handle);

/** Run an initialised partition; MCU_ERR_NULL_POINTER for a handle that init() did not fill. */
mcu_status mcu_delegate_execute(const mcu_delegate_backend *backend, void *handle, void *const *tensors,
                                const uint32_t *tensor_bytes, uint32_t n_inputs, uint32_t n_outputs);

/** Release a handle (NULL is ignored) and clear it. */
void mcu_delegate_destroy(const mcu_delegate_backend *backend, void **handle);

/**
 * MCU_DELEGATE_REGISTER(backend): written once in a delegate's own C file, after
 * its `const mcu_delegate_backend backend`. A build that defines
 * MCU_DELEGATE_SECTION (mcu's Python module, CMakeLists.txt) also gets a pointer
 * to it in the linker section `mcu_delegates`, where that build's program
 * interpreter (runtime_c/python/native_program.c) finds every delegate it links
 * without naming one. Elsewhere (generated code, firmware, which name the
 * backends they link) it only declares `backend` again.
 */
#ifdef MCU_DELEGATE_SECTION
#define MCU_DELEGATE_REGISTER(backend)                                                                  \
    static const mcu_delegate_backend *const mcu_delegate_registered_##backend                      \
        __attribute__((used, section("mcu_delegates"))) = &(backend)
#else
#define MCU_DELEGATE_REGISTER(backend) extern const mcu_delegate_backend backend
#endif

#endif /* MCU_DELEGATE_H */
