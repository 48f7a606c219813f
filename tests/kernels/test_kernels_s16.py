"""The 16x8 kernels (int16 activations, int8 weights, 64-bit accumulation: mcu_linear_s16) against the
Python integer reference (mcu/reference/s16.py) over hypothesis-drawn shapes (feature counts past the
kernel's 256-product partial sums), int16 and int8 extremes, 64-bit biases, multipliers and the shifts
the 16x8 requantization accepts; and against CMSIS-NN's arm_fully_connected_s16 built from
CMSIS_NN_PATH."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from host_builds import build_emulated_lib
from cmsis_nn_host import Act, ConvParams, Dims, FcParams, PerChannel, PerTensor, Tile, cmsis_nn_root, host_library
from mcu.reference.arith import quantize_multiplier
from mcu.reference.s16 import (INT16_MAX, INT16_MIN, SHIFT_MAX, conv2d_s16, linear_s16, reduce_multiplier,
                               requantize_s64, s16_layer_params)
from s8_cases import EXACT, assert_equal

_P = ctypes.c_void_p


class LinearS16Params(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int32), ("in_features", ctypes.c_int32), ("out_features", ctypes.c_int32),
                ("act_min", ctypes.c_int32), ("act_max", ctypes.c_int32)]


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (the plain path) and the DSP path emulated on the host (two rows, SMLAD)."""
    handle = cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib()))
    handle.mcu_linear_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(LinearS16Params),
                                      ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
    handle.mcu_linear_s16.restype = ctypes.c_int
    return handle


def int16_data(rng, shape, mode: str) -> np.ndarray:
    if mode == "worst":  # with weights at -128 every product is +2^22: sums of 512 leave int32
        return np.full(shape, INT16_MIN, dtype=np.int16)
    if mode == "extremes":
        return rng.choice(np.array([INT16_MIN, INT16_MAX, -1, 0], dtype=np.int16), size=shape)
    if mode == "small":
        return rng.integers(-300, 301, size=shape).astype(np.int16)
    return rng.integers(INT16_MIN, INT16_MAX + 1, size=shape).astype(np.int16)


def int8_weights(rng, shape, mode: str) -> np.ndarray:
    if mode == "worst":
        return np.full(shape, -128, dtype=np.int8)
    if mode == "extremes":
        return rng.choice(np.array([-128, -127, 127], dtype=np.int8), size=shape)
    return rng.integers(-127, 128, size=shape).astype(np.int8)


def s16_shift(fin: int, centre: int) -> int:
    """A shift that maps accumulators of ``fin`` uniform products (std ~ 2^14 * 74 * sqrt(fin)) onto int16,
    moved by ``centre`` and kept where the 16x8 requantization allows."""
    auto = int(round(np.log2(2**13 / (2**14 * 74 * np.sqrt(fin))))) + 1
    return int(np.clip(auto + centre, -31, SHIFT_MAX))


def biases64(rng, n: int, kind: str):
    if kind == "none":
        return None
    if kind == "small":
        return rng.integers(-(2**30), 2**30, size=n, dtype=np.int64)
    return rng.integers(-(2**40), 2**40, size=n, dtype=np.int64)


def multipliers(rng, n: int, same: bool) -> np.ndarray:
    m = rng.integers(2**30, 2**31, size=n, dtype=np.int64)
    special = rng.random(n)
    m[special < 0.1] = 0
    m[(special >= 0.1) & (special < 0.2)] = 2**30
    m[(special >= 0.2) & (special < 0.3)] = 2**31 - 1
    m[(special >= 0.3) & (special < 0.4)] = 0x7FFF0000 - 1  # the last multiplier that is rounded, not clamped
    if same:
        m[:] = m[0]
    return m.astype(np.int32)


def _linear(lib, x, w, b, m, s, act):
    batch, fin = x.shape
    fout = w.shape[0]
    p = LinearS16Params(batch, fin, fout, act[0], act[1])
    q = cb.Quant(m, s, fout)
    out = np.zeros((batch, fout), dtype=np.int16)
    b_ptr = None if b is None else ptr(np.ascontiguousarray(b, dtype=np.int64))
    status = lib.mcu_linear_s16(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(np.ascontiguousarray(x)),
                                ptr(np.ascontiguousarray(w)), b_ptr, ptr(out))
    return status, out


acts = st.one_of(st.just((INT16_MIN, INT16_MAX)), st.just((0, INT16_MAX)),
                 st.tuples(st.integers(INT16_MIN, 0), st.integers(1, INT16_MAX)))
cases = dict(batch=st.integers(1, 3),
             fin=st.one_of(st.integers(1, 40), st.integers(250, 600), st.sampled_from([512, 513, 700])),
             fout=st.integers(1, 12), data=st.sampled_from(["uniform", "uniform", "small", "extremes", "worst"]),
             wmode=st.sampled_from(["uniform", "uniform", "extremes", "worst"]),
             bias=st.sampled_from(["none", "small", "small", "large"]), centre=st.integers(-4, 4),
             act=acts, seed=st.integers(0, 2**32 - 1))


@EXACT
@given(**cases, same=st.booleans())
def test_linear_s16(lib, batch, fin, fout, data, wmode, bias, centre, act, seed, same):
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (batch, fin), data)
    w = int8_weights(rng, (fout, fin), "worst" if data == "worst" else wmode)
    b = biases64(rng, fout, bias)
    m = multipliers(rng, fout, same)
    s = np.clip(s16_shift(fin, centre) + (0 if same else rng.integers(-3, 4, size=fout)), -31, SHIFT_MAX)
    s = np.broadcast_to(s, (fout,)).astype(np.int32)
    status, out = _linear(lib, x, w, b, m, s, act)
    assert status == MCU_OK
    assert_equal(out, linear_s16(x, w, b, m, s, act_min=act[0], act_max=act[1]))


def test_linear_s16_refuses_what_it_cannot_requantize(lib):
    """A shift past 14 leaves the 16x8 requantization (a negative right shift); activation bounds past int16."""
    x, w = np.ones((1, 4), np.int16), np.ones((2, 4), np.int8)
    assert _linear(lib, x, w, None, np.full(2, 2**30, np.int32), np.array([0, 15], np.int32),
                   (INT16_MIN, INT16_MAX))[0] == MCU_ERR_INVALID_ARG
    assert _linear(lib, x, w, None, np.full(2, 2**30, np.int32), np.zeros(2, np.int32),
                   (INT16_MIN - 1, INT16_MAX))[0] == MCU_ERR_INVALID_ARG


def test_requantize_s64_by_hand():
    """(acc * round(m / 2^16)) / 2^(15 - shift), rounded half up: 2^30 is one half in Q31."""
    assert reduce_multiplier(2**30) == 2**14
    assert reduce_multiplier(2**31 - 1) == 0x7FFF
    assert requantize_s64(3, 2**30, 0) == 2  # 1.5 rounds up
    assert requantize_s64(-3, 2**30, 0) == -1  # -1.5 rounds up too
    assert requantize_s64(1000, 2**30, -3) == 63  # 1000 / 16 = 62.5
    assert requantize_s64(2**40, 2**30, 14) == 0  # the shifted value wraps modulo 2^32 as in C
    with pytest.raises(ValueError):
        requantize_s64(1, 2**30, 15)


@settings(max_examples=60, deadline=None)
@given(s_in=st.floats(1e-5, 1e-2), s_out=st.floats(1e-5, 1e-1), fout=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_layer_params_reproduce_the_real_layer(s_in, s_out, fout, seed):
    """The derived multipliers, shifts and int64 biases give the float layer's output within one step plus
    the Q15 multiplier's relative error."""
    rng = np.random.default_rng(seed)
    s_w = rng.uniform(1e-4, 2e-2, size=fout)
    if np.any(s_in * s_w / s_out >= 2**14):
        return
    w = int8_weights(rng, (fout, 16), "uniform")
    x = int16_data(rng, (2, 16), "uniform")
    bias = rng.normal(0, 1, size=fout)
    p = s16_layer_params(s_in, s_w, s_out, bias)
    for c in range(fout):
        assert (p.multiplier[c], p.shift[c]) == quantize_multiplier(s_in * s_w[c] / s_out)
    got = linear_s16(x, w, p.bias, p.multiplier, p.shift).astype(np.float64)
    real = (x * s_in) @ (w * s_w[:, None]).T + bias
    want = real / s_out
    tol = 1 + np.abs(want) * 2.0**-14 + np.abs(p.bias * s_in * s_w - bias) / s_out
    inside = np.abs(want) < INT16_MAX
    assert np.all(np.abs(got - want)[inside] <= tol[inside])


CMSIS_S16_SOURCES = ("FullyConnectedFunctions/arm_fully_connected_s16.c",
                     "NNSupportFunctions/arm_nn_vec_mat_mult_t_s16.c")


@pytest.fixture(scope="module")
def cmsis():
    """CMSIS-NN's arm_fully_connected_s16 from the tree CMSIS_NN_PATH names, as a host library (its portable
    path: no DSP or MVE on the host)."""
    root = cmsis_nn_root(CMSIS_S16_SOURCES, "arm_fully_connected_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_S16_SOURCES], "s16")
    handle.arm_fully_connected_s16.argtypes = [_P] * 11
    handle.arm_fully_connected_s16.restype = ctypes.c_int
    return handle






@settings(max_examples=150, deadline=None)
@given(**cases)
def test_linear_s16_equals_cmsis_nn(lib, cmsis, batch, fin, fout, data, wmode, bias, centre, act, seed):
    """arm_fully_connected_s16 takes one multiplier for the layer: ours with it on every channel."""
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (batch, fin), data)
    w = int8_weights(rng, (fout, fin), "worst" if data == "worst" else wmode)
    b = biases64(rng, fout, bias)
    m = multipliers(rng, fout, True)
    s = np.full(fout, s16_shift(fin, centre), dtype=np.int32)
    status, ours = _linear(lib, x, w, b, m, s, act)
    assert status == MCU_OK
    theirs = np.zeros((batch, fout), dtype=np.int16)
    in_d, f_d = Dims(batch, 1, 1, fin), Dims(fin, 1, 1, fout)
    b_d, o_d = Dims(1, 1, 1, fout), Dims(batch, 1, 1, fout)
    fc, quant = FcParams(0, 0, 0, Act(*act)), PerTensor(int(m[0]), int(s[0]))
    ctx = cb.Context(None, 0)
    b_ptr = None if b is None else ptr(b)
    assert cmsis.arm_fully_connected_s16(ctypes.byref(ctx), ctypes.byref(fc), ctypes.byref(quant),
                                         ctypes.byref(in_d), ptr(x), ctypes.byref(f_d), ptr(w), ctypes.byref(b_d),
                                         b_ptr, ctypes.byref(o_d), ptr(theirs)) == 0
    assert_equal(ours, theirs)


class Conv2dS16Params(ctypes.Structure):
    _fields_ = [("input", cb.Shape4), ("output", cb.Shape4), ("kernel_h", ctypes.c_int32),
                ("kernel_w", ctypes.c_int32), ("stride_h", ctypes.c_int32), ("stride_w", ctypes.c_int32),
                ("pad_top", ctypes.c_int32), ("pad_left", ctypes.c_int32), ("dilation_h", ctypes.c_int32),
                ("dilation_w", ctypes.c_int32), ("act_min", ctypes.c_int32), ("act_max", ctypes.c_int32)]


@st.composite
def conv_s16_cases(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h = draw(st.integers(dh * (kh - 1) + 1, 12))
    w = draw(st.integers(dw * (kw - 1) + 1, 12))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    pb, pr = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, cin=draw(st.one_of(st.integers(1, 9), st.just(40))),
                cout=draw(st.integers(1, 7)), kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, oh=oh, ow=ow)


@EXACT
@given(conv_s16_cases(), st.sampled_from(["uniform", "small", "extremes", "worst"]),
       st.sampled_from(["none", "small", "large"]), st.integers(-4, 4), acts, st.integers(0, 2**32 - 1), st.booleans())
def test_conv2d_s16(lib, case, data, bias, centre, act, seed, column):
    """``column``: with the scratch mcu_conv2d_s16_get_buffer_size asks for (each window gathered into one
    column), else without (each kernel row's in-bounds run summed where it lies)."""
    lib.mcu_conv2d_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(Conv2dS16Params),
                                   ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
    lib.mcu_conv2d_s16.restype = ctypes.c_int
    rng = np.random.default_rng(seed)
    n, cin, cout, kh, kw = case["n"], case["cin"], case["cout"], case["kh"], case["kw"]
    x = int16_data(rng, (n, case["h"], case["w"], cin), data)
    w = int8_weights(rng, (cout, kh, kw, cin), "worst" if data == "worst" else "uniform")
    b = biases64(rng, cout, bias)
    m = multipliers(rng, cout, False)
    s = np.clip(s16_shift(kh * kw * cin, centre) + rng.integers(-3, 4, size=cout), -31, SHIFT_MAX).astype(np.int32)
    out_shape = (n, case["oh"], case["ow"], cout)
    p = Conv2dS16Params(cb.Shape4(*x.shape), cb.Shape4(*out_shape), kh, kw, case["sh"], case["sw"], case["pt"],
                        case["pl"], case["dh"], case["dw"], act[0], act[1])
    q = cb.Quant(m, s, cout)
    out = np.zeros(out_shape, dtype=np.int16)
    lib.mcu_conv2d_s16_get_buffer_size.argtypes = [ctypes.POINTER(Conv2dS16Params)]
    lib.mcu_conv2d_s16_get_buffer_size.restype = ctypes.c_int32
    size = lib.mcu_conv2d_s16_get_buffer_size(ctypes.byref(p)) if column else 0
    assert size == (0 if kh * kw == 1 or not column else 2 * kh * kw * cin)
    buf = np.zeros(max(size, 2) // 2, dtype=np.int16)
    ctx = cb.Context(buf.ctypes.data, size) if column else None
    status = lib.mcu_conv2d_s16(None if ctx is None else ctypes.byref(ctx), ctypes.byref(p), ctypes.byref(q.struct),
                                ptr(x), ptr(w), None if b is None else ptr(b), ptr(out))
    assert status == MCU_OK
    want = conv2d_s16(x, w, b, m, s, stride=(case["sh"], case["sw"]), padding=(case["pt"], case["pl"]),
                      dilation=(case["dh"], case["dw"]), out_hw=(case["oh"], case["ow"]), act_min=act[0],
                      act_max=act[1])
    assert_equal(out, want)


CMSIS_CONV_S16_SOURCES = ("ConvolutionFunctions/arm_convolve_s16.c",
                          "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s16.c",
                          "ConvolutionFunctions/arm_nn_mat_mult_kernel_s16.c")


@pytest.fixture(scope="module")
def cmsis_conv():
    """CMSIS-NN's arm_convolve_s16 from CMSIS_NN_PATH, as a host library (its portable path)."""
    root = cmsis_nn_root(CMSIS_CONV_S16_SOURCES, "arm_convolve_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_CONV_S16_SOURCES], "conv_s16")
    handle.arm_convolve_s16.argtypes = [_P] * 11
    handle.arm_convolve_s16.restype = ctypes.c_int
    handle.arm_convolve_s16_get_buffer_size.argtypes = [_P] * 2
    handle.arm_convolve_s16_get_buffer_size.restype = ctypes.c_int32
    return handle





class _BiasData(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("is_int32_bias", ctypes.c_bool)]


@settings(max_examples=150, deadline=None)
@given(conv_s16_cases(), st.sampled_from(["uniform", "small", "extremes"]), st.sampled_from(["none", "small", "large"]),
       st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_conv2d_s16_equals_cmsis_nn(lib, cmsis_conv, case, data, bias, centre, act, seed):
    """arm_convolve_s16 with an int64 bias: the same int16 outputs. CMSIS-NN sums a pixel's products in an int32
    (ours exactly), so the data stays where no sum leaves int32 (no all-extreme windows)."""
    lib.mcu_conv2d_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(Conv2dS16Params),
                                   ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
    lib.mcu_conv2d_s16.restype = ctypes.c_int
    rng = np.random.default_rng(seed)
    n, cin, cout, kh, kw = case["n"], case["cin"], case["cout"], case["kh"], case["kw"]
    x = int16_data(rng, (n, case["h"], case["w"], cin), data)
    w = int8_weights(rng, (cout, kh, kw, cin), "uniform")
    b = biases64(rng, cout, bias)
    m = multipliers(rng, cout, False)
    s = np.clip(s16_shift(kh * kw * cin, centre) + rng.integers(-3, 4, size=cout), -31, SHIFT_MAX).astype(np.int32)
    out_shape = (n, case["oh"], case["ow"], cout)
    p = Conv2dS16Params(cb.Shape4(*x.shape), cb.Shape4(*out_shape), kh, kw, case["sh"], case["sw"], case["pt"],
                        case["pl"], case["dh"], case["dw"], act[0], act[1])
    q = cb.Quant(m, s, cout)
    ours = np.zeros(out_shape, dtype=np.int16)
    assert lib.mcu_conv2d_s16(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(w),
                              None if b is None else ptr(b), ptr(ours)) == MCU_OK
    in_d, f_d = Dims(n, case["h"], case["w"], cin), Dims(cout, kh, kw, cin)
    b_d, o_d = Dims(1, 1, 1, cout), Dims(*out_shape)
    size = cmsis_conv.arm_convolve_s16_get_buffer_size(ctypes.byref(in_d), ctypes.byref(f_d))
    buf = np.zeros(max(size, 4), dtype=np.int8)
    ctx = cb.Context(buf.ctypes.data, size)
    conv = ConvParams(0, 0, Tile(case["sw"], case["sh"]), Tile(case["pl"], case["pt"]),
                       Tile(case["dw"], case["dh"]), Act(*act))
    mm, ss = np.ascontiguousarray(m), np.ascontiguousarray(s)
    quant = PerChannel(mm.ctypes.data, ss.ctypes.data)
    bias_data = _BiasData(None if b is None else b.ctypes.data, False)
    theirs = np.zeros(out_shape, dtype=np.int16)
    assert cmsis_conv.arm_convolve_s16(ctypes.byref(ctx), ctypes.byref(conv), ctypes.byref(quant),
                                       ctypes.byref(in_d), ptr(x), ctypes.byref(f_d), ptr(w), ctypes.byref(b_d),
                                       ctypes.byref(bias_data), ctypes.byref(o_d), ptr(theirs)) == 0
    assert_equal(ours, theirs)
