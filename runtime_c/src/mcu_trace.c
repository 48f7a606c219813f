/* The event tracer's hooks (see mcu/trace.h); linked only into MCU_TRACE builds. */
#include "mcu/trace.h"

#include <string.h>

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

void mcu_trace_op_output(uint32_t handle, void *output, uint32_t nbytes)
{
#ifdef MCU_TRACE_TEST_PERTURB
    /* Test-only (tests/devtools/test_devtools_debug.py): corrupt one op's result in the arena, as a kernel with
     * a bug would, so that `mcu debug` must name that op. Never defined in a real build. Byte 3 bit 5: an
     * int8 element off by 32, or an fp32 element's exponent (a lowest-bit flip of a float would be inside
     * the tolerance an fp32 island is checked with). */
    if (handle == (uint32_t)(MCU_TRACE_TEST_PERTURB) && nbytes > 0u) {
        ((uint8_t *)output)[nbytes >= 4u ? 3u : 0u] ^= 0x20u;
    }
#endif
    const uint8_t *p = (const uint8_t *)output;
    mcu_log_str("TENSOR ");
    mcu_log_u32(handle);
    for (uint32_t i = 0; i < nbytes; i += 4u) {
        uint32_t word = 0;
        memcpy(&word, p + i, nbytes - i < 4u ? nbytes - i : 4u);
        mcu_log_str(" ");
        mcu_log_hex32(word);
    }
    mcu_log_newline();
}
