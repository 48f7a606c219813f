"""The int8 kernels' property tests that run against every build of the kernels: the portable library
(tests/kernels/test_kernels_s8.py, tests/plan/test_memory_contracts.py), the DSP paths emulated on the
host (test_kernels_s8_opt.py) and the plain loops of cores without a 64-bit multiply-accumulate
(test_speed_plain_m0.py). A module runs them by importing them; its own `lib` fixture decides which
build cbind_s8 calls."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cbind
import cbind_s8
import cbind_s8 as cb
from cbind import MCU_OK
from mcu.plan.contracts import overlap_contracts
from mcu.ir import Op
from mcu.reference import arith
from mcu.reference import elementwise
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8
from mcu.reference.elementwise import broadcast_params
from mcu.reference.pool import mean_hw_s8
from overlap import VoidP, check_overlap, out_hw, random_quant, run_placed, tensor, window_case
from s8_cases import (EXACT, act_bounds, assert_equal, bias_kinds, biases, binary_cases, conv_cases, conv_shift_centres,
                      data_modes, int8_data, multipliers, per_channel, pool1d_cases, pool_cases, run_binary, run_pool,
                      run_pool1d, shift_for,
                      shifts, weight_modes, weights, zero_points)


@EXACT
@given(conv_cases())
def test_conv2d_s8(lib, case):
    rng = np.random.default_rng(case["seed"])
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    cin, cout = g * icg, g * ocg
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = weights(rng, (cout, case["kh"], case["kw"], icg), case["wmode"])
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"] * icg), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], groups=g, input_offset=-case["in_zp"],
        output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1],
    )
    q = cb.Quant(m, s, cout)
    status, out = cb.conv2d(x, w, b, q, params)
    assert status == MCU_OK
    assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@EXACT
@given(conv_cases(depthwise=True))
def test_depthwise_conv2d_s8(lib, case):
    rng = np.random.default_rng(case["seed"])
    cin, cm = case["channels"], case["ch_mult"]
    cout = cin * cm
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = weights(rng, (case["kh"], case["kw"], cout), case["wmode"])
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"]), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), ch_mult=cm, kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], input_offset=-case["in_zp"], output_offset=case["out_zp"],
        act_min=case["act"][0], act_max=case["act"][1],
    )
    q = cb.Quant(m, s, cout)
    status, out = cb.depthwise_conv2d(x, w, b, q, params)
    assert status == MCU_OK
    assert_equal(out, depthwise_conv2d_s8(x, w, b, m, s, **params))


@EXACT
@given(batch=st.integers(1, 4), fin=st.integers(1, 70), fout=st.integers(1, 20), in_zp=zero_points,
       out_zp=zero_points, act=act_bounds(), bias=bias_kinds, shift=conv_shift_centres,
       pc=st.sampled_from(["same", "varied"]), data=data_modes, wmode=weight_modes,
       seed=st.integers(0, 2**32 - 1))
def test_linear_s8(lib, batch, fin, fout, in_zp, out_zp, act, bias, shift, pc, data, wmode, seed):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (batch, fin), data)
    w = weights(rng, (fout, fin), wmode)
    b = biases(rng, fout, bias)
    m, s = per_channel(rng, fout, shift_for(shift, fin), pc)
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = cb.linear(x, w, b, cb.Quant(m, s, fout), params)
    assert status == MCU_OK
    assert_equal(out, linear_s8(x, w, b, m, s, **params))


@EXACT
@given(binary_cases("add"))
def test_add_s8(lib, case):
    run_binary("add", case)


@EXACT
@given(binary_cases("sub"))
def test_sub_s8(lib, case):
    run_binary("sub", case)


@EXACT
@given(binary_cases("mul"))
def test_mul_s8(lib, case):
    run_binary("mul", case)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("which", ["a", "b"])
def test_binary_s8_in_place(lib, op, which):
    rng = np.random.default_rng(7)
    a = int8_data(rng, (3, 4, 5), "mixed")
    b = int8_data(rng, (1, 4, 1), "mixed") if which == "a" else int8_data(rng, (3, 4, 5), "mixed")
    if which == "b":
        a = int8_data(rng, (5,), "mixed")
    qp = (arith.mul_params if op == "mul" else arith.add_params)(0.05, 0.02, 0.07, zp_a=-3, zp_b=10, zp_out=-128)
    params = dict(qp, act_min=-128, act_max=127, **broadcast_params(a.shape, b.shape))
    expected = getattr(elementwise, f"{op}_s8")(a, b, **params)
    target = a if which == "a" else b
    status, out = cb.binary(op, a, b, params, out=target)
    assert status == MCU_OK and out is target
    assert_equal(target, expected)


@EXACT
@given(pool_cases())
def test_max_pool2d_s8(lib, case):
    run_pool("max", case)


@EXACT
@given(pool1d_cases())
def test_max_pool1d_s8(lib, case):
    run_pool1d(case)


@EXACT
@given(outer=st.integers(1, 3), rows=st.integers(1, 19), cols=st.integers(1, 19), seed=st.integers(0, 2**32 - 1))
def test_transpose_s8(lib, outer, rows, cols, seed):
    x = np.random.default_rng(seed).integers(-128, 128, (outer, rows, cols), dtype=np.int8)
    out = np.zeros((outer, cols, rows), dtype=np.int8)
    assert cb.lib().mcu_transpose_s8(outer, rows, cols, cbind.ptr(x), cbind.ptr(out)) == MCU_OK
    assert_equal(out, np.ascontiguousarray(x.transpose(0, 2, 1)))
    assert cb.lib().mcu_transpose_s8(outer, rows, cols, cbind.ptr(x), cbind.ptr(x)) != MCU_OK  # no overlap


def test_max_pool1d_s8_refuses_taller_windows(lib):
    x = np.zeros((1, 2, 4, 4), dtype=np.int8)
    params = dict(input=x.shape, output=(1, 1, 2, 4), kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0,
                  pad_left=0, act_min=-128, act_max=127)
    status, _ = cb.max_pool1d(x, params)
    assert status == cbind.MCU_ERR_UNSUPPORTED


@EXACT
@given(n=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 8), in_zp=zero_points,
       out_zp=zero_points, m=multipliers, s=st.one_of(shifts, st.integers(-12, -4)), act=act_bounds(),
       data=data_modes, seed=st.integers(0, 2**32 - 1))
def test_mean_hw_s8(lib, n, h, w, c, in_zp, out_zp, m, s, act, data, seed):
    x = int8_data(np.random.default_rng(seed), (n, h, w, c), data)
    params = dict(input=x.shape, input_offset=-in_zp, multiplier=m, shift=s, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = cb.mean_hw(x, params)
    assert status == MCU_OK
    assert_equal(out, mean_hw_s8(x, **params))


@settings(max_examples=60, deadline=None)
@given(window_case(), st.integers(0, 2**31 - 1))
def test_conv2d_s8_forward_overlap(case, seed: int) -> None:
    n, c, h, w, oc, k, s, p, d = case
    assume(not (k == (1, 1) and s == (1, 1)))  # int8 pointwise runs the pixel-buffer kernel (tested below)
    rng = np.random.default_rng(seed)
    oh, ow = out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (oc, k[0], k[1], c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = random_quant(oc, rng)
    params = cbind_s8._fields(cbind_s8.Conv2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, oc), kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1],
        pad_top=p[0], pad_left=p[1], dilation_h=1, dilation_w=1, groups=1, input_offset=3, output_offset=-5,
        act_min=-128, act_max=127))
    op = Op("conv2d", [tensor("x", (n, c, h, w), "int8"), tensor("w", (oc, c, k[0], k[1]), "int8", wt)],
            [tensor("y", (n, oc, oh, ow), "int8")], {"stride": s, "padding": p, "dilation": d, "groups": 1})

    def call(xp, yp):
        return cbind_s8.lib().mcu_conv2d_s8(None, ctypes.byref(params), ctypes.byref(q.struct), xp,
                                            cbind.ptr(wt), cbind.ptr(bias), yp)
    check_overlap(call, x, op, n * oh * ow * oc, oc)


@settings(max_examples=60, deadline=None)
@given(window_case(depthwise=True), st.integers(0, 2**31 - 1))
def test_max_pool1d_s8_forward_overlap(case, seed: int) -> None:
    """mcu_max_pool1d_s8 keeps the window contract the planner gives every max pooling (mcu/plan/contracts.py):
    an output placed anywhere the contract allows over its input gives the same bytes as one apart."""
    n, c, h, w, _, k, s, p, _ = case
    k, p = (1, k[1]), (0, p[1])
    oh, ow = out_hw(h, w, k, s, p, (1, 1))
    x = np.random.default_rng(seed).integers(-128, 128, (n, h, w, c), dtype=np.int8)
    params = cbind_s8._fields(cbind_s8.Pool2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, c), kernel_h=1, kernel_w=k[1], stride_h=s[0], stride_w=s[1],
        pad_top=0, pad_left=p[1], act_min=-128, act_max=127))
    op = Op("max_pool2d", [tensor("x", (n, c, h, w), "int8")], [tensor("y", (n, c, oh, ow), "int8")],
            {"kernel": k, "stride": s, "padding": p, "dilation": (1, 1)})

    def call(xp, yp):
        return cbind_s8.lib().mcu_max_pool1d_s8(ctypes.byref(params), xp, yp)
    check_overlap(call, x, op, n * oh * ow * c, c)


@settings(max_examples=60, deadline=None)
@given(window_case(depthwise=True), st.integers(0, 2**31 - 1))
def test_depthwise_s8_forward_and_inplace(case, seed: int) -> None:
    n, c, h, w, _, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (k[0], k[1], c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, c).astype(np.int32)
    q = random_quant(c, rng)
    fields = dict(input=(n, h, w, c), output=(n, oh, ow, c), ch_mult=1, kernel_h=k[0], kernel_w=k[1],
                  stride_h=s[0], stride_w=s[1], pad_top=p[0], pad_left=p[1], dilation_h=1, dilation_w=1,
                  input_offset=-7, output_offset=11, act_min=-100, act_max=120)
    params = cbind_s8._fields(cbind_s8.DepthwiseConv2dS8Params, fields)
    op = Op("depthwise_conv2d", [tensor("x", (n, c, h, w), "int8"), tensor("w", (c, 1, k[0], k[1]), "int8", wt)],
            [tensor("y", (n, c, oh, ow), "int8")],
            {"stride": s, "padding": p, "dilation": d, "groups": c, "ch_mult": 1})
    ring = np.zeros((p[0] + 1) * w * c + 8, dtype=np.int8)
    ctx = cbind_s8.Context(ring.ctypes.data, ring.size)
    lib = cbind_s8.lib()
    lib.mcu_depthwise_conv2d_s8_inplace.argtypes = [VoidP, VoidP, VoidP, VoidP, VoidP, VoidP]

    def call(xp, yp):
        if xp.value == yp.value:  # the in-place placement runs the ring-buffer variant, as the emitter does
            return lib.mcu_depthwise_conv2d_s8_inplace(ctypes.addressof(ctx), ctypes.addressof(params),
                                                       ctypes.addressof(q.struct), yp, cbind.ptr(wt),
                                                       cbind.ptr(bias))
        return lib.mcu_depthwise_conv2d_s8(None, ctypes.byref(params), ctypes.byref(q.struct), xp, cbind.ptr(wt),
                                           cbind.ptr(bias), yp)
    check_overlap(call, x, op, n * oh * ow * c, c)
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
    q = random_quant(oc, rng)
    params = cbind_s8._fields(cbind_s8.Conv2dS8Params, dict(
        input=(n, h, w, c), output=(n, h, w, oc), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
        pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
        act_max=127))
    op = Op("conv2d", [tensor("x", (n, c, h, w), "int8"), tensor("w", (oc, c, 1, 1), "int8", wt)],
            [tensor("y", (n, oc, h, w), "int8")], {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                                                    "groups": 1})
    scratch = np.zeros(oc, dtype=np.int8)
    ctx = cbind_s8.Context(scratch.ctypes.data, oc)
    lib = cbind_s8.lib()
    lib.mcu_conv2d_1x1_s8.argtypes = [VoidP] * 7

    def call(xp, yp):
        return lib.mcu_conv2d_1x1_s8(ctypes.addressof(ctx), ctypes.addressof(params), ctypes.addressof(q.struct),
                                     xp, cbind.ptr(wt), cbind.ptr(bias), yp)
    check_overlap(call, x, op, n * h * w * oc, oc)
    # and the pixel-buffer kernel equals the generic one
    status, generic = cbind_s8.conv2d(x, wt, bias, q, dict(
        input=(n, h, w, c), output=(n, h, w, oc), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
        pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
        act_max=127))
    assert status == 0
    _, placed = run_placed(call, x, generic.nbytes, -generic.nbytes - 8, 1)
    np.testing.assert_array_equal(placed, generic.reshape(-1).view(np.uint8))
