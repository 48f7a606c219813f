#include "cmsdk_uart.h"

#include "mcu_cortex_m.h"

/* Register offsets (Arm CMSDK APB UART, DDI 0479). */
#define UART_DATA(base) MCU_REG32((base) + 0x00u)
#define UART_STATE(base) MCU_REG32((base) + 0x04u)
#define UART_CTRL(base) MCU_REG32((base) + 0x08u)
#define UART_BAUDDIV(base) MCU_REG32((base) + 0x10u)

#define UART_STATE_TX_FULL (1u << 0)
#define UART_CTRL_TX_EN (1u << 0)
/* The UART ignores dividers below 16 (and QEMU logs them as guest errors). */
#define UART_BAUDDIV_MIN 16u

void mcu_cmsdk_uart_init(uintptr_t base, uint32_t clock_hz, uint32_t baud)
{
    uint32_t div = baud != 0u ? clock_hz / baud : UART_BAUDDIV_MIN;
    UART_BAUDDIV(base) = div < UART_BAUDDIV_MIN ? UART_BAUDDIV_MIN : div;
    UART_CTRL(base) = UART_CTRL_TX_EN;
}

void mcu_cmsdk_uart_write(uintptr_t base, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        while ((UART_STATE(base) & UART_STATE_TX_FULL) != 0u) {
        }
        UART_DATA(base) = (uint32_t)(unsigned char)s[i];
    }
}
