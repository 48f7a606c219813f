"""Stage 6: give every non-constant tensor and scratch buffer its place in the arena.

Lifetimes come from the execution order: model inputs are live from step 0,
model outputs to the last step, a view extends its base buffer's lifetime,
and a kernel's scratch buffer lives for its own step only.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcu.contracts import overlap_contracts, scratch_bytes as contract_scratch_bytes
from mcu.errors import McuError
from mcu.ir import Graph, Op, Tensor
from mcu.planner import MemoryPlanner, OverlapAllowance, Plan, PlanError, verify_plan

ALIGNMENT = 4


@dataclass
class MemoryPlan:
    plan: Plan
    tensor_offsets: dict[int, int]  # id(base tensor) -> offset
    scratch_offsets: dict[int, int]  # id(op) -> offset of its scratch buffer

    @property
    def arena_size(self) -> int:
        return self.plan.arena_size

    @property
    def lower_bound(self) -> int:
        return self.plan.lower_bound

    def offset(self, tensor: Tensor) -> int:
        base = tensor.base()
        return self.tensor_offsets[id(base)]


def scratch_bytes(op: Op) -> int:
    return max(int(op.attrs.get("scratch_bytes", 0)), contract_scratch_bytes(op))


def _lifetimes(graph: Graph) -> tuple[dict[int, int], dict[int, int]]:
    last_step = max(len(graph.ops) - 1, 0)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for step, t in [(0, t) for t in graph.inputs] + [(s, t) for s, op in enumerate(graph.ops)
                                                      for t in (*op.inputs, *op.outputs)] + \
            [(last_step, t) for t in graph.outputs]:
        if t.is_constant:
            continue
        b = id(t.base())
        first[b] = min(first.get(b, step), step)
        last[b] = max(last.get(b, step), step)
    return first, last


def _allowances(op: Op, step: int, first: dict[int, int], last: dict[int, int],
                graph: Graph) -> list[tuple[Tensor, Tensor, tuple]]:
    """(input base, output base, allowed deltas) for each contract of ``op`` whose input dies here."""
    result = []
    out = op.output.base()
    seen: set[int] = set()
    for c in overlap_contracts(op):
        src = op.inputs[c.input_index].base()
        if src is out or id(src) in seen or last.get(id(src)) != step or first.get(id(out)) != step:
            continue
        seen.add(id(src))
        result.append((src, out, c.intervals))
    return result


def derive_allowances(graph: Graph) -> list[OverlapAllowance]:
    """Every overlap the kernels' contracts allow in this graph, by buffer name."""
    first, last = _lifetimes(graph)
    return [OverlapAllowance(a.name, b.name, d) for step, op in enumerate(graph.ops)
            for a, b, d in _allowances(op, step, first, last, graph)]


def plan_memory(graph: Graph, use_overlaps: bool = True, reorder: bool = True) -> MemoryPlan:
    """Plan the arena; with ``reorder``, also try other orders of independent branches (see
    :mod:`mcu.schedule`) and keep the one with the smallest arena, rewriting ``graph.ops``."""
    if not reorder or len(graph.ops) < 3:
        return _plan_order(graph, use_overlaps)
    from mcu.schedule import candidate_orders, with_order

    best: tuple[MemoryPlan, list[Op]] | None = None
    for ops in candidate_orders(graph):
        plan = _plan_order(with_order(graph, ops), use_overlaps)
        if best is None or plan.arena_size < best[0].arena_size:
            best = (plan, ops)
    assert best is not None
    graph.ops = best[1]
    return best[0]


def _plan_order(graph: Graph, use_overlaps: bool) -> MemoryPlan:
    last_step = max(len(graph.ops) - 1, 0)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    bases: dict[int, Tensor] = {}

    def touch(t: Tensor, step: int) -> None:
        if t.is_constant:
            return
        b = t.base()
        bases[id(b)] = b
        first[id(b)] = min(first.get(id(b), step), step)
        last[id(b)] = max(last.get(id(b), step), step)

    for t in graph.inputs:
        touch(t, 0)
    for step, op in enumerate(graph.ops):
        for t in (*op.inputs, *op.outputs):
            touch(t, step)
    for t in graph.outputs:
        touch(t, last_step)

    planner = MemoryPlanner(alignment=ALIGNMENT)
    keys: list[tuple[str, int]] = []
    index: dict[int, int] = {}
    for key, tensor in bases.items():
        index[key] = planner.add_buffer(tensor.name, tensor.nbytes, first[key], last[key])
        keys.append(("tensor", key))
    if use_overlaps:
        for step, op in enumerate(graph.ops):
            for allowance in _allowances(op, step, first, last, graph):
                planner.add_overlap(index[id(allowance[0])], index[id(allowance[1])], allowance[2])
    for step, op in enumerate(graph.ops):
        if scratch_bytes(op):
            planner.add_buffer(f"{op.name}_scratch", scratch_bytes(op), step, step)
            keys.append(("scratch", id(op)))
    plan = planner.plan()
    try:
        # Re-derive the contracts from the graph rather than trusting the planner's copy.
        verify_plan(plan, ALIGNMENT, derive_allowances(graph) if use_overlaps else [])
    except PlanError as exc:  # a planner bug, never the user's fault: fail the build loudly
        raise McuError(f"internal error: memory plan failed verification: {exc}") from None
    tensor_offsets = {k: off for (kind, k), off in zip(keys, plan.offsets) if kind == "tensor"}
    scratch_offsets = {k: off for (kind, k), off in zip(keys, plan.offsets) if kind == "scratch"}
    return MemoryPlan(plan, tensor_offsets, scratch_offsets)
