"""w8a16 models with broadcasting arithmetic, reductions over dims, PReLU and bilinear resampling: a squeeze-excite CNN (a product with a
per-channel gate, a learned per-channel offset, a difference and a maximum against a mean over channels) runs the
same-shape 16x8 kernels on operands expanded to the output's shape (mcu/quantize/broadcast.py); a Conv1d pooled by
a sum, a maximum and a minimum over time runs mcu_mean_s16, mcu_amax_s16 and mcu_amin_s16; a CNN's PReLUs (per
channel and shared) run as a clamp, a product with the slopes and an add; a decoder's bilinear upsampling runs
mcu_resize_bilinear_s16. Each is bit-exact with
the Python integer reference as generated C and as program files on the host and (slow tier) on the simulated M33,
and closer to fp32 than at int8."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mcu
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.program.device import build_interpreter_firmware
from int16_checks import (assert_c_and_program_equal_reference, assert_device_equals_reference, assert_int16_kernels,
                          compile_seeded, output_sqnr_db)
from repo import requires_qemu

KINDS = {"se_cnn": {"mul", "add", "sub", "maximum", "remap"}, "pooled_tcn": {"reduce"},
         "prelu_cnn": {"clamp", "mul", "add"}, "bilinear_cnn": {"resize_bilinear", "add"}}
SOURCES = {"se_cnn": ("mcu_mul_s16.c", "mcu_add_s16.c", "mcu_sub_s16.c", "mcu_maximum_s16.c", "mcu_remap.c"),
           "pooled_tcn": ("mcu_mean_s16.c", "mcu_amax_s16.c", "mcu_amin_s16.c"),
           "prelu_cnn": ("mcu_clamp_s16.c", "mcu_mul_s16.c", "mcu_add_s16.c"),
           "bilinear_cnn": ("mcu_resize_bilinear_s16.c",)}
MODELS = list(KINDS)


class SeCnn(nn.Module):
    """Squeeze-excite as users write it (x * gate[:, :, None, None]), a learned offset per channel, and a
    difference and maximum against the mean over channels (keepdim)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc1, self.fc2 = nn.Linear(8, 4), nn.Linear(4, 8)
        self.offset = nn.Parameter(torch.randn(8, 1, 1) * 0.3)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        g = torch.sigmoid(self.fc2(torch.relu(self.fc1(h.mean(dim=(2, 3))))))
        h = h * g[:, :, None, None] + self.offset
        m = h.mean(dim=1, keepdim=True)
        h = torch.maximum(h - m, m)
        return self.head(h.mean(dim=(2, 3)))


class PooledTcn(nn.Module):
    """A Conv1d's features pooled over time by a sum, a maximum and a minimum, then a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 12, 3, padding=1)
        self.head = nn.Linear(36, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        return self.head(torch.cat([h.sum(dim=2), h.amax(dim=2), (h - 0.5).amin(dim=-1)], dim=1))


class PreluCnn(nn.Module):
    """Convolutions with a PReLU per channel and a shared one (relu(x) + alpha * min(x, 0) at w8a16)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.act1 = nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(8)
        self.conv2, self.act2 = nn.Conv2d(8, 8, 3, padding=1), nn.PReLU()
        self.head = nn.Linear(8, 5)
        with torch.no_grad():
            self.act1.weight.uniform_(-0.3, 0.4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act2(self.conv2(self.act1(self.conv1(x))))
        return self.head(h.mean(dim=(2, 3)))


class BilinearCnn(nn.Module):
    """A small decoder: a strided convolution upsampled back bilinearly (scale factor 2) onto a skip branch, and
    the result resized to 11x11 with align_corners."""

    def __init__(self) -> None:
        super().__init__()
        self.down, self.skip = nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.Conv2d(3, 8, 1)
        self.out = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = nn.functional.interpolate(torch.relu(self.down(x)), scale_factor=2, mode="bilinear")
        y = self.out(up + self.skip(x))
        return nn.functional.interpolate(y, size=(11, 11), mode="bilinear", align_corners=True)


def _compile(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    model, shape = {"se_cnn": (SeCnn, (1, 3, 8, 8)), "pooled_tcn": (PooledTcn, (1, 4, 16)),
                    "prelu_cnn": (PreluCnn, (1, 3, 8, 8)), "bilinear_cnn": (BilinearCnn, (1, 3, 8, 8))}[name]
    return compile_seeded(model, shape, name, quantize, board, seed=11)



@pytest.fixture(scope="module", params=MODELS)
def w8a16(request) -> mcu.CompiledModel:
    return _compile(request.param, "w8a16")


def test_w8a16_broadcasts_and_reductions_are_int16_kernels(w8a16) -> None:
    assert_int16_kernels(w8a16, KINDS[w8a16.spec.name], SOURCES[w8a16.spec.name])


def test_w8a16_broadcasts_and_reductions_are_bit_exact_in_c_and_program(w8a16) -> None:
    assert_c_and_program_equal_reference(w8a16)


def test_w8a16_still_refuses_a_rounded_quotient_of_two_tensors() -> None:
    class Ratio(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.div(x, x.abs() + 1.0, rounding_mode="floor")

    x = torch.randn(1, 8)
    with pytest.raises(McuError, match=r"w8a16 has no 16x8 kernel for: div \(with a rounding mode\)"):
        mcu.compile(Ratio(), x, quantize="w8a16", calibration=[(x,)])


@pytest.mark.slow
def test_w8a16_broadcasts_and_reductions_are_closer_to_fp32_than_int8(w8a16) -> None:
    """se_cnn 75.3 dB against 45.1 at int8, pooled_tcn 51.0 against 36.2, prelu_cnn 74.0 against 48.6 (3 test
    vectors; README)."""
    assert output_sqnr_db(w8a16) > output_sqnr_db(_compile(w8a16.spec.name, "int8")) + 12.0


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_w8a16_broadcasts_and_reductions_are_bit_exact_on_the_m33(name: str) -> None:
    """The generated-C firmware and the program file on the interpreter firmware both give the reference's
    codes."""
    cm = _compile(name, "w8a16", "mps2-an505")
    firmware = build_interpreter_firmware(load_board("mps2-an505"))  # (every kernel, built once per board)
    assert_device_equals_reference(cm, firmware.elf)
