/*
 * Platform layer for the Raspberry Pi Pico (RP2040, Cortex-M0+), no Pico SDK.
 *
 * Only what needs the chip lives in ports/rp2040: the second-stage boot
 * (boot2.c), clocks and resets (clocks.c), pins and UART (uart.c). Start-up,
 * fault reporting, SysTick cycle timing (ARMv6-M has no DWT cycle counter)
 * and the exit line are the shared Cortex-M code in ports/cortex-m, the same
 * code the simulated mps2-an385-m0plus runs.
 */
#include "mcu/platform.h"
#include "mcu_cortex_m.h"
#include "rp2040_port.h"

#ifndef MCU_CLOCK_HZ
#error "MCU_CLOCK_HZ must be defined (clock_hz in the board file)"
#endif
#ifndef MCU_CONSOLE_BAUD
#define MCU_CONSOLE_BAUD 115200u
#endif

void mcu_platform_init(void)
{
    mcu_rp2040_clocks_init();
    mcu_rp2040_uart_init((uint32_t)MCU_CLOCK_HZ, (uint32_t)MCU_CONSOLE_BAUD);
}

void mcu_platform_write(const char *s, size_t n)
{
    mcu_rp2040_uart_write(s, n);
}

void mcu_platform_exit(int status)
{
    mcu_cm_hardware_exit(status);
}
