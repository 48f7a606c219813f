"""The 16x8 kernels with weights packed as int16 at build time (mcu_linear_packed_s16, mcu_conv2d_packed_s16,
the optimized backend's w8a16 kernels on DSP cores) against the Python integer reference over hypothesis-drawn
shapes: channel counts with and without a last partial block of 4, past one chunk of 32 channels, tap counts past the 256-product partial sums
and not a multiple of 4, windows in the padding, int16 and int8 extremes, 64-bit biases. The host build runs
the kernels' C loop over the packed order; their assembly loop runs on the simulated cores (the w8a16 matrix
slice compares whole models with the reference)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from host_builds import build_emulated_lib
from mcu.backends.optimized.packed16 import pack_rows
from mcu.reference.s16 import INT16_MAX, INT16_MIN, conv2d_s16, linear_s16

_P = ctypes.c_void_p
CASES = settings(max_examples=50, deadline=None)
ACTS = st.sampled_from([(INT16_MIN, INT16_MAX), (0, INT16_MAX), (-3000, 2000), (-1, INT16_MAX)])


class LinearS16Params(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int32), ("in_features", ctypes.c_int32), ("out_features", ctypes.c_int32),
                ("act_min", ctypes.c_int32), ("act_max", ctypes.c_int32)]


class Conv2dS16Params(ctypes.Structure):
    _fields_ = [("input", cb.Shape4), ("output", cb.Shape4), ("kernel_h", ctypes.c_int32),
                ("kernel_w", ctypes.c_int32), ("stride_h", ctypes.c_int32), ("stride_w", ctypes.c_int32),
                ("pad_top", ctypes.c_int32), ("pad_left", ctypes.c_int32), ("dilation_h", ctypes.c_int32),
                ("dilation_w", ctypes.c_int32), ("act_min", ctypes.c_int32), ("act_max", ctypes.c_int32)]


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (the plain loops) and the DSP paths emulated on the host (SMLAD's word pairs)."""
    handle = cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib()))
    q = ctypes.POINTER(cb.PerChannelQuant)
    handle.mcu_linear_packed_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(LinearS16Params), q,
                                             _P, _P, _P, _P]
    handle.mcu_conv2d_packed_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(Conv2dS16Params), q,
                                             _P, _P, _P, _P]
    handle.mcu_linear_packed_s16.restype = handle.mcu_conv2d_packed_s16.restype = ctypes.c_int
    return handle


def _data(rng, shape, extremes: bool, low, high, picks):
    if extremes:
        return rng.choice(np.array(picks), size=shape)
    return rng.integers(low, high + 1, size=shape)


def _layer(rng, cout: int, taps: int, extremes: bool, bias: str):
    w = _data(rng, (cout, taps), extremes, -128, 127, [-128, -127, 127]).astype(np.int8)
    b = None if bias == "none" else rng.integers(-(2**(30 if bias == "small" else 40)),
                                                 2**(30 if bias == "small" else 40), size=cout, dtype=np.int64)
    m = rng.integers(2**30, 2**31, size=cout, dtype=np.int64).astype(np.int32)
    auto = int(round(np.log2(2**13 / (2**14 * 74 * np.sqrt(taps))))) + 1
    s = np.clip(auto + rng.integers(-3, 4, size=cout), -31, 14).astype(np.int32)
    return w, b, m, s


@CASES
@given(batch=st.integers(1, 3), fin=st.one_of(st.integers(1, 40), st.integers(250, 600)), fout=st.one_of(st.integers(1, 13), st.just(70)),
       extremes=st.booleans(), bias=st.sampled_from(["none", "small", "large"]), act=ACTS,
       seed=st.integers(0, 2**32 - 1))
def test_linear_packed_s16(lib, batch, fin, fout, extremes, bias, act, seed):
    rng = np.random.default_rng(seed)
    x = _data(rng, (batch, fin), extremes, INT16_MIN, INT16_MAX, [INT16_MIN, INT16_MAX, -1, 0]).astype(np.int16)
    w, b, m, s = _layer(rng, fout, fin, extremes, bias)
    packed = pack_rows(w)
    assert packed.dtype == np.int32 and packed.size == (fout * fin + 1) // 2
    q = cb.Quant(m, s, fout)
    out = np.zeros((batch, fout), dtype=np.int16)
    p = LinearS16Params(batch, fin, fout, *act)
    assert lib.mcu_linear_packed_s16(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed),
                                     None if b is None else ptr(b), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, linear_s16(x, w, b, m, s, act_min=act[0], act_max=act[1]))


@CASES
@given(k=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 2), dil=st.integers(1, 2),
       hw=st.integers(3, 7), cin=st.one_of(st.integers(1, 9), st.just(40)), cout=st.one_of(st.integers(1, 9), st.just(37)),
       extremes=st.booleans(), bias=st.sampled_from(["none", "small", "large"]), act=ACTS,
       seed=st.integers(0, 2**32 - 1))
def test_conv2d_packed_s16(lib, k, stride, pad, dil, hw, cin, cout, extremes, bias, act, seed):
    rng = np.random.default_rng(seed)
    if dil * (k - 1) + 1 > hw:
        dil = 1
    pad = min(pad, k - 1) if k > 1 else pad  # a 1x1 kernel's padding: windows wholly in it
    oh = (hw + pad - dil * (k - 1) - 1) // stride + 1
    x = _data(rng, (1, hw, hw, cin), extremes, INT16_MIN, INT16_MAX, [INT16_MIN, INT16_MAX, -1, 0]).astype(np.int16)
    w, b, m, s = _layer(rng, cout, k * k * cin, extremes, bias)
    packed = pack_rows(w)
    q = cb.Quant(m, s, cout)
    out = np.zeros((1, oh, oh, cout), dtype=np.int16)
    p = Conv2dS16Params(cb.Shape4(*x.shape), cb.Shape4(*out.shape), k, k, stride, stride, pad, pad, dil, dil,
                        *act)
    col = np.zeros(k * k * cin + 2, dtype=np.int16)
    ctx = cb.Context(col.ctypes.data, 2 * k * k * cin)
    args = (ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed), None if b is None else ptr(b), ptr(out))
    if k > 1:  # the column is needed
        assert lib.mcu_conv2d_packed_s16(None, *args) == MCU_ERR_INVALID_ARG
    assert lib.mcu_conv2d_packed_s16(ctypes.byref(ctx), *args) == MCU_OK
    want = conv2d_s16(x, w.reshape(cout, k, k, cin), b, m, s, stride=(stride, stride), padding=(pad, pad),
                      dilation=(dil, dil), out_hw=(oh, oh), act_min=act[0], act_max=act[1])
    np.testing.assert_array_equal(out, want)
