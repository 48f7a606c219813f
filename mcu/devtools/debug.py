"""``mcu debug``: compare what the device computes with the Python integer reference, op by op.

A debug firmware (``MCU_TRACE`` and ``MCU_TRACE_DUMP``) prints every op's output after it runs
(``TENSOR <handle> <hex words>``, in memory order). The integer reference (:mod:`mcu.reference_interp`)
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
from mcu.ir import NUMPY_DTYPES, Graph, Tensor
from mcu.reference_interp import FLOAT_MOVES, INT8_OPS

DUMP_DEFINE = "MCU_TRACE_DUMP"
PERTURB_DEFINE = "MCU_TRACE_TEST_PERTURB"  # test-only: corrupt one op's output (runtime_c/src/mcu_trace.c)
_TENSOR = re.compile(r"^TENSOR (\d+)((?: [0-9a-f]{8})*)\s*$")


@dataclass(frozen=True)
class OpDiff:
    handle: int
    name: str
    kernel: str
    source: str
    elements: int
    differing: int  # elements where the device and the reference differ
    max_abs_diff: float


@dataclass
class DebugReport:
    title: str
    rows: list[OpDiff]  # in execution order

    @property
    def first_departure(self) -> OpDiff | None:
        return next((r for r in self.rows if r.differing), None)

    def table(self) -> str:
        head = f"{'handle':>6}  {'op':<20} {'kernel':<32} {'elements':>9} {'differ':>7} {'max|d|':>7}  source"
        lines = [f"debug: {self.title}, device vs integer reference, first test vector", head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r.handle:>6}  {r.name[:20]:<20} {r.kernel[:32]:<32} {r.elements:>9,} {r.differing:>7,} "
                         f"{r.max_abs_diff:>7g}  {r.source}")
        first = self.first_departure
        lines.append("-" * len(head))
        lines.append("every op equals the reference" if first is None else
                     f"first departure: op {first.handle} {first.name} ({first.kernel}), {first.differing} of "
                     f"{first.elements} elements differ, at {first.source or 'an unknown source line'}")
        return "\n".join(lines)


def reference_per_op(graph: Graph, inputs: list[np.ndarray]) -> dict[int, np.ndarray]:
    """Every op's output (flat, memory order, the op's dtype) from the integer reference, by debug handle."""
    env: dict[int, np.ndarray] = {}
    for t, x in zip(graph.inputs, inputs):
        env[id(t.base())] = np.asarray(x).reshape(-1)

    def value(t: Tensor) -> np.ndarray:
        return np.asarray(t.data).reshape(-1) if t.is_constant else env[id(t.base())]

    outputs: dict[int, np.ndarray] = {}
    for handle, op in enumerate(graph.ops):
        if op.attrs.get("alias"):
            continue
        table = INT8_OPS if op.output.dtype == "int8" else FLOAT_MOVES
        if op.kind not in table:
            raise McuError(f"the integer reference cannot predict {op.kind} {op.name} bit for bit"
                           + (f" ({op.source.strip()})" if op.source else ""),
                           hint="mcu debug compares int8 models whose every op the reference computes")
        args = [value(t) for t in op.inputs if not t.is_constant or op.kind == "concat"]
        env[id(op.output.base())] = np.asarray(table[op.kind](op, args)).reshape(-1)
        outputs[handle] = env[id(op.output.base())]
    return outputs


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


def debug_model(cm: Any, perturb_handle: int | None = None, timeout_s: float = 600.0) -> DebugReport:
    """Build and run the debug firmware; ``perturb_handle`` (tests only) corrupts that op's output."""
    from mcu.devtools.ops import op_table
    from mcu.devtools.trace import TRACE_DEFINE, build_traced
    from mcu.sim.qemu import run_qemu

    if cm.board.sim_kind != "qemu":
        raise McuError(f"board {cm.board.name} has no simulator to debug on", hint="pick a QEMU board (`mcu boards`)")
    if not cm.reference_is_exact:
        raise McuError(f"{cm.spec.name} ({cm.quantize}) has ops the integer reference does not predict bit for bit",
                       hint="mcu debug compares int8 models; use --quantize int8")
    defines: dict[str, Any] = {TRACE_DEFINE: None, DUMP_DEFINE: None}
    if perturb_handle is not None:
        defines[PERTURB_DEFINE] = perturb_handle
    fw = build_traced(cm, defines=defines)
    result = run_qemu(cm.board, fw.elf, timeout_s=timeout_s)
    ops = op_table(cm.graph, cm.memory, cm.library)
    handles = [op.handle for op in ops]
    device = device_per_op(result.console, cm.graph, handles)
    reference = reference_per_op(cm.graph, cm.encode_inputs(cm.spec.test_inputs[0]))
    rows = []
    for op in ops:
        d, r = device[op.handle], reference[op.handle]
        diff = np.abs(d.astype(np.float64) - r.astype(np.float64))
        rows.append(OpDiff(handle=op.handle, name=op.name, kernel=op.kernel, source=op.source, elements=int(r.size),
                           differing=int(np.count_nonzero(diff)), max_abs_diff=float(diff.max(initial=0.0))))
    return DebugReport(title=f"{cm.spec.name} {cm.quantize} on {cm.board.name}", rows=rows)
