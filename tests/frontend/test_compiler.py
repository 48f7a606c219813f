"""The compiler stages, tested by the shape of the graph and by host parity with eager PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.capture.export import capture
from mcu.capture.edge import to_edge
from mcu.frontend.lower import from_exported
from mcu.ir import CHANNELS_LAST
from mcu.plan.memory import plan_memory
from mcu.pipeline import lower
from repo import REFERENCE_MODELS, have_cross_tools

FP32_TOL = 1e-4


def _graph(model: nn.Module, *inputs: torch.Tensor):
    return from_exported(to_edge(capture(model.eval(), inputs)), name="t")


def test_batch_norm_folds_and_relu_fuses() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
    g = _graph(model, torch.randn(1, 3, 8, 8))
    assert g.op_counts() == {"conv2d": 1, "batch_norm": 1, "clamp": 1, "reshape": 1, "linear": 1}
    g = lower(g)
    # flatten of an NHWC tensor with H, W > 1 needs one layout change before the alias.
    assert g.op_counts() == {"conv2d": 1, "layout": 1, "reshape": 1, "linear": 1}
    conv = g.ops[0]
    assert conv.attrs["act"] == (0.0, None)
    assert conv.inputs[0].dim_order == CHANNELS_LAST and conv.output.dim_order == CHANNELS_LAST
    reshape = next(op for op in g.ops if op.kind == "reshape")
    assert reshape.output.alias_of is reshape.inputs[0]


def test_relu_with_two_readers_is_not_fused() -> None:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            return torch.relu(y) + y

    g = lower(_graph(M(), torch.randn(1, 2, 4, 4)))
    assert g.op_counts() == {"conv2d": 1, "clamp": 1, "add": 1}


def test_constant_subgraphs_are_folded() -> None:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ (self.w * 2).t()

    g = lower(_graph(M(), torch.randn(2, 6)))
    assert g.op_counts() == {"linear": 1}


def _check_parity(cm: mcu.api.CompiledModel, inputs: tuple[torch.Tensor, ...]) -> None:
    got = cm.run(*inputs)
    want = cm.eager(*inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        scale = float(w.abs().max())
        assert float((g - w).abs().max()) <= FP32_TOL * scale


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_reference_model_host_parity(compiled, name: str) -> None:
    cm = compiled(name)
    for x in cm.spec.test_inputs:
        _check_parity(cm, x)
    # Without overlap contracts the planner reaches the live-set bound exactly; with them it goes below.
    assert plan_memory(cm.graph, use_overlaps=False).arena_size == cm.memory.live_set
    assert cm.memory.lower_bound <= cm.memory.arena_size <= cm.memory.live_set


class OpZoo(nn.Module):
    """Ops beyond the reference models: broadcasting, cat, permute, softmax on NHWC, pools, pad, etc."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, stride=2, padding=1, dilation=1)
        self.dw = nn.Conv2d(6, 12, 3, padding=2, dilation=2, groups=6)
        self.bn = nn.BatchNorm2d(12)
        self.scale = nn.Parameter(torch.randn(1, 12, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardtanh(self.conv(x), -0.5, 0.5)
        z = self.dw(y)
        skip = z
        z = self.bn(torch.sigmoid(z))  # not foldable: sigmoid sits between
        z = z * self.scale + torch.tanh(skip) - 0.25
        z = torch.cat([z, torch.nn.functional.hardswish(z)], dim=1)
        z = torch.nn.functional.pad(z, (1, 0, 2, 1))
        a = torch.nn.functional.max_pool2d(z, 3, stride=2, padding=1)  # 12x9 -> 6x5
        b = torch.nn.functional.avg_pool2d(z, 2, stride=2, ceil_mode=True, count_include_pad=False)  # -> 6x5
        c = torch.softmax(a + b, dim=1).permute(0, 2, 3, 1)
        return torch.clamp(c.reshape(1, -1) / 2.0, min=0.001)


def test_op_zoo_host_parity() -> None:
    torch.manual_seed(3)
    model = OpZoo().eval()
    x = torch.randn(1, 3, 17, 15)
    cm = mcu.compile(model, (x,), board="mps2-an505")
    _check_parity(cm, (x,))
    _check_parity(cm, (torch.randn(1, 3, 17, 15) * 3,))


class _Slices(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(4 * 3 * 4 + 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        a = y[:, 2:6, 1:7:2, ::2]  # channels, a strided row window, every other column
        b = y[:, -2:, 0, 0]  # the last two channels of one pixel
        return self.fc(torch.cat([torch.flatten(a, 1), b], dim=1))


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_slices(quantize: str) -> None:
    torch.manual_seed(2)
    model = _Slices().eval()
    x = torch.randn(1, 3, 8, 8)
    cm = mcu.compile(model, (x,), board="mps2-an505", quantize=quantize,
                     calibration=[(torch.randn(1, 3, 8, 8),) for _ in range(8)])
    assert cm.graph.op_counts().get("slice", 0) >= 3
    if quantize == "none":
        _check_parity(cm, (x,))
    else:
        assert cm.graph.fallbacks == []
        for ref, host in zip(cm.reference_raw(x), cm.run_raw_c(x)):
            np.testing.assert_array_equal(host, ref)
        if have_cross_tools():
            assert cm.simulate().passed  # and on the device, bit-exact with the reference
