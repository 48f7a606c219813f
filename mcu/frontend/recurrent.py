"""Frontend handlers of the integer recurrent layers: ``mcu_rnn::lstm`` and ``mcu_rnn::gru``, the
one-op-per-layer form that mcu/capture/recurrent.py gives nn.LSTM and nn.GRU before int8 quantization (and
``mcu_rnn::gru_cell`` (an nn.GRUCell step), and ``mcu_rnn::gru_from`` and ``mcu_rnn::lstm_from`` at w8a16 (an nn.GRU
or nn.LSTM from an initial state, and an nn.LSTM's final cell c_n: ``mcu_rnn::lstm_final_cell``). Each becomes one
``lstm``/``gru``/``lstm_final_cell`` IR op over the layer's float weights (with the given state as the last input,
an LSTM's h0 then c0), which the int8 lowering
(mcu/passes/quantized/recurrent.py) quantizes for ``mcu_lstm_s8``/``mcu_gru_s8`` (a GRU cell's step:
``mcu_gru_from_s8``)."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.capture.recurrent import FINAL_CELL, GRU_CELL, GRU_FROM, LSTM_FROM, OPS
from mcu.capture.sourceinfo import op_source, user_source_line


def _layer(kind: str) -> Callable[[Any, Node, list[Any]], Tensor]:
    def handle(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        x, w_ih, w_hh, b_ih, b_hh, shift = a[:6]
        for t, what in ((w_ih, "input weights"), (w_hh, "recurrent weights"), (b_ih, "input bias"),
                        (b_hh, "recurrent bias")):
            if not isinstance(t, Tensor) or not t.is_constant:
                raise McuError(f"nn.{kind.upper()} with {what} that are not parameters{user_source_line(node)}")
        if not isinstance(x, Tensor) or len(x.shape) != 3:
            raise McuError(f"nn.{kind.upper()} on an input of shape {getattr(x, 'shape', '?')}{user_source_line(node)}")
        n, steps, _ = x.shape
        out = Tensor(name=node.name, shape=(n, steps, w_hh.shape[1]), dtype="float32")
        ctx.ops.append(Op(kind, [x, w_ih, w_hh, b_ih, b_hh], [out], {"state_shift": int(shift)}, name=node.name,
                          source=op_source(node)))
        return out
    return handle


def _from_state(rank: int, what_op: str, states: int = 1) -> Callable[[Any, Node, list[Any]], Tensor]:
    """One nn.GRUCell step (``rank`` 2: x [N, I]) or an nn.GRU layer from an initial state (``rank`` 3: x [N, T, I],
    w8a16): a ``gru`` op from the state [N, H], its last input; ``states`` 2: an nn.LSTM layer from h0 and c0,
    an ``lstm`` op with both last."""
    kind = "lstm" if states == 2 else "gru"

    def handle(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        x, given = a[0], a[1:1 + states]
        w_ih, w_hh, b_ih, b_hh, shift = a[1 + states:6 + states]
        for t, what in ((w_ih, "input weights"), (w_hh, "recurrent weights"), (b_ih, "input bias"),
                        (b_hh, "recurrent bias")):
            if not isinstance(t, Tensor) or not t.is_constant:
                raise McuError(f"{what_op} with {what} that are not parameters{user_source_line(node)}")
        if not isinstance(x, Tensor) or len(x.shape) != rank or \
                not all(isinstance(h, Tensor) and len(h.shape) == 2 for h in given):
            raise McuError(f"{what_op} on an input of shape {getattr(x, 'shape', '?')}{user_source_line(node)}")
        h = given[0]
        shape = tuple(h.shape) if rank == 2 else (x.shape[0], x.shape[1], h.shape[1])
        out = Tensor(name=node.name, shape=shape, dtype="float32")
        ctx.ops.append(Op(kind, [x, w_ih, w_hh, b_ih, b_hh, *given], [out], {"state_shift": int(shift)},
                          name=node.name, source=op_source(node)))
        return out
    return handle


def _final_cell(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """An LSTM layer's final cell c_n (the quantizer gives it its cell's int16 scale, so an int16 quantize reads
    it; at int8 from the zero state only): one
    ``lstm_final_cell`` op reading the layer's input, weights, hidden states ``y`` and given states (h0, c0 last)."""
    if not any("quantize_per_tensor" in str(u.target) and torch.int16 in u.args for u in node.users):
        raise McuError(f"the final cell state c_n of an int8 nn.LSTM called with (h0, c0) is not supported"
                       f"{user_source_line(node)}",
                       hint="call it from the zero state, use the output sequence or h_n (the last hidden state), "
                            "--quantize w8a16, or --quantize none")
    x, w_ih, w_hh, b_ih, b_hh, y, shift = a[:7]
    given = [t for t in a[7:9] if t is not None]
    for t, what in ((w_ih, "input weights"), (w_hh, "recurrent weights"), (b_ih, "input bias"),
                    (b_hh, "recurrent bias")):
        if not isinstance(t, Tensor) or not t.is_constant:
            raise McuError(f"nn.LSTM with {what} that are not parameters{user_source_line(node)}")
    out = Tensor(name=node.name, shape=(x.shape[0], w_hh.shape[1]), dtype="float32")
    ctx.ops.append(Op("lstm_final_cell", [x, w_ih, w_hh, b_ih, b_hh, y, *given], [out], {"state_shift": int(shift)},
                      name=node.name, source=op_source(node)))
    return out


HANDLERS: dict[object, Callable[[Any, Node, list[Any]], Any]] = {
    OPS["lstm"]: _layer("lstm"),
    OPS["gru"]: _layer("gru"),
    GRU_CELL: _from_state(2, "nn.GRUCell"),
    GRU_FROM: _from_state(3, "nn.GRU"),
    LSTM_FROM: _from_state(3, "nn.LSTM", states=2),
    FINAL_CELL: _final_cell,
}
