"""The Python reference is an oracle of its own: it derives every kernel parameter from the quantized graph
(shapes, memory orders, scales and zero points) with its own arithmetic, so a wrong parameter in an emitter
makes the generated C disagree with it. Each case compiles a small int8 model as it is (the host build of
its generated C equals the reference bit for bit) and again with one parameter function of the portable
backend perturbed: then the host build must differ from the reference. Likewise with a parameter the int8
lowering stores on an op (a convolution's shifts, an add's output multiplier) made wrong: the reference
derives its own from the tensors' quantization, so the host build must differ from it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mcu
from mcu.backends.portable import elementwise, norm, pool, recurrent, resample
from mcu.passes.quantized import conv as quantized_conv
from mcu.passes.quantized import elementwise as quantized_elementwise
from mcu.passes.quantized.common import int_const
from mcu.reference import arith
from mcu.reference.interp import Reference


class Prelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.slopes = nn.Parameter(torch.tensor([0.1, -0.3, 0.25, 0.6]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.prelu(self.conv(x), self.slopes)


class LogSoftmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(torch.tanh(x) * 3.0, dim=1)


class Resize(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(self.conv(x), scale_factor=2.0, mode="bilinear", align_corners=False)


class AdaptivePool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(self.conv(x), (3, 2))


class Gru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(6, 10, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(x)[0]


def _shift_slopes(params: dict) -> dict:
    """Element i takes the slope of the next channel: a wrong shape parameter, every index still in bounds."""
    return {**params, "inner": params["inner"] + 1}


def _planes_as_channels(params: dict) -> dict:
    """[N][H][W][C] read as N*C planes of [H][W]: the NCHW geometry of a channels-last tensor (same bytes)."""
    assert params["inner"] > 1, "the model must give the resampled tensor a channels-last layout"
    return {**params, "outer": params["outer"] * params["inner"], "inner": 1}


# (model, input shape, op kind the model must have, module, parameter function, perturbation)
CASES: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], str, object, str, Callable[[dict], dict]]] = {
    "prelu_s8": (Prelu, (1, 3, 6, 6), "prelu", elementwise, "prelu_params", _shift_slopes),
    "log_softmax_s8": (LogSoftmax, (1, 5, 4, 3), "log_softmax", norm, "log_softmax_params",
                       lambda p: {**p, "log_multiplier": p["log_multiplier"] + (1 << 14)}),
    "resize_bilinear_s8": (Resize, (1, 3, 5, 4), "resize_bilinear", resample, "resample_params", _planes_as_channels),
    "adaptive_avg_pool_s8": (AdaptivePool, (1, 3, 7, 5), "adaptive_avg_pool", pool, "resample_params",
                             _planes_as_channels),
    "gru_s8": (Gru, (1, 7, 6), "gru", recurrent, "recurrent_params",
               lambda p: {**p, "hidden_zp": p["hidden_zp"] + 3}),
}


def _compile(case: str) -> tuple[mcu.api.CompiledModel, list[tuple[torch.Tensor, ...]]]:
    make, shape, kind, _module, _name, _change = CASES[case]
    torch.manual_seed(3)
    model = make().eval()
    calib = [(torch.randn(*shape) * 2,) for _ in range(8)]
    cm = mcu.compile(model, calib[0], quantize="int8", calibration=calib, test_inputs=calib[:2],
                     name=f"independent_{case}")
    assert kind in [op.kind for op in cm.graph.ops], f"the model lost its {kind} op"
    assert Reference(cm.graph).exact
    return cm, calib[:3]


def _parity(cm: mcu.api.CompiledModel, inputs: list[tuple[torch.Tensor, ...]]) -> bool:
    return all(np.array_equal(got, want) for x in inputs
               for got, want in zip(cm.run_raw_c(*x), cm.reference_raw(*x)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_emitter_parameter_shows_up_as_a_parity_failure(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cm, inputs = _compile(case)
    assert _parity(cm, inputs), "the generated C and the reference disagree before any perturbation"

    _make, _shape, _kind, module, name, change = CASES[case]
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda op: change(original(op)))
    perturbed, inputs = _compile(case)
    assert perturbed.library.files != cm.library.files, "the perturbation did not reach the generated C"
    assert not _parity(perturbed, inputs), f"a wrong {name} in the emitter went unnoticed by the reference"


class ConvAdd(nn.Module):
    """A convolution with a fused ReLU and a residual add: per-channel and per-tensor requantization."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + x


def _conv_shift_plus_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 lowering stores every per-channel shift of a convolution one too large."""
    original = quantized_conv._per_channel_requant

    def wrapped(*args: object) -> object:
        packed = original(*args)
        if isinstance(packed, str):
            return packed
        wq, bias, mult, shift = packed
        return wq, bias, mult, int_const(shift.name, np.asarray(shift.data) + 1)
    monkeypatch.setattr(quantized_conv, "_per_channel_requant", wrapped)


class _Arith:
    """The lowering's view of mcu.reference.arith with one function replaced (the reference keeps the real one)."""

    def __init__(self, **replaced: Callable) -> None:
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> object:
        return getattr(arith, name)


def _add_out_multiplier_halved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 lowering stores the add's output multiplier halved."""
    def add_params(*args: object, **kwargs: object) -> dict:
        params = arith.add_params(*args, **kwargs)
        return {**params, "out_multiplier": params["out_multiplier"] // 2}
    monkeypatch.setattr(quantized_elementwise, "arith", _Arith(add_params=add_params))


# case -> (how the lowering is made to store a wrong parameter, the op kind that carries it)
PASS_CASES: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], str]] = {
    "conv2d_shift": (_conv_shift_plus_one, "conv2d"),
    "add_out_multiplier": (_add_out_multiplier_halved, "add"),
}


def _compile_conv_add(name: str) -> tuple[mcu.api.CompiledModel, list[tuple[torch.Tensor, ...]]]:
    torch.manual_seed(5)
    model = ConvAdd().eval()
    calib = [(torch.randn(1, 3, 6, 6) * 2,) for _ in range(8)]
    cm = mcu.compile(model, calib[0], quantize="int8", calibration=calib, test_inputs=calib[:2], name=name)
    assert Reference(cm.graph).exact
    return cm, calib[:3]


@pytest.mark.parametrize("case", sorted(PASS_CASES))
def test_a_wrong_parameter_stored_by_the_lowering_shows_up_as_a_parity_failure(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    corrupt, kind = PASS_CASES[case]
    cm, inputs = _compile_conv_add(f"lowering_{case}")
    assert kind in [op.kind for op in cm.graph.ops]
    assert _parity(cm, inputs), "the generated C and the reference disagree before any corruption"

    corrupt(monkeypatch)
    corrupted, inputs = _compile_conv_add(f"lowering_{case}")
    assert corrupted.library.files != cm.library.files, "the corruption did not reach the generated C"
    assert not _parity(corrupted, inputs), f"{case}: a wrong parameter stored by the int8 lowering went unnoticed"
