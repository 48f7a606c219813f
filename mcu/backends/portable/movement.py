"""Portable-backend emitters of the data movement family: permute (and the layout change, a permute between
memory orders), concatenation, padding and slicing, for any dtype (they move bytes; int8 padding writes
its quantized value)."""

from __future__ import annotations

import math

from mcu.backends.calls import KernelCall, Ref, at_source, physical_perm
from mcu.emit.cvalues import c_float
from mcu.errors import McuError
from mcu.ir import DTYPE_BYTES, Op


def _slice(op: Op, ref: Ref) -> KernelCall:
    src, out = op.inputs[0], op.output
    rank = len(src.shape)
    if rank > 6:
        raise McuError(f"slice of a rank-{rank} tensor is not supported (at most 6 dims){at_source(op)}")
    pad = 6 - rank
    start = [op.attrs["start"] if d == op.attrs["dim"] else 0 for d in src.dim_order]
    step = [op.attrs["step"] if d == op.attrs["dim"] else 1 for d in src.dim_order]
    params = {"rank": rank, "in_shape": list(src.physical_shape) + [1] * pad,
              "out_shape": list(out.physical_shape) + [1] * pad, "start": start + [0] * pad, "step": step + [1] * pad}
    return KernelCall("mcu_slice", ["&params", str(DTYPE_BYTES[src.dtype]), ref(src), ref(out)], ["mcu_slice.c"],
                      "mcu_slice_params", params, operands=[src, out])


def _permute_call(op: Op, ref: Ref, logical_perm: tuple[int, ...]) -> KernelCall:
    src, out = op.inputs[0], op.output
    rank = len(src.shape)
    if rank > 6:
        raise McuError(f"permute of a rank-{rank} tensor is not supported (at most 6 dims){at_source(op)}")
    pad = 6 - rank
    params = {"rank": rank, "in_shape": list(src.physical_shape) + [1] * pad,
              "perm": physical_perm(src, out, logical_perm) + list(range(rank, 6))}
    return KernelCall("mcu_permute", ["&params", str(DTYPE_BYTES[src.dtype]), ref(src), ref(out)],
                      ["mcu_permute.c"], "mcu_permute_params", params, operands=[src, out])


def _permute(op: Op, ref: Ref) -> KernelCall:
    return _permute_call(op, ref, op.attrs["perm"])


def _layout(op: Op, ref: Ref) -> KernelCall:
    return _permute_call(op, ref, tuple(range(len(op.inputs[0].shape))))


def _concat(op: Op, ref: Ref) -> KernelCall:
    out = op.output
    p = out.dim_order.index(op.attrs["axis"])
    outer = math.prod(out.physical_shape[:p])
    elem = DTYPE_BYTES[out.dtype]
    chunks = [math.prod(t.physical_shape[p:]) * elem for t in op.inputs]
    return KernelCall("mcu_concat", [str(outer), str(len(chunks)), "chunk_bytes", "inputs", ref(op.output)],
                      ["mcu_concat.c"],
                      locals=[f"static const int32_t chunk_bytes[{len(chunks)}] = {{{', '.join(map(str, chunks))}}};",
                              f"const void *const inputs[{len(chunks)}] = "
                              f"{{{', '.join(ref(t) for t in op.inputs)}}};"],
                      operands=[*op.inputs, op.output], scalars=[outer, *chunks])


def _pad(op: Op, ref: Ref) -> KernelCall:
    src = op.inputs[0]
    rank = len(src.shape)
    pad = 6 - rank
    before = [op.attrs["before"][d] for d in src.dim_order]
    after = [op.attrs["after"][d] for d in src.dim_order]
    params = {"rank": rank, "in_shape": list(src.physical_shape) + [1] * pad,
              "pad_before": before + [0] * pad, "pad_after": after + [0] * pad}
    fill = c_float(op.attrs["value"])
    return KernelCall("mcu_pad", ["&params", "4", "&fill", ref(src), ref(op.output)], ["mcu_pad.c"],
                      "mcu_pad_params", params, locals=[f"static const float fill = {fill};"],
                      operands=[src, op.output], scalars=[float(op.attrs["value"])])


def _pad_s8(op: Op, ref: Ref) -> KernelCall:
    call = _pad(op, ref)
    call.args[1] = "1"
    call.locals = [f"static const int8_t fill = {int(op.attrs['value_q'])};"]
    call.scalars = [int(op.attrs["value_q"])]
    return call


EMITTERS = {
    ("slice", "float32"): _slice,
    ("slice", "int8"): _slice,
    ("slice", "int32"): _slice,  # tokens and positions; a part of a run-time index tensor
    ("slice", "uint8"): _slice,
    ("permute", "float32"): _permute,
    ("layout", "float32"): _layout,
    ("concat", "float32"): _concat,
    ("pad", "float32"): _pad,
    ("permute", "int8"): _permute,
    ("layout", "int8"): _layout,
    ("concat", "int8"): _concat,
    ("pad", "int8"): _pad_s8,
    # w8a16's layout changes (a Conv1d stack's, as at int8) and permutes move int16 elements
    ("permute", "int16"): _permute,
    ("slice", "int16"): _slice,
    ("layout", "int16"): _layout,
    ("concat", "int16"): _concat,
}
