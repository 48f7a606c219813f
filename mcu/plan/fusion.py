"""Which inverted-residual blocks run fused (mcu/plan/fused.py): the fewest that reach the arena asked for.

Fusing a block removes its expanded tensor from the arena but costs instructions (each row calls the
kernels once more, and the ring moves rows), and only the blocks whose tensors make the peak matter. So
the blocks are tried largest expanded tensor first: the arena of each prefix of that order is planned
(a plan takes milliseconds), the shortest prefix reaching the target is kept, and then every block of
it whose fusion no longer lowers the arena below the target (smallest first) runs whole again. The
target is the budget when one is given (no block fuses when the whole-tensor schedule fits it), else the
smallest arena the prefixes reach. Last, each fused block gets the most output rows per pass (a band:
2, 4, 8, ... rows, each kernel call covering them all, so fewer calls) that keep the arena at the
target: a larger ring costs nothing where the block is not at the peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcu.errors import McuError
from mcu.ir import Graph, Op
from mcu.plan.fused import expanded_bytes, find_chains, with_fused
from mcu.plan.memory import plan_memory


@dataclass
class FusionChoice:
    chains: list[list[Op]]  # the blocks to fuse, in op order
    bands: dict[int, int]  # output rows per pass, by id of a chain's first op
    candidates: int  # blocks that could fuse
    arena: int  # the arena with them fused
    unfused_arena: int
    smallest: int  # the smallest arena any prefix of the order reached


def _arena(graph: Graph, chains: list[list[Op]], bands: dict[int, int] | None = None) -> int:
    return plan_memory(with_fused(graph, chains, bands)).arena_size


def choose(graph: Graph, budget: int | None = None) -> FusionChoice:
    """The blocks of ``graph`` to fuse for the smallest arena, or (``budget``) for an arena of at most
    ``budget`` bytes; McuError when no choice reaches the budget."""
    chains = find_chains(graph)
    base = _arena(graph, [])
    if budget is not None and base <= budget:
        return FusionChoice([], {}, len(chains), base, base, base)
    order = sorted(chains, key=lambda c: -expanded_bytes(c))  # stable: equal tensors in op order
    sizes = [base] + [_arena(graph, order[:k]) for k in range(1, len(order) + 1)]
    smallest = min(sizes)
    if budget is not None and smallest > budget:
        raise McuError(
            f"no schedule fits a RAM budget of {budget} B: the smallest arena is {smallest} B, with "
            f"{sizes.index(smallest)} of {len(chains)} inverted-residual blocks run row by row (every tensor "
            f"whole: {base} B)",
            hint=f"raise --ram-budget to at least {smallest}, or use a smaller model or input")
    target = smallest if budget is None else budget
    k = next(i for i, size in enumerate(sizes) if size <= target)
    chosen = order[:k]
    for c in sorted(chosen, key=expanded_bytes):
        trial = [x for x in chosen if x is not c]
        if _arena(graph, trial) <= target:
            chosen = trial
    position = {id(op): i for i, op in enumerate(graph.ops)}
    chosen.sort(key=lambda c: position[id(c[0])])
    bands: dict[int, int] = {}
    for c in chosen:
        rows = c[1].output.shape[2]
        band = 2
        while band // 2 < rows and _arena(graph, chosen, {**bands, id(c[0]): min(band, rows)}) <= target:
            bands[id(c[0])] = min(band, rows)
            band *= 2
    return FusionChoice(chosen, bands, len(chains), _arena(graph, chosen, bands), base, smallest)
