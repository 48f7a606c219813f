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

from dataclasses import dataclass, field

from mcu.errors import McuError
from mcu.ir import Graph, Op
from mcu.plan.fused import expanded_bytes, find_chains, with_fused
from mcu.plan.memory import plan_memory
from mcu.plan.prefix import PrefixCandidate, PrefixSchedule, with_prefix


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


Schedule = tuple[tuple[str, int], ...]  # the fused blocks of a schedule: (first op's name, band), in op order


@dataclass(frozen=True)
class FusionCosts:
    """What one model costs on one board (instructions, measured: mcu/devtools/fusion_costs.py): ``ops`` every
    op of the whole-tensor schedule by name, ``fused`` a fused block by its first op's name and its band
    (output rows per pass), ``schedules`` the whole inference of each schedule of :func:`to_run` that was
    built and run."""

    ops: dict[str, int]
    fused: dict[tuple[str, int], int]
    schedules: dict[Schedule, int] = field(default_factory=dict)

    def delta(self, stages: list[Op], band: int) -> int | None:
        """Instructions fusing ``stages`` at ``band`` adds (negative: fused is faster); None if unmeasured."""
        fused = self.fused.get((stages[0].name, band))
        whole = [self.ops.get(s.name) for s in stages]
        if fused is None or any(c is None for c in whole):
            return None
        return fused - sum(c for c in whole if c is not None)

    def bands(self) -> list[int]:
        return sorted({band for _, band in self.fused})


@dataclass(frozen=True)
class Candidate:
    """One schedule the budget chooses from: its fused blocks, its arena, and the instructions it adds to
    the whole-tensor schedule's by the sum of its ops' measurements (``predicted``)."""

    schedule: Schedule
    arena: int
    predicted: int


def _schedule_arena(graph: Graph, chains: list[list[Op]], pick: dict[int, int]) -> int:
    chosen = [c for i, c in enumerate(chains) if pick.get(i, 0)]
    return _arena(graph, chosen, {id(c[0]): pick[i] for i, c in enumerate(chains) if pick.get(i, 0)})


def candidates(graph: Graph, costs: FusionCosts) -> list[Candidate]:
    """A fixed set of schedules, whatever the budget: each prefix of the blocks by expanded tensor (largest
    first) fused at one measured band, the other blocks either whole or each at its own fastest option,
    and each band-1 prefix with every one of its blocks then raised to its fastest band that keeps that
    candidate's own arena. Fusing is not always slower (a fused stride-2 block can beat its whole-tensor
    depthwise), so the fewest fused blocks are not the fastest schedule."""
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

    evaluate({})
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
    return [Candidate(tuple((chains[i][0].name, b) for i, b in key), arena, cost)
            for key, (cost, arena) in seen.items()]


def frontier(cands: list[Candidate]) -> list[Candidate]:
    """The candidates no other beats in both arena and predicted instructions, smallest arena first: for
    any budget, the last of them that fits is the predicted fastest (the smaller arena on a tie)."""
    result: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (c.arena, c.predicted, c.schedule)):
        if not result or c.predicted < result[-1].predicted:
            result.append(c)
    return result


# The sums mispredict a schedule's run by up to about 0.6 % (mps2-an505, the example CNNs: an unfused
# op's count depends on how far the plan overlaps its output with its input, and the plan changes with
# the fused blocks), so the schedules run whole are those the sums put within this share of the
# whole-tensor schedule's ops of the frontier.
MARGIN = 0.003


def to_run(cands: list[Candidate], costs: FusionCosts) -> list[Candidate]:
    """The candidates whose measured runs the budget chooses among, smallest arena first: each one whose
    predicted instructions are within ``MARGIN`` (of the whole-tensor schedule's ops) of the predicted
    fastest candidate with at most its arena: the frontier's schedules, and those close behind them."""
    margin = MARGIN * sum(costs.ops.values())
    result: list[Candidate] = []
    best: int | None = None
    for c in sorted(cands, key=lambda c: (c.arena, c.predicted, c.schedule)):
        best = c.predicted if best is None else min(best, c.predicted)
        if c.predicted <= best + margin:
            result.append(c)
    return result


def _chosen(graph: Graph, schedule: Schedule) -> tuple[list[list[Op]], dict[int, int]]:
    band = dict(schedule)
    chains = [c for c in find_chains(graph) if c[0].name in band]
    return chains, {id(c[0]): band[c[0].name] for c in chains}


def choose_fastest(graph: Graph, budget: int, costs: FusionCosts) -> FusionChoice:
    """The schedule of ``graph`` with the fewest instructions whose arena is at most ``budget``: of the
    candidates of :func:`to_run` that fit, by each one's measured whole inference (``costs.schedules``)
    when it has every one's, else by the sums of their ops' measurements (the frontier's fastest). A sum
    can rank two schedules the wrong way (see ``MARGIN``); measured runs cannot. As the candidates and
    their costs do not depend on the budget, and a larger budget only adds candidates that fit, a larger
    budget never picks a slower schedule."""
    cands = candidates(graph, costs)
    runs = to_run(cands, costs)
    chains = find_chains(graph)
    base = next(c.arena for c in cands if not c.schedule)
    fitting = [c for c in runs if c.arena <= budget]
    least = [c for c in runs if c.arena == runs[0].arena]  # the schedules of the smallest arena
    measured = all(c.schedule in costs.schedules for c in fitting or least)
    whole_ops = sum(costs.ops.values())

    def cost(c: Candidate) -> int:
        return costs.schedules[c.schedule] if measured else whole_ops + c.predicted

    if not fitting:
        smallest = min(least, key=lambda c: (cost(c), c.schedule))
        how = "measured" if measured else "its ops' measurements added up"
        what = (f"{len(smallest.schedule)} of {len(chains)} blocks run row by row" if smallest.schedule
                else "every tensor whole")
        whole = f"; every tensor whole: {base} B" if smallest.schedule else ""
        raise McuError(
            f"no schedule fits a RAM budget of {budget} B: the smallest arena is {smallest.arena} B, with "
            f"{what}, {cost(smallest):,} instructions ({how}{whole})",
            hint=f"raise --ram-budget to at least {smallest.arena}, or use a smaller model or input")
    best = min(fitting, key=lambda c: (cost(c), c.arena, c.schedule))
    chosen, bands = _chosen(graph, best.schedule)
    return FusionChoice(chosen, bands, len(chains), best.arena, base, runs[0].arena)


@dataclass(frozen=True)
class Combined:
    """A schedule the RAM budget chooses from: a streamed prefix (None: none) with the whole input in the
    arena, then fused blocks in the rest (``fused``: empty, every other tensor whole), its arena, and its
    predicted instructions: the measured run of the prefix (of every tensor whole without one) plus what
    its fused blocks add by their ops' measurements."""

    prefix: PrefixSchedule | None
    fused: Schedule
    arena: int
    predicted: int

    def key(self) -> str:
        """A stable text key (the measurement cache's): the prefix's, then each fused block's."""
        blocks = ",".join(f"{name}@{band}" for name, band in self.fused)
        return (self.prefix.key() if self.prefix else "-") + (f"|{blocks}" if blocks else "")

    def describe(self, blocks: int) -> str:
        """What it runs, in words (``blocks``: the model's fusable blocks)."""
        fused = f"{len(self.fused)} of {blocks} blocks run row by row" if self.fused else ""
        if self.prefix is None:
            return fused or "every tensor whole"
        return self.prefix.describe() + (f", then {fused}" if fused else "")


def combined_candidates(graph: Graph, costs: FusionCosts, prefixes: list[PrefixCandidate],
                        prefix_runs: dict[str, int]) -> list[Combined]:
    """A fixed set of schedules, whatever the budget, smallest arena first: no prefix or each of
    ``prefixes`` (its measured run in ``prefix_runs``, by key), each followed by the fused-block schedules
    of :func:`to_run` in the rest of the graph; of those, each whose prediction is within ``MARGIN`` of the
    predicted fastest with at most its arena (a prediction mixes a measured prefix with summed blocks, so
    the measured runs decide)."""
    whole_ops = sum(costs.ops.values())
    found: list[Combined] = []
    for p in [None, *prefixes]:
        g = graph if p is None else with_prefix(graph, p.schedule)
        start = costs.schedules.get((), whole_ops) if p is None else prefix_runs[p.schedule.key()]
        for c in to_run(candidates(g, costs), costs):
            found.append(Combined(p.schedule if p else None, c.schedule, c.arena, start + c.predicted))
    margin = MARGIN * whole_ops
    result: list[Combined] = []
    best: int | None = None
    for c in sorted(found, key=lambda c: (c.arena, c.predicted, c.key())):
        best = c.predicted if best is None else min(best, c.predicted)
        if c.predicted <= best + margin:
            result.append(c)
    return result
