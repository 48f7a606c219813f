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


@dataclass(frozen=True)
class FusionCosts:
    """What each op of one model costs on one board (instructions, measured: mcu/devtools/fusion_costs.py):
    ``ops`` every op of the whole-tensor schedule by name, ``fused`` a fused block by its first op's name
    and its band (output rows per pass)."""

    ops: dict[str, int]
    fused: dict[tuple[str, int], int]

    def delta(self, stages: list[Op], band: int) -> int | None:
        """Instructions fusing ``stages`` at ``band`` adds (negative: fused is faster); None if unmeasured."""
        fused = self.fused.get((stages[0].name, band))
        whole = [self.ops.get(s.name) for s in stages]
        if fused is None or any(c is None for c in whole):
            return None
        return fused - sum(c for c in whole if c is not None)

    def bands(self) -> list[int]:
        return sorted({band for _, band in self.fused})


def _schedule_arena(graph: Graph, chains: list[list[Op]], pick: dict[int, int]) -> int:
    chosen = [c for i, c in enumerate(chains) if pick.get(i, 0)]
    return _arena(graph, chosen, {id(c[0]): pick[i] for i, c in enumerate(chains) if pick.get(i, 0)})


def choose_fastest(graph: Graph, budget: int, costs: FusionCosts) -> FusionChoice:
    """The schedule of ``graph`` with the fewest instructions (by ``costs``) whose arena is at most ``budget``.

    Fusing is not always slower (a fused stride-2 block can beat its whole-tensor depthwise), so the
    fewest fused blocks are not the fastest schedule. The candidates are a fixed set, whatever the
    budget: each prefix of the blocks by expanded tensor (largest first) fused at one measured band, the
    other blocks either whole or each at its own fastest option, and each band-1 prefix with every one
    of its blocks then raised to its fastest band that keeps that candidate's own arena. The cheapest
    candidate that fits wins (the smaller arena on a tie); as the set does not depend on the budget, a
    larger budget never picks a slower schedule."""
    chains = find_chains(graph)
    bands = costs.bands()
    options: list[list[tuple[int, int]]] = []  # per chain: (added instructions, band; 0 whole), cheapest first
    for c in chains:
        measured = [(d, b) for b in bands if (d := costs.delta(c, b)) is not None]
        options.append(sorted([(0, 0), *measured]))
    order = sorted(range(len(chains)), key=lambda i: -expanded_bytes(chains[i]))
    fastest = {i: opts[0][1] for i, opts in enumerate(options)}
    picks: list[dict[int, int]] = []
    for k in range(len(order) + 1):
        for b in bands:
            prefix = {i: b for i in order[:k] if any(ob == b for _, ob in options[i])}
            picks += [prefix, {**fastest, **prefix}]
    seen: dict[tuple[tuple[int, int], ...], tuple[int, int]] = {}

    def evaluate(pick: dict[int, int]) -> tuple[int, int]:
        key = tuple(sorted((i, b) for i, b in pick.items() if b))
        if key not in seen:
            cost = sum(next(d for d, ob in options[i] if ob == b) for i, b in key)
            seen[key] = (cost, _schedule_arena(graph, chains, dict(key)))
        return seen[key]

    for pick in picks:
        evaluate(pick)
    if 1 in bands:
        for k in range(1, len(order) + 1):
            pick = {i: 1 for i in order[:k] if any(ob == 1 for _, ob in options[i])}
            limit = evaluate(pick)[1]
            for i in order[:k]:
                for d, b in options[i]:
                    if b in (0, pick.get(i)) or d >= next(x for x, ob in options[i] if ob == pick.get(i, 0)):
                        continue
                    if evaluate({**pick, i: b})[1] <= limit:
                        pick = {**pick, i: b}
                        break
    base = seen[()][1]
    smallest = min(arena for _, arena in seen.values())
    fitting = [(cost, arena, key) for key, (cost, arena) in seen.items() if arena <= budget]
    if not fitting:
        raise McuError(
            f"no schedule fits a RAM budget of {budget} B: the smallest arena is {smallest} B, with inverted-"
            f"residual blocks run row by row (every tensor whole: {base} B)",
            hint=f"raise --ram-budget to at least {smallest}, or use a smaller model or input")
    cost, arena, key = min(fitting)
    picked = dict(key)
    chosen = [c for i, c in enumerate(chains) if i in picked]
    return FusionChoice(chosen, {id(c[0]): picked[i] for i, c in enumerate(chains) if i in picked}, len(chains),
                        arena, base, smallest)
