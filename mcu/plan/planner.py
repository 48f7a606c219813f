"""Static memory planning: place every buffer at a fixed offset in one arena.

Problem. Each buffer has a size and a lifetime ``[first_use, last_use]`` in
execution steps. Two buffers whose lifetimes intersect must not share bytes.
The arena size is the highest end offset. No placement can beat the *live-set
lower bound*: the largest total size of the buffers live at one step.

Overlap contracts. Some kernels may write their output over the input they
are consuming (see :mod:`mcu.plan.contracts`). Such a pair, whose lifetimes meet
only at that op, is registered with :meth:`MemoryPlanner.add_overlap` and may
then share bytes as long as ``offset(output) - offset(input) <= max_delta``.
This is how a plan goes below the live-set bound.

Algorithm.
1. Greedy placement for several buffer orders (largest first, longest-lived
   first, earliest first, most conflicts first): each buffer goes to the
   lowest aligned offset where it overlaps no placed buffer whose lifetime
   intersects its own, except as an overlap contract allows. Candidate
   offsets are zero, the ends of placed conflicting buffers, and the extreme
   offsets each contract allows. The best result is kept.
2. When the best greedy arena is above the lower bound and the graph is small
   enough, a depth-first branch-and-bound search tries, buffer by buffer
   (largest first), every offset that packs it against an already placed
   conflicting buffer (or at zero), pruning any partial placement whose arena
   is already no better than the best found; it stops at the lower bound or
   after a node budget, so planning stays fast on large graphs.

The planner only proposes; :func:`verify_plan` independently checks a plan.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first_use: int
    last_use: int

    def lives_with(self, other: Buffer) -> bool:
        return self.first_use <= other.last_use and other.first_use <= self.last_use


Interval = tuple["int | None", "int | None"]


def _allows(intervals: tuple[Interval, ...], delta: int) -> bool:
    return any((lo is None or delta >= lo) and (hi is None or delta <= hi) for lo, hi in intervals)


@dataclass(frozen=True)
class OverlapAllowance:
    """Buffer ``output`` may start ``delta`` bytes after buffer ``input`` for any delta in ``intervals``."""

    input: str
    output: str
    intervals: tuple[Interval, ...]


@dataclass
class Plan:
    buffers: list[Buffer]
    offsets: list[int]
    arena_size: int
    lower_bound: int  # the live-set bound: a bound of the arena only where no overlap contract applies
    method: str = "greedy"
    overlaps: list[OverlapAllowance] = field(default_factory=list)

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
    return max(_live_bytes(buffers).values())


def _live_bytes(buffers: list[Buffer]) -> dict[int, int]:
    """Total size of the buffers live at each step where one begins (the only steps where the total can
    grow), by one sweep over begin and end events rather than a scan of every buffer per step."""
    delta: dict[int, int] = {}
    for b in buffers:
        delta[b.first_use] = delta.get(b.first_use, 0) + b.size
        delta[b.last_use + 1] = delta.get(b.last_use + 1, 0) - b.size
    starts = {b.first_use for b in buffers}
    live, total = {}, 0
    for step in sorted(delta):
        total += delta[step]
        if step in starts:
            live[step] = total
    return live


def _co_live(buffers: list[Buffer]) -> list[list[int]]:
    """For each buffer, the others live at some same step, in index order (vectorised: thousands of
    buffers in an unrolled recurrent model)."""
    first = np.array([b.first_use for b in buffers], dtype=np.int64)
    last = np.array([b.last_use for b in buffers], dtype=np.int64)
    out = []
    for i in range(len(buffers)):
        hit = (first <= last[i]) & (first[i] <= last)
        hit[i] = False
        out.append(np.flatnonzero(hit).tolist())
    return out


def occupied_bytes_per_step(plan: Plan, steps: int) -> list[int]:
    """Bytes of the arena that the buffers live at each step occupy: a byte two of them share (an
    output written over its input under an overlap contract) counts once, so no step exceeds the
    arena, where summing their sizes (the live set) can."""
    spans: list[list[tuple[int, int]]] = [[] for _ in range(steps)]
    for b, off in zip(plan.buffers, plan.offsets):
        for s in range(max(b.first_use, 0), min(b.last_use, steps - 1) + 1):
            spans[s].append((off, off + b.size))
    used = []
    for step in spans:
        total, end = 0, 0
        for lo, hi in sorted(step):
            if hi > end:
                total += hi - max(lo, end)
                end = hi
        used.append(total)
    return used


def _align_down(value: int, alignment: int) -> int:
    return value // alignment * alignment


def _pair_ok(off_in: int, size_in: int, off_out: int, size_out: int, intervals: tuple[Interval, ...]) -> bool:
    """Whether an input/output pair may sit at these offsets (disjoint, or within its contract)."""
    if off_out + size_out <= off_in or off_in + size_in <= off_out:
        return True
    return _allows(intervals, off_out - off_in)


def _tightest_union(si: int, so: int, intervals: tuple[Interval, ...]) -> int:
    """The smallest extent of input [0, si) and output [d, d + so) over allowed (or disjoint) d."""
    best = si + so
    for lo, hi in intervals:
        points = {p for p in (lo, hi, 0, si - so) if p is not None}
        for d in points:
            d = max(lo, d) if lo is not None else d
            d = min(hi, d) if hi is not None else d
            best = min(best, max(si, d + so) - min(0, d))
    return best


@dataclass
class MemoryPlanner:
    alignment: int = 4
    search_budget: int = 200_000
    _buffers: list[Buffer] = field(default_factory=list)
    _relax: dict[tuple[int, int], tuple[Interval, ...]] = field(default_factory=dict)  # (input, output)

    def add_buffer(self, name: str, size: int, first_use: int, last_use: int) -> int:
        """Register a buffer; sizes are rounded up to the alignment. Returns its index."""
        if size < 0 or first_use > last_use:
            raise ValueError(f"bad buffer {name}: size {size}, lifetime [{first_use}, {last_use}]")
        self._buffers.append(Buffer(name, _align(max(size, 1), self.alignment), first_use, last_use))
        return len(self._buffers) - 1

    def add_overlap(self, input_index: int, output_index: int, intervals: tuple[Interval, ...]) -> None:
        """Allow ``output`` to start ``d`` bytes after ``input`` for any ``d`` in ``intervals``."""
        a, b = self._buffers[input_index], self._buffers[output_index]
        if a.last_use != b.first_use:
            raise ValueError(f"overlap of {a.name} and {b.name}: lifetimes must meet at exactly one step")
        if (input_index, output_index) in self._relax:
            raise ValueError(f"overlap of {a.name} and {b.name} registered twice")
        self._relax[(input_index, output_index)] = tuple(intervals)

    def plan_lower_bound(self) -> int:
        """The live-set bound of the registered buffers (no overlaps)."""
        return live_set_lower_bound(self._buffers)

    def overlap_lower_bound(self) -> int:
        """Live-set bound where each input/output pair with a contract counts as its tightest union."""
        bufs = self._buffers
        saved: dict[int, int] = {}
        for (a, b), intervals in self._relax.items():
            if bufs[a].last_use == bufs[b].first_use:
                si, so = bufs[a].size, bufs[b].size
                step = bufs[b].first_use
                saved[step] = saved.get(step, 0) + si + so - _tightest_union(si, so, intervals)
        return max([0, *(total - saved.get(step, 0) for step, total in _live_bytes(bufs).items())])

    def _fits(self, i: int, off: int, offsets: list[int | None], neighbours: list[int]) -> bool:
        """Whether buffer ``i`` at ``off`` keeps clear of (or within its contract with) each placed neighbour."""
        bufs = self._buffers
        for j in neighbours:
            oj = offsets[j]
            if oj is None:
                continue
            if (j, i) in self._relax:
                ok = _pair_ok(oj, bufs[j].size, off, bufs[i].size, self._relax[(j, i)])
            elif (i, j) in self._relax:
                ok = _pair_ok(off, bufs[i].size, oj, bufs[j].size, self._relax[(i, j)])
            else:
                ok = off + bufs[i].size <= oj or oj + bufs[j].size <= off
            if not ok:
                return False
        return True

    def _candidates(self, i: int, offsets: list[int | None], conflicts: list[list[int]]) -> list[int]:
        bufs = self._buffers
        cands = {0}
        for j in conflicts[i]:
            oj = offsets[j]
            if oj is None:
                continue
            cands.add(_align(oj + bufs[j].size, self.alignment))
            for lo, hi in self._relax.get((j, i), ()):  # i is the output written over input j
                if hi is not None:
                    cands.add(_align_down(oj + hi, self.alignment))
                if lo is not None:
                    cands.add(_align(oj + lo, self.alignment))
            for lo, hi in self._relax.get((i, j), ()):  # i is the input that output j overwrites
                if hi is not None:
                    cands.add(_align(oj - hi, self.alignment))
                if lo is not None:
                    cands.add(_align_down(oj - lo, self.alignment))
        return sorted(c for c in cands if c >= 0)

    def plan(self, beat: int | None = None) -> Plan:
        """The best placement found. ``beat``: an arena of this size is already known (another op
        order's): the search runs only when it could end below both it and this order's greedy arena."""
        bufs = self._buffers
        bound = live_set_lower_bound(bufs)
        conflicts = _co_live(bufs)
        orders = {
            "largest-first": sorted(range(len(bufs)), key=lambda i: (-bufs[i].size, bufs[i].first_use)),
            "longest-first": sorted(range(len(bufs)),
                                    key=lambda i: (-(bufs[i].last_use - bufs[i].first_use), -bufs[i].size)),
            "earliest-first": sorted(range(len(bufs)), key=lambda i: (bufs[i].first_use, -bufs[i].size)),
            # Outputs before the inputs they overwrite: lets a chain of overlapping ops settle downward.
            "latest-first": sorted(range(len(bufs)),
                                   key=lambda i: (-bufs[i].first_use, -bufs[i].last_use, -bufs[i].size)),
            "latest-death-first": sorted(range(len(bufs)),
                                         key=lambda i: (-bufs[i].last_use, -bufs[i].first_use, -bufs[i].size)),
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
        # The search stops at a bound no plan can beat: the live-set bound, with each contracted
        # pair counted at the smallest extent its contract allows.
        target = self.overlap_lower_bound()
        limit = best[0] if beat is None else min(best[0], beat)
        if limit > target:
            found = self._search(orders["largest-first"], conflicts, limit, target)
            if found is not None and found[0] < best[0]:
                best = (found[0], found[1], "search")
        overlaps = [OverlapAllowance(bufs[a].name, bufs[b].name, iv) for (a, b), iv in self._relax.items()]
        return Plan(list(bufs), best[1], best[0], bound, best[2], overlaps)

    def _lowest_fit(self, i: int, offsets: list[int | None], conflicts: list[list[int]]) -> int:
        """The lowest candidate that :meth:`_fits`, found without rescanning every placed neighbour per
        candidate: an unrolled recurrent model has thousands of co-live buffers, and the plain (no
        contract) ones reduce to one question, whether a placed extent starts below ``off + size`` and
        ends above ``off``; sorted starts with a running maximum of ends answer it in O(log n)."""
        bufs = self._buffers
        size = bufs[i].size
        plain: list[tuple[int, int]] = []
        contracted: list[int] = []
        for j in conflicts[i]:
            oj = offsets[j]
            if oj is None:
                continue
            if (j, i) in self._relax or (i, j) in self._relax:
                contracted.append(j)
            else:
                plain.append((oj, oj + bufs[j].size))
        plain.sort()
        starts = [s for s, _ in plain]
        reach: list[int] = []
        for _, end in plain:
            reach.append(end if not reach else max(reach[-1], end))
        for off in self._candidates(i, offsets, conflicts):
            below = bisect_left(starts, off + size)
            if below and reach[below - 1] > off:
                continue
            if self._fits(i, off, offsets, contracted):
                return off
        raise AssertionError("the end of the highest placed buffer always fits")

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

        def dfs(k: int, current: int) -> bool:
            nodes[0] += 1
            if nodes[0] > self.search_budget:
                return True
            if k == len(order):
                limit[0] = current
                best[0] = (current, [o for o in offsets if o is not None])
                return current <= bound
            i = order[k]
            for off in self._candidates(i, offsets, conflicts):
                end = max(current, off + bufs[i].size)
                if end >= limit[0] or not self._fits(i, off, offsets, conflicts[i]):
                    continue
                offsets[i] = off
                if dfs(k + 1, end):
                    return True
                offsets[i] = None
            return False

        dfs(0, 0)
        return best[0]


def verify_plan(plan: Plan, alignment: int = 4, overlaps: list[OverlapAllowance] | None = None) -> None:
    """Check a plan independently of the planner; raise :class:`PlanError` on the first fault.

    ``overlaps`` are the contracts the caller derived itself (by default the ones the plan carries):
    two co-live buffers may share bytes only as one of them allows.
    """
    bufs, offs = plan.buffers, plan.offsets
    allowed = {(o.input, o.output): o.intervals for o in (plan.overlaps if overlaps is None else overlaps)}
    if len(bufs) != len(offs):
        raise PlanError("plan has a different number of offsets than buffers")
    for b, off in zip(bufs, offs):
        if off < 0:
            raise PlanError(f"buffer {b.name} has a negative offset {off}")
        if off % alignment:
            raise PlanError(f"buffer {b.name} at offset {off} is not {alignment}-byte aligned")
        if off + b.size > plan.arena_size:
            raise PlanError(f"buffer {b.name} [{off}, {off + b.size}) ends beyond the arena ({plan.arena_size} B)")
    events = sorted(range(len(bufs)), key=lambda i: offs[i])
    for a_idx, i in enumerate(events):
        for j in events[a_idx + 1:]:
            if offs[j] >= offs[i] + bufs[i].size:
                break
            if not bufs[i].lives_with(bufs[j]):
                continue
            for x, y in ((i, j), (j, i)):
                intervals = allowed.get((bufs[x].name, bufs[y].name))
                if intervals and bufs[x].last_use == bufs[y].first_use and _allows(intervals, offs[y] - offs[x]):
                    break
            else:
                raise PlanError(
                    f"buffers {bufs[i].name} [{offs[i]}, {offs[i] + bufs[i].size}) and {bufs[j].name} "
                    f"[{offs[j]}, {offs[j] + bufs[j].size}) overlap while both live "
                    f"(steps {bufs[i].first_use}-{bufs[i].last_use} and {bufs[j].first_use}-{bufs[j].last_use})"
                    " and no overlap contract allows it")
