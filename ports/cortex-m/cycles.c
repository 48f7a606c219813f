/* mcu_platform_cycles(): DWT CYCCNT on v7-M and v8-M Mainline (QEMU does not
 * model it and reads 0); SysTick on v6-M, whose DWT has no cycle counter. */
#include "mcu/platform.h"
#include "mcu_cortex_m.h"

#if defined(__ARM_ARCH_6M__)

#define MCU_SYST_CSR MCU_REG32(0xE000E010u)
#define MCU_SYST_RVR MCU_REG32(0xE000E014u)
#define MCU_SYST_CVR MCU_REG32(0xE000E018u)
#define MCU_SYST_CSR_ENABLE (1u << 0)
#define MCU_SYST_CSR_TICKINT (1u << 1)
#define MCU_SYST_CSR_CLKSOURCE (1u << 2) /* the processor clock */
#define MCU_SYST_MAX 0x00FFFFFFu
#define MCU_SCB_ICSR MCU_REG32(0xE000ED04u)
#define MCU_ICSR_PENDSTSET (1u << 26)

/* SysTick is 24 bits wide (0.13 s at 125 MHz): its interrupt counts the
 * wraps so that an inference of any length has a 32-bit cycle count. In
 * QEMU (no -icount) SysTick follows host time and its timer callback can
 * lag the reload, so readings there are neither repeatable nor always
 * monotonic: simulated cost comes from the instruction-count plugin. */
static volatile uint32_t mcu_cm_systick_wraps;

void SysTick_Handler(void)
{
    mcu_cm_systick_wraps++;
}

void mcu_cm_cycles_enable(void)
{
    MCU_SYST_RVR = MCU_SYST_MAX;
    MCU_SYST_CVR = 0u;
    MCU_SYST_CSR = MCU_SYST_CSR_CLKSOURCE | MCU_SYST_CSR_TICKINT | MCU_SYST_CSR_ENABLE;
}

uint32_t mcu_platform_cycles(void)
{
    for (;;) {
        uint32_t counted = mcu_cm_systick_wraps;
        uint32_t wraps = counted;
        uint32_t count = MCU_SYST_MAX - MCU_SYST_CVR;
        if ((MCU_SCB_ICSR & MCU_ICSR_PENDSTSET) != 0u) {
            /* Reloaded, but the interrupt has not been taken yet: the reload came before this
             * check, so a fresh read is after it, and the wrap is one the handler has yet to count. */
            count = MCU_SYST_MAX - MCU_SYST_CVR;
            wraps++;
        }
        if (counted == mcu_cm_systick_wraps) { /* else the handler ran meanwhile: read again */
            return (wraps << 24) + count;
        }
    }
}

#else

#define MCU_DEMCR_TRCENA (1u << 24)
#define MCU_DWT_CTRL_CYCCNTENA (1u << 0)
#define MCU_DWT_CTRL_NOCYCCNT (1u << 25)

void mcu_cm_cycles_enable(void)
{
    /* The DWT is powered only while the trace enable bit is set. */
    MCU_DEMCR |= MCU_DEMCR_TRCENA;
    if ((MCU_DWT_CTRL & MCU_DWT_CTRL_NOCYCCNT) == 0u) {
        MCU_DWT_CYCCNT = 0u;
        MCU_DWT_CTRL |= MCU_DWT_CTRL_CYCCNTENA;
    }
}

uint32_t mcu_platform_cycles(void)
{
    return MCU_DWT_CYCCNT;
}

#endif
