/*
 * Platform layer for the Raspberry Pi Pico (RP2040, Cortex-M0+) and Pico 2
 * (RP2350, Cortex-M33), no Pico SDK.
 *
 * Only what needs the chip family lives in ports/rp2: clocks and resets
 * (clocks.c), pins and UART (uart.c); each chip's folder adds its boot
 * (rp2040/boot2.c, rp2350/image_def.c) and register map (rp2_regs.h).
 * Start-up, fault reporting, cycle timing and the exit line are the shared
 * Cortex-M code in ports/cortex-m, the same code the simulated boards run
 * (mps2-an505 for the Cortex-M33, mps2-an385-m0plus for the Cortex-M0+).
 */
#include "mcu/platform.h"
#include "mcu_cortex_m.h"
#include "rp2_port.h"

/* Passed by mcu.device.toolchain from the board file (clock_hz, console.baud). */
#ifndef MCU_CLOCK_HZ
#error "MCU_CLOCK_HZ must be defined (clock_hz in the board file)"
#endif
#ifndef MCU_CONSOLE_BAUD
#define MCU_CONSOLE_BAUD 115200u
#endif

void mcu_platform_init(void)
{
    mcu_rp2_clocks_init();
    /* clk_peri runs from clk_sys undivided. */
    mcu_rp2_uart_init((uint32_t)MCU_CLOCK_HZ, (uint32_t)MCU_CONSOLE_BAUD);
}

void mcu_platform_write(const char *s, size_t n)
{
    mcu_rp2_uart_write(s, n);
}

void mcu_platform_exit(int status)
{
    /* No simulator here: print `EXIT <status>`, let the UART drain, then
     * stop (ports/cortex-m/exit.c; a semihosting BKPT without a debugger
     * would HardFault, so it is only issued when one is attached). */
    mcu_cm_hardware_exit(status);
}
