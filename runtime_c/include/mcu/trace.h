/**
 * @file trace.h
 * @brief The event tracer: begin/end hooks around every op of generated code.
 *
 * Compiled in only when the build defines `MCU_TRACE` (profiling and debug
 * builds, `mcu profile`). Otherwise both hooks expand to `((void)0)`: no
 * instruction, no byte and no symbol, so a normal build is unchanged.
 *
 * With `MCU_TRACE` every op is bracketed as
 *
 *     MCU_TRACE_OP_BEGIN(handle);   // const uint32_t mcu_trace_t0 = mcu_trace_op_begin(handle)
 *     ... the op's kernel call ...
 *     MCU_TRACE_OP_END(handle);     // mcu_trace_op_end(handle, mcu_trace_t0)
 *
 * inside the op's own block. `handle` is the op's debug handle: its index in
 * the lowered graph, the key under which the compile record describes it.
 * The cost comes from the platform layer: mcu_trace_op_end() prints
 * `TRACE <handle> <cycles>` with cycles from mcu_platform_cycles() (DWT
 * CYCCNT on hardware, 0 in QEMU). In QEMU the instruction-count plugin
 * (ports/qemu/insn_count.c) counts the instructions from the first
 * instruction of mcu_trace_op_begin to the first of mcu_trace_op_end, so the
 * tracer's own printing never lands in an op's figure.
 */
#ifndef MCU_TRACE_H
#define MCU_TRACE_H

#include <stdint.h>

/** Start of op `handle`: returns the cycle counter, which the caller keeps. */
uint32_t mcu_trace_op_begin(uint32_t handle);

/** End of op `handle`: reports the cycles since `begin_cycles` on the console. */
void mcu_trace_op_end(uint32_t handle, uint32_t begin_cycles);

/**
 * After op `handle` (debug builds, `MCU_TRACE_DUMP`): prints its output as
 * `TENSOR <handle> <hex words>` so the host can compare it with the Python
 * reference op by op (`mcu debug`). `output` points into the arena.
 */
void mcu_trace_op_output(uint32_t handle, void *output, uint32_t nbytes);

#ifdef MCU_TRACE_DUMP
#define MCU_TRACE_OP_OUTPUT(handle, output, nbytes) mcu_trace_op_output((handle), (output), (nbytes))
#else
#define MCU_TRACE_OP_OUTPUT(handle, output, nbytes) ((void)0)
#endif

#ifdef MCU_TRACE
#define MCU_TRACE_OP_BEGIN(handle) const uint32_t mcu_trace_t0 = mcu_trace_op_begin(handle)
#define MCU_TRACE_OP_END(handle) mcu_trace_op_end((handle), mcu_trace_t0)
#else
#define MCU_TRACE_OP_BEGIN(handle) ((void)0)
#define MCU_TRACE_OP_END(handle) ((void)0)
#endif

#endif /* MCU_TRACE_H */
