"""Run the bundled-vector harness on a Linux board (``kind = "linux"``): natively on the host, or
under qemu-aarch64 for arm64-linux. Same console protocol as the firmware (OUT/VECTOR/RESULT lines,
mcu/device/console.py); the harness checks every output against the expected one within the tolerance
given, and :func:`run_on_linux` checks again from the printed words, adding the top-1 class."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mcu.device.console import HarnessReport, parse_harness
from mcu.emit.c_model import render_firmware_main
from mcu.errors import McuError
from mcu.device.hostbuild import library_sources
from mcu.ir import NUMPY_DTYPES
from mcu.paths import runtime_dir
from mcu.device.toolchain import LINUX_INSTALL_HINT, build_linux_executable
from mcu.device.guards import raise_on_guard
from mcu.emit.c_model import GUARD_DEFINE

if TYPE_CHECKING:  # pragma: no cover
    from mcu.api import CompiledModel

HARNESS_SOURCES = ("src/mcu_log.c", "src/mcu_platform_default.c")


@dataclass
class LinuxRun:
    board: str
    passed: bool  # the harness's verdict and the top-1 check
    outputs: list[list[np.ndarray]]  # per vector, per output: memory order, device dtype
    max_error: float  # largest |got - expected| (fp32: absolute; int8: LSB)
    same_top1: bool
    report: HarnessReport
    console: str
    exit_code: int = 0  # the harness executable's exit status


def expectations(model: CompiledModel) -> tuple[list[list[np.ndarray]], list[float]]:
    """What the board must print for each bundled input, and per-output tolerances: the model's own
    (mcu.api.CompiledModel.expected_outputs and tolerances: eager PyTorch within 1e-5 of its largest
    output for fp32, and for int8 the Python integer reference of the graph before delegates took their
    partitions, within 2 LSB; exact where no delegate runs)."""
    tolerances = model.tolerances()
    return model.expected_outputs, tolerances if tolerances is not None else [0.0] * len(model.graph.outputs)


def run_on_linux(model: CompiledModel, expected: list[list[np.ndarray]], tolerances: list[float],
                 timeout_s: float = 600.0) -> LinuxRun:
    board = model.board
    if not board.is_linux:
        raise McuError(f"board {board.name} is not a Linux board", hint="use host or arm64-linux")
    lib = model.library
    vectors_in = [model.encode_inputs(x) for x in model.spec.test_inputs]
    vectors_out = [[np.asarray(y, NUMPY_DTYPES[io.dtype]).reshape(-1) for y, io in zip(ys, lib.view.outputs)]
                   for ys in expected]
    files = dict(lib.files)
    files["main.c"] = render_firmware_main(lib, vectors_in, vectors_out, tolerances)
    if lib.view.guarded:  # a test build: the arena guards around custom kernels (codegen/model.c.j2)
        model_c = f"{lib.prefix}_model.c"
        files[model_c] = f"#define {GUARD_DEFINE}\n" + files[model_c]
    sources = library_sources(lib) + [runtime_dir() / s for s in HARNESS_SOURCES]
    exe = build_linux_executable(board, files, sources, lib.libraries, lib.include_dirs)
    if board.linux_run and shutil.which(board.linux_run[0]) is None:
        raise McuError(f"{board.name}: {board.linux_run[0]} not found", hint=LINUX_INSTALL_HINT)
    try:
        proc = subprocess.run([*board.linux_run, str(exe)], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise McuError(f"the harness did not finish in {timeout_s:g} s on {board.name}") from None

    raise_on_guard(model, proc.stdout)
    report = parse_harness(proc.stdout)
    if report.passed is None:
        raise McuError(f"the harness on {board.name} printed no RESULT line (exit {proc.returncode}): "
                       f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    outputs: list[list[np.ndarray]] = []
    worst = 0.0
    same_top1 = True
    for v, ys in enumerate(vectors_out):
        got_v = []
        for o, (y, io) in enumerate(zip(ys, lib.view.outputs)):
            got = report.output_array(v, o, np.dtype(NUMPY_DTYPES[io.dtype]), io.numel)
            got_v.append(got)
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - y.astype(np.float64)))))
            same_top1 = same_top1 and int(np.argmax(got)) == int(np.argmax(y))
        outputs.append(got_v)
    return LinuxRun(board=board.name, passed=bool(report.passed) and same_top1, outputs=outputs, max_error=worst,
                    same_top1=same_top1, report=report, console=proc.stdout,
                    exit_code=proc.returncode)
