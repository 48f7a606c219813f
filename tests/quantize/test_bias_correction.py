"""Bias correction (mcu/quantize/bias_correction.py): a layer whose rounded weights all fall the same way shifts
its output by their sum times the inputs' mean; the corrected bias takes that shift out. Measured through the
lowered graph's integer reference (what the C and program files compute, bit for bit), on inputs apart from the
calibration data; the correction changes biases only, not the graph's ops or weights; the generated C equals
the reference with it; the flag's defaults and its refusal outside the static modes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.errors import McuError
from mcu.quantize import modes
from mcu.reference.encoding import decode, encode
from mcu.reference.interp import Reference

torch.manual_seed(0)


class Skewed(nn.Module):
    """A 1x1 convolution without a bias, then a linear layer, whose int8 weights all round the same way: the
    grid is set by each channel's largest weight (127 steps), the rest sit at k + 0.6 steps, so that each rounds
    up by 0.4 of a step."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 1, bias=False)
        self.fc = nn.Linear(6 * 5 * 5, 3)
        with torch.no_grad():
            for layer in (self.conv, self.fc):
                w = layer.weight.view(layer.weight.shape[0], -1)
                codes = torch.randint(3, 40, w.shape).double() + 0.6
                codes[:, 0] = 127.0
                w.copy_((codes * 0.01).float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def _inputs(n: int) -> list[tuple[torch.Tensor]]:
    return [(torch.rand(1, 4, 5, 5),) for _ in range(n)]  # positive: the rounding errors add up


@pytest.fixture(scope="module")
def model_and_data() -> tuple[nn.Module, list, list, dict]:
    torch.manual_seed(0)  # the same draw whatever ran before in this worker
    return Skewed().eval(), _inputs(16), _inputs(8), {}


def _lowered(model_and_data, quantize: str, corrected: bool) -> mcu.api.LoweredModel:
    model, calibration, tests, seen = model_and_data
    if (quantize, corrected) not in seen:
        seen[quantize, corrected] = mcu.api.lower(model, calibration[0], quantize=quantize, calibration=calibration,
                                                  test_inputs=tests, name="skewed", bias_correction=corrected)
    return seen[quantize, corrected]


def _mean_error(lowered: mcu.api.LoweredModel, model: nn.Module, inputs: list) -> np.ndarray:
    """Per output channel, the mean of (integer reference - fp32) over ``inputs``."""
    graph = lowered.graph
    t_in, t_out = graph.inputs[0], graph.outputs[0]
    errors = []
    for (x,) in inputs:
        flat = encode(x.numpy(), t_in.name, t_in.shape, t_in.dim_order, t_in.dtype, t_in.quant.scale[0],
                      t_in.quant.zero_point[0])
        out = Reference(graph).run([flat])[0]
        got = decode(out, t_out.shape, t_out.dim_order, t_out.dtype, t_out.quant.scale[0], t_out.quant.zero_point[0])
        with torch.no_grad():
            want = model(x).double().numpy()
        errors.append((got.astype(np.float64) - want).reshape(-1))
    return np.mean(errors, axis=0)


def _biases(lowered: mcu.api.LoweredModel) -> dict[str, np.ndarray]:
    return {op.kind: op.inputs[2].data.copy() for op in lowered.graph.ops if op.kind in ("conv2d", "linear")}


def test_bias_correction_removes_the_mean_output_error_of_rounded_weights(model_and_data) -> None:
    """int8 (off by default); w8a16, on by default, is measured on a whole model in test_s16_accuracy.py."""
    model, _, tests, _ = model_and_data
    quantize = "int8"
    plain, corrected = _lowered(model_and_data, quantize, False), _lowered(model_and_data, quantize, True)
    before, after = _mean_error(plain, model, tests), _mean_error(corrected, model, tests)
    step = corrected.graph.outputs[0].quant.scale[0]
    print(f"{quantize}: mean output error {np.abs(before).max() / step:.2f} -> {np.abs(after).max() / step:.2f} "
          f"output steps")
    assert np.abs(before).max() > 3 * step  # the skew is there to correct
    assert np.abs(after).max() < np.abs(before).max() / 4
    # only the biases moved: the same ops, the same weights, and the bias-less convolution has one now
    assert [op.kind for op in plain.graph.ops] == [op.kind for op in corrected.graph.ops]
    for a, b in zip(plain.graph.ops, corrected.graph.ops):
        if a.kind in ("conv2d", "linear"):
            assert np.array_equal(a.inputs[1].data, b.inputs[1].data)
    moved = {k: np.abs(v - _biases(plain)[k]).max() for k, v in _biases(corrected).items()}
    assert all(d > 0 for d in moved.values()), moved


def test_corrected_biases_stay_bit_exact_in_the_generated_c(model_and_data) -> None:
    tests = model_and_data[2]
    cm = _lowered(model_and_data, "int8", True).compile("mps2-an505")
    for x in tests[:3]:
        for got, want in zip(cm.run_raw_c(*x), cm.reference_raw(*x)):
            assert np.array_equal(got, want)


def test_the_flag_defaults_per_mode_and_is_refused_outside_the_static_modes() -> None:
    assert [modes.corrects_biases(m, None) for m in (modes.INT8, modes.W4A8, modes.W8A16, modes.MIXED)] == \
        [False, True, True, False]
    assert not modes.corrects_biases(modes.W8A16, False) and modes.corrects_biases(modes.INT8, True)
    assert not modes.corrects_biases(modes.NONE, None)
    with pytest.raises(McuError, match="--bias-correction .* does not apply to --quantize int8-weight"):
        modes.corrects_biases(modes.INT8_WEIGHT, True)


class Cached(nn.Module):
    """A linear layer whose output a buffer keeps between calls (a KV cache's index_put_)."""

    def __init__(self, stateful: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.stateful = stateful
        self.register_buffer("cache", torch.zeros(3, 4), persistent=False)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if not self.stateful:
            return y
        self.cache.index_put_((pos,), y)
        return self.cache.sum(0, keepdim=True)


def test_a_model_that_writes_its_buffers_keeps_its_biases() -> None:
    """The fp32 and the quantized runs would write the one buffer in turn: no correction (on the float graph,
    where the layer's correction would be zero, it is still listed)."""
    from mcu.quantize.bias_correction import correct_biases
    from mcu.quantize.flow import export_for_quantization

    example = (torch.randn(1, 4), torch.tensor([1]))
    for stateful, layers in ((False, 1), (True, 0)):
        gm = export_for_quantization(Cached(stateful).eval(), example)
        assert len(correct_biases(gm, [example, (torch.randn(1, 4), torch.tensor([2]))])) == layers
