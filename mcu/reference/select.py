"""The reference's selection ops (``mcu_compare``, ``mcu_where``) on memory-order arrays: exact at any
dtype (no arithmetic), on the operands' logical values with NumPy's broadcasting, the result in the
output's memory order. A constant operand is read from the graph."""

from __future__ import annotations

from typing import Callable

import numpy as np

from mcu.ir import Op
from mcu.layouts import from_memory_order, to_memory_order

Run = Callable[[Op, list[np.ndarray]], np.ndarray]


def _logical(fn: Callable[..., np.ndarray]) -> Run:
    def run(op: Op, x: list[np.ndarray]) -> np.ndarray:
        dynamic = iter(x)
        vals = [from_memory_order(np.asarray(t.data).reshape(-1) if t.is_constant else next(dynamic), t)
                for t in op.inputs]
        return to_memory_order(np.broadcast_to(fn(op, *vals), op.output.shape), op.output)
    return run


_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}
_where = _logical(lambda op, c, a, b: np.where(c != 0, a, b).astype(a.dtype))

INT8: dict[str, Run] = {"where": _where}
FLOAT_OPS: dict[str, Run] = {
    "compare": _logical(lambda op, a, b: _COMPARE[op.attrs["cmp"]](a, b).astype(np.uint8)),
    "where": _where,
}
