/**
 * @file rp2_port.h
 * @brief Clock, reset and UART bring-up shared by the RP2040 and the RP2350 (no Pico SDK).
 *
 * The two chips have the same clock tree, PLL, crystal oscillator, reset
 * controller, pads and PL011 UART; what differs (addresses, reset bits, the
 * PLL post divider, clk_peri's divider, pad isolation) is in each chip's
 * rp2_regs.h (ports/rp2/rp2040, ports/rp2/rp2350).
 */
#ifndef MCU_RP2_PORT_H
#define MCU_RP2_PORT_H

#include <stddef.h>
#include <stdint.h>

/** Crystal -> PLL_SYS -> clk_sys; clk_peri = clk_sys; clk_ref = crystal. */
void mcu_rp2_clocks_init(void);

/** Take the blocks in `bits` (RP_RESET_* masks) out of reset and wait until they are ready. */
void mcu_rp2_release_resets(uint32_t bits);

/** Release IO_BANK0/PADS_BANK0/UART0 from reset, route GP0/GP1 to UART0, 8N1 at `baud`. */
void mcu_rp2_uart_init(uint32_t clk_peri_hz, uint32_t baud);

/** Send `n` bytes ("\n" goes out as "\r\n"), waiting for FIFO room. */
void mcu_rp2_uart_write(const char *s, size_t n);

/** Wait until the last byte has left the shift register. */
void mcu_rp2_uart_flush(void);

#endif /* MCU_RP2_PORT_H */
