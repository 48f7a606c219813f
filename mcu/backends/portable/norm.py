"""Portable-backend emitters of the normalisation, softmax and reduction family: batch, layer, RMS, group and
instance norm (fp32, and int8 layer norm), softmax and log_softmax (fp32 and int8), reductions, variance
and argmax."""

from __future__ import annotations

import math

from mcu.backends.calls import KernelCall, Ref, at_source, offsets, split_at
from mcu.errors import McuError
from mcu.frontend.opcodes import REDUCE_OP
from mcu.ir import Op, Tensor
from mcu.passes.layout import channels_last


def _softmax(op: Op, ref: Ref) -> KernelCall:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    return KernelCall("mcu_softmax_f32", [str(outer), str(axis), str(inner), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_softmax_f32.c"], operands=[op.inputs[0], op.output], scalars=[outer, axis, inner])


def _batch_norm(op: Op, ref: Ref) -> KernelCall:
    x, scale, shift = op.inputs
    outer, channels, inner = split_at(x, 1)
    return KernelCall("mcu_batch_norm_f32", [str(outer), str(channels), str(inner), ref(scale), ref(shift),
                                             ref(x), ref(op.output)], ["mcu_batch_norm_f32.c"],
                      operands=[scale, shift, x, op.output], scalars=[outer, channels, inner])


def _masked(op: Op, ref: Ref, params: dict, dtype: str, headers: list[str]) -> KernelCall:
    """The softmax under a constant attention mask (mcu/passes/quantized/attention.py), its mask's rows the
    kernel's first operand: mcu_softmax_masked_s8 or _s16."""
    x, hidden = op.inputs
    if params["inner"] != 1 or x.dim_order != tuple(range(len(x.shape))):
        raise McuError(f"a masked softmax runs over the last axis of a row-major tensor{at_source(op)}")
    function = f"mcu_softmax_masked_{dtype}"
    return KernelCall(function, ["&params", ref(hidden), ref(x), ref(op.output)], [f"{function}.c"],
                      f"{function}_params", {**params, "mask_rows": int(op.attrs["mask_rows"])},
                      operands=[hidden, x, op.output], headers=headers)


def _softmax_s8(op: Op, ref: Ref) -> KernelCall:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    params = {"outer": outer, "axis": axis, "inner": inner,
              **offsets(op, "input_multiplier", "input_left_shift", "diff_min")}
    if len(op.inputs) > 1:
        return _masked(op, ref, params, "s8", [])
    return KernelCall("mcu_softmax_s8", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_softmax_s8.c"],
                      "mcu_softmax_s8_params", params, operands=[op.inputs[0], op.output])


def _softmax_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 softmax (w8a16): CMSIS-NN's arm_softmax_s16 over any axis."""
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    params = {"outer": outer, "axis": axis, "inner": inner, **offsets(op, "input_multiplier", "input_shift")}
    if len(op.inputs) > 1:
        return _masked(op, ref, params, "s16", ["mcu/kernels_s16.h"])
    return KernelCall("mcu_softmax_s16", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_softmax_s16.c"],
                      "mcu_softmax_s16_params", params, operands=[op.inputs[0], op.output],
                      headers=["mcu/kernels_s16.h"])


def _log_softmax_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 log-softmax (w8a16) over any axis."""
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    params = {"outer": outer, "axis": axis, "inner": inner,
              **offsets(op, "input_multiplier", "input_shift", "diff_multiplier", "diff_shift", "log_multiplier",
                        "log_shift")}
    return KernelCall("mcu_log_softmax_s16", ["&params", ref(op.inputs[0]), ref(op.output)],
                      ["mcu_log_softmax_s16.c"], "mcu_log_softmax_s16_params", params,
                      operands=[op.inputs[0], op.output], headers=["mcu/kernels_s16.h"])


def _layer_norm_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 layer norm and RMS norm (w8a16)."""
    x, mult, shift, bias = op.inputs
    cols = int(op.attrs["cols"])
    params = {"rows": x.numel // cols, "cols": cols, **offsets(op, "eps_lo", "eps_hi", "act_min", "act_max", "rms")}
    return KernelCall("mcu_layer_norm_s16", ["&params", ref(x), ref(mult), ref(shift), ref(bias), ref(op.output)],
                      ["mcu_layer_norm_s16.c"], "mcu_layer_norm_s16_params", params,
                      operands=[x, mult, shift, bias, op.output], headers=["mcu/kernels_s16.h"])


def _layer_norm(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    rest = iter(op.inputs[1:])
    weight = next(rest) if op.attrs["weight"] else None
    bias = next(rest) if op.attrs["bias"] else None
    cols = int(op.attrs["cols"])
    params = {"rows": x.numel // cols, "cols": cols, "eps": float(op.attrs["eps"])}
    return KernelCall("mcu_layer_norm_f32", ["&params", ref(x), ref(weight) if weight is not None else "NULL",
                                             ref(bias) if bias is not None else "NULL", ref(op.output)],
                      ["mcu_layer_norm_f32.c"], "mcu_layer_norm_f32_params", params,
                      operands=[x, weight, bias, op.output])


def _reduce(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    first, last = op.attrs["dims"]
    params = {"outer": math.prod(x.shape[:first]), "reduce": math.prod(x.shape[first:last + 1]),
              "inner": math.prod(x.shape[last + 1:]), "op": REDUCE_OP[op.attrs["op"]]}
    return KernelCall("mcu_reduce_f32", ["&params", ref(x), ref(op.output)], ["mcu_reduce_f32.c"],
                      "mcu_reduce_f32_params", params, operands=[x, op.output])


def _optional(op: Op) -> tuple[Tensor | None, Tensor | None]:
    rest = iter(op.inputs[1:])
    weight = next(rest) if op.attrs["weight"] else None
    bias = next(rest) if op.attrs["bias"] else None
    return weight, bias


def _group_norm(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    weight, bias = _optional(op)
    rank = len(x.shape)
    params = {"batch": x.shape[0], "channels": x.shape[1], "spatial": math.prod(x.shape[2:]),
              "groups": int(op.attrs["groups"]),
              "channels_last": int(rank > 2 and x.dim_order == channels_last(rank)), "eps": float(op.attrs["eps"])}
    return KernelCall("mcu_group_norm_f32", ["&params", ref(x), ref(weight) if weight is not None else "NULL",
                                             ref(bias) if bias is not None else "NULL", ref(op.output)],
                      ["mcu_group_norm_f32.c"], "mcu_group_norm_f32_params", params,
                      operands=[x, weight, bias, op.output])


def _split(x: Tensor, dims: tuple[int, int]) -> tuple[int, int, int]:
    """(outer, reduce, inner) of a row-major tensor reduced over logical dims first..last."""
    first, last = dims
    return math.prod(x.shape[:first]), math.prod(x.shape[first:last + 1]), math.prod(x.shape[last + 1:])


def _var(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    outer, reduce, inner = _split(x, op.attrs["dims"])
    params = {"outer": outer, "reduce": reduce, "inner": inner, "divisor": float(op.attrs["divisor"])}
    return KernelCall("mcu_var_f32", ["&params", ref(x), ref(op.output)], ["mcu_var_f32.c"], "mcu_var_f32_params",
                      params, operands=[x, op.output])


def _argmax(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    dims = _split(x, op.attrs["dims"])
    name = {"int8": "mcu_argmax_s8", "int16": "mcu_argmax_s16"}.get(x.dtype, "mcu_argmax_f32")
    return KernelCall(name, [*map(str, dims), ref(x), ref(op.output)], [f"{name}.c"], operands=[x, op.output],
                      scalars=list(dims), headers=["mcu/kernels_s16.h"] if x.dtype == "int16" else [])


def _log_softmax(op: Op, ref: Ref) -> KernelCall:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    return KernelCall("mcu_log_softmax_f32", [str(outer), str(axis), str(inner), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_log_softmax_f32.c"], operands=[op.inputs[0], op.output], scalars=[outer, axis, inner])


def log_softmax_params(op: Op) -> dict:
    """The fields of mcu_log_softmax_s8_params, in declaration order."""
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    return {"outer": outer, "axis": axis, "inner": inner,
            **offsets(op, "input_multiplier", "log_multiplier", "output_offset")}


def _log_softmax_s8(op: Op, ref: Ref) -> KernelCall:
    table, x = op.inputs[1], op.inputs[0]
    return KernelCall("mcu_log_softmax_s8", ["&params", ref(table), ref(x), ref(op.output)], ["mcu_log_softmax_s8.c"],
                      "mcu_log_softmax_s8_params", log_softmax_params(op), operands=[table, x, op.output])


def _layer_norm_s8(op: Op, ref: Ref) -> KernelCall:
    x, mult, shift, bias = op.inputs
    cols = int(op.attrs["cols"])
    params = {"rows": x.numel // cols, "cols": cols, **offsets(op, "eps_lo", "eps_hi", "output_offset", "act_min",
                                                                "act_max", "rms", "input_zero_point")}
    return KernelCall("mcu_layer_norm_s8", ["&params", ref(x), ref(mult), ref(shift), ref(bias), ref(op.output)],
                      ["mcu_layer_norm_s8.c"], "mcu_layer_norm_s8_params", params,
                      operands=[x, mult, shift, bias, op.output])


def _reduce_s8(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    outer, reduce, inner = _split(x, op.attrs["dims"])
    params = {"outer": outer, "reduce": reduce, "inner": inner, "op": REDUCE_OP[op.attrs["op"]],
              **offsets(op, "input_offset", "multiplier", "shift", "output_offset", "act_min", "act_max")}
    return KernelCall("mcu_reduce_s8", ["&params", ref(x), ref(op.output)], ["mcu_reduce_s8.c"],
                      "mcu_reduce_s8_params", params, operands=[x, op.output])


def _reduce_s16(op: Op, ref: Ref) -> KernelCall:
    """A mean or sum over row-major dims of an int16 tensor: mcu_mean_s16 (w8a16; the sum with count 1); a
    maximum or minimum: mcu_amax_s16 / mcu_amin_s16 on the same parameters."""
    x = op.inputs[0]
    outer, reduce, inner = _split(x, op.attrs["dims"])
    params = {"outer": outer, "axis": reduce, "inner": inner,
              **offsets(op, "multiplier", "shift", "act_min", "act_max")}
    fn = {"amax": "mcu_amax_s16", "amin": "mcu_amin_s16"}.get(op.attrs["op"], "mcu_mean_s16")
    return KernelCall(fn, ["&params", ref(x), ref(op.output)], [f"{fn}.c"],
                      "mcu_mean_s16_params", params, operands=[x, op.output], headers=["mcu/kernels_s16.h"])


def _rms_norm(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    weight = op.inputs[1] if op.attrs["weight"] else None
    cols = int(op.attrs["cols"])
    params = {"rows": x.numel // cols, "cols": cols, "eps": float(op.attrs["eps"])}
    return KernelCall("mcu_rms_norm_f32", ["&params", ref(x), ref(weight) if weight is not None else "NULL",
                                           ref(op.output)], ["mcu_rms_norm_f32.c"], "mcu_layer_norm_f32_params",
                      params, operands=[x, weight, op.output])


EMITTERS = {
    ("batch_norm", "float32"): _batch_norm,
    ("softmax", "float32"): _softmax,
    ("layer_norm", "float32"): _layer_norm,
    ("rms_norm", "float32"): _rms_norm,
    ("group_norm", "float32"): _group_norm,
    ("var", "float32"): _var,
    ("argmax", "int32"): _argmax,
    ("log_softmax", "float32"): _log_softmax,
    ("reduce", "float32"): _reduce,
    ("softmax", "int8"): _softmax_s8,
    ("softmax", "int16"): _softmax_s16,
    ("log_softmax", "int16"): _log_softmax_s16,
    ("layer_norm", "int16"): _layer_norm_s16,
    ("log_softmax", "int8"): _log_softmax_s8,
    ("layer_norm", "int8"): _layer_norm_s8,
    ("reduce", "int8"): _reduce_s8,
    ("reduce", "int16"): _reduce_s16,
}
