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
    arr = np.ascontiguousarray(values).astype({"int32": np.int32, "int64": np.int64, "int16": np.int16}.get(dtype, np.int8))
    return Tensor(name=name, shape=tuple(arr.shape), dtype=dtype, data=arr)


def act_bounds(op: Op, out: Tensor) -> tuple[int, int]:
    """A fused float clamp [lo, hi] expressed in the output's integer domain (int8, or int16 at w8a16)."""
    lo, hi = op.attrs.get("act") or (None, None)
    s, zp = scale(out), zero_point(out)
    assert out.quant is not None
    qmin, qmax = (-32768, 32767) if out.dtype == "int16" else (-128, 127)
    act_min = qmin if lo is None else max(qmin, min(qmax, zp + int(np.round(lo / s))))
    act_max = qmax if hi is None else max(qmin, min(qmax, zp + int(np.round(hi / s))))
    return act_min, act_max


def same_quant(a: Tensor, b: Tensor) -> bool:
    return a.quant is not None and b.quant is not None and a.quant.scale == b.quant.scale \
        and a.quant.zero_point == b.quant.zero_point
