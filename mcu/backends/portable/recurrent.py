"""Portable-backend emitters of the integer recurrent layers: mcu_lstm_s8 and mcu_gru_s8 (program kernel ids
240-241; a GRU cell's step from its state mcu_gru_from_s8, id 227; with 4-bit weights mcu_lstm_s4, mcu_gru_s4 and mcu_lstm_final_cell_s4, ids 215-217), and the 16x8 LSTM and GRU of w8a16, mcu_lstm_s16 and mcu_gru_s16 (ids 118-119), and an LSTM's final cell,
mcu_lstm_final_cell_s16 (id 171), and an int8 one's, mcu_lstm_final_cell_s8 (id 174). They join
:data:`mcu.backends.portable.core.EMITTERS`."""

from __future__ import annotations

from mcu.backends.calls import SCRATCH, KernelCall, Ref
from mcu.backends.weights import s4_weights
from mcu.ir import Op, Tensor


def recurrent_params(op: Op) -> dict:
    """The fields of mcu_recurrent_s8_params, in declaration order."""
    x = op.inputs[0]
    batch, steps, features = x.shape if len(x.shape) == 3 else (x.shape[0], 1, x.shape[1])  # a cell: one step
    a = op.attrs
    return {"batch": batch, "steps": steps, "input_size": features, "hidden": op.output.shape[-1],
            "hidden_zp": int(a["hidden_zp"]), "out_mult": int(a["out_mult"]), "out_shift": int(a["out_shift"]),
            "state_shift": int(a["state_shift"])}


def _matrices(op: Op) -> tuple[Tensor, Tensor, str]:
    """The layer's two matrices as its kernel reads them and the kernel names' weight suffix: int8, or at
    weight_bits 4 packed two a byte (mcu_lstm_s4, mcu_gru_s4, mcu_lstm_final_cell_s4)."""
    if op.attrs.get("weight_bits") == 4:
        return s4_weights(op, 1), s4_weights(op, 2), "s4"
    return op.inputs[1], op.inputs[2], "s8"


def _recurrent_call(op: Op, ref: Ref, kernels: dict[tuple[str, bool], str]) -> KernelCall:
    """One recurrent layer's call, its kernel picked by its weights' suffix and whether it starts from a
    given state (a GRU cell's step: mcu_gru_from_s8)."""
    x, _, _, rows, table = op.inputs[:5]
    state = op.inputs[5:]
    w_ih, w_hh, suffix = _matrices(op)
    function = kernels.get((suffix, bool(state)))
    assert function is not None, f"{op.name}: no kernel for {suffix} weights{' from a given state' if state else ''}"
    assert ref.scratch is not None, f"{function} needs its planned scratch buffer"
    return KernelCall(function, ["&ctx", "&params", ref(x), ref(w_ih), ref(w_hh), ref(rows), ref(table),
                                 *[ref(t) for t in state], ref(op.output)], [f"{function}.c"],
                      "mcu_recurrent_s8_params", recurrent_params(op),
                      locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, x, w_ih, w_hh, rows, table, *state, op.output])


# Each emitter spells its kernels' names out: `mcu ops` reads them from its source.
def _lstm(op: Op, ref: Ref) -> KernelCall:
    return _recurrent_call(op, ref, {("s8", False): "mcu_lstm_s8", ("s4", False): "mcu_lstm_s4"})


def _gru(op: Op, ref: Ref) -> KernelCall:
    return _recurrent_call(op, ref, {("s8", False): "mcu_gru_s8", ("s4", False): "mcu_gru_s4",
                                     ("s8", True): "mcu_gru_from_s8"})


def lstm_s16_params(op: Op) -> dict:
    """The fields of mcu_lstm_s16_params, in declaration order (a final cell's: of its layer)."""
    batch, steps, features = op.inputs[0].shape
    a = op.attrs
    return {"batch": batch, "steps": steps, "input_size": features, "hidden": op.output.shape[-1],
            "cell_shift": int(a["state_shift"]),
            **{k: int(a[k]) for k in ("forget_mult", "forget_shift", "input_mult", "input_shift", "out_mult",
                                      "out_shift")}}


def _lstm_s16(op: Op, ref: Ref) -> KernelCall:
    x, w_ih, w_hh, bias, quant = op.inputs[:5]
    state, cell = op.inputs[5:7] if len(op.inputs) > 5 else (None, None)
    assert ref.scratch is not None, "mcu_lstm_s16 needs its planned scratch buffer"
    states = [ref(t) if t is not None else "NULL" for t in (state, cell)]
    return KernelCall("mcu_lstm_s16", ["&ctx", "&params", ref(x), *states, ref(w_ih), ref(w_hh), ref(bias),
                                       ref(quant), ref(op.output)], ["mcu_lstm_s16.c"], "mcu_lstm_s16_params",
                      lstm_s16_params(op),
                      locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, x, state, cell, w_ih, w_hh, bias, quant, op.output],
                      headers=["mcu/kernels_s16.h"])


def _lstm_final_cell_s16(op: Op, ref: Ref) -> KernelCall:
    """An LSTM layer's final cell (w8a16): its layer's operands and the hidden states the layer wrote."""
    x, w_ih, w_hh, bias, quant, seq = op.inputs[:6]
    state, cell = op.inputs[6:8] if len(op.inputs) > 6 else (None, None)
    assert ref.scratch is not None, "mcu_lstm_final_cell_s16 needs its planned scratch buffer"
    states = [ref(t) if t is not None else "NULL" for t in (state, cell)]
    return KernelCall("mcu_lstm_final_cell_s16", ["&ctx", "&params", ref(x), ref(seq), *states, ref(w_ih),
                                                  ref(w_hh), ref(bias), ref(quant), ref(op.output)],
                      ["mcu_lstm_final_cell_s16.c"], "mcu_lstm_s16_params", lstm_s16_params(op),
                      locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, x, seq, state, cell, w_ih, w_hh, bias, quant, op.output],
                      headers=["mcu/kernels_s16.h"])


def _lstm_final_cell(op: Op, ref: Ref) -> KernelCall:
    """An LSTM layer's final cell: of an int8 layer (mcu_lstm_final_cell_s8: its layer's operands and the hidden
    states it wrote), or of a 16x8 one."""
    if op.inputs[0].dtype != "int8":
        return _lstm_final_cell_s16(op, ref)
    x, _, _, rows, table, seq = op.inputs
    w_ih, w_hh, suffix = _matrices(op)
    function = {"s8": "mcu_lstm_final_cell_s8", "s4": "mcu_lstm_final_cell_s4"}[suffix]
    assert ref.scratch is not None, f"{function} needs its planned scratch buffer"
    return KernelCall(function, ["&ctx", "&params", ref(x), ref(w_ih), ref(w_hh), ref(rows), ref(table), ref(seq),
                                 ref(op.output)], [f"{function}.c"], "mcu_recurrent_s8_params", recurrent_params(op),
                      locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, x, w_ih, w_hh, rows, table, seq, op.output])


def gru_s16_params(op: Op) -> dict:
    """The fields of mcu_gru_s16_params, in declaration order (a GRU cell's step: a sequence of one)."""
    x = op.inputs[0]
    batch, steps, features = x.shape if len(x.shape) == 3 else (x.shape[0], 1, x.shape[1])
    a = op.attrs
    return {"batch": batch, "steps": steps, "input_size": features, "hidden": op.output.shape[-1],
            **{k: int(a[k]) for k in ("cand_mult", "cand_shift", "keep_mult", "keep_shift", "out_mult", "out_shift")}}


def _gru_s16(op: Op, ref: Ref) -> KernelCall:
    x, w_ih, w_hh, bias, quant = op.inputs[:5]
    state = op.inputs[5] if len(op.inputs) > 5 else None
    assert ref.scratch is not None, "mcu_gru_s16 needs its planned scratch buffer"
    state_arg = ref(state) if state is not None else "NULL"
    return KernelCall("mcu_gru_s16", ["&ctx", "&params", ref(x), state_arg, ref(w_ih), ref(w_hh), ref(bias),
                                      ref(quant), ref(op.output)], ["mcu_gru_s16.c"],
                      "mcu_gru_s16_params", gru_s16_params(op),
                      locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, x, state, w_ih, w_hh, bias, quant, op.output], headers=["mcu/kernels_s16.h"])


EMITTERS = {
    ("lstm", "int8"): _lstm,
    ("gru", "int8"): _gru,
    ("lstm", "int16"): _lstm_s16,
    ("gru", "int16"): _gru_s16,
    ("lstm_final_cell", "int16"): _lstm_final_cell,
}
