"""The reference's resampling and data-movement ops on memory-order arrays. Bilinear resizing and adaptive
average pooling treat every (batch, channel) plane alike, so the reference runs them on the logical NCHW
values (one plane after another) and puts the result in the output's memory order; the kernels' own
[outer][h][w][inner] geometry is not computed here. Bilinear resizing's table comes from the shapes and the
op's scale factors (:func:`mcu.reference.derive.resize_bilinear_table`), not from the op's constant."""

from __future__ import annotations

from typing import Callable

import numpy as np

from mcu.ir import Op
from mcu.layouts import from_memory_order, to_memory_order
from mcu.reference import derive, pool, resample

Run = Callable[[Op, list[np.ndarray]], np.ndarray]


def _operand(op: Op, i: int, x: list[np.ndarray]) -> np.ndarray:
    """Input i's values: constants from the graph, run-time tensors from the arguments (in order)."""
    dynamic = [t for t in op.inputs if not t.is_constant]
    t = op.inputs[i]
    return np.asarray(t.data).reshape(-1) if t.is_constant else x[dynamic.index(t)]


def _logical(op: Op, i: int, x: list[np.ndarray]) -> np.ndarray:
    return from_memory_order(_operand(op, i, x), op.inputs[i])


def _remap(op: Op, x: list[np.ndarray]) -> np.ndarray:
    """out[i0, i1, ...] = in[tables[0][i0], tables[1][i1], ...], the input's missing leading dims of size 1."""
    out = op.output
    rank = len(out.shape)
    logical_in = (1,) * (rank - len(op.inputs[0].shape)) + tuple(op.inputs[0].shape)
    tables = [np.asarray(op.attrs["tables"][d], np.int64) for d in range(rank)]
    return to_memory_order(_logical(op, 0, x).reshape(logical_in)[np.ix_(*tables)], out)


def _index_select(op: Op, x: list[np.ndarray]) -> np.ndarray:
    indices = np.asarray(_operand(op, 1, x), np.int64).reshape(-1)
    return to_memory_order(np.take(_logical(op, 0, x), indices, axis=op.attrs["dim"]), op.output)


def _gather(op: Op, x: list[np.ndarray]) -> np.ndarray:
    out = op.output
    y = resample.gather(_logical(op, 0, x).reshape(-1), list(op.inputs[0].shape), _logical(op, 1, x).reshape(-1),
                        list(out.shape), op.attrs["dim"])
    return to_memory_order(y, out)


def _planes(kernel: Callable[..., np.ndarray], tables: Callable[[Op], list[np.ndarray]] = lambda op: []) -> Run:
    """``kernel(x, outer, h, w, inner, out_h, out_w, *tables(op))`` on each [H, W] plane of a 4-d NCHW tensor."""
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        src, out = op.inputs[0], op.output
        n, c, h, w = src.shape
        out_h, out_w = out.shape[2:]
        planes = from_memory_order(x[0], src).reshape(-1)
        y = kernel(planes, n * c, h, w, 1, out_h, out_w, *tables(op))
        return to_memory_order(np.asarray(y).reshape(out.shape), out)
    return run


INT8: dict[str, Run] = {
    "remap": _remap,
    "index_select": _index_select,
    "gather": _gather,
    "resize_bilinear": _planes(resample.resize_bilinear_s8, lambda op: [derive.resize_bilinear_table(op)]),
    "adaptive_avg_pool": _planes(pool.adaptive_avg_pool_s8),
}
# w8a16: bilinear resizing of int16 codes (mcu_resize_bilinear_s16, the int8 kernel's tables)
INT16: dict[str, Run] = {
    "resize_bilinear": _planes(resample.resize_bilinear_s16, lambda op: [derive.resize_bilinear_table(op)]),
    "adaptive_avg_pool": _planes(pool.adaptive_avg_pool_s16),
}
FLOAT_OPS: dict[str, Run] = {"remap": _remap, "index_select": _index_select, "gather": _gather}
