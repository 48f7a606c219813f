"""int8 forms of the elementwise family.

Every elementwise function of ``mcu_unary_f32`` (GELU both forms, SiLU, hardsigmoid, leaky ReLU, ELU,
softplus, exp, log, sqrt, rsqrt, erf, abs, neg, reciprocal, pow, log-sigmoid, mish, and arithmetic with a
scalar), and sigmoid, tanh and hardswish, become the int8 ``lut`` op with its 256-entry table computed here
in float64 from mcu/reference/elementwise.py's function. Addition, subtraction and multiplication take
TFLite's int8 parameters; maximum and minimum (TFLite MAXIMUM/MINIMUM) run on the add's rescaled operands,
so that inputs and output may differ in quantization, and division alike; PReLU with a slope per channel
(TFLite PRELU) quantizes its slopes. A float constant operand of these ops (a learned position embedding
added to the tokens) is quantized with its own int8 scale (or keeps the one the quantizer gave it) and the
op runs its int8 kernel on it. Clamping keeps or changes quantization (``clamp`` or ``requantize``).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.passes.quantized.common import act_bounds
from mcu.passes.quantized.common import int_const as _int_const
from mcu.passes.quantized.common import same_quant as _same_quant
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp
from mcu.reference import arith, s16_act
from mcu.reference.elementwise import div_params, prelu_params, quantize_slopes, unary_real

# Kinds whose int8 kernel reads a constant operand like any other (strided broadcasting, own offsets).
CONSTANT_OPERANDS = {"add", "sub", "mul", "maximum", "minimum", "div"}
# Kinds whose converter turns their float constants (PReLU's slopes) to int8.
OWN_CONSTANTS = {"prelu"}

Converter = Callable[[Graph, Op, list[Tensor], Tensor], "Op | str"]

# Binary ops with a scalar constant operand, as (alpha, beta) of x * alpha + beta (or of beta - x for rsub).
_SCALAR = {"add": lambda s: ("affine", 1.0, s), "sub": lambda s: ("affine", 1.0, -s),
           "mul": lambda s: ("affine", s, 0.0), "div": lambda s: ("affine", 1.0 / s, 0.0)}


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
    if out.dtype == "int16":
        return _lut_s16(op, x, out, fn, op.attrs["fn"], {"alpha": op.attrs["alpha"], "beta": op.attrs["beta"]})
    table = arith.lut_table(fn, _scale(x), _zp(x), _scale(out), _zp(out))
    # (alpha and beta kept: a scaling after a bmm folds into its requantization, mcu/passes/quantized/attention.py)
    return Op("lut", [x, _int_const(f"{op.name}_table", table, "int8")], [out],
              {"function": op.attrs["fn"], "alpha": op.attrs["alpha"], "beta": op.attrs["beta"]}, op.name, op.source)


def _prelu(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """One slope for all channels is leaky ReLU: a table. Slopes per channel have no int8 kernel."""
    w = op.inputs[1]
    if w.numel != 1:  # TFLite's int8 PRELU (mcu_prelu_s8)

        return _prelu_per_channel(graph, op, ins, out)
    slope = float(np.asarray(w.data).reshape(-1)[0])
    unary = Op("unary", [op.inputs[0]], list(op.outputs), {"fn": "leaky_relu", "alpha": slope, "beta": 0.0},
               op.name, op.source)
    return _unary_lut(graph, unary, ins, out)


def own_quantization(values: np.ndarray) -> tuple[float, int]:
    """Asymmetric int8 parameters covering ``values`` and zero (so that 0.0 is exact), as the activation
    observer would pick: scale = (max - min) / 255, zero-point = -128 - min / scale."""
    lo = min(float(np.min(values)), 0.0) if values.size else 0.0
    hi = max(float(np.max(values)), 0.0) if values.size else 0.0
    if hi - lo <= 0.0:
        return 1.0, 0
    scale = (hi - lo) / 255.0
    zp = int(np.clip(np.round(-128.0 - lo / scale), -128, 127))
    return scale, zp


def constant_operand(op: Op, t: Tensor) -> Tensor | None:
    """The int8 form of a float constant operand of ``op``, or None when the op's int8 kernel cannot read
    one. A constant the quantizer quantized per tensor keeps its codes; any other is quantized here."""
    if op.kind not in CONSTANT_OPERANDS or t.dtype != "float32" or t.data is None:
        return None
    data = np.asarray(t.data, dtype=np.float64)
    qc = t.qconst
    if qc is not None and np.all(qc.scale == qc.scale.flat[0]) and np.all(qc.zero_point == qc.zero_point.flat[0]):
        scale, zp = float(qc.scale.flat[0]), int(qc.zero_point.flat[0])
        codes = np.asarray(qc.values, dtype=np.int8).reshape(t.shape)
    else:
        scale, zp = own_quantization(data)
        codes = np.clip(np.round(data / scale) + zp, -128, 127).astype(np.int8).reshape(t.shape)
    return Tensor(name=f"{t.name}_q", shape=t.shape, dtype="int8", data=np.ascontiguousarray(codes),
                  dim_order=t.dim_order, quant=QuantParams(scale=(scale,), zero_point=(zp,)))


def constant_operand_s16(op: Op, t: Tensor) -> Tensor | None:
    """The int16 form (w8a16) of a float constant operand of ``op``: symmetric per tensor with zero point 0, on
    the quantizer's scale when it quantized the constant per tensor at 16 bits (its codes come back exactly),
    else on max |t| / 32767."""
    if op.kind not in CONSTANT_OPERANDS or t.dtype != "float32" or t.data is None:
        return None
    data = np.asarray(t.data, dtype=np.float64)
    qc = t.qconst
    if qc is not None and qc.qmax == 32767 and np.all(qc.scale == qc.scale.flat[0]) and np.all(qc.zero_point == 0):
        scale = float(qc.scale.flat[0])
    else:
        top = float(np.max(np.abs(data))) if data.size else 0.0
        scale = top / 32767.0 if top > 0.0 else 1.0
    codes = np.clip(np.round(data / scale), -32768, 32767).astype(np.int16).reshape(t.shape)
    return Tensor(name=f"{t.name}_q", shape=t.shape, dtype="int16", data=np.ascontiguousarray(codes),
                  dim_order=t.dim_order, quant=QuantParams(scale=(scale,), zero_point=(0,), qmin=-32768, qmax=32767))


def quantize_between_bounds(graph: Graph) -> None:
    """clamp with tensor bounds lowers to maximum then minimum (mcu/frontend/elementwise.py) with a float value between
    them that nothing quantizes: when the minimum's result is quantized, put the value between on the same grid
    (a quantize and a dequantize with the result's parameters), so both become int8. Exact where no bound
    needs the range beyond the result's: the maximum's values above it are clamped by the minimum anyway."""
    for op in list(graph.ops):
        if op.kind != "maximum" or op.output.is_output:
            continue
        users = graph.users(op.output)
        if len(users) != 1 or users[0].kind != "minimum" or users[0].inputs[0] is not op.output:
            continue
        after = graph.users(users[0].output)
        if len(after) != 1 or after[0].kind != "quantize" or users[0].output.is_output:
            continue
        q = after[0].output.quant
        mid_q = Tensor(name=f"{op.name}_q", shape=op.output.shape, dtype="int8", quant=q)
        mid = Tensor(name=f"{op.name}_dq", shape=op.output.shape, dtype="float32")
        at = graph.ops.index(op) + 1
        graph.ops[at:at] = [Op("quantize", [op.output], [mid_q], dict(after[0].attrs), f"{op.name}_quantize", op.source),
                            Op("dequantize", [mid_q], [mid], {"quant": q}, f"{op.name}_dequantize", op.source)]
        users[0].inputs[0] = mid


def _extreme(kind: str):
    def convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
        a, b = ins
        if out.dtype == "int16":
            return _binary_s16(kind, op, a, b, out)
        act_min, act_max = act_bounds(op, out)
        params = arith.add_params(_scale(a), _scale(b), _scale(out))
        attrs = {**op.attrs, **params, "a_offset": -_zp(a), "b_offset": -_zp(b), "output_offset": _zp(out),
                 "act_min": act_min, "act_max": act_max}
        return Op(kind, [a, b], [out], attrs, op.name, op.source)
    return convert


def _div(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    a, b = ins
    act_min, act_max = act_bounds(op, out)
    if out.dtype == "int16":  # mcu_div_s16: two int16 tensors of the output's shape (a broadcast one expanded)
        if any(t.dtype != "int16" or t.shape != out.shape or _zp(t) != 0 for t in (a, b)) or \
                (a.is_constant and b.is_constant):
            return "a 16x8 div takes two int16 tensors of the output's shape"
        return Op("div", [a, b], [out], {**op.attrs, **s16_act.div_params(_scale(a), _scale(b), _scale(out)),
                                         "act_min": act_min, "act_max": act_max}, op.name, op.source)
    params = div_params(_scale(a), _scale(b), _scale(out), zp_a=_zp(a), zp_b=_zp(b), zp_out=_zp(out))
    return Op("div", [a, b], [out], {**op.attrs, **params, "act_min": act_min, "act_max": act_max}, op.name,
              op.source)


def _prelu_per_channel(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """TFLite PRELU: slopes per channel as symmetric int8 with a scale of their own (the float32 slopes are
    the op's second input; :data:`OWN_CONSTANTS`)."""
    x = ins[0]
    codes, s_alpha = quantize_slopes(np.asarray(op.inputs[1].data))
    alpha = Tensor(name=f"{op.name}_alpha_q", shape=(codes.size,), dtype="int8", data=codes,
                   quant=QuantParams(scale=(s_alpha,), zero_point=(0,), qmin=-127, qmax=127))
    act_min, act_max = act_bounds(op, out)
    params = prelu_params(_scale(x), s_alpha, _scale(out), zp_in=_zp(x), zp_out=_zp(out))
    return Op("prelu", [x, alpha], [out], {**op.attrs, **params, "act_min": act_min, "act_max": act_max},
              op.name, op.source)


def _binary_s16(kind: str, op: Op, a: Tensor, b: Tensor, out: Tensor) -> Op | str:
    """The 16x8 add, difference and product (w8a16): two int16 tensors of the output's shape and layout. add is
    mcu_add_s16 (CMSIS-NN's arm_elementwise_add_s16, left shift 15), sub mcu_sub_s16 (the add's arithmetic with
    a minus, TFLite's 16x8 SUB), maximum and minimum mcu_maximum_s16 / mcu_minimum_s16 (the larger or smaller of
    the add's rescaled operands), mul mcu_mul_s16 (arm_elementwise_mul_s16)."""
    if kind not in ("add", "sub", "mul", "maximum", "minimum"):
        return f"w8a16 has no 16x8 {kind}"
    # (a constant operand, a learned position embedding say, is quantized on its own int16 grid like an activation)
    if any(t.dtype != "int16" or t.shape != out.shape or _zp(t) != 0 for t in (a, b)) or \
            (a.is_constant and b.is_constant):
        return f"a 16x8 {kind} takes two int16 tensors of the output's shape"
    act_min, act_max = act_bounds(op, out)
    if kind == "mul":
        mult, shift = s16_act.mul_params(_scale(a), _scale(b), _scale(out))
        params = {"out_multiplier": mult, "out_shift": shift}
    else:
        params = arith.add_params(_scale(a), _scale(b), _scale(out), left_shift=15)
    return Op(kind, [a, b], [out], {**op.attrs, **params, "act_min": act_min, "act_max": act_max}, op.name,
              op.source)


def _binary(kind: str) -> Converter:
    def convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
        a, b = ins
        if out.dtype == "int16":
            return _binary_s16(kind, op, a, b, out)
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


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _np_hardswish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


_LUT_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": _np_sigmoid, "tanh": np.tanh, "hardswish": _np_hardswish,
}


def _lut(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    if out.dtype == "int16":
        if op.kind in s16_act.KINDS:
            return _activation_s16(op, x, out)
        return _lut_s16(op, x, out, _LUT_FUNCTIONS[op.kind], op.kind, {"alpha": 0.0, "beta": 0.0})
    table = arith.lut_table(_LUT_FUNCTIONS[op.kind], _scale(x), _zp(x), _scale(out), _zp(out))
    return Op("lut", [x, _int_const(f"{op.name}_table", table, "int8")], [out], {"function": op.kind},
              op.name, op.source)


def _lut_s16(op: Op, x: Tensor, out: Tensor, fn: Callable[[np.ndarray], np.ndarray], name: str,
             params: dict) -> Op | str:
    """The 16x8 table lookup (w8a16, mcu_lut_s16): 513 int16 entries over the input's codes, interpolated."""
    if x.dtype != "int16" or _zp(x) != 0 or _zp(out) != 0:
        return f"a 16x8 {name} table reads and writes int16 codes of zero point 0"
    table = s16_act.lut_table_s16(fn, _scale(x), _scale(out))
    return Op("lut", [x, _int_const(f"{op.name}_table", table, "int16")], [out], {"function": name, **params},
              op.name, op.source)


def _activation_s16(op: Op, x: Tensor, out: Tensor) -> Op | str:
    """The 16x8 sigmoid and tanh (w8a16, mcu_activation_s16 as CMSIS-NN's arm_nn_activation_s16): an int16
    input of any scale, the output at 2^-15."""
    if op.kind not in s16_act.KINDS:
        return f"w8a16 has no 16x8 {op.kind}"
    if x.dtype != "int16" or _zp(x) != 0 or not math.isclose(_scale(out), s16_act.OUTPUT_SCALE) or _zp(out) != 0:
        return f"a 16x8 {op.kind} reads int16 codes and writes scale 2^-15, zero point 0"
    try:
        mult, shift = s16_act.activation_params(_scale(x))
    except ValueError as exc:
        return str(exc)
    return Op(op.kind, [x], [out], {**op.attrs, "input_multiplier": mult, "input_shift": shift}, op.name,
              op.source)


def _clamp(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    lo, hi = op.attrs["min"], op.attrs["max"]
    fake = Op("clamp", [], [], {"act": (lo, hi)})
    act_min, act_max = act_bounds(fake, out)
    # (the float bounds stay as the op's fused activation: the integer reference derives the clamp from them)
    if _same_quant(x, out):
        return Op("clamp", [x], [out], {"act_min": act_min, "act_max": act_max, "act": (lo, hi)}, op.name, op.source)
    return requantize_op(op.name, x, out, act_min, act_max, op.source, act=(lo, hi))


def requantize_op(name: str, x: Tensor, out: Tensor, act_min: int | None = None, act_max: int | None = None,
                  source: str = "", act: tuple[float | None, float | None] | None = None) -> Op:
    """int8, or int16 (w8a16, mcu_requantize_s16): the clamp defaults to the output's whole range."""
    qmin, qmax = (-32768, 32767) if out.dtype == "int16" else (-128, 127)
    act_min, act_max = qmin if act_min is None else act_min, qmax if act_max is None else act_max
    mult, shift = arith.quantize_multiplier(_scale(x) / _scale(out))
    attrs = {"input_offset": -_zp(x), "multiplier": mult, "shift": shift, "output_offset": _zp(out),
             "act_min": act_min, "act_max": act_max}
    if act is not None:
        attrs["act"] = act
    return Op("requantize", [x], [out], attrs, f"{name}_requant", source)


CONVERTERS: dict[str, Converter] = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _div,
    "maximum": _extreme("maximum"), "minimum": _extreme("minimum"),
    "sigmoid": _lut, "tanh": _lut, "hardswish": _lut, "unary": _unary_lut,
    "clamp": _clamp, "prelu": _prelu,
}
