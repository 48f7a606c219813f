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

An ``nn.GRUCell`` stepped in a Python loop is kept whole too: each call is one ``mcu_rnn::gru_cell`` op (one
mcu_gru_from_s8 step from the given state at int8, one mcu_gru_s16 step at w8a16), its candidate term's scale
calibrated over every step of the calibration data. With int16 activations (w8a16) an ``nn.GRU`` called with an initial state runs one
``mcu_rnn::gru_from`` op per layer and an ``nn.LSTM`` called with ``(h0, c0)`` one ``mcu_rnn::lstm_from`` (calibrated
with the states they were called with); and a bidirectional layer runs its reverse direction as the same op on the
input flipped in time, its output flipped back and joined to the forward one's along the features.

Supported: any number of layers, ``batch_first`` either way, biases or none, no projection (``proj_size``),
unidirectional and called without an initial state (the zeros that export produces) at int8, also bidirectional
and from an initial state at w8a16. A module called with an initial state at int8 runs its original fp32 graph;
one whose final cell state ``c_n`` is read runs one more op per layer at w8a16 (``mcu_rnn::lstm_final_cell``: the
cell from the layer's hidden states) and is refused by the frontend with a clear error at int8.
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
                   b_hh: torch.Tensor, y: torch.Tensor, state_shift: int, h0: torch.Tensor | None = None,
                   c0: torch.Tensor | None = None) -> torch.Tensor:
    """c_n of one LSTM layer [N, H] (from the zero state or ``h0``, ``c0``) whose hidden states are ``y``
    [N, T, H]: in the graph only when the model reads it (w8a16: one mcu_lstm_final_cell_s16 call, the cell at
    the layer's 2^-state_shift, from the hidden states the layer's op wrote; refused at int8)."""
    return _run_layer("lstm", x, w_ih, w_hh, b_ih, b_hh, h0, c0)[1]


@_final_cell_op.register_fake
def _final_cell_fake(x, w_ih, w_hh, b_ih, b_hh, y, state_shift, h0=None, c0=None):
    return x.new_empty((x.shape[0], w_hh.shape[1]))


@torch.library.custom_op("mcu_rnn::lstm_from", mutates_args=())
def _lstm_from_op(x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
                  b_ih: torch.Tensor, b_hh: torch.Tensor, state_shift: int) -> torch.Tensor:
    """One LSTM layer, batch-first, from the initial states ``h0`` and ``c0`` [N, H]: all hidden states [N, T, H]
    (w8a16 only)."""
    return _run_layer("lstm", x, w_ih, w_hh, b_ih, b_hh, h0, c0)[0]


@_lstm_from_op.register_fake
def _lstm_from_fake(x, h0, c0, w_ih, w_hh, b_ih, b_hh, state_shift):
    return x.new_empty((x.shape[0], x.shape[1], w_hh.shape[1]))


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
LSTM_FROM = torch.ops.mcu_rnn.lstm_from.default
# where each whole-layer op's two weight matrices are among its arguments (w_ih, w_hh, b_ih, b_hh follow)
WEIGHT_ARG = {OPS["lstm"]: 1, OPS["gru"]: 1, GRU_FROM: 2, GRU_CELL: 2, LSTM_FROM: 3}
FINAL_CELL = torch.ops.mcu_rnn.lstm_final_cell.default


def _run_layer(kind: str, x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
               b_hh: torch.Tensor, h0: torch.Tensor | None = None,
               c0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
    """fp32 layer from the zero state or from ``h0`` (an LSTM's: and ``c0``): (hidden states, final cell (LSTM),
    largest |int16 state| value) where the state is the LSTM's cell (the initial one included) or the GRU's
    recurrent candidate term ``Whn h + bhn``."""
    hidden = w_hh.shape[1]
    h = x.new_zeros((x.shape[0], hidden)) if h0 is None else h0
    c = x.new_zeros((x.shape[0], hidden)) if c0 is None else c0
    outs = []
    peak = float(c.abs().max()) if kind == "lstm" and c.numel() else 0.0
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


def _supported(m: nn.Module, w8a16: bool = False) -> bool:
    return isinstance(m, (nn.LSTM, nn.GRU)) and (w8a16 or not m.bidirectional) and \
        getattr(m, "proj_size", 0) == 0 and m.mode in ("LSTM", "GRU")


def _initial(kind: str, hx: object, unbatched: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(h0, c0) as [layers * directions, N, H] (None: the zero state; c0 is the LSTM's)."""
    if hx is None:
        return None, None
    h0, c0 = hx if kind == "lstm" else (hx, None)  # type: ignore[misc]
    if unbatched:
        return h0.unsqueeze(1), None if c0 is None else c0.unsqueeze(1)
    return h0, c0


class _IntRecurrent(nn.Module):
    """A stand-in for an nn.LSTM/nn.GRU that calls one custom op per layer and direction (same weights, same
    outputs). ``w8a16``: a layer called with an initial state runs ``mcu_rnn::gru_from``/``mcu_rnn::lstm_from``
    too, and a reverse direction is the layer's op on the input flipped in time. ``shifts``: per layer and
    direction, PyTorch's order (layer 0 forward, layer 0 reverse, layer 1 ...)."""

    def __init__(self, original: nn.RNNBase, shifts: list[int], w8a16: bool = False) -> None:
        super().__init__()
        self.original = original
        self.kind = "lstm" if original.mode == "LSTM" else "gru"
        self.batch_first = original.batch_first
        self.shifts = shifts
        self.from_state = w8a16
        self.directions = 2 if original.bidirectional else 1

    def _layer(self, k: int, reverse: bool = False) -> tuple[torch.Tensor, ...]:
        m = self.original
        tail = "_reverse" if reverse else ""
        w_ih, w_hh = getattr(m, f"weight_ih_l{k}{tail}"), getattr(m, f"weight_hh_l{k}{tail}")
        zeros = torch.zeros(w_ih.shape[0])
        b_ih = getattr(m, f"bias_ih_l{k}{tail}") if m.bias else zeros
        b_hh = getattr(m, f"bias_hh_l{k}{tail}") if m.bias else zeros
        return w_ih, w_hh, b_ih, b_hh

    def forward(self, x: torch.Tensor, hx: object = None):
        if hx is not None and not self.from_state:  # the original module (an fp32 island in int8 models)
            return self.original(x, hx)
        unbatched = x.dim() == 2
        seq = x.unsqueeze(0) if unbatched else (x if self.batch_first else x.permute(1, 0, 2))
        h0, c0 = _initial(self.kind, hx, unbatched)  # [layers * directions, N, H]
        finals_h, finals_c = [], []
        for k in range(self.original.num_layers):
            outs = []
            for d in range(self.directions):
                weights, idx = self._layer(k, d == 1), k * self.directions + d
                layer_in = seq.flip(1) if d else seq  # a reverse direction reads the steps last to first
                if h0 is None:
                    y = OPS[self.kind](layer_in, *weights, self.shifts[idx])
                elif self.kind == "gru":
                    y = GRU_FROM(layer_in, h0[idx], *weights, self.shifts[idx])
                else:
                    y = LSTM_FROM(layer_in, h0[idx], c0[idx], *weights, self.shifts[idx])
                finals_h.append(y[:, -1])
                if self.kind == "lstm":
                    finals_c.append(FINAL_CELL(layer_in, *weights, y, self.shifts[idx], None if h0 is None else h0[idx],
                                               None if c0 is None else c0[idx]))
                outs.append(y.flip(1) if d else y)
            seq = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
        out = seq.squeeze(0) if unbatched else (seq if self.batch_first else seq.permute(1, 0, 2))
        h_n = torch.stack(finals_h, dim=0)
        h_n = h_n.squeeze(1) if unbatched else h_n
        if self.kind == "gru":
            return out, h_n
        c_n = torch.stack(finals_c, dim=0)
        return out, (h_n, c_n.squeeze(1) if unbatched else c_n)


def _calibrate(module: nn.RNNBase, inputs: list[tuple[torch.Tensor, object]]) -> list[int]:
    """Each layer's and direction's power-of-two state shift from the largest state value over the calibration
    inputs (each with its initial state, or None)."""
    stand_in = _IntRecurrent(module, [15] * module.num_layers * (2 if module.bidirectional else 1))
    peaks = [0.0] * len(stand_in.shifts)
    with torch.no_grad():
        for x, hx in inputs:
            unbatched = x.dim() == 2
            seq = x.unsqueeze(0) if unbatched else (x if module.batch_first else x.transpose(0, 1))
            h0, c0 = _initial(stand_in.kind, hx, unbatched)
            for k in range(module.num_layers):
                outs = []
                for d in range(stand_in.directions):
                    idx = k * stand_in.directions + d
                    y, _c, peak = _run_layer(stand_in.kind, seq.flip(1) if d else seq, *stand_in._layer(k, d == 1),
                                             None if h0 is None else h0[idx], None if c0 is None else c0[idx])
                    peaks[idx] = max(peaks[idx], peak)
                    outs.append(y.flip(1) if d else y)
                seq = torch.cat(outs, dim=2)
    return [power_of_two_shift(p) for p in peaks]


class _IntGruCell(nn.Module):
    """A stand-in for an nn.GRUCell that calls one ``mcu_rnn::gru_cell`` op per step (same weights, same
    outputs): a step runs as one mcu_gru_from_s8 call (int8) or mcu_gru_s16 call (w8a16), its state at the
    output's quantization. ``state_shift``: the candidate term's power-of-two scale over every calibrated step."""

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
    Every nn.GRUCell runs one op per step (mcu_gru_from_s8 at int8, mcu_gru_s16 at w8a16). ``cells``: also nn.GRU
    and nn.LSTM layers called with an initial state and bidirectional ones (w8a16; int8 runs a layer from a state
    in fp32 and unrolls a bidirectional one)."""
    targets = [name for name, m in model.named_modules() if _supported(m, cells)]
    cell_targets = [name for name, m in model.named_modules() if type(m) is nn.GRUCell]
    if not (targets or cell_targets) or calibration is None:
        return model
    seen: dict[str, list[tuple[torch.Tensor, object]]] = {name: [] for name in targets}
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
            elif cells and isinstance(hx, (tuple, list)) and len(hx) == 2 and modules[name].mode == "LSTM":
                seen[name].append((args[0].detach(), tuple(t.detach() for t in hx)))
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
        setattr(parent, attr, _IntRecurrent(original, _calibrate(original, seen[name]), w8a16=cells))
    for name in cell_targets:
        if not steps[name]:
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = copied.get_submodule(parent_name) if parent_name else copied
        original = getattr(parent, attr)
        setattr(parent, attr, _IntGruCell(original, _cell_shift(original, steps[name])))
    return copied
