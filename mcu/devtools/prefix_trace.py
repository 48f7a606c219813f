"""A streamed prefix's events in a profile: a profiling build traces each of its steps (mcu/plan/prefix.py's
TRACE_SHIFT), after one empty event that measures the hooks themselves. Folded here into the prefix's one
event, as any op's, and each of its ops' calls and cost with the hooks taken out.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcu.devtools.trace import TraceEvent
from mcu.plan.prefix import TRACE_HOOKS, TRACE_SHIFT

_LOW = (1 << TRACE_SHIFT) - 1


@dataclass(frozen=True)
class StepCosts:
    """One op of a prefix (or its streamed input's reader): its calls and their cost, the hooks' excluded."""

    calls: int
    cost: int
    estimated_cycles: int | None


@dataclass(frozen=True)
class PrefixTrace:
    hooks: int  # the cost of one empty event (the hooks' own, in every event)
    hooks_cycles: int | None
    ops: dict[int, StepCosts]  # by the op's index in the prefix (its number of ops: the reader)


def fold(events: list[TraceEvent]) -> tuple[list[TraceEvent], dict[int, PrefixTrace]]:
    """``events`` with each prefix's steps folded into one event of its handle (where its first step was;
    its cost the steps' with one event's hooks, as any op's), and what each prefix's ops cost."""
    out: list[TraceEvent | None] = []
    steps: dict[int, tuple[int, list[tuple[int, TraceEvent]]]] = {}  # by handle: (its place in out, steps)
    for e in events:
        k = e.handle >> TRACE_SHIFT
        if k == 0:
            out.append(e)
            continue
        handle = e.handle & _LOW
        if handle not in steps:
            steps[handle] = (len(out), [])
            out.append(None)
        steps[handle][1].append((k, e))
    traces: dict[int, PrefixTrace] = {}
    for handle, (at, found) in steps.items():
        hooks = [e for k, e in found if k == TRACE_HOOKS]
        if len(hooks) != 1:
            raise ValueError(f"prefix {handle}: {len(hooks)} events of its hooks' cost, expected 1")
        h = hooks[0]
        hc = h.estimated_cycles
        per: dict[int, list[TraceEvent]] = {}
        for k, e in found:
            if k != TRACE_HOOKS:
                per.setdefault(k - 1, []).append(e)
        ops = {i: StepCosts(len(es), sum(e.cost for e in es) - len(es) * h.cost,
                            None if hc is None or any(e.estimated_cycles is None for e in es)
                            else sum(e.estimated_cycles or 0 for e in es) - len(es) * hc)
               for i, es in sorted(per.items())}
        traces[handle] = PrefixTrace(h.cost, hc, ops)
        total = sum(s.cost for s in ops.values()) + h.cost
        est = None if hc is None or any(s.estimated_cycles is None for s in ops.values()) \
            else sum(s.estimated_cycles or 0 for s in ops.values()) + hc
        out[at] = TraceEvent(handle, total, 0, est) if h.instructions is not None else TraceEvent(handle, None, total, est)
    return [e for e in out if e is not None], traces
