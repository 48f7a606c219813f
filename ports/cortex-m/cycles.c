/* DWT CYCCNT as mcu_platform_cycles(). QEMU does not model it and reads 0. */
#include "mcu/platform.h"
#include "mcu_cortex_m.h"

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
