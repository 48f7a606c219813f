"""w8a16 models with transposed convolutions and quotients of two tensors: a small decoder (a strided encoder, two
nn.ConvTranspose2d, one strided with output padding, one dilated), a 1-D upsampler (nn.ConvTranspose1d) and a model
computing x / (|y| + 1) and a normalisation by a computed norm (a broadcast divisor) run mcu_conv_transpose2d_s16
(its phased form at dilation 1) and mcu_div_s16 (ours, with the 16x8 conventions: CMSIS-NN has neither). Each is
bit-exact with the Python integer reference as generated C and as a program file on the host and (slow tier) on
QEMU, closer to fp32 than at int8; a program file whose words are overwritten with extremes loads and runs or names
the fault, never crashes. (Grouped transposed convolutions: tests/quantize/test_w8a16_int8_forms.py.)"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.program import format as fmt
from mcu.program.device import build_interpreter_firmware
from mcu.program.host import Program, ProgramError
from int16_checks import (assert_c_and_program_equal_reference, assert_device_equals_reference, assert_int16_kernels,
                          compile_seeded, output_sqnr_db)
from repo import requires_qemu

KINDS = {"decoder": {"conv_transpose2d"}, "upsampler1d": {"conv_transpose2d"}, "ratio": {"div", "remap"}}
# (dilation 1 takes the weights by output phase; the decoder's dilated layer the OHWI kernel)
SOURCES = {"decoder": ("mcu_conv_transpose2d_phased_s16.c", "mcu_conv_transpose2d_s16.c"),
           "upsampler1d": ("mcu_conv_transpose2d_phased_s16.c",), "ratio": ("mcu_div_s16.c",)}
MODELS = list(KINDS)


class Decoder(nn.Module):
    """An encoder's strided convolution, then back up: a strided ConvTranspose2d with output padding and a
    dilated one."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.out = nn.ConvTranspose2d(6, 3, 3, padding=2, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.up(torch.relu(self.enc(x)))))


class Upsampler1d(nn.Module):
    """A Conv1d's features upsampled in time by a ConvTranspose1d (stride 2), then mixed by a 1x1 Conv1d."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.up = nn.ConvTranspose1d(8, 6, 4, stride=2, padding=1)
        self.mix = nn.Conv1d(6, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mix(torch.relu(self.up(torch.relu(self.conv(x)))))


class Ratio(nn.Module):
    """x / (|y| + 1) of two features, then the quotient normalised by its norm (a divisor broadcast over the
    features), and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.fx, self.fy, self.head = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = self.fx(x) / (self.fy(x).abs() + 1.0)
        return self.head(r / torch.sqrt((r * r).sum(dim=-1, keepdim=True) + 1e-3))


SHAPES = {"decoder": (Decoder, (1, 3, 8, 8)), "upsampler1d": (Upsampler1d, (1, 4, 12)), "ratio": (Ratio, (1, 8))}


def _compile(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    # (64 samples: with 32 a test input passed the upsampler's calibrated range, clipped in both modes)
    return compile_seeded(*SHAPES[name], name, quantize, board, seed=5, samples=64)


@pytest.fixture(scope="module", params=MODELS)
def w8a16(request) -> mcu.CompiledModel:
    return _compile(request.param, "w8a16")


def test_w8a16_transposed_convolutions_and_quotients_are_int16_kernels(w8a16) -> None:
    assert_int16_kernels(w8a16, KINDS[w8a16.spec.name], SOURCES[w8a16.spec.name])
    assert all(op.output.dtype == "int16" for op in w8a16.graph.ops)


def test_w8a16_transposed_convolutions_and_quotients_are_bit_exact_in_c_and_program(w8a16) -> None:
    assert_c_and_program_equal_reference(w8a16)


def test_program_with_words_overwritten_never_crashes(w8a16) -> None:
    """Every word of the instructions' flatbuffer set to 0, -1, INT32_MIN and INT32_MAX in turn (the kernels'
    params among them: frac_bits, shifts, shapes, strides, paddings): the loader refuses the file or it runs (or
    the run names a fault); the process survives."""
    blob = w8a16.program_image().program
    header = fmt.read_header(blob)
    outcomes: dict[str, int] = {}
    for pos in range(fmt.HEADER_SIZE, header.data_offset - 3, 4):
        for value in (0, -1, -(2**31), 2**31 - 1):
            bad = bytearray(blob)
            struct.pack_into("<i", bad, pos, value)
            try:
                prog = Program.load(bytes(bad), verify_checksum=False)
            except ProgramError:
                outcomes["refused"] = outcomes.get("refused", 0) + 1
                continue
            for m in prog.methods:
                try:
                    m.run_raw(*(np.zeros(s.numel, s.dtype) for s in m.inputs))
                    outcomes["ran"] = outcomes.get("ran", 0) + 1
                except (ProgramError, McuError):
                    outcomes["fault"] = outcomes.get("fault", 0) + 1
    assert outcomes.get("refused", 0) > 0 and outcomes.get("ran", 0) > 0, outcomes


@pytest.mark.slow
def test_w8a16_transposed_convolutions_and_quotients_are_closer_to_fp32_than_int8(w8a16) -> None:
    """decoder 51.0 dB against 41.6 at int8, upsampler1d 57.4 against 45.1, ratio 50.5 against 37.7 (3 test
    vectors; README)."""
    assert output_sqnr_db(w8a16) > output_sqnr_db(_compile(w8a16.spec.name, "int8")) + 6.0


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("name, board", [("decoder", "mps2-an505"), ("ratio", "mps2-an505"),
                                         ("ratio", "mps2-an385-m0plus")])
def test_w8a16_transposed_convolutions_and_quotients_are_bit_exact_on_qemu(name: str, board: str) -> None:
    """The generated-C firmware and the program file on the interpreter firmware both give the reference's
    codes: the M33 (dual-MAC sums) and the M0+ (the quotient's divisions in software)."""
    cm = _compile(name, "w8a16", board)
    firmware = build_interpreter_firmware(load_board(board))  # (every kernel, built once per board)
    assert_device_equals_reference(cm, firmware.elf)
