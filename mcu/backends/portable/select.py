"""Portable-backend emitters of the selection and state family: comparisons, ``where`` and embeddings
(dtype-agnostic kernels: they move bytes), and ``index_put``, which writes new positions into a model's
state."""

from __future__ import annotations

from mcu.backends.calls import KernelCall, Ref, operand_strides
from mcu.errors import McuError
from mcu.frontend.opcodes import COMPARE_OP, COMPARE_TYPE
from mcu.ir import DTYPE_BYTES, Op


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


def _index_put(op: Op, ref: Ref) -> KernelCall:
    """Writes the new positions into the state (the op's output aliases the state's bytes)."""
    values, indices = op.inputs
    a = op.attrs
    params = {"outer": a["outer"], "axis": a["axis"], "inner": a["inner"], "count": a["count"]}
    size = DTYPE_BYTES[op.output.dtype]
    return KernelCall("mcu_index_put", ["&params", str(size), ref(indices), ref(values), ref(op.output)],
                      ["mcu_index_put.c"], "mcu_index_put_params", params, operands=[indices, values, op.output],
                      scalars=[size])


EMITTERS = {
    ("compare", "uint8"): _compare,
    **{("where", dt): _where for dt in ("float32", "int32", "int8", "int16", "uint8")},
    **{("embedding", dt): _embedding for dt in ("float32", "int8")},
    ("embedding_s8", "float32"): _embedding_s8,
    ("index_put", "float32"): _index_put,
}
