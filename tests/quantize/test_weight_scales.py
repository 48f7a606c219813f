"""Searched weight scales (``--weight-rounding searched``, mcu/quantize/weight_scales.py) and GPTQ on recurrent
matrices (mcu/quantize/gptq.py): GPTQ on a grid of one step per weight equals the per-row call when the steps are
the rows'; the ratios' grids leave rows of uniform weights less error than min/max, short rows far less with
the grids coarser than min/max's; a layer with too few calibration rows is searched on their diagonal; an LSTM model's
searched build keeps every gate row's codes reaching 127 (so the lowering rounds them back to themselves), is
bit-exact in C and as a program file, and is closer to fp32 than nearest rounding on held-out inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.quantize import modes
from mcu.quantize.bias_correction import rounded_rows
from mcu.quantize.gptq import gptq_round
from mcu.quantize.weight_scales import OBSERVED_RATIOS, RATIOS, candidate_errors, quadratic
from mcu.reference import lstm_s16
from mcu.reference.interp import Reference
from mcu.reference.recurrent import symmetric_rows


def test_gptq_with_a_step_per_weight_equals_the_per_row_grid() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 4, generator=g, dtype=torch.float64) @ torch.randn(4, 24, generator=g, dtype=torch.float64)
    w = torch.randn(8, 24, generator=g, dtype=torch.float64)
    scale = w.abs().amax(dim=1) / 127
    h = 2.0 * x.T @ x
    assert torch.equal(gptq_round(w, h, scale[:, None].expand(-1, 24), -127, 127), gptq_round(w, h, scale, -127, 127))


def test_the_search_finds_grids_that_leave_less_error() -> None:
    """Rows of 32 uniform weights: where each falls between its grid points changes with the ratio, and the best
    of the 41 leaves less squared error than the largest magnitude's grid (about 5 % here)."""
    g = torch.Generator().manual_seed(2)
    w = torch.rand(64, 32, generator=g, dtype=torch.float64) * 2 - 1
    costs = quadratic(candidate_errors(w, w.abs().amax(dim=1), 127), torch.eye(32, dtype=torch.float64))
    best = costs.min(dim=0).values
    assert len(RATIOS) == 41 and float(RATIOS[0]) == 1.0
    assert float(best.sum()) < 0.98 * float(costs[0].sum())


def test_short_rows_find_their_grid_among_coarser_ones() -> None:
    """Rows of 8 uniform weights cannot spread the cost of clipping their largest weight: ratios of at most 1 leave
    them about as much error as min/max, the observed layers' candidates (up to 1.1, in quarter steps) less than
    half of it."""
    g = torch.Generator().manual_seed(3)
    w = torch.rand(64, 8, generator=g, dtype=torch.float64) * 2 - 1
    eye = torch.eye(8, dtype=torch.float64)
    below, wide = (quadratic(candidate_errors(w, w.abs().amax(dim=1), 127, r), eye) for r in (RATIOS, OBSERVED_RATIOS))
    assert float(OBSERVED_RATIOS[0]) == 1.0 and float(OBSERVED_RATIOS.max()) == pytest.approx(1.1)
    assert float(below.min(dim=0).values.sum()) > 0.97 * float(below[0].sum())
    assert float(wide.min(dim=0).values.sum()) < 0.5 * float(wide[0].sum())


def test_a_layer_with_few_calibration_rows_is_searched_on_the_diagonal() -> None:
    """A linear layer of 8 columns with 8 calibration samples (4 rows a half, under twice its width): scored on
    its inputs' per-column second moments, its rows move off min/max, which leaves its output closer to fp32 on
    held-out inputs."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(8, 8)).eval()
    calibration = [(torch.randn(1, 8) * torch.linspace(0.2, 2.0, 8),) for _ in range(8)]
    tests = [(torch.randn(1, 8) * torch.linspace(0.2, 2.0, 8),) for _ in range(64)]
    cms = {r: mcu.compile(model, calibration[0], quantize="w8a16", calibration=calibration, test_inputs=tests[:1],
                          name="few_rows", weight_rounding=r) for r in ("nearest", "searched")}
    scales = [np.asarray(next(op for op in cm.graph.ops if op.kind == "linear").inputs[1].quant.scale)
              for cm in cms.values()]
    assert not np.allclose(scales[0], scales[1])
    nearest, searched = (_sqnr(cms[r], tests) for r in ("nearest", "searched"))
    assert searched > nearest


class Lstm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.fc = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, _ = self.lstm(x)
        return self.fc(seq[:, -1])


def _smooth(n: int) -> list[tuple[torch.Tensor]]:
    """Sequences whose steps correlate (a slowly varying signal), as audio features do."""
    return [(torch.cumsum(torch.randn(1, 24, 6), dim=1) * 0.3,) for _ in range(n)]


@pytest.fixture(scope="module")
def built() -> tuple[nn.Module, list, dict[str, mcu.CompiledModel]]:
    torch.manual_seed(5)
    model = Lstm().eval()
    calibration, tests = _smooth(12), _smooth(6)
    return model, tests, {r: mcu.compile(model, calibration[0], quantize="w8a16", calibration=calibration,
                                         test_inputs=tests[:2], name="lstm_scales", weight_rounding=r)
                          for r in ("nearest", "searched")}


def _sqnr(cm: mcu.CompiledModel, inputs: list) -> float:
    """Output SQNR against fp32 of the program file (the integer reference's values) on ``inputs``."""
    signal = noise = 0.0
    for x in inputs:
        for got, want in zip(cm.run(*x), cm.eager(*x)):
            signal += float((want.double() ** 2).sum())
            noise += float(((got.double() - want.double()) ** 2).sum())
    return 10 * np.log10(signal / noise)


def test_searched_lstm_rows_round_back_and_stay_bit_exact(built) -> None:
    _, tests, cms = built
    cm = cms["searched"]
    lstms = [op for op in cm.graph.ops if op.kind == "lstm"]
    nearest = [op for op in cms["nearest"].graph.ops if op.kind == "lstm"]
    changed = 0
    for op, before in zip(lstms, nearest):
        for k, q in ((0, op.inputs[1].data), (1, op.inputs[2].data)):
            codes, _ = symmetric_rows(np.asarray(op.attrs["weights_real"][k], np.float64))
            assert np.array_equal(codes, q) and bool((np.abs(q.astype(np.int32)).max(axis=1) == 127).all())
        changed += int((op.inputs[2].data != before.inputs[2].data).sum())
    assert changed > 0
    assert cm.graph.fallbacks == [] and Reference(cm.graph).exact
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.runtime_program().method("forward").run_raw(*cm.encode_inputs(x)), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)


def test_searched_is_closer_to_fp32_on_held_out_inputs(built) -> None:
    _, tests, cms = built
    nearest, searched = (_sqnr(cms[r], tests) for r in ("nearest", "searched"))
    print(f"w8a16 LSTM output SQNR against fp32: nearest {nearest:.1f} dB, searched {searched:.1f} dB")
    assert searched > nearest + 1.0


def test_searched_is_w8a16s_default_only() -> None:
    assert modes.weight_rounding(modes.W8A16, None) == "searched"
    assert [modes.weight_rounding(m, None) for m in (modes.INT8, modes.W4A8, modes.MIXED)] == ["nearest"] * 3
    assert modes.weight_rounding(modes.INT8, "searched") == "searched"


def test_bias_corrections_twin_rounds_recurrent_matrices_as_the_16x8_lowering() -> None:
    """Bias correction's quantized run reads an LSTM's matrices as mcu_lstm_s16 will (per gate row), so that the
    layers after it are corrected for their rounding (kws_lstm w8a16: 60.0 -> 63.4 dB)."""
    g = torch.Generator().manual_seed(4)
    w_ih, w_hh = torch.randn(24, 5, generator=g) * 0.3, torch.randn(24, 6, generator=g) * 0.3
    w_hh[3] = 0.0  # a row under the lowering's floor
    p = lstm_s16.layer_params(w_ih.numpy(), w_hh.numpy(), None, None, 1e-4, 1e-4, 12)
    for w, codes in ((w_ih, p.w_ih), (w_hh, p.w_hh)):
        _, scale = symmetric_rows(w.double().numpy())
        np.testing.assert_array_equal(rounded_rows(w).numpy(), (codes * scale[:, None]).astype(np.float32))
