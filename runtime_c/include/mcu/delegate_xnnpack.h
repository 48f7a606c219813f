/**
 * @file delegate_xnnpack.h
 * @brief XNNPACK as a delegate backend (desktop and phone CPUs running Linux).
 *
 * The payload (made by mcu/backends/xnnpack.py, version 1) describes one
 * XNNPACK subgraph: values (NHWC shapes, datatype, quantization, constant
 * data inside the payload) and nodes. init() checks its size field and
 * checksum, rebuilds the subgraph with xnn_define_* and creates a runtime
 * (single-threaded: results do not depend on the thread count); execute()
 * binds the boundary tensors and invokes it. XNNPACK allocates its own
 * memory, so the arena argument is unused (NULL, 0). Built against Debian's
 * libxnnpack-dev (snapshot 2022-02-16); link with -lXNNPACK -lpthreadpool.
 */
#ifndef MCU_DELEGATE_XNNPACK_H
#define MCU_DELEGATE_XNNPACK_H

#include "mcu/delegate.h"

extern const mcu_delegate_backend mcu_xnnpack_backend;

#endif /* MCU_DELEGATE_XNNPACK_H */
