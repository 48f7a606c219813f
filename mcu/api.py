"""The Python API: ``mcu.compile(model, example_inputs, board=...)``.

A :class:`CompiledModel` holds the lowered graph, its memory plan and the
generated C. It runs that C on the host in-process (``run``), builds the
firmware for the board (``build``), and runs the firmware on the board's
simulator against the bundled test vectors (``simulate``). The CLI is a thin
layer over this class.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from mcu.boards import Board, load_board
from mcu.console import parse_harness
from mcu.emit.c_model import GeneratedLibrary, render_firmware_main
from mcu.errors import McuError
from mcu.hostbuild import HostModel, build_host_library
from mcu.ir import NUMPY_DTYPES, Graph
from mcu.layouts import from_memory_order, to_memory_order
from mcu.loader import ModelSpec, load_model_file, spec_from_objects
from mcu.memory import MemoryPlan
from mcu.paths import cache_dir, runtime_dir
from mcu.pipeline import compile_graph, to_graph

# fp32 device outputs must match eager PyTorch to this fraction of the largest |output|.
FP32_RELATIVE_TOLERANCE = 1e-4


@dataclass
class FirmwareBuild:
    board: Board
    elf: Path
    source_dir: Path
    flash_bytes: int
    ram_bytes: int
    sections: dict[str, int]
    uf2: Path | None = None  # the flashable image, for boards deployed as UF2 (pico2)
    region_bytes: dict[str, int] = field(default_factory=dict)  # bytes used per memory region


@dataclass
class SimulationRun:
    passed: bool
    exit_code: int
    instructions: int | None  # first inference
    instructions_all: list[int]
    outputs: list[list[np.ndarray]]  # per vector, per output: logical shape, real values
    console: str
    max_abs_error_vs_eager: float


@dataclass
class CompiledModel:
    spec: ModelSpec
    board: Board
    quantize: str
    graph: Graph
    memory: MemoryPlan
    library: GeneratedLibrary
    _host: HostModel | None = field(default=None, repr=False)

    # --- host execution -----------------------------------------------------------------------------------

    def host_model(self) -> HostModel:
        if self._host is None:
            self._host = HostModel(self.library, build_host_library(self.library))
        return self._host

    def run(self, *inputs: Any) -> list[torch.Tensor]:
        """Run the generated C on the host. Inputs and outputs use PyTorch's logical shapes."""
        arrays = [to_memory_order(_numpy(x), t) for x, t in zip(inputs, self.graph.inputs)]
        outs = self.host_model().run_physical(arrays)
        return [torch.from_numpy(from_memory_order(o, t)) for o, t in zip(outs, self.graph.outputs)]

    def eager(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        with torch.no_grad():
            out = self.spec.model(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    @cached_property
    def expected_outputs(self) -> list[list[np.ndarray]]:
        """Reference outputs of the bundled test inputs (eager PyTorch for fp32)."""
        return [[o.detach().numpy().astype(np.float32) for o in self.eager(*x)] for x in self.spec.test_inputs]

    def tolerances(self) -> list[float]:
        worst = [max(float(np.max(np.abs(v[i]))) for v in self.expected_outputs)
                 for i in range(len(self.graph.outputs))]
        return [max(FP32_RELATIVE_TOLERANCE * w, 1e-30) for w in worst]

    # --- firmware -----------------------------------------------------------------------------------------

    def firmware_sources(self) -> dict[str, str]:
        vec_in = [[to_memory_order(_numpy(x), t) for x, t in zip(xs, self.graph.inputs)]
                  for xs in self.spec.test_inputs]
        vec_out = [[to_memory_order(y, t) for y, t in zip(ys, self.graph.outputs)] for ys in self.expected_outputs]
        main = render_firmware_main(self.library, vec_in, vec_out, self.tolerances())
        return {**self.library.files, "main.c": main}

    def build(self, out_dir: Path | None = None) -> FirmwareBuild:
        from mcu.toolchain import build_firmware

        files = self.firmware_sources()
        if out_dir is None:
            digest = hashlib.sha256("".join(f"{k}\0{v}" for k, v in sorted(files.items())).encode()).hexdigest()
            out_dir = cache_dir() / "firmware" / self.board.name / f"{self.library.prefix}-{digest[:20]}"
        src_dir = Path(out_dir) / "src"
        src_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            path = src_dir / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        rt = runtime_dir()
        sources = [src_dir / n for n in files if n.endswith(".c")]
        sources += [rt / "kernels" / s for s in self.library.kernel_sources]
        sources += [rt / s for s in self.library.runtime_sources]
        fw = build_firmware(self.board, sources, [src_dir, rt / "include"], Path(out_dir))
        self._check_board_limits(fw)
        return FirmwareBuild(board=self.board, elf=fw.elf, source_dir=src_dir, flash_bytes=fw.flash_bytes,
                             ram_bytes=fw.ram_bytes, sections=dict(fw.sections), uf2=fw.uf2,
                             region_bytes=dict(fw.region_bytes))

    def _check_board_limits(self, fw: Any) -> None:
        if fw.flash_bytes > self.board.flash.length:
            raise McuError(f"firmware does not fit {self.board.name}: it needs {fw.flash_bytes} B of flash, the "
                           f"board has {self.board.flash.length} B ({fw.flash_bytes - self.board.flash.length} B "
                           "too many)", hint="use a smaller model or quantize to int8")

    def simulate(self, timeout_s: float = 600.0) -> SimulationRun:
        """Build the firmware and run it on the board's simulator with the bundled vectors."""
        from mcu.sim.qemu import run_qemu

        if self.board.sim_kind != "qemu":
            raise McuError(f"board {self.board.name} has no simulator",
                           hint="`mcu boards` lists the boards that run in simulation")
        fw = self.build()
        result = run_qemu(self.board, fw.elf, timeout_s=timeout_s)
        report = parse_harness(result.console)
        outputs: list[list[np.ndarray]] = []
        worst = 0.0
        for v, expected in enumerate(self.expected_outputs):
            row = []
            for i, t in enumerate(self.graph.outputs):
                if (v, i) not in report.outputs:
                    raise McuError(f"the firmware printed no output {i} for test vector {v} "
                                   f"(exit status {result.exit_code}):\n{result.console.strip()[-2000:]}")
                flat = report.output_array(v, i, NUMPY_DTYPES[t.dtype], t.numel)
                y = from_memory_order(flat, t)
                row.append(y)
                worst = max(worst, float(np.max(np.abs(y.astype(np.float64) - expected[i]))))
            outputs.append(row)
        passed = bool(report.passed) and result.exit_code == 0
        return SimulationRun(passed=passed, exit_code=result.exit_code,
                             instructions=result.instructions[0] if result.instructions else None,
                             instructions_all=list(result.instructions), outputs=outputs, console=result.console,
                             max_abs_error_vs_eager=worst)

    # --- reporting ----------------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "board": self.board.name,
            "quantize": self.quantize,
            "arena_bytes": self.memory.arena_size,
            "arena_lower_bound_bytes": self.memory.lower_bound,
            "ops": len([s for s in self.library.view.steps]),
        }


def _numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def compile_spec(spec: ModelSpec, board: str | Board = "mps2-an505", quantize: str = "none") -> CompiledModel:
    board_obj = board if isinstance(board, Board) else load_board(board)
    graph = to_graph(spec, quantize)
    memory, library = compile_graph(graph, board_obj, quantize)
    return CompiledModel(spec=spec, board=board_obj, quantize=quantize, graph=graph, memory=memory, library=library)


def compile(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], board: str = "mps2-an505",  # noqa: A001
            quantize: str = "none", calibration: Any = None, test_inputs: Any = None,
            name: str | None = None) -> CompiledModel:
    """Compile an ``nn.Module`` for a board; see the module docstring."""
    spec = spec_from_objects(model, example_inputs, calibration, test_inputs,
                             name=name or type(model).__name__.lower())
    return compile_spec(spec, board, quantize)


def compile_file(path: str | Path, board: str = "mps2-an505", quantize: str = "none") -> CompiledModel:
    return compile_spec(load_model_file(path), board, quantize)


def max_abs(values: list[np.ndarray]) -> float:
    return max((float(np.max(np.abs(v))) for v in values), default=math.nan)
