/**
 * @file rp2_regs.h
 * @brief The few RP2350 registers the port touches, from the RP2350 datasheet
 *        (chapter 2.2 address map, 6.2 resets, 8.1 clocks, 8.2 XOSC, 8.6 PLL,
 *        9 GPIO/pads, 12.1 UART). Written for this port; no Pico SDK.
 */
#ifndef MCU_RP2_REGS_H
#define MCU_RP2_REGS_H

#include "mcu_cortex_m.h"

/* Every APB register block has atomic aliases: writes to base + 0x2000 set
 * the written bits, writes to base + 0x3000 clear them (datasheet 2.1.3).
 * They avoid read-modify-write sequences on shared registers. */
#define RP_SET(addr) MCU_REG32((addr) + 0x2000u)
#define RP_CLR(addr) MCU_REG32((addr) + 0x3000u)

/* Address map. */
#define RP_CLOCKS_BASE 0x40010000u
#define RP_RESETS_BASE 0x40020000u
#define RP_IO_BANK0_BASE 0x40028000u
#define RP_PADS_BANK0_BASE 0x40038000u
#define RP_XOSC_BASE 0x40048000u
#define RP_PLL_SYS_BASE 0x40050000u
#define RP_UART0_BASE 0x40070000u

/* RESETS: a set bit holds the block in reset; RESET_DONE reports release. */
#define RP_RESETS_RESET (RP_RESETS_BASE + 0x00u)
#define RP_RESETS_RESET_DONE (RP_RESETS_BASE + 0x08u)
#define RP_RESET_IO_BANK0 (1u << 6)
#define RP_RESET_PADS_BANK0 (1u << 9)
#define RP_RESET_PLL_SYS (1u << 14)
#define RP_RESET_UART0 (1u << 26)

/* XOSC: the 12 MHz crystal on the Pico 2. */
#define RP_XOSC_CTRL (RP_XOSC_BASE + 0x00u)
#define RP_XOSC_STATUS (RP_XOSC_BASE + 0x04u)
#define RP_XOSC_STARTUP (RP_XOSC_BASE + 0x0cu)
#define RP_XOSC_CTRL_FREQ_RANGE_1_15MHZ 0xaa0u   /* bits 11:0 */
#define RP_XOSC_CTRL_ENABLE (0xfabu << 12)       /* bits 23:12, 0xfab = enable */
#define RP_XOSC_STATUS_STABLE (1u << 31)

/* PLL_SYS: FOUTVCO = ref / REFDIV * FBDIV, output = VCO / (POSTDIV1 * POSTDIV2). */
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

/* CLOCKS: each generator has CTRL, DIV (integer part in bits 31:16, as wide
 * as the generator allows) and SELECTED (one-hot of the glitchless mux). */
#define RP_CLK_REF_CTRL (RP_CLOCKS_BASE + 0x30u)
#define RP_CLK_REF_DIV (RP_CLOCKS_BASE + 0x34u)
#define RP_CLK_REF_SELECTED (RP_CLOCKS_BASE + 0x38u)
#define RP_CLK_SYS_CTRL (RP_CLOCKS_BASE + 0x3cu)
#define RP_CLK_SYS_DIV (RP_CLOCKS_BASE + 0x40u)
#define RP_CLK_SYS_SELECTED (RP_CLOCKS_BASE + 0x44u)
#define RP_CLK_PERI_CTRL (RP_CLOCKS_BASE + 0x48u)
#define RP_CLK_PERI_DIV (RP_CLOCKS_BASE + 0x4cu)
#define RP_CLK_DIV_INT_1 (1u << 16)
#define RP_CLK_REF_CTRL_SRC_BITS 0x3u
#define RP_CLK_REF_CTRL_SRC_XOSC 0x2u             /* SELECTED bit 2 */
#define RP_CLK_SYS_CTRL_SRC_AUX (1u << 0)         /* 0: clk_ref, 1: aux mux */
#define RP_CLK_SYS_CTRL_AUXSRC_BITS (0x7u << 5)
#define RP_CLK_SYS_CTRL_AUXSRC_PLL_SYS (0x0u << 5)
#define RP_CLK_PERI_CTRL_AUXSRC_CLK_SYS (0x0u << 5)
#define RP_CLK_PERI_CTRL_ENABLE (1u << 11)
#define RP_CLK_PERI_CTRL_ENABLED (1u << 28)

/* IO_BANK0: GPIOn_CTRL at 0x04 + 8n; FUNCSEL (bits 4:0) 2 = UART0 on GP0/GP1. */
#define RP_GPIO_CTRL(n) (RP_IO_BANK0_BASE + 0x04u + 8u * (n))
#define RP_GPIO_FUNCSEL_UART 2u
/* PADS_BANK0: GPIOn at 0x04 + 4n. */
#define RP_PAD_GPIO(n) (RP_PADS_BANK0_BASE + 0x04u + 4u * (n))
#define RP_PAD_IE (1u << 6)
#define RP_PAD_OD (1u << 7)
#define RP_PAD_ISO (1u << 8) /* pads come out of reset isolated (new in RP2350) */

/* UART0: an Arm PL011. */
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

/* PLL_SYS for the Pico 2: 1500 MHz VCO / 5 / 2 = 150 MHz. */
#define RP_PLL_POSTDIV1 5u

#endif /* MCU_RP2_REGS_H */
