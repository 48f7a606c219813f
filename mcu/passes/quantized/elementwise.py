"""int8 forms of the elementwise, normalisation and reduction ops (joins
:data:`mcu.passes.quantized.core.CONVERTERS`): every elementwise function of ``mcu_unary_f32`` (GELU
both forms, SiLU, hardsigmoid, leaky ReLU, ELU, softplus, exp, log, sqrt, rsqrt, erf, abs, neg,
reciprocal, pow, log-sigmoid, mish, and arithmetic with a scalar) becomes the int8 ``lut`` op with its
256-entry table computed here in float64 from mcu/reference/elementwise.py's function; layer norm
becomes ``mcu_layer_norm_s8`` (integer mean and variance, mcu/reference/norm.py); argmax reads the
int8 codes.
"""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, Tensor
from mcu.reference import arith
from mcu.reference.elementwise import unary_real
from mcu.reference.norm import layer_norm_params
from mcu.passes.quantized.common import int_const as _int_const
from mcu.passes.quantized.common import act_bounds
from mcu.passes.quantized.islands import prelu_s8

# Binary ops with a scalar constant operand, as (alpha, beta) of x * alpha + beta (or of beta - x for rsub).
_SCALAR = {"add": lambda s: ("affine", 1.0, s), "sub": lambda s: ("affine", 1.0, -s),
           "mul": lambda s: ("affine", s, 0.0), "div": lambda s: ("affine", 1.0 / s, 0.0)}


def _scale(t: Tensor) -> float:
    assert t.quant is not None
    return t.quant.scale[0]


def _zp(t: Tensor) -> int:
    assert t.quant is not None
    return t.quant.zero_point[0]


def _between_quantize(graph: Graph, op: Op) -> bool:
    """The op reads a dequantized tensor and only a quantize reads it: it can become int8."""
    users = graph.users(op.output)
    return len(users) == 1 and users[0].kind == "quantize" and not op.output.is_output and any(
        (p := graph.producer(t)) is not None and p.kind == "dequantize" for t in op.inputs)


def scalars_to_unary(graph: Graph) -> None:
    """x + s, x - s, s - x, x * s, s * x, x / s with a Python scalar s (a one-element float constant) between
    a dequantize and a quantize become the elementwise ``unary`` op, so that the int8 model looks them up
    in a table like any other function."""
    for i, op in enumerate(graph.ops):
        if op.kind not in _SCALAR or op.attrs.get("act") or len(op.inputs) != 2 or not _between_quantize(graph, op):
            continue
        a, b = op.inputs
        scalar = [t.is_constant and t.numel == 1 and t.dtype == "float32" for t in (a, b)]
        if scalar == [False, True]:
            s = float(np.asarray(b.data).reshape(-1)[0])
            if op.kind == "div" and s == 0.0:
                continue
            fn, alpha, beta = _SCALAR[op.kind](s)
        elif scalar == [True, False] and op.kind in ("add", "mul", "sub"):
            s = float(np.asarray(a.data).reshape(-1)[0])
            fn, alpha, beta = ("rsub", 1.0, s) if op.kind == "sub" else _SCALAR[op.kind](s)
            a = b
        else:
            continue
        if a.shape != op.output.shape:
            continue  # the scalar broadcasts the tensor up: not elementwise
        graph.ops[i] = Op("unary", [a], list(op.outputs), {"fn": fn, "alpha": alpha, "beta": beta},
                          op.name, op.source)


def _unary_lut(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    fn = unary_real(op.attrs["fn"], op.attrs["alpha"], op.attrs["beta"])
    table = arith.lut_table(fn, _scale(x), _zp(x), _scale(out), _zp(out))
    # (alpha and beta kept: a scaling after a bmm folds into its requantization, mcu/passes/quantized/attention.py)
    return Op("lut", [x, _int_const(f"{op.name}_table", table, "int8")], [out],
              {"function": op.attrs["fn"], "alpha": op.attrs["alpha"], "beta": op.attrs["beta"]}, op.name, op.source)


def _prelu(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """One slope for all channels is leaky ReLU: a table. Slopes per channel have no int8 kernel."""
    w = op.inputs[1]
    if w.numel != 1:  # TFLite's int8 PRELU (mcu_prelu_s8)

        return prelu_s8(graph, op, ins, out)
    slope = float(np.asarray(w.data).reshape(-1)[0])
    unary = Op("unary", [op.inputs[0]], list(op.outputs), {"fn": "leaky_relu", "alpha": slope, "beta": 0.0},
               op.name, op.source)
    return _unary_lut(graph, unary, ins, out)


def _layer_norm(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    rest = iter(op.inputs[1:])
    weight = next(rest) if op.attrs["weight"] else None
    bias = next(rest) if op.attrs.get("bias") else None
    rms = op.kind == "rms_norm"
    try:
        p = layer_norm_params(int(op.attrs["cols"]), _scale(x), _scale(out), _zp(out), float(op.attrs["eps"]),
                              None if weight is None else weight.data, None if bias is None else bias.data,
                              rms=rms, zp_in=_zp(x))
    except ValueError as exc:
        return str(exc)
    act_min, act_max = act_bounds(op, out)
    eps_lo, eps_hi = p.eps_words
    return Op("layer_norm", [x, _int_const(f"{op.name}_multiplier", p.multipliers),
                             _int_const(f"{op.name}_shift", p.shifts), _int_const(f"{op.name}_bias_q", p.bias)],
              [out], {"cols": op.attrs["cols"], "eps": op.attrs["eps"], "eps_lo": eps_lo, "eps_hi": eps_hi,
                      "output_offset": p.output_offset, "act_min": act_min, "act_max": act_max, "rms": int(rms),
                      "input_zero_point": p.input_zero_point, "act": op.attrs.get("act"),
                      # the float weight and bias the constants above come from, for the integer reference
                      "affine": (None if weight is None else np.asarray(weight.data),
                                 None if bias is None else np.asarray(bias.data))},
              op.name, op.source)


def permute_before_dequantize(graph: Graph) -> None:
    """A permute or reshape of a dequantized tensor (the permute the frontend puts before a reduction over
    dims apart, matmul's views before its bmm) moves the int8 codes instead: dequantize(permute(q))
    computes the same values, and the op after it reads a dequantize again, so it can become int8."""
    for op in list(graph.ops):
        producer = graph.producer(op.inputs[0]) if op.kind in ("permute", "reshape") and op.inputs else None
        if producer is None or producer.kind != "dequantize" or op.output.is_output:
            continue
        src = producer.inputs[0]
        moved = Tensor(name=f"{op.name}_q", shape=op.output.shape, dtype=src.dtype, quant=src.quant)
        at = graph.ops.index(op)
        graph.ops[at:at + 1] = [Op(op.kind, [src], [moved], dict(op.attrs), op.name, op.source),
                                Op("dequantize", [moved], [op.output], dict(producer.attrs), f"{op.name}_dq",
                                   op.source)]


def argmax_on_codes(graph: Graph) -> None:
    """argmax of a dequantized int8 tensor reads the codes (dequantization is increasing)."""
    for op in graph.ops:
        if op.kind != "argmax":
            continue
        producer = graph.producer(op.inputs[0])
        if producer is not None and producer.kind == "dequantize" and producer.inputs[0].dtype == "int8":
            op.inputs[0] = producer.inputs[0]


def _reduce(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    first, last = op.attrs["dims"]
    count = int(np.prod(x.shape[first:last + 1]))
    real = _scale(x) / _scale(out) / (count if op.attrs["op"] == "mean" else 1)
    mult, shift = arith.quantize_multiplier(real)
    act_min, act_max = act_bounds(op, out)
    return Op("reduce", [x], [out], {**op.attrs, "input_offset": -_zp(x), "multiplier": mult, "shift": shift,
                                     "output_offset": _zp(out), "act_min": act_min, "act_max": act_max},
              op.name, op.source)


def _bmm(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    a, b = ins
    if a.shape[0] != b.shape[0]:
        return "batches differ"
    mult, shift = arith.quantize_multiplier(_scale(a) * _scale(b) / _scale(out))
    act_min, act_max = act_bounds(op, out)
    return Op("bmm", [a, b], [out], {**op.attrs, "a_offset": -_zp(a), "b_offset": -_zp(b), "multiplier": mult,
                                     "shift": shift, "output_offset": _zp(out), "act_min": act_min,
                                     "act_max": act_max}, op.name, op.source)


def quantize_before_moves(graph: Graph) -> None:
    """op -> reshape/permute -> quantize (matmul's view after its bmm) becomes op -> quantize -> int8
    reshape/permute: the same codes, and the op before now has a quantized output, so it can become int8."""
    for q in [op for op in graph.ops if op.kind == "quantize"]:
        move = graph.producer(q.inputs[0])
        if move is None or move.kind not in ("reshape", "permute") or len(graph.users(move.output)) != 1 \
                or move.output.is_output:
            continue
        before = graph.producer(move.inputs[0])
        if before is None or before.kind in ("dequantize", "quantize", "reshape", "permute") \
                or len(graph.users(move.inputs[0])) != 1:
            continue
        src = move.inputs[0]
        early = Tensor(name=f"{move.name}_q", shape=src.shape, dtype=q.output.dtype, quant=q.output.quant)
        at = graph.ops.index(move)
        graph.ops.remove(q)
        graph.ops[at:at + 1] = [Op("quantize", [src], [early], dict(q.attrs), q.name, q.source),
                                Op(move.kind, [early], [q.output], dict(move.attrs), move.name, move.source)]


CONVERTERS = {"unary": _unary_lut, "bmm": _bmm, "prelu": _prelu, "layer_norm": _layer_norm, "rms_norm": _layer_norm, "reduce": _reduce}
OWN_CONSTANTS = {"layer_norm", "rms_norm", "prelu",
                 "where"}  # kinds whose converter turns their float constants (weight, bias, where's branches on its output's grid) to int8
