"""Recurrent cells stepped in a Python loop at w8a16 (tests/quantize/test_w8a16_cells.py): an nn.LSTMCell loop
returning a dict of its logits and final cell state, and an nn.RNNCell loop, both from zero states. At w8a16 each
step is the cell's gate ops (mcu/quantize/cells.py) on the 16x8 kernels: linear, slices, sigmoid and tanh, products
and sums of int16 tensors."""

from __future__ import annotations

import torch
from torch import nn

import mcu

MODELS = ["lstm_cell", "rnn_cell"]
SHAPE = (2, 6, 5)  # batch, steps, features


class LstmCellLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(5, 7)
        self.fc = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = torch.zeros(x.shape[0], 7)
        c = torch.zeros(x.shape[0], 7)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return {"logits": self.fc(h), "c": c}


class StateLoop(nn.Module):
    """A cell of one state (``nn.RNNCell``, ``nn.GRUCell``) stepped over a batch-first sequence from the zero state,
    the last state classified."""

    def __init__(self, cell: type[nn.Module] = nn.RNNCell) -> None:
        super().__init__()
        self.cell = cell(5, 7)
        self.fc = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], 7)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return self.fc(h)


def compile_model(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    torch.manual_seed(0)
    model = {"lstm_cell": LstmCellLoop, "rnn_cell": StateLoop}[name]().eval()
    calibration = [(torch.randn(*SHAPE),) for _ in range(16)]
    tests = [(torch.randn(*SHAPE) * 0.8,) for _ in range(3)]
    return mcu.compile(model, calibration[0], quantize=quantize, calibration=calibration, test_inputs=tests,
                       name=name, board=board)
