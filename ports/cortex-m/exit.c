/*
 * Ending a run on real hardware, where no simulator catches semihosting.
 *
 * The status goes to the console as one line, `EXIT <status>`, so the host
 * (mcu flash / mcu monitor) learns it even when the run ended in a fault.
 * Only when a debugger is attached is the run then stopped with a
 * semihosting exit: a debugger with semihosting enabled reports the status,
 * any other debugger simply halts the core there. Without a debugger a
 * semihosting BKPT would escalate to HardFault, so the core spins instead.
 */
#include "mcu/log.h"
#include "mcu_cortex_m.h"

/* Debug Halting Control and Status Register (same address on v7-M and v8-M). */
#define MCU_DHCSR MCU_REG32(0xE000EDF0u)
#define MCU_DHCSR_C_DEBUGEN (1u << 0)

/* Ports whose UART keeps bytes in a FIFO override this so the exit line is
 * on the wire before a debugger stops the target. */
__attribute__((weak)) void mcu_cm_console_flush(void)
{
}

void mcu_cm_report_exit(int status)
{
    mcu_log_str("EXIT ");
    mcu_log_i32((int32_t)status);
    mcu_log_newline();
}

int mcu_cm_debugger_attached(void)
{
#if defined(__ARM_ARCH_6M__)
    /* ARMv6-M leaves software access to DHCSR to the implementation: never assume a debugger. */
    return 0;
#else
    return (MCU_DHCSR & MCU_DHCSR_C_DEBUGEN) != 0u;
#endif
}

void mcu_cm_hardware_exit(int status)
{
    mcu_cm_report_exit(status);
    mcu_cm_console_flush();
    if (mcu_cm_debugger_attached()) {
        mcu_cm_semihost_exit(status);
    }
    for (;;) {
        /* Sleep until an event: nothing is enabled to wake the core, so it
         * stays here without burning the bus, and a debugger can still
         * attach and halt it. */
        __asm__ volatile("wfe");
    }
}
