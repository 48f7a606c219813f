"""``mcu debug``: compare what the device computes with the Python integer reference, op by op.

A debug firmware (``MCU_TRACE`` and ``MCU_TRACE_DUMP``) prints every op's output after it runs
(``TENSOR <handle> <hex words>``, in memory order). The integer reference (:mod:`mcu.reference.interp`)
runs the same lowered graph on the same first test vector and keeps every op's output; both are aligned
by debug handle and compared element by element. The first op whose output differs is named with its
source line: every op after it may differ only because its input did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES, Graph, PrecisionChoice, Tensor
from mcu.layouts import from_memory_order, to_memory_order
from mcu.plan.fused import KIND as FUSED_KIND
from mcu.reference.encoding import dequantize_s8_f32
from mcu.reference.interp import FLOAT_MOVES, INT16_OPS, INT8_OPS
from mcu.quantize import modes
from mcu.devtools.trace import build_traced, TRACE_DEFINE

DUMP_DEFINE = "MCU_TRACE_DUMP"
PERTURB_DEFINE = "MCU_TRACE_TEST_PERTURB"  # test-only: corrupt one op's output (runtime_c/src/mcu_trace.c)
_TENSOR = re.compile(r"^TENSOR (\d+)((?: [0-9a-f]{8})*)\s*$")


SQNR_JUMP_DB = 6.0  # one bit of resolution lost from an op's inputs to its output
# An fp32 island against eager fp32 of the float model: its int8 inputs carry the quantization error of
# everything before it, so the bound is a share of its largest value (a wrong kernel or a misplaced tensor
# is off by far more); fp32 moves the reference computes (dequantize, layout) differ only by rounding.
ISLAND_TOLERANCE = 0.1
FLOAT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class OpDiff:
    handle: int
    name: str
    kernel: str
    source: str
    elements: int
    differing: int  # elements where the device and the reference differ
    max_abs_diff: float
    sqnr_db: float | None = None  # int8 reference (dequantized) against eager fp32; None: no fp32 counterpart
    max_abs_error: float | None = None  # of the int8 reference against fp32, in real units
    inputs: tuple[int, ...] = ()  # debug handles of the ops that produce this op's inputs (through views)
    island: bool = False  # an fp32 island op: checked against eager fp32 within ISLAND_TOLERANCE, not bit for bit


@dataclass
class DebugReport:
    title: str
    rows: list[OpDiff]  # in execution order
    precision: PrecisionChoice | None = None  # --quantize mixed: each layer's weight precision

    @property
    def first_departure(self) -> OpDiff | None:
        return next((r for r in self.rows if r.differing), None)

    @property
    def error_jump(self) -> tuple[OpDiff, float] | None:
        """The op whose SQNR falls furthest below that of its inputs (the worst measured input: the op listed
        before it may sit on another branch), when the fall is at least :data:`SQNR_JUMP_DB` (where
        quantization error grows), with the fall in dB."""
        measured = {r.handle: r.sqnr_db for r in self.rows if r.sqnr_db is not None and np.isfinite(r.sqnr_db)}
        falls = []
        for r in self.rows:
            before = [measured[h] for h in r.inputs if h in measured]
            if r.handle in measured and before:
                falls.append((r, min(before) - measured[r.handle]))
        worst = max(falls, key=lambda f: f[1], default=None)
        return worst if worst is not None and worst[1] >= SQNR_JUMP_DB else None

    def table(self) -> str:
        head = (f"{'handle':>6}  {'op':<20} {'kernel':<32} {'elements':>9} {'differ':>7} {'max|d|':>7} "
                f"{'SQNR dB':>8} {'max|err|':>9}  source")
        lines = [f"debug: {self.title}, first test vector: device vs integer reference (differ, max|d|, in "
                 "integer steps of each op's dtype); integer reference vs eager fp32 (SQNR, max|err|)", head,
                 "-" * len(head)]
        for r in self.rows:
            sqnr = f"{r.sqnr_db:8.1f}" if r.sqnr_db is not None else f"{'-':>8}"
            err = f"{r.max_abs_error:9.4f}" if r.max_abs_error is not None else f"{'-':>9}"
            lines.append(f"{r.handle:>5}{'*' if r.island else ' '}  {r.name[:20]:<20} {r.kernel[:32]:<32} "
                         f"{r.elements:>9,} {r.differing:>7,} "
                         f"{r.max_abs_diff:>7g} {sqnr} {err}  {r.source}")
        first = self.first_departure
        lines.append("-" * len(head))
        lines.append("every op equals the reference" if first is None else
                     f"first departure: op {first.handle} {first.name} ({first.kernel}), {first.differing} of "
                     f"{first.elements} elements differ, at {first.source or 'an unknown source line'}")
        jump = self.error_jump
        if jump is not None:
            r, fall = jump
            lines.append(f"quantization error jumps at op {r.handle} {r.name}: SQNR {fall:.1f} dB below its "
                         f"inputs' ({r.sqnr_db:.1f} dB), at {r.source or 'an unknown source line'}")
        islands = [r for r in self.rows if r.island]
        if islands:
            lines.append(f"fp32 island ops (marked *): {len(islands)}, each compared with eager fp32 within "
                         f"{100 * ISLAND_TOLERANCE:g}% of its largest value; the int8 ops after them read the "
                         "device's island outputs and are compared bit for bit")
        if self.precision is not None:
            lines += self.precision.lines()
        return "\n".join(lines)


def producers(graph: Graph) -> dict[int, tuple[int, ...]]:
    """Per debug handle, the handles of the ops whose outputs it reads (a view's reader reads its base)."""
    made: dict[int, int] = {}
    found: dict[int, tuple[int, ...]] = {}
    for handle, op in enumerate(graph.ops):
        if op.attrs.get("alias"):
            continue
        found[handle] = tuple(dict.fromkeys(made[id(t.base())] for t in op.inputs if id(t.base()) in made))
        made[id(op.output.base())] = handle
    return found


def reference_per_op(graph: Graph, inputs: list[np.ndarray],
                     device: dict[int, np.ndarray] | None = None) -> tuple[dict[int, np.ndarray], set[int]]:
    """Every op's output (flat, memory order, the op's dtype) from the integer reference, by debug handle, and
    the handles of the fp32 islands: ops it cannot predict bit for bit, whose ``device`` outputs it carries
    on with (so the int8 ops after an island stay comparable bit for bit)."""
    islands: set[int] = set()
    env: dict[int, np.ndarray] = {}
    for t, x in zip(graph.inputs, inputs):
        env[id(t.base())] = np.asarray(x).reshape(-1)

    def value(t: Tensor) -> np.ndarray:
        return np.asarray(t.data).reshape(-1) if t.is_constant else env[id(t.base())]

    outputs: dict[int, np.ndarray] = {}
    for handle, op in enumerate(graph.ops):
        if op.attrs.get("alias"):
            continue
        if op.kind == FUSED_KIND and op.output.dtype == "int8":  # a block run row by row: its stages in turn
            for stage in op.attrs["stages"]:
                stage_args = [value(t) for t in stage.inputs if not t.is_constant]
                env[id(stage.output.base())] = np.asarray(INT8_OPS[stage.kind](stage, stage_args)).reshape(-1)
            outputs[handle] = env[id(op.output.base())]
            continue
        # w8a16's int16 ops are integer ops the reference computes as well (Reference.run's tables)
        table = {"int8": INT8_OPS, "int16": INT16_OPS}.get(op.output.dtype, FLOAT_MOVES)
        if op.kind not in table and op.output.dtype == "float32" and device is not None and handle in device:
            islands.add(handle)
            env[id(op.output.base())] = device[handle]
            outputs[handle] = device[handle]
            continue
        if op.kind not in table:
            raise McuError(f"the integer reference cannot predict {op.kind} {op.name} bit for bit"
                           + (f" ({op.source.strip()})" if op.source else ""),
                           hint="mcu debug compares integer models whose every op the reference computes")
        args = [value(t) for t in op.inputs if not t.is_constant or op.kind == "concat"]
        env[id(op.output.base())] = np.asarray(table[op.kind](op, args)).reshape(-1)
        outputs[handle] = env[id(op.output.base())]
    return outputs, islands


def device_per_op(console: str, graph: Graph, handles: list[int]) -> dict[int, np.ndarray]:
    """The first inference's TENSOR lines, decoded in each op's dtype."""
    found: dict[int, np.ndarray] = {}
    for line in console.splitlines():
        m = _TENSOR.match(line.strip("\r"))
        if m is None:
            continue
        handle = int(m.group(1))
        if handle in found:
            if len(found) == len(handles):
                break  # the next vector begins
            continue
        t = graph.ops[handle].outputs[0]
        raw = b"".join(int(w, 16).to_bytes(4, "little") for w in m.group(2).split())
        found[handle] = np.frombuffer(raw[: t.nbytes], dtype=NUMPY_DTYPES[t.dtype]).copy()
    missing = [h for h in handles if h not in found]
    if missing:
        raise McuError(f"the debug firmware printed no output for ops {missing}",
                       hint="it may have stopped early; console tail:\n" + "\n".join(console.splitlines()[-5:]))
    return found


# Float nodes that int8 lowering folds into the op before them (batch norm, its getitem, fused activations).
_FOLDED = ("_native_batch_norm_legit_no_training", "getitem", "relu", "hardtanh", "clamp", "relu6")


def fp32_per_op(cm: Any, inputs: tuple) -> dict[int, np.ndarray]:
    """Eager fp32 value (logical shape) of every lowered op that has a node of the same name in the float
    program, following the chain of nodes the lowering folded into it (batch norm, activations)."""
    # lazy: keeps torch out of this module's import
    import torch

    # lazy: keeps torch out of this module's import
    from mcu.capture.export import capture
    # lazy: keeps torch out of this module's import
    from mcu.capture.edge import to_edge

    ep = to_edge(capture(cm.spec.model, cm.spec.example_inputs))
    gm = ep.module()
    values: dict[str, Any] = {}

    class _Keep(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            values[n.name] = out
            return out

    with torch.no_grad():
        _Keep(gm).run(*inputs)
    nodes = {n.name: n for n in gm.graph.nodes}
    lowered_names = {op.name for op in cm.graph.ops}
    found: dict[int, np.ndarray] = {}
    for handle, op in enumerate(cm.graph.ops):
        node = nodes.get(op.name)
        if node is None or op.attrs.get("alias"):
            continue
        while True:
            users = list(node.users)
            if len(users) != 1 or users[0].name in lowered_names or users[0].op != "call_function":
                break
            nxt = users[0]
            kind = getattr(nxt.target, "__name__", str(nxt.target)).split(".")[0]
            if kind not in _FOLDED:
                break
            node = nxt
        value = values[node.name]
        if isinstance(value, (tuple, list)):
            value = value[0]
        if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(op.outputs[0].shape):
            found[handle] = value.detach().float().numpy()
    return found


def _sqnr(signal: np.ndarray, approx: np.ndarray) -> tuple[float, float]:
    noise = signal.astype(np.float64) - approx.astype(np.float64)
    power, noise_power = float(np.sum(signal.astype(np.float64) ** 2)), float(np.sum(noise ** 2))
    sqnr = float("inf") if noise_power == 0.0 else 10.0 * np.log10(max(power, 1e-30) / noise_power)
    return sqnr, float(np.max(np.abs(noise), initial=0.0))


def debug_model(cm: Any, perturb_handle: int | None = None, timeout_s: float = 600.0) -> DebugReport:
    """Build and run the debug firmware; ``perturb_handle`` (tests only) corrupts that op's output."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.devtools.ops import op_table
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.qemu import run_qemu

    if cm.board.sim_kind != "qemu":
        raise McuError(f"board {cm.board.name} has no simulator to debug on", hint="pick a QEMU board (`mcu boards`)")
    if modes.is_float(cm.quantize) or cm.delegated:
        raise McuError(f"{cm.spec.name} ({cm.quantize}{', delegated' if cm.delegated else ''}) has no integer "
                       "reference to compare with", hint="mcu debug compares integer programs (int8, w4a8, w8a16, mixed) of "
                       "our own kernels; use --quantize int8 or w8a16 (and no --backend delegate)")
    # lazy: keeps jinja2 out of this module's import
    from mcu.emit.c_model import GUARD_DEFINE
    from mcu.device.guards import raise_on_guard
    # lazy: keeps jinja2 out of this module's import

    defines: dict[str, Any] = {TRACE_DEFINE: None, DUMP_DEFINE: None}
    if cm.library.view.guarded:
        defines[GUARD_DEFINE] = None
    if perturb_handle is not None:
        defines[PERTURB_DEFINE] = perturb_handle
    fw = build_traced(cm, defines=defines)
    result = run_qemu(cm.board, fw.elf, timeout_s=timeout_s)
    raise_on_guard(cm, result.console)
    ops = op_table(cm.graph, cm.memory, cm.library)
    handles = [op.handle for op in ops]
    device = device_per_op(result.console, cm.graph, handles)
    reference, islands = reference_per_op(cm.graph, cm.encode_inputs(cm.spec.test_inputs[0]), device)
    floats = fp32_per_op(cm, tuple(cm.spec.test_inputs[0]))
    feeds = producers(cm.graph)
    rows = []
    for op in ops:
        d, r = device[op.handle], reference[op.handle]
        t = cm.graph.ops[op.handle].outputs[0]
        fp32 = to_memory_order(floats[op.handle], t).reshape(-1) if op.handle in floats else None
        if op.handle in islands:  # its check is eager fp32, within the tolerance
            r = np.zeros_like(d) if fp32 is None else fp32.astype(np.float64)
        diff = np.abs(d.astype(np.float64) - r.astype(np.float64))
        tolerance = 0.0
        if t.dtype == "float32":
            tolerance = (ISLAND_TOLERANCE if op.handle in islands else FLOAT_TOLERANCE) * float(np.max(np.abs(r),
                                                                                                      initial=0.0))
        if op.handle in islands and fp32 is None:
            diff = np.zeros_like(diff)  # nothing to compare it with: its readers are still checked
        sqnr = err = None
        if op.handle in floats and t.quant is not None and t.quant.per_tensor:
            real = (dequantize_s8_f32(r.astype(np.int8), scale=t.quant.scale[0], zero_point=t.quant.zero_point[0])
                    if t.dtype == "int8" else (r.astype(np.float64) - t.quant.zero_point[0]) * t.quant.scale[0])
            sqnr, err = _sqnr(floats[op.handle], from_memory_order(real, t))
        elif op.handle in floats and t.dtype == "float32":
            sqnr, err = _sqnr(floats[op.handle], from_memory_order(d.astype(np.float64), t))
        rows.append(OpDiff(handle=op.handle, name=op.name, kernel=op.kernel, source=op.source, elements=int(r.size),
                           differing=int(np.count_nonzero(diff > tolerance)), max_abs_diff=float(diff.max(initial=0.0)),
                           sqnr_db=sqnr, max_abs_error=err, inputs=feeds.get(op.handle, ()),
                           island=op.handle in islands))
    return DebugReport(title=f"{cm.spec.name} {cm.quantize} on {cm.board.name}", rows=rows,
                       precision=cm.graph.precision)
