"""The firmware's arena guards around custom kernels, read back: a ``GUARD`` console line of a test build
(codegen/model.c.j2, ``MCU_GUARD_WRITES``) becomes an error naming the op, its kernel, the tensor whose
bytes it wrote and the byte offset from its output."""

from __future__ import annotations

import re
from typing import Any

from mcu.emit.c_model import GUARD_BYTES
from mcu.errors import McuError

_GUARD = re.compile(r"^GUARD (\d+) (\d+) (\d+) (\d+)\s*$", re.M)
HINT = ("a kernel writes numel elements of its output (mcu_custom_params), nothing else; the test firmware "
        "guards the arena around each custom kernel's output")


def side_of(rel: int, nbytes: int) -> str:
    """Where byte ``rel`` (from an output's start) lies against that output of ``nbytes``."""
    if rel < 0:
        return f"{-rel} B before its start"
    return "just after its end" if rel == nbytes else f"{rel - nbytes} B after its end"


def _owner(cm: Any, step: int, arena: int, offset: int) -> str:
    """Whose bytes ``offset`` of arena ``arena`` are at op ``step``: a live tensor, free bytes, or outside."""
    plan = cm.memory.arenas[arena].plan
    size = plan.arena_size
    if offset < 0:
        return f"{-offset} B before the start of arena {arena}"
    if offset >= size:
        return f"{offset - size} B after the end of arena {arena} ({size} B)"
    for b, off in zip(plan.buffers, plan.offsets):
        if off <= offset < off + b.size and b.first_use <= step <= b.last_use:
            return f"in tensor {b.name} (live at this op, byte {offset - off} of {b.size})"
    return f"in free bytes of arena {arena}"


def raise_on_guard(cm: Any, console: str, where: str | None = None) -> None:
    """Raise for the first GUARD line of a test firmware's console (or the host child's output), if any;
    ``where`` it ran (default: the board)."""
    m = _GUARD.search(console)
    if m is None:
        return
    step, arena, first, last = (int(g) for g in m.groups())
    first -= GUARD_BYTES
    last -= GUARD_BYTES
    op = cm.graph.ops[step]
    reg = op.attrs.get("custom")
    kernel = reg.kernel(op.output.dtype).function if reg is not None else op.kind
    out = op.output
    start = cm.memory.offset(out)
    rel = first - start
    side = side_of(rel, out.nbytes)
    source = f" ({op.source})" if op.source else ""
    name = reg.name if reg is not None else op.kind
    raise McuError(f"custom op {name} ({op.name}){source}: its C kernel {kernel} writes outside its output on "
                   f"{where or cm.board.name}: the first changed byte is at byte offset {rel} of its output {out.name}, which "
                   f"is {out.nbytes} B long ({side}), {_owner(cm, step, arena, first)}; the changed bytes span "
                   f"{last - first + 1} B of the {2 * GUARD_BYTES} B guarded",
                   hint=HINT)
