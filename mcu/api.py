"""The Python API: ``mcu.compile(model, example_inputs, board=...)``.

A :class:`CompiledModel` holds the lowered graph, its memory plan and the
generated C. It runs the model on the host in-process (``run``: its program
file through the C interpreter in ``mcu._native``; ``run_raw_c``: the
generated C built for the host), builds the firmware for the board
(``build``), and runs the firmware on the board's simulator against the
bundled test vectors (``simulate``). The CLI is a thin layer over this class.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from mcu.backends.base import BackendOptions, PartitionReport
from mcu.backends.cmsis_nn.core import resolve
from mcu.backends.cmsis_nn.options import CmsisNNOptions
from mcu.backends.optimized.options import OptimizedOptions
from mcu.device.boards import WEIGHTS_IN, Board, load_board
from mcu.device.console import parse_harness
from mcu.emit.c_model import GeneratedLibrary, render_firmware_main
from mcu.errors import DoesNotFit, McuError
from mcu.device.custom_child import run_child
from mcu.device.guards import raise_on_guard
from mcu.device.hostbuild import HostModel, build_host_library
from mcu.ir import NUMPY_DTYPES, Graph, Tensor
from mcu.layouts import to_memory_order
from mcu.capture.loader import ModelSpec, flatten_outputs, load_model_file, spec_from_objects
from mcu.device.mapfile import SizeReport, size_report
from mcu.plan.drawing import plan_svg
from mcu.plan.fused import KIND as FUSED_KIND
from mcu.plan.prefix import KIND as PREFIX_KIND, PrefixSchedule, ring_parts
from mcu.plan.fusion import FusionCosts
from mcu.plan.memory import MemoryPlan
from mcu.plan.weights import by_priority
from mcu.emit.outputs import build_lock, cached_build_dir, stage_sources
from mcu.progress import stage
from mcu.pipeline import compile_graph, smallest_configuration, to_graph
from mcu.reference.encoding import decode, encode
from mcu.quantize.flow import is_prequantized
from mcu.quantize import modes
from mcu.reference.interp import Reference
from mcu.program.writer import CompiledMethod, program_from
from mcu.backends.registry import check, parse
from mcu.device import custom_check
from mcu.device.custom_host import build_host_kernels
from mcu.program.writer import UnsupportedKernel
from mcu.emit.c_model import GUARD_DEFINE
from mcu.device.toolchain import build_firmware
from mcu.device.sim.qemu import run_qemu

# fp32 device outputs must match eager PyTorch to this fraction of the largest |output|.
FP32_RELATIVE_TOLERANCE = 1e-4
DELEGATE_INT8_LSB = 2  # int8 outputs of a delegated model against the Python reference (the bound the delegate tests hold)
DELEGATE_FP32_RELATIVE = 1e-5  # fp32 outputs of a delegated model, of the largest eager output


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
    sizes: SizeReport | None = None  # flash and RAM by category, from the linker map
    stack: Any = None  # mcu.device.stack.StackReport: the worst-case stack the linker script reserves
    # --weights-in fast: bytes of constant tensors each faster memory took, by region (mcu/device/placement.py)
    weights_placed: dict[str, int] = field(default_factory=dict)


@dataclass
class SimulationRun:
    passed: bool
    exit_code: int
    instructions: int | None  # first inference
    instructions_all: list[int]
    outputs: list[list[np.ndarray]]  # per vector, per output: logical shape, real values
    outputs_raw: list[list[np.ndarray]]  # the same as the device produced them (int8 codes for int8)
    console: str
    max_abs_error_vs_eager: float
    cycles: int | None = None
    # The largest |device - expected| over the raw outputs (int8: LSB; 0 when the check is bit-exact).
    max_error_vs_expected: float = 0.0
    # The first inference's core cycles estimated by the simulator's timing model (docs/cycles.md); None
    # when the board's core has none. ``cycles`` above is what a board's own counter printed.
    estimated_cycles: int | None = None


@dataclass
class CompiledModel:
    spec: ModelSpec
    board: Board
    quantize: str
    graph: Graph
    memory: MemoryPlan
    library: GeneratedLibrary
    partitions: PartitionReport = field(default_factory=PartitionReport)  # which backend took which ops
    # The graph before delegates took their partitions and blocks were fused: the Python reference runs
    # this one (it cannot run a delegate's payload, and checks a fused block stage by stage). None when
    # neither happened.
    reference_graph: Graph | None = None
    # Where the firmware keeps the constant tensors (``--weights-in``): "flash" or "fast" (each in the fastest
    # memory with room, mcu/device/placement.py); None: the board's default (Board.weights_in).
    weights_in: str | None = None
    # What the build's options changed nothing of, for the user (the command line's `mcu: note:` lines)
    notes: list[str] = field(default_factory=list)
    _host: HostModel | None = field(default=None, repr=False)
    _program: Any = field(default=None, repr=False)  # mcu.program.host.Program of this model, loaded on first run

    # --- host execution -----------------------------------------------------------------------------------

    @property
    def quantized_io(self) -> bool:
        return any(t.quant is not None for t in (*self.graph.inputs, *self.graph.outputs))

    def host_model(self) -> HostModel:
        if self._host is None:
            self._host = HostModel(self.library, build_host_library(self.library))
        return self._host

    def encode_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """Real-valued inputs in logical shape -> what the device takes (memory order; int8 if quantized).
        The host build, the reference and the test vectors take every other input as float32 values."""
        if len(inputs) != len(self.graph.inputs):
            raise McuError(f"the model takes {len(self.graph.inputs)} inputs, got {len(inputs)}")
        return [encode(_numpy(x).astype(np.float32), t.name, t.shape, t.dim_order,
                       t.dtype if t.quant is not None else "float32", *_quantization(t))
                for x, t in zip(inputs, self.graph.inputs)]

    def decode_outputs(self, outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Device outputs (memory order) -> real values in logical shape (dequantized if int8)."""
        return [decode(flat, t.shape, t.dim_order, t.dtype, *_quantization(t))
                for flat, t in zip(outputs, self.graph.outputs)]

    def raw_outputs(self, outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Device outputs (memory order) in logical shape, values as the device produced them."""
        return [decode(flat, t.shape, t.dim_order, t.dtype, real=False) for flat, t in zip(outputs, self.graph.outputs)]

    def program_image(self, external_weights: bool = False, bundle_tests: bool = False,
                      weights_name: str = "weights.mpw") -> Any:
        """This model as a program file (mcu.program.ProgramImage) with one method, ``forward``."""
        return program_from([CompiledMethod("forward", self)], external_weights=external_weights,
                            bundle=bundle_tests, weights_name=weights_name)

    def runtime_program(self) -> Any:
        """The program file loaded in-process by the C interpreter (mcu.program.host.Program)."""
        if self._program is None:
            # lazy: the C extension loads only when a program runs on the host
            from mcu.program.host import Program

            self._program = Program.load(self.program_image().program, custom=self.custom_kernels)
        return self._program

    @cached_property
    def custom_kernels(self) -> Any:
        """The model's custom kernels built for the host (mcu.device.custom_host.HostKernels), or None without any."""
        return build_host_kernels(self.graph)

    def run_raw(self, *inputs: Any) -> list[np.ndarray]:
        """The program file run by the C interpreter on the host; outputs in memory order and the
        device's dtypes. A model with a kernel that program files cannot express yet runs its
        generated C instead, and so does one with custom ops (in a sanitized child process)."""
        if self.has_custom_ops:  # the user's C runs in a sanitized child, never in this process
            return self.run_raw_c(*inputs)
        try:
            program = self.runtime_program()
        except UnsupportedKernel:
            return self.run_raw_c(*inputs)
        return program.method("forward").run_raw(*self.encode_inputs(inputs))

    def run_raw_c(self, *inputs: Any) -> list[np.ndarray]:
        """The generated C built for the host (the parity twin of :meth:`run_raw`); with custom ops, in a child
        process under ASan and UBSan with the arena guards (mcu/device/custom_child.py)."""
        if self.has_custom_ops:
            return run_child(self, self.encode_inputs(inputs))
        return self.host_model().run_physical(self.encode_inputs(inputs))

    @property
    def has_custom_ops(self) -> bool:
        return any(op.kind == "custom" for op in self.graph.ops)

    def run(self, *inputs: Any, raw: bool = False) -> list[torch.Tensor]:
        """Run on the host through the program interpreter. Inputs and outputs are real values in
        PyTorch's logical shapes; ``raw=True`` returns the device's values instead (int8 codes for an
        int8 model), still in logical shape -- the convention of ``mcu.program.host.Method.__call__``."""
        device = self.run_raw(*inputs)
        outs = self.raw_outputs(device) if raw else self.decode_outputs(device)
        return [torch.from_numpy(np.ascontiguousarray(o)) for o in outs]

    @property
    def delegated(self) -> bool:
        """Whether a delegate (XNNPACK) runs part of the model: then outputs are checked within bounds
        (:data:`DELEGATE_INT8_LSB`, :data:`FP32_RELATIVE_TOLERANCE`), not bit for bit."""
        return any(op.kind == "delegate" for op in self.graph.ops)

    def reference_raw(self, *inputs: Any) -> list[np.ndarray]:
        """The Python integer reference (int8) on the same inputs; memory order, device dtypes."""
        return Reference(self.reference_graph or self.graph).run(self.encode_inputs(inputs))

    def eager(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """The model in PyTorch; model state starts cleared, as on the device for each bundled vector."""
        with torch.no_grad():
            if self.graph.state:
                buffers = dict(self.spec.model.named_buffers())
                for name in self.graph.state:
                    buffers[name].zero_()
            out = self.spec.model(*inputs)
        return [t for _, t in flatten_outputs(out, str(self.spec.path or self.spec.name))]

    @cached_property
    def eager_outputs(self) -> list[list[np.ndarray]]:
        """Eager PyTorch (float) outputs of the bundled test inputs, logical shapes."""
        return [[o.detach().numpy().astype(np.float32) for o in self.eager(*x)] for x in self.spec.test_inputs]

    @cached_property
    def reference_is_exact(self) -> bool:
        """Whether the Python reference predicts every op of this graph bit for bit (never for fp32 models)."""
        return not modes.is_float(self.quantize) and not self.delegated \
            and Reference(self.reference_graph or self.graph).exact

    @cached_property
    def expected_outputs(self) -> list[list[np.ndarray]]:
        """What the device must output for each bundled test input, in memory order and device dtypes:
        the Python reference where it is bit-exact (int8), eager PyTorch for fp32, and otherwise the
        same generated C built for the host (mixed graphs whose fp32 ops use libm)."""
        if self.reference_is_exact:
            return [self.reference_raw(*x) for x in self.spec.test_inputs]
        if modes.is_float(self.quantize):
            return [[to_memory_order(y, t) for y, t in zip(ys, self.graph.outputs)] for ys in self.eager_outputs]
        if self.delegated and Reference(self.reference_graph).exact:
            return [self.reference_raw(*x) for x in self.spec.test_inputs]
        return [self.run_raw(*x) for x in self.spec.test_inputs]

    def tolerances(self) -> list[float] | None:
        """Per-output absolute tolerance of the firmware check; None means bit-exact."""
        if self.reference_is_exact:
            return None
        tolerances = []
        for i, t in enumerate(self.graph.outputs):
            if t.dtype == "int8":
                # XNNPACK rounds near-ties correctly where the TFLite-style reference does not; otherwise
                # one quantization step around an fp32 op that uses libm
                tolerances.append(float(DELEGATE_INT8_LSB) if self.delegated else 1.0)
            else:
                worst = max(float(np.max(np.abs(v[i].astype(np.float64)))) for v in self.expected_outputs)
                rel = DELEGATE_FP32_RELATIVE if self.delegated else FP32_RELATIVE_TOLERANCE
                tolerances.append(max(rel * worst, 1e-30))
        return tolerances

    # --- firmware -----------------------------------------------------------------------------------------

    def firmware_sources(self) -> dict[str, str]:
        vec_in = [self.encode_inputs(xs) for xs in self.spec.test_inputs]
        main = render_firmware_main(self.library, vec_in, self.expected_outputs, self.tolerances())
        return {**self.library.files, "main.c": main}

    @property
    def harness_defines(self) -> dict[str, Any]:
        """The test firmware's compile definitions: the model's own, and the arena guards around custom
        kernels (codegen/model.c.j2; an exported library never has them)."""
        guards = {GUARD_DEFINE: None} if self.library.view.guarded else {}
        return {**self.library.defines, **guards}

    @property
    def weights_placement(self) -> str:
        """``weights_in``, or the board's default when it is None."""
        placement = self.weights_in or self.board.weights_in
        if placement not in WEIGHTS_IN:
            raise McuError(f"weights_in must be one of {', '.join(WEIGHTS_IN)}, got '{placement}'")
        return placement

    def fast_weight_symbols(self) -> list[str] | None:
        """The constant arrays to move into fast memory, most re-read first (mcu/plan/weights.py); None when the
        weights stay in flash."""
        if self.weights_placement != "fast":
            return None
        view = self.library.view
        return by_priority(self.graph, [(c.name, c.symbol) for c in view.constants]) + \
            [d.payload_symbol for d in view.delegates]

    def fast_weight_objects(self) -> list[str]:
        """Sources whose whole read-only data moves with the weights: the model code's, each op's parameters."""
        return [f"{self.library.prefix}_model"] if self.weights_placement == "fast" else []

    def build(self, out_dir: Path | None = None, lock: bool = True) -> FirmwareBuild:
        """Build the firmware into ``out_dir`` (default: a content-keyed cache folder).

        The build holds the folder's lock (mcu/emit/outputs.py): a second build into a folder the caller
        named fails at once, into the cache it waits. ``lock=False``: the caller holds it already.
        """
        files = self.firmware_sources()
        cached = out_dir is None
        if out_dir is None:
            fast = {"MCU_WEIGHTS_IN": self.weights_placement} if self.weights_placement != "flash" else {}
            out_dir = cached_build_dir(self.board.name, self.library.prefix, files, {**self.harness_defines, **fast})
        if not lock:
            return self._build_in(Path(out_dir), files)
        with build_lock(Path(out_dir), wait=cached):
            return self._build_in(Path(out_dir), files)

    def _build_in(self, out_dir: Path, files: dict[str, str]) -> FirmwareBuild:
        sources, includes = stage_sources(Path(out_dir), files, self.library)
        src_dir = includes[0]
        # The stack is bounded from the code (mcu/device/stack.py) and reserved exactly, plus a margin.
        try:
            fw = build_firmware(self.board, sources, includes, Path(out_dir), stack_usage=True,
                                defines=self.harness_defines, fast_weights=self.fast_weight_symbols(),
                                fast_objects=self.fast_weight_objects())
        except DoesNotFit as exc:
            if exc.region != self.board.region_for("rodata").name:
                raise
            raise McuError(exc.message + smallest_configuration(self.graph, exc.need, exc.capacity),
                           exc.hint) from None
        self._check_board_limits(fw)
        sizes = size_report(fw.map_path, fw.elf, self.library.prefix, self.library.kernel_sources,
                            fw.flash_bytes, fw.ram_bytes, ram_regions=self.board.ram_regions())
        return FirmwareBuild(board=self.board, elf=fw.elf, source_dir=src_dir, flash_bytes=fw.flash_bytes,
                             ram_bytes=fw.ram_bytes, sections=dict(fw.sections), uf2=fw.uf2,
                             region_bytes=dict(fw.region_bytes), sizes=sizes, stack=fw.stack,
                             weights_placed=dict(fw.weights_placed))

    def memory_svg(self) -> str:
        """The memory plan drawn as SVG (steps across, arena offsets up, one box per buffer)."""
        names = [op.name for op in self.graph.ops]
        return plan_svg(self.memory.plan, f"{self.spec.name} on {self.board.name} ({self.quantize}): memory plan",
                        names, rings=ring_parts(self.graph))

    def _check_board_limits(self, fw: Any) -> None:
        if fw.flash_bytes > self.board.flash.length:
            consts = sorted(self.graph.constants(), key=lambda t: t.nbytes, reverse=True)
            biggest = f"; the largest constant is {consts[0].name} ({consts[0].nbytes} B)" if consts else ""
            raise McuError(f"firmware does not fit {self.board.name}: it needs {fw.flash_bytes} B of flash, the "
                           f"board has {self.board.flash.length} B ({fw.flash_bytes - self.board.flash.length} B "
                           f"too many){biggest}{smallest_configuration(self.graph, fw.flash_bytes, self.board.flash.length)}",
                           hint="use a smaller model or quantize to int8")

    def harness_outputs(self, report: Any, exit_code: int, console: str) -> tuple[
            list[list[np.ndarray]], list[list[np.ndarray]], float, float]:
        """What a firmware harness printed (mcu.device.console.HarnessReport), per test vector and output: real values
        and raw values in logical shape, the largest |real - eager| and the largest |raw - expected|."""
        raise_on_guard(self, console)
        outputs: list[list[np.ndarray]] = []
        raw: list[list[np.ndarray]] = []
        worst = 0.0
        worst_expected = 0.0
        for v, eager in enumerate(self.eager_outputs):
            flats = []
            for i, t in enumerate(self.graph.outputs):
                if (v, i) not in report.outputs:
                    raise McuError(f"the firmware printed no output {i} for test vector {v} "
                                   f"(exit status {exit_code}):\n{console.strip()[-2000:]}")
                flats.append(report.output_array(v, i, NUMPY_DTYPES[t.dtype], t.numel))
                expected = np.asarray(self.expected_outputs[v][i]).reshape(-1).astype(np.float64)
                worst_expected = max(worst_expected,
                                     float(np.max(np.abs(flats[-1].astype(np.float64) - expected), initial=0.0)))
            row = self.decode_outputs(flats)
            raw.append(self.raw_outputs(flats))
            outputs.append(row)
            worst = max([worst] + [float(np.max(np.abs(y.astype(np.float64) - e))) for y, e in zip(row, eager)])
        return outputs, raw, worst, worst_expected

    def simulate(self, timeout_s: float = 600.0) -> SimulationRun:
        """Build the firmware and run it on the board's simulator with the bundled vectors."""
        if self.board.sim_kind != "qemu":
            raise McuError(f"board {self.board.name} has no simulator",
                           hint="`mcu boards` lists the boards that run in simulation")
        fw = self.build()
        with stage("simulate"):
            result = run_qemu(self.board, fw.elf, timeout_s=timeout_s)
        report = parse_harness(result.console)
        outputs, raw, worst, worst_expected = self.harness_outputs(report, result.exit_code, result.console)
        passed = bool(report.passed) and result.exit_code == 0
        return SimulationRun(passed=passed, exit_code=result.exit_code,
                             instructions=result.instructions[0] if result.instructions else None,
                             instructions_all=list(result.instructions), outputs=outputs, outputs_raw=raw,
                             console=result.console, max_abs_error_vs_eager=worst, cycles=report.cycles,
                             max_error_vs_expected=worst_expected,
                             estimated_cycles=result.cycles[0] if result.cycles else None)

    # --- reporting ----------------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "board": self.board.name,
            "quantize": self.quantize,
            "arena_bytes": self.memory.arena_size,
            "arena_lower_bound_bytes": self.memory.lower_bound,
            "arena_live_set_bytes": self.memory.live_set,
            "ops": len(self.library.view.steps),
            "fp32_fallbacks": [{"op": op, "reason": why} for op, why in self.graph.fallbacks],
        }


def _quantization(t: Tensor) -> tuple[float | None, int]:
    """(scale, zero point) of a quantized input or output, (None, 0) otherwise."""
    return (t.quant.scale[0], t.quant.zero_point[0]) if t.quant is not None else (None, 0)


def _numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def resolve_quantize(spec: ModelSpec, quantize: str) -> str:
    """``auto``: static int8 when the model file provides calibration data, fp32 otherwise."""
    if quantize == modes.AUTO:
        return modes.INT8 if spec.calibration is not None or is_prequantized(spec.model) else modes.NONE
    return quantize


@contextlib.contextmanager
def _naming_the_file(spec: ModelSpec) -> Iterator[None]:
    """A compile error about a model file names the file (most already name its line; the rest, such as a
    model too large for the board, get the path in front)."""
    try:
        yield
    except McuError as exc:
        if spec.path is None or spec.path.name in exc.message:
            raise
        raise McuError(f"{spec.path}: {exc.message}", hint=exc.hint, exit_code=exc.exit_code) from None


def _output_names(spec: ModelSpec, count: int) -> list[str]:
    """The user's output names in graph order (empty when the graph's outputs are not the model's)."""
    if isinstance(spec.model, torch.fx.GraphModule):  # converted pt2e modules keep no dict keys
        return []
    with torch.no_grad():
        names = [name for name, _ in flatten_outputs(spec.model(*spec.example_inputs), str(spec.path or spec.name))]
    return names if len(names) == count else []


def backend_options(cmsis_nn: str | Path | None = None, packed_weights: bool | None = None,
                    backend: str | list[str] | None = None) -> BackendOptions:
    """The Python API's backend keywords (and so the command line's ``--cmsis-nn``, ``--compact-weights``) as
    the options of the backends they belong to, by backend id (mcu/backends/base.py, BackendOptions).

    ``cmsis_nn``: CMSIS-NN sources to route supported int8 layers to (a path, or ``auto``: the
    CMSIS_NN_PATH environment variable, else cmsis-pack-manager's pack cache; ``auto`` too when
    ``backend`` names cmsis-nn); None: our kernels only (mcu/backends/cmsis_nn/). ``packed_weights``:
    on cores with the DSP extension, True packs int8 convolution and fully connected weights as int16
    for the fastest kernel (mcu/backends/optimized/tuned.py; twice their flash); False keeps them int8
    for the compact kernels (mcu/backends/optimized/compact.py); None (default) packs them while the
    board's flash has room (compact.packed_by_default)."""
    order = parse(backend)
    check(order)
    if cmsis_nn is None and order is not None and "cmsis-nn" in order:
        cmsis_nn = "auto"  # asked for by name: CMSIS_NN_PATH, else the pack cache
    options: BackendOptions = {}
    root = resolve(cmsis_nn)
    if root is not None:
        options["cmsis-nn"] = CmsisNNOptions(root)
    if packed_weights is not None:
        options["optimized"] = OptimizedOptions(packed_weights)
    return options


def _fuse_policy(fuse_blocks: bool | str) -> str:
    return ("auto" if fuse_blocks else "off") if isinstance(fuse_blocks, bool) else fuse_blocks


@dataclass
class LoweredModel:
    """A model captured, quantized and lowered (:func:`mcu.pipeline.to_graph`): the part of a compile that does
    not depend on the board and most of its time (torch.export, calibration, the int8 conversion). Lower once with
    :func:`lower`, :func:`lower_file` or :func:`lower_spec`, then :meth:`compile` for each board to compare::

        lowered = mcu.api.lower_file("model.py", quantize="int8")
        on_m4, on_m55 = lowered.compile("mps2-an386"), lowered.compile("mps3-an547")

    Every compile works on its own deep copy of ``graph`` (partitioning, block fusion and the memory plan change
    ops, tensors and their parameters), so each gives the generated C, program file and firmware that
    :func:`compile_spec` gives for that board, byte for byte, and no board sees another's changes."""

    spec: ModelSpec
    quantize: str  # resolved: never "auto"
    graph: Graph = field(repr=False)

    def compile(self, board: str | Board = "mps2-an505", options: BackendOptions | None = None,
                backend: str | list[str] | None = None, check_flash: bool = True, fuse_blocks: bool | str = False,
                ram_budget: int | None = None, fuse_costs: FusionCosts | None = None,
                fuse_band: int = 1, stream_prefix: bool | int | PrefixSchedule = False, stream_input: bool = False,
                speed_scratch: bool = True, weights_in: str | None = None) -> CompiledModel:
        """This model for ``board``; the keywords are :func:`compile_spec`'s (``speed_scratch``:
        mcu/pipeline.py compile_graph's)."""
        order = parse(backend)
        check(order)
        board_obj = board if isinstance(board, Board) else load_board(board)
        own = dataclasses.replace(self, graph=copy.deepcopy(self.graph))
        return _compile_lowered(own, board_obj, options, order, check_flash, _fuse_policy(fuse_blocks), ram_budget,
                                fuse_costs, fuse_band, stream_prefix, stream_input, speed_scratch, weights_in)


def lower_spec(spec: ModelSpec, quantize: str = "none", weight_palette: modes.Palette | None = None,
               mixed: modes.MixedOptions | None = None, board: str | Board | None = None,
               bias_correction: bool | None = None, weight_rounding: str | None = None) -> LoweredModel:
    """Capture, quantize and lower a loaded model once, to :meth:`LoweredModel.compile` for any number of boards.
    ``weight_palette``: 2, 3 or 4: the int8 convolution and linear weights as indices of that many bits into
    a table per output channel (``--weight-palette``; ``quantize`` int8 or w8a16), or a PaletteOptions with
    ``per="tensor"``: one table per weight tensor (``--palette-per tensor``). ``mixed``: with ``quantize``
    "mixed", the accuracy budget and objective of each layer's weight precision (``--accuracy-budget``,
    ``--mixed-objective``; mcu/passes/mixed_choice.py), whose flash is counted on ``board`` (its layouts and
    kernels' code; default mps2-an505). ``bias_correction``: each convolution's and linear layer's bias
    corrected for its rounded weights over the calibration data (``--bias-correction on|off``;
    mcu/quantize/bias_correction.py); None: the mode's default (:func:`mcu.quantize.modes.corrects_biases`).
    ``weight_rounding``: "nearest"; "gptq": the convolution, linear, LSTM and GRU weights rounded with each layer's
    error compensated over the calibration data (``--weight-rounding``; mcu/quantize/gptq.py); "searched": each
    channel's scale searched for the least output error (mcu/quantize/weight_scales.py), LSTM matrices GPTQ-rounded
    on it; None: the mode's default (:func:`mcu.quantize.modes.weight_rounding`)."""
    quantize = resolve_quantize(spec, quantize)
    board_obj = board if isinstance(board, Board) or board is None else load_board(board)
    with _naming_the_file(spec):
        graph = to_graph(spec, quantize, weight_palette, mixed, board_obj, bias_correction, weight_rounding)
        graph.output_names = [] if graph.state else _output_names(spec, len(graph.outputs))  # state: no extra run
    return LoweredModel(spec=spec, quantize=quantize, graph=graph)


def _check_weights_in(weights_in: str | None) -> None:
    if weights_in is not None and weights_in not in WEIGHTS_IN:
        raise McuError(f"weights_in must be one of {', '.join(WEIGHTS_IN)}, got '{weights_in}'")


def _compile_lowered(lowered: LoweredModel, board: Board, options: BackendOptions | None, order: list[str] | None,
                     check_flash: bool, fuse: str, ram_budget: int | None, fuse_costs: FusionCosts | None,
                     fuse_band: int, stream_prefix: bool | int | PrefixSchedule = False, stream_input: bool = False,
                     speed_scratch: bool = True, weights_in: str | None = None) -> CompiledModel:
    """Partition, plan and generate for ``board``, changing ``lowered.graph``: the caller's copy to give away."""
    _check_weights_in(weights_in)
    spec, graph, quantize = lowered.spec, lowered.graph, lowered.quantize
    with _naming_the_file(spec):
        before = dataclasses.replace(graph, ops=list(graph.ops))  # partitioning replaces the op list, not the ops
        memory, library, report = compile_graph(graph, board, quantize, order, options, check_flash=check_flash,
                                                fuse=fuse, ram_budget=ram_budget, fuse_costs=fuse_costs,
                                                fuse_band=fuse_band, stream_prefix=stream_prefix,
                                                stream_input=stream_input, speed_scratch=speed_scratch,
                                                weights_in=weights_in)
    delegated = any(op.kind == "delegate" for op in graph.ops)
    fused = any(op.kind in (FUSED_KIND, PREFIX_KIND) for op in graph.ops)
    cm = CompiledModel(spec=spec, board=board, quantize=quantize, graph=graph, memory=memory, library=library,
                       partitions=report, reference_graph=before if delegated or fused else None,
                       weights_in=weights_in)
    if cm.has_custom_ops:
        # The user's kernels against their references in a sanitized child, before any firmware is built
        # and before their C runs in this process.

        with stage("check custom kernels"):
            custom_check.check_kernels(graph)
    return cm


def compile_spec(spec: ModelSpec, board: str | Board = "mps2-an505", quantize: str = "none",
                 options: BackendOptions | None = None, backend: str | list[str] | None = None,
                 check_flash: bool = True, fuse_blocks: bool | str = False,
                 ram_budget: int | None = None, fuse_costs: FusionCosts | None = None,
                 fuse_band: int = 1, stream_prefix: bool | int = False, stream_input: bool = False,
                 weight_palette: modes.Palette | None = None, mixed: modes.MixedOptions | None = None,
                 weights_in: str | None = None, bias_correction: bool | None = None,
                 weight_rounding: str | None = None) -> CompiledModel:
    """``weight_palette``, ``mixed``, ``bias_correction``, ``weight_rounding``: see :func:`lower_spec`.
    ``weights_in``: where the
    firmware keeps the constant tensors, "flash" or "fast" (each in the fastest memory with room,
    mcu/device/placement.py; None: the board's default; ``--weights-in``). ``fuse_blocks``: run inverted-residual
    blocks row by
    row through a ring of expanded rows (mcu/plan/fused.py), as few as give the smallest arena (True or "auto";
    "all": every block that can);
    ``ram_budget``: as few as bring the arena to at most these bytes (mcu/plan/fusion.py); by default every
    tensor stays whole (unless the model does not fit the board); with ``fuse_costs`` (the ops' measured
    instructions, mcu/devtools/fusion_costs.py) the budget takes the fastest schedule that fits instead;
    ``fuse_band``: output rows per pass of every block fused by "all". ``stream_prefix``: the network's first
    ops run band by band of rows through rings, ending where the arena is smallest (mcu/plan/prefix.py), or
    as given (ops run row by row, or a PrefixSchedule);
    ``stream_input``: the same with the input read a band at a time through a callback the firmware
    implements (``<model>_run_streamed``, model.h), so that it is not in the arena. ``backend``: the backends' preference
    order, ``"cmsis-nn,optimized,portable"`` or a list (None: CMSIS-NN first when it is given, then
    optimized, then portable; mcu/backends/registry.py); the partition report is
    ``CompiledModel.partitions``. ``options``: the backends' own options by backend id (:func:`backend_options`
    makes them from the API's keywords). One model for several boards: :func:`lower_spec` it once and
    :meth:`LoweredModel.compile` it per board, which skips capture and quantization after the first."""

    order = parse(backend)
    check(order)
    _check_weights_in(weights_in)  # before capture and quantization, which take the time
    board_obj = board if isinstance(board, Board) else load_board(board)
    # A graph lowered for this compile alone: it needs no copy.
    return _compile_lowered(lower_spec(spec, quantize, weight_palette, mixed, board_obj, bias_correction,
                                       weight_rounding), board_obj,
                            options, order,
                            check_flash, _fuse_policy(fuse_blocks), ram_budget, fuse_costs, fuse_band, stream_prefix,
                            stream_input, weights_in=weights_in)


def compile(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], board: str = "mps2-an505",  # noqa: A001
            quantize: str = "none", calibration: Any = None, test_inputs: Any = None,
            name: str | None = None, cmsis_nn: str | Path | None = None,
            packed_weights: bool | None = None, backend: str | list[str] | None = None,
            custom_ops: Any = None, weight_palette: modes.Palette | None = None,
            mixed: modes.MixedOptions | None = None, weights_in: str | None = None,
            bias_correction: bool | None = None, weight_rounding: str | None = None) -> CompiledModel:
    """Compile an ``nn.Module`` for a board; see the module docstring. ``cmsis_nn``, ``packed_weights``:
    see :func:`backend_options`. ``custom_ops``: registrations of the model's own ops (:func:`mcu.custom_op`).
    ``weight_palette``, ``mixed``, ``bias_correction``, ``weight_rounding``: see :func:`lower_spec`; ``weights_in``: see
    :func:`compile_spec`."""
    spec = spec_from_objects(model, example_inputs, calibration, test_inputs,
                             name=name or type(model).__name__.lower(), custom_ops=custom_ops)
    return compile_spec(spec, board, quantize, backend_options(cmsis_nn, packed_weights, backend), backend,
                        weight_palette=weight_palette, mixed=mixed, weights_in=weights_in,
                        bias_correction=bias_correction, weight_rounding=weight_rounding)


def compile_file(path: str | Path, board: str = "mps2-an505", quantize: str = "none",
                 cmsis_nn: str | Path | None = None, packed_weights: bool | None = None,
                 backend: str | list[str] | None = None, fuse_blocks: bool | str = False,
                 ram_budget: int | None = None, fuse_costs: FusionCosts | None = None,
                 fuse_band: int = 1, stream_prefix: bool | int = False, stream_input: bool = False,
                 qat: bool = False, weight_palette: modes.Palette | None = None,
                 mixed: modes.MixedOptions | None = None, weights_in: str | None = None,
                 bias_correction: bool | None = None, weight_rounding: str | None = None) -> CompiledModel:
    """``weight_palette``, ``mixed``, ``bias_correction``, ``weight_rounding``: see :func:`lower_spec`;
    ``weights_in``: see
    :func:`compile_spec`. ``qat``: fine-tune with the model file's ``qat_train`` at
    ``quantize``'s precision first
    (mcu/quantize/qat.py)."""
    with stage("load"):
        spec = load_model_file(path)
    if qat:
        # lazy: keeps torchao out of this module's import
        from mcu.quantize.qat import with_qat

        spec = with_qat(spec, quantize)
    return compile_spec(spec, board, quantize, backend_options(cmsis_nn, packed_weights, backend), backend,
                        fuse_blocks=fuse_blocks, ram_budget=ram_budget, fuse_costs=fuse_costs, fuse_band=fuse_band,
                        stream_prefix=stream_prefix, stream_input=stream_input, weight_palette=weight_palette,
                        mixed=mixed, weights_in=weights_in, bias_correction=bias_correction,
                        weight_rounding=weight_rounding)


def lower(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor], quantize: str = "none",
          calibration: Any = None, test_inputs: Any = None, name: str | None = None,
          custom_ops: Any = None, weight_palette: modes.Palette | None = None,
          mixed: modes.MixedOptions | None = None, bias_correction: bool | None = None,
          weight_rounding: str | None = None) -> LoweredModel:
    """An ``nn.Module`` captured, quantized and lowered once, to compile for several boards (:class:`LoweredModel`);
    the arguments are :func:`compile`'s."""
    spec = spec_from_objects(model, example_inputs, calibration, test_inputs,
                             name=name or type(model).__name__.lower(), custom_ops=custom_ops)
    return lower_spec(spec, quantize, weight_palette, mixed, bias_correction=bias_correction,
                      weight_rounding=weight_rounding)


def lower_file(path: str | Path, quantize: str = "none", weight_palette: modes.Palette | None = None,
               mixed: modes.MixedOptions | None = None, bias_correction: bool | None = None,
               weight_rounding: str | None = None) -> LoweredModel:
    """A model file captured, quantized and lowered once, to compile for several boards (:class:`LoweredModel`);
    ``weight_palette``, ``mixed``, ``bias_correction``, ``weight_rounding``: see :func:`lower_spec`."""
    with stage("load"):
        spec = load_model_file(path)
    return lower_spec(spec, quantize, weight_palette, mixed, bias_correction=bias_correction,
                      weight_rounding=weight_rounding)


def max_abs(values: list[np.ndarray]) -> float:
    return max((float(np.max(np.abs(v))) for v in values), default=math.nan)
