"""Choose a memory layout (dim order) for every tensor; insert layout changes.

Rank-4 activations are channels-last (NHWC), the layout the convolution and
pooling kernels read. Ops that need a particular layout of an input get a
``permute`` in front when the producer chose another. Reshapes need row-major
bytes in logical order so that they can alias their input; elementwise and
softmax kernels take any layout through strides. Constants are stored in
the layout their kernel reads (convolution weights as OHWI).
"""

from __future__ import annotations

import numpy as np

from mcu.ir import CHANNELS_LAST, Graph, Op, Tensor
from mcu.passes.conv_views import keeps_layout, view_order
from mcu.reference.resample import physical_tables

_NEEDS_CHANNELS_LAST = {"conv2d", "depthwise_conv2d", "max_pool2d", "avg_pool2d", "mean_hw", "batch_norm",
                        "conv_transpose2d"}
# [N][H][W][C] or [N][C][H][W]: the kernels see [outer][h][w][inner] either way
_RESAMPLE = {"resize_bilinear", "adaptive_avg_pool"}
_PRODUCES_CHANNELS_LAST = _NEEDS_CHANNELS_LAST - {"mean_hw"}
# index_put: its values, written row by row; var, argmax, rms_norm reduce adjacent logical dims
_NEEDS_CONTIGUOUS = {"reshape", "linear", "layer_norm", "bmm", "reduce", "index_put",
                     "var", "argmax", "rms_norm"}
_SAME_AS_INPUT = {"clamp", "sigmoid", "tanh", "hardswish", "softmax", "pad", "quantize", "dequantize", "lut",
                  "requantize", "slice", "unary", "log_softmax", "remap", "index_select", "resize_bilinear",
                  "adaptive_avg_pool"}
# per-channel ops whose kernels read channels first or channels last (any other order is made
# row-major first); the output keeps the input's order
_CHANNELS_EITHER_WAY = {"group_norm", "prelu"}
# resampling and data movement: gather reads row-major tensors (its index too); a remap that
# adds leading dims (repeat, expand) reads its input row-major
_ALL_CONTIGUOUS = {"gather"}
# Kernels that take their inputs in any layout (through strides or the input's own order).
_ANY_LAYOUT_KINDS = {"add", "sub", "mul", "div", "maximum", "minimum", "permute", "batch_norm", "layout", "custom",
                     "compare", "where"}
_ANY_LAYOUT = _SAME_AS_INPUT | _ANY_LAYOUT_KINDS | _CHANNELS_EITHER_WAY | _RESAMPLE


def _identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def channels_last(rank: int) -> tuple[int, ...]:
    """Dim 1 (channels) last in memory, the other dims in order: NHWC at rank 4."""
    return (0, *range(2, rank), 1) if rank > 1 else (0,)


def _convert(graph: Graph, op: Op, index: int, order: tuple[int, ...], cache: dict) -> None:
    """Make op.inputs[index] available in ``order``, sharing one conversion per tensor and order."""
    src = op.inputs[index]
    key = (id(src), order)
    if key not in cache:
        suffix = "nhwc" if order == CHANNELS_LAST else "contig"
        conv = Tensor(name=f"{src.name}_{suffix}", shape=src.shape, dtype=src.dtype, dim_order=order,
                      quant=src.quant)
        graph.ops.insert(graph.ops.index(op), Op("layout", [src], [conv], {}, name=f"{conv.name}_layout",
                                                 source=op.source))
        cache[key] = conv
    op.inputs[index] = cache[key]


def same_bytes(t: Tensor, order: tuple[int, ...]) -> bool:
    """Whether ``t`` in its own dim order has the same bytes as in ``order`` (size-1 dims move freely)."""
    a = [d for d in t.dim_order if t.shape[d] != 1]
    b = [d for d in order if t.shape[d] != 1]
    return a == b


def assign_layouts(graph: Graph) -> Graph:
    for t in graph.inputs:
        if len(t.shape) == 4:
            t.dim_order = CHANNELS_LAST
    cache: dict = {}
    for op in list(graph.ops):
        # 1. layouts this op requires of its inputs
        if op.kind in _NEEDS_CHANNELS_LAST:
            if len(op.inputs[0].shape) == 4:
                _require(graph, op, 0, CHANNELS_LAST, cache)
        elif keeps_layout(op):
            pass  # a size-1 dim in or out (a Conv1d's or a 1-D pooling's view) takes its input's layout along
        elif op.kind in _NEEDS_CONTIGUOUS:
            for i, t in enumerate(op.inputs):  # every operand: bmm reads both row-major
                if not t.is_constant:
                    _require(graph, op, i, _identity(len(t.shape)), cache)
        elif op.kind == "custom" and not op.attrs["custom"].elementwise:
            # a user kernel sees row-major tensors in logical order, unless it says any layout will do
            for i, t in enumerate(op.inputs):
                if not t.is_constant:
                    _require(graph, op, i, _identity(len(t.shape)), cache)
        elif op.kind in _CHANNELS_EITHER_WAY:
            x = op.inputs[0]
            if x.dim_order not in (_identity(len(x.shape)), channels_last(len(x.shape))):
                _require(graph, op, 0, _identity(len(x.shape)), cache)
        elif op.kind in _RESAMPLE:
            if op.inputs[0].dim_order not in (CHANNELS_LAST, _identity(4)):
                _require(graph, op, 0, CHANNELS_LAST, cache)
        elif op.kind in _ALL_CONTIGUOUS or (op.kind == "remap" and len(op.inputs[0].shape) != len(op.output.shape)):
            for i, t in enumerate(op.inputs):
                if not t.is_constant:
                    _require(graph, op, i, _identity(len(t.shape)), cache)
        elif op.kind == "concat":
            order = op.inputs[0].dim_order if len(op.inputs[0].shape) == len(op.output.shape) else None
            for i, t in enumerate(op.inputs):
                if t.is_constant:
                    continue
                _require(graph, op, i, order or _identity(len(t.shape)), cache)
        elif op.kind not in _ANY_LAYOUT:
            # A Conv1d's [N, L, C] layout (mcu/passes/conv_views.py) reaches only ops known to read any
            # layout; others get row-major bytes, as every tensor of rank other than 4 had before it.
            for i, t in enumerate(op.inputs):
                if not t.is_constant and len(t.shape) != 4 and t.dim_order != _identity(len(t.shape)):
                    _require(graph, op, i, _identity(len(t.shape)), cache)
        # 2. the layout of its output
        out = op.output
        rank = len(out.shape)
        if op.kind in _PRODUCES_CHANNELS_LAST and rank == 4:
            out.dim_order = CHANNELS_LAST
        elif keeps_layout(op):
            out.dim_order = view_order(op.inputs[0], out) or _identity(rank)
        elif op.kind == "batch_norm":  # not 4-D: the kernel keeps its input's layout (outer, channels, inner)
            out.dim_order = op.inputs[0].dim_order if len(op.inputs[0].shape) == rank else _identity(rank)
        elif op.kind in _SAME_AS_INPUT | _CHANNELS_EITHER_WAY or op.kind == "concat" or (op.kind == "custom" and
                                                                  op.attrs["custom"].elementwise):
            src = op.inputs[0]
            out.dim_order = src.dim_order if len(src.shape) == rank else _identity(rank)
        elif op.kind in ("add", "sub", "mul", "div", "maximum", "minimum"):
            full = [t for t in op.inputs if t.shape == out.shape and not t.is_constant]
            out.dim_order = full[0].dim_order if full else _identity(rank)
            if out.dtype == "int16":  # the 16x8 kernels walk both operands in the output's memory order
                for i, t in enumerate(op.inputs):
                    if not t.is_constant and t.shape == out.shape:
                        _require(graph, op, i, out.dim_order, cache)
        else:
            out.dim_order = _identity(rank)
    _layout_constants(graph)
    return graph


def _require(graph: Graph, op: Op, index: int, order: tuple[int, ...], cache: dict) -> None:
    src = op.inputs[index]
    if src.is_constant or src.dim_order == order or same_bytes(src, order):
        return
    _convert(graph, op, index, order, cache)


def _layout_constants(graph: Graph) -> None:
    for op in graph.ops:
        if op.kind in ("conv2d", "conv_transpose2d"):
            w = op.inputs[1]
            if w.dim_order != CHANNELS_LAST:
                # OIHW -> OHWI: the kernel walks (kh, kw, ic) innermost for one output channel.
                w.data = np.ascontiguousarray(np.transpose(w.data, CHANNELS_LAST))
                w.dim_order = CHANNELS_LAST
        elif op.kind == "remap":  # the tables in the order of the physical dims
            op.inputs[1] = physical_tables(op)
        elif op.kind in ("add", "sub", "mul", "div", "concat", "maximum", "minimum"):
            for t in op.inputs:
                if t.is_constant and len(t.shape) == len(op.output.shape) and t.dim_order != op.output.dim_order:
                    t.data = np.ascontiguousarray(np.transpose(t.data.reshape(t.shape), op.output.dim_order))
                    t.dim_order = op.output.dim_order
