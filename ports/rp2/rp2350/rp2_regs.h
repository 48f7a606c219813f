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

/* CLOCKS: DIV's integer part is bits 31:16 (as wide as the generator allows). */
#define RP_CLK_PERI_DIV (RP_CLOCKS_BASE + 0x4cu)
#define RP_CLK_DIV_INT_1 (1u << 16)
#define RP_CLK_PERI_CTRL_ENABLED (1u << 28)

/* PADS_BANK0 */
#define RP_PAD_ISO (1u << 8) /* pads come out of reset isolated (new in RP2350) */

/* PLL_SYS for the Pico 2: 1500 MHz VCO / 5 / 2 = 150 MHz. */
#define RP_PLL_POSTDIV1 5u

/* Offsets and fields the RP2040 and RP2350 share. */
#include "rp2_blocks.h"

#endif /* MCU_RP2_REGS_H */
