"""Static memory planning: place every buffer at a fixed offset in one arena.

Problem. Each buffer has a size and a lifetime ``[first_use, last_use]`` in
execution steps. Two buffers whose lifetimes intersect must not share bytes.
The arena size is the highest end offset. No placement can beat the *live-set
lower bound*: the largest total size of the buffers live at one step.

Algorithm.
1. Greedy placement for several buffer orders (largest first, longest-lived
   first, earliest first, most conflicts first): each buffer goes to the
   lowest aligned offset where it overlaps no placed buffer whose lifetime
   intersects its own. The best result is kept.
2. When the best greedy arena is above the lower bound and the graph is small
   enough, a depth-first branch-and-bound search tries, buffer by buffer
   (largest first), every offset that packs it against an already placed
   conflicting buffer (or at zero), pruning any partial placement whose arena
   is already no better than the best found; it stops at the lower bound or
   after a node budget, so planning stays fast on large graphs.

The planner only proposes; :func:`verify_plan` independently checks a plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first_use: int
    last_use: int

    def lives_with(self, other: Buffer) -> bool:
        return self.first_use <= other.last_use and other.first_use <= self.last_use


@dataclass
class Plan:
    buffers: list[Buffer]
    offsets: list[int]
    arena_size: int
    lower_bound: int
    method: str = "greedy"

    def offset_of(self, name: str) -> int:
        for b, off in zip(self.buffers, self.offsets):
            if b.name == name:
                return off
        raise KeyError(name)


class PlanError(Exception):
    """A placement violates lifetimes, alignment or the arena bounds."""


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def live_set_lower_bound(buffers: list[Buffer]) -> int:
    """Largest total size of the buffers live at any one step."""
    if not buffers:
        return 0
    steps = sorted({b.first_use for b in buffers})
    return max(sum(b.size for b in buffers if b.first_use <= s <= b.last_use) for s in steps)


@dataclass
class MemoryPlanner:
    alignment: int = 4
    search_budget: int = 200_000
    _buffers: list[Buffer] = field(default_factory=list)

    def add_buffer(self, name: str, size: int, first_use: int, last_use: int) -> int:
        """Register a buffer; sizes are rounded up to the alignment. Returns its index."""
        if size < 0 or first_use > last_use:
            raise ValueError(f"bad buffer {name}: size {size}, lifetime [{first_use}, {last_use}]")
        self._buffers.append(Buffer(name, _align(max(size, 1), self.alignment), first_use, last_use))
        return len(self._buffers) - 1

    def plan(self) -> Plan:
        bufs = self._buffers
        bound = live_set_lower_bound(bufs)
        conflicts = [[j for j, o in enumerate(bufs) if j != i and b.lives_with(o)] for i, b in enumerate(bufs)]
        orders = {
            "largest-first": sorted(range(len(bufs)), key=lambda i: (-bufs[i].size, bufs[i].first_use)),
            "longest-first": sorted(range(len(bufs)),
                                    key=lambda i: (-(bufs[i].last_use - bufs[i].first_use), -bufs[i].size)),
            "earliest-first": sorted(range(len(bufs)), key=lambda i: (bufs[i].first_use, -bufs[i].size)),
            "most-conflicts": sorted(range(len(bufs)),
                                     key=lambda i: (-sum(bufs[j].size for j in conflicts[i]), -bufs[i].size)),
        }
        best: tuple[int, list[int], str] | None = None
        for method, order in orders.items():
            offsets = self._greedy(order, conflicts)
            size = max((o + bufs[i].size for i, o in enumerate(offsets)), default=0)
            if best is None or size < best[0]:
                best = (size, offsets, method)
        assert best is not None or not bufs
        if best is None:
            return Plan([], [], 0, 0, "empty")
        if best[0] > bound:
            found = self._search(orders["largest-first"], conflicts, best[0], bound)
            if found is not None:
                best = (found[0], found[1], "search")
        return Plan(list(bufs), best[1], best[0], bound, best[2])

    def _lowest_fit(self, i: int, offsets: list[int | None], conflicts: list[list[int]]) -> int:
        bufs = self._buffers
        busy = sorted((offsets[j], offsets[j] + bufs[j].size) for j in conflicts[i] if offsets[j] is not None)
        candidate = 0
        for start, end in busy:
            if candidate + bufs[i].size <= start:
                break
            candidate = max(candidate, _align(end, self.alignment))
        return candidate

    def _greedy(self, order: list[int], conflicts: list[list[int]]) -> list[int]:
        offsets: list[int | None] = [None] * len(self._buffers)
        for i in order:
            offsets[i] = self._lowest_fit(i, offsets, conflicts)
        return [o for o in offsets if o is not None]

    def _search(self, order: list[int], conflicts: list[list[int]], best_size: int,
                bound: int) -> tuple[int, list[int]] | None:
        bufs = self._buffers
        offsets: list[int | None] = [None] * len(bufs)
        best: list[tuple[int, list[int]] | None] = [None]
        limit = [best_size]
        nodes = [0]

        def fits(i: int, off: int) -> bool:
            end = off + bufs[i].size
            return all(offsets[j] is None or end <= offsets[j] or offsets[j] + bufs[j].size <= off
                       for j in conflicts[i])

        def dfs(k: int, current: int) -> bool:
            nodes[0] += 1
            if nodes[0] > self.search_budget:
                return True
            if k == len(order):
                limit[0] = current
                best[0] = (current, [o for o in offsets if o is not None])
                return current <= bound
            i = order[k]
            cands = {0} | {_align(offsets[j] + bufs[j].size, self.alignment)
                           for j in conflicts[i] if offsets[j] is not None}
            for off in sorted(cands):
                end = max(current, off + bufs[i].size)
                if end >= limit[0] or not fits(i, off):
                    continue
                offsets[i] = off
                if dfs(k + 1, end):
                    return True
                offsets[i] = None
            return False

        dfs(0, 0)
        return best[0]


def verify_plan(plan: Plan, alignment: int = 4) -> None:
    """Check a plan independently of the planner; raise :class:`PlanError` on the first fault."""
    bufs, offs = plan.buffers, plan.offsets
    if len(bufs) != len(offs):
        raise PlanError("plan has a different number of offsets than buffers")
    for b, off in zip(bufs, offs):
        if off < 0 or off % alignment:
            raise PlanError(f"buffer {b.name} at offset {off} is not {alignment}-byte aligned")
        if off + b.size > plan.arena_size:
            raise PlanError(f"buffer {b.name} [{off}, {off + b.size}) ends beyond the arena ({plan.arena_size} B)")
    events = sorted(range(len(bufs)), key=lambda i: offs[i])
    for a_idx, i in enumerate(events):
        for j in events[a_idx + 1:]:
            if offs[j] >= offs[i] + bufs[i].size:
                break
            if bufs[i].lives_with(bufs[j]):
                raise PlanError(
                    f"buffers {bufs[i].name} [{offs[i]}, {offs[i] + bufs[i].size}) and {bufs[j].name} "
                    f"[{offs[j]}, {offs[j] + bufs[j].size}) overlap while both live "
                    f"(steps {bufs[i].first_use}-{bufs[i].last_use} and {bufs[j].first_use}-{bufs[j].last_use})")
