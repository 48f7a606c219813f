"""A model file's evaluation set: ``eval_data``, a list of ``(inputs, label)`` pairs or a function returning an
iterable of them (``inputs`` a tensor or a tuple of tensors shaped like ``example_inputs``), and optionally
``eval_metric``: a function ``(output, label) -> float`` scoring one sample (its ``__name__`` names it), or
``"top1"`` / ``"top5"``; default top-1 accuracy of the first output. ``mcu eval`` measures with it, and
``--quantize mixed`` chooses each layer's precision by it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from mcu.capture.loader import ModelSpec, check_input_shapes
from mcu.errors import McuError

Metric = Callable[[torch.Tensor, Any], float]


def _topk(k: int) -> Metric:
    def metric(output: torch.Tensor, label: Any) -> float:
        top = torch.topk(output.reshape(-1), min(k, output.numel())).indices
        return float(int(label) in top.tolist())

    metric.__name__ = f"top{k}"
    return metric


@dataclass
class EvalSet:
    inputs: list[tuple[torch.Tensor, ...]]
    labels: list[Any]
    metric: Metric
    metric_name: str


def eval_set(spec: ModelSpec) -> EvalSet:
    where = str(spec.path or spec.name)
    data = spec.extras.get("eval_data")
    if data is None:
        raise McuError(f"{where}: defines no `eval_data`",
                       hint="add `eval_data = [(inputs, label), ...]` (or a function returning them) to the model file")
    if callable(data):
        data = data()
    inputs: list[tuple[torch.Tensor, ...]] = []
    labels: list[Any] = []
    try:
        for item in data:
            x, label = item
            inputs.append(tuple(x) if isinstance(x, (tuple, list)) else (x,))
            labels.append(label.item() if isinstance(label, torch.Tensor) and label.numel() == 1 else label)
    except (TypeError, ValueError):
        raise McuError(f"{where}: `eval_data` must hold (inputs, label) pairs",
                       hint="e.g. eval_data = [(x[i:i + 1], int(y[i])) for i in range(len(x))]") from None
    if not inputs:
        raise McuError(f"{where}: `eval_data` is empty")
    check_input_shapes(inputs, spec.example_inputs, "eval_data", where)
    metric = spec.extras.get("eval_metric", "top1")
    if isinstance(metric, str):
        if metric not in ("top1", "top5"):
            raise McuError(f"{where}: unknown eval_metric '{metric}'",
                           hint="use 'top1', 'top5' or a function (output, label) -> float")
        metric = _topk(int(metric[3:]))
    if not callable(metric):
        raise McuError(f"{where}: `eval_metric` must be 'top1', 'top5' or a function (output, label) -> float")
    return EvalSet(inputs, labels, metric, getattr(metric, "__name__", "metric"))
