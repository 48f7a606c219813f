"""Stage 6: give every non-constant tensor and scratch buffer its place in the arena.

Lifetimes come from the execution order: model inputs are live from step 0,
model outputs to the last step, a view extends its base buffer's lifetime,
and a kernel's scratch buffer lives for its own step only.

Model state (buffers the methods mutate, ``Graph.state``) is not planned with the rest: it keeps its
value between calls and every method of a model shares it, so it sits at the start of the main arena,
one buffer after the other in the order of their names, and everything else is planned above it.
Methods with the same state therefore agree on where it is (the program writer checks that).
"""

from __future__ import annotations

from dataclasses import dataclass

from mcu.plan import fused, prefix
from mcu.plan.contracts import overlap_contracts, scratch_bytes as contract_scratch_bytes
from mcu.errors import McuError
from mcu.ir import Graph, Op, Tensor
from mcu.plan.planner import Buffer, MemoryPlanner, OverlapAllowance, Plan, PlanError, verify_plan
from mcu.plan.schedule import candidate_orders, with_order

ALIGNMENT = 4


@dataclass
class ArenaPlan:
    """One arena: the memory region it lives in and the placement of its buffers."""

    region: str
    plan: Plan
    tensor_offsets: dict[int, int]  # id(base tensor) -> offset
    scratch_offsets: dict[int, int]  # id(op) -> offset of its scratch buffer


@dataclass
class MemoryPlan:
    """Every buffer's (arena, offset). Most boards have one arena; see :func:`plan_memory` for more."""

    arenas: list[ArenaPlan]
    # The largest total size of the buffers live at one step of the op order, each counted whole. Not
    # a bound of the arena: where an overlap contract lets an op write its output over its input, the
    # arena goes below it.
    live_set: int
    # No placement of these buffers in this op order takes fewer bytes (arenas together): the live set
    # with each contracted input/output pair counted at the smallest extent its contract allows.
    lower_bound: int

    @property
    def plan(self) -> Plan:
        """The primary arena's plan (the only one on single-arena boards)."""
        return self.arenas[0].plan

    @property
    def arena_size(self) -> int:
        """Bytes of all arenas together."""
        return sum(a.plan.arena_size for a in self.arenas)

    @property
    def tensor_offsets(self) -> dict[int, int]:
        return {k: v for a in self.arenas for k, v in a.tensor_offsets.items()}

    @property
    def scratch_offsets(self) -> dict[int, int]:
        return {k: v for a in self.arenas for k, v in a.scratch_offsets.items()}

    def arena_index(self, tensor: Tensor) -> int:
        key = id(tensor.base())
        return next(i for i, a in enumerate(self.arenas) if key in a.tensor_offsets)

    def scratch_arena_index(self, op: Op) -> int:
        return next(i for i, a in enumerate(self.arenas) if id(op) in a.scratch_offsets)

    def offset(self, tensor: Tensor) -> int:
        """Offset of ``tensor`` within its arena."""
        return self.arenas[self.arena_index(tensor)].tensor_offsets[id(tensor.base())]


def scratch_bytes(op: Op) -> int:
    return max(int(op.attrs.get("scratch_bytes", 0)), contract_scratch_bytes(op))


def _lifetimes(graph: Graph) -> tuple[dict[int, int], dict[int, int]]:
    last_step = max(len(graph.ops) - 1, 0)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    streamed = prefix.streamed_inputs(graph)
    for step, t in [(0, t) for t in graph.inputs if id(t) not in streamed] + [(s, t) for s, op in enumerate(graph.ops)
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
    contracts = [(0, fused.overlap_intervals(op))] if op.kind == fused.KIND else \
        [(c.input_index, c.intervals) for c in overlap_contracts(op)]
    for index, intervals in contracts:
        if not intervals:
            continue
        src = op.inputs[index].base()
        if src is out or id(src) in seen or last.get(id(src)) != step or first.get(id(out)) != step:
            continue
        seen.add(id(src))
        result.append((src, out, intervals))
    return result


def derive_allowances(graph: Graph) -> list[OverlapAllowance]:
    """Every overlap the kernels' contracts allow in this graph, by buffer name."""
    first, last = _lifetimes(graph)
    return [OverlapAllowance(a.name, b.name, d) for step, op in enumerate(graph.ops)
            for a, b, d in _allowances(op, step, first, last, graph)]


Capacity = tuple[str, int]  # (region name, bytes the arena may take there)


def plan_memory(graph: Graph, use_overlaps: bool = True, reorder: bool = True,
                capacities: list[Capacity] | None = None) -> MemoryPlan:
    """Plan the arenas; with ``reorder``, also try other orders of independent branches (see
    :mod:`mcu.plan.schedule`) and keep the one with the smallest arena, rewriting ``graph.ops``.

    Several arenas (policy). ``capacities`` lists the board's RAM regions that may hold an arena,
    the main RAM first. Everything goes into one arena in the main RAM when it fits. Otherwise the
    largest buffers move, one at a time, to the next region until the main arena fits; each arena
    is planned on its own (a pair split across arenas simply cannot overlap). Small, hot buffers
    (kernel scratch, activations of the late, narrow layers) therefore stay in the main RAM.
    """
    if not reorder or len(graph.ops) < 3:
        return _plan_order(graph, use_overlaps, capacities)
    best: tuple[MemoryPlan, list[Op]] | None = None
    for ops in candidate_orders(graph):
        # An order's search only looks for arenas below the best order's so far: without that cutoff
        # each order that cannot win spent the search's whole budget (seconds on a small ViT).
        plan = _plan_order(with_order(graph, ops), use_overlaps, capacities,
                           beat=None if best is None else best[0].arena_size)
        if best is None or plan.arena_size < best[0].arena_size:
            best = (plan, ops)
    assert best is not None
    graph.ops = best[1]
    return best[0]


@dataclass
class _Item:
    kind: str  # "tensor" | "scratch"
    key: int  # id(base tensor) or id(op)
    name: str
    size: int
    first: int
    last: int


def _items(graph: Graph) -> tuple[list[_Item], dict[int, int], dict[int, int]]:
    first, last = _lifetimes(graph)
    bases: dict[int, Tensor] = {}
    streamed = prefix.streamed_inputs(graph)  # read a row at a time into the prefix's ring: not in the arena
    for t in [*graph.inputs, *(t for op in graph.ops for t in (*op.inputs, *op.outputs)), *graph.outputs]:
        if not t.is_constant and id(t) not in streamed:
            bases.setdefault(id(t.base()), t.base())
    items = [_Item("tensor", k, t.name, t.nbytes, first[k], last[k]) for k, t in bases.items()]
    # A fused block's scratch is mostly its ring of expanded rows: named so, in the plan and its drawing.
    items += [_Item("scratch", id(op), f"{op.name}_{op.attrs.get('scratch_name', 'scratch')}", scratch_bytes(op), s, s)
              for s, op in enumerate(graph.ops) if scratch_bytes(op)]
    return items, first, last


def _planner(graph: Graph, items: list[_Item], use_overlaps: bool, first: dict[int, int],
             last: dict[int, int]) -> MemoryPlanner:
    """A planner holding ``items`` and the overlap contracts between them."""
    planner = MemoryPlanner(alignment=ALIGNMENT)
    index: dict[int, int] = {}
    for it in items:
        i = planner.add_buffer(it.name, it.size, it.first, it.last)
        if it.kind == "tensor":
            index[it.key] = i
    if use_overlaps:
        for step, op in enumerate(graph.ops):
            for src, out, intervals in _allowances(op, step, first, last, graph):
                if id(src) in index and id(out) in index:  # both in this arena
                    planner.add_overlap(index[id(src)], index[id(out)], intervals)
    return planner


def _plan_arena(graph: Graph, items: list[_Item], region: str, use_overlaps: bool, first: dict[int, int],
                last: dict[int, int], beat: int | None = None) -> ArenaPlan:
    plan = _planner(graph, items, use_overlaps, first, last).plan(beat)
    try:
        # Re-derive the contracts from the graph rather than trusting the planner's copy.
        verify_plan(plan, ALIGNMENT, derive_allowances(graph) if use_overlaps else [])
    except PlanError as exc:  # a planner bug, never the user's fault: fail the build loudly
        raise McuError(f"internal error: memory plan failed verification: {exc}") from None
    offsets = dict(zip((id(it) for it in items), plan.offsets))
    return ArenaPlan(region, plan,
                     {it.key: offsets[id(it)] for it in items if it.kind == "tensor"},
                     {it.key: offsets[id(it)] for it in items if it.kind == "scratch"})


def state_layout(graph: Graph) -> list[tuple[str, Tensor, int]]:
    """(buffer name, tensor, offset) of each state buffer at the start of the main arena."""
    layout, offset = [], 0
    for name in sorted(graph.state):
        t = graph.state[name]
        layout.append((name, t, offset))
        offset += -(-t.nbytes // ALIGNMENT) * ALIGNMENT
    return layout


def _with_state(arena: ArenaPlan, graph: Graph, first: dict[int, int], last: dict[int, int],
                use_overlaps: bool) -> ArenaPlan:
    """The arena with the state region [0, S) in front: every other buffer moves up by S."""
    layout = state_layout(graph)
    if not layout:
        return arena
    size = layout[-1][2] + -(-layout[-1][1].nbytes // ALIGNMENT) * ALIGNMENT
    end = max(len(graph.ops) - 1, 0)
    buffers = [Buffer(t.name, t.nbytes, 0, end) for _, t, _ in layout] + list(arena.plan.buffers)
    offsets = [off for _, _, off in layout] + [off + size for off in arena.plan.offsets]
    plan = Plan(buffers, offsets, arena.plan.arena_size + size, arena.plan.lower_bound + size, arena.plan.method,
                list(arena.plan.overlaps))
    try:
        verify_plan(plan, ALIGNMENT, derive_allowances(graph) if use_overlaps else [])
    except PlanError as exc:
        raise McuError(f"internal error: memory plan with state failed verification: {exc}") from None
    return ArenaPlan(arena.region, plan, {**{id(t): off for _, t, off in layout},
                                          **{k: v + size for k, v in arena.tensor_offsets.items()}},
                     {k: v + size for k, v in arena.scratch_offsets.items()})


def _plan_order(graph: Graph, use_overlaps: bool, capacities: list[Capacity] | None,
                beat: int | None = None) -> MemoryPlan:
    """``beat``: the arenas (state included) of a plan already found; see MemoryPlanner.plan."""
    state_ids = {id(t) for t in graph.state.values()}
    items, first, last = _items(graph)
    items = [it for it in items if not (it.kind == "tensor" and it.key in state_ids)]
    state_bytes = sum(-(-t.nbytes // ALIGNMENT) * ALIGNMENT for t in graph.state.values())
    if capacities and state_bytes:  # the main arena holds the state too
        capacities = [(capacities[0][0], max(capacities[0][1] - state_bytes, 0)), *capacities[1:]]
    plan = _plan_items(graph, items, first, last, use_overlaps, capacities,
                       None if beat is None else beat - state_bytes)
    plan.arenas[0] = _with_state(plan.arenas[0], graph, first, last, use_overlaps)
    return MemoryPlan(plan.arenas, plan.live_set + state_bytes, plan.lower_bound + state_bytes)


def _plan_items(graph: Graph, items: list[_Item], first: dict[int, int], last: dict[int, int], use_overlaps: bool,
                capacities: list[Capacity] | None, beat: int | None = None) -> MemoryPlan:
    bound = _planner(graph, items, use_overlaps, first, last)  # as if in one arena: bounds the sum of arenas
    live_set, lower_bound = bound.plan_lower_bound(), bound.overlap_lower_bound()
    regions = capacities or [("ram", 1 << 62)]
    main = _plan_arena(graph, items, regions[0][0], use_overlaps, first, last, beat)
    if main.plan.arena_size <= regions[0][1] or len(regions) == 1:
        return MemoryPlan([main], live_set, lower_bound)
    # Overflow: move the largest buffers out of the main arena, region by region.
    stay = sorted(items, key=lambda it: it.size)
    arenas: list[ArenaPlan] = []
    for region, capacity in regions[1:]:
        moved: list[_Item] = []
        while stay and main.plan.arena_size > regions[0][1]:
            moved.append(stay.pop())
            main = _plan_arena(graph, stay, regions[0][0], use_overlaps, first, last)
        if moved:
            arenas.append(_plan_arena(graph, moved, region, use_overlaps, first, last))
        if main.plan.arena_size <= regions[0][1]:
            break
    return MemoryPlan([main, *arenas], live_set, lower_bound)
