/* The event tracer's hooks (see mcu/trace.h); linked only into MCU_TRACE builds. */
#include "mcu/trace.h"

#include "mcu/log.h"
#include "mcu/platform.h"

/* noinline: the instruction-count plugin finds both hooks by symbol address. */
__attribute__((noinline)) uint32_t mcu_trace_op_begin(uint32_t handle)
{
    (void)handle;
    return mcu_platform_cycles();
}

__attribute__((noinline)) void mcu_trace_op_end(uint32_t handle, uint32_t begin_cycles)
{
    uint32_t cycles = mcu_platform_cycles() - begin_cycles;
    mcu_log_str("TRACE ");
    mcu_log_u32(handle);
    mcu_log_str(" ");
    mcu_log_u32(cycles);
    mcu_log_newline();
}
