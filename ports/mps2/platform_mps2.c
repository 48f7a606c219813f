/* Platform layer for the Arm MPS2/MPS2+ boards (real FPGA or QEMU):
 * console on CMSDK UART0, exit through semihosting. */
#include "cmsdk_uart.h"
#include "mcu/platform.h"
#include "mcu_cortex_m.h"

/* Passed by mcu.device.toolchain from the board file (console.base, clock_hz). */
#ifndef MCU_UART_BASE
#error "MCU_UART_BASE must be defined (console.base in the board file)"
#endif
#ifndef MCU_CLOCK_HZ
#error "MCU_CLOCK_HZ must be defined (clock_hz in the board file)"
#endif

#define MCU_MPS2_BAUD 115200u

void mcu_platform_init(void)
{
    mcu_cmsdk_uart_init((uintptr_t)MCU_UART_BASE, (uint32_t)MCU_CLOCK_HZ, MCU_MPS2_BAUD);
}

void mcu_platform_write(const char *s, size_t n)
{
    mcu_cmsdk_uart_write((uintptr_t)MCU_UART_BASE, s, n);
}

void mcu_platform_exit(int status)
{
    mcu_cm_semihost_exit(status);
}
