"""Portable-backend emitters of resampling and data movement (mcu/frontend/resample.py):
mcu_remap (per-dim index tables, any dtype), mcu_index_select and mcu_gather (run-time indices, any
dtype), mcu_resize_bilinear_f32/_s8 (NHWC: [N][H][W][C])."""

from __future__ import annotations

import math

from mcu.backends.calls import KernelCall, Ref, at_source
from mcu.errors import McuError
from mcu.ir import CHANNELS_LAST, DTYPE_BYTES, Op


def _pad6(values: list[int], fill: int, op: Op) -> list[int]:
    if len(values) > 6:
        raise McuError(f"{op.kind} of a rank-{len(values)} tensor is not supported (at most 6 dims){at_source(op)}")
    return list(values) + [fill] * (6 - len(values))


def _remap(op: Op, ref: Ref) -> KernelCall:
    x, tables = op.inputs
    out = op.output
    rank = len(out.shape)
    logical_in = (1,) * (rank - len(x.shape)) + tuple(x.shape)
    params = {"rank": rank, "in_shape": _pad6([logical_in[d] for d in out.dim_order], 1, op),
              "out_shape": _pad6(list(out.physical_shape), 1, op)}
    size = DTYPE_BYTES[out.dtype]
    return KernelCall("mcu_remap", ["&params", str(size), ref(tables), ref(x), ref(out)], ["mcu_remap.c"],
                      "mcu_remap_params", params, operands=[tables, x, out], scalars=[size])


def _index_select(op: Op, ref: Ref) -> KernelCall:
    x, indices = op.inputs
    p = x.dim_order.index(op.attrs["dim"])
    phys = x.physical_shape
    params = {"outer": math.prod(phys[:p]), "axis": phys[p], "inner": math.prod(phys[p + 1:]),
              "count": indices.numel}
    size = DTYPE_BYTES[op.output.dtype]
    return KernelCall("mcu_index_select", ["&params", str(size), ref(indices), ref(x), ref(op.output)],
                      ["mcu_index_select.c"], "mcu_index_select_params", params,
                      operands=[indices, x, op.output], scalars=[size])


def _gather(op: Op, ref: Ref) -> KernelCall:
    x, index = op.inputs
    params = {"rank": len(x.shape), "in_shape": _pad6(list(x.shape), 1, op),
              "out_shape": _pad6(list(op.output.shape), 1, op), "dim": op.attrs["dim"]}
    size = DTYPE_BYTES[op.output.dtype]
    return KernelCall("mcu_gather", ["&params", str(size), ref(index), ref(x), ref(op.output)], ["mcu_gather.c"],
                      "mcu_gather_params", params, operands=[index, x, op.output], scalars=[size])


def resample_params(op: Op) -> dict:
    """[outer][h][w][inner]: NHWC is outer N, inner C; NCHW is outer N*C, inner 1."""
    x = op.inputs[0]
    n, c, h, w = x.shape
    oh, ow = op.output.shape[2:]
    outer, inner = (n, c) if x.dim_order == CHANNELS_LAST else (n * c, 1)
    if x.dim_order not in (CHANNELS_LAST, (0, 1, 2, 3)):
        raise McuError(f"{op.kind} of a tensor in dim order {x.dim_order}{at_source(op)}")
    return {"outer": outer, "in_h": h, "in_w": w, "out_h": oh, "out_w": ow, "inner": inner}


def _resize_bilinear_f32(op: Op, ref: Ref) -> KernelCall:
    x, index, lam = op.inputs
    return KernelCall("mcu_resize_bilinear_f32", ["&params", ref(index), ref(lam), ref(x), ref(op.output)],
                      ["mcu_resize_bilinear_f32.c"], "mcu_resample_f32_params", resample_params(op),
                      operands=[index, lam, x, op.output])


def _resize_bilinear_s8(op: Op, ref: Ref) -> KernelCall:
    x, index = op.inputs
    return KernelCall("mcu_resize_bilinear_s8", ["&params", ref(index), ref(x), ref(op.output)],
                      ["mcu_resize_bilinear_s8.c"], "mcu_resample_s8_params", resample_params(op),
                      operands=[index, x, op.output])


def _resize_bilinear_s16(op: Op, ref: Ref) -> KernelCall:
    """w8a16: mcu_resize_bilinear_s16, the int8 kernel's tables and rounding on int16 codes."""
    x, index = op.inputs
    return KernelCall("mcu_resize_bilinear_s16", ["&params", ref(index), ref(x), ref(op.output)],
                      ["mcu_resize_bilinear_s16.c"], "mcu_resample_s8_params", resample_params(op),
                      operands=[index, x, op.output], headers=["mcu/kernels_s16.h"])


EMITTERS = {
    ("remap", "float32"): _remap,
    ("remap", "int8"): _remap,
    ("index_select", "float32"): _index_select,
    ("index_select", "int8"): _index_select,
    ("gather", "float32"): _gather,
    ("gather", "int8"): _gather,
    ("remap", "int32"): _remap,  # indices moved before they index (an expanded run-time index)
    ("index_select", "int32"): _index_select,
    ("gather", "int32"): _gather,
    # w8a16: the same moves of int16 elements
    ("remap", "int16"): _remap,
    ("index_select", "int16"): _index_select,
    ("gather", "int16"): _gather,
    ("resize_bilinear", "float32"): _resize_bilinear_f32,
    ("resize_bilinear", "int8"): _resize_bilinear_s8,
    ("resize_bilinear", "int16"): _resize_bilinear_s16,
}
