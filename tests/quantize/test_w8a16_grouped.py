"""w8a16 models with grouped convolutions as users write them: a ResNeXt-style CNN (a stem, a grouped 3x3 with its
batch norm and ReLU, a 1x1 back, a grouped strided ConvTranspose2d upsampling, a classifier) and a grouped Conv1d
stack run mcu_conv2d_grouped_s16 and mcu_conv_transpose2d_grouped_s16 (ours: CMSIS-NN's arm_convolve_s16 takes
one group). Each is bit-exact with the Python integer reference as generated C and as a program file on the host
and (slow tier) on QEMU, and closer to fp32 than at int8."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mcu
from mcu.device.boards import load_board
from mcu.program.device import build_interpreter_firmware
from int16_checks import (assert_c_and_program_equal_reference, assert_device_equals_reference, assert_int16_kernels,
                          compile_seeded, output_sqnr_db)
from repo import requires_qemu

SOURCES = {"resnext": ("mcu_conv2d_grouped_s16.c", "mcu_conv_transpose2d_grouped_s16.c"),
           "grouped_tcn": ("mcu_conv2d_grouped_s16.c",)}
KINDS = {"resnext": {"conv2d", "conv_transpose2d"}, "grouped_tcn": {"conv2d"}}


class ResNeXt(nn.Module):
    """A stem, a residual block whose 3x3 runs in four groups (batch norm and ReLU folded in), a grouped strided
    ConvTranspose2d (two groups) upsampling the features, and a classifier on their mean."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.grouped = nn.Conv2d(16, 16, 3, padding=1, groups=4, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.proj = nn.Conv2d(16, 16, 1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2, groups=2)
        self.head = nn.Linear(8, 5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        h = torch.relu(h + self.proj(torch.relu(self.bn(self.grouped(h)))))
        return self.head(torch.relu(self.up(h)).mean(dim=(2, 3)))


class GroupedTcn(nn.Module):
    """Grouped Conv1d layers (two and four groups, one dilated) over a sequence, then a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv1d(4, 12, 3, padding=1, groups=2)
        self.c2 = nn.Conv1d(12, 12, 3, padding=2, dilation=2, groups=4)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.c2(torch.relu(self.c1(x)))).mean(dim=2))


SHAPES = {"resnext": (ResNeXt, (1, 3, 8, 8)), "grouped_tcn": (GroupedTcn, (1, 4, 16))}


def _compile(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    return compile_seeded(*SHAPES[name], name, quantize, board, seed=3, samples=32)


@pytest.fixture(scope="module", params=list(SHAPES))
def w8a16(request) -> mcu.CompiledModel:
    return _compile(request.param, "w8a16")


def test_w8a16_grouped_convolutions_are_int16_kernels(w8a16) -> None:
    assert_int16_kernels(w8a16, KINDS[w8a16.spec.name], SOURCES[w8a16.spec.name])
    assert all(op.output.dtype == "int16" for op in w8a16.graph.ops)
    assert any(op.attrs.get("groups", 1) > 1 for op in w8a16.graph.ops if op.kind in KINDS[w8a16.spec.name])


def test_w8a16_grouped_convolutions_are_bit_exact_in_c_and_program(w8a16) -> None:
    assert_c_and_program_equal_reference(w8a16)


@pytest.mark.slow
def test_w8a16_grouped_convolutions_are_closer_to_fp32_than_int8(w8a16) -> None:
    """resnext and grouped_tcn against int8 over 3 test vectors (README)."""
    assert output_sqnr_db(w8a16) > output_sqnr_db(_compile(w8a16.spec.name, "int8")) + 6.0


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_w8a16_grouped_convolutions_are_bit_exact_on_qemu() -> None:
    """The generated-C firmware and the program file on the interpreter firmware give the reference's codes on the
    M33 (its dual-MAC sums)."""
    cm = _compile("resnext", "w8a16")
    firmware = build_interpreter_firmware(load_board("mps2-an505"))
    assert_device_equals_reference(cm, firmware.elf)
