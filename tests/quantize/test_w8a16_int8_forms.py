"""w8a16 models with forms int8 runs that w8a16 refused before: grouped convolutions as users write them, a
ResNeXt-style CNN (a stem, a grouped 3x3 with its batch norm and ReLU, a 1x1 back, a grouped strided
ConvTranspose2d upsampling, a classifier) and a grouped Conv1d stack (mcu_conv2d_grouped_s16 and
mcu_conv_transpose2d_grouped_s16; ours, CMSIS-NN's arm_convolve_s16 takes one group); a CNN with a ceil-mode max pool, a ceil-mode
average pool, adaptive average pooling to 3x3 from 7x7 (windows that overlap: mcu_adaptive_avg_pool_s16) and a
Conv1d branch adaptively pooled; a classifier returning its logits and their argmax (mcu_argmax_s16); a CNN whose
features are clamped between two computed tensors that broadcast (torch.clamp with tensor bounds: the 16x8
maximum and minimum on expanded bounds); an MLP gated by torch.where on comparisons (mcu_where moving int16 codes,
a constant branch on the output's grid; the comparisons read the dequantized values, as at int8). Each is
bit-exact with the Python integer reference as generated C and as a program file on the host and (slow tier) on
QEMU, and the CNN is closer to fp32 than at int8. A dilated max pool has no integer kernel at either width: int8
keeps it in fp32 (its kernel would pool the window as a dense one)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mcu
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.program.device import build_interpreter_firmware
from int16_checks import assert_device_equals_reference, assert_int16_kernels, compile_seeded, output_sqnr_db
from repo import requires_qemu


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


class PooledCnn(nn.Module):
    """Pools as users write them: ceil-mode max and average pools, adaptive pools to sizes that do not divide."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.seq = nn.Conv1d(8, 6, 3, padding=1)
        self.head = nn.Linear(8 * 9 + 6 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(torch.relu(self.c1(x)), 2, ceil_mode=True)  # 15x15 -> 8x8
        h = F.avg_pool2d(torch.relu(self.c2(h)), 2, stride=1, ceil_mode=True)  # 8x8 -> 7x7
        grid = F.adaptive_avg_pool2d(h, 3).flatten(1)  # 7x7 -> 3x3, overlapping windows
        line = F.adaptive_avg_pool1d(torch.relu(self.seq(h.mean(dim=2))), 4).flatten(1)  # 7 -> 4
        return self.head(torch.cat([grid, line], dim=1))


class Classifier(nn.Module):
    """An MLP returning its logits and the predicted class."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(12, 16), nn.Linear(16, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.fc2(torch.relu(self.fc1(x)))
        return logits, logits.argmax(dim=-1)


class Clamped(nn.Module):
    """Features clamped between a per-channel floor (their mean over space) and a per-pixel ceiling (their
    maximum over channels), then a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.head = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        h = torch.clamp(h, min=0.3 * h.mean(dim=(2, 3), keepdim=True), max=0.7 * h.amax(dim=1, keepdim=True))
        return self.head(h.mean(dim=(2, 3)))


class Gated(nn.Module):
    """Features kept where they pass a threshold (zero elsewhere), and a second branch chosen by the input's sign."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = torch.where(h > 0.25, h, 0.0) + torch.where(x < 0, torch.tanh(self.fc2(x)), h)
        return self.head(h)


SHAPES = {"resnext": (ResNeXt, (1, 3, 8, 8)), "grouped_tcn": (GroupedTcn, (1, 4, 16)),
          "pooled_cnn": (PooledCnn, (1, 3, 15, 15)), "classifier": (Classifier, (4, 12)),
          "clamped": (Clamped, (1, 3, 8, 8)), "gated": (Gated, (4, 8))}
KINDS = {"resnext": {"conv2d", "conv_transpose2d"}, "grouped_tcn": {"conv2d"},
         "pooled_cnn": {"max_pool2d", "avg_pool2d", "adaptive_avg_pool"}, "classifier": {"linear"},
         "clamped": {"maximum", "minimum"}, "gated": {"where"}}
SOURCES = {"resnext": ("mcu_conv2d_grouped_s16.c", "mcu_conv_transpose2d_grouped_s16.c"),
           "grouped_tcn": ("mcu_conv2d_grouped_s16.c",),
           "pooled_cnn": ("mcu_max_pool2d_s16.c", "mcu_avg_pool2d_s16.c", "mcu_adaptive_avg_pool_s16.c"),
           "classifier": ("mcu_argmax_s16.c",), "clamped": ("mcu_maximum_s16.c", "mcu_minimum_s16.c"),
           "gated": ("mcu_where.c", "mcu_compare.c", "mcu_dequantize_s16_f32.c")}


def _compile(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    return compile_seeded(*SHAPES[name], name, quantize, board, seed=6, samples=32)


@pytest.fixture(scope="module", params=list(SHAPES))
def w8a16(request) -> mcu.CompiledModel:
    return _compile(request.param, "w8a16")


def test_w8a16_forms_are_int16_kernels(w8a16) -> None:
    assert_int16_kernels(w8a16, KINDS[w8a16.spec.name], SOURCES[w8a16.spec.name])
    if w8a16.spec.name in ("resnext", "grouped_tcn"):
        assert any(op.attrs.get("groups", 1) > 1 for op in w8a16.graph.ops if op.kind in KINDS[w8a16.spec.name])
    argmax = [op for op in w8a16.graph.ops if op.kind == "argmax"]
    assert all(op.inputs[0].dtype == "int16" for op in argmax) and len(argmax) == (w8a16.spec.name == "classifier")


def test_w8a16_forms_are_bit_exact_in_c_and_program(w8a16) -> None:
    """The int16 codes, and the argmax's int32 indices (the first largest logit's) on every test input."""
    for x in w8a16.spec.test_inputs:
        want = w8a16.reference_raw(*x)
        for got in (w8a16.runtime_program().method("forward").run_raw(*w8a16.encode_inputs(x)), w8a16.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)
        if w8a16.spec.name == "classifier":
            np.testing.assert_array_equal(want[1].reshape(-1), np.argmax(want[0].reshape(4, 6), axis=1))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnext", "grouped_tcn", "pooled_cnn", "clamped", "gated"])
def test_w8a16_is_closer_to_fp32_than_int8(name: str) -> None:
    """(3 test vectors; README.)"""
    assert output_sqnr_db(_compile(name, "w8a16")) > output_sqnr_db(_compile(name, "int8")) + 6.0


def test_a_dilated_max_pool_stays_fp32_at_int8_and_is_refused_at_w8a16_with_its_line() -> None:
    class Dilated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.max_pool2d(self.conv(x), 2, dilation=2)

    torch.manual_seed(0)
    x = torch.randn(1, 3, 10, 10)
    cm = mcu.compile(Dilated().eval(), x, quantize="int8", calibration=[(x,)])
    assert [op.kind for op in cm.graph.ops if op.output.dtype == "float32" and "pool" in op.kind] == ["max_pool2d"]
    np.testing.assert_allclose(cm.run(x)[0].numpy(), cm.eager(x)[0].numpy(), atol=0.1)
    with pytest.raises(McuError, match=r"no 16x8 kernel for: max_pool2d \(dilated\) \(the first at "
                                       r".*test_w8a16_int8_forms\.py:\d+"):
        mcu.compile(Dilated().eval(), x, quantize="w8a16", calibration=[(x,)])


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnext", "pooled_cnn", "gated"])
def test_w8a16_forms_are_bit_exact_on_qemu(name: str) -> None:
    """The M33 (its dual-MAC sums in the grouped convolutions), the pools, and the select with the comparison's
    dequantize and the input's quantize in the graph."""
    cm = _compile(name, "w8a16")
    firmware = build_interpreter_firmware(load_board("mps2-an505"))
    assert_device_equals_reference(cm, firmware.elf)
