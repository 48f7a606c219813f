/* Weak defaults so the runtime links on any target; ports/ override them. */
#include "mcu/platform.h"

__attribute__((weak)) void mcu_platform_init(void) {}

__attribute__((weak)) void mcu_platform_write(const char *s, size_t n)
{
    (void)s;
    (void)n;
}

__attribute__((weak)) uint32_t mcu_platform_cycles(void)
{
    return 0u;
}

__attribute__((weak)) void mcu_platform_exit(int status)
{
    (void)status;
    for (;;) {
    }
}

/* The empty asm keeps the call and the symbol: the instruction counter
 * plugin triggers on the first instruction of each marker. */
__attribute__((weak, noinline)) void mcu_bench_begin(void)
{
    __asm__ volatile("" ::: "memory");
}

__attribute__((weak, noinline)) void mcu_bench_end(void)
{
    __asm__ volatile("" ::: "memory");
}
