/**
 * @file status.h
 * @brief Status codes returned by every runtime and kernel entry point.
 *
 * The runtime never aborts on bad input: it returns one of these codes and the
 * caller decides. Keep mcu_status_str() in runtime_c/src/mcu_status.c in step
 * with this enum (it is a switch, so -Wswitch catches a missing case).
 */
#ifndef MCU_STATUS_H
#define MCU_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MCU_OK = 0,
    MCU_ERR_NULL_POINTER = 1,   /**< a required pointer argument was NULL */
    MCU_ERR_INVALID_ARG = 2,    /**< a scalar argument is out of its documented range */
    MCU_ERR_SHAPE = 3,          /**< tensor shapes are inconsistent with each other */
    MCU_ERR_UNSUPPORTED = 4,    /**< a valid request this build cannot serve */
    MCU_ERR_BUFFER_TOO_SMALL = 5, /**< a caller-supplied buffer is too small */
    MCU_ERR_MISMATCH = 6,       /**< outputs differ from the bundled expected outputs */
    MCU_ERR_PROGRAM_INVALID = 7, /**< a program file failed verification */
    MCU_ERR_PROGRAM_TRUNCATED = 8, /**< a program or weights file is shorter than its header declares */
    MCU_ERR_PROGRAM_OVERSIZED = 9, /**< a file is longer than its header declares */
    MCU_ERR_PROGRAM_CHECKSUM = 10, /**< a file's CRC-32 does not match its bytes (e.g. a flipped bit) */
    MCU_ERR_PROGRAM_VERSION = 11,  /**< a file format version this runtime does not read */
    MCU_ERR_WEIGHTS_MISMATCH = 12, /**< the external weights are missing, no weights file, or another program's */
    MCU_ERR_NOT_FOUND = 13,        /**< no method (or other named item) of that name */
    MCU_ERR_DELEGATE_BACKEND = 14, /**< a delegate payload made for another backend (wrong magic) */
    MCU_ERR_DELEGATE_VERSION = 15, /**< a delegate payload of a version this backend does not read */
    MCU_ERR_DELEGATE_PAYLOAD = 16, /**< a corrupt delegate payload (checksum, bounds, unknown op) */
    MCU_ERR_DELEGATE_FAILED = 17,  /**< the delegate's library refused the partition or failed to run it */
    MCU_ERR_WEIGHTS_CORRUPT = 18,  /**< the external weights file's CRC-32, or a segment's recorded in the program, fails */
    MCU_ERR_ARENA_LIMIT = 19       /**< a method's arenas exceed the RAM limit given at load */
} mcu_status;

/** @brief Human-readable name of a status code (never NULL). */
const char *mcu_status_str(mcu_status status);

/** Evaluate an expression returning mcu_status; return early on failure. */
#define MCU_CHECK(expr)                        \
    do {                                       \
        mcu_status mcu_check_s_ = (expr);      \
        if (mcu_check_s_ != MCU_OK) {          \
            return mcu_check_s_;               \
        }                                      \
    } while (0)

/** Return `code` unless `cond` holds. */
#define MCU_REQUIRE(cond, code)  \
    do {                         \
        if (!(cond)) {           \
            return (code);       \
        }                        \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* MCU_STATUS_H */
