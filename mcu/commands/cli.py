"""The ``mcu`` command line: a thin layer over :mod:`mcu.api`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mcu.commands.types import Parser, UsageError, positive_int, positive_seconds
from mcu.errors import McuError
from mcu.passes.quantized.fp32_islands import IslandSummary, summarize as summarize_islands
from mcu.progress import Reporter, reporting, terminal_stream
from mcu.quantize import modes
from mcu.commands.devtools import add_parsers as add_devtools_parsers, COMMANDS as DEVTOOLS
from mcu.device.boards import list_boards, load_board
from mcu.device.timing import estimate, null_fields
from mcu.backends.cmsis_nn.core import cli_spec, resolve
from mcu.progress import quiet_torch, stage
from mcu.devtools.trace import run_traced
from mcu.emit.outputs import build_lock, check_file_target, ensure_dir, write_atomic
from mcu.device.console import parse_harness
from mcu.device.flash import chip_for_family, flash_uf2, monitor
from mcu.program.format import WEIGHTS_SUFFIX
from mcu.commands.ops_listing import op_rows, render



def _add_model_args(p: argparse.ArgumentParser, board_required: bool = True) -> None:
    p.add_argument("model", type=Path, help="path to model.py (defines model, example_inputs, ...)")
    p.add_argument("--board", "-b", required=board_required, help="board name (see `mcu boards`)")
    p.add_argument("--quantize", "-q", choices=modes.CHOICES, default=modes.AUTO,
                   help="int8: static int8 (needs `calibration` in model.py); none: fp32; int8-weight: "
                        "int8 linear weights, fp32 activations; int8-dynamic: int8 linear weights and "
                        "run-time quantized inputs; int4-weight: 4-bit linear weights in groups of 32 "
                        "(torchao), fp32 activations; int4-dynamic: the same weights, inputs quantized to int8 per row at run time; "
                        "auto (default): int8 when model.py has `calibration`, "
                        "else fp32")
    p.add_argument("--cmsis-nn", metavar="PATH", default=None,
                   help="route supported int8 layers to CMSIS-NN built from these sources (a CMSIS-NN "
                        "checkout or unpacked pack; `auto`: CMSIS_NN_PATH, else cmsis-pack-manager's pack "
                        "cache); default: CMSIS_NN_PATH if set, else mcu's own kernels")
    p.add_argument("--backend", metavar="LIST", default=None,
                   help="backends in preference order, comma-separated (e.g. cmsis-nn,optimized,portable); each "
                        "op goes to the first that takes it, portable takes the rest; default: cmsis-nn (when "
                        "CMSIS-NN is given), optimized, portable")
    p.add_argument("--compact-weights", action="store_true",
                   help="keep int8 convolution and fully connected weights int8 in flash (reordered for the "
                        "compact kernels); by default, on cores with the DSP extension (Cortex-M4/M7/M33) they "
                        "are packed as int16 for the fastest kernel, which doubles their flash, unless the "
                        "board's flash has no room for that")
    p.add_argument("--prefill-chunk", type=positive_int, metavar="C", default=None,
                   help="text generation: prompt tokens per prefill call (default: the model file's "
                        "prefill_chunk); larger runs the prompt in fewer calls, each row of a chunk costs "
                        "working memory (1: the arena is the state plus decode's working set)")
    _add_output_mode_args(p)


def _add_output_mode_args(p: argparse.ArgumentParser) -> None:
    """Progress lines go to stderr when it is a terminal (never with --json)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--quiet", action="store_true", help="no progress lines")
    group.add_argument("--verbose", "-v", action="store_true",
                       help="progress lines even when stderr is not a terminal, and the log lines and warnings "
                            "torch printed while capturing and quantizing (hidden by default)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mcu", description="PyTorch models on microcontrollers.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("boards", help="list the boards", description="List the boards mcu can build for.")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("build", help="build the firmware and print a size report",
                       description="Compile model.py for a board: generated C, firmware ELF, size report.")
    _add_model_args(p)
    p.add_argument("-o", "--output", type=Path, help="output folder (default: mcu-out/<model>-<board>)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--memory-svg", type=Path, metavar="FILE", help="draw the memory plan to an SVG file")
    p.add_argument("--record", type=Path, metavar="FILE",
                   help="save the compile record (exported program, every op's debug handle, source line, "
                        "kernel, shapes, quantization, memory plan, sizes) for `mcu profile`/`mcu debug` later")

    p = sub.add_parser("run", help="build and run on the board's simulator against the bundled vectors",
                       description="Build the firmware, run it on the board's simulator with the bundled test "
                                   "vectors, exit 0 only when every output matches. Writes only into the build "
                                   "cache (~/.cache/mcu or MCU_CACHE_DIR); `mcu build -o DIR` keeps the firmware.")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="simulator timeout in seconds (default 600)")
    p.add_argument("--sim", choices=("qemu", "renode"), default=None,
                   help="simulator (default: the board's, see `mcu boards`); renode needs Renode installed")
    p.add_argument("--program", action="store_true",
                   help="run the program file on the interpreter firmware (the model in its "
                        "flash region, loaded at boot) instead of the generated C")

    p = sub.add_parser("export", help="write the generated C library to a folder, or a program file",
                       description="Write a self-contained C library (header, sources, weights, runtime subset, "
                                   "CMakeLists.txt and Makefile fragment), or with --format program a program "
                                   "file for the interpreter (mcu.program.host on the host, or an interpreter "
                                   "firmware built once per board).")
    _add_model_args(p, board_required=False)
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="output folder (--format c) or program file, e.g. model.mpk (--format program)")
    p.add_argument("--format", choices=("c", "program"), default="c",
                   help="c (default): the generated C library; program: a program file (.mpk)")
    p.add_argument("--external-weights", action="store_true",
                   help="program: put the weights in a separate file beside the program (<output>.mpw)")
    p.add_argument("--bundle-tests", action="store_true",
                   help="program: bundle the test vectors, for the interpreter firmware's test harness")
    p.add_argument("--verify", action="store_true",
                   help="program: load the written files back through the C loader (header, CRCs, weights "
                        "digests, every kernel parameter) and run their bundled vectors")
    p.add_argument("--target", choices=("cmake", "make", "pico-sdk", "arduino", "zephyr", "cmsis-pack"),
                   default="cmake",
                   help="c: the firmware ecosystem to write for (default cmake: the library with CMakeLists.txt "
                        "and a Makefile fragment; make is the same folder); pico-sdk, arduino and zephyr add an "
                        "example app that runs the bundled test vectors; cmsis-pack writes a .pdsc and a .pack")

    p = sub.add_parser("ops", help="list the PyTorch ops mcu can lower, with their dtypes and kernels",
                       description="List the supported ATen ops: the IR op kinds each lowers to, the C kernels "
                                   "that run them in fp32 and int8 models (or 'fp32 island' in int8 models) and "
                                   "the other backends that take them; all read from the lowering's own tables.")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p = sub.add_parser("ci", help="write a GitHub Actions workflow that runs models in Renode",
                       description="Write .github/workflows/mcu-renode.yml (installs the Arm compiler, Renode and "
                                   "mcu, then runs `mcu run --sim renode` for every model x board) and the Renode "
                                   "platform, script and Robot test of each board under renode/.")
    p.add_argument("--renode", action="store_true", required=True, help="run the matrix in Renode (required)")
    p.add_argument("models", nargs="+", metavar="model.py", help="model files, relative to the repository root")
    p.add_argument("--board", action="append", dest="boards", metavar="BOARD",
                   help="a board Renode runs (repeatable; default mps2-an505)")
    p.add_argument("-o", "--output", type=Path, default=Path("."), help="the repository root (default .)")
    p.add_argument("--mcu-source", metavar="PATH|URL", default=None,
                   help="where the workflow installs mcu from: its folder inside the repository (e.g. a git "
                        "submodule) or a git URL; default: the repository itself, when it is mcu's checkout")
    p.add_argument("--install", default=None,
                   help="the workflow's whole install command instead (default: torch 2.13.0 CPU and torchao "
                        "pinned as scripts/setup does, then mcu from --mcu-source)")
    _add_eval_parser(sub)
    _add_device_parsers(sub)
    add_devtools_parsers(sub, _add_model_args)
    return parser


def _add_eval_parser(sub: Any) -> None:
    p = sub.add_parser("eval", help="accuracy of fp32, the int8 reference and the simulated device on eval_data",
                       description="Measure the model on the evaluation set model.py names (`eval_data`: (inputs, "
                                   "label) pairs or a function yielding them; `eval_metric`: 'top1' (default), "
                                   "'top5' or a function (output, label) -> float): eager fp32 and the Python "
                                   "integer reference on every sample, and the firmware in the board's simulator "
                                   "on an evenly spaced sample (one run, its outputs checked against the reference "
                                   "bit for bit). Writes nothing but the build cache.")
    _add_model_args(p, board_required=False)
    p.add_argument("--samples", "-n", type=positive_int, default=50,
                   help="images run on the simulated device (default 50; evenly spaced over eval_data)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="simulator timeout in seconds (default 600)")


def _add_device_parsers(sub: Any) -> None:
    """`mcu flash` and `mcu monitor`: a real board over USB (see mcu/device/flash.py)."""
    p = sub.add_parser("flash", help="build, flash a Pico 2 or Pico in BOOTSEL mode and read its verdict over serial",
                       description="Build the firmware and its UF2, copy it to the board (Pico 2 or Pico) in BOOTSEL "
                                   "mode (or load "
                                   "it with picotool), then print what the firmware prints on its UART and exit "
                                   "0 on RESULT PASS, 1 on FAIL.")
    _add_model_args(p)
    p.add_argument("-o", "--output", type=Path, help="output folder (default: mcu-out/<model>-<board>)")
    p.add_argument("--drive", type=Path, help="the mounted BOOTSEL drive (default: search the usual mount points)")
    p.add_argument("--port", help="serial port of the board's UART (default: the first USB serial device)")
    p.add_argument("--timeout", type=positive_seconds, default=60.0,
                   help="seconds to wait for each step: the drive, the reboot, the console (default 60)")

    p = sub.add_parser("monitor", help="read a running board's console until its verdict",
                       description="Print what an already flashed board prints on its UART and exit 0 on "
                                   "RESULT PASS, 1 on FAIL (press the board's reset to run it again).")
    p.add_argument("--port", help="serial port (default: the first USB serial device)")
    p.add_argument("--timeout", type=positive_seconds, default=60.0,
                   help="seconds to wait for the verdict (default 60)")


def _print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=None, separators=(",", ":")))


def cmd_boards(args: argparse.Namespace) -> int:
    boards = list_boards()
    if args.json:
        _print_json({"boards": [{"name": b.name, "core": b.core, "fpu": b.fpu, "dsp": b.dsp, "mve": b.mve,
                                 "flash_bytes": b.flash.length, "ram_bytes": b.ram.length,
                                 "clock_hz": b.clock_hz, "simulator": b.sim_kind,
                                 "deploy": b.deploy_method, "uf2_family": b.uf2_family,
                                 "memory": {r.name: {"origin": r.origin, "length": r.length, "holds": list(r.holds)}
                                            for r in b.regions},
                                 "how": _how_run(b)} for b in boards]})
        return 0
    print(f"{'board':<14} {'core':<11} {'fpu':<9} {'dsp':<4} {'mve':<4} {'flash':>9} {'ram':>9} {'clock':>8}  run by")
    for b in boards:
        how = _how_run(b)
        print(f"{b.name:<14} {b.core:<11} {b.fpu or '-':<9} {'yes' if b.dsp else 'no':<4} "
              f"{'yes' if b.mve else 'no':<4} {_kib(b.flash.length):>9} {_kib(b.ram.length):>9} "
              f"{b.clock_hz / 1e6:>5.0f}MHz  {how}")
    return 0


def _how_run(b: Any) -> str:
    if b.sim_kind == "qemu":
        extra = "".join(f", {r.name} {_kib(r.length)} for {'/'.join(r.holds)}" for r in b.extra_regions if r.holds)
        return f"qemu ({b.qemu_machine}{extra})"
    if b.deploy_method == "uf2":
        return f"mcu flash: UF2 (family {b.uf2_family:#x}) to the BOOTSEL drive or picotool, console on UART"
    return b.sim_kind or b.deploy_method


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def _compile(args: argparse.Namespace):
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.api import compile_file

    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if getattr(args, "prefill_chunk", None) is not None and Path(args.model).is_file() \
            and not is_generation_file(args.model):
        raise McuError(f"--prefill-chunk applies to text-generation model files (methods prefill and decode); "
                       f"{args.model} is not one", hint="drop --prefill-chunk")
    spec, origin = cli_spec(getattr(args, "cmsis_nn", None))
    with quiet_torch(verbose=getattr(args, "verbose", False)):
        return compile_file(args.model, board=args.board, quantize=args.quantize,
                            cmsis_nn=resolve(spec, origin=origin),
                            packed_weights=False if getattr(args, "compact_weights", False) else None,
                            backend=getattr(args, "backend", None))


def _print_partitions(report) -> None:  # mcu.backends.base.PartitionReport
    """A compact table: per backend the ops it took and its partitions, the graph breaks, then the
    refusals grouped by backend and reason (with the first ops they hit)."""
    taken: dict[str, list[int]] = {}
    for backend, ops in report.partitions:
        row = taken.setdefault(backend, [0, 0])
        row[0] += len(ops)
        row[1] += 1
    print(f"{'backend':<10} {'ops':>5} {'partitions':>10}   graph breaks: {report.graph_breaks}")
    for backend, (n, parts) in taken.items():
        print(f"{backend:<10} {n:>5} {parts:>10}")
    grouped: dict[tuple[str, str], list[str]] = {}
    for r in report.refusals:
        grouped.setdefault((r.backend, r.why), []).append(r.op)
    for (backend, why), ops in grouped.items():
        names = "" if ops == ["*"] else f" ({len(ops)} ops: {', '.join(ops[:3])}{', ...' if len(ops) > 3 else ''})"
        print(f"  {backend} refused{names}: {why}")


def _base_report(cm, fw) -> dict[str, Any]:
    """The keys every build and run report has; ``fw`` None (Linux boards): no firmware image, sizes null."""
    return {
        "model": cm.spec.name,
        "board": cm.board.name,
        "quantize": cm.quantize,
        "flash_bytes": fw.flash_bytes if fw is not None else None,
        "ram_bytes": fw.ram_bytes if fw is not None else None,
        "arena_bytes": cm.memory.arena_size,
        "arena_lower_bound_bytes": cm.memory.lower_bound,
        "stack_bytes": fw.stack.reserved_bytes if fw is not None and fw.stack is not None else None,
        "arena_live_set_bytes": cm.memory.live_set,
        "fp32_fallbacks": [{"op": op, "reason": why} for op, why in cm.graph.fallbacks],
        "fp32_islands": summarize_islands(cm.graph.fallbacks).to_json(),
        "partitions": cm.partitions.to_json(),
        "delegated": cm.delegated,
        "elf": str(fw.elf) if fw is not None else None,
    }


def _run_fields(cm: Any, simulator: str, passed: bool, exit_code: int, outputs: list[list[np.ndarray]],
                outputs_raw: list[list[np.ndarray]], eager_error: float, expected_error: float,
                instructions: int | None) -> dict[str, Any]:
    """`mcu run --json` on every board (README, "mcu run --json"): ``outputs`` real values in logical shape
    (int8 dequantized), ``outputs_raw`` as the device wrote them (int8 codes), one list per test vector with
    one entry per model output."""
    return {
        "simulator": simulator,
        "passed": passed,
        "output_names": [io.name for io in cm.library.view.outputs],
        "exit_code": exit_code,
        "instructions": instructions,
        "outputs": [[_nested(o) for o in row] for row in outputs],
        "outputs_raw": [[o.tolist() for o in row] for row in outputs_raw],
        "max_abs_error_vs_eager": eager_error,
        "max_error_vs_expected": expected_error,
        "same_top1": all(int(np.argmax(r)) == int(np.argmax(e))
                         for row, exp in zip(outputs_raw, cm.expected_outputs)
                         for r, e in zip(row, cm.raw_outputs(exp))),
    }


def _print_sizes(report: dict[str, Any]) -> None:
    print(f"flash: {report['flash_bytes']} B   static RAM: {report['ram_bytes']} B   "
          f"arena: {report['arena_bytes']} B (lower bound {report['arena_lower_bound_bytes']} B; "
          f"largest live set {report['arena_live_set_bytes']} B before in-place overlaps)"
          + (f"   stack: {report['stack_bytes']} B" if report.get("stack_bytes") else ""))
    if report["fp32_fallbacks"]:
        islands = report["fp32_islands"]
        print(IslandSummary(islands["count"], {k: (v["count"], v["reason"]) for k, v in islands["ops"].items()},
                            islands["instruction_share"]).line())


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


def _label(cm: Any) -> str:
    """``int8``, or ``int8, N fp32 islands`` where the int8 program keeps ops in fp32."""
    n = len(cm.graph.fallbacks)
    return f"{cm.quantize}, {n} fp32 island{'s' if n != 1 else ''}" if n and not modes.is_float(cm.quantize) else cm.quantize


def _class_scores(outputs: list[np.ndarray]) -> np.ndarray | None:
    """The first output when the model looks like a classifier: one output of logical shape (C,) or (1, C)
    with 2 <= C <= 1000 (scores per class); a regression output ((1, 1), a sequence (1, T, F)) is not."""
    if len(outputs) != 1:
        return None
    shape = tuple(outputs[0].shape)
    scores = shape[-1] if len(shape) == 1 or (len(shape) == 2 and shape[0] == 1) else 0
    return outputs[0].reshape(-1) if 2 <= scores <= 1000 else None


def _ram_total(cm, fw) -> dict[str, int]:
    """Main RAM as arena + stack + statics (.data and .bss: harness buffers, the fault stack, libc)."""
    main_arena = cm.memory.arenas[0].plan.arena_size if cm.memory.arenas and cm.memory.arenas[0].region == "ram" \
        else 0
    stack = fw.stack.reserved_bytes
    return {"total": fw.ram_bytes, "arena": main_arena, "stack": stack, "statics": fw.ram_bytes - main_arena - stack}


def cmd_build(args: argparse.Namespace) -> int:
    if args.board and load_board(args.board).is_linux:
        raise McuError(f"mcu build makes firmware; {args.board} is a Linux board",
                       hint=f"use `mcu run --board {args.board} ...` (builds and runs the harness) or `mcu export`")
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if is_generation_file(args.model):
        # lazy: keeps torch and jinja2 out of this module's import
        from mcu.commands import generate as cli_generate

        return cli_generate.build(args)
    for option, target, example in (("--memory-svg", args.memory_svg, "plan.svg"), ("--record", args.record,
                                                                                    "model.record")):
        if target is not None:  # a bad path fails before the compile, not after it
            check_file_target(Path(target), what=f"{option} file", example=example)
    # The folder stays locked until the report is printed, so what --json says is what is on disk.
    with ExitStack() as stack:
        if args.output is not None:
            stack.enter_context(build_lock(args.output))
        cm = _compile(args)
        out = args.output
        if out is None:
            out = Path("mcu-out") / f"{cm.spec.name}-{cm.board.name}"
            stack.enter_context(build_lock(out))
        return _build_report(args, cm, cm.build(out, lock=False))


def _build_report(args: argparse.Namespace, cm: Any, fw: Any) -> int:
    report = _base_report(cm, fw)
    report["sources"] = str(fw.source_dir)
    report["memory"] = dict(getattr(fw, "region_bytes", {}))
    if getattr(fw, "uf2", None) is not None:
        report["uf2"] = str(fw.uf2)
    if fw.sizes is not None:
        report["size_breakdown"] = fw.sizes.as_dict()
    if getattr(fw, "stack", None) is not None:
        report["stack"] = fw.stack.to_json()
        report["ram_total"] = _ram_total(cm, fw)
    if args.memory_svg:
        args.memory_svg.write_text(cm.memory_svg())
        report["memory_svg"] = str(args.memory_svg)
    if args.record:
        # lazy: keeps jinja2 out of this module's import
        from mcu.devtools.record import write_record

        report["record"] = str(write_record(cm, args.record, fw))
    if args.json:
        _print_json(report)
    else:
        print(f"built {fw.elf} for {cm.board.name} ({cm.quantize})")
        if "uf2" in report:
            print(f"UF2 for the BOOTSEL drive: {report['uf2']}")
        _print_sizes(report)
        _print_partitions(cm.partitions)
        for region in cm.board.extra_regions:
            print(f"{region.name}: {report['memory'].get(region.name, 0)} B of {region.length} B "
                  f"({', '.join(region.holds)})")
        if fw.sizes is not None:
            print(fw.sizes.table())
        if "ram_total" in report:
            t = report["ram_total"]
            print(f"RAM total {t['total']} B = arena {t['arena']} B + stack {t['stack']} B (worst case "
                  f"{fw.stack.worst_case_bytes} B + margin {fw.stack.margin_bytes} B) + statics {t['statics']} B; "
                  f"deepest call chain: {fw.stack.chain()}")
        if args.memory_svg:
            print(f"memory plan drawn to {args.memory_svg}")
        if args.record:
            print(f"compile record written to {args.record}")
    return 0


def _nested(arr: np.ndarray) -> Any:
    return arr.astype(np.float64).tolist()


def cmd_run(args: argparse.Namespace) -> int:
    board = load_board(args.board)
    if getattr(args, "program", False) and (getattr(args, "sim", None) == "renode" or board.sim_kind != "qemu"):
        raise McuError(f"--program runs the interpreter firmware in QEMU, which {board.name} "
                       f"{'is not run in' if board.sim_kind else 'does not have'}",
                       hint="pick a QEMU board (see `mcu boards`), or drop --program")
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
    cm = _compile(args)
    if getattr(args, "program", False):
        return _run_program_file(args, cm)
    fw = cm.build()
    sim = cm.simulate(timeout_s=args.timeout)
    report = _base_report(cm, fw)
    report["fp32_islands"]["instruction_share"] = _island_share(cm)
    report.update(_run_fields(cm, "qemu", sim.passed, sim.exit_code, sim.outputs, sim.outputs_raw,
                              sim.max_abs_error_vs_eager, sim.max_error_vs_expected, sim.instructions))
    timing = estimate(cm.board, sim.estimated_cycles)
    report.update(timing.fields() if timing is not None else null_fields())
    if args.json:
        _print_json(report)
    else:
        scores = _class_scores(sim.outputs[0]) if sim.outputs else None
        if scores is not None:
            print(f"predicted class: {int(np.argmax(scores))} (test vector 0)")
        print(f"{'PASS' if sim.passed else 'FAIL'}: {len(sim.outputs)} bundled test vectors on {cm.board.name} "
              f"({_label(cm)}); max |device - eager| = {sim.max_abs_error_vs_eager:.3g}")
        print(f"instructions per inference: {sim.instructions}")
        if timing is not None:
            print(timing.line())
        _print_sizes(report)
        _print_partitions(cm.partitions)
        if not sim.passed:
            print(sim.console.strip()[-2000:], file=sys.stderr)
    return 0 if sim.passed else 1


def _run_program_file(args: argparse.Namespace, cm) -> int:
    """The model's program file on the board's interpreter firmware (mcu.program.run_model)."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.program.run_model import run_program_model

    res = run_program_model(cm, timeout_s=args.timeout)
    run = res.run
    report = {"model": cm.spec.name, "board": cm.board.name, "quantize": cm.quantize, "program": True,
              "passed": run.passed, "instructions": res.instructions, "program_bytes": res.program_bytes,
              "flash_bytes": res.firmware_flash_bytes + res.program_bytes, "ram_bytes": res.firmware_ram_bytes,
              "arena_bytes": cm.memory.arena_size, "stack_bytes": res.stack_bytes, "exit_code": run.exit_code,
              "error": run.error}
    timing = estimate(cm.board, run.cycles)
    report.update(timing.fields() if timing is not None else null_fields())
    if args.json:
        _print_json(report)
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


def _run_linux(args: argparse.Namespace) -> int:
    """A Linux board (host, arm64-linux): the same harness as a native executable (or under qemu-aarch64);
    delegated models are checked within bounds (mcu.api.DELEGATE_INT8_LSB / DELEGATE_FP32_RELATIVE)."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.linux import expectations, run_on_linux

    cm = _compile(args)
    run = run_on_linux(cm, *expectations(cm), timeout_s=args.timeout)
    real = [cm.decode_outputs(row) for row in run.outputs]
    eager_error = max((float(np.max(np.abs(y.astype(np.float64) - e), initial=0.0))
                       for row, eager in zip(real, cm.eager_outputs) for y, e in zip(row, eager)), default=0.0)
    report = _base_report(cm, None)
    report.update(_run_fields(cm, cm.board.linux_run[0] if cm.board.linux_run else "native", run.passed,
                              run.exit_code,
                              real, [cm.raw_outputs(row) for row in run.outputs], eager_error, run.max_error, None))
    report.update(null_fields())  # a Linux board runs no timing model
    if args.json:
        _print_json(report)
    else:
        scores = _class_scores(run.outputs[0]) if run.outputs else None
        if scores is not None:
            print(f"predicted class: {int(np.argmax(scores))} (test vector 0)")
        bound = "within bounds of" if cm.delegated else "equal to"
        print(f"{'PASS' if run.passed else 'FAIL'}: {len(run.outputs)} bundled test vectors on {cm.board.name} "
              f"({_label(cm)}) {bound} the reference; max error {run.max_error:.3g}; arena {cm.memory.arena_size} B")
        if cm.graph.fallbacks:
            print(summarize_islands(cm.graph.fallbacks).line())
        _print_partitions(cm.partitions)
        if not run.passed:
            print(run.console.strip()[-2000:], file=sys.stderr)
    return 0 if run.passed else 1


def _run_renode(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.renode import check_renode_board, find_renode, run_renode

    # Fail before compiling when the board has no Renode platform or Renode is missing.
    check_renode_board(load_board(args.board))
    find_renode()
    cm = _compile(args)
    fw = cm.build()
    result = run_renode(cm.board, fw.elf, fw.elf.parent, timeout_s=args.timeout)
    harness = parse_harness(result.console)
    passed = result.exit_code == 0
    outputs, raw, eager_error, expected_error = cm.harness_outputs(harness, result.exit_code, result.console)
    report = _base_report(cm, fw)
    report.update(_run_fields(cm, "renode", passed, result.exit_code, outputs, raw, eager_error, expected_error,
                              None))
    report.update({"cycles": harness.cycles, "console": result.console})
    if args.json:
        _print_json(report)
    else:
        print(f"{'PASS' if passed else 'FAIL'}: {len(harness.vector_passed)} bundled test vectors on "
              f"{cm.board.name} in Renode ({cm.quantize})")
        _print_sizes(report)
        if not passed:
            print(result.console.strip()[-2000:], file=sys.stderr)
    return 0 if passed else 1


def cmd_flash(args: argparse.Namespace) -> int:
    board = load_board(args.board)
    if board.deploy_method != "uf2":
        raise McuError(f"board '{board.name}' is not flashed over USB (deploy method '{board.deploy_method}')",
                       hint=f"use `mcu run --board {board.name}` for simulated boards, or --board pico2 or pico")
    cm = _compile(args)
    out = args.output or Path("mcu-out") / f"{cm.spec.name}-{cm.board.name}"
    fw = cm.build(out)
    print(f"built {fw.uf2} for {board.name} ({cm.quantize}): flash {fw.flash_bytes} B, static RAM {fw.ram_bytes} B",
          flush=True)

    def status(line: str) -> None:
        print(f"mcu: {line}", flush=True)

    result = flash_uf2(fw.uf2, drive=args.drive, port=args.port, timeout_s=args.timeout,
                       on_line=lambda line: print(line, flush=True), on_status=status,
                       chip=chip_for_family(board.uf2_family))
    return _print_verdict(result.console, board.clock_hz)


def cmd_monitor(args: argparse.Namespace) -> int:
    console = monitor(port=args.port, timeout_s=args.timeout, on_line=lambda line: print(line, flush=True))
    return _print_verdict(console, None)


def _print_verdict(console: Any, clock_hz: int | None) -> int:
    if console is None:
        return 0
    report = console.report
    if report.cycles:
        at = f" ({report.cycles / clock_hz * 1e3:.2f} ms at {clock_hz / 1e6:.0f} MHz)" if clock_hz else ""
        print(f"cycles per inference: {report.cycles}{at}")
    verdict = "PASS" if console.exit_code == 0 else "FAIL"
    print(f"{verdict}: {len(report.vector_passed)} bundled test vectors on {console.port}"
          + (f" ({report.failed_vectors} failed)" if report.failed_vectors else ""))
    return console.exit_code


def cmd_export(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.commands.export import export_target
    if args.format == "program":
        if args.target != "cmake":
            raise McuError(f"--target {args.target} applies to the C library (--format c)",
                           hint="drop --target, or drop --format program")
        return _export_program(args)
    if args.board is None:
        raise McuError("mcu export needs --board for a C library",
                       hint="add --board mps2-an505 (see `mcu boards`), or write a program file with --format program")
    ensure_dir(args.output)  # a bad -o fails before the compile, not after it
    cm = _compile(args)
    if args.target not in ("cmake", "make"):
        files = export_target(cm, args.target, args.output)
        print(f"wrote {len(files)} files for {args.target} to {args.output} (arena {cm.memory.arena_size} B)")
        return 0
    files = export_target(cm, args.target, args.output)
    print(f"wrote {len(files)} files to {args.output} (arena {cm.memory.arena_size} B); "
          f"include {cm.library.prefix}_model.h and build with {cm.library.prefix}.mk or CMakeLists.txt")
    return 0


def _export_program(args: argparse.Namespace) -> int:
    """A program file with every method of model.py (see mcu/program/methods.py), weights inline or beside it."""
    # lazy: keeps torch and jinja2 and the C extension out of this module's import
    from mcu.program.methods import compile_methods
    from mcu.program.writer import program_from
    # lazy: the C extension loads only when a program runs on the host
    from mcu.program.host import verify_program_files

    if args.cmsis_nn is not None:
        raise McuError("--cmsis-nn applies to generated C (build, run, export --format c); program files "
                       "run mcu's own kernels in the interpreter")
    out = check_file_target(Path(args.output), what="program file")
    weights_path = out.with_suffix(WEIGHTS_SUFFIX)
    if args.external_weights:
        check_file_target(weights_path, what="weights file", example="model.mpw")
    # The board only decides whether each method's arena fits; any interpreter firmware runs the file.
    with quiet_torch(verbose=args.verbose):
        methods = compile_methods(args.model, board=args.board or "mps2-an505", quantize=args.quantize)
    image = program_from(methods, external_weights=args.external_weights, bundle=args.bundle_tests,
                         weights_name=weights_path.name)
    # The weights first: a reader of the program never finds it beside an older weights file.
    if image.weights is not None:
        write_atomic(weights_path, image.weights)
    write_atomic(out, image.program)
    arenas = ", ".join(f"{m.name} {m.model.memory.arena_size} B" for m in methods)
    print(f"wrote {out} ({len(image.program)} B; methods: {arenas})")
    if image.weights is not None:
        print(f"wrote {weights_path} ({len(image.weights)} B of weights; the program accepts only this file)")
    if args.verify:
        weights = weights_path if image.weights is not None else None
        if any(m.model.has_custom_ops for m in methods):  # the user's kernels run in a child, not in mcu
            # lazy: keeps jinja2 out of this module's import
            from mcu.device.custom_child import verify_program_in_child

            print(verify_program_in_child(out, weights, Path(args.model)))
        else:
            print(verify_program_files(out, weights))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.api import backend_options, compile_spec
    # lazy: keeps torch out of this module's import
    from mcu.commands.evaluate import evaluate
    from mcu.capture.loader import load_model_file
    board = args.board or "mps2-an505"
    with quiet_torch(verbose=args.verbose):
        with stage("load"):
            spec = load_model_file(args.model)

        def compile_quietly(s: Any, b: str, q: str) -> Any:
            return compile_spec(s, b, q, backend_options(packed_weights=False if args.compact_weights else None))

        report = evaluate(spec, board, args.quantize, samples=args.samples, timeout_s=args.timeout,
                          compile_fn=compile_quietly)
    matches = report.device_equals_reference == report.device_samples
    if args.json:
        _print_json({"model": spec.name, "board": board, **report.as_dict(), "passed": matches})
    else:
        kind = "int8" if report.compiled_by == "Python integer reference" else args.quantize
        rows = [("fp32, eager PyTorch", report.fp32, report.samples, ""),
                (f"{kind}, {report.compiled_by}", report.compiled, report.samples,
                 f"top-1 agrees with fp32 on {100 * report.agreement:.1f} %"),
                (f"{kind}, {board} simulated", report.device, report.device_samples,
                 f"outputs equal the reference on {report.device_equals_reference}/{report.device_samples}")]
        print(f"{spec.name}: eval_data, metric {report.metric}")
        print(f"{'':<36}{report.metric:>8} {'samples':>8}")
        for name, value, n, note in rows:
            print(f"{name:<36}{100 * value:>6.1f} % {n:>8}   {note}".rstrip())
    return 0 if matches else 1


def cmd_ops(args: argparse.Namespace) -> int:

    rows = op_rows()
    if getattr(args, "json", False):
        print(json.dumps([r.to_json() for r in rows], indent=1))
    else:
        print(render(rows))
    return 0


def cmd_ci(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.commands.ci import CiRequest, write_renode_ci

    root = Path(args.output)
    models = []
    for m in map(Path, args.models):
        if m.is_absolute() and not m.resolve().is_relative_to(root.resolve()):
            raise McuError(f"model file {m} is outside the repository root {root}",
                           hint="give model.py paths inside the repository (-o is its root)")
        models.append((m.resolve().relative_to(root.resolve()) if m.is_absolute() else m).as_posix())
    files = write_renode_ci(CiRequest(models=models, boards=args.boards or ["mps2-an505"], out_dir=root,
                                      mcu_source=args.mcu_source, install=args.install))
    print("\n".join(f"wrote {f}" for f in files))
    return 0



def _reporter(args: argparse.Namespace) -> Reporter:
    """Progress on stderr when it is a terminal (or with --verbose); never with --quiet, nor with --json
    unless --verbose asks for it (stdout keeps only the JSON)."""
    verbose = getattr(args, "verbose", False)
    if (getattr(args, "json", False) and not verbose) or getattr(args, "quiet", False):
        return Reporter(stream=None, verbose=verbose)
    return Reporter(stream=sys.stderr if verbose else terminal_stream(sys.stderr), verbose=verbose)


COMMANDS = {"boards": cmd_boards, "build": cmd_build, "run": cmd_run, "export": cmd_export, "ops": cmd_ops,
            "eval": cmd_eval, "flash": cmd_flash, "monitor": cmd_monitor, "ci": cmd_ci}


def _devtools_command(name: str) -> Any:
    return lambda args: DEVTOOLS[name](args, _compile)


COMMANDS.update({name: _devtools_command(name) for name in ("profile", "debug", "record")})


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is so that cleanup (``finally``, context managers) runs as on Ctrl-C."""


def _terminate_as_exception() -> dict[int, Any]:
    """Install the handlers for the command's run; returns the ones before, for main() to put back."""
    def handler(signum: int, frame: Any) -> None:
        raise Terminated()

    before: dict[int, Any] = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP):  # kill, a closed terminal
            before[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread (main() called from a test's worker): leave the default
        pass
    return before


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print(f"mcu: error: {exc.message} (see `{exc.prog} --help`)", file=sys.stderr)
        if "--json" in argv:
            _print_json({"error": exc.message, "hint": f"see `{exc.prog} --help`", "exit": 2})
        return 2
    # torch 2.13's pytree code trips its own deprecation warning inside torch.export: not the user's concern.
    warnings.filterwarnings("ignore", message=r".*treespec, LeafSpec.*", category=FutureWarning)
    as_json = bool(getattr(args, "json", False))
    handlers = _terminate_as_exception()
    try:
        with reporting(_reporter(args)):
            return COMMANDS[args.command](args)
    except McuError as exc:
        print(f"mcu: error: {exc}", file=sys.stderr)
        if as_json:
            _print_json({"error": exc.message, "hint": exc.hint, "exit": exc.exit_code})
        return exc.exit_code
    except KeyboardInterrupt as exc:
        code = 143 if isinstance(exc, Terminated) else 130
        print(f"mcu: {'terminated' if code == 143 else 'interrupted'}", file=sys.stderr)
        if as_json:
            _print_json({"error": "terminated" if code == 143 else "interrupted", "hint": None, "exit": code})
        return code
    except BrokenPipeError:  # the reader of stdout went away (`| head`): nothing left to tell it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug in mcu: one line, the traceback only on request
        if os.environ.get("MCU_DEBUG"):
            raise
        print(f"mcu: internal error: {type(exc).__name__}: {exc} (set MCU_DEBUG=1 for a traceback)",
              file=sys.stderr)
        if as_json:
            _print_json({"error": f"internal error: {type(exc).__name__}: {exc}", "hint": None, "exit": 70})
        return 70
    finally:
        for signum, previous in handlers.items():
            signal.signal(signum, previous)


if __name__ == "__main__":
    sys.exit(main())
