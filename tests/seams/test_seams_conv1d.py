"""A Conv1d network written as users write it (nn.Sequential of Conv1d, BatchNorm1d, ReLU, MaxPool1d,
then AdaptiveAvgPool1d and Linear) runs at int8 in one layout: the size-1 dim views around each Conv1d,
MaxPool1d and the average pool keep their input's channels-last bytes (mcu/passes/conv_views.py
keeps_layout), so the only layout change is the model input's [N, C, L] to [N, L, C]."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from mcu.api import CompiledModel, compile as mcu_compile

_MODELS: dict[str, CompiledModel] = {}


def _compiled(backend: str | None) -> CompiledModel:
    key = backend or "default"
    if key not in _MODELS:
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Conv1d(3, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(8, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 5)).eval()
        data = [(torch.randn(1, 3, 64),) for _ in range(10)]
        _MODELS[key] = mcu_compile(model, data[0], board="mps2-an505", quantize="int8", calibration=data[:8],
                                   test_inputs=data[8:], name="conv1d_stack", backend=backend)
    return _MODELS[key]


def test_conv1d_stack_has_no_layout_changes_between_layers() -> None:
    cm = _compiled(None)
    layouts = [op for op in cm.graph.ops if op.kind == "layout"]
    first_conv = next(i for i, op in enumerate(cm.graph.ops) if op.kind == "conv2d")
    assert len(layouts) == 1 and cm.graph.ops.index(layouts[0]) < first_conv  # the model input's only
    assert cm.graph.fallbacks == [] and cm.reference_is_exact
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.host_model().run_physical(cm.encode_inputs(x))):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))


def test_conv1d_stack_is_one_portable_partition() -> None:
    cm = _compiled("portable")
    assert len(cm.partitions.partitions) == 1
    assert sum(op.kind == "layout" for op in cm.graph.ops) == 1
