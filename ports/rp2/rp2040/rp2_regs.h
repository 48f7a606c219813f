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

/* CLOCKS: clk_peri has no divider on the RP2040; DIV's integer part is bits 31:8. */
#define RP_CLK_SYS_RESUS_CTRL (RP_CLOCKS_BASE + 0x78u)
#define RP_CLK_DIV_INT_1 (1u << 8)
#define RP_CLK_PERI_CTRL_AUXSRC_BITS (0x7u << 5)

/* PLL_SYS for the Pico: 1500 MHz VCO / 6 / 2 = 125 MHz. */
#define RP_PLL_POSTDIV1 6u

/* Offsets and fields the RP2040 and RP2350 share. */
#include "rp2_blocks.h"

#endif /* MCU_RP2_REGS_H */
