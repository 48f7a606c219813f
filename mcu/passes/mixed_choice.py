"""``--quantize mixed``: each layer's weight precision chosen under an accuracy budget.

The model is quantized to static int8 first. Then:

1. Sensitivity: for every layer (mcu/passes/mixed.py, ``layers``) and every narrower candidate, the model's
   score with only that layer at the candidate, through the integer reference: the output SQNR against fp32
   on the calibration data, or the model file's eval metric on ``eval_data``.
2. Paths of configurations from all-int8 down, independent of the budget: each step narrows the one layer
   whose step saves the most of its own cost (its constants' flash bytes on the board, or estimated
   instructions) per unit of loss, its loss alone counted in units that add: noise power relative to the
   signal for SQNR, points for a metric. One path may take every form, one only int4, one only tables: a
   form's kernel code is paid once for all the layers that use it, so the paths keeping to one form reach
   configurations that link one narrow form's kernels where the first path would link two.
3. Each configuration's total cost: for flash, the layers' bytes plus each kernel source they link, once
   (``Flash``, mcu/backends/mixed_flash.py); for instructions, the layers' sum. Configurations are
   measured whole (the losses of layers narrowed together need not add up) from the cheapest total up; the
   first whose measured score is within the budget is taken. All-int8 always meets it, so the choice never
   costs more than all-int8.

int16 activations (mcu/passes/mixed_s16.py) are a candidate for runs of chained layers (``widenings``): each
run is measured alone and seeds the three paths again with its layers kept at int16, so that a run that buys
accuracy back leaves the other layers more of the budget; its cost is its 16x8 constants and kernel code and
both borders' code (flash), or its estimated instructions and its borders' elements.

The configurations, their costs and their order do not depend on the budget, and a looser budget admits
every configuration a tighter one did, so it never gives more cost. Everything is deterministic: ties go to
the earlier layer, then the earlier candidate, then the earlier path."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable, Protocol

from mcu.ir import Graph, LayerPrecision, Op, PrecisionChoice
from mcu.passes import mixed, mixed_s16

Score = Callable[[Graph], float]  # higher is better: dB of SQNR, or a metric in percent

# The longest run of layers offered int16 activations together (mcu/passes/mixed_s16.py)
MAX_RUN = 3
# The forms a path may take besides int8: all, int4 alone, the tables alone (they share their kernels).
PATH_FORMS = (mixed.CANDIDATES[1:], (mixed.INT4,), tuple(mixed.LUT.values()))


class Flash(Protocol):
    """The flash objective on one board (mcu/backends/mixed_flash.py, BoardFlash)."""

    @property
    def where(self) -> str: ...

    def layer_bytes(self, op: Op, form: str) -> int: ...

    def code_bytes(self, layers: list[tuple[Op, str]]) -> int: ...


@dataclass(frozen=True)
class Option:
    """One candidate of one layer: its cost (objective units) and its estimated loss (additive units)."""

    name: str
    cost: int
    loss: float


def path(options: list[list[Option]]) -> list[list[int]]:
    """Configurations (one option index per layer, option 0 the int8 one) from all-int8 on; every step lowers
    the total cost, choosing the largest cost saved per loss added (a step that adds no loss first)."""
    current = [0] * len(options)
    out = [list(current)]
    while True:
        best: tuple[float, int, int] | None = None
        for layer, opts in enumerate(options):
            here = opts[current[layer]]
            for k, opt in enumerate(opts):
                saved = here.cost - opt.cost
                if saved <= 0:
                    continue
                added = opt.loss - here.loss
                ratio = math.inf if added <= 0 else saved / added
                if best is None or ratio > best[0]:
                    best = (ratio, layer, k)
        if best is None:
            return out
        current[best[1]] = best[2]
        out.append(list(current))


def choose_index(costs: list[int], passes: Callable[[int], bool]) -> int:
    """The cheapest configuration whose measurement ``passes`` (the earlier of equal costs; configuration 0,
    all-int8, is taken to pass), measuring from the cheapest up."""
    order = sorted(range(len(costs)), key=lambda k: (costs[k], k))
    return next(k for k in order if k == 0 or passes(k))


@dataclass(frozen=True)
class Metric:
    """How a score turns into additive loss: ``sqnr`` True for dB of SQNR (noise power adds), else points."""

    name: str
    sqnr: bool

    def loss(self, base: float, score: float) -> float:
        """What ``score`` loses against ``base``, in additive units."""
        if self.sqnr:
            return max(10 ** (-score / 10) - 10 ** (-base / 10), 0.0) if math.isfinite(score) else 0.0
        return max(base - score, 0.0)



def _narrowed(graph: Graph, indices: list[int], names: list[str]) -> Graph:
    trial = copy.deepcopy(graph)
    for i, name in zip(indices, names):
        if name != mixed_s16.A16:
            mixed.apply(trial.ops[i], name)
    wide = {i for i, name in zip(indices, names) if name == mixed_s16.A16}
    if wide:  # last: the borders it inserts move the ops' indices
        mixed_s16.widen(trial, wide)
    return trial


def widenings(graph: Graph, indices: list[int]) -> list[tuple[int, ...]]:
    """The runs of layers (positions in ``indices``) that may take int16 activations together: every run of
    two or three consecutive layers (at most ``MAX_RUN``: each run is measured alone and seeds its own paths),
    each feasible at 16x8, each one's output read only by the next. A run keeps the tensors between its layers
    int16; a layer alone would only round twice, so none is offered."""
    ops = [graph.ops[i] for i in indices]
    readers: dict[int, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            readers[id(t.base())] = readers.get(id(t.base()), 0) + 1
    outputs = {id(t.base()) for t in graph.outputs}
    linked = [ops[n + 1].inputs[0] is ops[n].output and readers.get(id(ops[n].output)) == 1
              and id(ops[n].output) not in outputs for n in range(len(ops) - 1)]
    ok = [mixed_s16.feasible(op) for op in ops]
    runs: list[tuple[int, ...]] = []
    for first in range(len(ops)):
        last = first
        while last + 1 < len(ops) and last + 2 - first <= MAX_RUN and ok[last] and ok[last + 1] and linked[last]:
            last += 1
            runs.append(tuple(range(first, last + 1)))
    return runs


def choose_precision(graph: Graph, score: Score, metric: Metric, budget: float, objective: str,
                     samples: int, flash: Flash, int16: bool = True) -> Graph:
    """``graph`` (static int8, lowered) with each layer's weights at the chosen precision and
    ``graph.precision`` saying what was chosen; ``flash`` the board's flash objective; ``int16`` False keeps
    every activation int8 (to compare)."""
    indices = mixed.layers(graph.ops)
    ops = [graph.ops[i] for i in indices]
    known: dict[tuple[str, ...], float] = {}  # by each layer's form: a configuration is measured once

    def scored(names: tuple[str, ...]) -> float:
        if names not in known:
            known[names] = score(_narrowed(graph, indices, list(names)))
        return known[names]

    def own_cost(op: Op, name: str) -> int:
        return flash.layer_bytes(op, name) if objective == "flash" else mixed.instructions(op, name)

    def total(names: tuple[str, ...]) -> int:
        own = sum(own_cost(op, name) for op, name in zip(ops, names))
        if objective != "flash":  # a run's two borders (its layers are chained: none between them)
            wide = [n for n, name in enumerate(names) if name == mixed_s16.A16]
            return own + (mixed_s16.BORDER_PER_ELEMENT * (ops[wide[0]].inputs[0].numel + ops[wide[-1]].output.numel)
                          if wide else 0)
        return own + flash.code_bytes(list(zip(ops, names)))

    int8 = (mixed.INT8,) * len(ops)
    base = scored(int8)
    alone: list[dict[str, float]] = []
    for n in range(len(ops)):
        alone.append({name: scored(tuple(name if m == n else mixed.INT8 for m in range(len(ops))))
                      for name in mixed.CANDIDATES})
    # int16 activations: each run measured alone; its layers report the run's score
    runs = widenings(graph, indices) if int16 else []
    for run in runs:
        run_score = scored(tuple(mixed_s16.A16 if m in run else mixed.INT8 for m in range(len(ops))))
        for n in run:
            alone[n][mixed_s16.A16] = max(alone[n].get(mixed_s16.A16, -math.inf), run_score)
    configs: list[tuple[str, ...]] = []
    # each path starts from all-int8 or from one run at int16 activations (which may score above int8 and so
    # leave the others more of the budget to narrow with), the run's layers kept wide
    for run in ((), *runs):
        for forms in PATH_FORMS:
            allowed = (mixed.INT8, *forms)
            options = [[Option(mixed_s16.A16, own_cost(op, mixed_s16.A16), 0.0)] if n in run else
                       [Option(name, own_cost(op, name), metric.loss(base, alone[n][name])) for name in allowed]
                       for n, op in enumerate(ops)]
            for config in path(options):
                names = tuple(options[layer][c].name for layer, c in enumerate(config))
                if names not in configs:
                    configs.append(names)
    costs = [total(names) for names in configs]
    k = choose_index(costs, lambda j: scored(configs[j]) >= base - budget)
    names = configs[k]
    chosen = _narrowed(graph, indices, list(names))
    chosen.precision = PrecisionChoice(
        metric=metric.name, budget=budget, objective=objective, int8_score=base, score=scored(names), samples=samples,
        layers=tuple(LayerPrecision(op=op.name, kind=op.kind, weights=mixed.INT8 if name == mixed_s16.A16 else name,
                                    weight_bytes=flash.layer_bytes(op, name), instructions=mixed.instructions(op, name),
                                    score_alone=alone[n][name],
                                    activations="int16" if name == mixed_s16.A16 else "int8")
                     for n, (op, name) in enumerate(zip(ops, names))),
        code_bytes=flash.code_bytes(list(zip(ops, names))), int8_bytes=total(int8) if objective == "flash" else 0,
        configurations=len(configs), board=flash.where if objective == "flash" else "")
    return chosen
