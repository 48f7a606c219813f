"""int8 lowering of the recurrent layers: dequantize -> lstm/gru -> quantize becomes one
``lstm``/``gru`` op for mcu_lstm_s8/mcu_gru_s8, its weights quantized here (symmetric per gate row) with
the requantization constants, biases and the sigmoid table of mcu/reference/recurrent.py. With int16
activations (w8a16) an LSTM becomes one ``lstm`` op for mcu_lstm_s16 with the constants of
mcu/reference/lstm_s16.py."""

from __future__ import annotations


from mcu.ir import Graph, Op, Tensor
from mcu.passes.quantized.common import int_const
from mcu.reference import lstm_s16, recurrent

KINDS = ("lstm", "gru")
TABLE_NAME = "recurrent_sigmoid_table"


def scratch_bytes(kind: str, features: int, hidden: int) -> int:
    """mcu_lstm_s8/mcu_gru_s8_get_buffer_size: int16 gates [4H] (the LSTM's pre-activations; the GRU's 3H
    plus Whn h), the LSTM's int16 cell [H], the step's input and hidden state widened to int16, the int8
    hidden state [H]."""
    return 2 * (5 if kind == "lstm" else 4) * hidden + 2 * (features + hidden) + hidden


def _table(graph: Graph) -> Tensor:
    """The sigmoid table, one constant for every recurrent op of the graph."""
    for t in graph.tensors():
        if t.name == TABLE_NAME and t.is_constant:
            return t
    return Tensor(TABLE_NAME, (recurrent.TABLE_SIZE,), "int16", data=recurrent.sigmoid_table())


def _convert_s16(op: Op, x: Tensor, out: Tensor) -> Op | str:
    """The 16x8 LSTM (w8a16): int16 input and hidden state with zero point 0, mcu_lstm_s16's constants."""
    if op.kind != "lstm" or x.dtype != "int16" or out.dtype != "int16":
        return "w8a16 has a 16x8 kernel for an LSTM reading and writing int16 only"
    if x.quant.zero_point[0] != 0 or out.quant.zero_point[0] != 0:
        return "w8a16 activations must be symmetric (zero point 0)"
    w_ih, w_hh, b_ih, b_hh = (t.data for t in op.inputs[1:5])
    hidden, features = w_hh.shape[1], w_ih.shape[1]
    if max(hidden, features) > recurrent.MAX_FEATURES:
        return f"more than {recurrent.MAX_FEATURES} features"
    try:
        p = lstm_s16.layer_params(w_ih, w_hh, b_ih, b_hh, x.quant.scale[0], out.quant.scale[0],
                                  int(op.attrs["state_shift"]))
    except ValueError as exc:
        return str(exc)
    consts = [Tensor(f"{op.name}_w_ih_q", p.w_ih.shape, "int8", data=p.w_ih),
              Tensor(f"{op.name}_w_hh_q", p.w_hh.shape, "int8", data=p.w_hh),
              int_const(f"{op.name}_bias_q", p.bias, "int64"), int_const(f"{op.name}_quant", p.quant)]
    attrs = {"state_shift": p.cell_shift, "forget_mult": p.forget_mult, "forget_shift": p.forget_shift,
             "input_mult": p.input_mult, "input_shift": p.input_shift, "out_mult": p.out_mult,
             # mcu_lstm_s16_get_buffer_size: the cell, the step's input and hidden state in dual-MAC order
             "out_shift": p.out_shift, "scratch_bytes": 2 * (2 * hidden + features),
             # the float weights and biases the constants come from, for the integer reference
             "weights_real": (w_ih, w_hh, b_ih, b_hh)}
    return Op(op.kind, [x, *consts], [out], attrs, op.name, op.source)


def _convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    if x.quant is None or out.quant is None or not x.quant.per_tensor:
        return "its input or output is not quantized per tensor"
    if x.dtype == "int16" or out.dtype == "int16":
        return _convert_s16(op, x, out)
    w_ih, w_hh, b_ih, b_hh = (t.data for t in op.inputs[1:5])
    hidden, features = w_hh.shape[1], w_ih.shape[1]
    if max(hidden, features) > recurrent.MAX_FEATURES:
        return f"more than {recurrent.MAX_FEATURES} features"
    p = recurrent.layer_params(op.kind, w_ih, w_hh, b_ih, b_hh, x.quant.scale[0], x.quant.zero_point[0],
                               out.quant.scale[0], out.quant.zero_point[0], int(op.attrs["state_shift"]))
    consts = [Tensor(f"{op.name}_w_ih_q", p.w_ih.shape, "int8", data=p.w_ih),
              Tensor(f"{op.name}_w_hh_q", p.w_hh.shape, "int8", data=p.w_hh),
              Tensor(f"{op.name}_rows", p.rows.shape, "int32", data=p.rows),
              _table(graph)]
    attrs = {"hidden_zp": p.hidden_zp, "out_mult": p.out_mult, "out_shift": p.out_shift,
             "state_shift": p.state_shift, "scratch_bytes": scratch_bytes(op.kind, features, hidden),
             # the float weights and biases the constants come from, for the integer reference
             "weights_real": (w_ih, w_hh, b_ih, b_hh)}
    return Op(op.kind, [x, *consts], [out], attrs, op.name, op.source)


CONVERTERS = {kind: _convert for kind in KINDS}
