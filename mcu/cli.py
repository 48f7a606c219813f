"""The ``mcu`` command line: a thin layer over :mod:`mcu.api`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mcu.errors import McuError

QUANTIZE_CHOICES = ("auto", "none", "int8")


def _add_model_args(p: argparse.ArgumentParser, board_required: bool = True) -> None:
    p.add_argument("model", type=Path, help="path to model.py (defines model, example_inputs, ...)")
    p.add_argument("--board", "-b", required=board_required, help="board name (see `mcu boards`)")
    p.add_argument("--quantize", "-q", choices=QUANTIZE_CHOICES, default="auto",
                   help="int8: static int8 (needs `calibration` in model.py); none: fp32; "
                        "auto (default): int8 when model.py has `calibration`, else fp32")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcu", description="PyTorch models on microcontrollers.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("boards", help="list the boards", description="List the boards mcu can build for.")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("build", help="build the firmware and print a size report",
                       description="Compile model.py for a board: generated C, firmware ELF, size report.")
    _add_model_args(p)
    p.add_argument("-o", "--output", type=Path, help="output folder (default: mcu-out/<model>-<board>)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("run", help="build and run on the board's simulator against the bundled vectors",
                       description="Build the firmware, run it on the board's simulator with the bundled test "
                                   "vectors, exit 0 only when every output matches.")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=float, default=600.0, help="simulator timeout in seconds (default 600)")

    p = sub.add_parser("export", help="write the generated C library to a folder",
                       description="Write a self-contained C library (header, sources, weights, runtime subset, "
                                   "CMakeLists.txt and Makefile fragment).")
    _add_model_args(p)
    p.add_argument("-o", "--output", type=Path, required=True, help="output folder")

    sub.add_parser("ops", help="list the PyTorch ops mcu can lower", description="List the supported ATen ops.")
    return parser


def _print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=None, separators=(",", ":")))


def cmd_boards(args: argparse.Namespace) -> int:
    from mcu.boards import list_boards

    boards = list_boards()
    if args.json:
        _print_json({"boards": [{"name": b.name, "core": b.core, "fpu": b.fpu, "dsp": b.dsp, "mve": b.mve,
                                 "flash_bytes": b.flash.length, "ram_bytes": b.ram.length,
                                 "clock_hz": b.clock_hz, "simulator": b.sim_kind,
                                 "deploy": b.deploy_method} for b in boards]})
        return 0
    print(f"{'board':<14} {'core':<11} {'fpu':<9} {'dsp':<4} {'mve':<4} {'flash':>9} {'ram':>9} {'clock':>8}  run by")
    for b in boards:
        how = f"{b.sim_kind} ({b.qemu_machine})" if b.sim_kind == "qemu" else (b.sim_kind or b.deploy_method)
        print(f"{b.name:<14} {b.core:<11} {b.fpu or '-':<9} {'yes' if b.dsp else 'no':<4} "
              f"{'yes' if b.mve else 'no':<4} {_kib(b.flash.length):>9} {_kib(b.ram.length):>9} "
              f"{b.clock_hz / 1e6:>5.0f}MHz  {how}")
    return 0


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def _compile(args: argparse.Namespace):
    from mcu.api import compile_file

    return compile_file(args.model, board=args.board, quantize=args.quantize)


def _base_report(cm, fw) -> dict[str, Any]:
    return {
        "model": cm.spec.name,
        "board": cm.board.name,
        "quantize": cm.quantize,
        "flash_bytes": fw.flash_bytes,
        "ram_bytes": fw.ram_bytes,
        "arena_bytes": cm.memory.arena_size,
        "arena_lower_bound_bytes": cm.memory.lower_bound,
        "fp32_fallbacks": [{"op": op, "reason": why} for op, why in cm.graph.fallbacks],
        "elf": str(fw.elf),
    }


def _print_sizes(report: dict[str, Any]) -> None:
    print(f"flash: {report['flash_bytes']} B   static RAM: {report['ram_bytes']} B   "
          f"arena: {report['arena_bytes']} B (lower bound {report['arena_lower_bound_bytes']} B)")
    for fb in report["fp32_fallbacks"]:
        print(f"fp32 fallback: {fb['op']}: {fb['reason']}")


def cmd_build(args: argparse.Namespace) -> int:
    cm = _compile(args)
    out = args.output or Path("mcu-out") / f"{cm.spec.name}-{cm.board.name}"
    fw = cm.build(out)
    report = _base_report(cm, fw)
    report["sources"] = str(fw.source_dir)
    if args.json:
        _print_json(report)
    else:
        print(f"built {fw.elf} for {cm.board.name} ({cm.quantize})")
        _print_sizes(report)
    return 0


def _nested(arr: np.ndarray) -> Any:
    return arr.astype(np.float64).tolist()


def cmd_run(args: argparse.Namespace) -> int:
    cm = _compile(args)
    fw = cm.build()
    sim = cm.simulate(timeout_s=args.timeout)
    report = _base_report(cm, fw)
    report.update({
        "passed": sim.passed,
        "instructions": sim.instructions,
        "outputs": [[_nested(o) for o in row] for row in sim.outputs],
        "outputs_raw": [[o.tolist() for o in row] for row in sim.outputs_raw],
        "max_abs_error_vs_eager": sim.max_abs_error_vs_eager,
        "exit_code": sim.exit_code,
    })
    if args.json:
        _print_json(report)
    else:
        first = sim.outputs[0][0].reshape(-1) if sim.outputs else np.zeros(0)
        if first.size > 1 and first.size <= 1000:
            print(f"predicted class: {int(np.argmax(first))} (test vector 0)")
        print(f"{'PASS' if sim.passed else 'FAIL'}: {len(sim.outputs)} bundled test vectors on {cm.board.name} "
              f"({cm.quantize}); max |device - eager| = {sim.max_abs_error_vs_eager:.3g}")
        print(f"instructions per inference: {sim.instructions}")
        _print_sizes(report)
        if not sim.passed:
            print(sim.console.strip()[-2000:], file=sys.stderr)
    return 0 if sim.passed else 1


def cmd_export(args: argparse.Namespace) -> int:
    from mcu.export import export_library

    cm = _compile(args)
    files = export_library(cm.library, args.output)
    print(f"wrote {len(files)} files to {args.output} (arena {cm.memory.arena_size} B); "
          f"include {cm.library.prefix}_model.h and build with {cm.library.prefix}.mk or CMakeLists.txt")
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from mcu.frontend import supported_ops

    print("\n".join(supported_ops()))
    return 0


COMMANDS = {"boards": cmd_boards, "build": cmd_build, "run": cmd_run, "export": cmd_export, "ops": cmd_ops}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # torch 2.13's pytree code trips its own deprecation warning inside torch.export: not the user's concern.
    warnings.filterwarnings("ignore", message=r".*treespec, LeafSpec.*", category=FutureWarning)
    try:
        return COMMANDS[args.command](args)
    except McuError as exc:
        print(f"mcu: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("mcu: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in mcu: one line, the traceback only on request
        if os.environ.get("MCU_DEBUG"):
            raise
        print(f"mcu: internal error: {type(exc).__name__}: {exc} (set MCU_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
