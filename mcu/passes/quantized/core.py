"""Turn the quantize/dequantize graph from pt2e into int8 ops with integer parameters.

Pattern: every float input of an op comes from a ``dequantize`` of an int8
tensor, and its only reader is a ``quantize``. Such an op becomes its int8
form, reading the int8 tensors directly and writing the quantize's output,
with everything the kernel needs precomputed here: Q31 multipliers and shifts
(per output channel for convolution and linear layers), offsets, clamp
bounds in the int8 domain, int32 biases, lookup tables. Ops that do not
match, or have no int8 kernel, stay fp32 between dequantize and quantize, and
are listed in ``graph.fallbacks`` with the reason. Finally the model boundary
becomes int8: a leading quantize and a trailing dequantize are removed, so
the generated API takes and returns int8 tensors.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.passes.quantized import elementwise as quantized_more
from mcu.passes.quantized.attention import fold_scaling_into_bmm
from mcu.passes.quantized.common import act_bounds
from mcu.passes.quantized.common import int_const as _int_const
from mcu.passes.quantized.common import same_quant as _same_quant
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp
from mcu.passes.quantized.islands import CONVERTERS as ISLANDS
from mcu.passes.quantized.islands import constant_on_grid, constant_operand, keeps_as_is, quantize_between_bounds
from mcu.passes.quantized.recurrent import CONVERTERS as RECURRENT, KINDS
from mcu.passes.quantized.resample import CONVERTERS as RESAMPLE
from mcu.passes.quantized.resample import KEEPS_EXTRA_INPUTS
from mcu.reference.conv import phase_pack

try:
    from mcu.reference import arith
except ImportError:  # pragma: no cover - only while the int8 reference is being written
    arith = None  # type: ignore[assignment]

Converter = Callable[[Graph, Op, list[Tensor], Tensor], "Op | str"]


def _per_channel_requant(name: str, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
                         ) -> tuple[Tensor, Tensor, Tensor, Tensor] | str:
    qc = w.qconst
    if qc is None:
        return "its weight is not quantized"
    w_scale, w_zp = qc.per_channel(0)
    if np.any(w_zp != 0):
        return "weights must be symmetric (zero-point 0)"
    s_x, s_o = _scale(x), _scale(out)
    mults, shifts = zip(*(arith.quantize_multiplier(s_x * float(sw) / s_o) for sw in w_scale))
    channels = w.shape[0]
    b = bias.data.astype(np.float64).reshape(-1) if bias is not None else np.zeros(channels)
    bias_q = np.clip(np.round(b / (s_x * w_scale)), -(2**31), 2**31 - 1)
    wq = Tensor(name=f"{name}_weight_q", shape=w.shape, dtype="int8", data=qc.values.astype(np.int8),
                quant=QuantParams(scale=tuple(float(v) for v in w_scale), zero_point=(0,) * channels, axis=0,
                                  qmin=-127, qmax=127))
    return (wq, _int_const(f"{name}_bias_q", bias_q), _int_const(f"{name}_multiplier", np.array(mults)),
            _int_const(f"{name}_shift", np.array(shifts)))


def _weighted(op: Op, ins: list[Tensor], out: Tensor) -> tuple[list[Tensor], dict] | str:
    """Inputs [x, int8 weight, int32 bias, multipliers, shifts] and int8 attrs of a conv/linear op."""
    x, w = ins[0], op.inputs[1]
    bias = op.inputs[2] if len(op.inputs) > 2 else None
    packed = _per_channel_requant(op.name, x, w, bias, out)
    if isinstance(packed, str):
        return packed
    act_min, act_max = act_bounds(op, out)
    # (the float bias the int32 one comes from stays, for the integer reference)
    bias_real = bias.data.astype(np.float64).reshape(-1) if bias is not None else np.zeros(w.shape[0])
    attrs = {**op.attrs, "input_offset": -_zp(x), "output_offset": _zp(out), "act_min": act_min, "act_max": act_max,
             "bias_real": bias_real}
    return [x, *packed], attrs


def _conv2d(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    result = _weighted(op, ins, out)
    if isinstance(result, str):
        return result
    inputs, attrs = result
    x, wq = inputs[0], inputs[1]
    groups, in_c = op.attrs["groups"], x.shape[1]
    if groups == in_c and groups > 1:
        # Depthwise weights are read as [kh][kw][out_c] (TFLite's 1HWO).
        wq.data = np.ascontiguousarray(np.transpose(wq.data, (1, 2, 3, 0)))
        wq.dim_order = (1, 2, 3, 0)
        attrs["ch_mult"] = wq.shape[0] // in_c
        return Op("depthwise_conv2d", inputs, [out], attrs, op.name, op.source)
    return Op("conv2d", inputs, [out], attrs, op.name, op.source)


def _linear(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    result = _weighted(op, ins, out)
    if isinstance(result, str):
        return result
    inputs, attrs = result
    return Op("linear", inputs, [out], attrs, op.name, op.source)


def _binary(kind: str) -> Converter:
    def convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
        a, b = ins
        if (a.is_constant and a.dtype != "int8") or (b.is_constant and b.dtype != "int8"):
            return "an operand is a constant"  # (an int8 constant operand is read like a tensor)
        act_min, act_max = act_bounds(op, out)
        if kind == "mul":
            params = arith.mul_params(_scale(a), _scale(b), _scale(out))
        else:
            params = arith.add_params(_scale(a), _scale(b), _scale(out))
        attrs = {**op.attrs, **params, "a_offset": -_zp(a), "b_offset": -_zp(b), "output_offset": _zp(out),
                 "act_min": act_min, "act_max": act_max}
        return Op(kind, [a, b], [out], attrs, op.name, op.source)
    return convert


def _shared(kind: str) -> Converter:
    """Ops that cannot change quantization: input and output parameters must be equal."""
    def convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
        if not all(_same_quant(t, out) for t in ins):
            return "input and output quantization differ"
        attrs = dict(op.attrs)
        if kind in ("max_pool2d", "avg_pool2d"):
            attrs["act_min"], attrs["act_max"] = act_bounds(op, out)
            if kind == "avg_pool2d":
                if attrs.get("divisor_override"):
                    return "divisor_override has no int8 kernel"
                if attrs.get("count_include_pad") and any(attrs["padding"]):
                    return "count_include_pad with padding has no int8 kernel"
        if kind == "pad":
            attrs["value_q"] = int(np.clip(np.round(op.attrs["value"] / _scale(out)) + _zp(out), -128, 127))
        return Op(kind, list(ins), [out], attrs, op.name, op.source)
    return convert


def _mean_hw(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    count = x.shape[2] * x.shape[3]
    mult, shift = arith.quantize_multiplier(_scale(x) / (_scale(out) * count))
    return Op("mean_hw", [x], [out], {**op.attrs, "input_offset": -_zp(x), "multiplier": mult, "shift": shift,
                                      "output_offset": _zp(out), "act_min": -128, "act_max": 127},
              op.name, op.source)


def _softmax(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    if not math.isclose(_scale(out), 1.0 / 256.0) or _zp(out) != -128:
        return "int8 softmax needs output scale 1/256 and zero-point -128"
    mult, left_shift, diff_min = arith.softmax_params(1.0, _scale(ins[0]))
    return Op("softmax", [ins[0]], [out], {**op.attrs, "input_multiplier": mult, "input_left_shift": left_shift,
                                           "diff_min": diff_min}, op.name, op.source)


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _np_hardswish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


_LUT_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": _np_sigmoid, "tanh": np.tanh, "hardswish": _np_hardswish,
}


def _lut(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    table = arith.lut_table(_LUT_FUNCTIONS[op.kind], _scale(x), _zp(x), _scale(out), _zp(out))
    return Op("lut", [x, _int_const(f"{op.name}_table", table, "int8")], [out], {"function": op.kind},
              op.name, op.source)


def _clamp(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    lo, hi = op.attrs["min"], op.attrs["max"]
    fake = Op("clamp", [], [], {"act": (lo, hi)})
    act_min, act_max = act_bounds(fake, out)
    # (the float bounds stay as the op's fused activation: the integer reference derives the clamp from them)
    if _same_quant(x, out):
        return Op("clamp", [x], [out], {"act_min": act_min, "act_max": act_max, "act": (lo, hi)}, op.name, op.source)
    return _requantize_op(op.name, x, out, act_min, act_max, op.source, act=(lo, hi))


def _requantize_op(name: str, x: Tensor, out: Tensor, act_min: int = -128, act_max: int = 127,
                   source: str = "", act: tuple[float | None, float | None] | None = None) -> Op:
    mult, shift = arith.quantize_multiplier(_scale(x) / _scale(out))
    attrs = {"input_offset": -_zp(x), "multiplier": mult, "shift": shift, "output_offset": _zp(out),
             "act_min": act_min, "act_max": act_max}
    if act is not None:
        attrs["act"] = act
    return Op("requantize", [x], [out], attrs, f"{name}_requant", source)


def _custom(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    reg = op.attrs["custom"]
    if reg.int8 is None:
        return f"custom op {reg.name} registers no int8 kernel"
    return Op("custom", ins, [out], dict(op.attrs), op.name, op.source)


def _extra_inputs_kept(kind: str) -> bool:
    """Ops whose inputs after the first are indices or tables, not quantized values."""
    return kind in KEEPS_EXTRA_INPUTS


def _conv_transpose2d(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """TFLite's int8 TRANSPOSE_CONV: the convolution's per-channel requantization (weights already
    [out_c, in_c/groups, kh, kw], mcu/frontend/conv.py)."""
    result = _weighted(op, ins, out)
    if isinstance(result, str):
        return result
    inputs, attrs = result
    if tuple(attrs["dilation"]) == (1, 1) and attrs["groups"] == 1:
        # the weights by output phase, as mcu_conv_transpose2d_phased_s8 reads them (already physical)

        wq = inputs[1]
        ohwi = np.transpose(wq.data, (0, 2, 3, 1))
        wq.data = phase_pack(ohwi, *attrs["stride"]).reshape(ohwi.shape)
        wq.dim_order = (0, 2, 3, 1)
        attrs["phased"] = True
    return Op("conv_transpose2d", inputs, [out], attrs, op.name, op.source)


CONVERTERS: dict[str, Converter] = {
    "custom": _custom,
    "conv2d": _conv2d,
    "linear": _linear,
    "add": _binary("add"),
    "sub": _binary("sub"),
    "mul": _binary("mul"),
    "max_pool2d": _shared("max_pool2d"),
    "avg_pool2d": _shared("avg_pool2d"),
    "reshape": _shared("reshape"),
    "permute": _shared("permute"),
    "pad": _shared("pad"),
    "slice": _shared("slice"),
    "concat": _shared("concat"),
    "mean_hw": _mean_hw,
    "softmax": _softmax,
    "sigmoid": _lut,
    "tanh": _lut,
    "hardswish": _lut,
    "clamp": _clamp,
    # convolutions
    "conv_transpose2d": _conv_transpose2d,
}
# normalisation, reductions and int8 activations: table lookups of every elementwise
# function, int8 layer norm
CONVERTERS.update(quantized_more.CONVERTERS)


# resampling and data movement, integer recurrent layers (their weights and biases are quantized by their
# converter), int8 islands made integer
CONVERTERS.update(RESAMPLE)
CONVERTERS.update(RECURRENT)
quantized_more.OWN_CONSTANTS.update(KINDS)
CONVERTERS.update(ISLANDS)


def _dequantized_source(graph: Graph, t: Tensor) -> Tensor | None:
    producer = graph.producer(t)
    if producer is not None and producer.kind == "dequantize":
        return producer.inputs[0]
    return None


def lower_quantized(graph: Graph) -> Graph:
    if not any(op.kind in ("quantize", "dequantize") for op in graph.ops):
        return graph  # an fp32 graph
    quantized_more.scalars_to_unary(graph)  # scalar arithmetic as a table lookup
    quantized_more.permute_before_dequantize(graph)
    quantized_more.quantize_before_moves(graph)
    quantized_more.argmax_on_codes(graph)

    quantize_between_bounds(graph)
    fallbacks: list[tuple[str, str]] = []
    for op in list(graph.ops):
        if op.kind in ("quantize", "dequantize") or op.output.dtype != "float32" or op not in graph.ops:
            continue  # (an op already converted as part of a chain is no longer in the graph)
        reason = _try_convert(graph, op)
        if reason is not None:
            fallbacks.append((f"{op.kind} {op.name}" + (f" ({op.source})" if op.source else ""), reason))
    _fold_dequantize_quantize(graph)
    _remove_dead(graph)

    fold_scaling_into_bmm(graph)
    _int8_boundary(graph)
    graph.fallbacks = fallbacks
    return graph


# remap: reflect/replicate padding, one index op a dim; concat: torch.stack, a cat then a view;
# the average pools: adaptive_avg_pool1d, an unsqueeze, the pool and a squeeze; upsample_linear1d alike
_MOVES = {"slice", "reshape", "permute", "pad", "remap", "concat", "adaptive_avg_pool", "avg_pool2d",
          "resize_bilinear"}


def _convert_move_chain(graph: Graph, op: Op) -> bool:
    """dequantize -> slice -> reshape -> quantize (a select): data movement only, one quantization
    shared along the chain, so every op of it becomes int8 at once. The chain may start with a concat
    (torch.stack: cat then view), whose inputs then all share that quantization."""
    chain = [op]
    while True:
        users = graph.users(chain[-1].output)
        if len(users) != 1 or chain[-1].output.is_output:
            return False
        if users[0].kind == "quantize":
            q = users[0]
            break
        if users[0].kind not in _MOVES or users[0].kind == "concat":
            return False
        chain.append(users[0])
    firsts = op.inputs if op.kind == "concat" else op.inputs[:1]
    srcs = [_dequantized_source(graph, t) for t in firsts]
    if len(chain) < 2 or any(s is None or t.is_constant or not _same_quant(s, q.output) for s, t in zip(srcs, firsts)):
        return False
    current: list[Tensor] = [s for s in srcs if s is not None]
    for i, link in enumerate(chain):
        last = i == len(chain) - 1
        out = q.output if last else Tensor(name=link.output.name, shape=link.output.shape, dtype="int8",
                                           quant=q.output.quant)
        if _extra_inputs_kept(link.kind):  # its tables stay
            converted = CONVERTERS[link.kind](graph, link, [*current, *link.inputs[1:]], out)
        else:
            converted = _shared(link.kind)(graph, link, current, out)
        if isinstance(converted, str):
            return False
        graph.ops[graph.ops.index(link)] = converted
        current = [out]
    graph.ops.remove(q)
    return True


def _try_convert(graph: Graph, op: Op) -> str | None:
    if op.kind not in CONVERTERS:
        return "no int8 kernel"
    if op.kind in _MOVES and _convert_move_chain(graph, op):
        return None
    users = graph.users(op.output)
    if len(users) != 1 or users[0].kind != "quantize" or op.output.is_output:
        return "its output is not quantized"
    ins: list[Tensor] = []

    for t in op.inputs:
        if keeps_as_is(op, t):
            ins.append(t)
            continue
        if t is not op.inputs[0] and _extra_inputs_kept(op.kind):
            ins.append(t)  # indices or tables: the converter keeps them
            continue
        if t.is_constant:
            if (op.kind in ("conv2d", "linear", "conv_transpose2d") or op.kind in quantized_more.OWN_CONSTANTS) and \
                    t is not op.inputs[0]:
                continue  # weights and bias are converted by the op's own converter

            # a concatenated constant (a learned class token) takes the grid the output shares with the inputs
            qconst = constant_on_grid(t, users[0].output.quant) if op.kind == "concat" else constant_operand(op, t)
            if qconst is None:
                return "an operand is a float constant"
            ins.append(qconst)
            continue
        src = _dequantized_source(graph, t)
        if src is None:
            return "its input is not quantized"
        ins.append(src)
    q = users[0]
    result = CONVERTERS[op.kind](graph, op, ins, q.output)
    if isinstance(result, str):
        return result
    if not q.output.is_input and not q.output.is_output:
        q.output.name = op.name  # the int8 tensor is what this op computes: name it after the op
    index = graph.ops.index(op)
    graph.ops[index] = result
    graph.ops.remove(q)
    return None


def _fold_dequantize_quantize(graph: Graph) -> None:
    """dequantize -> quantize becomes nothing (same parameters) or one requantize."""
    for q in [op for op in graph.ops if op.kind == "quantize"]:
        src = _dequantized_source(graph, q.inputs[0])
        if src is None or q not in graph.ops:
            continue
        if _same_quant(src, q.output) and not q.output.is_output:
            graph.replace_uses(q.output, src)
            graph.ops.remove(q)
        else:
            graph.ops[graph.ops.index(q)] = _requantize_op(q.name, src, q.output, source=q.source)


def _remove_dead(graph: Graph) -> None:
    changed = True
    while changed:
        changed = False
        for op in list(graph.ops):
            if op.kind in ("dequantize", "quantize") and not graph.users(op.output) and not op.output.is_output:
                graph.ops.remove(op)
                changed = True


def _int8_boundary(graph: Graph) -> None:
    for i, t in enumerate(list(graph.inputs)):
        users = graph.users(t)
        if len(users) == 1 and users[0].kind == "quantize":
            q = users[0]
            q.output.is_input = True
            q.output.name = t.name  # the int8 input keeps the model's input name
            graph.inputs[i] = q.output
            graph.ops.remove(q)
    for i, t in enumerate(list(graph.outputs)):
        producer = graph.producer(t)
        if producer is not None and producer.kind == "dequantize" and len(graph.users(t)) == 0:
            src = producer.inputs[0]
            src.is_output = True
            graph.outputs[i] = src
            if not graph.users(producer.output) or all(o is not producer.output for o in graph.outputs):
                graph.ops.remove(producer)
