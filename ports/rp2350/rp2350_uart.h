/**
 * @file rp2350_uart.h
 * @brief UART0 (PL011) on GP0/GP1, transmit path for the console.
 */
#ifndef MCU_RP2350_UART_H
#define MCU_RP2350_UART_H

#include <stddef.h>
#include <stdint.h>

/** Release IO_BANK0/PADS_BANK0/UART0 from reset, route GP0/GP1 to UART0, 8N1 at `baud`. */
void mcu_rp2350_uart_init(uint32_t clk_peri_hz, uint32_t baud);

/** Send `n` bytes ("\n" goes out as "\r\n"), waiting for FIFO room. */
void mcu_rp2350_uart_write(const char *s, size_t n);

/** Wait until the last byte has left the shift register. */
void mcu_rp2350_uart_flush(void);

#endif /* MCU_RP2350_UART_H */
