"""Checks on a model's persistent state (a KV cache) in the lowered graph."""

from __future__ import annotations

from mcu.ir import Graph


def reads_whole_state_into_a_copy(graph: Graph) -> list[str]:
    """Ops that take a state tensor (or a view of it) and write a buffer of the state's size that is not
    the state itself: the full copy a functional KV-cache update would make (slicing or index_copy_
    decompose to a whole-cache where)."""
    states = {id(t) for t in graph.state.values()}
    bad = []
    for op in graph.ops:
        if op.attrs.get("alias"):
            continue
        reads = [t for t in op.inputs if id(t.base()) in states]
        if reads and id(op.output.base()) not in states and op.kind in {"where", "permute", "layout", "concat",
                                                                       "slice", "pad", "copy", "index_put"}:
            if op.output.nbytes >= min(t.nbytes for t in reads):
                bad.append(f"{op.kind} {op.name}")
    return bad
