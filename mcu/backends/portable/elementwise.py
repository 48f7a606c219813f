"""Portable-backend emitters of the elementwise family: the binary ops with broadcasting (add, sub, mul, div,
maximum, minimum; int8 with mcu_binary_s8_params, maximum, minimum and division taking the add's
rescaled operands), clamping, sigmoid, tanh and hardswish, every function of ``mcu_unary_f32``, the int8
table lookup, requantization, quantize and dequantize, and PReLU (fp32, and int8 with a slope per
channel)."""

from __future__ import annotations

import math
from typing import Callable

from mcu.backends.calls import KernelCall, Ref, act_bounds, at_source, bound, offsets, operand_strides
from mcu.emit.cvalues import c_float
from mcu.errors import McuError
from mcu.frontend.opcodes import UNARY_FN
from mcu.ir import Op
from mcu.passes.layout import channels_last


def _broadcast(name: str, op: Op) -> dict:
    """The rank, output shape and operand strides of a broadcasting binary kernel, padded to its 6 dims."""
    a, b = op.inputs
    out = op.output
    rank = max(len(out.shape), 1)
    if rank > 6:
        raise McuError(f"{name} on rank-{rank} tensors is not supported (at most 6 dims){at_source(op)}")
    pad = 6 - rank
    return {"rank": rank, "out_shape": (list(out.physical_shape) or [1]) + [1] * pad,
            "a_strides": (operand_strides(a, out) or [0]) + [0] * pad,
            "b_strides": (operand_strides(b, out) or [0]) + [0] * pad}


def _binary(name: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a, b = op.inputs
        out = op.output
        params = {**_broadcast(name, op), **act_bounds(op)}
        return KernelCall(f"mcu_{name}_f32", ["&params", ref(a), ref(b), ref(out)], [f"mcu_{name}_f32.c"],
                          "mcu_binary_f32_params", params, operands=[a, b, out])
    return emit


def _add_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 add, difference, maximum and minimum (w8a16): operands of the output's shape and layout, CMSIS-NN's arithmetic."""
    a, b = op.inputs
    out = op.output
    if a.dim_order != out.dim_order or b.dim_order != out.dim_order:
        raise McuError(f"the 16x8 {op.kind} {op.name} needs its operands in the output's layout{at_source(op)}")
    params = {"size": out.numel, **offsets(op, "a_multiplier", "a_shift", "b_multiplier", "b_shift", "left_shift",
                                           "out_multiplier", "out_shift", "act_min", "act_max")}
    fn = f"mcu_{op.kind}_s16"
    return KernelCall(fn, ["&params", ref(a), ref(b), ref(out)], [f"{fn}.c"], "mcu_add_s16_params",
                      params, operands=[a, b, out], headers=["mcu/kernels_s16.h"])


def _mul_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 product (w8a16): operands of the output's shape and layout, CMSIS-NN's arithmetic; and the
    quotient (ours), its fractional bits before the same fields."""
    a, b = op.inputs
    out = op.output
    if a.dim_order != out.dim_order or b.dim_order != out.dim_order:
        raise McuError(f"the 16x8 {op.kind} {op.name} needs its operands in the output's layout{at_source(op)}")
    keys = ("frac_bits",) if op.kind == "div" else ()
    params = {"size": out.numel, **offsets(op, *keys, "out_multiplier", "out_shift", "act_min", "act_max")}
    function = f"mcu_{op.kind}_s16"
    return KernelCall(function, ["&params", ref(a), ref(b), ref(out)], [f"{function}.c"], f"{function}_params",
                      params, operands=[a, b, out], headers=["mcu/kernels_s16.h"])


# mcu_activation_s16_kind
_ACT_S16_KIND = {"sigmoid": 0, "tanh": 1}


def _activation_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 sigmoid or tanh (w8a16): CMSIS-NN's table with TFLite's input multiplier."""
    x, out = op.inputs[0], op.output
    params = {"size": out.numel, **offsets(op, "input_multiplier", "input_shift"), "kind": _ACT_S16_KIND[op.kind]}
    return KernelCall("mcu_activation_s16", ["&params", ref(x), ref(out)], ["mcu_activation_s16.c"],
                      "mcu_activation_s16_params", params, operands=[x, out], headers=["mcu/kernels_s16.h"])


def _binary_s8(name: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a, b = op.inputs
        out = op.output
        at = op.attrs
        params = {**_broadcast(name, op),
                  "a_offset": int(at["a_offset"]), "b_offset": int(at["b_offset"]),
                  "a_multiplier": int(at.get("a_multiplier", 0)), "a_shift": int(at.get("a_shift", 0)),
                  "b_multiplier": int(at.get("b_multiplier", 0)), "b_shift": int(at.get("b_shift", 0)),
                  "left_shift": int(at.get("left_shift", 0)),
                  "out_multiplier": int(at["out_multiplier"]), "out_shift": int(at["out_shift"]),
                  "output_offset": int(at["output_offset"]),
                  "act_min": int(at["act_min"]), "act_max": int(at["act_max"])}
        return KernelCall(f"mcu_{name}_s8", ["&params", ref(a), ref(b), ref(out)], [f"mcu_{name}_s8.c"],
                          "mcu_binary_s8_params", params, operands=[a, b, out])
    return emit


def _clamp(op: Op, ref: Ref) -> KernelCall:
    lo, hi = op.attrs["min"], op.attrs["max"]
    return KernelCall("mcu_clamp_f32", [str(op.output.numel), c_float(lo, -1), c_float(hi, +1),
                                        ref(op.inputs[0]), ref(op.output)], ["mcu_clamp_f32.c"],
                      operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, bound(lo, -1), bound(hi, +1)])


def _unary(name: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        return KernelCall(f"mcu_{name}_f32", [str(op.output.numel), ref(op.inputs[0]), ref(op.output)],
                          [f"mcu_{name}_f32.c"], operands=[op.inputs[0], op.output], scalars=[op.output.numel])
    return emit


def _unary_fn(op: Op, ref: Ref) -> KernelCall:
    params = {"size": op.output.numel, "fn": UNARY_FN[op.attrs["fn"]], "alpha": float(op.attrs["alpha"]),
              "beta": float(op.attrs["beta"])}
    return KernelCall("mcu_unary_f32", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_unary_f32.c"],
                      "mcu_unary_f32_params", params, operands=[op.inputs[0], op.output])


def _lut_s8(op: Op, ref: Ref) -> KernelCall:
    x, table = op.inputs
    return KernelCall("mcu_lut_s8", [str(x.numel), ref(table), ref(x), ref(op.output)], ["mcu_lut_s8.c"],
                      operands=[table, x, op.output], scalars=[x.numel])


def _lut_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 table lookup (w8a16): 513 int16 entries, interpolated."""
    x, table = op.inputs
    return KernelCall("mcu_lut_s16", [str(x.numel), ref(table), ref(x), ref(op.output)], ["mcu_lut_s16.c"],
                      operands=[table, x, op.output], scalars=[x.numel], headers=["mcu/kernels_s16.h"])


def _requantize_border(op: Op, ref: Ref) -> KernelCall:
    """A border between int8 and int16 activations (--quantize mixed); the int16 side has no offset."""
    widen = op.output.dtype == "int16"
    keys = (("input_offset", "multiplier", "shift") if widen else ("multiplier", "shift", "output_offset"))
    values = [op.output.numel] + [int(op.attrs[k]) for k in (*keys, "act_min", "act_max")]
    name = "mcu_requantize_s8_s16" if widen else "mcu_requantize_s16_s8"
    return KernelCall(name, [str(v) for v in values] + [ref(op.inputs[0]), ref(op.output)], [f"{name}.c"],
                      operands=[op.inputs[0], op.output], scalars=values, headers=["mcu/kernels_s16.h"])


def _requantize_to_s16(op: Op, ref: Ref) -> KernelCall:
    """int16 codes from int8 ones (a border of --quantize mixed) or from int16 ones at another scale (w8a16)."""
    return _requantize_border(op, ref) if op.inputs[0].dtype == "int8" else _requantize_s16(op, ref)


def _requantize_s8(op: Op, ref: Ref) -> KernelCall:
    if op.inputs[0].dtype == "int16":
        return _requantize_border(op, ref)
    a = op.attrs
    values = [op.output.numel] + [int(a[k]) for k in ("input_offset", "multiplier", "shift",
                                                       "output_offset", "act_min", "act_max")]
    return KernelCall("mcu_requantize_s8", [str(v) for v in values] + [ref(op.inputs[0]), ref(op.output)],
                      ["mcu_requantize_s8.c"], operands=[op.inputs[0], op.output], scalars=values)


def _requantize_s16(op: Op, ref: Ref) -> KernelCall:
    """An int16 tensor to another int16 scale (w8a16): where two readers of a tensor want different scales."""
    params = {"size": op.output.numel, **offsets(op, "multiplier", "shift", "act_min", "act_max")}
    return KernelCall("mcu_requantize_s16", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_requantize_s16.c"],
                      "mcu_requantize_s16_params", params, operands=[op.inputs[0], op.output],
                      headers=["mcu/kernels_s16.h"])


def _clamp_s8(op: Op, ref: Ref) -> KernelCall:
    return KernelCall("mcu_clamp_s8", [str(op.output.numel), str(int(op.attrs["act_min"])),
                                       str(int(op.attrs["act_max"])), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_clamp_s8.c"], operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, int(op.attrs["act_min"]), int(op.attrs["act_max"])])


def _clamp_s16(op: Op, ref: Ref) -> KernelCall:
    """A ReLU or clamp on int16 codes (w8a16)."""
    bounds = [op.output.numel, int(op.attrs["act_min"]), int(op.attrs["act_max"])]
    return KernelCall("mcu_clamp_s16", [*map(str, bounds), ref(op.inputs[0]), ref(op.output)], ["mcu_clamp_s16.c"],
                      operands=[op.inputs[0], op.output], scalars=bounds, headers=["mcu/kernels_s16.h"])


def _quantize(op: Op, ref: Ref) -> KernelCall:
    """float32 to int8 codes, or to int16 ones (w8a16: an input a comparison also reads as it is)."""
    q = op.output.quant
    assert q is not None
    wide = op.output.dtype == "int16"
    function = "mcu_quantize_f32_s16" if wide else "mcu_quantize_f32_s8"
    return KernelCall(function, [str(op.output.numel), c_float(1.0 / q.scale[0]), str(q.zero_point[0]),
                                 ref(op.inputs[0]), ref(op.output)], [f"{function}.c"],
                      operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, float(1.0 / q.scale[0]), int(q.zero_point[0])],
                      headers=["mcu/kernels_s16.h"] if wide else [])


def _dequantize(op: Op, ref: Ref) -> KernelCall:
    """int8 codes to float32, or int16 ones (w8a16: the values a comparison reads)."""
    q = op.attrs["quant"]
    wide = op.inputs[0].dtype == "int16"
    function = "mcu_dequantize_s16_f32" if wide else "mcu_dequantize_s8_f32"
    return KernelCall(function, [str(op.output.numel), c_float(q.scale[0]), str(q.zero_point[0]),
                                 ref(op.inputs[0]), ref(op.output)], [f"{function}.c"],
                      operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, float(q.scale[0]), int(q.zero_point[0])],
                      headers=["mcu/kernels_s16.h"] if wide else [])


def _prelu(op: Op, ref: Ref) -> KernelCall:
    x, w = op.inputs
    rank = len(x.shape)
    last = rank > 2 and x.dim_order == channels_last(rank)
    inner = 1 if w.numel == 1 or last else math.prod(x.shape[2:])
    params = {"size": x.numel, "channels": w.numel, "inner": inner}
    return KernelCall("mcu_prelu_f32", ["&params", ref(x), ref(w), ref(op.output)], ["mcu_prelu_f32.c"],
                      "mcu_prelu_f32_params", params, operands=[x, w, op.output])


def prelu_params(op: Op) -> dict:
    """The fields of mcu_prelu_s8_params, in declaration order: element i takes slope (i / inner) % channels."""
    x, alpha = op.inputs
    rank = len(x.shape)
    last = rank > 2 and x.dim_order == channels_last(rank)
    inner = 1 if alpha.numel == 1 or last else math.prod(x.shape[2:])
    return {"size": x.numel, "channels": alpha.numel, "inner": inner,
            **offsets(op, "input_offset", "pos_multiplier", "pos_shift", "neg_multiplier", "neg_shift",
                      "output_offset", "act_min", "act_max")}


def _prelu_s8(op: Op, ref: Ref) -> KernelCall:
    x, alpha = op.inputs
    return KernelCall("mcu_prelu_s8", ["&params", ref(x), ref(alpha), ref(op.output)], ["mcu_prelu_s8.c"],
                      "mcu_prelu_s8_params", prelu_params(op), operands=[x, alpha, op.output])


EMITTERS = {
    ("add", "float32"): _binary("add"),
    ("sub", "float32"): _binary("sub"),
    ("mul", "float32"): _binary("mul"),
    ("div", "float32"): _binary("div"),
    ("maximum", "float32"): _binary("maximum"),
    ("minimum", "float32"): _binary("minimum"),
    ("clamp", "float32"): _clamp,
    ("sigmoid", "float32"): _unary("sigmoid"),
    ("tanh", "float32"): _unary("tanh"),
    ("hardswish", "float32"): _unary("hardswish"),
    ("unary", "float32"): _unary_fn,
    ("prelu", "float32"): _prelu,
    ("add", "int8"): _binary_s8("add"),
    ("sub", "int8"): _binary_s8("sub"),
    ("mul", "int8"): _binary_s8("mul"),
    ("div", "int8"): _binary_s8("div"),
    ("maximum", "int8"): _binary_s8("maximum"),
    ("minimum", "int8"): _binary_s8("minimum"),
    ("add", "int16"): _add_s16,
    ("sub", "int16"): _add_s16,
    ("maximum", "int16"): _add_s16,
    ("minimum", "int16"): _add_s16,
    ("mul", "int16"): _mul_s16,
    ("div", "int16"): _mul_s16,
    ("sigmoid", "int16"): _activation_s16,
    ("tanh", "int16"): _activation_s16,
    ("clamp", "int16"): _clamp_s16,
    ("clamp", "int8"): _clamp_s8,
    ("lut", "int8"): _lut_s8,
    ("lut", "int16"): _lut_s16,
    ("requantize", "int8"): _requantize_s8,
    ("requantize", "int16"): _requantize_to_s16,
    ("quantize", "int8"): _quantize,
    ("quantize", "int16"): _quantize,
    ("dequantize", "float32"): _dequantize,
    ("prelu", "int8"): _prelu_s8,
}
