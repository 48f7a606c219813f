"""Headroom for int16 activation ranges (mcu/quantize/headroom.py): at w8a16 each calibrated activation range is
widened by its largest sample peak over its second largest, so an input a little past the calibration data is not
clipped; int8 keeps calibration's min/max."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mcu.quantize.flow import quantize_static
from mcu.quantize.headroom import MOST


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _output_scale(converted: torch.fx.GraphModule) -> float:
    """The scale of the last quantize node: the model output's."""
    last = [n for n in converted.graph.nodes if n.op == "call_function" and "quantize_per_tensor" in str(n.target)
            and "dequantize" not in str(n.target)][-1]
    return float(last.args[1])


@pytest.mark.slow  # two quantizations
def test_int16_ranges_widen_by_the_peak_past_the_others_and_int8_ranges_do_not() -> None:
    model = Mlp().eval()
    g = torch.Generator().manual_seed(4)
    calibration = [(torch.randn(1, 8, generator=g),) for _ in range(8)]
    with torch.no_grad():
        first = max(range(8), key=lambda i: float(model(*calibration[i]).abs().max()))
        calibration[first] = (calibration[first][0] * 1.3,)  # one sample well past the others
        outs = [model(*c) for c in calibration]
    peaks = sorted((float(o.abs().max()) for o in outs), reverse=True)
    factor = min(peaks[0] / peaks[1], MOST)
    assert factor > 1.05  # the seeded set has one sample past the others: a range to widen
    w8a16 = quantize_static(model, calibration[0], calibration, act_bits=16)
    int8 = quantize_static(model, calibration[0], calibration, act_bits=8)
    assert abs(_output_scale(w8a16) / (factor * peaks[0] / 32767.5) - 1) < 1e-3
    low, high = min(float(o.min()) for o in outs), max(float(o.max()) for o in outs)
    assert abs(_output_scale(int8) / ((high - low) / 255) - 1) < 1e-3
    # the sample that set the range, larger: its output goes past calibration's peak, which would clip it by that
    # much, but stays inside the widened range, so only the weights' rounding error is left
    top = max(calibration, key=lambda c: float(model(*c).abs().max()))[0] * (1 + (factor - 1) / 2)
    with torch.no_grad():
        want = model(top)
        past = float(want.abs().max()) - peaks[0]
        assert 0 < past and float(want.abs().max()) < factor * peaks[0]
        assert float((w8a16(top) - want).abs().max()) < 0.2 * past
