"""Run a lowered graph in Python with the integer reference kernels: the parity oracle.

Every int8 op calls the reference kernel in its family's module (:mod:`mcu.reference.conv`, ``pool``,
``elementwise``, ``norm``, ``recurrent``, ``resample``...), which has exactly the C arithmetic. The oracle
derives every parameter itself from the quantized graph, with :mod:`mcu.reference.derive`: shapes and
layouts from the IR op and its tensors (logical shapes, memory orders), and everything the int8 kernels need
from quantization (the convolutions' per-channel multipliers and shifts and int32 biases, the binary ops'
rescaling, softmax's scaling, the requantizations of mean, reduce, bmm and requantize, layer norm's and the
recurrent layers' constants, PReLU's and log-softmax's multipliers, lookup and resize tables, offsets and
clamp bounds) from the tensors' scales and zero points, the weights' per-channel scales and the op's
structural attributes (the fused activation's float bounds, reduced dims, functions, and the float biases
and weights an op folds into its integer constants). It never reads a number the int8 lowering or an emitter
computed for a kernel, and imports neither, so a wrong parameter in either shows up as a parity failure.
What it reads as data are the int8 codes: the weights, PReLU's slopes, quantized constant operands.

For an all-int8 graph the outputs here are the outputs the device must produce, bit for bit. fp32 ops
left behind by the int8 lowering (fallbacks) run in float32 numpy and are not bit-exact with the C
kernels; ``Reference.exact`` says whether a graph has any.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mcu.errors import McuError
from mcu.ir import Graph, Op, Tensor
from mcu.layouts import from_memory_order, to_memory_order
from mcu.reference import conv, derive, elementwise, encoding, int4, mixed, movement, norm, pool, recurrent
from mcu.reference import gru_s16, lstm_s16, resample_ops, s16, s16_act, s16_norm, select, state
from mcu.reference.custom import run_custom

Env = dict[int, np.ndarray]  # id(base tensor) -> flat array in memory order
Run = Callable[[Op, list[np.ndarray]], np.ndarray]


def _nhwc(t: Tensor) -> tuple[int, int, int, int]:
    n, c, h, w = t.shape
    return (n, h, w, c)


def _to_nhwc(flat: np.ndarray, t: Tensor) -> np.ndarray:
    """A 4-d tensor's values as the NHWC array the convolution and pooling kernels take."""
    return np.transpose(from_memory_order(flat, t), (0, 2, 3, 1))


def _from_nhwc(y: np.ndarray, out: Tensor) -> np.ndarray:
    """A kernel's NHWC result (or [N, C] for a 4-d output of size-1 H and W) in ``out``'s memory order."""
    if len(out.shape) == 4:
        return to_memory_order(np.transpose(np.asarray(y).reshape(_nhwc(out)), (0, 3, 1, 2)), out)
    return to_memory_order(np.asarray(y).reshape(out.shape), out)


def _window(op: Op) -> dict:
    a = op.attrs
    return {"stride_h": a["stride"][0], "stride_w": a["stride"][1], "pad_top": a["padding"][0],
            "pad_left": a["padding"][1]}


def _conv2d(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    a = op.attrs
    y = conv.conv2d_s8(_to_nhwc(x[0], inp), w.data, **derive.weighted(op), dilation_h=a["dilation"][0],
                      dilation_w=a["dilation"][1], groups=a["groups"], output=_nhwc(op.output), **_window(op))
    return _from_nhwc(y, op.output)


def _depthwise(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    a = op.attrs
    kh, kw = w.shape[2], w.shape[3]
    y = conv.depthwise_conv2d_s8(_to_nhwc(x[0], inp), w.data.reshape(kh, kw, -1), **derive.weighted(op),
                                ch_mult=w.shape[0] // inp.shape[1], dilation_h=a["dilation"][0],
                                dilation_w=a["dilation"][1], output=_nhwc(op.output), **_window(op))
    return _from_nhwc(y, op.output)


def _linear(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    y = conv.linear_s8(from_memory_order(x[0], inp).reshape(-1, w.shape[1]), w.data, **derive.weighted(op))
    return to_memory_order(y.reshape(op.output.shape), op.output)


def _conv2d_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    a = op.attrs
    n, h, wd, c = _nhwc(op.output)
    p = derive.weighted_s16(op)
    # (the weights' data is OHWI, their memory order, as for the int8 kernel)
    y = s16.conv2d_s16(_to_nhwc(x[0], inp), w.data, p["bias"], p["multiplier"], p["shift"], stride=tuple(a["stride"]), padding=tuple(a["padding"][:2]),
                       dilation=tuple(a["dilation"]), out_hw=(h, wd), act_min=p["act_min"], act_max=p["act_max"],
                       groups=a["groups"])
    return _from_nhwc(y, op.output)


def _depthwise_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    a = op.attrs
    kh, kw = w.shape[2], w.shape[3]
    n, h, wd, c = _nhwc(op.output)
    p = derive.weighted_s16(op)
    y = s16.depthwise_conv2d_s16(_to_nhwc(x[0], inp), w.data.reshape(kh, kw, -1), p["bias"], p["multiplier"],
                                 p["shift"], ch_mult=w.shape[0] // inp.shape[1], stride=tuple(a["stride"]),
                                 padding=tuple(a["padding"][:2]), dilation=tuple(a["dilation"]), out_hw=(h, wd),
                                 act_min=p["act_min"], act_max=p["act_max"])
    return _from_nhwc(y, op.output)


def _linear_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    p = derive.weighted_s16(op)
    y = s16.linear_s16(from_memory_order(x[0], inp).reshape(-1, w.shape[1]), w.data, p["bias"], p["multiplier"],
                       p["shift"], act_min=p["act_min"], act_max=p["act_max"])
    return to_memory_order(y.reshape(op.output.shape), op.output)


def _conv_transpose2d_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    a = op.attrs
    weight = conv.phase_unpack(w.data, w.physical_shape, *a["stride"]) if a.get("phased") else w.data
    n, h, wd, c = _nhwc(op.output)
    p = derive.weighted_s16(op)
    y = s16.conv_transpose2d_s16(_to_nhwc(x[0], inp), weight, p["bias"], p["multiplier"], p["shift"],
                                 stride=tuple(a["stride"]), padding=tuple(a["padding"][:2]),
                                 dilation=tuple(a["dilation"]), out_hw=(h, wd), act_min=p["act_min"],
                                 act_max=p["act_max"], groups=a["groups"])
    return _from_nhwc(y, op.output)


def _pool_s16(fn: Callable) -> Run:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        a = op.attrs
        act_min, act_max = derive.act_range(op)
        n, h, w, c = _nhwc(op.output)
        y = fn(_to_nhwc(x[0], op.inputs[0]), kernel=tuple(a["kernel"]), stride=tuple(a["stride"]),
               padding=tuple(a["padding"]), out_hw=(h, w), act_min=act_min, act_max=act_max)
        return _from_nhwc(y, op.output)
    return run


def _mean_hw_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    n, h, w, c = _nhwc(op.inputs[0])
    y = s16.mean_s16(_to_nhwc(x[0], op.inputs[0]).reshape(n, h * w, c), **derive.mean_s16(op, h * w))
    return _from_nhwc(y, op.output)


def _reduce_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    v = _reduced(op, x[0])
    if op.attrs["op"] in ("amax", "amin"):
        y = s16.extreme_s16(v, op.attrs["op"] == "amax", **derive.mean_s16(op, 1))
    else:
        y = s16.mean_s16(v, **derive.mean_s16(op, v.shape[1] if op.attrs["op"] == "mean" else 1))
    return to_memory_order(np.asarray(y).reshape(op.output.shape), op.output)


def _add_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """Both operands have the output's shape and layout (the lowering makes sure): elementwise in memory order."""
    return s16.add_s16(x[0], x[1], **derive.add_s16(op))


def _pair_s16(fn: Callable[..., np.ndarray]) -> Run:
    """sub, maximum, minimum as the add: the lowering keeps both operands in the output's shape and layout."""
    return lambda op, x: fn(x[0], x[1], **derive.add_s16(op))


def _mul_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """Both operands have the output's shape and layout (the lowering makes sure): elementwise in memory order."""
    return s16_act.mul_s16(x[0], x[1], **derive.mul_s16(op))


def _activation_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    p = derive.activation_s16(op)
    return s16_act.activation_s16(x[0], p["input_multiplier"], p["input_shift"], p["kind"])


def _softmax_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """arm_softmax_s16; with a constant attention mask, its hidden positions are minus infinity."""
    p = derive.softmax_s16(op)
    axis = op.attrs["axis"]
    hidden = _hidden_rows(op, axis)
    return _along(op, x[0], axis, lambda rows: s16_act.softmax_s16(rows, **p, hidden=hidden))


def _bmm_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    a, b = op.inputs
    y = s16_norm.bmm_s16(from_memory_order(x[0], a), from_memory_order(x[1], b), **derive.bmm_s16(op))
    return to_memory_order(np.asarray(y).reshape(op.output.shape), op.output)


def _layer_norm_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    y = s16_norm.layer_norm_s16(from_memory_order(x[0], op.inputs[0]).reshape(-1), derive.layer_norm_s16(op))
    return to_memory_order(y.reshape(op.output.shape), op.output)


def _log_softmax_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    p = derive.log_softmax_s16(op)
    return _along(op, x[0], op.attrs["axis"], lambda rows: s16_norm.log_softmax_s16(rows, **p))


def _broadcast(op: Op, x: list[np.ndarray]) -> list[np.ndarray]:
    """Each operand broadcast to the output's logical shape, in the output's memory order (NumPy's rules:
    a size-1 or missing dim repeats)."""
    out = op.output
    return [to_memory_order(np.broadcast_to(from_memory_order(v, t), out.shape), out) for v, t in zip(x, op.inputs)]


def _with_constants(run: Run) -> Run:
    """``run`` with the op's constant operands in their places among the run-time ones."""
    def call(op: Op, x: list[np.ndarray]) -> np.ndarray:
        dynamic = iter(x)
        return run(op, [np.asarray(t.data).reshape(-1) if t.is_constant else next(dynamic) for t in op.inputs])
    return call


def _binary(fn: Callable) -> Run:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        a, b = _broadcast(op, x)
        return fn(a, b, **derive.binary(op))
    return _with_constants(run)


def _pool(fn: Callable) -> Run:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        a = op.attrs
        act_min, act_max = derive.act_range(op)
        y = fn(_to_nhwc(x[0], op.inputs[0]), kernel_h=a["kernel"][0], kernel_w=a["kernel"][1],
               act_min=act_min, act_max=act_max, output=_nhwc(op.output), **_window(op))
        return _from_nhwc(y, op.output)
    return run


def _mean_hw(op: Op, x: list[np.ndarray]) -> np.ndarray:
    y = pool.mean_hw_s8(_to_nhwc(x[0], op.inputs[0]), **derive.mean_hw(op))
    return _from_nhwc(y, op.output)


def _along(op: Op, flat: np.ndarray, axis: int, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``fn`` on the rows of the input's logical values along ``axis`` ([rows, n] in, the same out), the
    result in the output's memory order."""
    t = op.inputs[0]
    moved = np.moveaxis(from_memory_order(flat, t), axis, -1)
    rows = fn(np.ascontiguousarray(moved).reshape(-1, t.shape[axis]))
    return to_memory_order(np.moveaxis(np.asarray(rows).reshape(moved.shape), -1, axis), op.output)


def _hidden_rows(op: Op, axis: int) -> np.ndarray | None:
    """A masked softmax's hidden positions (the graph's, logical order) as the rows :func:`_along` gives it."""
    if "hidden" not in op.attrs:
        return None
    logical = np.broadcast_to(np.asarray(op.attrs["hidden"], dtype=bool), op.inputs[0].shape)
    return np.ascontiguousarray(np.moveaxis(logical, axis, -1)).reshape(-1, op.inputs[0].shape[axis])


def _softmax(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """TFLite's int8 softmax; with a constant attention mask, its hidden positions (the graph's, logical order)
    are minus infinity."""
    params = derive.softmax(op)
    axis = op.attrs["axis"]
    hidden = _hidden_rows(op, axis)
    return _along(op, x[0], axis, lambda rows: norm.softmax_s8(
        rows.reshape(-1), **params, outer=rows.shape[0], axis=rows.shape[1], inner=1, hidden=hidden))


def _log_softmax(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """TFLite's int8 LOG_SOFTMAX: the exp table and both multipliers from the input's and the output's scales."""
    s_in, _ = derive.scale_zp(op.inputs[0])
    s_out, zp_out = derive.scale_zp(op.output)
    table, input_multiplier, log_multiplier = norm.log_softmax_tables(s_in, s_out)
    return _along(op, x[0], op.attrs["axis"], lambda rows: norm.log_softmax_s8(
        rows.reshape(-1), table, outer=rows.shape[0], axis=rows.shape[1], inner=1,
        input_multiplier=input_multiplier, log_multiplier=log_multiplier, output_offset=zp_out))


def _prelu(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """TFLite PRELU: a slope per channel (logical dim 1; one slope for every element when there is one), the
    multipliers from the input's, the slopes' and the output's scales."""
    inp, alpha = op.inputs
    s_in, zp_in = derive.scale_zp(inp)
    s_alpha, _ = derive.scale_zp(alpha)
    s_out, zp_out = derive.scale_zp(op.output)
    params = elementwise.prelu_params(s_in, s_alpha, s_out, zp_in=zp_in, zp_out=zp_out)
    slopes = np.asarray(alpha.data, dtype=np.int8).reshape(-1)
    if slopes.size == 1:
        per_element = np.broadcast_to(slopes, inp.shape)
    else:
        shape = [1] * len(inp.shape)
        shape[1] = slopes.size
        per_element = np.broadcast_to(slopes.reshape(shape), inp.shape)
    slope_of = to_memory_order(per_element, inp)
    act_min, act_max = derive.act_range(op)
    return elementwise.prelu_s8(x[0], slope_of, channels=slope_of.size, inner=1, act_min=act_min, act_max=act_max,
                            **params)


def _requantize(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """int8 -> int8, int16 -> int16 at another scale (w8a16), or a border between int8 and int16 activations
    (--quantize mixed)."""
    if op.inputs[0].dtype == "int16" and op.output.dtype == "int16":
        return s16_act.requantize_s16(x[0], **derive.requantize_s16(op))
    params = derive.requantize(op)
    if op.inputs[0].dtype == "int16":
        return s16.requantize_s16_s8(x[0], **params)
    if op.output.dtype == "int16":
        return s16.requantize_s8_s16(x[0], **params)
    return elementwise.requantize_s8(x[0], **params)


def _quantize(op: Op, x: list[np.ndarray]) -> np.ndarray:
    scale, zero_point = derive.scale_zp(op.output)
    fn = encoding.quantize_f32_s16 if op.output.dtype == "int16" else encoding.quantize_f32_s8
    return fn(x[0], inv_scale=encoding.inv_scale(scale), zero_point=zero_point)


def _dequantize(op: Op, x: list[np.ndarray]) -> np.ndarray:
    q = op.attrs["quant"]
    fn = encoding.dequantize_s16_f32 if op.inputs[0].dtype == "int16" else encoding.dequantize_s8_f32
    return fn(x[0], scale=q.scale[0], zero_point=q.zero_point[0])


def _float_binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Run:
    """fp32 fallback of an elementwise op: one correctly rounded IEEE operation per element, so
    numpy and the C kernel agree bit for bit (then a fused clamp, as the kernel applies it)."""
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        dynamic = iter(x)
        a, b = (from_memory_order(np.asarray(t.data if t.is_constant else next(dynamic)).reshape(-1), t)
                for t in op.inputs)
        y = fn(a.astype(np.float32), b.astype(np.float32)).astype(np.float32)
        lo, hi = op.attrs.get("act") or (None, None)
        if lo is not None:
            y = np.maximum(y, np.float32(lo))
        if hi is not None:
            y = np.minimum(y, np.float32(hi))
        return to_memory_order(y, op.output)
    return run


def _float_clamp(op: Op, x: list[np.ndarray]) -> np.ndarray:
    lo, hi = op.attrs["min"], op.attrs["max"]
    y = x[0].astype(np.float32)
    if lo is not None:
        y = np.maximum(y, np.float32(lo))
    if hi is not None:
        y = np.minimum(y, np.float32(hi))
    return y


def _linear_mixed(fn: Callable) -> Run:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        _, w, scale, bias = op.inputs
        lo, hi = op.attrs.get("act") or (None, None)
        return fn(x[0], w.data, scale.data, bias.data, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    return run


def _linear_w4(fn: Callable) -> Run:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        w, scale = op.inputs[1], op.inputs[2]
        bias = op.inputs[3].data if len(op.inputs) > 3 else None
        lo, hi = op.attrs.get("act") or (None, None)
        return fn(x[0], w.data, scale.data, bias, op.attrs["group_size"], -np.inf if lo is None else lo,
                  np.inf if hi is None else hi)
    return run


def _index_put(op: Op, x: list[np.ndarray], current: np.ndarray) -> np.ndarray:
    values, indices = op.inputs
    positions = indices.data if indices.is_constant else x[1]
    a = op.attrs
    return state.index_put(current, positions, x[0], a["outer"], a["axis"], a["inner"])


def _reduced(op: Op, flat: np.ndarray) -> np.ndarray:
    """The input's logical values as [outer, reduce, inner] around the op's reduced dims."""
    first, last = op.attrs["dims"]
    t = op.inputs[0]
    shape = t.shape
    return from_memory_order(flat, t).reshape(math.prod(shape[:first]), math.prod(shape[first:last + 1]), -1)


def _argmax(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_argmax_s8 / _f32: the first largest, a NaN counting as the largest (as np.argmax)."""
    y = np.argmax(_reduced(op, x[0]), axis=1).astype(np.int32)
    return to_memory_order(y.reshape(op.output.shape), op.output)


def _layer_norm_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    y = norm.layer_norm_s8(from_memory_order(x[0], op.inputs[0]).reshape(-1), derive.layer_norm(op))
    return to_memory_order(y.reshape(op.output.shape), op.output)


def _reduce_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_reduce_s8: the int32 sum (or extreme) of q + input_offset along the reduced dims, requantized."""
    y = norm.reduce_s8(_reduced(op, x[0]), op.attrs["op"], **derive.reduce(op))
    return to_memory_order(np.asarray(y).reshape(op.output.shape), op.output)


def _bmm_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    a, b = op.inputs
    y = conv.bmm_s8(from_memory_order(x[0], a), from_memory_order(x[1], b), **derive.bmm(op))
    return to_memory_order(np.asarray(y).reshape(op.output.shape), op.output)


def _conv_transpose2d(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w = op.inputs[:2]
    a = op.attrs
    weight = conv.phase_unpack(w.data, w.physical_shape, *a["stride"]) if a.get("phased") else w.data
    y = conv.conv_transpose2d_s8(_to_nhwc(x[0], inp), weight, **derive.weighted(op),
                                 dilation_h=a["dilation"][0], dilation_w=a["dilation"][1], groups=a["groups"],
                                 output=_nhwc(op.output), **_window(op))
    return _from_nhwc(y, op.output)


def _recurrent_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_lstm_s8 / mcu_gru_s8: the layer's int8 constants derived again from its float weights and the
    quantization of its input and output, the sigmoid table from this package's own."""
    if op.kind == "gru" and len(op.inputs) > 5:
        return _gru_from_s8(op, x)
    fn = recurrent.lstm_s8 if op.kind == "lstm" else recurrent.gru_s8
    y = fn(from_memory_order(x[0], op.inputs[0]), derive.recurrent_layer(op), recurrent.sigmoid_table())
    return to_memory_order(y, op.output)


def _given_state(op: Op, x: list[np.ndarray], first: int) -> np.ndarray | None:
    """A GRU's given state, its input ``first`` (a constant's data, or the first operand after the input that is
    not one: x holds the operands that are not constants), or None for the zero state."""
    if len(op.inputs) <= first:
        return None
    state = op.inputs[first]
    return from_memory_order(np.asarray(state.data).reshape(-1) if state.is_constant else x[1], state)


def _gru_from_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_gru_from_s8: mcu_gru_s8 from the given int8 state (the last input); a GRU cell's step ([N, I]) as a
    sequence of one step."""
    inp = op.inputs[0]
    seq = from_memory_order(x[0], inp)
    cell = len(inp.shape) == 2
    y = recurrent.gru_s8(seq[:, None, :] if cell else seq, derive.recurrent_layer(op), recurrent.sigmoid_table(),
                         _given_state(op, x, 5))
    return to_memory_order(y[:, 0, :] if cell else y, op.output)


def _lstm_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_lstm_s16: the layer's constants derived again from its float weights and the int16 scales; from the
    initial h0 and c0, its last two inputs when given (the lowering leaves out a pair of zero states)."""
    varying = iter(x[1:])  # (x holds the operands that are not constants)
    h0, c0 = [from_memory_order(np.asarray(t.data).reshape(-1) if t.is_constant else next(varying), t)
              for t in op.inputs[5:7]] or [None, None]
    y = lstm_s16.lstm_s16(from_memory_order(x[0], op.inputs[0]), derive.lstm_s16_layer(op), h0, c0)
    return to_memory_order(y, op.output)


def _lstm_final_cell_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_lstm_final_cell_s16: the layer's cell through its steps, each step's gates from its input and the
    hidden state before it (h0, then the layer's hidden states, the op's second run-time operand)."""
    varying = iter(x[2:])
    h0, c0 = [from_memory_order(np.asarray(t.data).reshape(-1) if t.is_constant else next(varying), t)
              for t in op.inputs[6:8]] or [None, None]
    c = lstm_s16.lstm_final_cell_s16(from_memory_order(x[0], op.inputs[0]), from_memory_order(x[1], op.inputs[5]),
                                     derive.lstm_s16_layer(op), h0, c0)
    return to_memory_order(c, op.output)


def _lstm_final_cell(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """An LSTM's final cell (int16 at the cell's scale): of an int8 layer (mcu_lstm_final_cell_s8, the layer's
    constants derived again, its own recurrence on the input) or of a 16x8 one."""
    if op.inputs[0].dtype != "int8":
        return _lstm_final_cell_s16(op, x)
    c = recurrent.lstm_final_cell_s8(from_memory_order(x[0], op.inputs[0]), derive.recurrent_layer(op),
                                     recurrent.sigmoid_table())
    return to_memory_order(c, op.output)


def _gru_s16(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_gru_s16: the layer's constants derived again from its float weights and the int16 scales; a GRU
    cell's step ([N, I] from its state [N, H], the last input) as a sequence of one step."""
    inp = op.inputs[0]
    seq = from_memory_order(x[0], inp)
    cell = len(inp.shape) == 2
    y = gru_s16.gru_s16(seq[:, None, :] if cell else seq, derive.gru_s16_layer(op), _given_state(op, x, 5))
    return to_memory_order(y[:, 0, :] if cell else y, op.output)


INT8_OPS: dict[str, Run] = {
    "custom": run_custom,
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise,
    "conv_transpose2d": _conv_transpose2d,
    "linear": _linear,
    "add": _binary(elementwise.add_s8),
    "sub": _binary(elementwise.sub_s8),
    "mul": _binary(elementwise.mul_s8),
    "maximum": _binary(elementwise.maximum_s8),
    "minimum": _binary(elementwise.minimum_s8),
    "div": _binary(elementwise.div_s8),
    "prelu": _prelu,
    "log_softmax": _log_softmax,
    "max_pool2d": _pool(pool.max_pool2d_s8),
    "avg_pool2d": _pool(pool.avg_pool2d_s8),
    "mean_hw": _mean_hw,
    "softmax": _softmax,
    "lut": lambda op, x: elementwise.lut_s8(x[0], derive.lut_table(op)),
    "requantize": _requantize,
    "clamp": lambda op, x: elementwise.clamp_s8(x[0], **dict(zip(("act_min", "act_max"), derive.act_range(op)))),
    "quantize": _quantize,
    "layer_norm": _layer_norm_s8,
    "reduce": _reduce_s8,
    "bmm": _bmm_s8,
    "lstm": _recurrent_s8,
    "gru": _recurrent_s8,
    **movement.OPS,
    **select.INT8,
    **resample_ops.INT8,
}

FLOAT_MOVES: dict[str, Run] = {
    "custom": run_custom,
    "dequantize": _dequantize,
    "add": _float_binary(np.add),
    "sub": _float_binary(np.subtract),
    "mul": _float_binary(np.multiply),
    "div": _float_binary(np.divide),
    "clamp": _float_clamp,
    "linear_w8": _linear_mixed(mixed.linear_w8_f32),
    "linear_dyn": _linear_mixed(mixed.linear_dyn_s8),
    "linear_w4": _linear_w4(int4.linear_w4_f32),
    "linear_w4_dyn": _linear_w4(int4.linear_w4_s8),
    "index_put": lambda op, x: x[0],  # run with the state by Reference.run
    "argmax": _argmax,
    **movement.OPS,
    **select.FLOAT_OPS,
    **resample_ops.FLOAT_OPS,
}


# int16 activations with int8 weights (w8a16): the 16x8 kernels of mcu.reference.s16
INT16_OPS: dict[str, Run] = {
    "conv2d": _conv2d_s16,
    "depthwise_conv2d": _depthwise_s16,
    "conv_transpose2d": _conv_transpose2d_s16,
    "linear": _linear_s16,
    "mean_hw": _mean_hw_s16,
    "reduce": _reduce_s16,
    # (an operand may be a constant: a learned offset or scale, expanded to the output's shape when it broadcasts)
    "add": _with_constants(_add_s16),
    "mul": _with_constants(_mul_s16),
    "sub": _with_constants(_pair_s16(s16_act.sub_s16)),
    "maximum": _with_constants(_pair_s16(s16_act.maximum_s16)),
    "minimum": _with_constants(_pair_s16(s16_act.minimum_s16)),
    "div": _with_constants(lambda op, x: s16_act.div_s16(x[0], x[1], **derive.div_s16(op))),
    "sigmoid": _activation_s16,
    "tanh": _activation_s16,
    "softmax": _softmax_s16,
    "log_softmax": _log_softmax_s16,
    "layer_norm": _layer_norm_s16,
    "bmm": _bmm_s16,
    "lut": lambda op, x: s16_act.lut_s16(x[0], derive.lut_table_s16(op)),
    "max_pool2d": _pool_s16(s16.max_pool2d_s16),
    "avg_pool2d": _pool_s16(s16.avg_pool2d_s16),
    "permute": movement.OPS["permute"],
    "layout": movement.OPS["layout"],
    "slice": movement.OPS["slice"],
    # moves of int16 elements: concatenation, nearest resampling, repeats, flips, gathers
    "concat": movement.OPS["concat"],
    **resample_ops.FLOAT_OPS,
    **resample_ops.INT16,
    "clamp": lambda op, x: np.clip(np.asarray(x[0], dtype=np.int16), *derive.act_range(op)).astype(np.int16),
    # a select moving int16 codes (mcu_where), as at int8, and an input a comparison also reads as it is
    **select.INT8,
    "quantize": _quantize,
    "lstm": _lstm_s16,
    "lstm_final_cell": _lstm_final_cell,
    "gru": _gru_s16,
    "requantize": _requantize,
}


@dataclass
class Reference:
    graph: Graph

    @property
    def exact(self) -> bool:
        """True when every op is an integer op or an fp32 op this reference computes bit-exactly."""
        # (an fp32 custom op's Python reference need not round like its C kernel)
        return all(op.attrs.get("alias") or op.output.dtype != "float32" or
                   (op.kind in FLOAT_MOVES and op.kind != "custom") for op in self.graph.ops)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Inputs and outputs as flat arrays in memory order, in the graph's dtypes."""
        env: Env = {}
        for t in self.graph.state.values():  # model state starts cleared (mcu/frontend/state.py)
            env[id(t)] = np.zeros(t.numel, dtype=np.float32)
        for t, x in zip(self.graph.inputs, inputs):
            env[id(t.base())] = np.asarray(x).reshape(-1)

        def value(t: Tensor) -> np.ndarray:
            if t.is_constant:
                return np.asarray(t.data).reshape(-1)
            return env[id(t.base())]

        for op in self.graph.ops:
            if op.attrs.get("alias"):
                continue
            args = [value(t) for t in op.inputs if not t.is_constant or op.kind == "concat"]
            table = {"int8": INT8_OPS, "int16": INT16_OPS}.get(op.output.dtype, FLOAT_MOVES)
            if op.kind not in table:
                raise McuError(f"the int8 model keeps {op.kind} {op.name} in fp32"
                               + (f" ({op.source})" if op.source else "")
                               + ", which the integer reference cannot predict bit for bit",
                               hint="use --quantize none, or replace the op with one that quantizes")
            if op.kind == "index_put":  # writes the state in place: the state's current value is an input too
                result = _index_put(op, args, env[id(op.output.base())])
            else:
                result = table[op.kind](op, args)
            env[id(op.output.base())] = np.asarray(result).reshape(-1)
        return [value(t).copy() for t in self.graph.outputs]
