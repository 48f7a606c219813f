/*
 * Clocks for the Pico and the Pico 2: 12 MHz crystal -> PLL_SYS (125 MHz on
 * the RP2040, 150 MHz on the RP2350) -> clk_sys, clk_peri = clk_sys (the
 * UART's clock), clk_ref = crystal.
 *
 * After the boot ROM the chip runs from the ring oscillator (6 to 11 MHz,
 * not accurate enough for a UART). Order matters: every glitchless mux is
 * moved off a clock before that clock is reconfigured. The flash clock is
 * left alone: on the RP2040 boot2.c sets the SSI to clk_sys / 4 (31.25 MHz);
 * on the RP2350 the boot ROM leaves the QMI divider at a value safe at
 * 150 MHz (the Pico SDK runs there without changing it).
 */
#include "rp2_port.h"
#include "rp2_regs.h"

#define RP_XOSC_HZ 12000000u
/* The startup delay counts 256 crystal cycles per unit: ~1 ms is
 * (12 MHz / 1 kHz + 128) / 256 = 47 units. Some crystals need longer to start,
 * so (like the Pico SDK's board setting) wait 64 times that: ~64 ms, once. */
#define RP_XOSC_STARTUP_DELAY ((((RP_XOSC_HZ / 1000u) + 128u) / 256u) * 64u)

/* 12 MHz / 1 * 125 = 1500 MHz VCO (750..1600 MHz allowed), then / RP_PLL_POSTDIV1 (the chip's
 * rp2_regs.h) / 2. */
#define RP_PLL_REFDIV 1u
#define RP_PLL_FBDIV 125u
#define RP_PLL_POSTDIV2 2u
#define RP_PLL_SYS_HZ (RP_XOSC_HZ / RP_PLL_REFDIV * RP_PLL_FBDIV / (RP_PLL_POSTDIV1 * RP_PLL_POSTDIV2))

#if defined(MCU_CLOCK_HZ)
_Static_assert(RP_PLL_SYS_HZ == MCU_CLOCK_HZ, "clock_hz in the board file must match the PLL setup");
#endif

static void rp2_xosc_start(void)
{
    MCU_REG32(RP_XOSC_STARTUP) = RP_XOSC_STARTUP_DELAY;
    /* One full write: ENABLE and FREQ_RANGE are 12-bit codes that ignore
     * invalid values, so OR-ing a code into whatever is there could fail. */
    MCU_REG32(RP_XOSC_CTRL) = RP_XOSC_CTRL_ENABLE | RP_XOSC_CTRL_FREQ_RANGE_1_15MHZ;
    while ((MCU_REG32(RP_XOSC_STATUS) & RP_XOSC_STATUS_STABLE) == 0u) {
    }
}

void mcu_rp2_release_resets(uint32_t bits)
{
    RP_CLR(RP_RESETS_RESET) = bits;
    while ((MCU_REG32(RP_RESETS_RESET_DONE) & bits) != bits) {
    }
}

static void rp2_pll_sys_start(void)
{
    /* Reset the PLL so it starts from a known state, whatever the ROM did. */
    RP_SET(RP_RESETS_RESET) = RP_RESET_PLL_SYS;
    mcu_rp2_release_resets(RP_RESET_PLL_SYS);

    MCU_REG32(RP_PLL_CS) = RP_PLL_REFDIV;
    MCU_REG32(RP_PLL_FBDIV_INT) = RP_PLL_FBDIV;
    /* Power the PLL and its VCO, wait for lock, then set and power the post
     * dividers (they go on last: RP2040 datasheet 2.18.2, RP2350 8.6). */
    RP_CLR(RP_PLL_PWR) = RP_PLL_PWR_PD | RP_PLL_PWR_VCOPD;
    while ((MCU_REG32(RP_PLL_CS) & RP_PLL_CS_LOCK) == 0u) {
    }
    MCU_REG32(RP_PLL_PRIM) = (RP_PLL_POSTDIV1 << RP_PLL_PRIM_POSTDIV1_LSB) |
                             (RP_PLL_POSTDIV2 << RP_PLL_PRIM_POSTDIV2_LSB);
    RP_CLR(RP_PLL_PWR) = RP_PLL_PWR_POSTDIVPD;
}

/* clk_peri has only an aux mux: stop it cleanly, switch it to clk_sys, restart. */
static void rp2_clk_peri_from_clk_sys(void)
{
    RP_CLR(RP_CLK_PERI_CTRL) = RP_CLK_PERI_CTRL_ENABLE;
#if defined(RP_CLK_PERI_DIV)
    /* RP2350: the generator reports when it has stopped, and has a divider. */
    while ((MCU_REG32(RP_CLK_PERI_CTRL) & RP_CLK_PERI_CTRL_ENABLED) != 0u) {
    }
    MCU_REG32(RP_CLK_PERI_DIV) = RP_CLK_DIV_INT_1;
    MCU_REG32(RP_CLK_PERI_CTRL) = RP_CLK_PERI_CTRL_AUXSRC_CLK_SYS | RP_CLK_PERI_CTRL_ENABLE;
    while ((MCU_REG32(RP_CLK_PERI_CTRL) & RP_CLK_PERI_CTRL_ENABLED) == 0u) {
    }
#else
    /* RP2040: no status bit; a few cycles of the slowest source let it stop. */
    for (volatile uint32_t i = 0; i < 16u; i++) {
    }
    MCU_REG32(RP_CLK_PERI_CTRL) = (MCU_REG32(RP_CLK_PERI_CTRL) & ~RP_CLK_PERI_CTRL_AUXSRC_BITS) |
                                  RP_CLK_PERI_CTRL_AUXSRC_CLK_SYS;
    RP_SET(RP_CLK_PERI_CTRL) = RP_CLK_PERI_CTRL_ENABLE;
#endif
}

void mcu_rp2_clocks_init(void)
{
#if defined(RP_CLK_SYS_RESUS_CTRL)
    /* RP2040: the resuscitation circuit would restart clk_sys from the ring oscillator mid-switch. */
    MCU_REG32(RP_CLK_SYS_RESUS_CTRL) = 0u;
#endif
    rp2_xosc_start();

    /* clk_sys onto clk_ref (glitchless), so PLL_SYS can be reset under it. */
    RP_CLR(RP_CLK_SYS_CTRL) = RP_CLK_SYS_CTRL_SRC_AUX;
    while (MCU_REG32(RP_CLK_SYS_SELECTED) != 0x1u) {
    }
    /* clk_ref onto the crystal, undivided. */
    MCU_REG32(RP_CLK_REF_DIV) = RP_CLK_DIV_INT_1;
    MCU_REG32(RP_CLK_REF_CTRL) = (MCU_REG32(RP_CLK_REF_CTRL) & ~RP_CLK_REF_CTRL_SRC_BITS) | RP_CLK_REF_CTRL_SRC_XOSC;
    while (MCU_REG32(RP_CLK_REF_SELECTED) != (1u << RP_CLK_REF_CTRL_SRC_XOSC)) {
    }

    rp2_pll_sys_start();

    /* clk_sys: aux mux to PLL_SYS while clk_sys still runs from clk_ref (the
     * aux mux glitches), then switch the glitchless mux to aux. */
    MCU_REG32(RP_CLK_SYS_DIV) = RP_CLK_DIV_INT_1;
    MCU_REG32(RP_CLK_SYS_CTRL) = (MCU_REG32(RP_CLK_SYS_CTRL) & ~RP_CLK_SYS_CTRL_AUXSRC_BITS) |
                                 RP_CLK_SYS_CTRL_AUXSRC_PLL_SYS;
    RP_SET(RP_CLK_SYS_CTRL) = RP_CLK_SYS_CTRL_SRC_AUX;
    while (MCU_REG32(RP_CLK_SYS_SELECTED) != 0x2u) {
    }

    rp2_clk_peri_from_clk_sys();
}
