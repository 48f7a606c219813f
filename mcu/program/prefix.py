"""A streamed prefix (mcu/plan/prefix.py) as program instructions: one ROWS instruction and its body.

The generated C of a prefix (mcu/emit/prefix.py) replays the planner's steps from a table of op indices,
each step making an op's next rows through the kernel the backend chose for the unfused op, on rows that
live in rings whose kept rows move to their start when the next rows would not fit. A program file holds
the same schedule as data the interpreter replays (runtime_c/interp/mcu_program_rows.c):

- the body: one kernel instruction per op and case of how its rows read their inputs (the first rows with
  top padding, the middle ones, the last ones cut short), each with its operands at row 0 of the tensor or
  ring it reads or writes, and the same kernel and parameters as the generated C's call;
- a table of int32 words (a constant tensor): the steps, each (op, rows); per op its height and the ring
  it writes; per ring its place in the rings, row bytes, capacity and the consumers whose windows decide
  which rows it keeps; per body instruction the op and rows it makes; per moving operand which ring (or
  whole tensor) it is in and its row ``y * s + c`` for a step's first row ``y``.

The loader replays the whole table once and checks every call where it runs. With a streamed input the
model's input is a STREAMED tensor of the method: in no arena, its rows read by the caller's callback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mcu.emit.kernels import SCRATCH, program_call
from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.plan.prefix import INPUT, Prefix, height, row_bytes, row_op, stage_scratch_bytes
from mcu.program.fused import Call, Place

# Words per entry of each part of the table (runtime_c/interp/mcu_program_rows.c).
OP_WORDS, RING_WORDS, CONSUMER_WORDS, BODY_WORDS, DESC_WORDS = 2, 5, 3, 6, 5


@dataclass
class RowsProgram:
    """What the writer needs of one prefix: the table, the rings' place, the body's calls and the params
    of the ROWS instruction (ops, rings, consumers, body, steps, descriptors)."""

    table: Tensor  # int32 words, a constant
    rings: tuple[Tensor, Place] | None  # the rings' bytes (an int8 arena tensor) and their place
    stream: Tensor | None  # the streamed input, or None
    body: list[Call]
    params: list[int]




def rows_program(op: Op, place: Callable[[Tensor], Place], scratch: tuple[int, int, int]) -> RowsProgram:
    """Prefix ``op`` for the program writer: ``place`` gives whole tensors' places, ``scratch`` (arena, offset,
    bytes) its planned scratch (the rings, then the row calls' own scratch)."""
    p: Prefix = op.attrs["prefix"]
    ops = p.ops
    sa, so, _ = scratch
    ring_index = {key: j for j, key in enumerate(p.rings)}
    rings = list(p.rings.values())

    def target(t: Tensor) -> Tensor:
        """Where ``t``'s rows are: its consumer's output rows when written into them (Prefix.into)."""
        return ops[p.into[id(t)]].output if id(t) in p.into else t

    def where(t: Tensor) -> tuple[int, Place, int]:
        """(ring index or -1, the place of row 0, row bytes) of the rows of ``t``."""
        u = target(t)
        if id(u) in p.rings:
            ring = p.rings[id(u)]
            return ring_index[id(u)], (sa, so + ring.offset), ring.row_bytes
        return -1, place(u), row_bytes(u)

    body: list[Call] = []
    bodies: list[list[int]] = []
    descs: list[list[int]] = []
    for i, o in enumerate(ops):
        for first, last, n, key in p.cases(i):
            row = row_op(p, i, key, n)
            moving: dict[int, tuple[int, Place, int, int, int]] = {}  # by id of a row tensor
            r, at, rb = where(o.output)
            moving[id(row.output)] = (r, at, rb, 1, 0)
            pairs = iter(key)
            for t, rt, w in zip(o.inputs, row.inputs, p.windows[i]):
                if w is None:
                    continue
                _, top = next(pairs)
                r, at, rb = where(t)
                moving[id(rt)] = (r, at, rb, w.s, top - w.pad)
            sub = stage_scratch_bytes(row)
            sub_scratch = (sa, so + p.stage_scratch_offset, sub) if sub else None
            call = program_call(row, lambda t: moving[id(t)][1], sub_scratch)
            if call is None:
                raise McuError(f"streamed prefix {op.name}: op {o.name} emits no call")
            places: list[Place | None] = []
            first_desc = len(descs)
            for k, operand in enumerate(call.operands):
                if operand is SCRATCH:
                    places.append(None if call.scratch is None else call.scratch[:2])
                elif isinstance(operand, Tensor) and id(operand) in moving:
                    r, at, rb, s, c = moving[id(operand)]
                    places.append(at)
                    descs.append([k, r, s, c, rb])
                else:
                    places.append(None)
            bodies.append([i, first, last, n, first_desc, len(descs) - first_desc])
            body.append(Call(len(body), call.function, tuple(call.params), tuple(call.operands), tuple(places),
                             0 if call.scratch is None else call.scratch[2]))

    reader = len(ops)
    x = p.input
    op_rows = [[height(o.output), where(o.output)[0]] for o in ops]
    op_rows.append([height(x), ring_index[id(x)]] if p.stream else [0, -1])
    consumers: list[list[int]] = []
    ring_rows: list[list[int]] = []
    for key, ring in p.rings.items():
        users = p.consumers.get(key, [])
        ring_rows.append([ring.offset, ring.row_bytes, ring.rows, len(consumers), len(users)])
        consumers += [[c, w.s, w.pad] for c, w in users]
    steps = [[reader if s == INPUT else s, n] for s, n in p.steps]
    words = [v for part in (steps, op_rows, ring_rows, consumers, bodies, descs) for entry in part for v in entry]
    table = Tensor(f"{op.name}_schedule", (len(words),), "int32", data=np.asarray(words, dtype=np.int32))
    rings_bytes = p.stage_scratch_offset
    rings_tensor = None if rings_bytes == 0 else (Tensor(f"{op.name}_rings", (rings_bytes,), "int8"), (sa, so))
    params = [len(ops), len(rings), len(consumers), len(body), len(steps), len(descs)]
    return RowsProgram(table, rings_tensor, x if p.stream else None, body, params)
