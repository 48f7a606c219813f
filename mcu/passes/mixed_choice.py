"""``--quantize mixed``: each layer's weight precision chosen under an accuracy budget.

The model is quantized to static int8 first. Then:

1. Sensitivity: for every layer (mcu/passes/mixed.py, ``layers``) and every narrower candidate, the model's
   score with only that layer at the candidate, through the integer reference: the output SQNR against fp32
   on the calibration data, or the model file's eval metric on ``eval_data``.
2. A path of configurations from all-int8 down, independent of the budget: each step narrows the one layer
   whose step saves the most cost (flash bytes or estimated instructions, the objective) per unit of loss,
   its loss alone counted in units that add: noise power relative to the signal for SQNR, points for a
   metric; every step lowers the total cost.
3. Every configuration of the path measured whole (the losses of layers narrowed together need not add up);
   the farthest one whose measured score is within the budget. All-int8 always meets it.

The path and its measurements do not depend on the budget, and a looser budget admits every configuration a
tighter one did, so it never gives more cost. Everything is deterministic: ties go to the earlier layer, then
the earlier candidate."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable

from mcu.ir import Graph, LayerPrecision, PrecisionChoice
from mcu.passes import mixed

Score = Callable[[Graph], float]  # higher is better: dB of SQNR, or a metric in percent


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


def choose_index(count: int, passes: Callable[[int], bool]) -> int:
    """The farthest of ``count`` configurations whose measurement ``passes`` (configuration 0, all-int8, is
    taken to pass)."""
    return next((i for i in reversed(range(1, count)) if passes(i)), 0)


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
        mixed.apply(trial.ops[i], name)
    return trial


def choose_precision(graph: Graph, score: Score, metric: Metric, budget: float, objective: str,
                     samples: int) -> Graph:
    """``graph`` (static int8, lowered) with each layer's weights at the chosen precision and
    ``graph.precision`` saying what was chosen."""
    indices = mixed.layers(graph.ops)
    known: dict[tuple[str, ...], float] = {}  # by each layer's form: a configuration is measured once

    def scored(names: list[str]) -> float:
        key = tuple(names)
        if key not in known:
            known[key] = score(_narrowed(graph, indices, names))
        return known[key]

    base = scored([mixed.INT8] * len(indices))
    options: list[list[Option]] = []
    alone: list[dict[str, float]] = []
    for n, i in enumerate(indices):
        op = graph.ops[i]
        row, scores = [], {}
        for name in mixed.CANDIDATES:
            s = scored([name if m == n else mixed.INT8 for m in range(len(indices))])
            scores[name] = s
            cost = mixed.weight_bytes(op, name) if objective == "flash" else mixed.instructions(op, name)
            row.append(Option(name, cost, metric.loss(base, s)))
        options.append(row)
        alone.append(scores)
    configs = path(options)

    def measure(k: int) -> float:
        return scored([options[layer][c].name for layer, c in enumerate(configs[k])])

    def passes(k: int) -> bool:
        return measure(k) >= base - budget

    k = choose_index(len(configs), passes)
    names = [options[layer][c].name for layer, c in enumerate(configs[k])]
    chosen = _narrowed(graph, indices, names)
    chosen.precision = PrecisionChoice(
        metric=metric.name, budget=budget, objective=objective, int8_score=base, score=measure(k), samples=samples,
        layers=tuple(LayerPrecision(op=graph.ops[i].name, kind=graph.ops[i].kind, weights=name,
                                    weight_bytes=mixed.weight_bytes(graph.ops[i], name),
                                    instructions=mixed.instructions(graph.ops[i], name),
                                    score_alone=alone[n][name])
                     for n, (i, name) in enumerate(zip(indices, names))))
    return chosen
