"""int8 lowering of the recurrent layers: dequantize -> lstm/gru -> quantize becomes one
``lstm``/``gru`` op for mcu_lstm_s8/mcu_gru_s8, its weights quantized here (symmetric per gate row) with
the requantization constants, biases and the sigmoid table of mcu/reference/recurrent.py."""

from __future__ import annotations


from mcu.ir import Graph, Op, Tensor
from mcu.reference import recurrent

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


def _convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    if x.quant is None or out.quant is None or not x.quant.per_tensor:
        return "its input or output is not quantized per tensor"
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
