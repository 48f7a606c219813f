"""What the int8 conversion's modules share: a tensor's scale and zero point, integer constants, fused clamp
bounds in the int8 domain."""

from __future__ import annotations

import numpy as np

from mcu.ir import Op, Tensor


def scale(t: Tensor) -> float:
    assert t.quant is not None
    return t.quant.scale[0]


def zero_point(t: Tensor) -> int:
    assert t.quant is not None
    return t.quant.zero_point[0]


def int_const(name: str, values: np.ndarray, dtype: str = "int32") -> Tensor:
    arr = np.ascontiguousarray(values).astype(np.int32 if dtype == "int32" else np.int8)
    return Tensor(name=name, shape=tuple(arr.shape), dtype=dtype, data=arr)


def act_bounds(op: Op, out: Tensor) -> tuple[int, int]:
    """A fused float clamp [lo, hi] expressed in the output's int8 domain."""
    lo, hi = op.attrs.get("act") or (None, None)
    s, zp = scale(out), zero_point(out)
    act_min = -128 if lo is None else max(-128, min(127, zp + int(np.round(lo / s))))
    act_max = 127 if hi is None else max(-128, min(127, zp + int(np.round(hi / s))))
    return act_min, act_max


def same_quant(a: Tensor, b: Tensor) -> bool:
    return a.quant is not None and b.quant is not None and a.quant.scale == b.quant.scale \
        and a.quant.zero_point == b.quant.zero_point
