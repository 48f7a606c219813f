"""Integer recurrent layers: ``nn.LSTM`` and ``nn.GRU`` kept whole for int8.

Exported as is, a recurrent module unrolls into per-step linear, sigmoid, tanh, mul and add ops, which
an int8 model can only run as an fp32 island. Before int8 quantization, :func:`rewrite_for_int8`
replaces every supported ``nn.LSTM``/``nn.GRU`` of a copy of the model by :class:`_IntRecurrent`, which
calls one custom op per layer (``mcu_rnn::lstm``, ``mcu_rnn::gru``): the layer survives export and Core
ATen whole, the quantizer observes its input and output (the hidden states) like any activation, and
the lowering turns it into one ``mcu_lstm_s8``/``mcu_gru_s8`` call (mcu/reference/recurrent.py states the
arithmetic). The int16 state ranges come from the calibration data: the model runs once in fp32 over
it and each layer records the largest cell value (LSTM) or recurrent candidate term (GRU), which
fixes the layer's power-of-two state scale.

With int16 activations (w8a16) an ``nn.GRUCell`` stepped in a Python loop is kept whole too: each call is one
``mcu_rnn::gru_cell`` op (one mcu_gru_s16 step from the given state), its candidate term's scale calibrated
over every step of the calibration data; and an ``nn.GRU`` called with an initial state runs one
``mcu_rnn::gru_from`` op per layer (calibrated with the states it was called with).

Supported: unidirectional, any number of layers, ``batch_first`` either way, biases or none, no
projection (``proj_size``), called without an initial state (the zeros that export produces). A module
called with an initial state (but a w8a16 GRU) runs its original fp32 graph; one whose final cell state ``c_n`` is
read is refused by the frontend with a clear error.
"""

from __future__ import annotations

import copy
import warnings
from typing import Iterable

import torch
from torch import nn

from mcu.reference.recurrent import power_of_two_shift


@torch.library.custom_op("mcu_rnn::lstm", mutates_args=())
def _lstm_op(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor,
             state_shift: int) -> torch.Tensor:
    """One LSTM layer, batch-first, zero initial state: all hidden states [N, T, H]."""
    return _run_layer("lstm", x, w_ih, w_hh, b_ih, b_hh)[0]


@_lstm_op.register_fake
def _lstm_fake(x, w_ih, w_hh, b_ih, b_hh, state_shift):
    return x.new_empty((x.shape[0], x.shape[1], w_hh.shape[1]))


@torch.library.custom_op("mcu_rnn::gru", mutates_args=())
def _gru_op(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor,
            state_shift: int) -> torch.Tensor:
    """One GRU layer, batch-first, zero initial state: all hidden states [N, T, H]."""
    return _run_layer("gru", x, w_ih, w_hh, b_ih, b_hh)[0]


@_gru_op.register_fake
def _gru_fake(x, w_ih, w_hh, b_ih, b_hh, state_shift):
    return x.new_empty((x.shape[0], x.shape[1], w_hh.shape[1]))


@torch.library.custom_op("mcu_rnn::lstm_final_cell", mutates_args=())
def _final_cell_op(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
                   b_hh: torch.Tensor) -> torch.Tensor:
    """c_n of one LSTM layer [N, H]: in the graph only when the model reads it (then refused)."""
    return _run_layer("lstm", x, w_ih, w_hh, b_ih, b_hh)[1]


@_final_cell_op.register_fake
def _final_cell_fake(x, w_ih, w_hh, b_ih, b_hh):
    return x.new_empty((x.shape[0], w_hh.shape[1]))


@torch.library.custom_op("mcu_rnn::gru_cell", mutates_args=())
def _gru_cell_op(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
                 b_hh: torch.Tensor, state_shift: int) -> torch.Tensor:
    """One step of an nn.GRUCell from the state ``h`` [N, H]: the next state [N, H] (w8a16 only)."""
    return _run_layer("gru", x.unsqueeze(1), w_ih, w_hh, b_ih, b_hh, h)[0][:, 0]


@_gru_cell_op.register_fake
def _gru_cell_fake(x, h, w_ih, w_hh, b_ih, b_hh, state_shift):
    return h.new_empty(h.shape)


@torch.library.custom_op("mcu_rnn::gru_from", mutates_args=())
def _gru_from_op(x: torch.Tensor, h0: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
                 b_hh: torch.Tensor, state_shift: int) -> torch.Tensor:
    """One GRU layer, batch-first, from the initial state ``h0`` [N, H]: all hidden states [N, T, H] (w8a16 only)."""
    return _run_layer("gru", x, w_ih, w_hh, b_ih, b_hh, h0)[0]


@_gru_from_op.register_fake
def _gru_from_fake(x, h0, w_ih, w_hh, b_ih, b_hh, state_shift):
    return x.new_empty((x.shape[0], x.shape[1], w_hh.shape[1]))


OPS = {"lstm": torch.ops.mcu_rnn.lstm.default, "gru": torch.ops.mcu_rnn.gru.default}
GRU_CELL = torch.ops.mcu_rnn.gru_cell.default
GRU_FROM = torch.ops.mcu_rnn.gru_from.default
FINAL_CELL = torch.ops.mcu_rnn.lstm_final_cell.default


def _run_layer(kind: str, x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
               b_hh: torch.Tensor, h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
    """fp32 layer from the zero state (a GRU: or from ``h0``): (hidden states, final cell (LSTM), largest
    |int16 state| value) where the state is the LSTM's cell or the GRU's recurrent candidate term ``Whn h + bhn``."""
    hidden = w_hh.shape[1]
    h = x.new_zeros((x.shape[0], hidden)) if h0 is None else h0
    c = x.new_zeros((x.shape[0], hidden))
    outs = []
    peak = 0.0
    for t in range(x.shape[1]):
        gx = x[:, t] @ w_ih.T + b_ih
        gh = h @ w_hh.T + b_hh
        if kind == "lstm":
            i, f, g, o = (gx + gh).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            peak = max(peak, float(c.abs().max()))
        else:
            xr, xz, xn = gx.chunk(3, dim=1)
            hr, hz, hn = gh.chunk(3, dim=1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
            peak = max(peak, float(hn.abs().max()))
        outs.append(h)
    return torch.stack(outs, dim=1), c, peak


def _supported(m: nn.Module) -> bool:
    return isinstance(m, (nn.LSTM, nn.GRU)) and not m.bidirectional and getattr(m, "proj_size", 0) == 0 \
        and m.mode in ("LSTM", "GRU")


class _IntRecurrent(nn.Module):
    """A stand-in for an nn.LSTM/nn.GRU that calls one custom op per layer (same weights, same outputs).
    ``from_state``: a GRU called with an initial state runs ``mcu_rnn::gru_from`` per layer too (w8a16)."""

    def __init__(self, original: nn.RNNBase, shifts: list[int], from_state: bool = False) -> None:
        super().__init__()
        self.original = original
        self.kind = "lstm" if original.mode == "LSTM" else "gru"
        self.batch_first = original.batch_first
        self.shifts = shifts
        self.from_state = from_state and self.kind == "gru"

    def _layer(self, k: int) -> tuple[torch.Tensor, ...]:
        m = self.original
        w_ih, w_hh = getattr(m, f"weight_ih_l{k}"), getattr(m, f"weight_hh_l{k}")
        zeros = torch.zeros(w_ih.shape[0])
        b_ih = getattr(m, f"bias_ih_l{k}") if m.bias else zeros
        b_hh = getattr(m, f"bias_hh_l{k}") if m.bias else zeros
        return w_ih, w_hh, b_ih, b_hh

    def forward(self, x: torch.Tensor, hx: object = None):
        if hx is not None and not self.from_state:  # the original module (an fp32 island in int8 models)
            return self.original(x, hx)
        unbatched = x.dim() == 2
        seq = x.unsqueeze(0) if unbatched else (x if self.batch_first else x.permute(1, 0, 2))
        h0 = None if hx is None else (hx.unsqueeze(1) if unbatched else hx)  # [layers, N, H]
        finals_h, finals_c = [], []
        for k in range(self.original.num_layers):
            weights = self._layer(k)
            layer_in = seq
            if h0 is None:
                seq = OPS[self.kind](layer_in, *weights, self.shifts[k])
            else:
                seq = GRU_FROM(layer_in, h0[k], *weights, self.shifts[k])
            finals_h.append(seq[:, -1])
            if self.kind == "lstm":
                finals_c.append(FINAL_CELL(layer_in, *weights))
        out = seq.squeeze(0) if unbatched else (seq if self.batch_first else seq.permute(1, 0, 2))
        h_n = torch.stack(finals_h, dim=0)
        h_n = h_n.squeeze(1) if unbatched else h_n
        if self.kind == "gru":
            return out, h_n
        c_n = torch.stack(finals_c, dim=0)
        return out, (h_n, c_n.squeeze(1) if unbatched else c_n)


def _calibrate(module: nn.RNNBase, inputs: list[tuple[torch.Tensor, torch.Tensor | None]]) -> list[int]:
    """Each layer's power-of-two state shift from the largest state value over the calibration inputs (each
    with its initial state, or None)."""
    stand_in = _IntRecurrent(module, [15] * module.num_layers)
    peaks = [0.0] * module.num_layers
    with torch.no_grad():
        for x, hx in inputs:
            unbatched = x.dim() == 2
            seq = x.unsqueeze(0) if unbatched else (x if module.batch_first else x.transpose(0, 1))
            h0 = None if hx is None else (hx.unsqueeze(1) if unbatched else hx)
            for k in range(module.num_layers):
                seq, _c, peak = _run_layer(stand_in.kind, seq, *stand_in._layer(k), None if h0 is None else h0[k])
                peaks[k] = max(peaks[k], peak)
    return [power_of_two_shift(p) for p in peaks]


class _IntGruCell(nn.Module):
    """A stand-in for an nn.GRUCell that calls one ``mcu_rnn::gru_cell`` op per step (same weights, same
    outputs): with int16 activations (w8a16) a step runs as one mcu_gru_s16 call, its state at the output's
    scale. ``state_shift``: the candidate term's power-of-two scale over every calibrated step."""

    def __init__(self, original: nn.GRUCell, state_shift: int) -> None:
        super().__init__()
        self.original = original
        self.state_shift = state_shift

    def forward(self, x: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
        m = self.original
        unbatched = x.dim() == 1
        x2 = x.unsqueeze(0) if unbatched else x
        if hx is None:
            h = torch.zeros(x2.shape[0], m.hidden_size)
        else:
            h = hx.unsqueeze(0) if unbatched else hx
        zeros = torch.zeros(3 * m.hidden_size)
        b_ih = m.bias_ih if m.bias else zeros
        b_hh = m.bias_hh if m.bias else zeros
        y = GRU_CELL(x2, h, m.weight_ih, m.weight_hh, b_ih, b_hh, self.state_shift)
        return y.squeeze(0) if unbatched else y


def _cell_shift(cell: nn.GRUCell, calls: list[tuple[torch.Tensor, torch.Tensor | None]]) -> int:
    """The candidate term's power-of-two shift from its largest value over the recorded steps."""
    peak = 0.0
    with torch.no_grad():
        b_hn = cell.bias_hh[2 * cell.hidden_size:] if cell.bias else torch.zeros(cell.hidden_size)
        for _x, h in calls:
            hn = b_hn if h is None else h @ cell.weight_hh[2 * cell.hidden_size:].T + b_hn
            peak = max(peak, float(hn.abs().max()))
    return power_of_two_shift(peak)


def rewrite_for_int8(model: nn.Module, calibration: Iterable[tuple[torch.Tensor, ...]] | None,
                     cells: bool = False) -> nn.Module:
    """A copy of ``model`` whose supported recurrent modules run as integer layers (the model itself when
    it has none). The recurrent modules' inputs are recorded over ``calibration`` to fix their state scales.
    ``cells``: also every nn.GRUCell, one op per step, and nn.GRU layers called with an initial state (w8a16;
    int8 quantizes a cell's gates one by one, mcu/quantize/cells.py, and runs such a GRU in fp32)."""
    targets = [name for name, m in model.named_modules() if _supported(m)]
    cell_targets = [name for name, m in model.named_modules() if cells and type(m) is nn.GRUCell]
    if not (targets or cell_targets) or calibration is None:
        return model
    seen: dict[str, list[tuple[torch.Tensor, torch.Tensor | None]]] = {name: [] for name in targets}
    steps: dict[str, list[tuple[torch.Tensor, torch.Tensor | None]]] = {name: [] for name in cell_targets}
    hooks = []
    modules = dict(model.named_modules())
    for name in targets:
        def record(_m, args, name=name):
            hx = args[1] if len(args) > 1 else None
            if hx is None:
                seen[name].append((args[0].detach(), None))
            elif cells and isinstance(hx, torch.Tensor) and modules[name].mode == "GRU":
                seen[name].append((args[0].detach(), hx.detach()))
        hooks.append(modules[name].register_forward_pre_hook(record))
    for name in cell_targets:
        def record_step(_m, args, kwargs, name=name):
            h = args[1] if len(args) > 1 else kwargs.get("hx")
            steps[name].append((args[0].detach(), None if h is None else h.detach()))
        hooks.append(modules[name].register_forward_pre_hook(record_step, with_kwargs=True))
    try:
        with torch.no_grad():
            for batch in calibration:
                model(*batch)
    except Exception:
        return model  # quantize_static reports calibration data that does not run
    finally:
        for h in hooks:
            h.remove()
    with warnings.catch_warnings():  # torch pytree deprecation noise from copying the module
        warnings.simplefilter("ignore")
        copied = copy.deepcopy(model)
    for name in targets:
        if not seen[name]:
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = copied.get_submodule(parent_name) if parent_name else copied
        original = getattr(parent, attr)
        setattr(parent, attr, _IntRecurrent(original, _calibrate(original, seen[name]), from_state=cells))
    for name in cell_targets:
        if not steps[name]:
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = copied.get_submodule(parent_name) if parent_name else copied
        original = getattr(parent, attr)
        setattr(parent, attr, _IntGruCell(original, _cell_shift(original, steps[name])))
    return copied
