/*
 * Clocks for the Pico: 12 MHz crystal -> PLL_SYS at 125 MHz -> clk_sys,
 * clk_peri = clk_sys (the UART's clock), clk_ref = crystal.
 *
 * After the boot ROM the chip runs from the ring oscillator (about 6 MHz,
 * not accurate enough for a UART). Every glitchless mux is moved off a clock
 * before that clock is reconfigured. The flash clock is clk_sys divided by
 * the SSI's divider (4, set by boot2.c): 31.25 MHz at 125 MHz.
 */
#include "rp2040_port.h"
#include "rp2040_regs.h"

#define RP_XOSC_HZ 12000000u
/* 256 crystal cycles per unit: ~1 ms is (12 MHz / 1 kHz + 128) / 256 = 47
 * units; wait 64 times that (~64 ms, once) for slow-starting crystals. */
#define RP_XOSC_STARTUP_DELAY ((((RP_XOSC_HZ / 1000u) + 128u) / 256u) * 64u)

/* 12 MHz / 1 * 125 = 1500 MHz VCO (750..1600 MHz allowed), / 6 / 2 = 125 MHz. */
#define RP_PLL_REFDIV 1u
#define RP_PLL_FBDIV 125u
#define RP_PLL_POSTDIV1 6u
#define RP_PLL_POSTDIV2 2u
#define RP_PLL_SYS_HZ (RP_XOSC_HZ / RP_PLL_REFDIV * RP_PLL_FBDIV / (RP_PLL_POSTDIV1 * RP_PLL_POSTDIV2))

#if defined(MCU_CLOCK_HZ)
_Static_assert(RP_PLL_SYS_HZ == MCU_CLOCK_HZ, "clock_hz in boards/pico.toml must match the PLL setup");
#endif

static void rp2040_xosc_start(void)
{
    MCU_REG32(RP_XOSC_STARTUP) = RP_XOSC_STARTUP_DELAY;
    /* One full write: ENABLE and FREQ_RANGE are 12-bit codes. */
    MCU_REG32(RP_XOSC_CTRL) = RP_XOSC_CTRL_ENABLE | RP_XOSC_CTRL_FREQ_RANGE_1_15MHZ;
    while ((MCU_REG32(RP_XOSC_STATUS) & RP_XOSC_STATUS_STABLE) == 0u) {
    }
}

void mcu_rp2040_release_resets(uint32_t bits)
{
    RP_CLR(RP_RESETS_RESET) = bits;
    while ((MCU_REG32(RP_RESETS_RESET_DONE) & bits) != bits) {
    }
}

static void rp2040_pll_sys_start(void)
{
    RP_SET(RP_RESETS_RESET) = RP_RESET_PLL_SYS;
    mcu_rp2040_release_resets(RP_RESET_PLL_SYS);

    MCU_REG32(RP_PLL_CS) = RP_PLL_REFDIV;
    MCU_REG32(RP_PLL_FBDIV_INT) = RP_PLL_FBDIV;
    /* Power the PLL and VCO, wait for lock, then the post dividers (datasheet 2.18.2). */
    RP_CLR(RP_PLL_PWR) = RP_PLL_PWR_PD | RP_PLL_PWR_VCOPD;
    while ((MCU_REG32(RP_PLL_CS) & RP_PLL_CS_LOCK) == 0u) {
    }
    MCU_REG32(RP_PLL_PRIM) = (RP_PLL_POSTDIV1 << RP_PLL_PRIM_POSTDIV1_LSB) |
                             (RP_PLL_POSTDIV2 << RP_PLL_PRIM_POSTDIV2_LSB);
    RP_CLR(RP_PLL_PWR) = RP_PLL_PWR_POSTDIVPD;
}

void mcu_rp2040_clocks_init(void)
{
    MCU_REG32(RP_CLK_SYS_RESUS_CTRL) = 0u;
    rp2040_xosc_start();

    /* clk_sys onto clk_ref (glitchless), so PLL_SYS can be reset under it. */
    RP_CLR(RP_CLK_SYS_CTRL) = RP_CLK_SYS_CTRL_SRC_AUX;
    while (MCU_REG32(RP_CLK_SYS_SELECTED) != 0x1u) {
    }
    MCU_REG32(RP_CLK_REF_DIV) = RP_CLK_DIV_INT_1;
    MCU_REG32(RP_CLK_REF_CTRL) = (MCU_REG32(RP_CLK_REF_CTRL) & ~RP_CLK_REF_CTRL_SRC_BITS) | RP_CLK_REF_CTRL_SRC_XOSC;
    while (MCU_REG32(RP_CLK_REF_SELECTED) != (1u << RP_CLK_REF_CTRL_SRC_XOSC)) {
    }

    rp2040_pll_sys_start();

    /* The aux mux glitches: set it while clk_sys runs from clk_ref, then switch the glitchless mux. */
    MCU_REG32(RP_CLK_SYS_DIV) = RP_CLK_DIV_INT_1;
    MCU_REG32(RP_CLK_SYS_CTRL) = (MCU_REG32(RP_CLK_SYS_CTRL) & ~RP_CLK_SYS_CTRL_AUXSRC_BITS) |
                                 RP_CLK_SYS_CTRL_AUXSRC_PLL_SYS;
    RP_SET(RP_CLK_SYS_CTRL) = RP_CLK_SYS_CTRL_SRC_AUX;
    while (MCU_REG32(RP_CLK_SYS_SELECTED) != 0x2u) {
    }

    /* clk_peri has only an aux mux: stop it, let it settle, switch and restart. */
    RP_CLR(RP_CLK_PERI_CTRL) = RP_CLK_PERI_CTRL_ENABLE;
    for (volatile uint32_t i = 0; i < 16u; i++) {
    }
    MCU_REG32(RP_CLK_PERI_CTRL) = (MCU_REG32(RP_CLK_PERI_CTRL) & ~RP_CLK_PERI_CTRL_AUXSRC_BITS) |
                                  RP_CLK_PERI_CTRL_AUXSRC_CLK_SYS;
    RP_SET(RP_CLK_PERI_CTRL) = RP_CLK_PERI_CTRL_ENABLE;
}
