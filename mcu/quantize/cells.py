"""Recurrent cells (``nn.GRUCell``, ``nn.LSTMCell``, ``nn.RNNCell``) as the ops the quantizer annotates.

(An ``nn.GRUCell`` never gets here: mcu/capture/recurrent.py runs each of its steps as one int8 GRU op.)
``torch.export`` keeps a cell as one composite ATen op (``aten.gru_cell``, ``aten.lstm_cell``,
``aten.rnn_tanh_cell``, ``aten.rnn_relu_cell``) that the int8 quantizer has no pattern for, so a cell
stepped in a Python loop ran entirely in fp32 and was only broken into its pieces later, by Core ATen's
decompositions. :func:`decompose_cells` breaks it up before quantization instead, into the ops PyTorch's
own cell computes (aten/src/ATen/native/RNN.cpp): two linear layers, gate slices along the feature dim,
sigmoid and tanh, and the products and sums of the gates. Each of those has an int8 form (a linear layer,
a slice that keeps its input's quantization, a 256-entry table, the int8 add, sub and mul of two
activations), so each step quantizes like any other int8 layer; the hidden (and cell) state crossing from
one step to the next is an int8 tensor like any other. After calibration :func:`share_step_ranges` gives
every step of a cell the same ranges (per op, the union over the steps), so the state keeps one scale and
the steps' constants are equal and stored once.

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


_CELL_TYPES = ("GRUCell", "LSTMCell", "RNNCell")


def _step_role(node: torch.fx.Node, seen: dict[str, int]) -> tuple[str, int] | None:
    """(the cell module, the node's position in its step) for a node of a recurrent cell's call: export names
    a module's k-th call ``<key>@k``, and every call of a cell decomposes to the same ops in the same order."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    key, (path, kind) = list(stack.items())[-1]
    if not str(getattr(kind, "__name__", kind)).endswith(_CELL_TYPES):
        return None
    seen[key] = seen.get(key, -1) + 1
    return str(path), seen[key]


def share_step_ranges(prepared: torch.fx.GraphModule) -> None:
    """Give every step of a recurrent cell the same activation ranges: each observer of a step's op takes the
    union of the calibrated ranges of that op over all steps. The state then has one scale from step to
    step, as an nn.GRU's has, and the steps' weights, biases and tables are equal constants, stored once."""
    # lazy: keeps torchao out of this module's import
    from torchao.quantization.pt2e import MinMaxObserver

    seen: dict[str, int] = {}
    roles: dict[torch.fx.Node, tuple[str, int]] = {}
    for node in prepared.graph.nodes:
        if node.op == "call_function":
            role = _step_role(node, seen)
            if role is not None:
                roles[node] = role
    groups: dict[tuple[str, int], list[MinMaxObserver]] = {}
    for node in prepared.graph.nodes:
        if node.op != "call_module" or not node.args or node.args[0] not in roles:
            continue
        obs = prepared.get_submodule(str(node.target))
        if type(obs) is MinMaxObserver and obs.min_val.numel() == 1:
            groups.setdefault(roles[node.args[0]], []).append(obs)
    for observers in groups.values():
        if len(observers) < 2:
            continue
        lo = min(float(o.min_val) for o in observers)
        hi = max(float(o.max_val) for o in observers)
        for o in observers:
            o.min_val.fill_(lo)
            o.max_val.fill_(hi)
