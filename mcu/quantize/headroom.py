"""Headroom for int16 activation ranges (w8a16): each calibrated int16 activation range widened to where one new
input's peak would pass it with chance PAST, before anything reads it.

A range is the largest magnitude the calibration samples reached, and a new input of the same distribution may go
past it: on tcn, 480 fresh standard-normal inputs (the distribution of its calibration set) reach 1.07 to 1.29
times the ranges its 16 calibration samples set, and the clipped values left w8a16 41.9 dB of output SQNR where
its int8 weights alone allow 59.2 dB. How far a new sample goes is estimated from the samples' peaks (each
sample's largest magnitude at the tensor): a peak is the maximum of many values, and such maxima follow a Gumbel
law, fitted here by the peaks' mean and standard deviation; the range becomes that law's 1 - PAST quantile
(none of the 480 past most of tcn's widened ranges, 0.2 % past the others). A tensor whose peak is about the same
on every sample (a near-constant output, a saturating value) keeps its range, and with it its resolution: at 16
bits the widening costs 20 log10(factor) dB of that tensor's own SQNR, small beside int8 weights' error, but not
nothing on models whose outputs the weights barely move (ds_cnn's test inputs lose 1.1 dB). At 8 bits that cost
would be the model's error, so int8 keeps min/max.

Only min/max observers of int16 activations widen; fixed output parameters (sigmoid, tanh, softmax: 2^-15) keep
theirs. An observer two ops share is one module, its peaks those of both."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule

#: the most a range widens (a sample whose peak is this much past the others' is an outlier, not a trend)
MOST = 2.0
#: the chance that one new input's peak goes past its tensor's widened range
PAST = 1e-3
EULER = 0.5772156649015329  # the Euler-Mascheroni constant: the standard Gumbel distribution's mean


@dataclass
class PeakTracker:
    """The per-sample peak magnitudes of every int16 min/max activation observer of a prepared model, recorded
    around each calibration sample's run (:meth:`before`, the run, :meth:`after`) while the observers keep the
    whole set's min and max."""

    prepared: GraphModule
    observers: list[Any] = field(init=False)
    peaks: list[list[float]] = field(init=False)
    _saved: list[tuple[torch.Tensor, torch.Tensor]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        # lazy: keeps torchao out of this module's import
        from torchao.quantization.pt2e import MinMaxObserver

        self.observers = [m for m in self.prepared.modules()  # (a shared observer once)
                          if type(m) is MinMaxObserver and m.dtype == torch.int16]
        self.peaks = [[] for _ in self.observers]

    def before(self) -> None:
        self._saved = [(o.min_val.clone(), o.max_val.clone()) for o in self.observers]
        for o in self.observers:
            o.reset_min_max_vals()

    def after(self) -> None:
        for o, (lo, hi), peaks in zip(self.observers, self._saved, self.peaks):
            if o.min_val.numel() == 1 and bool(torch.isfinite(o.min_val)) and bool(torch.isfinite(o.max_val)):
                peaks.append(max(-float(o.min_val), float(o.max_val)))
            if lo.numel() == o.min_val.numel():
                o.min_val.copy_(torch.minimum(lo, o.min_val))
                o.max_val.copy_(torch.maximum(hi, o.max_val))

    def widen(self) -> list[float]:
        """Widen each observer's range by :func:`widening` of its sample peaks; returns the factors."""
        factors = []
        for o, peaks in zip(self.observers, self.peaks):
            factor = widening(peaks)
            if factor > 1.0 and bool(torch.isfinite(o.min_val).all()) and bool(torch.isfinite(o.max_val).all()):
                o.min_val.mul_(factor)
                o.max_val.mul_(factor)
            factors.append(factor)
        return factors


def widening(peaks: list[float]) -> float:
    """How far a range set by the largest of ``peaks`` (one per calibration sample) widens: to the level one new
    sample's peak passes with chance PAST, from the Gumbel distribution the peaks are fitted to by their mean and
    standard deviation, over the largest peak; at least 1, at most MOST."""
    if len(peaks) < 2 or max(peaks) <= 0:
        return 1.0
    mean = sum(peaks) / len(peaks)
    spread = math.sqrt(sum((p - mean) ** 2 for p in peaks) / (len(peaks) - 1)) * math.sqrt(6.0) / math.pi
    level = mean - EULER * spread - spread * math.log(-math.log1p(-PAST))
    return min(max(level / max(peaks), 1.0), MOST)
