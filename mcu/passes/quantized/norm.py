"""int8 forms of the normalisation, softmax and reduction family: softmax (TFLite's, output scale 1/256),
log_softmax (an exp table and two multipliers), layer norm and RMSNorm (``mcu_layer_norm_s8``: integer mean
and variance, mcu/reference/norm.py), reductions requantizing their int32 results, and argmax reading the
int8 codes."""

from __future__ import annotations

import math

import numpy as np

from mcu.ir import Graph, Op, Tensor
from mcu.passes.quantized.common import act_bounds
from mcu.passes.quantized.common import int_const as _int_const
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp
from mcu.passes.quantized.pool import mean_s16_attrs
from mcu.reference import arith, s16_act, s16_norm
from mcu.reference.norm import layer_norm_params, log_softmax_tables

# Kinds whose converter turns their float constants (weight, bias) to int8.
OWN_CONSTANTS = {"layer_norm", "rms_norm"}


def _softmax_s16(op: Op, x: Tensor, out: Tensor) -> Op | str:
    """The 16x8 softmax (w8a16, mcu_softmax_s16 as CMSIS-NN's arm_softmax_s16): int16 codes in, 2^-15 out; with a
    constant attention mask, mcu_softmax_masked_s16."""
    if x.dtype != "int16" or _zp(x) != 0 or not math.isclose(_scale(out), s16_act.OUTPUT_SCALE) or _zp(out) != 0:
        return "a 16x8 softmax reads int16 codes and writes scale 2^-15, zero point 0"
    mult, shift = s16_act.softmax_params(_scale(x))
    return _masked(op, x, out, {**op.attrs, "input_multiplier": mult, "input_shift": shift})


def _masked(op: Op, x: Tensor, out: Tensor, attrs: dict) -> Op:
    """The softmax, with its hidden positions (a constant attention mask) as a uint8 operand of the rows that
    repeat when it has any."""
    if "hidden" not in op.attrs:
        return Op("softmax", [x], [out], attrs, op.name, op.source)
    rows = mask_rows(np.asarray(op.attrs["hidden"], dtype=bool))
    mask = Tensor(name=f"{op.name}_hidden", shape=rows.shape, dtype="uint8", data=rows.astype(np.uint8))
    return Op("softmax", [x, mask], [out], {**attrs, "mask_rows": rows.shape[0]}, op.name, op.source)


def _softmax(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    if out.dtype == "int16":
        return _softmax_s16(op, ins[0], out)
    if not math.isclose(_scale(out), 1.0 / 256.0) or _zp(out) != -128:
        return "int8 softmax needs output scale 1/256 and zero-point -128"
    mult, left_shift, diff_min = arith.softmax_params(1.0, _scale(ins[0]))
    return _masked(op, ins[0], out, {**op.attrs, "input_multiplier": mult, "input_left_shift": left_shift,
                                     "diff_min": diff_min})


def mask_rows(hidden: np.ndarray) -> np.ndarray:
    """The rows of a softmax's hidden positions ([rows, axis], row-major) that repeat over the whole tensor: the
    fewest leading rows whose repetition gives every row (an attention mask repeats for every head)."""
    full = hidden.reshape(-1, hidden.shape[-1])
    n = full.shape[0]
    for period in range(1, n + 1):
        if n % period == 0 and np.array_equal(np.tile(full[:period], (n // period, 1)), full):
            return full[:period]
    return full


def _log_softmax(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    if out.dtype == "int16":  # mcu_log_softmax_s16: int16 codes in and out, zero points 0
        if x.dtype != "int16" or _zp(x) != 0 or _zp(out) != 0:
            return "a 16x8 log-softmax reads and writes int16 codes of zero point 0"
        return Op("log_softmax", [x], [out], {**op.attrs, **s16_norm.log_softmax_params(_scale(x), _scale(out))},
                  op.name, op.source)
    try:
        table, a, c = log_softmax_tables(_scale(x), _scale(out))
    except ValueError as exc:
        return str(exc)
    exp_table = Tensor(name=f"{op.name}_exp_table", shape=(256,), dtype="int32", data=table)
    return Op("log_softmax", [x, exp_table], [out], {**op.attrs, "input_multiplier": a, "log_multiplier": c,
                                                     "output_offset": _zp(out)}, op.name, op.source)


def _layer_norm(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    rest = iter(op.inputs[1:])
    weight = next(rest) if op.attrs["weight"] else None
    bias = next(rest) if op.attrs.get("bias") else None
    rms = op.kind == "rms_norm"
    if out.dtype == "int16":
        return _layer_norm_s16(op, x, out, weight, bias, rms)
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


def _layer_norm_s16(op: Op, x: Tensor, out: Tensor, weight: Tensor | None, bias: Tensor | None,
                    rms: bool) -> Op | str:
    """The 16x8 layer norm and RMS norm (w8a16, mcu_layer_norm_s16): int16 codes of zero point 0 in and out, the
    float affine weight and bias folded into per-column constants."""
    if x.dtype != "int16" or _zp(x) != 0 or _zp(out) != 0:
        return "a 16x8 layer norm reads and writes int16 codes of zero point 0"
    act_min, act_max = act_bounds(op, out)
    try:
        p = s16_norm.layer_norm_params(int(op.attrs["cols"]), _scale(x), _scale(out), float(op.attrs["eps"]),
                                       None if weight is None else weight.data, None if bias is None else bias.data,
                                       rms=rms, act_min=act_min, act_max=act_max)
    except ValueError as exc:
        return str(exc)
    eps_lo, eps_hi = p.eps_words
    return Op("layer_norm", [x, _int_const(f"{op.name}_multiplier", p.multipliers),
                             _int_const(f"{op.name}_shift", p.shifts), _int_const(f"{op.name}_bias_q", p.bias)],
              [out], {"cols": op.attrs["cols"], "eps": op.attrs["eps"], "eps_lo": eps_lo, "eps_hi": eps_hi,
                      "act_min": act_min, "act_max": act_max, "rms": int(rms), "act": op.attrs.get("act"),
                      # the float weight and bias the constants above come from, for the integer reference
                      "affine": (None if weight is None else np.asarray(weight.data),
                                 None if bias is None else np.asarray(bias.data))},
              op.name, op.source)


def argmax_on_codes(graph: Graph) -> None:
    """argmax of a dequantized int8 or int16 tensor reads the codes (dequantization is increasing)."""
    for op in graph.ops:
        if op.kind != "argmax":
            continue
        producer = graph.producer(op.inputs[0])
        if producer is not None and producer.kind == "dequantize" and producer.inputs[0].dtype in ("int8", "int16"):
            op.inputs[0] = producer.inputs[0]


def _reduce(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    first, last = op.attrs["dims"]
    count = int(np.prod(x.shape[first:last + 1]))
    if x.dtype == "int16":
        if op.attrs["op"] not in ("mean", "sum", "amax", "amin"):
            return f"w8a16 has no 16x8 {op.attrs['op']}"
        attrs = mean_s16_attrs(op, x, out, count if op.attrs["op"] == "mean" else 1)
        return attrs if isinstance(attrs, str) else Op("reduce", [x], [out], {**op.attrs, **attrs}, op.name,
                                                       op.source)
    real = _scale(x) / _scale(out) / (count if op.attrs["op"] == "mean" else 1)
    mult, shift = arith.quantize_multiplier(real)
    act_min, act_max = act_bounds(op, out)
    return Op("reduce", [x], [out], {**op.attrs, "input_offset": -_zp(x), "multiplier": mult, "shift": shift,
                                     "output_offset": _zp(out), "act_min": act_min, "act_max": act_max},
              op.name, op.source)


CONVERTERS = {"softmax": _softmax, "log_softmax": _log_softmax, "layer_norm": _layer_norm,
              "rms_norm": _layer_norm, "reduce": _reduce}
