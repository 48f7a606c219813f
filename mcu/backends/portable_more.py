"""Portable-backend emitters of the ops mcu/frontend_ops.py adds (issue 18): elementwise math, maximum
and minimum, layer norm, batched matrix products and reductions, all fp32. They join
:data:`mcu.backends.portable.EMITTERS`; these kernels are generated-C only for now (a program file with
one of them is refused by the writer, and the host runs the generated C instead). Kept apart from
portable.py on purpose until they have program kernel ids: tests/test_program.py requires one for every
kernel portable.py emits."""

from __future__ import annotations

import math
from typing import Callable

from mcu.calls import KernelCall, Ref, operand_strides
from mcu.errors import McuError
from mcu.ir import DTYPE_BYTES
from mcu.opcodes import COMPARE_OP, COMPARE_TYPE, REDUCE_OP, UNARY_FN
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


EMITTERS = {
    ("unary", "float32"): _unary,
    ("layer_norm", "float32"): _layer_norm,
    ("bmm", "float32"): _bmm,
    ("reduce", "float32"): _reduce,
    ("maximum", "float32"): _binary("maximum"),
    ("minimum", "float32"): _binary("minimum"),
    # selection (issue 17): dtype-agnostic kernels
    ("compare", "uint8"): _compare,
    **{("where", dt): _where for dt in ("float32", "int32", "int8", "uint8")},
    **{("embedding", dt): _embedding for dt in ("float32", "int8")},
}
