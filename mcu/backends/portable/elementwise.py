"""Portable-backend emitters of the ops mcu/frontend/ops.py and mcu/frontend/norm.py add:
elementwise math, maximum and minimum, layer, group and instance norm (fp32, and int8 layer norm),
batched matrix products, reductions, variance, argmax, log_softmax and PReLU. They join
:data:`mcu.backends.portable.core.EMITTERS`; every kernel here has a program kernel id (ids 180-219),
which tests/program/test_program.py checks as it does for portable.py."""

from __future__ import annotations

import math
from typing import Callable

from mcu.backends.calls import KernelCall, Ref, offsets, operand_strides, split_at
from mcu.errors import McuError
from mcu.ir import DTYPE_BYTES, Op, Tensor
from mcu.frontend.opcodes import COMPARE_OP, COMPARE_TYPE, REDUCE_OP, UNARY_FN
from mcu.passes.layout import channels_last
from mcu.backends.portable.common import binary


def _unary(op: Op, ref: Ref) -> KernelCall:
    params = {"size": op.output.numel, "fn": UNARY_FN[op.attrs["fn"]], "alpha": float(op.attrs["alpha"]),
              "beta": float(op.attrs["beta"])}
    return KernelCall("mcu_unary_f32", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_unary_f32.c"],
                      "mcu_unary_f32_params", params, operands=[op.inputs[0], op.output])


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


def _bmm(op: Op, ref: Ref) -> KernelCall:
    a, b = op.inputs
    batch, m, k = a.shape
    n = b.shape[2]
    params = {"batch": batch, "m": m, "k": k, "n": n, "a_batch_stride": m * k, "b_batch_stride": k * n}
    return KernelCall("mcu_bmm_f32", ["&params", ref(a), ref(b), ref(op.output)], ["mcu_bmm_f32.c"],
                      "mcu_bmm_f32_params", params, operands=[a, b, op.output])


def _reduce(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    first, last = op.attrs["dims"]
    params = {"outer": math.prod(x.shape[:first]), "reduce": math.prod(x.shape[first:last + 1]),
              "inner": math.prod(x.shape[last + 1:]), "op": REDUCE_OP[op.attrs["op"]]}
    return KernelCall("mcu_reduce_f32", ["&params", ref(x), ref(op.output)], ["mcu_reduce_f32.c"],
                      "mcu_reduce_f32_params", params, operands=[x, op.output])


def _binary(name: str) -> Callable[[Op, Ref], KernelCall]:
    return binary(name)


def _broadcast(op: Op, operands: list, names: list[str]) -> dict:
    """The output's shape and each operand's strides over it in memory order, padded to 6 dims."""
    out = op.output
    rank = max(len(out.shape), 1)
    if rank > 6:
        raise McuError(f"{op.kind} on rank-{rank} tensors is not supported (at most 6 dims)")
    pad = 6 - rank
    params = {"rank": rank, "out_shape": (list(out.physical_shape) or [1]) + [1] * pad}
    for t, name in zip(operands, names):
        params[f"{name}_strides"] = (operand_strides(t, out) or [0]) + [0] * pad
    return params


def _compare(op: Op, ref: Ref) -> KernelCall:
    a, b = op.inputs
    params = {**_broadcast(op, [a, b], ["a", "b"]), "cmp": COMPARE_OP[op.attrs["cmp"]],
              "type": COMPARE_TYPE[a.dtype]}
    return KernelCall("mcu_compare", ["&params", ref(a), ref(b), ref(op.output)], ["mcu_compare.c"],
                      "mcu_compare_params", params, operands=[a, b, op.output])


def _where(op: Op, ref: Ref) -> KernelCall:
    c, a, b = op.inputs
    size = DTYPE_BYTES[op.output.dtype]
    params = _broadcast(op, [c, a, b], ["c", "a", "b"])
    return KernelCall("mcu_where", ["&params", str(size), ref(c), ref(a), ref(b), ref(op.output)], ["mcu_where.c"],
                      "mcu_where_params", params, operands=[c, a, b, op.output], scalars=[size])


def _embedding(op: Op, ref: Ref) -> KernelCall:
    table, indices = op.inputs
    size = DTYPE_BYTES[op.output.dtype]
    params = {"rows": table.shape[0], "cols": table.shape[1], "count": indices.numel}
    return KernelCall("mcu_embedding", ["&params", str(size), ref(indices), ref(table), ref(op.output)],
                      ["mcu_embedding.c"], "mcu_embedding_params", params, operands=[indices, table, op.output],
                      scalars=[size])


def _embedding_s8(op: Op, ref: Ref) -> KernelCall:
    table, scales, indices = op.inputs
    params = {"rows": table.shape[0], "cols": table.shape[1], "count": indices.numel}
    return KernelCall("mcu_embedding_s8_f32", ["&params", ref(indices), ref(table), ref(scales), ref(op.output)],
                      ["mcu_embedding_s8_f32.c"], "mcu_embedding_params", params,
                      operands=[indices, table, scales, op.output])


EMITTERS = {
    ("unary", "float32"): _unary,
    ("layer_norm", "float32"): _layer_norm,
    ("bmm", "float32"): _bmm,
    ("reduce", "float32"): _reduce,
    ("maximum", "float32"): _binary("maximum"),
    ("minimum", "float32"): _binary("minimum"),
    # selection: dtype-agnostic kernels
    ("compare", "uint8"): _compare,
    **{("where", dt): _where for dt in ("float32", "int32", "int8", "uint8")},
    **{("embedding", dt): _embedding for dt in ("float32", "int8")},
    ("embedding_s8", "float32"): _embedding_s8,
}


# --- normalisation, reductions and int8 activations -------------------------


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
    name = "mcu_argmax_s8" if x.dtype == "int8" else "mcu_argmax_f32"
    return KernelCall(name, [*map(str, dims), ref(x), ref(op.output)], [f"{name}.c"], operands=[x, op.output],
                      scalars=list(dims))


def _log_softmax(op: Op, ref: Ref) -> KernelCall:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    return KernelCall("mcu_log_softmax_f32", [str(outer), str(axis), str(inner), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_log_softmax_f32.c"], operands=[op.inputs[0], op.output], scalars=[outer, axis, inner])


def _prelu(op: Op, ref: Ref) -> KernelCall:
    x, w = op.inputs
    rank = len(x.shape)
    last = rank > 2 and x.dim_order == channels_last(rank)
    inner = 1 if w.numel == 1 or last else math.prod(x.shape[2:])
    params = {"size": x.numel, "channels": w.numel, "inner": inner}
    return KernelCall("mcu_prelu_f32", ["&params", ref(x), ref(w), ref(op.output)], ["mcu_prelu_f32.c"],
                      "mcu_prelu_f32_params", params, operands=[x, w, op.output])


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


def _rms_norm(op: Op, ref: Ref) -> KernelCall:
    x = op.inputs[0]
    weight = op.inputs[1] if op.attrs["weight"] else None
    cols = int(op.attrs["cols"])
    params = {"rows": x.numel // cols, "cols": cols, "eps": float(op.attrs["eps"])}
    return KernelCall("mcu_rms_norm_f32", ["&params", ref(x), ref(weight) if weight is not None else "NULL",
                                           ref(op.output)], ["mcu_rms_norm_f32.c"], "mcu_layer_norm_f32_params",
                      params, operands=[x, weight, op.output])


def _bmm_s8(op: Op, ref: Ref) -> KernelCall:
    a, b = op.inputs
    batch, m, k = a.shape
    n = b.shape[2]
    params = {"batch": batch, "m": m, "k": k, "n": n, "a_batch_stride": m * k, "b_batch_stride": k * n,
              **offsets(op, "a_offset", "b_offset", "multiplier", "shift", "output_offset", "act_min", "act_max")}
    return KernelCall("mcu_bmm_s8", ["&params", ref(a), ref(b), ref(op.output)], ["mcu_bmm_s8.c"],
                      "mcu_bmm_s8_params", params, operands=[a, b, op.output])


EMITTERS.update({
    ("bmm", "int8"): _bmm_s8,
    ("rms_norm", "float32"): _rms_norm,
    ("group_norm", "float32"): _group_norm,
    ("var", "float32"): _var,
    ("argmax", "int32"): _argmax,
    ("log_softmax", "float32"): _log_softmax,
    ("prelu", "float32"): _prelu,
    ("layer_norm", "int8"): _layer_norm_s8,
    ("reduce", "int8"): _reduce_s8,
})
