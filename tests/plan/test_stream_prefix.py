"""The streamed prefix (mcu/plan/prefix.py, mcu/emit/prefix.py): the network's first ops run row by row
through rings of rows equal the Python integer reference of the unfused graph bit for bit (int8) and the
unfused generated C (fp32), over kernels, strides, paddings, groups and residual adds; the planner puts
only the prefix's output in the arena, and with a streamed input not the input either."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

from mcu.api import CompiledModel, LoweredModel, lower_spec
from mcu.capture.loader import spec_from_objects
from mcu.plan.prefix import KIND, candidate_ends, schedule


class _Chain(nn.Module):
    """Convolutions (kernel, stride, padding, depthwise?) with ReLUs, and a residual add around the
    layer marked so when its shapes allow."""

    def __init__(self, cin: int, layers: list[tuple[int, int, int, bool, int, bool]]) -> None:
        super().__init__()
        mods = []
        self.residual = []
        c = cin
        for k, s, pad, depthwise, cout, residual in layers:
            out = c if depthwise else cout
            mods.append(nn.Sequential(nn.Conv2d(c, out, k, s, pad, groups=c if depthwise else 1), nn.ReLU()))
            self.residual.append(residual and s == 1 and 2 * pad == k - 1 and out == c)
            c = out
        self.layers = nn.ModuleList(mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer, residual in zip(self.layers, self.residual):
            x = x + layer(x) if residual else layer(x)
        return x


def _lower(model: nn.Module, shape: tuple[int, ...], seed: int, quantize: str = "int8") -> LoweredModel:
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    calib = [(torch.randn(shape, generator=gen),) for _ in range(4)]
    tests = [(torch.randn(shape, generator=gen) * 1.5,) for _ in range(2)]
    return lower_spec(spec_from_objects(model, calib[0], calib, tests, name="prefix_case"), quantize)


def _prefixes(cm: CompiledModel) -> list:
    return [op for op in cm.graph.ops if op.kind == KIND]


def _same_as_reference(cm: CompiledModel) -> None:
    for x in cm.spec.test_inputs:
        for ref, got in zip(cm.reference_raw(*x), cm.run_raw_c(*x)):
            np.testing.assert_array_equal(got, ref)


@st.composite
def _layers(draw: st.DrawFn) -> list[tuple[int, int, int, bool, int, bool]]:
    result = []
    for _ in range(draw(st.integers(2, 4))):
        k = draw(st.sampled_from([1, 3, 3, 5]))
        result.append((k, draw(st.sampled_from([1, 1, 2])), draw(st.integers(0, k // 2)), draw(st.booleans()),
                       draw(st.sampled_from([4, 8])), draw(st.booleans())))
    return result


def _fits(layers: list[tuple[int, int, int, bool, int, bool]], h: int) -> bool:
    for k, s, pad, *_ in layers:
        h = (h + 2 * pad - k) // s + 1
        if h < 1:
            return False
    return True


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=_layers(), h=st.integers(5, 16), w=st.integers(3, 9), cin=st.sampled_from([3, 4]),
       seed=st.integers(0, 2**16))
def test_prefix_equals_unfused_reference(layers: list, h: int, w: int, cin: int, seed: int) -> None:
    if not _fits(layers, h) or not _fits(layers, w):
        return
    torch.manual_seed(seed)
    lowered = _lower(_Chain(cin, layers), (1, cin, h, w), seed)
    ends = candidate_ends(lowered.graph)
    assert ends, [op.kind for op in lowered.graph.ops]
    cm = lowered.compile(stream_prefix=ends[-1])
    assert len(_prefixes(cm)) == 1
    _same_as_reference(cm)
