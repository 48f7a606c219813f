/**
 * @file rp2040_port.h
 * @brief Clock, reset and UART bring-up for the RP2040 (no Pico SDK).
 */
#ifndef MCU_RP2040_PORT_H
#define MCU_RP2040_PORT_H

#include <stddef.h>
#include <stdint.h>

/** Crystal -> PLL_SYS (125 MHz) -> clk_sys; clk_peri = clk_sys; clk_ref = crystal. */
void mcu_rp2040_clocks_init(void);

/** Take the blocks in `bits` (RP_RESET_* masks) out of reset and wait until they are ready. */
void mcu_rp2040_release_resets(uint32_t bits);

/** Release IO_BANK0/PADS_BANK0/UART0 from reset, route GP0/GP1 to UART0, 8N1 at `baud`. */
void mcu_rp2040_uart_init(uint32_t clk_peri_hz, uint32_t baud);

/** Send `n` bytes ("\n" goes out as "\r\n"), waiting for FIFO room. */
void mcu_rp2040_uart_write(const char *s, size_t n);

/** Wait until the last byte has left the shift register. */
void mcu_rp2040_uart_flush(void);

#endif /* MCU_RP2040_PORT_H */
