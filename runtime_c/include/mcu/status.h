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

typedef enum {
    MCU_OK = 0,
    MCU_ERR_NULL_POINTER = 1,   /**< a required pointer argument was NULL */
    MCU_ERR_INVALID_ARG = 2,    /**< a scalar argument is out of its documented range */
    MCU_ERR_SHAPE = 3,          /**< tensor shapes are inconsistent with each other */
    MCU_ERR_UNSUPPORTED = 4,    /**< a valid request this build cannot serve */
    MCU_ERR_BUFFER_TOO_SMALL = 5, /**< a caller-supplied buffer is too small */
    MCU_ERR_MISMATCH = 6,       /**< outputs differ from the bundled expected outputs */
    MCU_ERR_PROGRAM_INVALID = 7 /**< a program file failed verification */
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

#endif /* MCU_STATUS_H */
