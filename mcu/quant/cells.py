"""Recurrent cells (``nn.GRUCell``, ``nn.LSTMCell``, ``nn.RNNCell``) as the ops the quantizer annotates.

``torch.export`` keeps a cell as one composite ATen op (``aten.gru_cell``, ``aten.lstm_cell``,
``aten.rnn_tanh_cell``, ``aten.rnn_relu_cell``) that the int8 quantizer has no pattern for, so a cell
stepped in a Python loop ran entirely in fp32 and was only broken into its pieces later, by Core ATen's
decompositions. :func:`decompose_cells` breaks it up before quantization instead, into the ops PyTorch's
own cell computes (aten/src/ATen/native/RNN.cpp): two linear layers, gate slices along the feature dim,
sigmoid and tanh, and the products and sums of the gates. Each of those has an int8 form (a linear layer,
a slice that keeps its input's quantization, a 256-entry table, the int8 add, sub and mul of two
activations), so each step quantizes like any other int8 layer, with its own calibrated scales; the
hidden (and cell) state crossing from one step to the next is an int8 tensor like any other.

GRU: ``h' = (h - n) * z + n`` with ``n = tanh(x_n + r * h_n)`` (PyTorch's order of operations, so the
fp32 graph is unchanged); LSTM: ``c' = f * c + i * g``, ``h' = o * tanh(c')``.
"""

from __future__ import annotations

from typing import Callable

import torch

aten = torch.ops.aten


def _gates(t: torch.Tensor, count: int) -> list[torch.Tensor]:
    """The gate blocks of ``t`` [N, count*H] as slices (a chunk would export as split and getitem)."""
    hidden = t.shape[-1] // count
    return [t[..., k * hidden:(k + 1) * hidden] for k in range(count)]


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return aten.linear.default(x, w, b)


def gru_cell(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
             b_ih: torch.Tensor | None = None, b_hh: torch.Tensor | None = None) -> torch.Tensor:
    xr, xz, xn = _gates(_linear(x, w_ih, b_ih), 3)
    hr, hz, hn = _gates(_linear(h, w_hh, b_hh), 3)
    r = torch.sigmoid(xr + hr)
    z = torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return (h - n) * z + n


def lstm_cell(x: torch.Tensor, hx: list[torch.Tensor], w_ih: torch.Tensor, w_hh: torch.Tensor,
              b_ih: torch.Tensor | None = None, b_hh: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    h, c = hx
    i, f, g, o = _gates(_linear(h, w_hh, b_hh) + _linear(x, w_ih, b_ih), 4)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2), c2


def rnn_tanh_cell(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
                  b_ih: torch.Tensor | None = None, b_hh: torch.Tensor | None = None) -> torch.Tensor:
    return torch.tanh(_linear(h, w_hh, b_hh) + _linear(x, w_ih, b_ih))


def rnn_relu_cell(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
                  b_ih: torch.Tensor | None = None, b_hh: torch.Tensor | None = None) -> torch.Tensor:
    return torch.relu(_linear(h, w_hh, b_hh) + _linear(x, w_ih, b_ih))


CELLS: dict[object, Callable[..., object]] = {
    aten.gru_cell.default: gru_cell,
    aten.lstm_cell.default: lstm_cell,
    aten.rnn_tanh_cell.default: rnn_tanh_cell,
    aten.rnn_relu_cell.default: rnn_relu_cell,
}


def decompose_cells(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``ep`` with every recurrent cell op replaced by its elementwise form (``ep`` itself when it has none)."""
    if not any(n.op == "call_function" and n.target in CELLS for n in ep.graph.nodes):
        return ep
    return ep.run_decompositions(dict(CELLS))
