"""``mcu profile --program``: the per-op profile of a program file on the interpreter firmware.

The interpreter (runtime_c/interp) brackets every instruction with the same tracer hooks as generated
code, compiled in only with ``MCU_TRACE``; its event id is the instruction's index in the method, which
the program image maps back to the op (and the kernel the program runs). The normal interpreter
firmware runs the same program too: its whole-inference count is what the per-op counts must add up to,
and both must print the same outputs for every bundled vector.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from mcu.devtools.ops import op_table
from mcu.devtools.prefix_trace import fold
from mcu.devtools.profile import Profile, make_profile, out_lines
from mcu.devtools.trace import TraceEvent, TraceRun, parse_trace_lines, prefix_step_events
from mcu.errors import McuError
from mcu.program.device import build_interpreter_firmware, run_program
from mcu.program.run_model import fast_program_bytes


def profile_program(cm: Any, timeout_s: float = 600.0,
                    whole_for: Callable[[], Any] | None = None) -> tuple[Profile, TraceRun]:
    """The per-op profile of ``cm``'s program; ``whole_for``: the same model compiled with every tensor whole,
    whose program is profiled too when ``cm`` streams a prefix, so that the profile says what each of the
    prefix's ops costs beyond the same op run whole."""
    board = cm.board
    if board.sim_kind != "qemu" or board.qemu_machine is None:
        raise McuError(f"board {board.name} has no simulator to run the interpreter firmware on",
                       hint="profile a program file on a QEMU board (`mcu boards`)")
    image = cm.program_image(bundle_tests=True)
    # a loop is one event, its body none
    instructions = [image.instructions["forward"][i] for i in image.traced["forward"]]
    fast = fast_program_bytes(cm, image.program)  # --weights-in fast: the program runs from a RAM copy
    normal = run_program(board, build_interpreter_firmware(board, fast_bytes=fast).elf, image.program,
                         timeout_s=timeout_s)
    traced = run_program(board, build_interpreter_firmware(board, trace=True, fast_bytes=fast).elf, image.program,
                         timeout_s=timeout_s, trace=True)
    for what, run in (("interpreter", normal), ("profiling interpreter", traced)):
        if not run.passed:
            raise McuError(f"the {what} firmware failed the bundled vectors of {cm.spec.name}",
                           hint=(run.error or "") + "\n" + run.console.strip()[-1500:])
    if out_lines(normal.console) != out_lines(traced.console):
        raise McuError(f"the profiling and normal interpreter firmwares print different outputs for {cm.spec.name}",
                       hint="the tracer hooks must not change what a program computes: report this as a bug")
    lines = parse_trace_lines(traced.console)
    n = len(instructions) + prefix_step_events(cm)
    if len(lines) < n or len(traced.trace_instructions) != len(lines):
        raise McuError(f"the profiling interpreter reported {len(lines)} events and {len(traced.trace_instructions)} "
                       f"measured regions, expected {n} per inference")
    by_name = {op.name: op for op in op_table(cm.graph, cm.memory, cm.library)}
    handle_of = {name: by_name[name].handle for name, _ in instructions if name in by_name}
    missing = [name for name, _ in instructions if name not in by_name]
    if missing:
        raise McuError(f"program instructions without an op in the compile: {missing}")
    position = {index: k for k, index in enumerate(image.traced["forward"])}
    estimated = traced.trace_cycles if len(traced.trace_cycles) == len(lines) else None
    raw = [TraceEvent(handle=index, instructions=traced.trace_instructions[i], cycles=cycles,
                      estimated_cycles=estimated[i] if estimated else None) for i, (index, cycles) in enumerate(lines[:n])]
    # a streamed prefix's steps are events of their own: folded into the ROWS instruction's one
    raw, by_index = fold(raw)
    events = []
    for e in raw:
        if e.handle not in position:
            raise McuError(f"the profiling interpreter traced instruction {e.handle}; the method traces {len(instructions)}")
        events.append(dataclasses.replace(e, handle=handle_of[instructions[position[e.handle]][0]]))
    # The table shows the kernel the program runs (a program may lack a generated-C-only variant).
    ops = [dataclasses.replace(by_name[name], kernel=kernel) for name, kernel in instructions]
    title = f"{cm.spec.name} {cm.quantize} on {board.name} (program file on the interpreter firmware)"
    profile = make_profile(title, "instructions", ops, events, normal.instructions[0] if normal.instructions else None,
                           "normal interpreter", clock_hz=board.clock_hz)
    profile.prefixes = {handle_of[instructions[position[k]][0]]: t for k, t in by_index.items()}
    if whole_for is not None and profile.prefixes:
        whole, _ = profile_program(whole_for(), timeout_s)
        profile.whole_costs = {r.op.name: r.cost for r in whole.rows}
    run = TraceRun(board=board.name, unit="instructions", events=events,
                   inference_cost=traced.instructions[0] if traced.instructions else None, outputs_raw=[],
                   passed=traced.passed, console=traced.console)
    return profile, run
