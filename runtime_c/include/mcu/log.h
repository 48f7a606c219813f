/**
 * @file log.h
 * @brief Console formatting shared by every firmware (no printf, no heap).
 *
 * The host reads these lines back, so their format is a contract: see
 * mcu/console.py.
 */
#ifndef MCU_LOG_H
#define MCU_LOG_H

#include <stddef.h>
#include <stdint.h>

void mcu_log_str(const char *s);
void mcu_log_u32(uint32_t v);
void mcu_log_i32(int32_t v);
/** Eight lower-case hex digits, no prefix. */
void mcu_log_hex32(uint32_t v);
void mcu_log_newline(void);

#endif /* MCU_LOG_H */
