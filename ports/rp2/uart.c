/*
 * UART0 on GP0 (TX) and GP1 (RX), 8N1, from clk_peri: the default UART pins
 * of the Pico and the Pico 2, where a USB-serial adapter or the Raspberry Pi
 * Debug Probe's UART connects.
 */
#include "rp2_port.h"
#include "rp2_regs.h"

#define RP_UART_TX_PIN 0u
#define RP_UART_RX_PIN 1u

static void rp2_uart_pin(uint32_t pin, uint32_t pad)
{
    MCU_REG32(RP_PAD_GPIO(pin)) = (MCU_REG32(RP_PAD_GPIO(pin)) & ~(RP_PAD_OD | RP_PAD_IE)) | pad;
    MCU_REG32(RP_GPIO_CTRL(pin)) = RP_GPIO_FUNCSEL_UART;
#if defined(RP_PAD_ISO)
    /* RP2350 pads leave reset isolated: lift the isolation only once the pad
     * and its function are set, so the pin never glitches. */
    RP_CLR(RP_PAD_GPIO(pin)) = RP_PAD_ISO;
#endif
}

void mcu_rp2_uart_init(uint32_t clk_peri_hz, uint32_t baud)
{
    mcu_rp2_release_resets(RP_RESET_IO_BANK0 | RP_RESET_PADS_BANK0 | RP_RESET_UART0);

    /* PL011 divisor = clk / (16 * baud) in 16.6 fixed point, rounded:
     * 125 MHz / (16 * 115200) = 67.82 -> IBRD 67, FBRD 52;
     * 150 MHz / (16 * 115200) = 81.38 -> IBRD 81, FBRD 25 (0.01 % error). */
    uint32_t div = (8u * clk_peri_hz / baud) + 1u;
    uint32_t ibrd = div >> 7;
    uint32_t fbrd = ((div & 0x7fu) + 1u) / 2u;
    if (ibrd == 0u) {
        ibrd = 1u;
        fbrd = 0u;
    } else if (ibrd >= 0xffffu) {
        ibrd = 0xffffu;
        fbrd = 0u;
    }
    MCU_REG32(RP_UART_CR) = 0u;
    MCU_REG32(RP_UART_IBRD) = ibrd;
    MCU_REG32(RP_UART_FBRD) = fbrd;
    /* The divisor registers only take effect with a write to LCR_H. */
    MCU_REG32(RP_UART_LCR_H) = RP_UART_LCR_H_WLEN_8 | RP_UART_LCR_H_FEN;
    MCU_REG32(RP_UART_CR) = RP_UART_CR_UARTEN | RP_UART_CR_TXE | RP_UART_CR_RXE;

    rp2_uart_pin(RP_UART_TX_PIN, 0u);         /* output: OD clear */
    rp2_uart_pin(RP_UART_RX_PIN, RP_PAD_IE);  /* input enabled */
}

void mcu_rp2_uart_write(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') {
            /* Terminal programs expect CRLF on a serial line. */
            while ((MCU_REG32(RP_UART_FR) & RP_UART_FR_TXFF) != 0u) {
            }
            MCU_REG32(RP_UART_DR) = (uint32_t)'\r';
        }
        while ((MCU_REG32(RP_UART_FR) & RP_UART_FR_TXFF) != 0u) {
        }
        MCU_REG32(RP_UART_DR) = (uint32_t)(unsigned char)s[i];
    }
}

void mcu_rp2_uart_flush(void)
{
    while ((MCU_REG32(RP_UART_FR) & RP_UART_FR_BUSY) != 0u) {
    }
}

void mcu_cm_console_flush(void)
{
    mcu_rp2_uart_flush();
}
