"""Attention whose mask is a model input, at int8: ``nn.MultiheadAttention(..., key_padding_mask=pad)`` with
``pad`` a bool input, returning the weights (torch adds the mask, minus infinity where hidden, to the scores
with baddbmm) or not (scaled_dot_product_attention keeps it). Which positions the mask hides is known only at
run time, so the ops from the mask to the softmax run in fp32 and the projections stay int8; the program's
outputs (host C build and the program file, equal bit for bit) are close to eager over masks of every
length. A fill of minus infinity that reaches anything but a softmax is not
an attention mask: quantizing it is refused with a hint about the mask, not about clamping a log."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.api import CompiledModel
from mcu.errors import McuError
from mcu.quantize.attention import runtime_mask_islands
from mcu.quantize.flow import export_for_quantization

_COMPILED: dict[bool, CompiledModel] = {}


class PaddedAttention(nn.Module):
    """The user's form: the key padding mask is the second input, the output a dict with a nested tuple."""

    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.need_weights = need_weights
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.fc = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> dict[str, object]:
        a, w = self.mha(x, x, x, key_padding_mask=pad, need_weights=self.need_weights)
        return {"y": self.fc(a[:, 0]), "aux": (a.sum(-1), w) if self.need_weights else (a.sum(-1),)}


def _sample(gen: torch.Generator, padded: int) -> tuple[torch.Tensor, torch.Tensor]:
    pad = torch.zeros(1, 6, dtype=torch.bool)
    pad[0, 6 - padded:] = True
    return torch.randn(1, 6, 16, generator=gen), pad


def compiled(need_weights: bool) -> CompiledModel:
    if need_weights not in _COMPILED:
        torch.manual_seed(8)
        model = PaddedAttention(need_weights).eval()
        gen = torch.Generator().manual_seed(3)
        calibration = [_sample(gen, i % 6) for i in range(96)]
        _COMPILED[need_weights] = mcu.compile(model, calibration[1], quantize="int8", calibration=calibration,
                                              test_inputs=[calibration[2]], name="padded_attention")
    return _COMPILED[need_weights]


def _flat(outputs: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(o, dtype=np.float64).reshape(-1) for o in outputs])


def _eager(model: nn.Module, x: tuple[torch.Tensor, ...]) -> np.ndarray:
    with torch.no_grad():
        out = model(*x)
    return _flat([out["y"].numpy(), *(t.numpy() for t in out["aux"])])


@pytest.mark.parametrize("need_weights", [True, False])
def test_a_padding_mask_input_keeps_only_the_masked_softmax_in_fp32(need_weights: bool) -> None:
    cm = compiled(need_weights)
    floats = {op.kind for op in cm.graph.ops if op.output.dtype == "float32"}
    assert "softmax" in floats  # the mask reaches the softmax at run time
    int8 = [op for op in cm.graph.ops if op.output.dtype == "int8"]
    assert "linear" not in floats
    assert sum(op.kind == "linear" for op in int8) == 3  # in and out projections, the head
    if need_weights:  # the weights times the values: int8 after the softmax's quantize
        assert [op.kind for op in int8 if op.kind == "bmm"] == ["bmm"]
    assert cm.graph.fallbacks


@pytest.mark.parametrize("need_weights", [True, False])
def test_a_padding_mask_input_runs_close_to_eager(need_weights: bool) -> None:
    """The host C build and the program file agree bit for bit; against eager over 36 held-out inputs, every
    padding length six times, within 28 dB (30-31 dB measured; the same model without a mask, all int8,
    gives 18-19 dB)."""
    cm = compiled(need_weights)
    gen = torch.Generator().manual_seed(11)
    eager, device = [], []
    for padded in list(range(6)) * 6:  # no padding up to all but one key hidden (all hidden is NaN in torch)
        x = _sample(gen, padded)
        c_build, program = cm.run_raw_c(*x), cm.run_raw(*x)
        for c, p in zip(c_build, program):
            assert np.array_equal(np.asarray(c).reshape(-1), np.asarray(p).reshape(-1))
        outputs = cm.decode_outputs(c_build)
        if need_weights:  # hidden keys get weight exactly 0 on the device too
            assert not np.asarray(outputs[2])[..., 6 - padded:].any()
        eager.append(_eager(cm.spec.model, x))
        device.append(_flat(outputs))
    ref, got = np.concatenate(eager), np.concatenate(device)
    sqnr = 10.0 * np.log10(np.sum(ref ** 2) / max(float(np.sum((ref - got) ** 2)), 1e-30))
    assert sqnr >= 28.0, sqnr


class FilledFeatures(nn.Module):
    """A fill of minus infinity from an input that a max reads: no attention mask."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, drop: torch.Tensor) -> torch.Tensor:
        return self.fc(x).masked_fill(drop, float("-inf")).amax(-1) + self.fc(x).softmax(-1).sum(-1)


def test_islands_are_only_attention_masks() -> None:
    x, drop = torch.randn(2, 4), torch.tensor([True, False, False, False])
    gm = export_for_quantization(FilledFeatures().eval(), (x, drop))
    assert runtime_mask_islands(gm) == set()
    padded = export_for_quantization(PaddedAttention(True).eval(), _sample(torch.Generator().manual_seed(0), 2))
    islands = {str(n.target) for n in runtime_mask_islands(padded)}
    assert "aten.softmax.int" in islands and "aten.baddbmm.default" in islands
    assert not [t for t in islands if "linear" in t or t == "aten.bmm.default"]


def test_a_fill_of_minus_infinity_elsewhere_is_refused_with_a_mask_hint() -> None:
    x, drop = torch.randn(2, 4), torch.tensor([True, False, False, False])
    with pytest.raises(McuError) as err:
        mcu.compile(FilledFeatures().eval(), (x, drop), quantize="int8", calibration=[(x, drop)])
    assert "produce NaN or inf" in str(err.value)
    hint = str(getattr(err.value, "hint", "")) + str(err.value)
    assert "attention mask" in hint and "clamp before log" not in hint
