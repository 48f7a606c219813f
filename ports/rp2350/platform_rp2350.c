/*
 * Platform layer for the Raspberry Pi Pico 2 (RP2350, Cortex-M33), no Pico SDK.
 *
 * Only what needs the chip lives in ports/rp2350: clocks and resets
 * (clocks.c), pins and UART (uart.c), the boot ROM's IMAGE_DEF (image_def.c).
 * Start-up, fault reporting, the DWT cycle counter and the exit line are the
 * shared Cortex-M code in ports/cortex-m, the same code the simulated
 * mps2-an505 (also a Cortex-M33) runs; console formatting is
 * runtime_c/src/mcu_log.c.
 */
#include "mcu/platform.h"
#include "mcu_cortex_m.h"
#include "rp2350_clocks.h"
#include "rp2350_uart.h"

/* Passed by mcu.toolchain from the board file (clock_hz, console.baud). */
#ifndef MCU_CLOCK_HZ
#error "MCU_CLOCK_HZ must be defined (clock_hz in the board file)"
#endif
#ifndef MCU_CONSOLE_BAUD
#define MCU_CONSOLE_BAUD 115200u
#endif

void mcu_platform_init(void)
{
    mcu_rp2350_clocks_init();
    /* clk_peri runs from clk_sys undivided. */
    mcu_rp2350_uart_init((uint32_t)MCU_CLOCK_HZ, (uint32_t)MCU_CONSOLE_BAUD);
}

void mcu_platform_write(const char *s, size_t n)
{
    mcu_rp2350_uart_write(s, n);
}

void mcu_platform_exit(int status)
{
    /* No simulator here: print `EXIT <status>`, let the UART drain, then
     * stop (ports/cortex-m/exit.c; a semihosting BKPT without a debugger
     * would HardFault, so it is only issued when one is attached). */
    mcu_cm_hardware_exit(status);
}
