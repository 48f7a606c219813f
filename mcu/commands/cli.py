"""The ``mcu`` command line: its parser and ``main``, a thin layer over :mod:`mcu.api`.

Each command lives in its own module of this package; ``COMMANDS`` names them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from mcu.commands.boards import cmd_boards
from mcu.commands.build import cmd_build
from mcu.commands.common import print_json
from mcu.commands.devtools import add_parsers as add_devtools_parsers, COMMANDS as DEVTOOLS
from mcu.commands.flash import cmd_flash, cmd_monitor
from mcu.commands.ops_listing import cmd_ops
from mcu.commands.run import cmd_run
from mcu.commands.types import Parser, UsageError, positive_int, positive_seconds
from mcu.device.boards import WEIGHTS_IN
from mcu.errors import McuError
from mcu.progress import Reporter, reporting, terminal_stream
from mcu.quantize import modes


FUSE_CHOICES = ("off", "auto", "all")


def _fuse_flag_alone(argv: list[str]) -> list[str]:
    """``argv`` with ``--fuse-blocks FILE`` read as the flag alone followed by the model file: the flag's value
    is optional, so argparse would take an existing file that is none of its choices as that value."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--":
            break
        following = out[i + 1]
        if arg == "--fuse-blocks" and following not in FUSE_CHOICES and not following.startswith("-") \
                and Path(following).is_file():
            out[i] = "--fuse-blocks=auto"
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line's arguments (UsageError on bad ones)."""
    return build_parser().parse_args(_fuse_flag_alone(list(argv)))


def _add_model_args(p: argparse.ArgumentParser, board_required: bool = True) -> None:
    p.add_argument("model", type=Path, help="path to model.py (defines model, example_inputs, ...)")
    p.add_argument("--board", "-b", required=board_required, help="board name (see `mcu boards`)")
    p.add_argument("--quantize", "-q", choices=modes.CHOICES, default=modes.AUTO,
                   help="int8: static int8 (needs `calibration` in model.py); w4a8: the same with 4-bit per-channel "
                        "weights of convolutions and linear layers, two a byte; mixed: int8 activations, each "
                        "layer's weights int8, int4 or a look-up table under --accuracy-budget; w8a16: int16 "
                        "activations (symmetric) with int8 per-channel weights, CMSIS-NN's 16x8 arithmetic; none: fp32; int8-weight: "
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
    p.add_argument("--weight-palette", type=int, choices=modes.PALETTE_BITS, metavar="BITS", default=None,
                   help="with --quantize int8 or w8a16: each output channel's convolution, depthwise and linear "
                        "weights as BITS-bit indices (2, 3 or 4) into a table of 2^BITS int8 values (k-means), "
                        "decoded in the kernel; our portable kernels only")
    p.add_argument("--palette-per", choices=modes.PALETTE_PER, default="channel",
                   help="with --weight-palette: a table per output channel (the default) or one per weight "
                        "tensor shared by its channels (k-means over all its int8 codes): (channels - 1) x "
                        "2^BITS bytes less a layer, e.g. DS-CNN at 4 bits 9,248 B of 70,756 on mps2-an505, "
                        "at a lower weight SQNR (README: look-up-table weights)")
    p.add_argument("--accuracy-budget", type=float, metavar="X", default=None,
                   help="with --quantize mixed: how much the model may lose against the all-int8 build, in dB of "
                        "output SQNR against fp32 on the calibration data, or, when model.py has eval_data, in "
                        "points (percent) of its eval metric; each convolution, depthwise and linear layer's "
                        "weights become int8, int4 or a 2/3/4-bit look-up table, measured layer by layer through "
                        "the integer reference (activations stay int8)")
    p.add_argument("--bias-correction", choices=("on", "off"), default=None,
                   help="static modes (int8, w4a8, w8a16, mixed): add to each convolution, depthwise and linear "
                        "layer's bias the mean output error the quantized model shows there over the calibration "
                        "data, layer after layer (bias correction); default: on for w4a8 and w8a16, off for int8 and mixed")
    p.add_argument("--weight-rounding", choices=modes.WEIGHT_ROUNDINGS, default=None,
                   help="static modes: how the convolution, linear and LSTM weights are rounded onto their per-channel "
                        "(per gate row) grids: nearest, gptq (each layer's rounding error spread over its input "
                        "columns not yet rounded, through the inverse Hessian of its calibration inputs; GPTQ/OPTQ), "
                        "layer by layer where it beats nearest on held-out calibration samples, or searched (each "
                        "channel's scale chosen among clipping ratios for the least output error on the calibration "
                        "inputs, where it holds on held-out samples; LSTM matrices then rounded by GPTQ on it); "
                        "default: searched for w8a16, nearest otherwise")
    p.add_argument("--mixed-objective", choices=modes.OBJECTIVES, default="flash",
                   help="with --quantize mixed: what the choice minimizes within the budget: the flash of the "
                        "layers' weights and their kernels' code on the board (default) or the estimated instructions")
    p.add_argument("--fuse-blocks", nargs="?", const="auto", default="off", choices=FUSE_CHOICES,
                   help="int8: run inverted-residual blocks (1x1 expansion, depthwise, 1x1 projection, residual "
                        "add) row by row through a ring of expanded rows, so the expanded tensor never exists "
                        "whole: as few blocks as give the smallest arena (auto, the flag alone), or every block "
                        "that can (all); in generated C and program files alike")
    p.add_argument("--stream-prefix", action="store_true",
                   help="run the network's first high-resolution layers (convolutions, depthwise, adds) band by "
                        "band of rows, each keeping a ring of the input rows its window needs, so that only the "
                        "prefix's last, low-resolution output is a whole tensor; where the prefix ends and the "
                        "rows per call are chosen for the smallest arena, then the fewest calls (with "
                        "--ram-budget: the fewest calls that fit); in generated C and program files alike")
    p.add_argument("--stream-input", action="store_true",
                   help="as --stream-prefix, and the model reads its input a row at a time through a callback "
                        "the firmware implements (<model>_run_streamed, see model.h), so the input is not in the "
                        "arena; generated C only")
    p.add_argument("--ram-budget", type=positive_int, metavar="BYTES", default=None,
                   help="the fastest schedule (every tensor whole, blocks run row by row, or the first layers "
                        "streamed in bands of rows) whose arena is at most BYTES (see --speed-model); an error "
                        "names the smallest arena reachable when none is")
    p.add_argument("--weights-in", choices=WEIGHTS_IN, default=None,
                   help="where the firmware keeps the constant tensors: flash (read in place from read-only "
                        "memory) or fast (each in the fastest memory with room after code, data, arenas and "
                        "stack, copied there at boot when it is RAM; the rest stays); default: the board's "
                        "(`weights_in` in its file, else flash)")
    p.add_argument("--qat", action="store_true",
                   help="quantization-aware training first: model.py's qat_train(prepared) fine-tunes the model "
                        "with the weights and activations fake-quantized as --quantize int8 or w4a8 quantizes them")
    p.add_argument("--speed-model", choices=("measured", "none"), default="measured",
                   help="with --ram-budget: measured (default) profiles every op whole and every block fused at "
                        "1, 2, 4 and 8 rows a pass in the board's simulator, then runs the candidate schedules "
                        "that fit (those no other beats in both arena and summed instructions) whole, once "
                        "(cached), and takes the one that ran fastest; none fuses as few blocks as fit, without "
                        "measuring")
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

    _add_boards_parser(sub)
    _add_build_parser(sub)
    _add_run_parser(sub)
    _add_export_parser(sub)
    _add_ops_parser(sub)
    _add_ci_parser(sub)
    _add_eval_parser(sub)
    _add_device_parsers(sub)
    add_devtools_parsers(sub, _add_model_args)
    return parser


def _add_boards_parser(sub: Any) -> None:
    p = sub.add_parser("boards", help="list the boards", description="List the boards mcu can build for.")
    p.add_argument("--json", action="store_true", help="print JSON")


def _add_build_parser(sub: Any) -> None:
    p = sub.add_parser("build", help="build the firmware and print a size report",
                       description="Compile model.py for a board: generated C, firmware ELF, size report.")
    _add_model_args(p)
    p.add_argument("-o", "--output", type=Path, help="output folder (default: mcu-out/<model>-<board>)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--memory-svg", type=Path, metavar="FILE", help="draw the memory plan to an SVG file")
    p.add_argument("--record", type=Path, metavar="FILE",
                   help="save the compile record (exported program, every op's debug handle, source line, "
                        "kernel, shapes, quantization, memory plan, sizes) for `mcu profile`/`mcu debug` later")


def _add_run_parser(sub: Any) -> None:
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


def _add_export_parser(sub: Any) -> None:
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
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: what was written (files, target), the arena and, for a C library on "
                        "a bare-metal board, the flash and RAM of the board's firmware around it")
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


def _add_ops_parser(sub: Any) -> None:
    p = sub.add_parser("ops", help="list the PyTorch ops mcu can lower, with their dtypes and kernels",
                       description="List the supported ATen ops: the IR op kinds each lowers to, the C kernels "
                                   "that run them in fp32 and int8 models (or 'fp32 island' in int8 models) and "
                                   "the other backends that take them; all read from the lowering's own tables.")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")


def _add_ci_parser(sub: Any) -> None:
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


def cmd_export(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.commands.export import cmd_export as export

    return export(args)


def cmd_eval(args: argparse.Namespace) -> int:
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.commands.evaluate import cmd_eval as evaluate

    return evaluate(args)


def cmd_ci(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.commands.ci import cmd_ci as write_ci

    return write_ci(args)


def _reporter(args: argparse.Namespace) -> Reporter:
    """Progress on stderr when it is a terminal (or with --verbose); never with --quiet, nor with --json
    unless --verbose asks for it (stdout keeps only the JSON)."""
    verbose = getattr(args, "verbose", False)
    if (getattr(args, "json", False) and not verbose) or getattr(args, "quiet", False):
        return Reporter(stream=None, verbose=verbose)
    return Reporter(stream=sys.stderr if verbose else terminal_stream(sys.stderr), verbose=verbose)


COMMANDS = {"boards": cmd_boards, "build": cmd_build, "run": cmd_run, "export": cmd_export, "ops": cmd_ops,
            "eval": cmd_eval, "flash": cmd_flash, "monitor": cmd_monitor, "ci": cmd_ci, **DEVTOOLS}


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
        args = parse_args(argv)
    except UsageError as exc:
        print(f"mcu: error: {exc.message} ({exc.hint})", file=sys.stderr)
        if "--json" in argv:
            print_json({"error": exc.message, "hint": exc.hint, "exit": 2})
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
            print_json({"error": exc.message, "hint": exc.hint, "exit": exc.exit_code})
        return exc.exit_code
    except KeyboardInterrupt as exc:
        code = 143 if isinstance(exc, Terminated) else 130
        print(f"mcu: {'terminated' if code == 143 else 'interrupted'}", file=sys.stderr)
        if as_json:
            print_json({"error": "terminated" if code == 143 else "interrupted", "hint": None, "exit": code})
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
            print_json({"error": f"internal error: {type(exc).__name__}: {exc}", "hint": None, "exit": 70})
        return 70
    finally:
        for signum, previous in handlers.items():
            signal.signal(signum, previous)


if __name__ == "__main__":
    sys.exit(main())
