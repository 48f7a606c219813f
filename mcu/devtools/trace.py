"""The host side of the event tracer: build a profiling firmware (``MCU_TRACE``), run it, collect events.

The profiling firmware is the normal firmware (same generated sources, same harness, same bundled
vectors) compiled with ``-DMCU_TRACE`` and linked with ``runtime_c/src/mcu_trace.c``; the hooks in the
generated code (see ``runtime_c/include/mcu/trace.h``) then bracket every op. Each op yields one
:class:`TraceEvent`: its debug handle and cycles from the console line ``TRACE <handle> <cycles>`` and,
in QEMU, the exact instruction count that the plugin measured between the two hooks.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcu.device.console import parse_harness
from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES
from mcu.paths import cache_dir, kernel_source, runtime_dir
from mcu.plan.prefix import KIND as PREFIX_KIND
from mcu.device.flash import chip_for_family, flash_uf2

TRACE_DEFINE = "MCU_TRACE"
TRACE_SOURCE = "src/mcu_trace.c"
_TRACE_LINE = re.compile(r"^TRACE (\d+) (\d+)\s*$")


@dataclass(frozen=True)
class TraceEvent:
    handle: int  # the op's debug handle
    instructions: int | None  # exact guest instructions between the hooks (QEMU); None on hardware
    cycles: int  # DWT cycles between the hooks (0 in QEMU, which does not model DWT)
    # Core cycles between the hooks estimated by the simulator's timing model (QEMU; docs/cycles.md).
    estimated_cycles: int | None = None

    @property
    def cost(self) -> int:
        return self.instructions if self.instructions is not None else self.cycles


@dataclass
class TraceRun:
    board: str
    unit: str  # "instructions" (QEMU) or "cycles" (hardware)
    events: list[TraceEvent]  # the first inference's ops, in execution order
    inference_cost: int | None  # the traced firmware's whole first inference (between the bench markers)
    outputs_raw: list[np.ndarray]  # the first vector's outputs as the traced firmware printed them (memory order)
    passed: bool
    console: str

    def to_json(self) -> dict[str, Any]:
        return {"board": self.board, "unit": self.unit, "inference_cost": self.inference_cost,
                "events": [asdict(e) for e in self.events]}

    @classmethod
    def events_from_json(cls, d: dict[str, Any]) -> list[TraceEvent]:
        return [TraceEvent(**e) for e in d["events"]]


def build_variant(cm: Any, kind: str, defines: dict[str, Any], extra_sources: tuple[str, ...] = (),
                  out_dir: Path | None = None, stack_usage: bool = False) -> Any:
    """The model's firmware built with extra ``defines`` (and runtime sources) into ``out_dir`` (default:
    a cache folder per ``kind`` keyed by the sources and the defines): the tracer, the stack painter."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.toolchain import build_firmware

    defines = {**cm.library.defines, **defines}  # the model's kernel definitions (mcu/backends/optimized/specialise.py)
    files = cm.firmware_sources()
    if out_dir is None:
        flavour = "".join(f"{k}={v};" for k, v in sorted(defines.items())) + f"weights={cm.weights_placement};"
        digest = hashlib.sha256("".join(f"{k}\0{v}" for k, v in sorted(files.items())).encode()
                                + flavour.encode()).hexdigest()
        out_dir = cache_dir() / kind / cm.board.name / f"{cm.library.prefix}-{digest[:20]}"
    src_dir = Path(out_dir) / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = src_dir / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    rt = runtime_dir()
    sources = [src_dir / n for n in files if n.endswith(".c")]
    sources += [kernel_source(s) for s in cm.library.kernel_sources]
    sources += [rt / s for s in (*cm.library.runtime_sources, *extra_sources)]
    includes = [src_dir, rt / "include", *map(Path, cm.library.include_dirs)]
    return build_firmware(cm.board, sources, includes, Path(out_dir), defines=defines, stack_usage=stack_usage,
                          fast_weights=cm.fast_weight_symbols(), fast_objects=cm.fast_weight_objects())


def build_traced(cm: Any, out_dir: Path | None = None, defines: dict[str, Any] | None = None) -> Any:
    """The model's firmware with the event tracer compiled in (mcu.device.toolchain.Firmware); ``defines``: instead
    of ``MCU_TRACE`` alone (``mcu debug`` adds the output dump)."""
    defines = dict(defines) if defines is not None else {TRACE_DEFINE: None}
    return build_variant(cm, "firmware-trace", defines, (TRACE_SOURCE,), out_dir, stack_usage=True)


def parse_trace_lines(console: str) -> list[tuple[int, int]]:
    """(handle, cycles) of every TRACE line, in order."""
    found = []
    for line in console.splitlines():
        if m := _TRACE_LINE.match(line.strip("\r")):
            found.append((int(m.group(1)), int(m.group(2))))
    return found


def trace_events(console: str, instructions: list[int], ops_per_inference: int,
                 estimated_cycles: list[int] | None = None) -> list[TraceEvent]:
    """The first inference's events: console TRACE lines paired in order with the plugin's counts (and
    its cycle estimates, when the board's core has a timing model)."""
    lines = parse_trace_lines(console)
    if len(lines) < ops_per_inference:
        raise McuError(f"the profiling firmware reported {len(lines)} op events, expected {ops_per_inference} "
                       "per inference", hint="it may have stopped early; console tail:\n"
                       + "\n".join(console.strip().splitlines()[-8:]))
    if instructions and len(instructions) != len(lines):
        raise McuError(f"the instruction-count plugin measured {len(instructions)} op regions but the firmware "
                       f"printed {len(lines)} TRACE lines", hint="rebuild the QEMU plugin (ports/qemu/insn_count.c)")
    estimated = estimated_cycles if estimated_cycles and len(estimated_cycles) == len(lines) else None
    return [TraceEvent(handle=h, instructions=instructions[i] if instructions else None, cycles=c,
                       estimated_cycles=estimated[i] if estimated else None)
            for i, (h, c) in enumerate(lines[:ops_per_inference])]


def prefix_step_events(cm: Any) -> int:
    """The events the streamed prefixes of ``cm`` add to one inference: each one per step and one of its
    hooks' cost instead of its own."""
    return sum(len(op.attrs["prefix"].steps) for op in cm.graph.ops if op.kind == PREFIX_KIND)


def events_per_inference(cm: Any) -> int:
    """The events of one inference: one per op, a streamed prefix one per step and one of its hooks' cost
    (mcu/plan/prefix.py's TRACE_SHIFT)."""
    return len(cm.library.view.steps) + prefix_step_events(cm)


def _first_outputs(cm: Any, report: Any, exit_code: int | None, console: str) -> list[Any]:
    outputs = []
    for i, t in enumerate(cm.graph.outputs):
        if (0, i) not in report.outputs:
            raise McuError(f"the profiling firmware printed no output {i} (exit status {exit_code})",
                           hint=console.strip()[-1500:])
        outputs.append(report.output_array(0, i, NUMPY_DTYPES[t.dtype], t.numel))
    return outputs


def run_traced(cm: Any, timeout_s: float = 600.0, port: str | None = None, drive: Path | None = None,
               search_dirs: Any = None) -> TraceRun:
    """Build the profiling firmware and run it: on the board's simulator (exact instructions per op), or
    on a board flashed over USB (Pico 2, Pico: flashed in BOOTSEL mode, DWT/SysTick cycles per op read
    from the TRACE lines on its serial console; ``port``, ``drive`` as for ``mcu flash``)."""
    if cm.board.deploy_method == "uf2":
        return _run_traced_on_device(cm, timeout_s, port, drive, search_dirs)
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.qemu import run_qemu

    if cm.board.sim_kind != "qemu":
        raise McuError(f"board {cm.board.name} has no simulator to profile on",
                       hint="profile on a QEMU board (`mcu boards`) or on a Pico 2 / Pico over USB")
    fw = build_traced(cm)
    result = run_qemu(cm.board, fw.elf, timeout_s=timeout_s)
    report = parse_harness(result.console)
    events = trace_events(result.console, result.trace_instructions, events_per_inference(cm),
                          result.trace_cycles)
    return TraceRun(board=cm.board.name, unit="instructions", events=events,
                    inference_cost=result.instructions[0] if result.instructions else None,
                    outputs_raw=_first_outputs(cm, report, result.exit_code, result.console),
                    passed=bool(report.passed) and result.exit_code == 0, console=result.console)


def _run_traced_on_device(cm: Any, timeout_s: float, port: str | None, drive: Path | None,
                          search_dirs: Any) -> TraceRun:
    fw = build_traced(cm)
    flashed = flash_uf2(fw.uf2, drive=drive, port=port, timeout_s=timeout_s, search_dirs=search_dirs,
                        chip=chip_for_family(cm.board.uf2_family))
    result = flashed.console
    if result is None:  # flash_uf2 always reads the console here; a None would be a bug, not a user error
        raise McuError(f"no console was read from {cm.board.name}")
    events = trace_events(result.console, [], events_per_inference(cm))
    # The CYCLES line times the first inference with the tracer's hooks and prints in it.
    return TraceRun(board=cm.board.name, unit="cycles", events=events, inference_cost=result.report.cycles,
                    outputs_raw=_first_outputs(cm, result.report, result.firmware_exit, result.console),
                    passed=result.exit_code == 0, console=result.console)
