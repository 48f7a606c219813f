"""A fused block (mcu/plan/fused.py) as program instructions: one LOOP over the block's bands of output rows.

The generated C of a fused block (mcu/emit/fused.py) is a loop over bands that moves the ring's kept rows
down, computes the band's fresh ring rows (the producer, or a fill with the depthwise's input zero point
where a row lies in the vertical padding), then runs the window stage, the projection and the residual on
the band. This module lays out the same calls, with the same kernels and parameters, for the program-file
interpreter: every pass is listed call by call (:func:`band_calls`), then each call's position in the pass
(its slot: the move, ring row r, the window stage...) is followed across passes and its runs of passes
with the same kernel and parameters whose operands move by a constant number of bytes a pass become one
instruction of the loop's body, with its ``iterations`` [first, end) and its operands' ``strides``
(:func:`band_loop`). A block is therefore a few instructions per distinct case (the first and last rows,
a shorter last band), whatever its height; the interpreter checks every pass's operands at load.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from mcu.emit.kernels import SCRATCH, program_call
from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.plan.fused import Block, row_ops, stage_scratch_bytes
from mcu.program import format as fmt

Place = tuple[int, int]  # (arena, byte offset)

LOOP, FILL, MOVE = fmt.KERNEL_LOOP, fmt.KERNEL_FILL, fmt.KERNEL_MOVE
STEP_NAMES = {LOOP: "loop", FILL: "fill", MOVE: "move", fmt.KERNEL_ROWS: "rows"}


@dataclass(frozen=True)
class Call:
    """One call of a pass: a kernel's (``function`` and ``params`` as program_call gives them) or the
    interpreter's own fill and move; ``operands`` in order, each a tensor (constants, and arena tensors
    whose place is in ``places``), None (absent) or SCRATCH."""

    slot: int
    function: str | int  # a kernel function, or FILL / MOVE
    params: tuple[int | float, ...]
    operands: tuple[object, ...]
    places: tuple[Place | None, ...]  # per operand: where it is this pass (None: a constant or absent)
    scratch_bytes: int = 0  # the SCRATCH operand's size


@dataclass
class Step:
    """An instruction of the loop's body: ``call`` at the passes [first, end), its operands moving by
    ``strides`` bytes a pass."""

    call: Call
    first: int
    end: int
    strides: list[int] = field(default_factory=list)


def _row_tensor(t: Tensor, nbytes: int, name: str) -> Tensor:
    """An int8 (or the block's dtype) tensor of ``nbytes`` bytes: a span of ring rows moved or filled."""
    elem = 4 if t.dtype == "float32" else 1
    return replace(t, name=name, shape=(nbytes // elem,), dim_order=(0,), data=None, quant=None, alias_of=None,
                   is_input=False, is_output=False)


def band_calls(op: Op, place: Callable[[Tensor], Place], scratch: tuple[int, int, int]) -> list[list[Call]]:
    """Every pass of fused block ``op`` call by call, as the generated C makes them (mcu/emit/fused.py):
    ``place`` gives the block's input and output tensors' places, ``scratch`` (arena, offset, bytes) its
    planned scratch (the ring, the window stage's rows, the stages' own scratch)."""
    stages: list[Op] = op.attrs["stages"]
    b: Block = op.attrs["block"]
    x, out = stages[0].inputs[0], stages[-1].output
    (xa, xo), (ya, yo) = place(x), place(out)
    sa, so, _ = scratch
    ring_span = _row_tensor(x, b.keep * b.e_row, f"{op.name}_kept") if b.keep else None
    fill_row = _row_tensor(x, b.e_row, f"{op.name}_pad_row")
    producers: dict[tuple[int, int], Op] = {}
    bands: dict[int, list[Op]] = {}
    slot_ring, slot_band = 1, 1 + b.window(b.band)

    def kernel(slot: int, row: Op, where: dict[int, Place]) -> Call:
        sub = stage_scratch_bytes(row)
        sub_scratch = (sa, so + b.stage_scratch_offset, sub) if sub else None
        call = program_call(row, lambda t: where[id(t)], sub_scratch)
        if call is None:
            raise McuError(f"fused block {op.name}: stage {row.name} emits no call")
        places: list[Place | None] = []
        for o in call.operands:
            if o is SCRATCH:
                places.append(None if call.scratch is None else call.scratch[:2])
            elif isinstance(o, Tensor) and not o.is_constant:
                places.append(where[id(o)])
            else:
                places.append(None)
        return Call(slot, call.function, tuple(call.params), tuple(call.operands), tuple(places),
                    0 if call.scratch is None else call.scratch[2])

    passes: list[list[Call]] = []
    for oy, rows in b.bands():
        calls: list[Call] = []
        first = oy * b.s - b.pad
        fresh = 0
        if b.keep and oy > 0:
            calls.append(Call(0, MOVE, (), (ring_span, ring_span), ((sa, so + b.band * b.s * b.e_row), (sa, so))))
            fresh = b.keep
        for r in range(fresh, b.window(rows)):
            ey = first + r
            row_at = (sa, so + r * b.e_row)
            if ey < 0 or ey >= b.e_h:
                calls.append(Call(slot_ring + r, FILL, (b.zero_point,), (fill_row,), (row_at,)))
                continue
            _, n_rows, top = b.producer_rows(ey)
            producer = producers.get((n_rows, top))
            if producer is None:
                producer = producers[(n_rows, top)] = row_ops(stages, b, (n_rows, top))[0]
            start = ey * b.p_stride - b.p_pad + top
            calls.append(kernel(slot_ring + r, producer, {id(producer.inputs[0]): (xa, xo + start * b.in_row),
                                                          id(producer.output): row_at}))
        ops = bands.get(rows)
        if ops is None:
            ops = bands[rows] = row_ops(stages, b, out_rows=rows)
        d_row = (sa, so + b.d_row_offset)
        y_row = (ya, yo + oy * b.out_row)
        dw = ops[1]
        to_scratch = b.project or b.shortcut_stride
        calls.append(kernel(slot_band, dw, {id(dw.inputs[0]): (sa, so), id(dw.output): d_row if to_scratch else y_row}))
        proj = dw
        if b.project:
            proj = ops[2]
            calls.append(kernel(slot_band + 1, proj, {id(proj.inputs[0]): d_row, id(proj.output): y_row}))
        if b.shortcut_stride:
            sc, add = ops[2], ops[3]
            sc_row = (sa, so + b.sc_row_offset)
            calls.append(kernel(slot_band + 2, sc, {id(sc.inputs[0]): (xa, xo + oy * b.shortcut_stride * b.in_row),
                                                    id(sc.output): sc_row}))
            calls.append(kernel(slot_band + 3, add, {id(dw.output): d_row, id(sc.output): sc_row,
                                                     id(add.output): y_row}))
        elif b.residual:
            add = ops[-1]
            x_row = next(t for t in add.inputs if t is not proj.output)
            calls.append(kernel(slot_band + 3, add, {id(x_row): (xa, xo + oy * b.in_row), id(proj.output): y_row}))
        passes.append(calls)
    return passes


def _same(a: Call, b: Call) -> bool:
    """The same instruction but for where its arena operands are."""
    return a.slot == b.slot and a.function == b.function and a.params == b.params \
        and a.scratch_bytes == b.scratch_bytes \
        and len(a.operands) == len(b.operands) and all(x is y for x, y in zip(a.operands, b.operands)) \
        and all((p is None) == (q is None) and (p is None or p[0] == q[0]) for p, q in zip(a.places, b.places))


def _delta(a: Call, b: Call) -> list[int]:
    return [0 if p is None or q is None else q[1] - p[1] for p, q in zip(a.places, b.places)]


def band_loop(passes: list[list[Call]]) -> list[Step]:
    """The loop's body for ``passes``: per slot, runs of consecutive passes with the same call whose operands
    move by constant strides, in the order a pass runs its slots (each slot has at most one call a pass)."""
    by_slot: dict[int, list[tuple[int, Call]]] = {}
    for i, calls in enumerate(passes):
        for c in calls:
            by_slot.setdefault(c.slot, []).append((i, c))
    steps: list[Step] = []
    for slot in sorted(by_slot):
        run: Step | None = None
        for i, c in by_slot[slot]:
            if run is not None and run.end == i and _same(run.call, c):
                last = run.call if run.end - run.first == 1 else None
                delta = _delta(run.call, c)
                if last is not None or [d * (run.end - run.first) for d in run.strides] == delta:
                    if last is not None:
                        run.strides = delta
                    run.end = i + 1
                    continue
            run = Step(c, i, i + 1, [0] * len(c.operands))
            steps.append(run)
    return steps
