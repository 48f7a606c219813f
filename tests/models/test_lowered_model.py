"""A model lowered once and compiled for several boards (mcu.api.LoweredModel) gives what a fresh compile for
each board gives: the same generated C and harness, program file, memory plan and instruction counts, and no
board's compile changes what another board gets."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mcu.api import CompiledModel, compile_file, compile_spec, lower_file, lower_spec
from mcu.capture.loader import ModelSpec, spec_from_objects
from mcu.plan.fused import KIND as FUSED
from repo import EXAMPLES, requires_qemu

# The M33 packs weights for its DSP kernels and the M55 takes the MVE ones: the partitions differ by board.
BOARDS = ["mps2-an505", "mps3-an547"]


def _same(shared: CompiledModel, fresh: CompiledModel) -> None:
    assert shared.firmware_sources() == fresh.firmware_sources()
    assert shared.summary() == fresh.summary()
    assert shared.partitions.to_json() == fresh.partitions.to_json()
    assert shared.program_image().program == fresh.program_image().program


@pytest.mark.parametrize("quantize", ["int8", "none"])
def test_a_lowered_example_compiles_for_each_board_as_a_fresh_compile(quantize: str) -> None:
    lowered = lower_file(EXAMPLES / "small_cnn.py", quantize=quantize)
    shared = {board: lowered.compile(board) for board in BOARDS}
    for board in BOARDS:
        _same(shared[board], compile_file(EXAMPLES / "small_cnn.py", board=board, quantize=quantize))


class _InvertedResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(4, 24, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(24, 24, 3, 1, 1, groups=24, bias=False), nn.BatchNorm2d(24), nn.ReLU6())
        self.project = nn.Conv2d(24, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(self.dw(self.expand(x)))


def _inverted_residual() -> ModelSpec:
    """The same model and data on every call: a fresh compile shares nothing with the lowered one."""
    torch.manual_seed(3)
    model = _InvertedResidual().eval()
    calibration = [(torch.randn(1, 4, 10, 10),) for _ in range(4)]
    tests = [(torch.randn(1, 4, 10, 10),) for _ in range(2)]
    return spec_from_objects(model, calibration[0], calibration, tests, name="inverted_residual")


@pytest.mark.parametrize("quantize", ["int8", "none"])
def test_a_board_compile_that_fuses_blocks_leaves_the_next_board_a_clean_graph(quantize: str) -> None:
    """Fusing rewrites the op list and planning the tensors; the lowered graph each compile starts from is
    untouched by the compiles before it."""
    lowered = lower_spec(_inverted_residual(), quantize)
    fused = lowered.compile(BOARDS[0], fuse_blocks="all")
    assert any(op.kind == FUSED for op in fused.graph.ops)
    plain = lowered.compile(BOARDS[1])
    assert not any(op.kind == FUSED for op in plain.graph.ops)
    _same(plain, compile_spec(_inverted_residual(), BOARDS[1], quantize))
    _same(fused, compile_spec(_inverted_residual(), BOARDS[0], quantize, fuse_blocks="all"))
    _same(lowered.compile(BOARDS[0]), compile_spec(_inverted_residual(), BOARDS[0], quantize))


@requires_qemu
def test_a_lowered_model_runs_the_same_instructions_as_a_fresh_compile() -> None:
    lowered = lower_file(EXAMPLES / "small_cnn.py", quantize="int8")
    lowered.compile(BOARDS[0])
    shared = lowered.compile(BOARDS[1]).simulate()
    fresh = compile_file(EXAMPLES / "small_cnn.py", board=BOARDS[1], quantize="int8").simulate()
    assert shared.passed and fresh.passed
    assert shared.instructions_all == fresh.instructions_all
