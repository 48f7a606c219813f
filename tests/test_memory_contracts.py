"""Overlap contracts: every kernel whose output may share bytes with its input is run on the host with
its output placed at the extremes its contract allows (and a few placements between), inside one
buffer, and must equal the same kernel on separate buffers bit for bit."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cbind
import cbind_s8
from mcu.plan.contracts import allows, overlap_contracts
from mcu.ir import Op, Tensor
from mcu.plan.planner import Buffer, OverlapAllowance, Plan, PlanError, verify_plan

_P = ctypes.c_void_p


def _tensor(name: str, shape: tuple[int, ...], dtype: str, data: np.ndarray | None = None) -> Tensor:
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


def _out_hw(h, w, k, s, p, d):
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


def _run_placed(call, x: np.ndarray, out_bytes: int, delta: int, itemsize: int):
    """Run ``call(x_ptr, y_ptr)`` with x and y inside one buffer, y starting ``delta`` bytes after x."""
    base = max(0, -delta) + 64
    mem = np.zeros(base + max(x.nbytes, delta + out_bytes) + 64, dtype=np.uint8)
    mem[base:base + x.nbytes] = x.reshape(-1).view(np.uint8)
    addr = mem.ctypes.data
    status = call(_P(addr + base), _P(addr + base + delta))
    return status, mem[base + delta: base + delta + out_bytes].copy()


def _check(call, x: np.ndarray, op: Op, out_bytes: int, unit: int) -> None:
    contracts = overlap_contracts(op)
    assert contracts, f"{op.kind} should have an overlap contract"
    intervals = contracts[0].intervals
    status, separate = _run_placed(call, x, out_bytes, -out_bytes - 16, x.itemsize)
    assert status == 0
    for delta in _deltas(intervals, x.nbytes, out_bytes, unit):
        status, placed = _run_placed(call, x, out_bytes, delta, x.itemsize)
        assert status == 0, f"status {status} at delta {delta} ({intervals})"
        np.testing.assert_array_equal(placed, separate, err_msg=f"delta {delta}, contract {intervals}")


def _quant(channels: int, rng: np.random.Generator):
    return cbind_s8.Quant(rng.integers(2**30, 2**31 - 1, channels), rng.integers(-9, -4, channels), channels)


@settings(max_examples=60, deadline=None)
@given(window_case(), st.integers(0, 2**31 - 1))
def test_conv2d_s8_forward_overlap(case, seed: int) -> None:
    n, c, h, w, oc, k, s, p, d = case
    assume(not (k == (1, 1) and s == (1, 1)))  # int8 pointwise runs the pixel-buffer kernel (tested below)
    rng = np.random.default_rng(seed)
    oh, ow = _out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (oc, k[0], k[1], c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = _quant(oc, rng)
    params = cbind_s8._fields(cbind_s8.Conv2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, oc), kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1],
        pad_top=p[0], pad_left=p[1], dilation_h=1, dilation_w=1, groups=1, input_offset=3, output_offset=-5,
        act_min=-128, act_max=127))
    op = Op("conv2d", [_tensor("x", (n, c, h, w), "int8"), _tensor("w", (oc, c, k[0], k[1]), "int8", wt)],
            [_tensor("y", (n, oc, oh, ow), "int8")], {"stride": s, "padding": p, "dilation": d, "groups": 1})

    def call(xp, yp):
        return cbind_s8.lib().mcu_conv2d_s8(None, ctypes.byref(params), ctypes.byref(q.struct), xp,
                                            cbind.ptr(wt), cbind.ptr(bias), yp)
    _check(call, x, op, n * oh * ow * oc, oc)


@settings(max_examples=60, deadline=None)
@given(window_case(depthwise=True), st.integers(0, 2**31 - 1))
def test_depthwise_s8_forward_and_inplace(case, seed: int) -> None:
    n, c, h, w, _, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = _out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (k[0], k[1], c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, c).astype(np.int32)
    q = _quant(c, rng)
    fields = dict(input=(n, h, w, c), output=(n, oh, ow, c), ch_mult=1, kernel_h=k[0], kernel_w=k[1],
                  stride_h=s[0], stride_w=s[1], pad_top=p[0], pad_left=p[1], dilation_h=1, dilation_w=1,
                  input_offset=-7, output_offset=11, act_min=-100, act_max=120)
    params = cbind_s8._fields(cbind_s8.DepthwiseConv2dS8Params, fields)
    op = Op("depthwise_conv2d", [_tensor("x", (n, c, h, w), "int8"), _tensor("w", (c, 1, k[0], k[1]), "int8", wt)],
            [_tensor("y", (n, c, oh, ow), "int8")],
            {"stride": s, "padding": p, "dilation": d, "groups": c, "ch_mult": 1})
    ring = np.zeros((p[0] + 1) * w * c + 8, dtype=np.int8)
    ctx = cbind_s8.Context(ring.ctypes.data, ring.size)
    lib = cbind_s8.lib()
    lib.mcu_depthwise_conv2d_s8_inplace.argtypes = [_P, _P, _P, _P, _P, _P]

    def call(xp, yp):
        if xp.value == yp.value:  # the in-place placement runs the ring-buffer variant, as the emitter does
            return lib.mcu_depthwise_conv2d_s8_inplace(ctypes.addressof(ctx), ctypes.addressof(params),
                                                       ctypes.addressof(q.struct), yp, cbind.ptr(wt),
                                                       cbind.ptr(bias))
        return lib.mcu_depthwise_conv2d_s8(None, ctypes.byref(params), ctypes.byref(q.struct), xp, cbind.ptr(wt),
                                           cbind.ptr(bias), yp)
    _check(call, x, op, n * oh * ow * c, c)
    if s == (1, 1) and (oh, ow) == (h, w):
        assert any(lo == 0 == hi for lo, hi in overlap_contracts(op)[0].intervals)


@settings(max_examples=60, deadline=None)
@given(window_case(pointwise=True), st.integers(0, 2**31 - 1))
def test_pointwise_s8_both_directions(case, seed: int) -> None:
    n, c, h, w, oc, *_ = case
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (oc, 1, 1, c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = _quant(oc, rng)
    params = cbind_s8._fields(cbind_s8.Conv2dS8Params, dict(
        input=(n, h, w, c), output=(n, h, w, oc), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
        pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
        act_max=127))
    op = Op("conv2d", [_tensor("x", (n, c, h, w), "int8"), _tensor("w", (oc, c, 1, 1), "int8", wt)],
            [_tensor("y", (n, oc, h, w), "int8")], {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                                                    "groups": 1})
    scratch = np.zeros(oc, dtype=np.int8)
    ctx = cbind_s8.Context(scratch.ctypes.data, oc)
    lib = cbind_s8.lib()
    lib.mcu_conv2d_1x1_s8.argtypes = [_P] * 7

    def call(xp, yp):
        return lib.mcu_conv2d_1x1_s8(ctypes.addressof(ctx), ctypes.addressof(params), ctypes.addressof(q.struct),
                                     xp, cbind.ptr(wt), cbind.ptr(bias), yp)
    _check(call, x, op, n * h * w * oc, oc)
    # and the pixel-buffer kernel equals the generic one
    status, generic = cbind_s8.conv2d(x, wt, bias, q, dict(
        input=(n, h, w, c), output=(n, h, w, oc), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
        pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
        act_max=127))
    assert status == 0
    _, placed = _run_placed(call, x, generic.nbytes, -generic.nbytes - 8, 1)
    np.testing.assert_array_equal(placed, generic.reshape(-1).view(np.uint8))


@settings(max_examples=60, deadline=None)
@given(window_case(depthwise=True), st.sampled_from(["max", "avg"]), st.integers(0, 2**31 - 1))
def test_pool_s8_forward_overlap(case, kind: str, seed: int) -> None:
    n, c, h, w, _, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = _out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    params = cbind_s8._fields(cbind_s8.Pool2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, c), kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1],
        pad_top=p[0], pad_left=p[1], act_min=-128, act_max=127))
    op = Op(f"{kind}_pool2d", [_tensor("x", (n, c, h, w), "int8")], [_tensor("y", (n, c, oh, ow), "int8")],
            {"kernel": k, "stride": s, "padding": p, "dilation": d})
    fn = getattr(cbind_s8.lib(), f"mcu_{kind}_pool2d_s8")
    _check(lambda xp, yp: fn(ctypes.byref(params), xp, yp), x, op, n * oh * ow * c, c)


@settings(max_examples=40, deadline=None)
@given(window_case(), st.integers(0, 2**31 - 1))
def test_conv2d_f32_forward_overlap(case, seed: int) -> None:
    n, c, h, w, oc, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = _out_hw(h, w, k, s, p, d)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    wt = rng.standard_normal((oc, k[0], k[1], c)).astype(np.float32)
    params = cbind.Conv2dParams(cbind.shape4(n, h, w, c), cbind.shape4(n, oh, ow, oc), k[0], k[1], s[0], s[1],
                                p[0], p[1], 1, 1, 1, -np.inf, np.inf)
    op = Op("conv2d", [_tensor("x", (n, c, h, w), "float32"), _tensor("w", (oc, c, k[0], k[1]), "float32", wt)],
            [_tensor("y", (n, oc, oh, ow), "float32")], {"stride": s, "padding": p, "dilation": d, "groups": 1})
    fn = cbind.lib().mcu_conv2d_f32
    _check(lambda xp, yp: fn(ctypes.byref(params), xp, cbind.ptr(wt), None, yp), x, op, n * oh * ow * oc * 4,
           oc * 4)


def test_verifier_rejects_a_placement_that_breaks_a_contract() -> None:
    """A window contract allows the output to start at most 448 B after the input starts."""
    bufs = [Buffer("x", 8000, 0, 1), Buffer("y", 8000, 1, 2)]
    contract = [OverlapAllowance("x", "y", ((None, -448),))]
    verify_plan(Plan(bufs, [448, 0], 8448, 16000, overlaps=contract))  # exactly at the bound: fine
    with pytest.raises(PlanError, match="no overlap contract allows it"):
        verify_plan(Plan(bufs, [444, 0], 8444, 16000, overlaps=contract))  # 4 B too close
    with pytest.raises(PlanError):
        verify_plan(Plan(bufs, [0, 448], 8448, 16000, overlaps=contract))  # output after the input
    with pytest.raises(PlanError):  # a contract for one pair does not license another pair
        verify_plan(Plan(bufs, [448, 0], 8448, 16000, overlaps=[OverlapAllowance("y", "x", ((None, -448),))]))
