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
from mcu.plan.drawing import plan_svg
from mcu.plan.prefix import KIND, candidate_ends, ring_parts
from mcu.program.writer import UnsupportedKernel
from cli_runner import assert_one_line_error, mcu_in_process
from repo import EXAMPLES, requires_qemu


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
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


_LOWERED: dict[str, LoweredModel] = {}

# MobileNetV1's first layers at a small size: a stem widening the input, depthwise-separable pairs (one
# strided), then a residual depthwise layer.
_V1 = [(3, 1, 1, False, 16, False), (3, 1, 1, True, 16, False), (1, 1, 0, False, 24, False),
       (3, 2, 1, True, 24, False), (1, 1, 0, False, 16, False), (3, 1, 1, True, 16, True)]


def _v1(quantize: str = "int8") -> LoweredModel:
    if quantize not in _LOWERED:
        torch.manual_seed(7)
        _LOWERED[quantize] = _lower(_Chain(3, _V1), (1, 3, 16, 12), 7, quantize)
    return _LOWERED[quantize]


@pytest.mark.xdist_group("stream_prefix_v1")  # one worker lowers the model once
def test_streamed_input_is_not_in_the_arena_and_equals_the_reference() -> None:
    lowered = _v1()
    whole = lowered.compile()
    streamed = lowered.compile(stream_input=True)
    (op,) = _prefixes(streamed)
    x = streamed.graph.inputs[0]
    names = [b.name for b in streamed.memory.plan.buffers]
    assert x.name in [b.name for b in whole.memory.plan.buffers] and x.name not in names
    assert streamed.memory.arena_size < whole.memory.arena_size
    prefix = op.attrs["prefix"]
    assert id(x) in prefix.rings and prefix.rings[id(x)].rows == 3  # the stem's 3x3 window of input rows
    assert f"{op.name}_rings" in names
    h = streamed.library.files[f"{streamed.library.prefix}_model.h"]
    assert f"mcu_status {streamed.library.prefix}_input_rows(void *context, int32_t first_row" in h
    _same_as_reference(streamed)  # _run: the rows read from the whole input through the same loop
    svg = plan_svg(streamed.memory.plan, "streamed", rings=ring_parts(streamed.graph))
    assert svg.count('<g class="ring">') == len(prefix.rings) and x.name in svg


@pytest.mark.xdist_group("stream_prefix_v1")
def test_prefix_ends_where_the_arena_is_smallest_and_program_files_refuse_it() -> None:
    lowered = _v1()
    cm = lowered.compile(stream_prefix=True)
    (op,) = _prefixes(cm)
    ends = candidate_ends(lowered.graph)
    arenas = {n: lowered.compile(stream_prefix=n).memory.arena_size for n in ends}
    assert cm.memory.arena_size == min(arenas.values()) < lowered.compile().memory.arena_size
    assert len(op.attrs["ops"]) == min(n for n, a in arenas.items() if a == cm.memory.arena_size)
    budget = max(arenas.values())
    assert lowered.compile(stream_prefix=True, ram_budget=budget).memory.arena_size <= budget
    with pytest.raises(UnsupportedKernel, match=f"program files do not carry a streamed prefix \\({op.name}"):
        cm.program_image()


def test_fp32_prefix_equals_unfused_c() -> None:
    """fp32: the same kernels on the same rows, so the same bits as the unfused generated C."""
    lowered = _v1("none")
    whole = lowered.compile()
    streamed = lowered.compile(stream_input=True)
    assert len(_prefixes(streamed)) == 1
    for x in streamed.spec.test_inputs:
        for want, got in zip(whole.run_raw_c(*x), streamed.run_raw_c(*x)):
            assert want.dtype == np.float32
            np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.xdist_group("stream_prefix_v1")
def test_streamed_input_on_the_device_reads_the_firmware_callback() -> None:
    """The firmware harness implements <model>_input_rows() from its vectors: QEMU, the M33."""
    cm = _v1().compile("mps2-an505", stream_input=True)
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)


def test_command_line_refuses_a_streamed_prefix_in_a_program_file() -> None:
    proc = mcu_in_process("run", "--board", "mps2-an505", "--stream-input", "--program", str(EXAMPLES / "small_cnn.py"))
    assert_one_line_error(proc, "program files do not carry a streamed prefix")
