"""Running a kernel with its output placed inside its input's buffer at every offset its overlap contract
allows (the extremes, a few steps inside, the disjoint boundary), each result checked against the same
kernel on separate buffers; and the window cases (convolution, depthwise, pointwise) the checks draw."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import strategies as st

import cbind_s8
from mcu.plan.contracts import allows, overlap_contracts
from mcu.ir import Op, Tensor


VoidP = ctypes.c_void_p


def tensor(name: str, shape: tuple[int, ...], dtype: str, data: np.ndarray | None = None) -> Tensor:
    return Tensor(name=name, shape=shape, dtype=dtype, data=data)


@st.composite
def window_case(draw, depthwise: bool = False, pointwise: bool = False):
    n = draw(st.integers(1, 2))
    c = draw(st.integers(1, 6))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    if pointwise:
        k, s, p, d = (1, 1), (1, 1), (0, 0), (1, 1)
    else:
        k = (draw(st.integers(1, min(3, h))), draw(st.integers(1, min(3, w))))
        s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        p = (draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[1] - 1)))
        d = (1, 1)
    oc = c if depthwise else draw(st.integers(1, 12))
    return n, c, h, w, oc, k, s, p, d


def out_hw(h, w, k, s, p, d):
    return (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1, (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1


def _deltas(intervals, in_bytes: int, out_bytes: int, unit: int) -> list[int]:
    """Placements to try: each interval's extreme, a few steps inside it, and the disjoint boundary."""
    ds: set[int] = {-out_bytes}
    for lo, hi in intervals:
        if hi is not None:
            ds |= {hi, hi - 1, hi - unit, (hi - out_bytes) // 2}
        if lo is not None:
            ds |= {lo, lo + 1, lo + unit, in_bytes}
    return sorted(d for d in ds if allows(intervals, d) or d <= -out_bytes or d >= in_bytes)


def run_placed(call, x: np.ndarray, out_bytes: int, delta: int, itemsize: int):
    """Run ``call(x_ptr, y_ptr)`` with x and y inside one buffer, y starting ``delta`` bytes after x."""
    base = max(0, -delta) + 64
    mem = np.zeros(base + max(x.nbytes, delta + out_bytes) + 64, dtype=np.uint8)
    mem[base:base + x.nbytes] = x.reshape(-1).view(np.uint8)
    addr = mem.ctypes.data
    status = call(VoidP(addr + base), VoidP(addr + base + delta))
    return status, mem[base + delta: base + delta + out_bytes].copy()


def check_overlap(call, x: np.ndarray, op: Op, out_bytes: int, unit: int) -> None:
    contracts = overlap_contracts(op)
    assert contracts, f"{op.kind} should have an overlap contract"
    intervals = contracts[0].intervals
    status, separate = run_placed(call, x, out_bytes, -out_bytes - 16, x.itemsize)
    assert status == 0
    for delta in _deltas(intervals, x.nbytes, out_bytes, unit):
        status, placed = run_placed(call, x, out_bytes, delta, x.itemsize)
        assert status == 0, f"status {status} at delta {delta} ({intervals})"
        np.testing.assert_array_equal(placed, separate, err_msg=f"delta {delta}, contract {intervals}")


def random_quant(channels: int, rng: np.random.Generator):
    return cbind_s8.Quant(rng.integers(2**30, 2**31 - 1, channels), rng.integers(-9, -4, channels), channels)
