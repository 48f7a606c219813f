"""The generated C of a streamed prefix (mcu/plan/prefix.py): the planner's schedule of band calls replayed
from a table of (op, rows), each band made by the kernel the backend chose for the unfused op.

Each op's call comes from its backend's emitter on a band-sized copy of the op
(:func:`mcu.plan.prefix.row_op`), one per case of how its bands read their inputs (first bands with top
padding, middle bands, last bands cut short); a ring's rows are found from its first held row (``base``),
which moves when the next band does not fit and its producer makes room for it.
"""

from __future__ import annotations

from typing import Callable

from mcu.backends.calls import KernelCall, Refs
from mcu.emit.cvalues import c_type
from mcu.emit.kernels import call_block
from mcu.ir import Op, Tensor
from mcu.plan.prefix import INPUT, TRACE_HOOKS, TRACE_SHIFT, Prefix, height, row_bytes, row_op, stage_scratch_bytes

READER = "mcu_read_input_rows"  # the C names of the streamed input's reader and its source (codegen/model.c.j2)
READER_CONTEXT = "input_source"


def body(op: Op, tensor_ref: Callable[[Tensor], str], scratch: str,
         handle: int = 0) -> tuple[list[str], list[tuple[Op, KernelCall]]]:
    """The C statements of prefix ``op`` (``scratch``: a C expression of its planned scratch, a ``uint8_t *``)
    and the (row op, call) of every kernel call in them. A streamed input is read through ``READER``
    (``mcu_status READER(const mcu_input_source *, int32_t first_row, int32_t rows, T *rows_out)``) from
    ``READER_CONTEXT``. A profiling build traces each step as an event of op ``handle`` (TRACE_SHIFT); the
    hooks vanish from a normal build."""
    p: Prefix = op.attrs["prefix"]
    ops = p.ops
    calls: list[tuple[Op, KernelCall]] = []
    ring_index = {key: j for j, key in enumerate(p.rings)}
    reader = len(ops)  # the table's index of the streamed input's rows
    table = [reader if s == INPUT else s for s, _ in p.steps]
    counts = [n for _, n in p.steps]
    width = "uint8_t" if reader < 256 else "uint16_t"
    count_width = "uint8_t" if max(counts) < 256 else "uint16_t"
    lines = [
        "uint8_t *const rings = " + scratch + ";",
        f"int32_t next[{len(ops) + 1}] = {{0}};",
        f"int32_t base[{max(len(p.rings), 1)}] = {{0}};",
        "(void)rings; /* unused when every tensor of the prefix is written into its consumer's rows */",
        "(void)base;",
        f"static const {width} steps[{len(table)}] = {{{', '.join(str(s) for s in table)}}};",
        f"static const {count_width} counts[{len(table)}] = {{{', '.join(str(n) for n in counts)}}};",
        "{",
        f"    MCU_TRACE_OP_BEGIN({handle | TRACE_HOOKS << TRACE_SHIFT}u);",
        f"    MCU_TRACE_OP_END({handle | TRACE_HOOKS << TRACE_SHIFT}u);",
        "}",
        f"for (int32_t i = 0; i < {len(table)}; ++i) {{",
        f"    MCU_TRACE_OP_BEGIN({handle}u | ((uint32_t)steps[i] + 1u) << {TRACE_SHIFT});",
        "    const int32_t y = next[steps[i]];",
        "    const int32_t n = counts[i];",
        "    next[steps[i]] = y + n;",
        "    switch (steps[i]) {",
    ]

    def ring_ptr(t: Tensor, row: str) -> str:
        ring = p.rings[id(t)]
        return f"({c_type(t.dtype)} *)(rings + {ring.offset} + (size_t)({row} - base[{ring_index[id(t)]}]) * {ring.row_bytes}u)"

    def make_room(t: Tensor) -> list[str]:
        ring = p.rings[id(t)]
        j = ring_index[id(t)]
        rb = ring.row_bytes
        room = [f"        if (y + n - base[{j}] > {ring.rows}) {{", "            int32_t low = y;"]
        for c, w in p.consumers[id(t)]:
            room += [f"            if (next[{c}] < {height(ops[c].output)}) {{",
                     f"                const int32_t need = next[{c}] * {w.s} - {w.pad};",
                     "                low = need < 0 ? 0 : (need < low ? need : low);",
                     "            }"]
        room += [f"            mcu_rows_down(rings + {ring.offset}, rings + {ring.offset} + (size_t)(low - base[{j}]) * {rb}u, "
                 f"(size_t)(y - low) * {rb}u);",
                 f"            base[{j}] = low;",
                 "        }"]
        return room

    if p.stream:
        x = p.input
        lines += [f"    case {reader}: {{"] + make_room(x) + [
            f"        MCU_CHECK({READER}({READER_CONTEXT}, y, n, {ring_ptr(x, 'y')}));",
            "        break;",
            "    }",
        ]
    def row_ptr(t: Tensor, row: str) -> str:
        """Where row ``row`` of ``t`` is: its ring, the row its consumer writes (Prefix.into), or a whole tensor."""
        if id(t) in p.into:
            target = ops[p.into[id(t)]].output
            return f"({c_type(t.dtype)} *){row_ptr(target, row)}"
        if id(t) in p.rings:
            return ring_ptr(t, row)
        return f"({c_type(t.dtype)} *)((uint8_t *){tensor_ref(t)} + (size_t)({row}) * {row_bytes(t)}u)"

    for i, o in enumerate(ops):
        lines.append(f"    case {i}: {{")
        target = ops[p.into[id(o.output)]].output if id(o.output) in p.into else o.output
        if id(target) in p.rings:
            lines += make_room(target)
        out_ptr = row_ptr(o.output, "y")
        cases = p.cases(i)
        for c, (_, last, rows, key) in enumerate(cases):
            row = row_op(p, i, key, rows)
            places = {id(row.output): out_ptr}
            pairs = iter(key)
            for t, rt, w in zip(o.inputs, row.inputs, p.windows[i]):
                if w is None:
                    continue
                _, top = next(pairs)
                first = f"(y * {w.s} - {w.pad} + {top})"
                places[id(rt)] = row_ptr(t, first)
            sub = stage_scratch_bytes(row)

            def ref(t: Tensor, places: dict[int, str] = places) -> str:
                return places[id(t)] if id(t) in places else tensor_ref(t)
            refs = Refs(ref, (f"(rings + {p.stage_scratch_offset})", sub) if sub else None)
            sub_lines, call = call_block(row, refs, "            ")
            calls.append((row, call))
            cond = "" if c == len(cases) - 1 else f"if (y <= {last}) "
            lines.append(f"        {'' if c == 0 else 'else '}{cond}{{")
            lines += sub_lines
            lines.append("        }")
        lines += ["        break;", "    }"]
    lines += ["    default:", "        break;", "    }",
              f"    MCU_TRACE_OP_END({handle}u | ((uint32_t)steps[i] + 1u) << {TRACE_SHIFT});", "}"]
    return lines, calls
