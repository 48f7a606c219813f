"""Overlap contracts: every kernel whose output may share bytes with its input is run on the host with
its output placed at the extremes its contract allows (and a few placements between), inside one
buffer, and must equal the same kernel on separate buffers bit for bit."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind
import cbind_s8
from mcu.ir import Op
from mcu.plan.planner import Buffer, OverlapAllowance, Plan, PlanError, verify_plan
from overlap import check_overlap, out_hw, tensor, window_case
from s8_properties import (  # noqa: F401  (run here against the portable kernels)
    test_conv2d_s8_forward_overlap, test_depthwise_s8_forward_and_inplace, test_max_pool1d_s8_forward_overlap,
    test_pointwise_s8_both_directions)


@settings(max_examples=60, deadline=None)
@given(window_case(depthwise=True), st.sampled_from(["max", "avg"]), st.integers(0, 2**31 - 1))
def test_pool_s8_forward_overlap(case, kind: str, seed: int) -> None:
    n, c, h, w, _, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    params = cbind_s8._fields(cbind_s8.Pool2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, c), kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1],
        pad_top=p[0], pad_left=p[1], act_min=-128, act_max=127))
    op = Op(f"{kind}_pool2d", [tensor("x", (n, c, h, w), "int8")], [tensor("y", (n, c, oh, ow), "int8")],
            {"kernel": k, "stride": s, "padding": p, "dilation": d})
    fn = getattr(cbind_s8.lib(), f"mcu_{kind}_pool2d_s8")
    check_overlap(lambda xp, yp: fn(ctypes.byref(params), xp, yp), x, op, n * oh * ow * c, c)


@settings(max_examples=40, deadline=None)
@given(window_case(), st.integers(0, 2**31 - 1))
def test_conv2d_f32_forward_overlap(case, seed: int) -> None:
    n, c, h, w, oc, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = out_hw(h, w, k, s, p, d)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    wt = rng.standard_normal((oc, k[0], k[1], c)).astype(np.float32)
    params = cbind.Conv2dParams(cbind.shape4(n, h, w, c), cbind.shape4(n, oh, ow, oc), k[0], k[1], s[0], s[1],
                                p[0], p[1], 1, 1, 1, -np.inf, np.inf)
    op = Op("conv2d", [tensor("x", (n, c, h, w), "float32"), tensor("w", (oc, c, k[0], k[1]), "float32", wt)],
            [tensor("y", (n, oc, oh, ow), "float32")], {"stride": s, "padding": p, "dilation": d, "groups": 1})
    fn = cbind.lib().mcu_conv2d_f32
    check_overlap(lambda xp, yp: fn(ctypes.byref(params), xp, cbind.ptr(wt), None, yp), x, op, n * oh * ow * oc * 4,
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
