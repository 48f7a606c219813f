"""The generated C of a fused inverted-residual block (mcu/plan/fused.py): a loop over the block's output
rows that calls, per row, the kernels the unfused ops call, each through the backend that took it.

Each stage's call comes from its backend's emitter on row-sized copies of the op (:func:`mcu.plan.fused.row_ops`),
with C expressions for where the rows are: input rows of ``x``, the ring's rows, the depthwise's output row
(scratch), and the block's output row. The producer's parameters depend on how many input rows a row of
``e`` reads and on its top padding; the few distinct cases (first rows, middle, last rows) each get their
own static parameters. Program files make the same calls as one loop instruction (mcu/program/fused.py).
"""

from __future__ import annotations

from typing import Callable

from mcu.backends.calls import KernelCall, Refs
from mcu.emit.cvalues import c_type
from mcu.emit.kernels import call_block
from mcu.ir import Op, Tensor
from mcu.plan.fused import Block, row_ops, stage_scratch_bytes


def body(op: Op, tensor_ref: Callable[[Tensor], str], scratch: str) -> tuple[list[str], list[tuple[Op, KernelCall]]]:
    """The C statements of fused block ``op`` (``scratch``: a C expression of its planned scratch, a
    ``uint8_t *``) and the (row op, call) of every kernel call in them."""
    stages: list[Op] = op.attrs["stages"]
    b: Block = op.attrs["block"]
    x, out = stages[0].inputs[0], stages[-1].output
    ct = c_type(x.dtype)
    calls: list[tuple[Op, KernelCall]] = []

    def refs_for(row: Op, places: dict[int, str]) -> Refs:
        sub = stage_scratch_bytes(row)

        def ref(t: Tensor) -> str:
            return places[id(t)] if id(t) in places else tensor_ref(t)
        return Refs(ref, (f"(fused_scratch + {b.stage_scratch_offset})", sub) if sub else None)

    lines = [
        f"uint8_t *const fused_scratch = {scratch};",
        "uint8_t *const ring = fused_scratch;",
        f"uint8_t *const x = (uint8_t *){tensor_ref(x)};",
        f"uint8_t *const y = (uint8_t *){tensor_ref(out)};",
        f"for (int32_t oy = 0; oy < {b.out_h}; oy += {b.band}) {{",
        f"    const int32_t rows = {b.out_h} - oy < {b.band} ? {b.out_h} - oy : {b.band};",
        f"    const int32_t first = oy * {b.s} - {b.pad};",
        "    int32_t fresh = 0;",
    ]
    if b.keep:
        lines += [
            "    if (oy > 0) {",
            f"        mcu_rows_down(ring, ring + {b.band * b.s * b.e_row}, {b.keep * b.e_row});",
            f"        fresh = {b.keep};",
            "    }",
        ]
    lines += [
        f"    for (int32_t r = fresh; r < (rows - 1) * {b.s} + {b.k}; ++r) {{",
        "        const int32_t ey = first + r;",
        f"        uint8_t *const row = ring + r * {b.e_row};",
        f"        if (ey < 0 || ey >= {b.e_h}) {{",
        f"            memset(row, {b.zero_point}, {b.e_row});",
        "            continue;",
        "        }",
    ]
    # Rows of e grouped by (first input row offset, rows read, top padding): runs of equal cases.
    cases: list[tuple[int, int, tuple[int, int]]] = []  # (first ey, last ey, (rows, top))
    for ey in range(b.e_h):
        _, rows, top = b.producer_rows(ey)
        if cases and cases[-1][2] == (rows, top) and cases[-1][1] == ey - 1:
            cases[-1] = (cases[-1][0], ey, (rows, top))
        else:
            cases.append((ey, ey, (rows, top)))
    for i, (lo, hi, (rows, top)) in enumerate(cases):
        cond = "" if len(cases) == 1 else (f"if (ey <= {hi}) " if i < len(cases) - 1 else "")
        lead = "        " if i == 0 else "        else "
        producer = row_ops(stages, b, (rows, top))[0]
        start = f"(ey * {b.p_stride} - {b.p_pad} + {top})"
        places = {id(producer.inputs[0]): f"({ct} *)(x + {start} * {b.in_row})", id(producer.output): f"({ct} *)row"}
        sub, call = call_block(producer, refs_for(producer, places), "            ")
        calls.append((producer, call))
        lines.append(f"{lead}{cond}{{")
        lines += sub
        lines.append("        }")
    lines.append("    }")
    # The band's depthwise, projection and residual: full bands, and a shorter last one if any.
    sizes = sorted({rows for _, rows in b.bands()}, reverse=True)
    d_row = f"({ct} *)(fused_scratch + {b.d_row_offset})"
    y_row = f"({ct} *)(y + oy * {b.out_row})"
    for i, size in enumerate(sizes):
        indent = "    " if len(sizes) == 1 else "        "
        if len(sizes) > 1:
            lines.append(f"    {'if' if i == 0 else 'else if'} (rows == {size}) {{")
        ops = row_ops(stages, b, out_rows=size)
        dw = ops[1]
        proj = ops[2] if b.project else dw  # without a projection the window stage writes the block's rows
        to_scratch = b.project or b.shortcut_stride
        steps = [(dw, {id(dw.inputs[0]): f"({ct} *)ring", id(dw.output): d_row if to_scratch else y_row})]
        if b.project:
            steps.append((proj, {id(proj.inputs[0]): d_row, id(proj.output): y_row}))
        if b.shortcut_stride:  # the shortcut's band into scratch, then the add of both into the block's rows
            sc, add = ops[2], ops[3]
            sc_row = f"({ct} *)(fused_scratch + {b.sc_row_offset})"
            steps.append((sc, {id(sc.inputs[0]): f"({ct} *)(x + oy * {b.shortcut_stride * b.in_row})",
                               id(sc.output): sc_row}))
            steps.append((add, {id(dw.output): d_row, id(sc.output): sc_row, id(add.output): y_row}))
        for row, places in steps:
            sub, call = call_block(row, refs_for(row, places), indent)
            calls.append((row, call))
            lines += sub
        if b.residual and not b.shortcut_stride:
            add = ops[-1]
            x_row = next(t for t in add.inputs if t is not proj.output)
            places = {id(x_row): f"({ct} *)(x + oy * {b.in_row})", id(proj.output): y_row}
            sub, call = call_block(add, refs_for(add, places), indent)
            calls.append((add, call))
            lines += sub
        if len(sizes) > 1:
            lines.append("    }")
    lines.append("}")
    return lines, calls
