"""The portable int8 C kernels against the bit-exact Python reference (mcu.reference's family modules).

Every kernel must equal the reference bit for bit over hypothesis-drawn shapes,
strides, paddings, zero-points, multipliers and shifts, extremes included.
The reference itself is checked against float semantics (PyTorch on
dequantized values, torch's quantize/dequantize ops) where that is meaningful,
and mcu.reference.arith against TFLite's parameter math.
"""

from __future__ import annotations

import ctypes
import math
import shutil

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed ops)
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb  # noqa: E402
from device_objects import device_object, front_end_errors, symbols  # noqa: E402
from cbind import (  # noqa: E402
    MCU_ERR_INVALID_ARG,
    MCU_ERR_NULL_POINTER,
    MCU_ERR_SHAPE,
    MCU_ERR_UNSUPPORTED,
    MCU_OK,
    ptr,
)
from mcu.reference import arith  # noqa: E402
from mcu.reference import elementwise  # noqa: E402
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8  # noqa: E402
from mcu.reference.elementwise import add_s8, broadcast_params, clamp_s8, lut_s8, requantize_s8  # noqa: E402
from mcu.reference.encoding import dequantize_s8_f32, inv_scale, quantize_f32_s8  # noqa: E402
from mcu.reference.norm import exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1, softmax_s8  # noqa: E402
from mcu.reference.pool import avg_pool2d_s8, max_pool2d_s8, mean_hw_s8  # noqa: E402
from s8_cases import (EXACT, FLOAT, act_bounds, assert_equal, data_modes, int8_data, multipliers, pool_cases, run_pool,
                      shifts, zero_points)
from s8_properties import (  # noqa: F401  (run here against the portable kernels)
    test_add_s8, test_binary_s8_in_place, test_conv2d_s8, test_depthwise_conv2d_s8, test_linear_s8, test_max_pool1d_s8,
    test_max_pool1d_s8_refuses_taller_windows, test_max_pool2d_s8, test_transpose_s8,
    test_mean_hw_s8, test_mul_s8, test_sub_s8)



@pytest.fixture(scope="module", autouse=True)
def _single_thread_torch():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lib():
    cb.check_layout()
    return cb.lib()


# --------------------------------------------------------------------------
# convolution


def test_get_buffer_size_is_zero_and_ctx_optional(lib):
    x = np.zeros((1, 3, 3, 2), dtype=np.int8)
    w = np.ones((2, 1, 1, 2), dtype=np.int8)
    q = cb.Quant(2**30, -1, 2)
    params = dict(input=x.shape, output=(1, 3, 3, 2), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1,
                  pad_top=0, pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0,
                  act_min=-128, act_max=127)
    p = cb._fields(cb.Conv2dS8Params, params)
    assert lib.mcu_conv2d_s8_get_buffer_size(ctypes.byref(p)) == 0
    dw = cb._fields(cb.DepthwiseConv2dS8Params, dict(params, ch_mult=1))
    assert lib.mcu_depthwise_conv2d_s8_get_buffer_size(ctypes.byref(dw)) == 0
    lp = cb._fields(cb.LinearS8Params, dict(batch=1, in_features=2, out_features=2))
    assert lib.mcu_linear_s8_get_buffer_size(ctypes.byref(lp)) == 0
    scratch = np.zeros(16, dtype=np.int8)
    ctx = cb.Context(scratch.ctypes.data, 16)
    for c in (None, ctypes.byref(ctx)):
        status, out = cb.conv2d(x, w, None, q, params, ctx=c)
        assert status == MCU_OK


# --------------------------------------------------------------------------
# elementwise binary


def test_binary_s8_reference_strides_equal_numpy_broadcasting():
    rng = np.random.default_rng(3)
    a = int8_data(rng, (2, 1, 4), "uniform")
    b = int8_data(rng, (3, 1), "uniform")
    qp = dict(arith.add_params(0.1, 0.2, 0.3, zp_a=1, zp_b=-2, zp_out=3), act_min=-128, act_max=127)
    bp = broadcast_params(a.shape, b.shape)
    assert bp == dict(rank=3, out_shape=[2, 3, 4], a_strides=[4, 0, 1], b_strides=[0, 1, 0])
    assert_equal(add_s8(a, b, **qp, **bp), add_s8(a, b, **qp))


# --------------------------------------------------------------------------
# pooling and mean


@EXACT
@given(pool_cases())
def test_avg_pool2d_s8(lib, case):
    run_pool("avg", case)


# --------------------------------------------------------------------------
# softmax


@st.composite
def softmax_cases(draw):
    outer, inner = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    axis = draw(st.one_of(st.integers(1, 300), st.integers(1, 12)))
    if draw(st.integers(0, 3)):
        beta = draw(st.sampled_from([1.0, 0.5, 2.0, 10.0])) if draw(st.booleans()) else draw(st.floats(0.05, 20))
        scale = draw(st.floats(1e-3, 2.0))
        assume(beta * scale * 2**26 > 1.0)
        mult, left, diff_min = arith.softmax_params(beta, scale)
    else:
        mult = draw(multipliers)
        left = draw(st.integers(0, 31))
        diff_min = draw(st.one_of(st.integers(-255, 0), st.just(-(2**31) + 1), st.just(0)))
    return dict(outer=outer, axis=axis, inner=inner, input_multiplier=mult, input_left_shift=left,
                diff_min=diff_min, data=draw(data_modes), seed=draw(st.integers(0, 2**32 - 1)),
                in_place=draw(st.booleans()))


@EXACT
@given(softmax_cases())
def test_softmax_s8(lib, case):
    x = int8_data(np.random.default_rng(case["seed"]), (case["outer"], case["axis"], case["inner"]), case["data"])
    params = {k: case[k] for k in ("outer", "axis", "inner", "input_multiplier", "input_left_shift", "diff_min")}
    expected = softmax_s8(x, **params)
    if case["in_place"]:
        buf = x.copy()
        status, out = cb.softmax(buf, params, out=buf)
    else:
        status, out = cb.softmax(x, params)
    assert status == MCU_OK
    assert_equal(out, expected)


@pytest.mark.parametrize("beta_scale", [(1.0, 1 / 16), (1.0, 0.1), (2.0, 0.03), (0.5, 0.2), (1.0, 0.004)])
def test_softmax_s8_many_rows(lib, beta_scale):
    # Tens of thousands of outputs per call, so that outputs lying next to a
    # rounding boundary (where the last bits of exp and 1/(1+x) matter) occur.
    rng = np.random.default_rng(int(beta_scale[1] * 1e4))
    mult, left, diff_min = arith.softmax_params(*beta_scale)
    for axis in (2, 3, 5, 10, 33):
        x = int8_data(rng, (20000 // axis, axis, 1), "uniform")
        params = dict(outer=x.shape[0], axis=axis, inner=1, input_multiplier=mult, input_left_shift=left,
                      diff_min=diff_min)
        status, out = cb.softmax(x, params)
        assert status == MCU_OK
        assert_equal(out, softmax_s8(x, **params))


@pytest.mark.parametrize("axis", [2047, 2048, 3000, 4095])
def test_softmax_s8_long_rows(lib, axis):
    # Sums of 2^30 and more: the output shift passes 31 and everything rounds to the zero-point.
    rng = np.random.default_rng(axis)
    for x in (np.zeros((1, axis, 1), dtype=np.int8), int8_data(rng, (1, axis, 1), "uniform")):
        params = dict(outer=1, axis=axis, inner=1, **dict(zip(("input_multiplier", "input_left_shift", "diff_min"),
                                                               arith.softmax_params(1.0, 0.01))))
        status, out = cb.softmax(x, params)
        assert status == MCU_OK
        assert_equal(out, softmax_s8(x, **params))


# --------------------------------------------------------------------------
# pointwise


sizes = st.one_of(st.integers(0, 8), st.integers(0, 300))


@EXACT
@given(size=sizes, data=data_modes, in_place=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_lut_s8(lib, size, data, in_place, seed):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (size,), data)
    table = int8_data(rng, (256,), "uniform")
    expected = lut_s8(x, table)
    out = x if in_place else np.zeros_like(x)
    assert lib.mcu_lut_s8(size, ptr(table), ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, expected)


@EXACT
@given(size=sizes, in_zp=zero_points, m=multipliers, s=shifts, out_zp=zero_points, act=act_bounds(),
       data=data_modes, in_place=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_requantize_s8(lib, size, in_zp, m, s, out_zp, act, data, in_place, seed):
    x = int8_data(np.random.default_rng(seed), (size,), data)
    if size == 256:
        x = np.arange(-128, 128, dtype=np.int8)
    kw = dict(input_offset=-in_zp, multiplier=m, shift=s, output_offset=out_zp, act_min=act[0], act_max=act[1])
    expected = requantize_s8(x, **kw)
    out = x if in_place else np.zeros_like(x)
    assert lib.mcu_requantize_s8(size, -in_zp, m, s, out_zp, act[0], act[1], ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, expected)


@EXACT
@given(in_zp=zero_points, m=multipliers, s=shifts, out_zp=zero_points)
def test_requantize_s8_every_input(lib, in_zp, m, s, out_zp):
    x = np.arange(-128, 128, dtype=np.int8)
    out = np.zeros_like(x)
    assert lib.mcu_requantize_s8(256, -in_zp, m, s, out_zp, -128, 127, ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, requantize_s8(x, input_offset=-in_zp, multiplier=m, shift=s, output_offset=out_zp))


@EXACT
@given(size=sizes, act=act_bounds(), data=data_modes, in_place=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_clamp_s8(lib, size, act, data, in_place, seed):
    x = int8_data(np.random.default_rng(seed), (size,), data)
    expected = clamp_s8(x, act_min=act[0], act_max=act[1])
    out = x if in_place else np.zeros_like(x)
    assert lib.mcu_clamp_s8(size, act[0], act[1], ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, expected)


scales = st.one_of(st.floats(1e-4, 10.0), st.sampled_from([1.0, 0.1, 1 / 3, 1 / 256, 0.0078125, 2.5e-3]))


def float_inputs(rng, size, scale, zp, mode):
    if mode == "ties":
        k = rng.integers(-200, 200, size=size)
        return ((k + 0.5) * np.float32(scale)).astype(np.float32)
    if mode == "exact_ties":
        # v = x * inv_scale is exactly k + 0.5 when scale is a power of two
        k = rng.integers(-200, 200, size=size)
        return ((k + 0.5) / np.float32(1 / scale)).astype(np.float32)
    if mode == "wide":
        return (rng.standard_normal(size) * 300 * scale).astype(np.float32)
    if mode == "special":
        pool = np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45, 0.5, -0.5, 1.5, -2.5,
                         np.float32(scale) * 127.5, np.float32(scale) * -128.5, 8388608.0, -8388609.0],
                        dtype=np.float32)
        return rng.choice(pool, size=size)
    return (rng.standard_normal(size) * 64 * scale + zp * 0).astype(np.float32)


float_modes = st.sampled_from(["normal", "ties", "exact_ties", "wide", "special"])


@EXACT
@given(size=sizes, scale=scales, zp=zero_points, mode=float_modes, in_place=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_quantize_f32_s8(lib, size, scale, zp, mode, in_place, seed):
    x = float_inputs(np.random.default_rng(seed), size, scale, zp, mode)
    inv = inv_scale(scale)
    expected = quantize_f32_s8(x, inv_scale=inv, zero_point=zp)
    # torch's own op, the contract for float inputs
    torch_q = torch.ops.quantized_decomposed.quantize_per_tensor(torch.from_numpy(x), scale, zp, -128, 127,
                                                                  torch.int8)
    assert_equal(expected, torch_q.numpy())
    if in_place:
        buf = x.copy()
        assert lib.mcu_quantize_f32_s8(size, float(inv), zp, ptr(buf), ptr(buf)) == MCU_OK
        out = buf.view(np.int8)[:size]
    else:
        out = np.zeros(size, dtype=np.int8)
        assert lib.mcu_quantize_f32_s8(size, float(inv), zp, ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, expected)


def test_quantize_f32_s8_nan_is_zero_point(lib):
    x = np.array([np.nan, -np.nan, 1.0], dtype=np.float32)
    out = np.zeros(3, dtype=np.int8)
    assert lib.mcu_quantize_f32_s8(3, 1.0, -7, ptr(x), ptr(out)) == MCU_OK
    assert out.tolist() == [-7, -7, -6]
    assert_equal(out, quantize_f32_s8(x, inv_scale=1.0, zero_point=-7))


@EXACT
@given(size=sizes, scale=scales, zp=zero_points, data=data_modes, in_place=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_dequantize_s8_f32(lib, size, scale, zp, data, in_place, seed):
    x = int8_data(np.random.default_rng(seed), (size,), data)
    expected = dequantize_s8_f32(x, scale=scale, zero_point=zp)
    torch_x = torch.ops.quantized_decomposed.dequantize_per_tensor(torch.from_numpy(x), scale, zp, -128, 127,
                                                                    torch.int8)
    assert np.array_equal(expected, torch_x.numpy())
    if in_place:
        buf = np.zeros(size, dtype=np.float32)
        buf.view(np.int8)[:size] = x
        assert lib.mcu_dequantize_s8_f32(size, float(np.float32(scale)), zp, ptr(buf), ptr(buf)) == MCU_OK
        out = buf
    else:
        out = np.zeros(size, dtype=np.float32)
        assert lib.mcu_dequantize_s8_f32(size, float(np.float32(scale)), zp, ptr(x), ptr(out)) == MCU_OK
    assert out.tobytes() == expected.tobytes()


# --------------------------------------------------------------------------
# arith: TFLite parameter math


def test_quantize_multiplier_cases():
    qm = arith.quantize_multiplier
    assert qm(0.0) == (0, 0)
    assert qm(1.0) == (2**30, 1)
    assert qm(0.5) == (2**30, 0)
    assert qm(0.75) == (3 * 2**29, 0)
    assert qm(2.0**-31) == (2**30, -30)
    assert qm(2.0**-32) == (2**30, -31)
    assert qm(2.0**-33) == (0, 0)
    assert qm(1 - 2.0**-40) == (2**30, 1)  # rounds up to 2^31 -> halved, exponent + 1
    assert qm(3.0) == (3 * 2**29, 2)
    assert qm(2.0**29 * 1.5) == (3 * 2**29, 30)
    assert qm(2.0**30) == (2**31 - 1, 30)  # beyond the shift range: saturated
    # std::round: half away from zero
    assert qm((2**30 + 0.5) / 2**31) == (2**30 + 1, 0)
    with pytest.raises(ValueError):
        qm(-1.0)
    with pytest.raises(ValueError):
        qm(float("nan"))


@settings(max_examples=300, deadline=None)
@given(real=st.floats(2.0**-31, 2.0**29, allow_nan=False))
def test_quantize_multiplier_roundtrip(real):
    m, s = arith.quantize_multiplier(real)
    assert 2**30 <= m <= 2**31 - 1 and -31 <= s <= 30
    assert abs(m * 2.0 ** (s - 31) - real) <= real * 2.0**-31


def test_softmax_params_match_tflite():
    # beta * scale * 2^26 = 2^22 -> multiplier 2^30, left shift 23, radius floor(31 * 2^26 / 2^23) = 248
    assert arith.softmax_params(1.0, 1 / 16) == (2**30, 23, -248)
    # Capped at 2^31 - 1: left shift 31, only the maximum counts
    assert arith.softmax_params(1.0, 100.0) == (2**31 - 1, 31, 0)
    m, left, diff_min = arith.softmax_params(1.0, 0.1)
    assert m * 2.0 ** (left - 31) == pytest.approx(0.1 * 2**26, rel=1e-9)
    assert diff_min == -math.floor(31 * 2**26 / 2**left)
    with pytest.raises(ValueError):
        arith.softmax_params(1.0, 1e-9)


def test_add_params_match_tflite():
    p = arith.add_params(0.1, 0.05, 0.2, zp_a=3, zp_b=-4, zp_out=5)
    assert p["left_shift"] == 20 and p["a_offset"] == -3 and p["b_offset"] == 4 and p["output_offset"] == 5
    assert (p["a_multiplier"], p["a_shift"]) == arith.quantize_multiplier(0.5)
    assert (p["b_multiplier"], p["b_shift"]) == arith.quantize_multiplier(0.25)
    assert (p["out_multiplier"], p["out_shift"]) == arith.quantize_multiplier(0.2 / (2**20 * 0.2))


def test_rounding_primitives():
    rdbp = arith.rounding_divide_by_pot
    assert rdbp([5, -5, 6, -6, 7, -7], 1).tolist() == [3, -3, 3, -3, 4, -4]  # ties away from zero
    assert rdbp([-(2**31), 2**31 - 1], 31).tolist() == [-1, 1]
    srdhm = arith.saturating_rounding_doubling_high_mul
    rdhm = arith.rounding_doubling_high_mul
    assert srdhm(-(2**31), -(2**31)) == 2**31 - 1 and rdhm(-(2**31), -(2**31)) == 2**31 - 1
    # a * b = +-2^30 is a tie (+-0.5): both spellings round toward +infinity
    assert srdhm(-(2**15), 2**15) == 0 and rdhm(-(2**15), 2**15) == 0
    assert srdhm(2**15, 2**15) == 1 and rdhm(2**15, 2**15) == 1
    assert srdhm(-(2**15) - 1, 2**15) == -1
    rng = np.random.default_rng(1)
    a = np.concatenate([rng.integers(-(2**31), 2**31, 100000), rng.integers(-(2**16), 2**16, 1000)])
    b = np.concatenate([rng.integers(-(2**31), 2**31, 100000), rng.integers(-(2**16), 2**16, 1000)])
    edges = np.array([-(2**31), 2**31 - 1, 0, 1, -1, 2**15, -(2**15), 2**30, -(2**30)])
    ea, eb = np.meshgrid(edges, edges)
    a, b = np.concatenate([a, ea.ravel()]), np.concatenate([b, eb.ravel()])
    assert np.array_equal(srdhm(a, b), rdhm(a, b))
    assert arith.requantize(100, 2**30, 1).tolist() == 100  # x * 0.5 * 2
    assert arith.requantize(-3, 2**30, -1).tolist() == -1  # -0.75 -> -1
    # 2^30 * 2^30 saturates to 2^31 - 1, then * (2^31 - 1) / 2^31 rounds to 2^31 - 2
    assert arith.requantize(2**30, 2**31 - 1, 30).tolist() == 2**31 - 2


def test_lut_table():
    t = arith.lut_table(np.tanh, 0.05, 3, 1 / 128, 0)
    q = np.arange(-128, 128)
    expected = np.clip(np.rint(np.tanh(0.05 * (q - 3)) * 128), -128, 127)
    assert t.dtype == np.int8 and t.shape == (256,)
    assert np.array_equal(t, expected)
    assert np.array_equal(arith.lut_table(torch.sigmoid, 0.1, 0, 1 / 256, -128),
                          np.clip(np.rint(torch.sigmoid(torch.from_numpy(0.1 * q.astype(np.float64))).numpy() * 256)
                                  - 128, -128, 127))


def test_exp_on_negative_values_is_exp():
    a = np.concatenate([np.arange(-(2**31), 0, 2**19 + 12345), [-1, 0, -(2**24), -(2**26)]])
    e = exp_on_negative_values(a)
    assert e.min() >= 0 and e.max() <= 2**31 - 1
    want = np.exp(a / 2.0**26) * 2**31
    assert np.abs(e - want).max() < 2**31 * 1e-6


def test_one_over_one_plus_x():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.integers(0, 2**31, size=200000), [0, 1, 2**30, 2**31 - 1]])
    r = one_over_one_plus_x_for_x_in_0_1(a)
    assert r.min() >= 2**30 - 8 and r.max() <= 2**31 - 1
    assert np.abs(r / 2**31 - 1 / (1 + a / 2**31)).max() < 1e-8


# --------------------------------------------------------------------------
# the reference against float semantics


def _q(x, scale, zp):
    return np.clip(np.rint(x / scale) + zp, -128, 127).astype(np.int8)


def _dq(q, scale, zp):
    return (q.astype(np.float64) - zp) * scale


@FLOAT
@given(depthwise=st.booleans(), k=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 1),
       in_zp=zero_points, out_zp=st.integers(-20, 20), seed=st.integers(0, 2**32 - 1))
def test_conv_reference_matches_float(depthwise, k, stride, pad, in_zp, out_zp, seed):
    rng = np.random.default_rng(seed)
    cin = 3
    cout = 6 if depthwise else 5
    s_in = float(rng.uniform(0.01, 0.1))
    x = rng.integers(-128, 128, size=(1, 7, 6, cin)).astype(np.int8)
    wf = rng.standard_normal((cout, cin if not depthwise else 1, k, k))
    s_w = np.abs(wf).reshape(cout, -1).max(axis=1) / 127
    wq = np.clip(np.rint(wf / s_w[:, None, None, None]), -127, 127).astype(np.int8)
    bias_f = rng.standard_normal(cout)
    bias_q = np.rint(bias_f / (s_in * s_w)).astype(np.int32)
    xf = torch.from_numpy(_dq(x, s_in, in_zp)).permute(0, 3, 1, 2)
    wdq = torch.from_numpy(wq.astype(np.float64) * s_w[:, None, None, None])
    bdq = torch.from_numpy(bias_q * s_in * s_w)
    yf = F.conv2d(xf, wdq, bdq, stride=stride, padding=pad, groups=cin if depthwise else 1)
    yf = yf.permute(0, 2, 3, 1).numpy()
    s_out = float(np.abs(yf).max() / 100 + 1e-6)
    m, s = arith.quantize_multipliers(s_in * s_w / s_out)
    common = dict(stride_h=stride, stride_w=stride, pad_top=pad, pad_left=pad, input_offset=-in_zp,
                  output_offset=out_zp)
    if depthwise:
        w_phys = np.ascontiguousarray(wq[:, 0].transpose(1, 2, 0))  # [kh][kw][out_c]
        got = depthwise_conv2d_s8(x, w_phys, bias_q, m, s, ch_mult=2, **common)
    else:
        got = conv2d_s8(x, np.ascontiguousarray(wq.transpose(0, 2, 3, 1)), bias_q, m, s, **common)
    want = _q(yf, s_out, out_zp)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


@FLOAT
@given(seed=st.integers(0, 2**32 - 1), in_zp=zero_points, out_zp=st.integers(-20, 20))
def test_linear_reference_matches_float(seed, in_zp, out_zp):
    rng = np.random.default_rng(seed)
    s_in = float(rng.uniform(0.01, 0.1))
    x = rng.integers(-128, 128, size=(3, 40)).astype(np.int8)
    wf = rng.standard_normal((7, 40))
    s_w = np.abs(wf).max(axis=1) / 127
    wq = np.clip(np.rint(wf / s_w[:, None]), -127, 127).astype(np.int8)
    yf = _dq(x, s_in, in_zp) @ (wq * s_w[:, None]).T
    s_out = float(np.abs(yf).max() / 100 + 1e-6)
    m, s = arith.quantize_multipliers(s_in * s_w / s_out)
    got = linear_s8(x, wq, None, m, s, input_offset=-in_zp, output_offset=out_zp)
    assert np.abs(got.astype(int) - _q(yf, s_out, out_zp).astype(int)).max() <= 1


@FLOAT
@given(op=st.sampled_from(["add", "sub", "mul"]), s_a=st.floats(0.005, 0.5), s_b=st.floats(0.005, 0.5),
       zp_a=zero_points, zp_b=zero_points, zp_out=st.integers(-50, 50), seed=st.integers(0, 2**32 - 1))
def test_binary_reference_matches_float(op, s_a, s_b, zp_a, zp_b, zp_out, seed):
    rng = np.random.default_rng(seed)
    a = int8_data(rng, (64,), "uniform")
    b = int8_data(rng, (64,), "uniform")
    fa, fb = _dq(a, s_a, zp_a), _dq(b, s_b, zp_b)
    yf = {"add": fa + fb, "sub": fa - fb, "mul": fa * fb}[op]
    s_out = float(np.abs(yf).max() / 120 + 1e-6)
    qp = (arith.mul_params if op == "mul" else arith.add_params)(s_a, s_b, s_out, zp_a=zp_a, zp_b=zp_b,
                                                                   zp_out=zp_out)
    got = getattr(elementwise, f"{op}_s8")(a, b, **qp)
    assert np.abs(got.astype(int) - _q(yf, s_out, zp_out).astype(int)).max() <= 1


@FLOAT
@given(beta=st.floats(0.2, 5.0), scale=st.floats(0.01, 0.3), axis=st.integers(1, 300), zp=zero_points,
       seed=st.integers(0, 2**32 - 1))
def test_softmax_reference_matches_float(beta, scale, axis, zp, seed):
    x = int8_data(np.random.default_rng(seed), (2, axis), "uniform")
    mult, left, diff_min = arith.softmax_params(beta, scale)
    got = softmax_s8(x, input_multiplier=mult, input_left_shift=left, diff_min=diff_min)
    yf = torch.softmax(torch.from_numpy(_dq(x, scale, zp)) * beta, dim=-1).numpy()
    want = _q(yf, 1 / 256, -128)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


@FLOAT
@given(k=st.integers(1, 4), pad=st.integers(0, 1), seed=st.integers(0, 2**32 - 1))
def test_pool_and_mean_reference_match_float(k, pad, seed):
    assume(pad < k)
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (1, 7, 6, 3), "uniform")
    xt = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    geo = dict(kernel_h=k, kernel_w=k, stride_h=k, stride_w=k, pad_top=pad, pad_left=pad)
    maxf = F.max_pool2d(xt, k, k, pad) if pad <= k // 2 else None
    if maxf is not None:
        got = max_pool2d_s8(x, **geo)
        assert np.array_equal(got, maxf.permute(0, 2, 3, 1).numpy().astype(np.int8))
        avgf = F.avg_pool2d(xt, k, k, pad, count_include_pad=False).permute(0, 2, 3, 1).numpy()
        got = avg_pool2d_s8(x, **geo)
        # half away from zero instead of half to even: differs only on ties, by 1
        assert np.abs(got - np.sign(avgf) * np.floor(np.abs(avgf) + 0.5)).max() == 0
    mean = xt.mean(dim=(2, 3)).numpy()
    m, s = arith.quantize_multiplier(1 / 42)
    got = mean_hw_s8(x, input_offset=0, multiplier=m, shift=s, output_offset=0)
    assert np.abs(got - np.rint(mean)).max() <= 1


# --------------------------------------------------------------------------
# argument validation

B1 = np.zeros(4096, dtype=np.int8)
B2 = np.zeros(4096, dtype=np.int8)
B3 = np.zeros(4096, dtype=np.int8)
B4 = np.zeros(4096, dtype=np.int8)
X, W, BIAS, Y = (ptr(a) for a in (B1, B2, B3, B4))
Q8 = cb.Quant(2**30, -1, 64)


def _conv_params(**changes):
    p = dict(input=(1, 4, 4, 2), output=(1, 4, 4, 4), kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
             pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0,
             act_min=-128, act_max=127)
    p.update(changes)
    return cb._fields(cb.Conv2dS8Params, p)


def _dw_params(**changes):
    p = dict(input=(1, 4, 4, 2), output=(1, 4, 4, 4), ch_mult=2, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
             pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=0, output_offset=0,
             act_min=-128, act_max=127)
    p.update(changes)
    return cb._fields(cb.DepthwiseConv2dS8Params, p)


def _lin_params(**changes):
    p = dict(batch=2, in_features=8, out_features=4, input_offset=0, output_offset=0, act_min=-128, act_max=127)
    p.update(changes)
    return cb._fields(cb.LinearS8Params, p)


def _bin_params(**changes):
    p = dict(arith.add_params(0.1, 0.1, 0.1), act_min=-128, act_max=127, **broadcast_params((4, 8), (4, 8)))
    p.update(changes)
    return cb._fields(cb.BinaryS8Params, p)


def _pool_params(**changes):
    p = dict(input=(1, 4, 4, 2), output=(1, 2, 2, 2), kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0,
             pad_left=0, act_min=-128, act_max=127)
    p.update(changes)
    return cb._fields(cb.Pool2dS8Params, p)


def _mean_params(**changes):
    p = dict(input=(1, 4, 4, 2), input_offset=0, multiplier=2**30, shift=-3, output_offset=0, act_min=-128,
             act_max=127)
    p.update(changes)
    return cb._fields(cb.MeanHwS8Params, p)


def _sm_params(**changes):
    p = dict(outer=2, axis=8, inner=1, input_multiplier=2**30, input_left_shift=23, diff_min=-248)
    p.update(changes)
    return cb._fields(cb.SoftmaxS8Params, p)


def _quant(m=2**30, s=-1, n=64):
    return ctypes.byref(cb.Quant(m, s, n).struct)


def L():
    return cb.lib()


def conv(p, q=None, x=X, w=W, b=BIAS, y=Y):
    return L().mcu_conv2d_s8(None, None if p is None else ctypes.byref(p), q or ctypes.byref(Q8.struct), x, w, b, y)


def dwconv(p, q=None, x=X, w=W, b=BIAS, y=Y):
    return L().mcu_depthwise_conv2d_s8(None, None if p is None else ctypes.byref(p), q or ctypes.byref(Q8.struct),
                                       x, w, b, y)


def lin(p, q=None, x=X, w=W, b=BIAS, y=Y):
    return L().mcu_linear_s8(None, None if p is None else ctypes.byref(p), q or ctypes.byref(Q8.struct), x, w, b, y)


def binop(name, p, a=X, b=W, y=Y):
    return getattr(L(), f"mcu_{name}_s8")(None if p is None else ctypes.byref(p), a, b, y)


def pool(name, p, x=X, y=Y):
    return getattr(L(), f"mcu_{name}_pool2d_s8")(None if p is None else ctypes.byref(p), x, y)


ERROR_CASES = {
    "conv ok": (lambda: conv(_conv_params()), MCU_OK),
    "conv null params": (lambda: conv(None), MCU_ERR_NULL_POINTER),
    "conv null quant": (lambda: L().mcu_conv2d_s8(None, ctypes.byref(_conv_params()), None, X, W, BIAS, Y),
                        MCU_ERR_NULL_POINTER),
    "conv null multiplier": (lambda: conv(_conv_params(), q=ctypes.byref(cb.PerChannelQuant(None, None))),
                             MCU_ERR_NULL_POINTER),
    "conv null output": (lambda: conv(_conv_params(), y=None), MCU_ERR_NULL_POINTER),
    "conv null bias ok": (lambda: conv(_conv_params(), b=None), MCU_OK),
    "conv stride 0": (lambda: conv(_conv_params(stride_h=0)), MCU_ERR_INVALID_ARG),
    "conv dilation 0": (lambda: conv(_conv_params(dilation_w=0)), MCU_ERR_INVALID_ARG),
    "conv negative pad": (lambda: conv(_conv_params(pad_left=-1)), MCU_ERR_INVALID_ARG),
    "conv groups 0": (lambda: conv(_conv_params(groups=0)), MCU_ERR_INVALID_ARG),
    "conv input offset 129": (lambda: conv(_conv_params(input_offset=129)), MCU_ERR_INVALID_ARG),
    "conv input offset -128": (lambda: conv(_conv_params(input_offset=-128)), MCU_ERR_INVALID_ARG),
    "conv input offset 128 ok": (lambda: conv(_conv_params(input_offset=128)), MCU_OK),
    "conv output offset 128": (lambda: conv(_conv_params(output_offset=128)), MCU_ERR_INVALID_ARG),
    "conv act min > max": (lambda: conv(_conv_params(act_min=5, act_max=4)), MCU_ERR_INVALID_ARG),
    "conv act max 128": (lambda: conv(_conv_params(act_max=128)), MCU_ERR_INVALID_ARG),
    "conv act min -129": (lambda: conv(_conv_params(act_min=-129)), MCU_ERR_INVALID_ARG),
    "conv negative multiplier": (lambda: conv(_conv_params(), q=_quant(m=-1)), MCU_ERR_INVALID_ARG),
    "conv shift 31": (lambda: conv(_conv_params(), q=_quant(s=31)), MCU_ERR_INVALID_ARG),
    "conv shift -32": (lambda: conv(_conv_params(), q=_quant(s=-32)), MCU_ERR_INVALID_ARG),
    "conv shift 30 ok": (lambda: conv(_conv_params(), q=_quant(s=30)), MCU_OK),
    "conv batch mismatch": (lambda: conv(_conv_params(output=(2, 4, 4, 4))), MCU_ERR_SHAPE),
    "conv groups do not divide": (lambda: conv(_conv_params(groups=3)), MCU_ERR_SHAPE),
    "conv zero dim": (lambda: conv(_conv_params(input=(1, 0, 4, 2))), MCU_ERR_SHAPE),
    "conv output overlaps input": (lambda: conv(_conv_params(), y=X + 4), MCU_ERR_INVALID_ARG),
    "conv output overlaps bias": (lambda: conv(_conv_params(), b=Y + 8), MCU_ERR_INVALID_ARG),
    "dw ok": (lambda: dwconv(_dw_params()), MCU_OK),
    "dw null input": (lambda: dwconv(_dw_params(), x=None), MCU_ERR_NULL_POINTER),
    "dw ch_mult 0": (lambda: dwconv(_dw_params(ch_mult=0)), MCU_ERR_INVALID_ARG),
    "dw channels mismatch": (lambda: dwconv(_dw_params(ch_mult=3)), MCU_ERR_SHAPE),
    "dw output offset -129": (lambda: dwconv(_dw_params(output_offset=-129)), MCU_ERR_INVALID_ARG),
    "dw bad shift": (lambda: dwconv(_dw_params(), q=_quant(s=40)), MCU_ERR_INVALID_ARG),
    "dw output overlaps weight": (lambda: dwconv(_dw_params(), w=Y), MCU_ERR_INVALID_ARG),
    "linear ok": (lambda: lin(_lin_params()), MCU_OK),
    "linear null weight": (lambda: lin(_lin_params(), w=None), MCU_ERR_NULL_POINTER),
    "linear zero batch": (lambda: lin(_lin_params(batch=0)), MCU_ERR_SHAPE),
    "linear act": (lambda: lin(_lin_params(act_min=100, act_max=-100)), MCU_ERR_INVALID_ARG),
    "linear bad multiplier": (lambda: lin(_lin_params(), q=_quant(m=-(2**31))), MCU_ERR_INVALID_ARG),
    "linear overlap": (lambda: lin(_lin_params(), y=X + 1), MCU_ERR_INVALID_ARG),
    "add ok": (lambda: binop("add", _bin_params()), MCU_OK),
    "add in place ok": (lambda: binop("add", _bin_params(), a=Y), MCU_OK),
    "add shifted alias": (lambda: binop("add", _bin_params(), a=Y + 1), MCU_ERR_INVALID_ARG),
    "add null": (lambda: binop("add", _bin_params(), b=None), MCU_ERR_NULL_POINTER),
    "add rank 0": (lambda: binop("add", _bin_params(rank=0)), MCU_ERR_INVALID_ARG),
    "add rank 7": (lambda: binop("add", _bin_params(rank=7)), MCU_ERR_INVALID_ARG),
    "add left shift 24": (lambda: binop("add", _bin_params(left_shift=24)), MCU_ERR_INVALID_ARG),
    "add negative left shift": (lambda: binop("add", _bin_params(left_shift=-1)), MCU_ERR_INVALID_ARG),
    "add bad a shift": (lambda: binop("add", _bin_params(a_shift=31)), MCU_ERR_INVALID_ARG),
    "add bad b multiplier": (lambda: binop("add", _bin_params(b_multiplier=-5)), MCU_ERR_INVALID_ARG),
    "add bad out shift": (lambda: binop("add", _bin_params(out_shift=-32)), MCU_ERR_INVALID_ARG),
    "add a offset -128": (lambda: binop("add", _bin_params(a_offset=-128)), MCU_ERR_INVALID_ARG),
    "add negative stride": (lambda: binop("add", _bin_params(a_strides=[-8, 1])), MCU_ERR_SHAPE),
    "add zero dim": (lambda: binop("add", _bin_params(out_shape=[0, 8])), MCU_ERR_SHAPE),
    "sub act": (lambda: binop("sub", _bin_params(act_min=0, act_max=-1)), MCU_ERR_INVALID_ARG),
    "mul ignores add fields": (lambda: binop("mul", _bin_params(left_shift=99, a_shift=99, b_multiplier=-1)),
                               MCU_OK),
    "mul bad out multiplier": (lambda: binop("mul", _bin_params(out_multiplier=-1)), MCU_ERR_INVALID_ARG),
    "max pool ok": (lambda: pool("max", _pool_params()), MCU_OK),
    "max pool null": (lambda: pool("max", None), MCU_ERR_NULL_POINTER),
    "max pool stride 0": (lambda: pool("max", _pool_params(stride_w=0)), MCU_ERR_INVALID_ARG),
    "max pool pad == kernel": (lambda: pool("max", _pool_params(pad_top=2)), MCU_ERR_SHAPE),
    "max pool window past input": (lambda: pool("max", _pool_params(output=(1, 3, 2, 2))), MCU_ERR_SHAPE),
    "max pool channel mismatch": (lambda: pool("max", _pool_params(output=(1, 2, 2, 3))), MCU_ERR_SHAPE),
    "max pool act": (lambda: pool("max", _pool_params(act_max=200)), MCU_ERR_INVALID_ARG),
    "max pool overlap": (lambda: pool("max", _pool_params(), y=X + 3), MCU_ERR_INVALID_ARG),
    "avg pool ok": (lambda: pool("avg", _pool_params()), MCU_OK),
    "avg pool negative pad": (lambda: pool("avg", _pool_params(pad_left=-1)), MCU_ERR_INVALID_ARG),
    "avg pool huge window": (lambda: pool("avg", _pool_params(kernel_h=5000, kernel_w=5000, stride_h=5000,
                                                              stride_w=5000, output=(1, 1, 1, 2))),
                             MCU_ERR_UNSUPPORTED),
    "mean ok": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params()), X, Y), MCU_OK),
    "mean null": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params()), None, Y), MCU_ERR_NULL_POINTER),
    "mean bad shift": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params(shift=31)), X, Y), MCU_ERR_INVALID_ARG),
    "mean bad offset": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params(input_offset=-128)), X, Y),
                        MCU_ERR_INVALID_ARG),
    "mean zero dim": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params(input=(1, 4, 0, 2))), X, Y),
                      MCU_ERR_SHAPE),
    "mean huge plane": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params(input=(1, 4096, 4096, 1))), X, Y),
                        MCU_ERR_UNSUPPORTED),
    "mean overlap": (lambda: L().mcu_mean_hw_s8(ctypes.byref(_mean_params()), X, X + 2), MCU_ERR_INVALID_ARG),
    "softmax ok": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params()), X, Y), MCU_OK),
    "softmax in place ok": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params()), X, X), MCU_OK),
    "softmax shifted alias": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params()), X, X + 1),
                              MCU_ERR_INVALID_ARG),
    "softmax null": (lambda: L().mcu_softmax_s8(None, X, Y), MCU_ERR_NULL_POINTER),
    "softmax positive diff_min": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params(diff_min=1)), X, Y),
                                  MCU_ERR_INVALID_ARG),
    "softmax left shift 32": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params(input_left_shift=32)), X, Y),
                              MCU_ERR_INVALID_ARG),
    "softmax negative multiplier": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params(input_multiplier=-1)), X, Y),
                                    MCU_ERR_INVALID_ARG),
    "softmax zero axis": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params(axis=0)), X, Y), MCU_ERR_SHAPE),
    "softmax axis 4096": (lambda: L().mcu_softmax_s8(ctypes.byref(_sm_params(outer=1, axis=4096)), X, Y),
                          MCU_ERR_UNSUPPORTED),
    "lut null table": (lambda: L().mcu_lut_s8(4, None, X, Y), MCU_ERR_NULL_POINTER),
    "lut negative size": (lambda: L().mcu_lut_s8(-1, W, X, Y), MCU_ERR_SHAPE),
    "lut shifted alias": (lambda: L().mcu_lut_s8(16, W, X, X + 1), MCU_ERR_INVALID_ARG),
    "lut output overlaps table": (lambda: L().mcu_lut_s8(16, W, X, W + 100), MCU_ERR_INVALID_ARG),
    "lut size 0 ok": (lambda: L().mcu_lut_s8(0, W, X, Y), MCU_OK),
    "requantize null": (lambda: L().mcu_requantize_s8(4, 0, 2**30, 0, 0, -128, 127, None, Y), MCU_ERR_NULL_POINTER),
    "requantize bad shift": (lambda: L().mcu_requantize_s8(4, 0, 2**30, 31, 0, -128, 127, X, Y), MCU_ERR_INVALID_ARG),
    "requantize bad multiplier": (lambda: L().mcu_requantize_s8(4, 0, -1, 0, 0, -128, 127, X, Y),
                                  MCU_ERR_INVALID_ARG),
    "requantize bad offset": (lambda: L().mcu_requantize_s8(4, 129, 2**30, 0, 0, -128, 127, X, Y),
                              MCU_ERR_INVALID_ARG),
    "requantize bad act": (lambda: L().mcu_requantize_s8(4, 0, 2**30, 0, 0, 1, 0, X, Y), MCU_ERR_INVALID_ARG),
    "requantize negative size": (lambda: L().mcu_requantize_s8(-4, 0, 2**30, 0, 0, -128, 127, X, Y), MCU_ERR_SHAPE),
    "requantize shifted alias": (lambda: L().mcu_requantize_s8(8, 0, 2**30, 0, 0, -128, 127, X, X + 2),
                                 MCU_ERR_INVALID_ARG),
    "clamp bad act": (lambda: L().mcu_clamp_s8(4, -129, 0, X, Y), MCU_ERR_INVALID_ARG),
    "clamp null": (lambda: L().mcu_clamp_s8(4, -1, 0, X, None), MCU_ERR_NULL_POINTER),
    "clamp shifted alias": (lambda: L().mcu_clamp_s8(8, -1, 0, X + 1, X), MCU_ERR_INVALID_ARG),
    "quantize zero scale": (lambda: L().mcu_quantize_f32_s8(4, 0.0, 0, X, Y), MCU_ERR_INVALID_ARG),
    "quantize nan scale": (lambda: L().mcu_quantize_f32_s8(4, float("nan"), 0, X, Y), MCU_ERR_INVALID_ARG),
    "quantize inf scale": (lambda: L().mcu_quantize_f32_s8(4, float("inf"), 0, X, Y), MCU_ERR_INVALID_ARG),
    "quantize bad zero point": (lambda: L().mcu_quantize_f32_s8(4, 1.0, 128, X, Y), MCU_ERR_INVALID_ARG),
    "quantize negative size": (lambda: L().mcu_quantize_f32_s8(-1, 1.0, 0, X, Y), MCU_ERR_SHAPE),
    "quantize shifted alias": (lambda: L().mcu_quantize_f32_s8(4, 1.0, 0, X, X + 1), MCU_ERR_INVALID_ARG),
    "quantize null": (lambda: L().mcu_quantize_f32_s8(4, 1.0, 0, None, Y), MCU_ERR_NULL_POINTER),
    "dequantize negative scale": (lambda: L().mcu_dequantize_s8_f32(4, -1.0, 0, X, Y), MCU_ERR_INVALID_ARG),
    "dequantize bad zero point": (lambda: L().mcu_dequantize_s8_f32(4, 1.0, -129, X, Y), MCU_ERR_INVALID_ARG),
    "dequantize shifted alias": (lambda: L().mcu_dequantize_s8_f32(4, 1.0, 0, X + 4, X), MCU_ERR_INVALID_ARG),
    "dequantize null": (lambda: L().mcu_dequantize_s8_f32(4, 1.0, 0, X, None), MCU_ERR_NULL_POINTER),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_status_codes(lib, name):
    call, expected = ERROR_CASES[name]
    assert call() == expected


# --------------------------------------------------------------------------
# the same C must build for the device

ARM_GCC = shutil.which("arm-none-eabi-gcc")
ARM_NM = shutil.which("arm-none-eabi-nm")
# Each core by a board whose firmware compiles the kernels for it, so that these objects are that firmware's.
ARM_BOARDS = {"m33-hard": "mps2-an505", "m4-hard": "mps2-an386", "m3-soft": "mps2-an385"}
# The portable int8 kernels tested here (optimised variants have their own tests).
S8_SOURCES = [f"mcu_{op}_s8.c" for op in ("conv2d", "depthwise_conv2d", "linear", "add", "sub", "mul", "max_pool2d",
                                          "avg_pool2d", "mean_hw", "softmax", "lut", "requantize", "clamp")]
S8_SOURCES += ["mcu_quantize_f32_s8.c", "mcu_dequantize_s8_f32.c"]


@pytest.mark.skipif(ARM_GCC is None or ARM_NM is None, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("target", sorted(ARM_BOARDS))
def test_s8_kernels_build_for_cortex_m(tmp_path, target):
    board = ARM_BOARDS[target]
    for source in S8_SOURCES:
        assert front_end_errors(board, source, ["-Wdouble-promotion", "-Wconversion", "-Wshadow"]) == "", source
        undefined, defined = symbols(device_object(board, source, tmp_path))
        data = [name for kind, name in defined if kind in "BbDdCcRr"]
        # No libc/libm at all, no 64-bit division or shift helpers, no globals;
        # soft-float builds may call the single-precision helpers only.
        soft_float = {s for s in undefined if s.startswith(("__aeabi_f", "__aeabi_i2f", "__aeabi_ui2f"))}
        if target != "m3-soft":
            assert not soft_float, (source, soft_float)
        assert undefined - soft_float == set(), (source, undefined)
        assert not data, (source, data)
