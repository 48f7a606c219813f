"""A Conv1d network written as users write it (nn.Sequential of Conv1d, BatchNorm1d, ReLU, MaxPool1d,
then AdaptiveAvgPool1d and Linear) runs at int8 in one layout: the size-1 dim views around each Conv1d,
MaxPool1d and the average pool keep their input's channels-last bytes (mcu/passes/conv_views.py
keeps_layout), so the only layout change is the model input's [N, C, L] to [N, L, C]. On a core with the
DSP extension the optimized backend runs it all as one partition: that layout change (mcu_transpose_s8), the
convolutions (packed kernel), the max poolings one row high (mcu_max_pool1d_s8), the global average pool and
the classifier, with the views between them (no code) inside the run."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from mcu.api import CompiledModel, LoweredModel, backend_options, lower
from repo import requires_qemu

_MODELS: dict[str, CompiledModel] = {}
_LOWERED: list[LoweredModel] = []


def _compiled(backend: str | None, board: str = "mps2-an505") -> CompiledModel:
    """The network quantized and lowered once, compiled once per backend order and board."""
    key = f"{backend or 'default'}@{board}"
    if not _LOWERED:
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Conv1d(3, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(8, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 5)).eval()
        data = [(torch.randn(1, 3, 64),) for _ in range(10)]
        _LOWERED.append(lower(model, data[0], quantize="int8", calibration=data[:8], test_inputs=data[8:],
                              name="conv1d_stack"))
    if key not in _MODELS:
        _MODELS[key] = _LOWERED[0].compile(board, options=backend_options(backend=backend), backend=backend)
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


def test_conv1d_stack_is_one_optimized_partition_on_a_dsp_core() -> None:
    cm = _compiled(None)
    parts = cm.partitions.partitions
    ops = {op.name: op for op in cm.graph.ops}
    assert [backend for backend, _ in parts] == ["optimized"], parts
    assert {"layout", "conv2d", "max_pool2d", "mean_hw", "linear"} <= {ops[name].kind for name in parts[0][1]}
    assert cm.partitions.graph_breaks == 0
    source = "\n".join(cm.library.files.values())
    assert source.count("mcu_max_pool1d_s8(") == 2 and "mcu_max_pool2d_s8(" not in source
    assert source.count("mcu_transpose_s8(") == 1 and "mcu_permute(" not in source  # the input's layout
    for x in cm.spec.test_inputs:  # the generated C (optimized kernels) and the program (portable ones)
        want = cm.reference_raw(*x)
        for got in (cm.run_raw_c(*x), cm.run_raw(*x)):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))


def test_conv1d_stack_is_one_partition_on_the_m0plus() -> None:
    """No DSP extension, no optimized backend: the portable kernels take it all, views included."""
    cm = _compiled(None, "mps2-an385-m0plus")
    assert [backend for backend, _ in cm.partitions.partitions] == ["portable"]


@requires_qemu
def test_conv1d_stack_runs_bit_exact_on_mps2_an505() -> None:
    cm = _compiled(None)
    run = cm.simulate()
    assert run.passed, run.console[-2000:]
