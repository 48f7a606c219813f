"""Headroom for int16 activation ranges (mcu/quantize/headroom.py): at w8a16 every calibrated activation range is
widened by HEADROOM, so an input a little past the calibration data is not clipped; int8 keeps calibration's
min/max."""

from __future__ import annotations

import torch
from torch import nn

from mcu.quantize.flow import quantize_static
from mcu.quantize.headroom import HEADROOM


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


def test_int16_ranges_get_headroom_and_int8_ranges_do_not() -> None:
    model = Mlp().eval()
    g = torch.Generator().manual_seed(4)
    calibration = [(torch.randn(1, 8, generator=g),) for _ in range(8)]
    with torch.no_grad():
        peak = max(float(model(*c).abs().max()) for c in calibration)
        low, high = (min(float(model(*c).min()) for c in calibration), max(float(model(*c).max()) for c in calibration))
    w8a16 = quantize_static(model, calibration[0], calibration, act_bits=16)
    int8 = quantize_static(model, calibration[0], calibration, act_bits=8)
    assert abs(_output_scale(w8a16) / (HEADROOM * peak / 32767.5) - 1) < 1e-3
    assert abs(_output_scale(int8) / ((high - low) / 255) - 1) < 1e-3
    # the calibration sample that reached the peak, 15 % larger: its output goes past the calibrated range, which
    # would clip it by that much; the headroom keeps it to the weights' rounding error
    with torch.no_grad():
        top = max(calibration, key=lambda c: float(model(*c).abs().max()))[0] * 1.15
        want = model(top)
        past = float(want.abs().max()) - peak
        assert past > 0.05 * peak
        assert float((w8a16(top) - want).abs().max()) < 0.2 * past
