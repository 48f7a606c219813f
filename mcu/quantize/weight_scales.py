"""Searched weight scales: each output channel's (a recurrent layer's gate row's) symmetric int8 scale chosen, among
clipping ratios of its largest magnitude, for the least output error of its layer over the calibration data,
instead of the largest magnitude over 127 (min/max).

Min/max spends the grid on the row's one largest weight; a slightly smaller scale clips that weight a little and
puts every other weight on a finer grid, and which of the ratios leaves the least error depends on where the row's
weights fall between its grid points. The error that counts is the layer's output error (W - Q) X, so each row's
candidates are scored as e^T H e, e the row's rounding error and H = X^T X of the layer's inputs as the quantized
model sees them (im2col rows for a convolution; the step's input and the previous hidden state for an LSTM or GRU,
whose two matrices have a scale each per gate row and are scored together, cross terms included). Under bias
correction, which takes out each channel's mean output error afterwards, H is taken about the inputs' means. The
layers go in graph order, each with the inputs the layers before it, already searched, give it.

A ratio fitted to few calibration samples also fits their noise. So a layer keeps min/max unless the ratios chosen
on the even samples leave the odd ones less error than min/max, and the other way round; and where a half gives
the layer fewer than twice as many input rows as it has columns, too few to estimate how its columns covary, the
ratios are fitted on H's diagonal (each column's second moment, which every row estimates) and still checked on
the held-out half's full H, the error they actually leave there.

A convolution's or linear layer's scale comes from its observer, so a row of at most SHORT_ROW weights also tries
grids coarser than min/max (ratios up to 1.1, the largest code then below 127): such a row (tcn's 1x1 skip
convolution has 8 weights a row) cannot spread the cost of clipping its largest weight over many others, and finds
its best grid among these, where each of its few weights falls near a grid point. Longer rows keep the 41 ratios
(given the wider grid, all of ds_cnn's lost 1.0 dB on 480 fresh inputs, its 3x3 depthwise rows alone 0.2). A recurrent matrix's lowering
maps each row's largest magnitude to 127, so its rows keep ratios of at most 1. A diagonal fit is kept only where
the ratios fitted on each half leave the other more than DIAGONAL_MARGIN less error than min/max (a sum of the two
below min/max let kws_lstm's classifier, 16 samples for 32 columns, fit noise: -2.6 dB on its test inputs).

Convolution, depthwise and linear layers get their scales through their weight observers (their min and max
set to the chosen range), which ``convert_pt2e`` then quantizes with. Recurrent matrices have no observer (their
lowering, mcu/passes/quantized/recurrent.py, rounds them per gate row to the largest magnitude over 127): their
float values are replaced by the chosen codes times the chosen scales, in which the largest magnitude of each row
is that scale times 127, so the lowering's rounding gives back exactly those codes; the fp32 values are returned
for bias correction to measure against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from torch.fx import GraphModule, Node

from mcu.quantize.bias_correction import (RECURRENT, TwinWalk, attr_value, fake_quantize, own_matrices,
                                          recurrent_matrices, set_attr_value)
from mcu.quantize.gptq import CONVOLUTIONS, LINEAR, input_columns, recurrent_rows, weight_observer
from mcu.reference.recurrent import symmetric_rows

# the candidate scales: the largest magnitude over the largest code, times 1 (min/max, first), 0.995, ..., 0.8
RATIOS = torch.linspace(1.0, 0.8, 41, dtype=torch.float64)
# an observed layer's: min/max first, then 1.1, 1.0975, ..., 0.8 (near 1 a step of 0.0025 moves the largest weight by
# a third of a code; one of 0.005 moved it by more than half of one, past most rows' best grids)
_STEPS = torch.linspace(1.1, 0.8, 121, dtype=torch.float64)
OBSERVED_RATIOS = torch.cat([torch.ones(1, dtype=torch.float64), _STEPS[_STEPS != 1.0]])
SHORT_ROW = 8  # rows of at most this many weights also try the coarser grids (not ds_cnn's 3x3 depthwise rows, 9)
DIAGONAL_MARGIN = 0.1  # a diagonal fit's least held-out gain over min/max, on each half (3 % took fc_autoencoder's 480 fresh inputs 0.1 dB lower)
_CHUNK = 1 << 23  # candidate errors computed at most this many at a time (64 MiB of float64)
ROW_FLOOR = 2.0 ** -12  # the recurrent lowering's smallest row range (mcu/reference/recurrent.py)


@dataclass(frozen=True)
class Searched:
    """One layer's scales: ``layer`` the graph node's name, ``minmax`` and ``searched`` its output error over the
    calibration inputs with min/max scales and with the ones it got (equal where it keeps min/max); for a recurrent
    layer ``weights`` the get_attr targets whose values now hold the chosen codes times scales and ``originals``
    their fp32 values."""

    layer: str
    minmax: float
    searched: float
    weights: tuple[str, ...] = ()
    originals: tuple[torch.Tensor, ...] = field(default=(), repr=False)


@dataclass
class _Second:
    """Sums over input rows: X^T X, X and the count."""

    xx: torch.Tensor
    x: torch.Tensor
    n: int = 0

    @staticmethod
    def zeros(width: int) -> "_Second":
        return _Second(torch.zeros(width, width, dtype=torch.float64), torch.zeros(width, dtype=torch.float64))

    def add(self, rows: torch.Tensor) -> None:
        self.xx += rows.T @ rows
        self.x += rows.sum(dim=0)
        self.n += rows.shape[0]

    def hessian(self, centered: bool) -> torch.Tensor:
        if not centered or self.n == 0:
            return self.xx
        return self.xx - torch.outer(self.x, self.x) / float(self.n)


def candidate_errors(matrix: torch.Tensor, amax: torch.Tensor, quant_max: int,
                     ratios: torch.Tensor = RATIOS) -> torch.Tensor:
    """[ratios, out, columns]: each row's rounding error on the grid of each of ``ratios`` times ``amax`` over
    ``quant_max`` (symmetric, clamped to +-quant_max)."""
    scale = ratios[:, None] * amax[None, :] / quant_max  # [ratios, out]
    codes = torch.clamp(torch.round(matrix[None] / scale[:, :, None]), -quant_max, quant_max)
    return codes * scale[:, :, None] - matrix[None]


def quadratic(errors: torch.Tensor, hessian: torch.Tensor, other: torch.Tensor | None = None) -> torch.Tensor:
    """e^T H f for every candidate and row: [ratios, out] (``other`` None: f = e) or, with ``other`` [ratios2, out,
    columns2] and ``hessian`` [columns, columns2], [ratios, ratios2, out]."""
    if other is None:
        return ((errors @ hessian) * errors).sum(dim=-1)
    return torch.einsum("aoi,ij,boj->abo", errors, hessian, other)


def _diagonal(h: torch.Tensor) -> torch.Tensor:
    return torch.diag(torch.diagonal(h))


def _enough(halves: list[_Second], width: int) -> bool:
    """Each half of the calibration rows at least twice as many as the layer's columns, for the full X^T X. With
    about as many or fewer, X^T X is (nearly) singular and a ratio chosen for the directions they span need not hold
    for inputs outside them, though the other half, as few, may agree: fc_autoencoder's inner layers (8 samples a
    half for 8 to 128 columns) chose ratios that left the calibration data 8 to 10 dB less error and the test inputs
    0.3 to 0.4 dB more. Such layers are fitted on its diagonal and checked on the full one."""
    return all(h.n >= 2 * width for h in halves)


def _choose(costs: list[torch.Tensor], held: list[torch.Tensor] | None = None,
            margin: float | None = None) -> tuple[torch.Tensor | None, float, float]:
    """From each half's [candidates, out] costs (candidate 0 min/max): the candidate per row fitted on both halves,
    or None when the ones fitted on either half do not leave the other less error than min/max; and the total
    error with min/max and with the choice. ``held``: each half's costs the held-out check and the totals measure
    instead (the full X^T X's, where ``costs`` are its diagonal's)."""
    held = costs if held is None else held
    whole, actual = costs[0] + costs[1], held[0] + held[1]
    minmax = float(actual[0].sum())
    rows = torch.arange(whole.shape[1])
    out_of_half = [float(held[1 - k][costs[k].argmin(dim=0), rows].sum()) for k in range(2)]
    if not sum(out_of_half) < minmax or margin is not None and any(
            not out_of_half[1 - k] < (1.0 - margin) * float(held[k][0].sum()) for k in range(2)):
        return None, minmax, minmax
    best = whole.argmin(dim=0)
    return best, minmax, float(actual[best, rows].sum())


def search_scales(gm: GraphModule, calibration: Sequence[tuple[torch.Tensor, ...]],
                  centered: bool = False) -> list[Searched]:
    """Choose, in place, the weight scales of every convolution, linear and recurrent layer of the calibrated pt2e
    model ``gm`` (prepare_pt2e's result, its observers run over ``calibration``); returns each layer's output error
    with min/max and with the chosen scales. ``centered``: the biases are corrected afterwards, so the inputs'
    means are taken out of the statistics."""
    samples = [tuple(batch) for batch in calibration]
    if len(samples) < 2:
        return []
    walk = TwinWalk(gm, samples, {})
    done: list[Searched] = []
    with torch.no_grad():
        for i, node in enumerate(walk.nodes):
            if node.op == "output":
                break
            if node.op == "call_function" and node in walk.varying:
                searched: Searched | None = None
                if node.target in CONVOLUTIONS or node.target is LINEAR:
                    searched = _search_layer(gm, walk.modules, node, walk.quant, centered)
                elif node.target in RECURRENT:
                    searched = _search_recurrent(gm, node, walk.quant, centered)
                    if searched is not None:
                        walk.originals.update(zip(searched.weights, searched.originals))
                if searched is not None:
                    done.append(searched)
            walk.step(node)
            walk.release(i, node)
    gm.recompile()
    return done


def _search_layer(gm: GraphModule, modules: dict[str, Any], layer: Node, quant: list[dict[Node, Any]],
                  centered: bool) -> Searched | None:
    """One convolution's or linear layer's scales, set on its weight observer (and its value in ``quant``)."""
    found = weight_observer(gm, modules, layer)
    x_node = layer.args[0]
    if found is None or not isinstance(x_node, Node):
        return None
    source, observed, observer = found
    weight = attr_value(gm, str(source.target))
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or observer.quant_min != \
            -observer.quant_max:
        return None
    qmax = int(observer.quant_max)
    out = weight.shape[0]
    groups = int(layer.args[6]) if layer.target is not LINEAR and len(layer.args) > 6 else 1
    per_group = out // groups
    matrix = weight.detach().double().reshape(out, -1)
    width = matrix.shape[1]
    halves = [[_Second.zeros(width) for _ in range(groups)] for _ in range(2)]
    for k, env in enumerate(quant):
        for g, rows in enumerate(input_columns(env[x_node], layer, weight)):
            halves[k % 2][g].add(rows)
    diagonal = not _enough(halves[0] + halves[1], width)
    amax = torch.clamp(torch.maximum(-observer.min_val.double(), observer.max_val.double()).reshape(-1),
                       min=float(observer.eps))
    ratios = OBSERVED_RATIOS if width <= SHORT_ROW else RATIOS
    # fitted on the diagonal where the rows are too few (``diagonal``), always checked on the full X^T X
    kinds = (False, True) if diagonal else (False,)
    costs = {d: [torch.empty(len(ratios), out, dtype=torch.float64) for _ in range(2)] for d in kinds}
    step = max(1, _CHUNK // (len(ratios) * width))
    for g in range(groups):
        hessians = [halves[k][g].hessian(centered) for k in range(2)]
        for start in range(g * per_group, (g + 1) * per_group, step):
            rows = slice(start, min(start + step, (g + 1) * per_group))
            errors = candidate_errors(matrix[rows], amax[rows], qmax, ratios)
            for k in range(2):
                for d in kinds:
                    costs[d][k][:, rows] = quadratic(errors, _diagonal(hessians[k]) if d else hessians[k])
    best, minmax, searched = _choose(costs[diagonal], costs[False], DIAGONAL_MARGIN if diagonal else None)
    if best is not None:
        ratio = ratios[best].to(observer.max_val.dtype)
        observer.min_val.copy_(-(amax.to(ratio.dtype) * ratio).reshape(observer.min_val.shape))
        observer.max_val.copy_((amax.to(ratio.dtype) * ratio).reshape(observer.max_val.shape))
        value = fake_quantize(observer, weight)
        for env in quant:
            env[observed] = value
    return Searched(layer.name, minmax, searched)


def _search_recurrent(gm: GraphModule, layer: Node, quant: list[dict[Node, Any]], centered: bool) -> Searched | None:
    """An LSTM's or GRU's two matrices' gate-row scales, scored together; the chosen codes times scales written
    into the graph's weights."""
    sources = recurrent_matrices(layer)
    if not own_matrices(layer):
        return None
    weights = [attr_value(gm, str(s.target)) for s in sources]  # type: ignore[union-attr]
    mats = [w.detach().double() for w in weights]
    n_in = mats[0].shape[1]
    halves = [_Second.zeros(n_in + mats[1].shape[1]) for _ in range(2)]
    for k, env in enumerate(quant):
        # the hidden states with fp32 matrices: statistics, which their rounding hardly moves
        halves[k % 2].add(recurrent_rows(layer, env, (env[sources[0]], env[sources[1]])))
    diagonal = not _enough(halves, halves[0].xx.shape[0])
    amaxes = [torch.clamp(m.abs().amax(dim=1), min=ROW_FLOOR) for m in mats]
    errors = [candidate_errors(m, a, 127) for m, a in zip(mats, amaxes)]
    ratios = len(RATIOS)

    def paired(h: torch.Tensor) -> torch.Tensor:  # candidate a * ratios + b: ratio a for w_ih, b for w_hh
        hx, hxh, hh = h[:n_in, :n_in], h[:n_in, n_in:], h[n_in:, n_in:]
        pair = quadratic(errors[0], hx)[:, None] + quadratic(errors[1], hh)[None] \
            + 2.0 * quadratic(errors[0], hxh, errors[1])
        return pair.reshape(ratios * ratios, -1)

    full = [half.hessian(centered) for half in halves]
    checked = [paired(h) for h in full]
    best, minmax, searched = _choose([paired(_diagonal(h)) for h in full] if diagonal else checked, checked,
                                     DIAGONAL_MARGIN if diagonal else None)
    if best is None:
        return None
    new = []
    for m, w, a, pick in zip(mats, weights, amaxes, (best // ratios, best % ratios)):
        scale = RATIOS[pick] * a / 127.0
        codes = torch.clamp(torch.round(m / scale[:, None]), -127, 127)
        value = (codes * scale[:, None]).to(w.dtype)
        # rows the lowering would not round back to these codes (a range under its floor) keep min/max
        lowered, _ = symmetric_rows(value.double().numpy())
        keep = torch.from_numpy(np.any(lowered != codes.numpy(), axis=1)) | (scale * 127.0 < ROW_FLOOR)
        if bool(keep.any()):
            nearest, nearest_scale = symmetric_rows(m.numpy())
            value[keep] = torch.from_numpy(nearest * nearest_scale[:, None])[keep].to(w.dtype)
        new.append(value)
    for source, value in zip(sources, new):
        set_attr_value(gm, str(source.target), value)  # type: ignore[union-attr]
        for env in quant:
            env[source] = value
    return Searched(layer.name, minmax, searched, tuple(str(s.target) for s in sources),  # type: ignore[union-attr]
                    tuple(w.detach().clone() for w in weights))
