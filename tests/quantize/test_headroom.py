"""Headroom for int16 activation ranges (mcu/quantize/headroom.py): at w8a16 each calibrated activation range is
widened to where a Gumbel distribution fitted to the calibration samples' peaks puts one new input in PAST, so an
input a little past the calibration data is not clipped; int8 keeps calibration's min/max."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from mcu.quantize.flow import quantize_static
from mcu.quantize.headroom import MOST, PAST, widening


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
def test_int16_ranges_widen_past_the_calibration_peaks_and_int8_ranges_do_not() -> None:
    model = Mlp().eval()
    g = torch.Generator().manual_seed(4)
    calibration = [(torch.randn(1, 8, generator=g),) for _ in range(8)]
    with torch.no_grad():
        first = max(range(8), key=lambda i: float(model(*calibration[i]).abs().max()))
        calibration[first] = (calibration[first][0] * 1.3,)  # one sample well past the others
        outs = [model(*c) for c in calibration]
    peaks = sorted((float(o.abs().max()) for o in outs), reverse=True)
    factor = widening(peaks)
    assert 1.05 < factor < MOST  # the seeded set has one sample past the others: a range to widen
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


def test_widening_is_the_gumbel_quantile_of_the_peaks_over_the_largest() -> None:
    """Fitted by moments, as scipy's Gumbel distribution parameterises it; at least 1, at most MOST; no spread
    (every sample peaking alike) or too few samples leave a range as it is."""
    from scipy import stats  # here, not at collection: its import took a second of each worker's start

    peaks = [1.0, 1.3, 0.9, 1.1, 1.05, 0.95, 1.2, 1.0]
    scale = float(np.std(peaks, ddof=1)) * np.sqrt(6) / np.pi
    level = stats.gumbel_r.ppf(1 - PAST, loc=float(np.mean(peaks)) - np.euler_gamma * scale, scale=scale)
    assert widening(peaks) == pytest.approx(level / 1.3, rel=1e-12)
    assert widening([2.0] * 8) == 1.0 and widening([2.0]) == 1.0 and widening([0.0, 0.0]) == 1.0
    assert widening([0.1, 0.1, 0.1, 1.0]) == MOST  # one outlier far past a tight set: capped
    assert widening([1.0, 0.99999, 1.00001, 1.0]) == pytest.approx(1.0, abs=1e-4)


def test_widened_ranges_hold_all_but_about_past_of_new_peaks() -> None:
    """Peaks of many elements' maxima (a tensor's largest magnitude per sample) follow a Gumbel law: over many
    seeded sets of 16 calibration samples, the share of new samples past the widened range is near PAST (above
    the 1/17 that the largest of 16 leaves past it unwidened)."""
    rng = np.random.default_rng(5)
    past = []
    for _ in range(200):
        calibration = np.abs(rng.standard_normal((16, 512))).max(axis=1)
        fresh = np.abs(rng.standard_normal((200, 512))).max(axis=1)
        past.append(np.mean(fresh > calibration.max() * widening(list(calibration))))
    assert float(np.mean(past)) < 5 * PAST
