/* Platform layer for host builds (tests, the reference runner): console on
 * stdout, exit through exit(3), no cycle counter. */
#include <stdio.h>
#include <stdlib.h>

#include "mcu/platform.h"

void mcu_platform_init(void)
{
}

void mcu_platform_write(const char *s, size_t n)
{
    fwrite(s, 1, n, stdout);
    /* Flush per write so the console survives a crash that follows it, as
     * a UART line would. */
    fflush(stdout);
}

uint32_t mcu_platform_cycles(void)
{
    return 0u;
}

void mcu_platform_exit(int status)
{
    fflush(stdout);
    exit(status);
}
