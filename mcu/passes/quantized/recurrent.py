"""int8 lowering of the recurrent layers: dequantize -> lstm/gru -> quantize becomes one
``lstm``/``gru`` op for mcu_lstm_s8/mcu_gru_s8 (a GRU cell's step, from its given state: mcu_gru_from_s8; w4a8: :func:`narrow_weights_s4`, mcu_lstm_s4/mcu_gru_s4), its
weights quantized here (symmetric per gate row) with
the requantization constants, biases and the sigmoid table of mcu/reference/recurrent.py (an LSTM's final cell
c_n one ``lstm_final_cell`` op for mcu_lstm_final_cell_s8 on the same constants, the cell int16 at 2^-state_shift). With int16
activations (w8a16) an LSTM becomes one ``lstm`` op for mcu_lstm_s16 with the constants of
mcu/reference/lstm_s16.py (given initial states its last inputs, h0 then c0), and a GRU layer or a GRU cell's step one ``gru`` op for mcu_gru_s16 with those of
mcu/reference/gru_s16.py (a given state its last input)."""

from __future__ import annotations

import math

import numpy as np

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.passes.quantized.common import int_const
from mcu.reference import derive, gru_s16, lstm_s16, recurrent

KINDS = ("lstm", "gru", "lstm_final_cell")
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


def _given_states(op: Op, ins: list[Tensor]) -> list[Tensor]:
    """The op's given initial states (its inputs after the weights and biases, and a final cell's hidden states),
    each the quantized tensor the kernel reads or, for a constant, the constant."""
    first = 6 if op.kind == "lstm_final_cell" else 5
    varying = iter(ins[first - 4:])
    return [t if t.is_constant else next(varying) for t in op.inputs[first:]]


def _state_s16(op: Op, state: Tensor, quant: QuantParams, what: str = "state") -> Tensor | None | str:
    """A given state as the 16x8 kernels read it: int16 with ``quant`` (zero point 0), or None for a zero constant
    (the zero state: no recurrent product at the first step)."""
    if state.is_constant:
        data = np.asarray(state.data, dtype=np.float64)
        if state.dtype != "float32":
            data = (data - state.quant.zero_point[0]) * state.quant.scale[0]
        if not data.any():
            return None
        codes = np.clip(np.round(data / quant.scale[0]), -32768, 32767).astype(np.int16)
        return Tensor(f"{op.name}_{what}_q", state.shape, "int16", data=codes.reshape(state.shape), quant=quant)
    if state.dtype != "int16" or state.quant is None or not state.quant.per_tensor or \
            state.quant.zero_point[0] != 0 or state.quant.scale[0] != quant.scale[0]:
        return f"its {what} is not int16 at the scale its kernel reads it on"
    return state


def _convert_gru_s16(op: Op, ins: list[Tensor], x: Tensor, out: Tensor) -> Op | str:
    """The 16x8 GRU (w8a16): a whole nn.GRU layer (from the zero state or a given one), or one nn.GRUCell step
    from its state; mcu_gru_s16's constants (mcu/reference/gru_s16.py)."""
    w_ih, w_hh, b_ih, b_hh = (t.data for t in op.inputs[1:5])
    hidden, features = w_hh.shape[1], w_ih.shape[1]
    if max(hidden, features) > recurrent.MAX_FEATURES:
        return f"more than {recurrent.MAX_FEATURES} features"
    state = _state_s16(op, _given_states(op, ins)[0], out.quant) if len(op.inputs) > 5 else None
    if isinstance(state, str):
        return state
    try:
        p = gru_s16.layer_params(w_ih, w_hh, b_ih, b_hh, x.quant.scale[0], out.quant.scale[0],
                                 int(op.attrs["state_shift"]))
    except ValueError as exc:
        return str(exc)
    consts = [Tensor(f"{op.name}_w_ih_q", p.w_ih.shape, "int8", data=p.w_ih),
              Tensor(f"{op.name}_w_hh_q", p.w_hh.shape, "int8", data=p.w_hh),
              int_const(f"{op.name}_bias_q", p.bias, "int64"), int_const(f"{op.name}_quant", p.quant)]
    attrs = {"state_shift": p.state_shift, "cand_mult": p.cand_mult, "cand_shift": p.cand_shift,
             "keep_mult": p.keep_mult, "keep_shift": p.keep_shift, "out_mult": p.out_mult, "out_shift": p.out_shift,
             # mcu_gru_s16_get_buffer_size: the step's input and hidden state in dual-MAC order
             "scratch_bytes": 2 * (hidden + features),
             # the float weights and biases the constants come from, for the integer reference
             "weights_real": (w_ih, w_hh, b_ih, b_hh)}
    return Op(op.kind, [x, *consts, *([state] if state is not None else [])], [out], attrs, op.name, op.source)


def _convert_s16(op: Op, ins: list[Tensor], x: Tensor, out: Tensor) -> Op | str:
    """The 16x8 LSTM (w8a16): int16 input and hidden state with zero point 0, mcu_lstm_s16's constants; a GRU:
    mcu_gru_s16's."""
    if x.dtype != "int16" or out.dtype != "int16":
        return "w8a16 has 16x8 recurrent kernels reading and writing int16 only"
    if x.quant.zero_point[0] != 0 or out.quant.zero_point[0] != 0:
        return "w8a16 activations must be symmetric (zero point 0)"
    if op.kind == "gru":
        return _convert_gru_s16(op, ins, x, out)
    w_ih, w_hh, b_ih, b_hh = (t.data for t in op.inputs[1:5])
    hidden, features = w_hh.shape[1], w_ih.shape[1]
    if max(hidden, features) > recurrent.MAX_FEATURES:
        return f"more than {recurrent.MAX_FEATURES} features"
    final = op.kind == "lstm_final_cell"
    seq = ins[1] if final else out  # the hidden states: the layer's output, which a final cell reads
    if final and (seq.dtype != "int16" or seq.quant is None or seq.quant.zero_point[0] != 0):
        return "its layer's hidden states are not int16 of zero point 0"
    try:
        p = lstm_s16.layer_params(w_ih, w_hh, b_ih, b_hh, x.quant.scale[0], seq.quant.scale[0],
                                  int(op.attrs["state_shift"]))
    except ValueError as exc:
        return str(exc)
    if final and not math.isclose(out.quant.scale[0], 2.0 ** -p.cell_shift):
        return "a final cell writes the cell's scale 2^-state_shift"
    states: list[Tensor | None | str] = []
    if len(op.inputs) > (6 if final else 5):  # h0 on the hidden state's scale, c0 on the cell's
        h0, c0 = _given_states(op, ins)
        cell_quant = QuantParams(scale=(2.0 ** -p.cell_shift,), zero_point=(0,))
        states = [_state_s16(op, h0, seq.quant), _state_s16(op, c0, cell_quant, "cell")]
        for s in states:
            if isinstance(s, str):
                return s
        if states[0] is None and states[1] is None:
            states = []  # both zero: the kernel's own zero state
        elif states[0] is None:  # a zero h0 with a given cell: zeros read (a recurrent product of zero adds 0)
            states[0] = Tensor(f"{op.name}_state_q", h0.shape, "int16", data=np.zeros(h0.shape, np.int16),
                               quant=out.quant)
        elif states[1] is None:
            states[1] = Tensor(f"{op.name}_cell_q", c0.shape, "int16", data=np.zeros(c0.shape, np.int16),
                               quant=cell_quant)
    consts = [Tensor(f"{op.name}_w_ih_q", p.w_ih.shape, "int8", data=p.w_ih),
              Tensor(f"{op.name}_w_hh_q", p.w_hh.shape, "int8", data=p.w_hh),
              int_const(f"{op.name}_bias_q", p.bias, "int64"), int_const(f"{op.name}_quant", p.quant)]
    attrs = {"state_shift": p.cell_shift, "forget_mult": p.forget_mult, "forget_shift": p.forget_shift,
             "input_mult": p.input_mult, "input_shift": p.input_shift, "out_mult": p.out_mult,
             # mcu_lstm_s16_get_buffer_size: the cell (a final cell's is its output), the step's input and hidden
             # state in dual-MAC order
             "out_shift": p.out_shift, "scratch_bytes": 2 * ((1 if final else 2) * hidden + features),
             # the float weights and biases the constants come from, for the integer reference
             "weights_real": (w_ih, w_hh, b_ih, b_hh)}
    return Op(op.kind, [x, *consts, *([seq] if final else []), *states], [out], attrs, op.name, op.source)


def _s8_params(graph: Graph, op: Op, x: Tensor, hidden: Tensor) -> tuple[list[Tensor], dict]:
    """An int8 layer's constants as its kernels take them (weights, gate rows, the sigmoid table;
    mcu/reference/recurrent.py) and their attrs, from the input's and the hidden state's quantization."""
    w_ih, w_hh, b_ih, b_hh = (t.data for t in op.inputs[1:5])
    p = recurrent.layer_params("gru" if op.kind == "gru" else "lstm", w_ih, w_hh, b_ih, b_hh, x.quant.scale[0],
                               x.quant.zero_point[0], hidden.quant.scale[0], hidden.quant.zero_point[0],
                               int(op.attrs["state_shift"]))
    attrs = {"hidden_zp": p.hidden_zp, "out_mult": p.out_mult, "out_shift": p.out_shift,
             "state_shift": p.state_shift,
             "scratch_bytes": scratch_bytes("gru" if op.kind == "gru" else "lstm", w_ih.shape[1], w_hh.shape[1]),
             # the float weights and biases the constants come from, for the integer reference
             "weights_real": (w_ih, w_hh, b_ih, b_hh)}
    consts = [Tensor(f"{op.name}_w_ih_q", p.w_ih.shape, "int8", data=p.w_ih),
              Tensor(f"{op.name}_w_hh_q", p.w_hh.shape, "int8", data=p.w_hh),
              Tensor(f"{op.name}_rows", p.rows.shape, "int32", data=p.rows), _table(graph)]
    return consts, attrs


def _final_cell_s8(graph: Graph, op: Op, ins: list[Tensor], x: Tensor, out: Tensor) -> Op | str:
    """An int8 LSTM layer's final cell (mcu_lstm_final_cell_s8): its layer's constants (derived from the same
    float weights and quantization, so the same codes), the hidden states the layer wrote, the cell as int16 at
    2^-state_shift."""
    seq = ins[1]
    if len(op.inputs) > 6:
        return "an int8 final cell runs from the zero state only (from a given one: w8a16)"
    if seq.dtype != "int8" or seq.quant is None or not seq.quant.per_tensor:
        return "its layer's hidden states are not int8"
    if out.dtype != "int16" or out.quant.zero_point[0] != 0 or \
            not math.isclose(out.quant.scale[0], 2.0 ** -int(op.attrs["state_shift"])):
        return "a final cell writes int16 at the cell's scale 2^-state_shift"
    if max(op.inputs[1].shape[1], op.inputs[2].shape[1]) > recurrent.MAX_FEATURES:
        return f"more than {recurrent.MAX_FEATURES} features"
    consts, attrs = _s8_params(graph, op, x, seq)
    return Op(op.kind, [x, *consts, seq], [out], attrs, op.name, op.source)


def _convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    if x.quant is None or out.quant is None or not x.quant.per_tensor:
        return "its input or output is not quantized per tensor"
    if op.kind == "lstm_final_cell" and x.dtype == "int8":
        return _final_cell_s8(graph, op, ins, x, out)
    if x.dtype == "int16" or out.dtype == "int16":
        return _convert_s16(op, ins, x, out)
    if len(op.inputs) > 5 and op.kind != "gru":
        return "an LSTM from a given state runs whole only with int16 activations (w8a16)"
    if max(op.inputs[1].shape[1], op.inputs[2].shape[1]) > recurrent.MAX_FEATURES:
        return f"more than {recurrent.MAX_FEATURES} features"
    state = _state_s8(op, _given_states(op, ins)[0], out) if len(op.inputs) > 5 else None
    if isinstance(state, str):
        return state
    consts, attrs = _s8_params(graph, op, x, out)
    return Op(op.kind, [x, *consts, *([state] if state is not None else [])], [out], attrs, op.name, op.source)


def _state_s8(op: Op, state: Tensor, out: Tensor) -> Tensor | None | str:
    """A GRU's given state as mcu_gru_from_s8 reads it: int8 on the output's quantization; a constant as its codes
    there, or None for the zero state (mcu_gru_s8 from its own zero state)."""
    quant = out.quant
    if state.is_constant:
        data = np.asarray(state.data, dtype=np.float64)
        if state.dtype != "float32":
            data = (data - state.quant.zero_point[0]) * state.quant.scale[0]
        codes = np.clip(np.round(data / quant.scale[0]) + quant.zero_point[0], -128, 127).astype(np.int8)
        if len(op.inputs[0].shape) == 3 and not data.any():
            return None
        return Tensor(f"{op.name}_state_q", state.shape, "int8", data=codes.reshape(state.shape), quant=quant)
    if state.dtype != "int8" or state.quant is None or not state.quant.per_tensor or \
            state.quant.zero_point[0] != quant.zero_point[0] or state.quant.scale[0] != quant.scale[0]:
        return "its state is not int8 on its output's quantization"
    return state


CONVERTERS = {kind: _convert for kind in KINDS}


def narrow_weights_s4(graph: Graph) -> Graph:
    """w4a8: the input and recurrent matrices of every int8 LSTM and GRU layer (and LSTM final cell) on 4 bits,
    symmetric per gate row on [-7, 7] as w4a8's convolution and linear weights, quantized again from the float
    weights the op keeps, the gate rows' biases and multipliers with them (attrs weight_bits 4: mcu_lstm_s4,
    mcu_gru_s4 and mcu_lstm_final_cell_s4 read the codes packed two a byte). A final cell derives the same codes
    as its layer."""
    for op in graph.ops:
        if op.kind not in KINDS or op.inputs[0].dtype != "int8" or "weights_real" not in op.attrs or \
                (op.kind == "gru" and len(op.inputs) > 5):  # mcu_gru_from_s8 has no 4-bit form
            continue
        op.attrs["weight_bits"] = 4
        p = derive.recurrent_layer(op)
        for t, data in zip(op.inputs[1:4], (p.w_ih, p.w_hh, p.rows)):
            t.data = data
    return graph
