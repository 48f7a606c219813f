/**
 * @file rp2_blocks.h
 * @brief What the RP2040 and RP2350 register blocks have in common: offsets
 *        within XOSC, PLL_SYS, CLOCKS, IO_BANK0, PADS_BANK0 and UART0 (a
 *        PL011), and their fields. Each chip's rp2_regs.h gives the base
 *        addresses and what differs, then includes this file.
 */
#ifndef MCU_RP2_BLOCKS_H
#define MCU_RP2_BLOCKS_H

/* XOSC: the 12 MHz crystal oscillator. */
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

/* CLOCKS: each generator has CTRL, DIV and SELECTED (one-hot of the glitchless mux). */
#define RP_CLK_REF_CTRL (RP_CLOCKS_BASE + 0x30u)
#define RP_CLK_REF_DIV (RP_CLOCKS_BASE + 0x34u)
#define RP_CLK_REF_SELECTED (RP_CLOCKS_BASE + 0x38u)
#define RP_CLK_SYS_CTRL (RP_CLOCKS_BASE + 0x3cu)
#define RP_CLK_SYS_DIV (RP_CLOCKS_BASE + 0x40u)
#define RP_CLK_SYS_SELECTED (RP_CLOCKS_BASE + 0x44u)
#define RP_CLK_PERI_CTRL (RP_CLOCKS_BASE + 0x48u)
#define RP_CLK_REF_CTRL_SRC_BITS 0x3u
#define RP_CLK_REF_CTRL_SRC_XOSC 0x2u             /* SELECTED bit 2 */
#define RP_CLK_SYS_CTRL_SRC_AUX (1u << 0)         /* 0: clk_ref, 1: aux mux */
#define RP_CLK_SYS_CTRL_AUXSRC_BITS (0x7u << 5)
#define RP_CLK_SYS_CTRL_AUXSRC_PLL_SYS (0x0u << 5)
#define RP_CLK_PERI_CTRL_AUXSRC_CLK_SYS (0x0u << 5)
#define RP_CLK_PERI_CTRL_ENABLE (1u << 11)

/* IO_BANK0: GPIOn_CTRL at 0x04 + 8n; FUNCSEL (bits 4:0) 2 = UART0 on GP0/GP1. */
#define RP_GPIO_CTRL(n) (RP_IO_BANK0_BASE + 0x04u + 8u * (n))
#define RP_GPIO_FUNCSEL_UART 2u

/* PADS_BANK0: GPIOn at 0x04 + 4n. */
#define RP_PAD_GPIO(n) (RP_PADS_BANK0_BASE + 0x04u + 4u * (n))
#define RP_PAD_IE (1u << 6)
#define RP_PAD_OD (1u << 7)

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

#endif /* MCU_RP2_BLOCKS_H */
