/**
 * @file rp2350_clocks.h
 * @brief Clock and reset bring-up for the RP2350 (no Pico SDK).
 */
#ifndef MCU_RP2350_CLOCKS_H
#define MCU_RP2350_CLOCKS_H

#include <stdint.h>

/** Crystal -> PLL_SYS (150 MHz) -> clk_sys; clk_peri = clk_sys; clk_ref = crystal. */
void mcu_rp2350_clocks_init(void);

/** Take the blocks in `bits` (RP_RESET_* masks) out of reset and wait until they are ready. */
void mcu_rp2350_release_resets(uint32_t bits);

#endif /* MCU_RP2350_CLOCKS_H */
