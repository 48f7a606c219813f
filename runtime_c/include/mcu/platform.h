/**
 * @file platform.h
 * @brief The platform layer: the few things the runtime needs from a board.
 *
 * Every function has a weak default in runtime_c/src/mcu_platform_default.c
 * (silent console, zero cycles, spin on exit) so the runtime links anywhere;
 * each port in ports/ overrides them with strong definitions.
 */
#ifndef MCU_PLATFORM_H
#define MCU_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/** Bring up clocks and the console. Called once before anything else. */
void mcu_platform_init(void);

/** Write `n` bytes to the console (UART on boards, stdout on the host). */
void mcu_platform_write(const char *s, size_t n);

/** Free-running cycle counter (DWT CYCCNT on hardware; 0 where there is none). */
uint32_t mcu_platform_cycles(void);

/** Stop with an exit status (semihosting on simulators, a spin loop on hardware). */
void mcu_platform_exit(int status);

/**
 * Markers around one inference. They are never inlined so that an instruction
 * counting simulator plugin can find them by symbol address; their bodies
 * do nothing observable.
 */
void mcu_bench_begin(void);
void mcu_bench_end(void);

#endif /* MCU_PLATFORM_H */
