"""GPTQ weight rounding (mcu/quantize/gptq.py): on correlated inputs it leaves a layer less output error than
nearest rounding on the same grid; through the pipeline it keeps the quantizer's scales and codes in range,
lowers the model's output error (the integer reference against fp32), and the generated C equals the reference
with its weights; the flag's defaults and its refusal outside the static modes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.errors import McuError
from mcu.quantize import modes
from mcu.quantize.gptq import gptq_round
from mcu.reference.encoding import decode, encode
from mcu.reference.interp import Reference


def _correlated(n: int, columns: int, generator: torch.Generator) -> torch.Tensor:
    """Inputs whose columns share a few factors, as a layer's inputs do (neighbouring pixels, channels)."""
    factors = torch.randn(n, 4, generator=generator, dtype=torch.float64)
    mixing = torch.randn(4, columns, generator=generator, dtype=torch.float64)
    return factors @ mixing + 0.1 * torch.randn(n, columns, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("bits", [8, 4])
def test_gptq_leaves_a_layer_less_output_error_than_nearest_rounding(bits: int) -> None:
    g = torch.Generator().manual_seed(0)
    x = _correlated(512, 48, g)
    w = torch.randn(16, 48, generator=g, dtype=torch.float64)
    top = (1 << (bits - 1)) - 1
    scale = w.abs().amax(dim=1) / top
    nearest = torch.clamp(torch.round(w / scale[:, None]), -top, top)
    codes = gptq_round(w, 2.0 * x.T @ x, scale, -top, top)
    assert torch.equal(codes, torch.round(codes)) and int(codes.abs().max()) <= top

    def error(q: torch.Tensor) -> float:
        return float((((w - q * scale[:, None]) @ x.T) ** 2).sum())

    print(f"int{bits}: output error nearest {error(nearest):.4g}, gptq {error(codes):.4g}")
    assert error(codes) < 0.5 * error(nearest)


class Small(nn.Module):
    """A convolution, a depthwise one (rounded group by group) and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.depthwise(torch.relu(self.conv(x))))
        return self.fc(torch.flatten(y, 1))


@pytest.fixture(scope="module")
def lowered() -> tuple[nn.Module, list, dict[str, mcu.api.LoweredModel]]:
    torch.manual_seed(0)
    model = Small().eval()
    # smooth images: neighbouring pixels correlate, as GPTQ's compensation needs
    data = [(nn.functional.interpolate(torch.randn(1, 3, 3, 3), size=(6, 6), mode="bilinear"),) for _ in range(24)]
    calibration, tests = data[:16], data[16:]
    built = {r: mcu.api.lower(model, calibration[0], quantize="w4a8", calibration=calibration, test_inputs=tests,
                              name="small", bias_correction=False, weight_rounding=r) for r in ("nearest", "gptq")}
    return model, tests, built


def _sqnr(lowered: mcu.api.LoweredModel, model: nn.Module, inputs: list) -> float:
    graph = lowered.graph
    t_in, t_out = graph.inputs[0], graph.outputs[0]
    signal = noise = 0.0
    for (x,) in inputs:
        flat = encode(x.numpy(), t_in.name, t_in.shape, t_in.dim_order, t_in.dtype, t_in.quant.scale[0],
                      t_in.quant.zero_point[0])
        got = decode(Reference(graph).run([flat])[0], t_out.shape, t_out.dim_order, t_out.dtype,
                     t_out.quant.scale[0], t_out.quant.zero_point[0]).astype(np.float64)
        with torch.no_grad():
            want = model(x).double().numpy().reshape(got.shape)
        signal, noise = signal + float((want ** 2).sum()), noise + float(((got - want) ** 2).sum())
    return 10 * np.log10(signal / noise)


def test_gptq_keeps_the_scales_changes_the_codes_and_lowers_the_output_error(lowered) -> None:
    model, tests, built = lowered
    weights = {r: [op.inputs[1] for op in b.graph.ops if op.kind in ("conv2d", "depthwise_conv2d", "linear")]
               for r, b in built.items()}
    assert len(weights["gptq"]) == 3
    for a, b in zip(weights["nearest"], weights["gptq"]):
        assert np.array_equal(a.quant.scale, b.quant.scale)  # the quantizer's grid, not GPTQ's
        assert int(np.abs(b.data.astype(np.int32)).max()) <= 7  # 4-bit codes
    assert sum(int((a.data != b.data).sum()) for a, b in zip(weights["nearest"], weights["gptq"])) > 0
    nearest, gptq = _sqnr(built["nearest"], model, tests), _sqnr(built["gptq"], model, tests)
    print(f"w4a8 output SQNR against fp32: nearest {nearest:.1f} dB, gptq {gptq:.1f} dB")
    assert gptq > nearest + 1.0


def test_gptq_weights_stay_bit_exact_in_the_generated_c(lowered) -> None:
    _, tests, built = lowered
    cm = built["gptq"].compile("mps2-an505")
    for x in tests[:3]:
        for got, want in zip(cm.run_raw_c(*x), cm.reference_raw(*x)):
            assert np.array_equal(got, want)


def test_the_flag_defaults_per_mode_and_is_refused_outside_the_static_modes() -> None:
    assert [modes.weight_rounding(m, None) for m in (modes.INT8, modes.W4A8, modes.W8A16, modes.MIXED)] == \
        ["nearest", "nearest", "searched", "nearest"]
    assert modes.weight_rounding(modes.W8A16, "gptq") == "gptq"
    assert modes.weight_rounding(modes.NONE, None) == "nearest"
    with pytest.raises(McuError, match="--weight-rounding gptq .* does not apply to --quantize int8-weight"):
        modes.weight_rounding(modes.INT8_WEIGHT, "gptq")
    with pytest.raises(McuError, match="unknown weight rounding"):
        modes.weight_rounding(modes.INT8, "stochastic")


def _cell_loop_data(n: int) -> list[tuple[torch.Tensor]]:
    """Sequences [2, 6, 5] whose features share two factors, as GPTQ's compensation needs."""
    g = torch.Generator().manual_seed(1)
    mix = torch.randn(2, 5, generator=g)
    return [(torch.randn(2, 6, 2, generator=g) @ mix * 1.5 + 0.2 * torch.randn(2, 6, 5, generator=g),)
            for _ in range(n)]


@pytest.mark.slow
def test_gptq_rounds_a_gru_cell_loops_weights_once_from_every_step() -> None:
    """An nn.GRUCell stepped in a loop (w8a16: one mcu_gru_s16 call a step, every step reading the same two
    matrices) is rounded from the rows of all its steps together: its codes move and the output gets closer to
    fp32 (50.5 dB nearest, 55.7 gptq; before, its matrices kept nearest rounding)."""
    from gru_models import GruCellLoop

    torch.manual_seed(3)
    model = GruCellLoop().eval()
    data = _cell_loop_data(51)
    calibration, tests = data[:48], data[48:]
    built = {r: mcu.api.lower(model, calibration[0], quantize="w8a16", calibration=calibration, test_inputs=tests,
                              name="cell", bias_correction=False, weight_rounding=r) for r in ("nearest", "gptq")}
    grus = {r: [op for op in b.graph.ops if op.kind == "gru"] for r, b in built.items()}
    first = grus["gptq"][0]
    assert len(grus["gptq"]) == 6 and all(np.array_equal(op.inputs[k].data, first.inputs[k].data)
                                          for op in grus["gptq"] for k in (1, 2))  # one rounding for every step
    moved = sum(int((a.data != b.data).sum()) for a, b in zip(grus["nearest"][0].inputs[1:3], first.inputs[1:3]))
    assert moved > 0
    nearest, gptq = _sqnr(built["nearest"], model, tests), _sqnr(built["gptq"], model, tests)
    print(f"GRUCell loop w8a16 output SQNR against fp32: nearest {nearest:.1f} dB, gptq {gptq:.1f} dB")
    assert gptq > nearest + 2.0


@pytest.mark.slow
def test_gptq_rounds_the_gate_layers_a_cell_loop_shares_over_its_steps() -> None:
    """An nn.LSTMCell loop, its gates as ops (int8): each of its two gate layers' weights, read at every step, is
    rounded once from the inputs of every step, so its codes move (before, a shared weight kept nearest rounding),
    and every step reads the same codes."""
    from cell_models import LstmCellLoop

    torch.manual_seed(3)
    model = LstmCellLoop().eval()
    calibration = _cell_loop_data(48)
    weights = {}
    for r in ("nearest", "gptq"):
        graph = mcu.api.lower(model, calibration[0], quantize="int8", calibration=calibration, name="lstm_cell",
                              bias_correction=False, weight_rounding=r).graph
        gates = [op.inputs[1].data for op in graph.ops if op.kind == "linear" and op.inputs[1].shape[0] == 28]
        # six steps of the input's layer, five of the state's (the first step's state is zero: folded away)
        by_width = [[w for w in gates if w.shape[1] == width] for width in (5, 7)]
        assert [len(ws) for ws in by_width] == [6, 5]
        assert all(np.array_equal(w, ws[0]) for ws in by_width for w in ws)
        weights[r] = [ws[0] for ws in by_width]
    assert all(int((a != b).sum()) > 0 for a, b in zip(weights["nearest"], weights["gptq"]))
