"""Run a lowered graph in Python with the integer reference kernels: the parity oracle.

Every int8 op calls :mod:`mcu.reference.kernels`, which has exactly the C
arithmetic, on the same memory-order arrays the generated C sees, with
parameters derived by the same code the C emitter uses. So for an all-int8
graph the outputs here are the outputs the device must produce, bit for bit.
fp32 ops left behind by the int8 lowering (fallbacks) run in float32 numpy
and are not bit-exact with the C kernels; ``Reference.exact`` says whether a
graph has any.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mcu.backends.calls import operand_strides as _operand_strides, physical_perm as _physical_perm, shape4, split_at as _split_at
from mcu.errors import McuError
from mcu.ir import Graph, Op, Tensor
from mcu.layouts import from_memory_order, to_memory_order
from mcu.reference import int4
from mcu.reference import mixed
from mcu.reference import state
from mcu.reference import kernels as ref
from mcu.capture.custom_ops import run_reference
from mcu.reference.resample_ops import FLOAT_OPS, INT8
from mcu.reference.conv import conv_transpose2d_s8, phase_unpack
from mcu.reference import recurrent
from mcu.reference.islands import log_softmax_s8
from mcu.reference.islands import div_s8, maximum_s8, minimum_s8, prelu_s8

Env = dict[int, np.ndarray]  # id(base tensor) -> flat array in memory order


def _nhwc(t: Tensor) -> tuple[int, int, int, int]:
    s = shape4(t)
    return (s["n"], s["h"], s["w"], s["c"])


def _window(op: Op) -> dict:
    a = op.attrs
    return {"stride_h": a["stride"][0], "stride_w": a["stride"][1], "pad_top": a["padding"][0],
            "pad_left": a["padding"][1]}


def _conv2d(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w, b, m, s = op.inputs
    a = op.attrs
    return ref.conv2d_s8(x[0].reshape(_nhwc(inp)), w.data, b.data, m.data, s.data,
                         input_offset=a["input_offset"], output_offset=a["output_offset"], act_min=a["act_min"],
                         act_max=a["act_max"], dilation_h=a["dilation"][0], dilation_w=a["dilation"][1],
                         groups=a["groups"], output=_nhwc(op.output), **_window(op))


def _depthwise(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w, b, m, s = op.inputs
    a = op.attrs
    kh, kw = w.shape[2], w.shape[3]
    return ref.depthwise_conv2d_s8(x[0].reshape(_nhwc(inp)), w.data.reshape(kh, kw, -1), b.data, m.data, s.data,
                                   input_offset=a["input_offset"], output_offset=a["output_offset"],
                                   act_min=a["act_min"], act_max=a["act_max"], ch_mult=a["ch_mult"],
                                   dilation_h=a["dilation"][0], dilation_w=a["dilation"][1],
                                   output=_nhwc(op.output), **_window(op))


def _linear(op: Op, x: list[np.ndarray]) -> np.ndarray:
    _, w, b, m, s = op.inputs
    a = op.attrs
    return ref.linear_s8(x[0].reshape(-1, w.shape[1]), w.data, b.data, m.data, s.data,
                         input_offset=a["input_offset"], output_offset=a["output_offset"], act_min=a["act_min"],
                         act_max=a["act_max"])


def _binary(fn: Callable) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        a_t, b_t = op.inputs
        out = op.output
        keys = ("a_offset", "b_offset", "a_multiplier", "a_shift", "b_multiplier", "b_shift", "left_shift",
                "out_multiplier", "out_shift", "output_offset", "act_min", "act_max")
        params = {k: op.attrs[k] for k in keys if k in op.attrs}
        return fn(x[0], x[1], rank=max(len(out.shape), 1), out_shape=list(out.physical_shape) or [1],
                  a_strides=_operand_strides(a_t, out) or [0], b_strides=_operand_strides(b_t, out) or [0],
                  **params)
    return run


def _pool(fn: Callable) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        a = op.attrs
        return fn(x[0].reshape(_nhwc(op.inputs[0])), kernel_h=a["kernel"][0], kernel_w=a["kernel"][1],
                  act_min=a["act_min"], act_max=a["act_max"], output=_nhwc(op.output), **_window(op))
    return run


def _mean_hw(op: Op, x: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    return ref.mean_hw_s8(x[0].reshape(_nhwc(op.inputs[0])), input_offset=a["input_offset"],
                          multiplier=a["multiplier"], shift=a["shift"], output_offset=a["output_offset"],
                          act_min=a["act_min"], act_max=a["act_max"])


def _softmax(op: Op, x: list[np.ndarray]) -> np.ndarray:
    outer, axis, inner = _split_at(op.inputs[0], op.attrs["axis"])
    a = op.attrs
    return ref.softmax_s8(x[0], input_multiplier=a["input_multiplier"], input_left_shift=a["input_left_shift"],
                          diff_min=a["diff_min"], outer=outer, axis=axis, inner=inner)


def _requantize(op: Op, x: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    return ref.requantize_s8(x[0], input_offset=a["input_offset"], multiplier=a["multiplier"], shift=a["shift"],
                             output_offset=a["output_offset"], act_min=a["act_min"], act_max=a["act_max"])


def _permute_like(op: Op, x: list[np.ndarray], perm: tuple[int, ...]) -> np.ndarray:
    src = op.inputs[0]
    return np.transpose(x[0].reshape(src.physical_shape), _physical_perm(src, op.output, perm))


def _slice(op: Op, x: list[np.ndarray]) -> np.ndarray:
    src = op.inputs[0]
    index = tuple(slice(op.attrs["start"], op.attrs["start"] + op.output.shape[d] * op.attrs["step"],
                        op.attrs["step"]) if d == op.attrs["dim"] else slice(None) for d in src.dim_order)
    return x[0].reshape(src.physical_shape)[index]


def _concat(op: Op, x: list[np.ndarray]) -> np.ndarray:
    out = op.output
    p = out.dim_order.index(op.attrs["axis"])
    outer = math.prod(out.physical_shape[:p])
    return np.concatenate([v.reshape(outer, -1) for v in x], axis=1)


def _pad(op: Op, x: list[np.ndarray]) -> np.ndarray:
    src = op.inputs[0]
    width = [(op.attrs["before"][d], op.attrs["after"][d]) for d in src.dim_order]
    fill = op.attrs["value_q"] if op.output.dtype == "int8" else op.attrs["value"]
    return np.pad(x[0].reshape(src.physical_shape), width, constant_values=fill)


def _quantize(op: Op, x: list[np.ndarray]) -> np.ndarray:
    q = op.output.quant
    assert q is not None
    return ref.quantize_f32_s8(x[0], inv_scale=ref.inv_scale(q.scale[0]), zero_point=q.zero_point[0])


def _dequantize(op: Op, x: list[np.ndarray]) -> np.ndarray:
    q = op.attrs["quant"]
    return ref.dequantize_s8_f32(x[0], scale=q.scale[0], zero_point=q.zero_point[0])


def _custom(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """A user custom op: its registered Python reference on logical-shape arrays (mcu/capture/custom_ops.py)."""
    return run_reference(op, x)


INT8_OPS: dict[str, Callable[[Op, list[np.ndarray]], np.ndarray]] = {
    "custom": _custom,
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise,
    "linear": _linear,
    "add": _binary(ref.add_s8),
    "sub": _binary(ref.sub_s8),
    "mul": _binary(ref.mul_s8),
    "max_pool2d": _pool(ref.max_pool2d_s8),
    "avg_pool2d": _pool(ref.avg_pool2d_s8),
    "mean_hw": _mean_hw,
    "softmax": _softmax,
    "lut": lambda op, x: ref.lut_s8(x[0], op.inputs[1].data),
    "requantize": _requantize,
    "clamp": lambda op, x: ref.clamp_s8(x[0], act_min=op.attrs["act_min"], act_max=op.attrs["act_max"]),
    "quantize": _quantize,
    "permute": lambda op, x: _permute_like(op, x, op.attrs["perm"]),
    "layout": lambda op, x: _permute_like(op, x, tuple(range(len(op.inputs[0].shape)))),
    "concat": _concat,
    "pad": _pad,
    "slice": _slice,
}
def _float_binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
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


def _linear_mixed(fn: Callable) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        _, w, scale, bias = op.inputs
        lo, hi = op.attrs.get("act") or (None, None)
        return fn(x[0], w.data, scale.data, bias.data, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    return run


FLOAT_MOVES = {"custom": _custom, "dequantize": _dequantize, "permute": INT8_OPS["permute"], "layout": INT8_OPS["layout"],
               "concat": _concat, "pad": _pad, "slice": _slice,
               "add": _float_binary(np.add), "sub": _float_binary(np.subtract),
               "mul": _float_binary(np.multiply), "div": _float_binary(np.divide), "clamp": _float_clamp,
               "linear_w8": _linear_mixed(mixed.linear_w8_f32), "linear_dyn": _linear_mixed(mixed.linear_dyn_s8)}


def _linear_w4(fn: Callable) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
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


# 4-bit groupwise weights and model state (issue 17); index_put is run with the state by Reference.run
FLOAT_MOVES["index_put"] = lambda op, x: x[0]
FLOAT_MOVES.update({"linear_w4": _linear_w4(int4.linear_w4_f32), "linear_w4_dyn": _linear_w4(int4.linear_w4_s8)})

# resampling and data movement (issue 18): moves are exact at any dtype
def _resample_ops() -> None:
    INT8_OPS.update(INT8)
    FLOAT_MOVES.update(FLOAT_OPS)


_resample_ops()


# normalisation, reductions and int8 activations (issue 18)
def _argmax(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_argmax_s8 / _f32 (inputs row-major): the first largest, a NaN counting as the largest (as np.argmax)."""
    first, last = op.attrs["dims"]
    shape = op.inputs[0].shape
    outer, reduce = math.prod(shape[:first]), math.prod(shape[first:last + 1])
    return np.argmax(x[0].reshape(outer, reduce, -1), axis=1).astype(np.int32)


def _layer_norm_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    # lazy: keeps torch out of this module's import
    from mcu.reference import norm

    mult, shift, bias = (t.data for t in op.inputs[1:])
    a = op.attrs
    eps = (a["eps_hi"] << 32) | (a["eps_lo"] & 0xFFFFFFFF)
    p = norm.LayerNormS8(mult, shift, bias, eps, a["output_offset"], a["act_min"], a["act_max"], bool(a["rms"]),
                         a["input_zero_point"])
    return norm.layer_norm_s8(x[0], p)


def _reduce_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_reduce_s8: the int32 sum (or extreme) of q + input_offset along the reduced dims, requantized."""
    a = op.attrs
    first, last = a["dims"]
    shape = op.inputs[0].shape
    # lazy: keeps torch out of this module's import
    from mcu.reference import norm

    q = x[0].reshape(math.prod(shape[:first]), math.prod(shape[first:last + 1]), -1)
    return norm.reduce_s8(q, a["op"], a["input_offset"], a["multiplier"], a["shift"], a["output_offset"],
                          a["act_min"], a["act_max"])


FLOAT_MOVES["argmax"] = _argmax
INT8_OPS["layer_norm"] = _layer_norm_s8
INT8_OPS["reduce"] = _reduce_s8


def _bmm_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    # lazy: keeps torch out of this module's import
    from mcu.reference import norm

    a, b = op.inputs
    at = op.attrs
    return norm.bmm_s8(x[0].reshape(a.shape), x[1].reshape(b.shape), at["a_offset"], at["b_offset"],
                       at["multiplier"], at["shift"], at["output_offset"], at["act_min"], at["act_max"])


INT8_OPS["bmm"] = _bmm_s8


def _conv_transpose2d(op: Op, x: list[np.ndarray]) -> np.ndarray:
    inp, w, b, m, s = op.inputs
    a = op.attrs
    weight = phase_unpack(w.data, w.physical_shape, *a["stride"]) if a.get("phased") else w.data
    return conv_transpose2d_s8(x[0].reshape(_nhwc(inp)), weight, b.data, m.data, s.data,
                               input_offset=a["input_offset"], output_offset=a["output_offset"], act_min=a["act_min"],
                               act_max=a["act_max"], dilation_h=a["dilation"][0], dilation_w=a["dilation"][1],
                               groups=a["groups"], output=_nhwc(op.output), **_window(op))


INT8_OPS["conv_transpose2d"] = _conv_transpose2d  # convolutions (issue 18)


def _recurrent_s8(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """mcu_lstm_s8 / mcu_gru_s8 (integer recurrent layers, issue 18)."""
    from mcu.passes.quantized.recurrent import layer_of
    fn = recurrent.lstm_s8 if op.kind == "lstm" else recurrent.gru_s8
    return fn(x[0].reshape(op.inputs[0].shape), layer_of(op), op.inputs[4].data)


INT8_OPS["lstm"] = _recurrent_s8
INT8_OPS["gru"] = _recurrent_s8


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
            table = INT8_OPS if op.output.dtype == "int8" else FLOAT_MOVES
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


def _island_ops() -> None:  # int8 islands made integer (issue 18): maximum, minimum, constant operands
    def with_constants(run: Callable[[Op, list[np.ndarray]], np.ndarray]) -> Callable:
        def call(op: Op, x: list[np.ndarray]) -> np.ndarray:
            dynamic = iter(x)
            return run(op, [np.asarray(t.data).reshape(-1) if t.is_constant else next(dynamic) for t in op.inputs])
        return call

    for kind, fn in (("add", ref.add_s8), ("sub", ref.sub_s8), ("mul", ref.mul_s8), ("maximum", maximum_s8),
                     ("minimum", minimum_s8), ("div", div_s8)):
        INT8_OPS[kind] = with_constants(_binary(fn))

    def prelu(op: Op, x: list[np.ndarray]) -> np.ndarray:
        from mcu.backends.portable.islands import _prelu_s8

        p = _prelu_s8(op, lambda t: "").params  # the emitter's own shape parameters
        return prelu_s8(x[0], op.inputs[1].data, **p)

    INT8_OPS["prelu"] = prelu

    def log_softmax(op: Op, x: list[np.ndarray]) -> np.ndarray:
        from mcu.backends.portable.islands import _log_softmax_s8
        return log_softmax_s8(x[0], op.inputs[1].data, **_log_softmax_s8(op, lambda t: "").params)

    INT8_OPS["log_softmax"] = log_softmax


_island_ops()


def _selection_ops() -> None:  # issue 18: compare and where, exact at any dtype (no arithmetic)
    compare = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal}

    def logical(fn: Callable[..., np.ndarray]) -> Callable[[Op, list[np.ndarray]], np.ndarray]:
        def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
            dynamic = iter(x)
            vals = [from_memory_order(np.asarray(t.data).reshape(-1) if t.is_constant else next(dynamic), t)
                    for t in op.inputs]
            return to_memory_order(np.broadcast_to(fn(op, *vals), op.output.shape), op.output)
        return run

    FLOAT_MOVES["compare"] = logical(lambda op, a, b: compare[op.attrs["cmp"]](a, b).astype(np.uint8))
    where = logical(lambda op, c, a, b: np.where(c != 0, a, b).astype(a.dtype))
    FLOAT_MOVES["where"] = where
    INT8_OPS["where"] = where


_selection_ops()
