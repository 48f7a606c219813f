"""``mcu run``: build and run on the board's simulator (QEMU or Renode), as a Linux executable, or as a program file
on the interpreter firmware, against the bundled test vectors."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from mcu.commands.common import compile_model, print_json, refuse_cmsis_nn_in_program
from mcu.commands.reports import (base_report, model_label, print_partitions, print_predicted_class, print_sizes,
                                  run_fields)
from mcu.device.boards import load_board
from mcu.device.console import parse_harness
from mcu.device.timing import estimate, null_fields
from mcu.devtools.trace import run_traced
from mcu.errors import McuError
from mcu.passes.quantized.fp32_islands import summarize as summarize_islands
from mcu.quantize import modes


def cmd_run(args: argparse.Namespace) -> int:
    board = load_board(args.board)
    if getattr(args, "program", False) and getattr(args, "sim", None) == "renode":
        raise McuError("--program runs the interpreter firmware in QEMU, not in Renode",
                       hint="drop --sim renode, or drop --program")
    if getattr(args, "program", False) and board.sim_kind != "qemu":
        raise McuError(f"--program runs the interpreter firmware in QEMU, and {board.name} is not a QEMU board",
                       hint="pick a QEMU board (see `mcu boards`), or drop --program")
    if getattr(args, "program", False):
        refuse_cmsis_nn_in_program(args)
    if getattr(args, "sim", None) == "renode":
        return _run_renode(args)
    if board.sim_kind is None and board.deploy_method == "uf2":
        raise McuError(f"board '{board.name}' is real hardware with no simulator",
                       hint=f"run it with `mcu flash --board {board.name} {args.model}`, or pick a simulated board")
    if board.is_linux:
        return _run_linux(args)
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if is_generation_file(args.model):
        # lazy: keeps torch and jinja2 out of this module's import
        from mcu.commands import generate as cli_generate

        return cli_generate.run(args)
    cm = compile_model(args)
    if getattr(args, "program", False):
        return _run_program_file(args, cm)
    fw = cm.build()
    sim = cm.simulate(timeout_s=args.timeout)
    report = base_report(cm, fw)
    report["fp32_islands"]["instruction_share"] = _island_share(cm)
    report.update(run_fields(cm, "qemu", sim.passed, sim.exit_code, sim.outputs, sim.outputs_raw,
                              sim.max_abs_error_vs_eager, sim.max_error_vs_expected, sim.instructions))
    timing = estimate(cm.board, sim.estimated_cycles)
    report.update(timing.fields() if timing is not None else null_fields())
    if args.json:
        print_json(report)
    else:
        print_predicted_class(sim.outputs)
        print(f"{'PASS' if sim.passed else 'FAIL'}: {len(sim.outputs)} bundled test vectors on {cm.board.name} "
              f"({model_label(cm)}); max |device - eager| = {sim.max_abs_error_vs_eager:.3g}")
        print(f"instructions per inference: {sim.instructions}")
        if timing is not None:
            print(timing.line())
        print_sizes(report)
        print_partitions(cm.partitions)
        if not sim.passed:
            print(sim.console.strip()[-2000:], file=sys.stderr)
    return 0 if sim.passed else 1


def _island_share(cm: Any) -> float | None:
    """The share of the instructions an int8 program spends on its fp32 islands, from a profiling run (only
    when it has islands: the plain firmware counts the whole inference, not its ops)."""
    if not cm.graph.fallbacks or modes.is_float(cm.quantize) or cm.board.sim_kind != "qemu":
        return None
    try:
        events = run_traced(cm).events
    except McuError:
        return None  # the share is extra information: the run's own verdict stands without it
    return summarize_islands(cm.graph.fallbacks, cm.graph, {e.handle: e.cost for e in events}).instruction_share


def _run_program_file(args: argparse.Namespace, cm) -> int:
    """The model's program file on the board's interpreter firmware (mcu.program.run_model)."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.program.run_model import run_program_model

    res = run_program_model(cm, timeout_s=args.timeout)
    run = res.run
    report = base_report(cm, None)  # the C run's keys, sizes replaced by the interpreter's below
    report.update({"program": True, "program_bytes": res.program_bytes,
                   "flash_bytes": res.firmware_flash_bytes + res.program_bytes, "ram_bytes": res.firmware_ram_bytes,
                   "stack_bytes": res.stack_bytes, "error": run.error,
                   "weights_placed": {"ram": res.program_in_ram_bytes} if res.program_in_ram_bytes else {}})
    report.update(_program_outputs(cm, run, res.instructions))
    timing = estimate(cm.board, run.cycles)
    report.update(timing.fields() if timing is not None else null_fields())
    if args.json:
        print_json(report)
    else:
        print(f"{'PASS' if run.passed else 'FAIL'}: the program file ({res.program_bytes} B) with "
              f"{len(cm.spec.test_inputs)} bundled test vectors on {cm.board.name}'s interpreter firmware "
              f"({cm.quantize})")
        print(f"instructions per inference: {res.instructions}")
        if timing is not None:
            print(timing.line())
        print(f"flash: {report['flash_bytes']} B (interpreter {res.firmware_flash_bytes} B + program)   "
              f"arena: {report['arena_bytes']} B   stack: {res.stack_bytes} B (the interpreter's fixed stack)")
        if not run.passed:
            print(run.console.strip()[-2000:], file=sys.stderr)
    return 0 if run.passed else 1


def _program_outputs(cm: Any, run: Any, instructions: int | None) -> dict[str, Any]:
    """The generated C run's output keys (outputs, outputs_raw, output_names, the errors against eager and the
    reference) from what the interpreter firmware printed, so a program file's outputs compare with the C
    build's; null when it printed none (a program it refused)."""
    harness = next(iter(run.methods.values())) if len(run.methods) == 1 else None
    try:
        outputs, raw, eager_error, expected_error = cm.harness_outputs(harness, run.exit_code, run.console) \
            if harness is not None else ([], [], None, None)
    except McuError:
        outputs, raw, eager_error, expected_error = [], [], None, None
    fields = run_fields(cm, "qemu", run.passed, run.exit_code, outputs, raw, eager_error, expected_error,
                        instructions)
    if not outputs:
        fields.update(outputs=None, outputs_raw=None, same_top1=None)
    return fields


def _run_linux(args: argparse.Namespace) -> int:
    """A Linux board (host, arm64-linux): the same harness as a native executable (or under qemu-aarch64);
    delegated models are checked within bounds (mcu.api.DELEGATE_INT8_LSB / DELEGATE_FP32_RELATIVE)."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.linux import expectations, run_on_linux

    cm = compile_model(args)
    run = run_on_linux(cm, *expectations(cm), timeout_s=args.timeout)
    real = [cm.decode_outputs(row) for row in run.outputs]
    eager_error = max((float(np.max(np.abs(y.astype(np.float64) - e), initial=0.0))
                       for row, eager in zip(real, cm.eager_outputs) for y, e in zip(row, eager)), default=0.0)
    report = base_report(cm, None)
    report.update(run_fields(cm, cm.board.linux_run[0] if cm.board.linux_run else "native", run.passed,
                              run.exit_code,
                              real, [cm.raw_outputs(row) for row in run.outputs], eager_error, run.max_error, None))
    report.update(null_fields())  # a Linux board runs no timing model
    if args.json:
        print_json(report)
    else:
        print_predicted_class(run.outputs)
        bound = "within bounds of" if cm.delegated else "equal to"
        print(f"{'PASS' if run.passed else 'FAIL'}: {len(run.outputs)} bundled test vectors on {cm.board.name} "
              f"({model_label(cm)}) {bound} the reference; max error {run.max_error:.3g}; arena {cm.memory.arena_size} B")
        if cm.graph.fallbacks:
            print(summarize_islands(cm.graph.fallbacks).line())
        print_partitions(cm.partitions)
        if not run.passed:
            print(run.console.strip()[-2000:], file=sys.stderr)
    return 0 if run.passed else 1


def _run_renode(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.renode import check_renode_board, find_renode, run_renode

    # Fail before compiling when the board has no Renode platform or Renode is missing.
    check_renode_board(load_board(args.board))
    find_renode()
    cm = compile_model(args)
    fw = cm.build()
    result = run_renode(cm.board, fw.elf, fw.elf.parent, timeout_s=args.timeout)
    harness = parse_harness(result.console)
    passed = result.exit_code == 0
    outputs, raw, eager_error, expected_error = cm.harness_outputs(harness, result.exit_code, result.console)
    report = base_report(cm, fw)
    report.update(run_fields(cm, "renode", passed, result.exit_code, outputs, raw, eager_error, expected_error,
                              None))
    report.update({"cycles": harness.cycles, "console": result.console})
    if args.json:
        print_json(report)
    else:
        print(f"{'PASS' if passed else 'FAIL'}: {len(harness.vector_passed)} bundled test vectors on "
              f"{cm.board.name} in Renode ({cm.quantize})")
        print_sizes(report)
        if not passed:
            print(result.console.strip()[-2000:], file=sys.stderr)
    return 0 if passed else 1
