"""The op table: what later tools need to know about every lowered op that runs on the device.

One :class:`OpInfo` per emitted op, keyed by its debug handle (the op's index in the lowered graph, the
number the generated C passes to the event tracer). It is built from a compiled model, or loaded from a
compile record without the model (:mod:`mcu.devtools.record`), so a profile or a debug report can be
explained either way.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from mcu.emit.c_model import GeneratedLibrary
from mcu.ir import Graph, Op, QuantParams
from mcu.plan.fused import KIND as FUSED_KIND, Block
from mcu.plan.memory import MemoryPlan
from mcu.plan.prefix import INPUT, KIND as PREFIX_KIND, Prefix
from mcu.plan.planner import occupied_bytes_per_step

# Ops whose cost is dominated by multiply-accumulates: weight (operand 1) is [out, in/groups, kh, kw] or
# [out, in], so every output element takes prod(weight.shape[1:]) MACs.
_WEIGHTED = ("conv2d", "depthwise_conv2d", "linear", "conv1d", "conv_transpose2d")
_RECURRENT = ("lstm", "gru")  # inputs: x, W_ih (gates x input), W_hh (gates x hidden), ...


@dataclass(frozen=True)
class OpInfo:
    handle: int  # index in the lowered graph; the tracer's event id
    name: str  # the lowered op's name (the FX node it came from)
    kind: str  # lowered op kind (conv2d, depthwise_conv2d, ...)
    kernel: str  # the C function the generated code calls
    backend: str  # the lowering backend that chose the kernel ("portable" unless an op says otherwise)
    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    dtype: str  # of the first output
    macs: int  # multiply-accumulates (0 for ops that do none)
    source: str  # the user's source line, "model.py:12: `x = self.conv(x)`", or ""
    live_bytes: int  # arena bytes the buffers live while the op runs occupy (shared bytes once: <= the arena)
    quant: dict[str, Any] = field(default_factory=dict)  # output quantization: scale, zero_point (int8 ops)
    fused: dict[str, Any] | None = None  # a block run row by row: what its loop does (:func:`fused_loop`)
    prefix: dict[str, Any] | None = None  # a streamed prefix: its ops' calls and rings (:func:`prefix_steps`)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OpInfo:
        return cls(**d)


def op_macs(op: Op) -> int:
    if op.kind == FUSED_KIND:  # a block run row by row: its stages' MACs, none computed twice
        return sum(op_macs(stage) for stage in op.attrs["stages"])
    if op.kind == PREFIX_KIND:  # its ops band by band: their MACs, none computed twice
        return sum(op_macs(o) for o in op.attrs["prefix"].ops)
    if op.kind in _RECURRENT:
        # every step multiplies its input by W_ih and the state by W_hh (counted for a zero first state too)
        w_ih, w_hh = op.inputs[1:3]
        assert w_ih is not None and w_hh is not None
        steps = op.outputs[0].numel // w_hh.shape[1]
        return steps * (w_ih.numel + w_hh.numel)
    if op.kind == "lstm_final_cell":  # the layer's steps again, the i, f and g rows of both matrices
        w_ih, w_hh, seq = op.inputs[1], op.inputs[2], op.inputs[5]
        return seq.numel // w_hh.shape[1] * (w_ih.numel + w_hh.numel) * 3 // 4
    if op.kind not in _WEIGHTED or len(op.inputs) < 2:
        return 0
    weight = op.inputs[1].shape
    return math.prod(op.outputs[0].shape) * math.prod(weight[1:])


def fused_loop(block: Block, stages: list[Op]) -> dict[str, Any]:
    """What the loop of a fused block (mcu/emit/fused.py) does, counted by replaying it: its passes, the rows
    of the expanded tensor its producer computes (and how many of them a second time: none, as the ring
    keeps the rows the next pass reads again), the ring moves that keep them, the padding rows it fills,
    and its kernel calls against the ops' own when run whole."""
    computed: dict[int, int] = {}
    moves = padding = calls = 0
    for oy, rows in block.bands():
        fresh = 0
        if block.keep and oy > 0:
            moves += 1
            fresh = block.keep
        for r in range(fresh, block.window(rows)):
            ey = oy * block.s - block.pad + r
            if 0 <= ey < block.e_h:
                computed[ey] = computed.get(ey, 0) + 1
                calls += 1
            else:
                padding += 1
        calls += 1 + block.project + bool(block.shortcut_stride) + block.residual
    return {"band": block.band, "passes": len(block.bands()), "expanded_rows": block.e_h,
            "rows_computed": sum(computed.values()), "rows_recomputed": sum(n - 1 for n in computed.values()),
            "ring_moves": moves, "ring_move_bytes": block.keep * block.e_row, "padding_rows": padding,
            "padding_row_bytes": block.e_row, "calls": calls, "stages": [s.name for s in stages]}


def prefix_steps(p: Prefix) -> dict[str, Any]:
    """What a streamed prefix's schedule does: its steps, each op's calls and the most rows a call makes
    (its band), the streamed input's reader's, and each ring's rows and bytes."""
    ops = [{"name": o.name, "kind": o.kind, "calls": len(p.calls_of(i)), "band": p.band(i),
            "rows": o.output.shape[2]} for i, o in enumerate(p.ops)]
    reader = {"name": "input rows", "kind": "read", "calls": len(p.calls_of(INPUT)), "band": p.input_band,
              "rows": p.input.shape[2]} if p.stream else None
    return {"steps": len(p.steps), "stream": p.stream, "ops": ops, "reader": reader,
            "rings": [[r.tensor.name, r.rows, r.nbytes] for r in p.rings.values()]}


def live_bytes_per_step(memory: MemoryPlan, steps: int) -> list[int]:
    """Bytes of all arenas occupied at each step of the op order by the buffers live then (tensors and
    kernel scratch; planner.occupied_bytes_per_step: shared bytes once, never above the arenas)."""
    live = [0] * steps
    for arena in memory.arenas:
        for i, used in enumerate(occupied_bytes_per_step(arena.plan, steps)):
            live[i] += used
    return live


def _quant(q: QuantParams | None) -> dict[str, Any]:
    if q is None:
        return {}
    return {"scale": [float(s) for s in q.scale], "zero_point": [int(z) for z in q.zero_point], "axis": q.axis}


def _source(op: Op) -> str:
    # op.source reads " at model.py:12: `code`" (the error-message form) or "model.py:12: `code`".
    return op.source.strip().removeprefix("at ").strip()


def op_table(graph: Graph, memory: MemoryPlan, library: GeneratedLibrary) -> list[OpInfo]:
    """One entry per op the generated C runs (views that alias their input run nothing), in op order."""
    live = live_bytes_per_step(memory, len(graph.ops))
    rows = []
    for step in library.view.steps:
        op = graph.ops[step.index]
        rows.append(OpInfo(
            handle=step.index, name=op.name, kind=op.kind, kernel=step.call.function,
            backend=str(op.attrs.get("backend", "portable")),
            input_shapes=[list(t.shape) for t in op.inputs if not t.is_constant],
            output_shapes=[list(t.shape) for t in op.outputs], dtype=op.outputs[0].dtype,
            macs=op_macs(op), source=_source(op), live_bytes=live[step.index], quant=_quant(op.outputs[0].quant),
            fused=fused_loop(op.attrs["block"], op.attrs["stages"]) if op.kind == FUSED_KIND else None,
            prefix=prefix_steps(op.attrs["prefix"]) if op.kind == PREFIX_KIND else None,
        ))
    return rows
