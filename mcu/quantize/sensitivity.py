"""The score ``--quantize mixed`` chooses by (mcu/passes/mixed_choice.py): a lowered int8 graph run through
the integer reference (the device's outputs, bit for bit), against the fp32 model.

- With ``eval_data`` in the model file: its metric (mcu/capture/evalset.py) in percent, averaged over every
  sample.
- Otherwise: the output SQNR in dB against fp32 on the calibration data, 10 log10(sum ref^2 / sum (out -
  ref)^2) over every output value of every sample (at most ``MAX_SAMPLES``, evenly spaced)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from mcu.capture.evalset import eval_set
from mcu.capture.loader import ModelSpec, flatten_outputs
from mcu.errors import McuError
from mcu.ir import Graph
from mcu.reference.encoding import decode, encode
from mcu.reference.interp import Reference

MAX_SAMPLES = 32


@dataclass(frozen=True)
class Scorer:
    """``score(graph)``: higher is better; ``metric``: ``sqnr_db`` or the eval metric's name."""

    score: Callable[[Graph], float]
    metric: str
    sqnr: bool
    samples: int

    def memoized(self, seen: dict[bytes, float]) -> Callable[[Graph], float]:
        """``score``, run once per distinct set of weight constants, kept in ``seen``: choices under several
        budgets share their path, so a sweep scores each configuration once."""

        def measured(graph: Graph) -> float:
            key = b"".join(t.data.tobytes() for op in graph.ops for t in op.inputs[1:5] if t.data is not None)
            if key not in seen:
                seen[key] = self.score(graph)
            return seen[key]

        return measured


def _evenly(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    return [items[int(i)] for i in sorted({int(v) for v in np.linspace(0, len(items) - 1, n)})]


def _outputs(graph: Graph, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """The graph's outputs through the integer reference, as real values in logical shape."""
    flat = [encode(x.detach().numpy().astype(np.float32), t.name, t.shape, t.dim_order,
                   t.dtype if t.quant is not None else "float32",
                   t.quant.scale[0] if t.quant is not None else None, t.quant.zero_point[0] if t.quant else 0)
            for x, t in zip(inputs, graph.inputs)]
    outs = Reference(graph).run(flat)
    return [decode(o, t.shape, t.dim_order, t.dtype, t.quant.scale[0] if t.quant is not None else None,
                   t.quant.zero_point[0] if t.quant is not None else 0).astype(np.float64)
            for o, t in zip(outs, graph.outputs)]


def _sqnr(fp32: list[list[np.ndarray]], got: list[list[np.ndarray]]) -> float:
    signal = sum(float(np.sum(r ** 2)) for rs in fp32 for r in rs)
    noise = sum(float(np.sum((g - r) ** 2)) for rs, gs in zip(fp32, got) for r, g in zip(rs, gs))
    if noise == 0:
        return math.inf
    return 10 * math.log10(max(signal, 1e-300) / noise)


def scorer(spec: ModelSpec) -> Scorer:
    """Made before the model is quantized: the fp32 outputs come from the float model."""
    where = str(spec.path or spec.name)
    if spec.extras.get("eval_data") is not None:
        data = eval_set(spec)

        def metric_score(graph: Graph) -> float:
            values = [data.metric(torch.from_numpy(_outputs(graph, x)[0]), label)
                      for x, label in zip(data.inputs, data.labels)]
            return 100 * float(np.mean(values))

        return Scorer(metric_score, data.metric_name, False, len(data.inputs))
    if not spec.calibration:
        raise McuError(f"{where}: --quantize mixed measures each layer on the calibration data, and there is none",
                       hint="add `calibration = [(x1,), (x2,), ...]` to the model file")
    inputs = _evenly(list(spec.calibration), MAX_SAMPLES)
    model = spec.extras.get("float_model")
    model = spec.model if model is None else model  # after quantization-aware training: the model before it
    with torch.no_grad():
        fp32 = [[t.detach().numpy().astype(np.float64) for _, t in flatten_outputs(model(*x), where)]
                for x in inputs]

    def sqnr_score(graph: Graph) -> float:
        return _sqnr(fp32, [_outputs(graph, x) for x in inputs])

    return Scorer(sqnr_score, "sqnr_db", True, len(inputs))
