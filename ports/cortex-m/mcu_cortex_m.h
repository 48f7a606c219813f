/**
 * @file mcu_cortex_m.h
 * @brief Pieces every Cortex-M port shares: system registers, semihosting,
 *        the DWT cycle counter and the fault-exit convention.
 *
 * Board ports (ports/mps2, ports/rp2, ...) only add clock, pin and UART
 * setup plus their strong mcu_platform_init/write/exit; simulated boards
 * exit through mcu_cm_semihost_exit, real ones through mcu_cm_hardware_exit.
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
/* Cache control and maintenance (v7-M with caches, v8.1-M): CCR.IC/DC enable
 * the L1 caches; CSSELR picks the cache CCSIDR describes; ICIALLU and DCISW
 * invalidate (all of the instruction cache, one set and way of the data cache). */
#define MCU_SCB_CCR MCU_REG32(0xE000ED14u)
#define MCU_SCB_CCSIDR MCU_REG32(0xE000ED80u)
#define MCU_SCB_CSSELR MCU_REG32(0xE000ED84u)
#define MCU_SCB_ICIALLU MCU_REG32(0xE000EF50u)
#define MCU_SCB_DCISW MCU_REG32(0xE000EF60u)
#define MCU_CCR_DC (1u << 16)
#define MCU_CCR_IC (1u << 17)
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

/** Print the console line `EXIT <status>` (how hardware ports report the exit status). */
void mcu_cm_report_exit(int status);

/** Wait until the console has sent everything (weak no-op; UART ports override it). */
void mcu_cm_console_flush(void);

/** Non-zero when a debugger has enabled halting debug (DHCSR.C_DEBUGEN). */
int mcu_cm_debugger_attached(void);

/**
 * End a run on real hardware: print `EXIT <status>`, then stop with a
 * semihosting exit if a debugger is attached, else sleep forever. Never
 * issues a semihosting BKPT without a debugger (it would HardFault).
 */
void mcu_cm_hardware_exit(int status) __attribute__((noreturn));

#endif /* MCU_CORTEX_M_H */
