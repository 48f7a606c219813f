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

QUANTIZE_CHOICES = ("auto", "none", "int8", "int8-weight", "int8-dynamic")


def _add_model_args(p: argparse.ArgumentParser, board_required: bool = True) -> None:
    p.add_argument("model", type=Path, help="path to model.py (defines model, example_inputs, ...)")
    p.add_argument("--board", "-b", required=board_required, help="board name (see `mcu boards`)")
    p.add_argument("--quantize", "-q", choices=QUANTIZE_CHOICES, default="auto",
                   help="int8: static int8 (needs `calibration` in model.py); none: fp32; int8-weight: "
                        "int8 linear weights, fp32 activations; int8-dynamic: int8 linear weights and "
                        "run-time quantized inputs; auto (default): int8 when model.py has `calibration`, "
                        "else fp32")
    p.add_argument("--cmsis-nn", metavar="PATH", default=None,
                   help="route supported int8 layers to CMSIS-NN built from these sources (a CMSIS-NN "
                        "checkout or unpacked pack; `auto`: CMSIS_NN_PATH, else cmsis-pack-manager's pack "
                        "cache); default: CMSIS_NN_PATH if set, else mcu's own kernels")
    p.add_argument("--compact-weights", action="store_true",
                   help="keep int8 convolution and fully connected weights as they are; by default, on cores "
                        "with the DSP extension (Cortex-M4/M7/M33) they are packed as int16 for the faster "
                        "kernel, which doubles their flash")


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
    p.add_argument("--memory-svg", type=Path, metavar="FILE", help="draw the memory plan to an SVG file")

    p = sub.add_parser("run", help="build and run on the board's simulator against the bundled vectors",
                       description="Build the firmware, run it on the board's simulator with the bundled test "
                                   "vectors, exit 0 only when every output matches.")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=float, default=600.0, help="simulator timeout in seconds (default 600)")
    p.add_argument("--sim", choices=("qemu", "renode"), default=None,
                   help="simulator (default: the board's, see `mcu boards`); renode needs Renode installed")

    p = sub.add_parser("export", help="write the generated C library to a folder, or a program file",
                       description="Write a self-contained C library (header, sources, weights, runtime subset, "
                                   "CMakeLists.txt and Makefile fragment), or with --format program a program "
                                   "file for the interpreter (mcu.runtime on the host, or an interpreter "
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
    p.add_argument("--target", choices=("cmake", "make", "pico-sdk", "arduino", "zephyr", "cmsis-pack"),
                   default="cmake",
                   help="c: the firmware ecosystem to write for (default cmake: the library with CMakeLists.txt "
                        "and a Makefile fragment; make is the same folder); pico-sdk, arduino and zephyr add an "
                        "example app that runs the bundled test vectors; cmsis-pack writes a .pdsc and a .pack")

    sub.add_parser("ops", help="list the PyTorch ops mcu can lower", description="List the supported ATen ops.")
    p = sub.add_parser("ci", help="write a GitHub Actions workflow that runs models in Renode",
                       description="Write .github/workflows/mcu-renode.yml (installs the Arm compiler, Renode and "
                                   "mcu, then runs `mcu run --sim renode` for every model x board) and the Renode "
                                   "platform, script and Robot test of each board under renode/.")
    p.add_argument("--renode", action="store_true", required=True, help="run the matrix in Renode (required)")
    p.add_argument("models", nargs="+", metavar="model.py", help="model files, relative to the repository root")
    p.add_argument("--board", action="append", dest="boards", metavar="BOARD",
                   help="a board Renode runs (repeatable; default mps2-an505)")
    p.add_argument("-o", "--output", type=Path, default=Path("."), help="the repository root (default .)")
    p.add_argument("--install", default="python -m pip install mcu",
                   help="the workflow's command that installs mcu (default: python -m pip install mcu)")
    _add_device_parsers(sub)
    return parser


def _add_device_parsers(sub: Any) -> None:
    """`mcu flash` and `mcu monitor`: a real board over USB (see mcu/flash.py)."""
    p = sub.add_parser("flash", help="build, flash a Pico 2 in BOOTSEL mode and read its verdict over serial",
                       description="Build the firmware and its UF2, copy it to a Pico 2 in BOOTSEL mode (or load "
                                   "it with picotool), then print what the firmware prints on its UART and exit "
                                   "0 on RESULT PASS, 1 on FAIL.")
    _add_model_args(p)
    p.add_argument("-o", "--output", type=Path, help="output folder (default: mcu-out/<model>-<board>)")
    p.add_argument("--drive", type=Path, help="the mounted BOOTSEL drive (default: search the usual mount points)")
    p.add_argument("--port", help="serial port of the board's UART (default: the first USB serial device)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for each step: the drive, the reboot, the console (default 60)")

    p = sub.add_parser("monitor", help="read a running board's console until its verdict",
                       description="Print what an already flashed board prints on its UART and exit 0 on "
                                   "RESULT PASS, 1 on FAIL (press the board's reset to run it again).")
    p.add_argument("--port", help="serial port (default: the first USB serial device)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the verdict (default 60)")


def _print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=None, separators=(",", ":")))


def cmd_boards(args: argparse.Namespace) -> int:
    from mcu.boards import list_boards

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
    from mcu.api import compile_file

    from mcu.backends.cmsis_nn import cli_spec, resolve

    spec, origin = cli_spec(getattr(args, "cmsis_nn", None))
    return compile_file(args.model, board=args.board, quantize=args.quantize,
                        cmsis_nn=resolve(spec, origin=origin),
                        packed_weights=not getattr(args, "compact_weights", False))


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
    report["memory"] = dict(getattr(fw, "region_bytes", {}))
    if getattr(fw, "uf2", None) is not None:
        report["uf2"] = str(fw.uf2)
    if fw.sizes is not None:
        report["size_breakdown"] = fw.sizes.as_dict()
    if args.memory_svg:
        args.memory_svg.write_text(cm.memory_svg())
        report["memory_svg"] = str(args.memory_svg)
    if args.json:
        _print_json(report)
    else:
        print(f"built {fw.elf} for {cm.board.name} ({cm.quantize})")
        if "uf2" in report:
            print(f"UF2 for the BOOTSEL drive: {report['uf2']}")
        _print_sizes(report)
        for region in cm.board.extra_regions:
            print(f"{region.name}: {report['memory'].get(region.name, 0)} B of {region.length} B "
                  f"({', '.join(region.holds)})")
        if fw.sizes is not None:
            print(fw.sizes.table())
        if args.memory_svg:
            print(f"memory plan drawn to {args.memory_svg}")
    return 0


def _nested(arr: np.ndarray) -> Any:
    return arr.astype(np.float64).tolist()


def cmd_run(args: argparse.Namespace) -> int:
    if getattr(args, "sim", None) == "renode":
        return _run_renode(args)
    from mcu.boards import load_board

    board = load_board(args.board)
    if board.sim_kind is None and board.deploy_method == "uf2":
        raise McuError(f"board '{board.name}' is real hardware with no simulator",
                       hint=f"run it with `mcu flash --board {board.name} {args.model}`, or pick a simulated board")
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


def _run_renode(args: argparse.Namespace) -> int:
    from mcu.boards import load_board
    from mcu.console import parse_harness
    from mcu.sim.renode import check_renode_board, find_renode, run_renode

    # Fail before compiling when the board has no Renode platform or Renode is missing.
    check_renode_board(load_board(args.board))
    find_renode()
    cm = _compile(args)
    fw = cm.build()
    result = run_renode(cm.board, fw.elf, fw.elf.parent, timeout_s=args.timeout)
    harness = parse_harness(result.console)
    passed = result.exit_code == 0
    report = _base_report(cm, fw)
    report.update({"passed": passed, "simulator": "renode", "exit_code": result.exit_code,
                   "cycles": harness.cycles, "console": result.console})
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
    from mcu.boards import load_board
    from mcu.flash import chip_for_family, flash_uf2

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
    from mcu.flash import monitor

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
    from mcu.export import export_library, export_target

    if args.format == "program":
        if args.target != "cmake":
            raise McuError(f"--target {args.target} applies to the C library (--format c)",
                           hint="drop --target, or drop --format program")
        return _export_program(args)
    if args.board is None:
        raise McuError("mcu export needs --board for a C library",
                       hint="add --board mps2-an505 (see `mcu boards`), or write a program file with --format program")
    cm = _compile(args)
    if args.target not in ("cmake", "make"):
        files = export_target(cm, args.target, args.output)
        print(f"wrote {len(files)} files for {args.target} to {args.output} (arena {cm.memory.arena_size} B)")
        return 0
    files = export_library(cm.library, args.output)
    print(f"wrote {len(files)} files to {args.output} (arena {cm.memory.arena_size} B); "
          f"include {cm.library.prefix}_model.h and build with {cm.library.prefix}.mk or CMakeLists.txt")
    return 0


def _export_program(args: argparse.Namespace) -> int:
    """A program file with every method of model.py (see mcu/program/methods.py), weights inline or beside it."""
    from mcu.program.format import WEIGHTS_SUFFIX
    from mcu.program.methods import compile_methods, program_from

    if args.cmsis_nn is not None:
        raise McuError("--cmsis-nn applies to generated C (build, run, export --format c); program files "
                       "run mcu's own kernels in the interpreter")
    out = Path(args.output)
    weights_path = out.with_suffix(WEIGHTS_SUFFIX)
    # The board only decides whether each method's arena fits; any interpreter firmware runs the file.
    methods = compile_methods(args.model, board=args.board or "mps2-an505", quantize=args.quantize)
    image = program_from(methods, external_weights=args.external_weights, bundle=args.bundle_tests,
                         weights_name=weights_path.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(image.program)
    arenas = ", ".join(f"{m.name} {m.model.memory.arena_size} B" for m in methods)
    print(f"wrote {out} ({len(image.program)} B; methods: {arenas})")
    if image.weights is not None:
        weights_path.write_bytes(image.weights)
        print(f"wrote {weights_path} ({len(image.weights)} B of weights; the program accepts only this file)")
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from mcu.frontend import supported_ops

    print("\n".join(supported_ops()))
    return 0


def cmd_ci(args: argparse.Namespace) -> int:
    from mcu.ci import CiRequest, write_renode_ci

    root = Path(args.output)
    models = []
    for m in map(Path, args.models):
        if m.is_absolute() and not m.resolve().is_relative_to(root.resolve()):
            raise McuError(f"model file {m} is outside the repository root {root}",
                           hint="give model.py paths inside the repository (-o is its root)")
        models.append((m.resolve().relative_to(root.resolve()) if m.is_absolute() else m).as_posix())
    files = write_renode_ci(CiRequest(models=models, boards=args.boards or ["mps2-an505"], out_dir=root,
                                      install=args.install))
    print("\n".join(f"wrote {f}" for f in files))
    return 0


COMMANDS = {"boards": cmd_boards, "build": cmd_build, "run": cmd_run, "export": cmd_export, "ops": cmd_ops,
            "flash": cmd_flash, "monitor": cmd_monitor, "ci": cmd_ci}


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
