"""Choose the execution order of independent branches to lower the memory peak.

The captured order is one valid topological order; where the graph branches
(a residual block's shortcut, parallel convolutions before a concatenation)
others exist, and they can need different amounts of memory. This module
builds a few candidate orders — the captured one, and greedy orders that at
every step run the ready op that leaves the fewest bytes live (ties broken
by preferring the op that frees the most, or the op captured first) — plans
each, and keeps the order with the smallest arena (the captured order wins
ties, so nothing changes without a gain).
"""

from __future__ import annotations

from typing import Callable

from mcu.ir import Graph, Op


def _deps(graph: Graph) -> tuple[dict[int, set[int]], dict[int, list[int]]]:
    """For each op index: the op indices it reads from, and the op indices reading its outputs."""
    producer: dict[int, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.outputs:
            producer[id(t)] = i
    needs: dict[int, set[int]] = {i: set() for i in range(len(graph.ops))}
    feeds: dict[int, list[int]] = {i: [] for i in range(len(graph.ops))}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            src = producer.get(id(t))
            if src is None and t.alias_of is not None:
                src = producer.get(id(t.base()))
            if src is not None and src != i and src not in needs[i]:
                needs[i].add(src)
                feeds[src].append(i)
    return needs, feeds


def greedy_order(graph: Graph, prefer_freeing: bool) -> list[int]:
    needs, feeds = _deps(graph)
    readers: dict[int, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            if not t.is_constant:
                readers[id(t.base())] = readers.get(id(t.base()), 0) + 1
    done: set[int] = set()
    remaining = dict(readers)
    order: list[int] = []

    def freed(i: int) -> int:
        op = graph.ops[i]
        return sum(t.base().nbytes for t in {id(t.base()): t for t in op.inputs if not t.is_constant}.values()
                   if remaining.get(id(t.base()), 0) == 1 and not t.base().is_output)

    def grown(i: int) -> int:
        return sum(t.nbytes for t in graph.ops[i].outputs if t.alias_of is None)

    while len(order) < len(graph.ops):
        ready = [i for i in range(len(graph.ops)) if i not in done and needs[i] <= done]
        key: Callable[[int], tuple] = ((lambda i: (grown(i) - freed(i), -freed(i), i)) if prefer_freeing
                                       else (lambda i: (grown(i) - freed(i), i)))
        best = min(ready, key=key)
        order.append(best)
        done.add(best)
        for t in graph.ops[best].inputs:
            if not t.is_constant:
                remaining[id(t.base())] -= 1
    return order


def candidate_orders(graph: Graph) -> list[list[Op]]:
    seen: set[tuple[int, ...]] = set()
    result = []
    for order in (list(range(len(graph.ops))), greedy_order(graph, True), greedy_order(graph, False)):
        key = tuple(order)
        if key not in seen:
            seen.add(key)
            result.append([graph.ops[i] for i in order])
    return result


def with_order(graph: Graph, ops: list[Op]) -> Graph:
    return Graph(inputs=graph.inputs, outputs=graph.outputs, ops=ops, name=graph.name, fallbacks=graph.fallbacks,
                 state=graph.state)


