"""The Python reference interpreter's resampling and data-movement ops, on memory-order
arrays with the parameters the emitters compute (mcu/backends/portable/resample.py)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from mcu.reference import resample
from mcu.backends.portable.resample import resample_params
from mcu.ir import Op

Run = Callable[[Op, list[np.ndarray]], np.ndarray]


def _operand(op: Op, i: int, x: list[np.ndarray]) -> np.ndarray:
    """Input i's values: constants from the graph, run-time tensors from the arguments (in order)."""
    dynamic = [t for t in op.inputs if not t.is_constant]
    t = op.inputs[i]
    return np.asarray(t.data).reshape(-1) if t.is_constant else x[dynamic.index(t)]


def _remap(op: Op, x: list[np.ndarray]) -> np.ndarray:
    out = op.output
    rank = len(out.shape)
    logical_in = (1,) * (rank - len(op.inputs[0].shape)) + tuple(op.inputs[0].shape)
    tables = [op.attrs["tables"][d] for d in out.dim_order]
    return resample.remap(_operand(op, 0, x), [logical_in[d] for d in out.dim_order], tables)


def _index_select(op: Op, x: list[np.ndarray]) -> np.ndarray:
    src = op.inputs[0]
    p = src.dim_order.index(op.attrs["dim"])
    phys = src.physical_shape
    return resample.index_select(_operand(op, 0, x), int(np.prod(phys[:p])), phys[p], int(np.prod(phys[p + 1:])),
                                 _operand(op, 1, x))


def _gather(op: Op, x: list[np.ndarray]) -> np.ndarray:
    return resample.gather(_operand(op, 0, x), list(op.inputs[0].shape), _operand(op, 1, x), list(op.output.shape),
                           op.attrs["dim"])


def _geometry(op: Op) -> tuple[int, ...]:
    p = resample_params(op)
    return (p["outer"], p["in_h"], p["in_w"], p["inner"], p["out_h"], p["out_w"])


INT8: dict[str, Run] = {
    "remap": _remap,
    "index_select": _index_select,
    "gather": _gather,
    "resize_bilinear": lambda op, x: resample.resize_bilinear_s8(x[0], *_geometry(op), op.inputs[1].data),
    "adaptive_avg_pool": lambda op, x: resample.adaptive_avg_pool_s8(x[0], *_geometry(op)),
}
FLOAT_OPS: dict[str, Run] = {"remap": _remap, "index_select": _index_select, "gather": _gather}
