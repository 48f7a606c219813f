"""The 16x8 kernels of w8a16 beyond the convolution and linear ones: mcu_depthwise_conv2d_s16 (CMSIS-NN's
arm_depthwise_conv_s16 conventions), mcu_mean_s16 (ours: the exact sum requantized once), mcu_add_s16
(CMSIS-NN's arm_elementwise_add_s16), mcu_max_pool2d_s16 / mcu_avg_pool2d_s16 (arm_max_pool_s16,
arm_avgpool_s16) and mcu_clamp_s16, against the Python integer reference (mcu/reference/s16.py) over
hypothesis-drawn shapes and int16 extremes, and against CMSIS-NN built from CMSIS_NN_PATH."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from cmsis_nn_host import Act, Dims, PerChannel, Tile, cmsis_nn_root, host_library
from host_builds import build_emulated_lib
from mcu.reference.arith import add_params
from mcu.reference.s16 import (INT16_MAX, INT16_MIN, SHIFT_MAX, add_s16, avg_pool2d_s16, depthwise_conv2d_s16,
                               max_pool2d_s16, mean_s16)
from s8_cases import assert_equal
from test_kernels_s16 import acts, biases64, int16_data, int8_weights, multipliers, s16_shift

_P = ctypes.c_void_p
# (fewer examples than the int8 kernels' EXACT: these loops have no architecture paths of their own)
CASES = settings(max_examples=50, deadline=None)


class DwS16Params(ctypes.Structure):
    _fields_ = [("input", cb.Shape4), ("output", cb.Shape4), ("ch_mult", ctypes.c_int32),
                ("kernel_h", ctypes.c_int32), ("kernel_w", ctypes.c_int32), ("stride_h", ctypes.c_int32),
                ("stride_w", ctypes.c_int32), ("pad_top", ctypes.c_int32), ("pad_left", ctypes.c_int32),
                ("dilation_h", ctypes.c_int32), ("dilation_w", ctypes.c_int32), ("act_min", ctypes.c_int32),
                ("act_max", ctypes.c_int32)]


class MeanS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("outer", "axis", "inner", "multiplier", "shift", "act_min", "act_max")]


class AddS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("size", "a_multiplier", "a_shift", "b_multiplier", "b_shift",
                                              "left_shift", "out_multiplier", "out_shift", "act_min", "act_max")]


class DwConvParams(ctypes.Structure):
    _fields_ = [("input_offset", ctypes.c_int32), ("output_offset", ctypes.c_int32), ("ch_mult", ctypes.c_int32),
                ("stride", Tile), ("padding", Tile), ("dilation", Tile), ("activation", Act)]


@pytest.fixture(scope="module")
def lib():
    handle = cb.lib()
    handle.mcu_depthwise_conv2d_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(DwS16Params),
                                                ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
    handle.mcu_depthwise_conv2d_s16.restype = ctypes.c_int
    handle.mcu_mean_s16.argtypes = [ctypes.POINTER(MeanS16Params), _P, _P]
    handle.mcu_mean_s16.restype = ctypes.c_int
    handle.mcu_add_s16.argtypes = [ctypes.POINTER(AddS16Params), _P, _P, _P]
    handle.mcu_add_s16.restype = ctypes.c_int
    return handle


@st.composite
def dw_cases(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h = draw(st.integers(dh * (kh - 1) + 1, 10))
    w = draw(st.integers(dw * (kw - 1) + 1, 10))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    pb, pr = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, cin=draw(st.integers(1, 9)), mult=draw(st.integers(1, 3)),
                kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, oh=oh, ow=ow)


def _dw_case(rng, case, data, bias, centre):
    n, cin, kh, kw = case["n"], case["cin"], case["kh"], case["kw"]
    cout = cin * case["mult"]
    x = int16_data(rng, (n, case["h"], case["w"], cin), data)
    w = int8_weights(rng, (kh, kw, cout), "worst" if data == "worst" else "uniform")
    b = biases64(rng, cout, bias)
    m = multipliers(rng, cout, False)
    s = np.clip(s16_shift(kh * kw, centre) + rng.integers(-3, 4, size=cout), -31, SHIFT_MAX).astype(np.int32)
    return x, w, b, m, s, (n, case["oh"], case["ow"], cout)


def _dw_ours(lib, case, x, w, b, m, s, out_shape, act):
    p = DwS16Params(cb.Shape4(*x.shape), cb.Shape4(*out_shape), case["mult"], case["kh"], case["kw"], case["sh"],
                    case["sw"], case["pt"], case["pl"], case["dh"], case["dw"], act[0], act[1])
    q = cb.Quant(m, s, out_shape[3])
    out = np.zeros(out_shape, dtype=np.int16)
    status = lib.mcu_depthwise_conv2d_s16(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(w),
                                          None if b is None else ptr(b), ptr(out))
    return status, out


@CASES
@given(dw_cases(), st.sampled_from(["uniform", "small", "extremes", "worst"]),
       st.sampled_from(["none", "small", "large"]), st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_depthwise_conv2d_s16(lib, case, data, bias, centre, act, seed):
    rng = np.random.default_rng(seed)
    x, w, b, m, s, out_shape = _dw_case(rng, case, data, bias, centre)
    status, out = _dw_ours(lib, case, x, w, b, m, s, out_shape, act)
    assert status == MCU_OK
    want = depthwise_conv2d_s16(x, w, b, m, s, ch_mult=case["mult"], stride=(case["sh"], case["sw"]),
                                padding=(case["pt"], case["pl"]), dilation=(case["dh"], case["dw"]),
                                out_hw=(case["oh"], case["ow"]), act_min=act[0], act_max=act[1])
    assert_equal(out, want)


@pytest.fixture(scope="module")
def dsp_lib():
    """The host library with the DSP paths emulated (the depthwise kernel's halfword multiply-accumulates)."""
    handle = ctypes.CDLL(str(build_emulated_lib()))
    handle.mcu_depthwise_conv2d_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(DwS16Params),
                                                ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
    handle.mcu_depthwise_conv2d_s16.restype = ctypes.c_int
    return handle


@settings(max_examples=25, deadline=None)
@given(dw_cases(), st.integers(4, 13), st.sampled_from(["uniform", "extremes", "worst"]),
       st.sampled_from(["none", "small", "large"]), st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_depthwise_conv2d_s16_dsp_path(dsp_lib, case, cin, data, bias, centre, act, seed):
    """One channel per input channel and at least four of them: the DSP path's four channels a step (and the
    channels left over), with biases that take the int32 requantization and biases that do not."""
    case = {**case, "cin": cin, "mult": 1}
    rng = np.random.default_rng(seed)
    x, w, b, m, s, out_shape = _dw_case(rng, case, data, bias, centre)
    status, out = _dw_ours(dsp_lib, case, x, w, b, m, s, out_shape, act)
    assert status == MCU_OK
    want = depthwise_conv2d_s16(x, w, b, m, s, ch_mult=1, stride=(case["sh"], case["sw"]),
                                padding=(case["pt"], case["pl"]), dilation=(case["dh"], case["dw"]),
                                out_hw=(case["oh"], case["ow"]), act_min=act[0], act_max=act[1])
    assert_equal(out, want)


def test_depthwise_conv2d_s16_refuses_an_overlapping_output(lib):
    x = np.ones((1, 2, 2, 4), np.int16)
    p = DwS16Params(cb.Shape4(*x.shape), cb.Shape4(*x.shape), 1, 1, 1, 1, 1, 0, 0, 1, 1, INT16_MIN, INT16_MAX)
    q = cb.Quant(np.full(4, 2**30), np.zeros(4), 4)
    w = np.ones((1, 1, 4), np.int8)
    # the output starting one element into the input: the kernel compares bytes, not elements
    assert lib.mcu_depthwise_conv2d_s16(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(w), None,
                                        ctypes.c_void_p(x.ctypes.data + 2 * 15)) == MCU_ERR_INVALID_ARG


CMSIS_DW_S16_SOURCES = ("ConvolutionFunctions/arm_depthwise_conv_s16.c",)


@pytest.fixture(scope="module")
def cmsis_dw():
    """CMSIS-NN's arm_depthwise_conv_s16 from CMSIS_NN_PATH, as a host library (its portable path)."""
    root = cmsis_nn_root(CMSIS_DW_S16_SOURCES, "arm_depthwise_conv_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_DW_S16_SOURCES], "dw_s16")
    handle.arm_depthwise_conv_s16.argtypes = [_P] * 11
    handle.arm_depthwise_conv_s16.restype = ctypes.c_int
    return handle


@settings(max_examples=40, deadline=None)
@given(dw_cases(), st.sampled_from(["uniform", "small", "extremes", "worst"]),
       st.sampled_from(["none", "small", "large"]), st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_depthwise_conv2d_s16_equals_cmsis_nn(lib, cmsis_dw, case, data, bias, centre, act, seed):
    """arm_depthwise_conv_s16 sums each window in int64, as ours does exactly: the same int16 outputs, extremes
    included."""
    rng = np.random.default_rng(seed)
    x, w, b, m, s, out_shape = _dw_case(rng, case, data, bias, centre)
    status, ours = _dw_ours(lib, case, x, w, b, m, s, out_shape, act)
    assert status == MCU_OK
    cout = out_shape[3]
    in_d, f_d = Dims(case["n"], case["h"], case["w"], case["cin"]), Dims(1, case["kh"], case["kw"], cout)
    b_d, o_d = Dims(1, 1, 1, cout), Dims(*out_shape)
    params = DwConvParams(0, 0, case["mult"], Tile(case["sw"], case["sh"]), Tile(case["pl"], case["pt"]),
                          Tile(case["dw"], case["dh"]), Act(*act))
    mm, ss = np.ascontiguousarray(m), np.ascontiguousarray(s)
    quant = PerChannel(mm.ctypes.data, ss.ctypes.data)
    ctx = cb.Context(None, 0)
    theirs = np.zeros(out_shape, dtype=np.int16)
    assert cmsis_dw.arm_depthwise_conv_s16(ctypes.byref(ctx), ctypes.byref(params), ctypes.byref(quant),
                                           ctypes.byref(in_d), ptr(x), ctypes.byref(f_d), ptr(w), ctypes.byref(b_d),
                                           None if b is None else ptr(b), ctypes.byref(o_d), ptr(theirs)) == 0
    assert_equal(ours, theirs)


@CASES
@given(outer=st.integers(1, 3), axis=st.one_of(st.integers(1, 40), st.just(1000)), inner=st.integers(1, 9),
       data=st.sampled_from(["uniform", "small", "extremes", "worst"]), centre=st.integers(-3, 3), act=acts,
       seed=st.integers(0, 2**32 - 1))
def test_mean_s16(lib, outer, axis, inner, data, centre, act, seed):
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (outer, axis, inner), data)
    m = int(multipliers(rng, 1, True)[0])
    shift = int(np.clip(-int(np.ceil(np.log2(axis))) + centre, -31, SHIFT_MAX))
    p = MeanS16Params(outer, axis, inner, m, shift, act[0], act[1])
    out = np.zeros((outer, inner), dtype=np.int16)
    assert lib.mcu_mean_s16(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, mean_s16(x, m, shift, act_min=act[0], act_max=act[1]))


def _add_params(s_a, s_b, s_o, size, act):
    prm = add_params(s_a, s_b, s_o, left_shift=15)
    keys = ("a_multiplier", "a_shift", "b_multiplier", "b_shift", "left_shift", "out_multiplier", "out_shift")
    return prm, AddS16Params(size, *(int(prm[k]) for k in keys), act[0], act[1])


scales = st.floats(1e-5, 1e-2)


@CASES
@given(size=st.integers(1, 70), s_a=scales, s_b=scales, ratio=st.floats(0.3, 3.0),
       data=st.sampled_from(["uniform", "small", "extremes"]), act=acts, seed=st.integers(0, 2**32 - 1),
       in_place=st.sampled_from([None, 0, 1]))
def test_add_s16(lib, size, s_a, s_b, ratio, data, act, seed, in_place):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (size,), data), int16_data(rng, (size,), data)
    prm, p = _add_params(s_a, s_b, max(s_a, s_b) * ratio, size, act)
    keys = ("a_multiplier", "a_shift", "b_multiplier", "b_shift", "out_multiplier", "out_shift", "left_shift")
    want = add_s16(a, b, **{k: prm[k] for k in keys}, act_min=act[0], act_max=act[1])
    out = np.zeros(size, dtype=np.int16) if in_place is None else (a, b)[in_place]
    assert lib.mcu_add_s16(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    assert_equal(out, want)


CMSIS_ADD_S16_SOURCES = ("BasicMathFunctions/arm_elementwise_add_s16.c",)


@pytest.fixture(scope="module")
def cmsis_add():
    root = cmsis_nn_root(CMSIS_ADD_S16_SOURCES, "arm_elementwise_add_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_ADD_S16_SOURCES], "add_s16")
    handle.arm_elementwise_add_s16.argtypes = [_P, _P] + [ctypes.c_int32] * 7 + [_P] + [ctypes.c_int32] * 6
    handle.arm_elementwise_add_s16.restype = ctypes.c_int
    return handle


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 70), s_a=scales, s_b=scales, ratio=st.floats(0.3, 3.0),
       data=st.sampled_from(["uniform", "small", "extremes"]), act=acts, seed=st.integers(0, 2**32 - 1))
def test_add_s16_equals_cmsis_nn(lib, cmsis_add, size, s_a, s_b, ratio, data, act, seed):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (size,), data), int16_data(rng, (size,), data)
    prm, p = _add_params(s_a, s_b, max(s_a, s_b) * ratio, size, act)
    ours = np.zeros(size, dtype=np.int16)
    assert lib.mcu_add_s16(ctypes.byref(p), ptr(a), ptr(b), ptr(ours)) == MCU_OK
    theirs = np.zeros(size, dtype=np.int16)
    assert cmsis_add.arm_elementwise_add_s16(ptr(a), ptr(b), 0, prm["a_multiplier"], prm["a_shift"], 0,
                                             prm["b_multiplier"], prm["b_shift"], 15, ptr(theirs), 0,
                                             prm["out_multiplier"], prm["out_shift"], act[0], act[1], size) == 0
    assert_equal(ours, theirs)


def test_add_s16_refuses_a_partial_overlap(lib):
    a = np.ones(8, np.int16)
    _, p = _add_params(1e-3, 1e-3, 2e-3, 4, (INT16_MIN, INT16_MAX))
    assert lib.mcu_add_s16(ctypes.byref(p), ptr(a), ptr(a), ctypes.c_void_p(a.ctypes.data + 2)) == MCU_ERR_INVALID_ARG


class PoolS16Params(ctypes.Structure):
    _fields_ = [("input", cb.Shape4), ("output", cb.Shape4),
                *[(f, ctypes.c_int32) for f in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left",
                                                "act_min", "act_max")]]


class CmsisPoolParams(ctypes.Structure):
    _fields_ = [("stride", Tile), ("padding", Tile), ("activation", Act)]


@st.composite
def pool_cases(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(kh, 9)), draw(st.integers(kw, 9))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    pb, pr = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    # every window keeps a tap inside the input (the kernels' condition, as the int8 pools')
    oh, ow = min(oh, (h - 1 + pt) // sh + 1), min(ow, (w - 1 + pl) // sw + 1)
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, c=draw(st.integers(1, 6)), kh=kh, kw=kw, sh=sh, sw=sw, pt=pt,
                pl=pl, oh=oh, ow=ow)


def _pool_ours(lib, kind, case, x, act):
    fn = getattr(lib, f"mcu_{kind}_pool2d_s16")
    fn.argtypes = [ctypes.POINTER(PoolS16Params), _P, _P]
    fn.restype = ctypes.c_int
    out_shape = (case["n"], case["oh"], case["ow"], case["c"])
    p = PoolS16Params(cb.Shape4(*x.shape), cb.Shape4(*out_shape), case["kh"], case["kw"], case["sh"], case["sw"],
                      case["pt"], case["pl"], act[0], act[1])
    out = np.zeros(out_shape, dtype=np.int16)
    return fn(ctypes.byref(p), ptr(x), ptr(out)), out


@CASES
@given(st.sampled_from(["max", "avg"]), pool_cases(), st.sampled_from(["uniform", "small", "extremes", "worst"]),
       acts, st.integers(0, 2**32 - 1))
def test_pool2d_s16(lib, kind, case, data, act, seed):
    x = int16_data(np.random.default_rng(seed), (case["n"], case["h"], case["w"], case["c"]), data)
    status, out = _pool_ours(lib, kind, case, x, act)
    assert status == MCU_OK
    fn = max_pool2d_s16 if kind == "max" else avg_pool2d_s16
    want = fn(x, kernel=(case["kh"], case["kw"]), stride=(case["sh"], case["sw"]), padding=(case["pt"], case["pl"]),
              out_hw=(case["oh"], case["ow"]), act_min=act[0], act_max=act[1])
    assert_equal(out, want)


CMSIS_POOL_S16_SOURCES = ("PoolingFunctions/arm_max_pool_s16.c", "PoolingFunctions/arm_avgpool_s16.c")


@pytest.fixture(scope="module")
def cmsis_pool():
    root = cmsis_nn_root(CMSIS_POOL_S16_SOURCES, "arm_max_pool_s16 and arm_avgpool_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_POOL_S16_SOURCES], "pool_s16")
    for name in ("arm_max_pool_s16", "arm_avgpool_s16"):
        getattr(handle, name).argtypes = [_P] * 7
        getattr(handle, name).restype = ctypes.c_int
    return handle


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["max", "avg"]), pool_cases(), st.sampled_from(["uniform", "small", "extremes", "worst"]),
       acts, st.integers(0, 2**32 - 1))
def test_pool2d_s16_equals_cmsis_nn(lib, cmsis_pool, kind, case, data, act, seed):
    x = int16_data(np.random.default_rng(seed), (case["n"], case["h"], case["w"], case["c"]), data)
    status, ours = _pool_ours(lib, kind, case, x, act)
    assert status == MCU_OK
    theirs = np.zeros_like(ours)
    params = CmsisPoolParams(Tile(case["sw"], case["sh"]), Tile(case["pl"], case["pt"]), Act(*act))
    in_d, f_d = Dims(case["n"], case["h"], case["w"], case["c"]), Dims(1, case["kh"], case["kw"], 1)
    o_d = Dims(*ours.shape)
    ctx = cb.Context(None, 0)
    fn = cmsis_pool.arm_max_pool_s16 if kind == "max" else cmsis_pool.arm_avgpool_s16
    assert fn(ctypes.byref(ctx), ctypes.byref(params), ctypes.byref(in_d), ptr(x), ctypes.byref(f_d),
              ctypes.byref(o_d), ptr(theirs)) == 0
    assert_equal(ours, theirs)


@CASES
@given(size=st.integers(0, 70), act=acts, data=st.sampled_from(["uniform", "extremes"]), in_place=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_clamp_s16(lib, size, act, data, in_place, seed):
    lib.mcu_clamp_s16.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, _P, _P]
    lib.mcu_clamp_s16.restype = ctypes.c_int
    x = int16_data(np.random.default_rng(seed), (size,), data)
    want = np.clip(x, act[0], act[1]).astype(np.int16)
    out = x if in_place else np.zeros_like(x)
    assert lib.mcu_clamp_s16(size, act[0], act[1], ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, want)
