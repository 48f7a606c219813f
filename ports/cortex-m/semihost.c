/* Arm semihosting, used only to end a simulated run with a status. */
#include "mcu_cortex_m.h"

/* SYS_EXIT_EXTENDED takes a {reason, status} block; plain SYS_EXIT (0x18)
 * only reports success or failure, which loses the status. */
#define MCU_SEMIHOST_SYS_EXIT_EXTENDED 0x20u
#define MCU_SEMIHOST_ADP_STOPPED_APPLICATION_EXIT 0x20026u

void mcu_cm_semihost_exit(int status)
{
    const uint32_t block[2] = {MCU_SEMIHOST_ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
    register uint32_t r0 __asm__("r0") = MCU_SEMIHOST_SYS_EXIT_EXTENDED;
    register const uint32_t *r1 __asm__("r1") = block;
    /* M-profile semihosting trap. Without a debugger or simulator it would
     * escalate to HardFault, so this is only called where one is attached. */
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    for (;;) {
    }
}
