/**
 * @file rp2_regs.h
 * @brief The RP2040 registers the port touches (RP2040 datasheet, chapter 2 and 4).
 *
 * Only what ports/rp2 and boot2.c use; the block layout matches the RP2350's in
 * most places, but the base addresses, the reset bit numbers and the clock
 * divider format (24.8 here, 16.16 on the RP2350) differ.
 */
#ifndef MCU_RP2_REGS_H
#define MCU_RP2_REGS_H

#include "mcu_cortex_m.h"

/* Atomic aliases of every peripheral register: write 1s to set or clear bits. */
#define RP_SET(addr) MCU_REG32((addr) + 0x2000u)
#define RP_CLR(addr) MCU_REG32((addr) + 0x3000u)

#define RP_CLOCKS_BASE 0x40008000u
#define RP_RESETS_BASE 0x4000c000u
#define RP_IO_BANK0_BASE 0x40014000u
#define RP_PADS_BANK0_BASE 0x4001c000u
#define RP_XOSC_BASE 0x40024000u
#define RP_PLL_SYS_BASE 0x40028000u
#define RP_UART0_BASE 0x40034000u

/* RESETS */
#define RP_RESETS_RESET (RP_RESETS_BASE + 0x00u)
#define RP_RESETS_RESET_DONE (RP_RESETS_BASE + 0x08u)
#define RP_RESET_IO_BANK0 (1u << 5)
#define RP_RESET_PADS_BANK0 (1u << 8)
#define RP_RESET_PLL_SYS (1u << 12)
#define RP_RESET_UART0 (1u << 22)

/* XOSC */
#define RP_XOSC_CTRL (RP_XOSC_BASE + 0x00u)
#define RP_XOSC_STATUS (RP_XOSC_BASE + 0x04u)
#define RP_XOSC_STARTUP (RP_XOSC_BASE + 0x0cu)
#define RP_XOSC_CTRL_FREQ_RANGE_1_15MHZ 0xaa0u   /* bits 11:0 */
#define RP_XOSC_CTRL_ENABLE (0xfabu << 12)       /* bits 23:12, 0xfab = enable */
#define RP_XOSC_STATUS_STABLE (1u << 31)

/* PLL_SYS */
#define RP_PLL_CS (RP_PLL_SYS_BASE + 0x00u)
#define RP_PLL_PWR (RP_PLL_SYS_BASE + 0x04u)
#define RP_PLL_FBDIV_INT (RP_PLL_SYS_BASE + 0x08u)
#define RP_PLL_PRIM (RP_PLL_SYS_BASE + 0x0cu)
#define RP_PLL_CS_LOCK (1u << 31)
#define RP_PLL_PWR_PD (1u << 0)
#define RP_PLL_PWR_POSTDIVPD (1u << 3)
#define RP_PLL_PWR_VCOPD (1u << 5)
#define RP_PLL_PRIM_POSTDIV1_LSB 16u /* bits 18:16 */
#define RP_PLL_PRIM_POSTDIV2_LSB 12u /* bits 14:12 */

/* CLOCKS (clk_peri has no divider on the RP2040) */
#define RP_CLK_REF_CTRL (RP_CLOCKS_BASE + 0x30u)
#define RP_CLK_REF_DIV (RP_CLOCKS_BASE + 0x34u)
#define RP_CLK_REF_SELECTED (RP_CLOCKS_BASE + 0x38u)
#define RP_CLK_SYS_CTRL (RP_CLOCKS_BASE + 0x3cu)
#define RP_CLK_SYS_DIV (RP_CLOCKS_BASE + 0x40u)
#define RP_CLK_SYS_SELECTED (RP_CLOCKS_BASE + 0x44u)
#define RP_CLK_PERI_CTRL (RP_CLOCKS_BASE + 0x48u)
#define RP_CLK_SYS_RESUS_CTRL (RP_CLOCKS_BASE + 0x78u)
#define RP_CLK_DIV_INT_1 (1u << 8)                /* integer part in bits 31:8 */
#define RP_CLK_REF_CTRL_SRC_BITS 0x3u
#define RP_CLK_REF_CTRL_SRC_XOSC 0x2u             /* SELECTED bit 2 */
#define RP_CLK_SYS_CTRL_SRC_AUX (1u << 0)         /* 0: clk_ref, 1: aux mux */
#define RP_CLK_SYS_CTRL_AUXSRC_BITS (0x7u << 5)
#define RP_CLK_SYS_CTRL_AUXSRC_PLL_SYS (0x0u << 5)
#define RP_CLK_PERI_CTRL_AUXSRC_BITS (0x7u << 5)
#define RP_CLK_PERI_CTRL_AUXSRC_CLK_SYS (0x0u << 5)
#define RP_CLK_PERI_CTRL_ENABLE (1u << 11)

/* IO_BANK0 and PADS_BANK0 */
#define RP_GPIO_CTRL(n) (RP_IO_BANK0_BASE + 0x04u + 8u * (n))
#define RP_GPIO_FUNCSEL_UART 2u
#define RP_PAD_GPIO(n) (RP_PADS_BANK0_BASE + 0x04u + 4u * (n))
#define RP_PAD_IE (1u << 6)
#define RP_PAD_OD (1u << 7)

/* UART0 (Arm PL011) */
#define RP_UART_DR (RP_UART0_BASE + 0x000u)
#define RP_UART_FR (RP_UART0_BASE + 0x018u)
#define RP_UART_IBRD (RP_UART0_BASE + 0x024u)
#define RP_UART_FBRD (RP_UART0_BASE + 0x028u)
#define RP_UART_LCR_H (RP_UART0_BASE + 0x02cu)
#define RP_UART_CR (RP_UART0_BASE + 0x030u)
#define RP_UART_FR_BUSY (1u << 3)
#define RP_UART_FR_TXFF (1u << 5)
#define RP_UART_LCR_H_FEN (1u << 4)
#define RP_UART_LCR_H_WLEN_8 (3u << 5)
#define RP_UART_CR_UARTEN (1u << 0)
#define RP_UART_CR_TXE (1u << 8)
#define RP_UART_CR_RXE (1u << 9)

/* PLL_SYS for the Pico: 1500 MHz VCO / 6 / 2 = 125 MHz. */
#define RP_PLL_POSTDIV1 6u

#endif /* MCU_RP2_REGS_H */
