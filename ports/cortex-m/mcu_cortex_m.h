/**
 * @file mcu_cortex_m.h
 * @brief Pieces every Cortex-M port shares: system registers, semihosting,
 *        the DWT cycle counter and the fault-exit convention.
 *
 * Board ports (ports/mps2, ports/rp2350, ...) only add clock, pin and UART
 * setup plus their strong mcu_platform_init/write/exit.
 */
#ifndef MCU_CORTEX_M_H
#define MCU_CORTEX_M_H

#include <stdint.h>

#define MCU_REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* System Control Block and debug registers (same addresses on v7-M and v8-M). */
#define MCU_SCB_SHCSR MCU_REG32(0xE000ED24u)
#define MCU_SCB_CFSR MCU_REG32(0xE000ED28u)
#define MCU_SCB_HFSR MCU_REG32(0xE000ED2Cu)
#define MCU_SCB_MMFAR MCU_REG32(0xE000ED34u)
#define MCU_SCB_BFAR MCU_REG32(0xE000ED38u)
#define MCU_SCB_CPACR MCU_REG32(0xE000ED88u)
#define MCU_DEMCR MCU_REG32(0xE000EDFCu)
#define MCU_DWT_CTRL MCU_REG32(0xE0001000u)
#define MCU_DWT_CYCCNT MCU_REG32(0xE0001004u)

/**
 * A fault or unexpected exception ends the run with status
 * MCU_EXIT_FAULT_BASE + exception number (HardFault 3 -> 131, MemManage 132,
 * BusFault 133, UsageFault 134, SecureFault 135), so it can never be
 * mistaken for an mcu_status returned by main (0..127).
 */
#define MCU_EXIT_FAULT_BASE 128
/** main() returned but the stack canary below the stack was overwritten. */
#define MCU_EXIT_STACK_OVERFLOW MCU_EXIT_FAULT_BASE

/** Stop the simulator with `status` (semihosting SYS_EXIT_EXTENDED). */
void mcu_cm_semihost_exit(int status) __attribute__((noreturn));

/** Start the DWT cycle counter (called by the startup code before main). */
void mcu_cm_cycles_enable(void);

#endif /* MCU_CORTEX_M_H */
