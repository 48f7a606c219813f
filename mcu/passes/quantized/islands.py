"""int8 forms of ops that would otherwise run as fp32 islands in int8 models, where TFLite defines integer
semantics: maximum and minimum (TFLite MAXIMUM/MINIMUM, on the add's rescaled operands so that inputs and
output may differ in quantization), and elementwise ops with a float constant operand (a learned position
embedding added to the tokens): the constant is quantized with its own int8 scale (or keeps the one the
quantizer gave it) and the op runs its int8 kernel on it."""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.reference import arith
from mcu.passes.quantized.common import act_bounds
from mcu.reference.islands import div_params
from mcu.reference.islands import prelu_params, quantize_slopes
from mcu.reference.islands import log_softmax_tables

# Kinds whose int8 kernel reads a constant operand like any other (strided broadcasting, own offsets).
CONSTANT_OPERANDS = {"add", "sub", "mul", "maximum", "minimum", "div"}


def _scale(t: Tensor) -> float:
    assert t.quant is not None
    return t.quant.scale[0]


def _zp(t: Tensor) -> int:
    assert t.quant is not None
    return t.quant.zero_point[0]


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


def constant_on_grid(t: Tensor, quant: QuantParams | None) -> Tensor | None:
    """A float constant as int8 codes on ``quant``'s grid (ops whose operands and output share one
    quantization, as concatenation): the quantizer's codes when it quantized the constant on that grid,
    else its values rounded onto it (saturating, as the observer saw them within the shared range)."""
    if quant is None or t.dtype != "float32" or t.data is None or len(quant.scale) != 1:
        return None
    scale, zp = float(quant.scale[0]), int(quant.zero_point[0])
    qc = t.qconst
    if qc is not None and np.all(qc.scale == scale) and np.all(qc.zero_point == zp):
        codes = np.asarray(qc.values, dtype=np.int8).reshape(t.shape)
    else:
        data = np.asarray(t.data, dtype=np.float64)
        codes = np.clip(np.round(data / scale) + zp, -128, 127).astype(np.int8).reshape(t.shape)
    return Tensor(name=f"{t.name}_q", shape=t.shape, dtype="int8", data=np.ascontiguousarray(codes),
                  dim_order=t.dim_order, quant=quant)


def quantize_between_bounds(graph: Graph) -> None:
    """clamp with tensor bounds lowers to maximum then minimum (mcu/frontend/norm.py) with a float value between
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
        act_min, act_max = act_bounds(op, out)
        params = arith.add_params(_scale(a), _scale(b), _scale(out))
        attrs = {**op.attrs, **params, "a_offset": -_zp(a), "b_offset": -_zp(b), "output_offset": _zp(out),
                 "act_min": act_min, "act_max": act_max}
        return Op(kind, [a, b], [out], attrs, op.name, op.source)
    return convert


def _div(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    a, b = ins
    act_min, act_max = act_bounds(op, out)
    params = div_params(_scale(a), _scale(b), _scale(out), zp_a=_zp(a), zp_b=_zp(b), zp_out=_zp(out))
    return Op("div", [a, b], [out], {**op.attrs, **params, "act_min": act_min, "act_max": act_max}, op.name,
              op.source)


def prelu_s8(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """TFLite PRELU: slopes per channel as symmetric int8 with a scale of their own (the float32 slopes are
    the op's second input; :data:`mcu.passes.quantized.elementwise.OWN_CONSTANTS`)."""
    x = ins[0]
    codes, s_alpha = quantize_slopes(np.asarray(op.inputs[1].data))
    alpha = Tensor(name=f"{op.name}_alpha_q", shape=(codes.size,), dtype="int8", data=codes,
                   quant=QuantParams(scale=(s_alpha,), zero_point=(0,), qmin=-127, qmax=127))
    act_min, act_max = act_bounds(op, out)
    params = prelu_params(_scale(x), s_alpha, _scale(out), zp_in=_zp(x), zp_out=_zp(out))
    return Op("prelu", [x, alpha], [out], {**op.attrs, **params, "act_min": act_min, "act_max": act_max},
              op.name, op.source)


def _log_softmax(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    try:
        table, a, c = log_softmax_tables(_scale(x), _scale(out))
    except ValueError as exc:
        return str(exc)
    exp_table = Tensor(name=f"{op.name}_exp_table", shape=(256,), dtype="int32", data=table)
    return Op("log_softmax", [x, exp_table], [out], {**op.attrs, "input_multiplier": a, "log_multiplier": c,
                                                     "output_offset": _zp(out)}, op.name, op.source)


def keeps_as_is(op: Op, t: Tensor) -> bool:
    """An input the int8 op reads as it is: where's condition (bytes 0/1, not a quantized value)."""
    return op.kind == "where" and t is op.inputs[0] and not t.is_constant and t.dtype != "float32"


def _where(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """TFLite SELECT_V2: both branches share the output's quantization (the quantizer shares them), so the
    select moves codes; a constant branch (``torch.where(m, x, 0.0)``, ``mask.float()``) is put on the
    output's grid."""
    dynamic = iter(ins)
    inputs: list[Tensor] = []
    for i, t in enumerate(op.inputs):
        if i > 0 and t.is_constant:
            data = np.asarray(t.data, dtype=np.float64)
            codes = np.clip(np.round(data / _scale(out)) + _zp(out), -128, 127).astype(np.int8).reshape(t.shape)
            inputs.append(Tensor(name=f"{t.name}_q", shape=t.shape, dtype="int8", data=np.ascontiguousarray(codes),
                                 dim_order=t.dim_order, quant=out.quant))
            continue
        v = next(dynamic)
        if i > 0 and (v.quant is None or v.quant.scale != out.quant.scale or
                      v.quant.zero_point != out.quant.zero_point):
            return "a branch and the output are quantized differently"
        inputs.append(v)
    return Op("where", inputs, [out], dict(op.attrs), op.name, op.source)


CONVERTERS = {"maximum": _extreme("maximum"), "minimum": _extreme("minimum"), "div": _div,
              "log_softmax": _log_softmax, "where": _where}
