/*
 * Reset and exception entry for every Cortex-M port (v6-M, v7-M and v8-M
 * Mainline).
 *
 * The linker script (ports/cortex-m/linker.ld.j2) places the vector table at
 * the start of flash and defines the symbols used below. There is no C
 * library start-up code (-nostartfiles): Reset_Handler is all of it.
 */
#include <stdint.h>

#include "mcu/log.h"
#include "mcu/platform.h"
#include "mcu_cortex_m.h"

/* Linker-script symbols: only their addresses are meaningful. */
extern uint32_t __data_start__;
extern uint32_t __data_end__;
extern uint32_t __data_load__;
extern uint32_t __bss_start__;
extern uint32_t __bss_end__;
extern uint32_t __ram_start__;
extern uint32_t __stack_limit__;
extern uint32_t __stack_top__;
#if defined(MCU_WEIGHT_COPIES)
/* One entry of the linker script's copy table. */
struct mcu_cm_copy {
    const uint32_t *load;
    uint32_t *start;
    uint32_t *end;
};
extern const struct mcu_cm_copy __mcu_copy_table_start__[];
extern const struct mcu_cm_copy __mcu_copy_table_end__[];
#endif

extern int main(void);

void Reset_Handler(void) __attribute__((noreturn));
void mcu_cm_fault_entry(void);
void mcu_cm_fault_report(const uint32_t *frame, uint32_t exception) __attribute__((noreturn));

/* Weak so a port can take over any single exception. */
void NMI_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void HardFault_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void MemManage_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void BusFault_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void UsageFault_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void SecureFault_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void SVC_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void DebugMon_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void PendSV_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));
void SysTick_Handler(void) __attribute__((weak, alias("mcu_cm_fault_entry")));

typedef void (*mcu_cm_vector)(void);

/* The architecture's 16 system entries only: the runtime enables no
 * interrupts, so no device IRQ slots are needed. A port that uses IRQs
 * provides its own table in .vectors. */
struct mcu_cm_vector_table {
    const uint32_t *initial_sp;
    mcu_cm_vector exceptions[15];
};

__attribute__((section(".vectors"), used)) const struct mcu_cm_vector_table mcu_cm_vector_table = {
    .initial_sp = &__stack_top__,
    .exceptions = {
        Reset_Handler,
        NMI_Handler,
        HardFault_Handler,
        MemManage_Handler,
        BusFault_Handler,
        UsageFault_Handler,
        SecureFault_Handler, /* reserved on v7-M, never taken there */
        0,
        0,
        0,
        SVC_Handler,
        DebugMon_Handler,
        0,
        PendSV_Handler,
        SysTick_Handler,
    },
};

/* Words at the bottom of the stack that only an overflow overwrites. v8-M
 * traps overflows with MSPLIM; on v7-M this check after main() is the only
 * sign that the stack ran into the data below it. */
#define MCU_STACK_CANARY 0xC0DEFA11u
#define MCU_STACK_CANARY_WORDS 8u
/* Stack-measuring builds (-DMCU_STACK_PAINT, mcu.device.stack's check in QEMU) fill
 * the free stack with this word at reset and print "STACK <bytes>", the
 * high-water mark, after main returns. */
#define MCU_STACK_PAINT_WORD 0x57AC57ACu

#define MCU_SHCSR_MEMFAULTENA (1u << 16)
#define MCU_SHCSR_BUSFAULTENA (1u << 17)
#define MCU_SHCSR_USGFAULTENA (1u << 18)
#define MCU_SHCSR_SECUREFAULTENA (1u << 19)

#if defined(MCU_CM_L1_CACHES)
/* The core's L1 caches are off and their contents undefined out of reset:
 * invalidate each, then enable it, as silicon firmware does before it runs
 * anything from memories outside the TCMs (the board file's [l1_cache]; the
 * timing model charges those memories' accesses through the caches). The
 * data cache is invalidated set by set and way by way, as CCSIDR sizes it. */
static void mcu_cm_enable_l1_caches(void)
{
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    MCU_SCB_ICIALLU = 0u;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    MCU_SCB_CSSELR = 0u; /* level 1, data */
    __asm__ volatile("dsb" ::: "memory");
    const uint32_t ccsidr = MCU_SCB_CCSIDR;
    const uint32_t last_set = (ccsidr >> 13) & 0x7FFFu;
    const uint32_t last_way = (ccsidr >> 3) & 0x3FFu;
    const uint32_t set_shift = (ccsidr & 7u) + 4u; /* log2 of the line's bytes */
    /* The way number sits in DCISW's top bits, as many as the ways need. */
    const uint32_t way_shift = last_way == 0u ? 0u : (uint32_t)__builtin_clz(last_way);
    for (uint32_t set = 0; set <= last_set; set++) {
        for (uint32_t way = 0; way <= last_way; way++) {
            MCU_SCB_DCISW = (way_shift == 0u ? 0u : way << way_shift) | (set << set_shift);
        }
    }
    __asm__ volatile("dsb" ::: "memory");
    MCU_SCB_CCR |= MCU_CCR_IC | MCU_CCR_DC;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}
#endif

void Reset_Handler(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* Full access to CP10/CP11 before any compiler-generated FPU or MVE
     * instruction: Helium shares the FPU's register file and its enable, so
     * an integer-only MVE build (no __ARM_FP) needs it too. The barriers make
     * the new CPACR visible to the next instruction. */
    MCU_SCB_CPACR |= (0xFu << 20);
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
#if defined(__ARM_ARCH_8M_MAIN__)
    /* v8-M checks the stack limit in hardware: an overflow becomes a
     * UsageFault instead of silently overwriting the arena below the stack. */
    __asm__ volatile("msr msplim, %0" ::"r"(&__stack_limit__));
#endif

#if defined(MCU_CM_L1_CACHES)
    mcu_cm_enable_l1_caches();
#endif

    const uint32_t *src = &__data_load__;
    for (uint32_t *dst = &__data_start__; dst < &__data_end__;) {
        *dst++ = *src++;
    }
#if defined(MCU_WEIGHT_COPIES)
    /* Constant tensors the linker put in RAM (--weights-in fast, mcu/device/placement.py): each section's
     * load image in read-only memory, copied before anything reads them. */
    for (const struct mcu_cm_copy *c = __mcu_copy_table_start__; c < __mcu_copy_table_end__; c++) {
        const uint32_t *from = c->load;
        for (uint32_t *to = c->start; to < c->end;) {
            *to++ = *from++;
        }
    }
#endif
    for (uint32_t *dst = &__bss_start__; dst < &__bss_end__;) {
        *dst++ = 0u;
    }

#if !defined(__ARM_ARCH_6M__)
    /* Report each fault class by name instead of everything escalating to
     * HardFault. (v6-M has only HardFault, and its SHCSR is debugger-only.) */
    uint32_t shcsr = MCU_SHCSR_MEMFAULTENA | MCU_SHCSR_BUSFAULTENA | MCU_SHCSR_USGFAULTENA;
#if defined(__ARM_ARCH_8M_MAIN__)
    shcsr |= MCU_SHCSR_SECUREFAULTENA;
#endif
    MCU_SCB_SHCSR |= shcsr;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif

    uint32_t *canary = &__stack_limit__;
    for (uint32_t i = 0; i < MCU_STACK_CANARY_WORDS; i++) {
        canary[i] = MCU_STACK_CANARY;
    }
#ifdef MCU_STACK_PAINT
    uint32_t *sp_now;
    __asm__ volatile("mov %0, sp" : "=r"(sp_now));
    /* Everything below the current sp is free: nothing runs but this. */
    for (uint32_t *w = canary + MCU_STACK_CANARY_WORDS; w < sp_now; w++) {
        *w = MCU_STACK_PAINT_WORD;
    }
#endif

    mcu_cm_cycles_enable();
    mcu_platform_init();
    int ret = main();
#ifdef MCU_STACK_PAINT
    const uint32_t *lowest = canary + MCU_STACK_CANARY_WORDS;
    while (lowest < &__stack_top__ && *lowest == MCU_STACK_PAINT_WORD) {
        lowest++;
    }
    mcu_log_str("STACK ");
    mcu_log_u32((uint32_t)((uintptr_t)&__stack_top__ - (uintptr_t)lowest));
    mcu_log_newline();
#endif

    for (uint32_t i = 0; i < MCU_STACK_CANARY_WORDS; i++) {
        if (canary[i] != MCU_STACK_CANARY) {
            mcu_log_str("FAULT StackOverflow exception=0\n");
            ret = MCU_EXIT_STACK_OVERFLOW;
            break;
        }
    }
    mcu_platform_exit(ret);
    for (;;) {
    }
}

/* The reporter runs on its own small stack: after a stack overflow the
 * active SP points outside RAM, and after an ordinary fault the frame we
 * want to print sits on the old stack where a fresh call could overwrite
 * it. 256 bytes covers mcu_cm_fault_report and the console writes. */
__attribute__((used, aligned(8))) static uint64_t mcu_cm_fault_stack[32];

/* Pass the stacked exception frame (from whichever stack was active) and
 * the exception number to the C reporter. Naked: no prologue may push onto
 * the possibly broken stack. */
__attribute__((naked)) void mcu_cm_fault_entry(void)
{
    __asm__ volatile(
#if defined(__ARM_ARCH_6M__)
        /* v6-M: no IT blocks and no TST with an immediate. */
        "movs r0, #4\n\t"
        "mov r1, lr\n\t"
        "tst r0, r1\n\t"
        "bne 1f\n\t"
        "mrs r0, msp\n\t"
        "b 2f\n\t"
        "1:\n\t"
        "mrs r0, psp\n\t"
        "2:\n\t"
#else
        "tst lr, #4\n\t"
        "ite eq\n\t"
        "mrseq r0, msp\n\t"
        "mrsne r0, psp\n\t"
#endif
        "mrs r1, ipsr\n\t"
#if defined(__ARM_ARCH_8M_MAIN__)
        /* The fault stack lies below the main stack's limit. */
        "movs r2, #0\n\t"
        "msr msplim, r2\n\t"
#endif
        "ldr r2, =mcu_cm_fault_stack + 256\n\t"
        "mov sp, r2\n\t"
        "b mcu_cm_fault_report\n\t");
}

static const char *mcu_cm_exception_name(uint32_t exception)
{
    switch (exception) {
    case 2: return "NMI";
    case 3: return "HardFault";
    case 4: return "MemManage";
    case 5: return "BusFault";
    case 6: return "UsageFault";
    case 7: return "SecureFault";
    case 11: return "SVC";
    case 12: return "DebugMon";
    case 14: return "PendSV";
    case 15: return "SysTick";
    default: return "IRQ";
    }
}

__attribute__((used)) void mcu_cm_fault_report(const uint32_t *frame, uint32_t exception)
{
    /* One line, stable prefix: the host looks for "FAULT " in the console. */
    mcu_log_str("FAULT ");
    mcu_log_str(mcu_cm_exception_name(exception));
    mcu_log_str(" exception=");
    mcu_log_u32(exception);
    /* A stack overflow can leave the frame pointer outside RAM; reading it
     * would fault again inside the handler and lock up. */
    uintptr_t f = (uintptr_t)frame;
    if (f >= (uintptr_t)&__ram_start__ && f + 32u <= (uintptr_t)&__stack_top__) {
        mcu_log_str(" pc=");
        mcu_log_hex32(frame[6]);
        mcu_log_str(" lr=");
        mcu_log_hex32(frame[5]);
    }
#if !defined(__ARM_ARCH_6M__) /* v6-M has no fault status registers */
    mcu_log_str(" cfsr=");
    mcu_log_hex32(MCU_SCB_CFSR);
    mcu_log_str(" hfsr=");
    mcu_log_hex32(MCU_SCB_HFSR);
#endif
    mcu_log_newline();
    uint32_t code = exception < 127u ? exception : 127u;
    mcu_platform_exit(MCU_EXIT_FAULT_BASE + (int)code);
    for (;;) {
    }
}
