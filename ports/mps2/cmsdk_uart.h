/**
 * @file cmsdk_uart.h
 * @brief Arm CMSDK APB UART, transmit only (the console of the MPS2 boards).
 */
#ifndef MCU_CMSDK_UART_H
#define MCU_CMSDK_UART_H

#include <stddef.h>
#include <stdint.h>

/** Enable the transmitter. `clock_hz / baud` must be at least 16. */
void mcu_cmsdk_uart_init(uintptr_t base, uint32_t clock_hz, uint32_t baud);

/** Send `n` bytes, waiting for room in the transmit buffer before each. */
void mcu_cmsdk_uart_write(uintptr_t base, const char *s, size_t n);

#endif /* MCU_CMSDK_UART_H */
