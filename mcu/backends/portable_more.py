"""Portable-backend emitters of the ops mcu/frontend_ops.py and mcu/frontend_norm.py add (issue 18):
elementwise math, maximum and minimum, layer, group and instance norm (fp32, and int8 layer norm),
batched matrix products, reductions, variance, argmax, log_softmax and PReLU. They join
:data:`mcu.backends.portable.EMITTERS`; every kernel here has a program kernel id (ids 180-219),
which tests/test_program.py checks as it does for portable.py."""

from __future__ import annotations

import math
from typing import Callable

from mcu.calls import KernelCall, Ref
from mcu.opcodes import REDUCE_OP, UNARY_FN
from mcu.ir import Op


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
    from mcu.backends.portable import _binary as binary

    return binary(name)


EMITTERS = {
    ("unary", "float32"): _unary,
    ("layer_norm", "float32"): _layer_norm,
    ("bmm", "float32"): _bmm,
    ("reduce", "float32"): _reduce,
    ("maximum", "float32"): _binary("maximum"),
    ("minimum", "float32"): _binary("minimum"),
}
