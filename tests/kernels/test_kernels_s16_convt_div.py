"""mcu_conv_transpose2d_s16 (and its phase-packed form for dilation 1) and mcu_div_s16 (w8a16's transposed convolution
and quotient of two tensors; ours, CMSIS-NN has neither at 16 bits) against the Python integer reference
(mcu/reference/s16.py, s16_act.py) over hypothesis-drawn shapes and extremes: strides, dilations, paddings and
output paddings, channel counts past the kernel's 256-product partial sums and its block of 32 output channels,
int16 and int8 extremes (sums that leave int32), 64-bit biases, every shift the 16x8 requantization takes; for the
quotient zero divisors, INT16_MIN, every fractional bit count and saturated quotients. The transposed kernels also
on the emulated DSP build."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE, MCU_OK, ptr
from host_builds import build_emulated_lib
from mcu.reference.conv import phase_pack, transposed_out_size
from mcu.reference.s16 import INT16_MAX, INT16_MIN, SHIFT_MAX, conv_transpose2d_s16
from mcu.reference.s16_act import DIV_MAX_BITS, div_params, div_s16
from s8_cases import assert_equal
from test_kernels_s16 import Conv2dS16Params, acts, biases64, int8_weights, int16_data, multipliers, s16_shift

_P = ctypes.c_void_p
CASES = settings(max_examples=80, deadline=None)


class DivS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("size", "frac_bits", "out_multiplier", "out_shift", "act_min",
                                               "act_max")]


def _bind(handle: ctypes.CDLL) -> ctypes.CDLL:
    handle.mcu_conv_transpose2d_s16.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(Conv2dS16Params),
                                                ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
    handle.mcu_conv_transpose2d_s16.restype = ctypes.c_int
    handle.mcu_conv_transpose2d_phased_s16.argtypes = handle.mcu_conv_transpose2d_s16.argtypes
    handle.mcu_conv_transpose2d_phased_s16.restype = ctypes.c_int
    handle.mcu_div_s16.argtypes = [ctypes.POINTER(DivS16Params), _P, _P, _P]
    handle.mcu_div_s16.restype = ctypes.c_int
    return handle


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (the plain path) and the DSP path emulated on the host (SMLAD)."""
    return _bind(cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib())))


@pytest.fixture(scope="module")
def host():
    return _bind(cb.lib())


@st.composite
def convt_cases(draw, phased: bool = False):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = (1, 1) if phased else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pt, pl = draw(st.integers(0, dh * (kh - 1))), draw(st.integers(0, dw * (kw - 1)))
    # PyTorch: output_padding below the stride or the dilation
    oph, opw = draw(st.integers(0, max(sh, dh) - 1)), draw(st.integers(0, max(sw, dw) - 1))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    oh, ow = transposed_out_size(h, kh, sh, pt, dh, oph), transposed_out_size(w, kw, sw, pl, dw, opw)
    if oh < 1 or ow < 1:
        oh, ow = max(oh, 1), max(ow, 1)  # (any output size is a valid window over the output)
    # (300 channels: windows past the phased kernel's column and past 256 products)
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, cin=draw(st.one_of(st.integers(1, 9), st.just(300))),
                cout=draw(st.one_of(st.integers(1, 7), st.integers(33, 37))), kh=kh, kw=kw, sh=sh, sw=sw, dh=dh,
                dw=dw, pt=pt, pl=pl, oh=oh, ow=ow)


def _convt(lib, case, x, w, b, m, s, act, phased: bool = False):
    """``phased``: mcu_conv_transpose2d_phased_s16 on the weights packed by output phase."""
    n, cout = case["n"], case["cout"]
    out = np.zeros((n, case["oh"], case["ow"], cout), dtype=np.int16)
    p = Conv2dS16Params(cb.Shape4(*x.shape), cb.Shape4(*out.shape), case["kh"], case["kw"], case["sh"], case["sw"],
                        case["pt"], case["pl"], case["dh"], case["dw"], act[0], act[1])
    q = cb.Quant(m, s, cout)
    fn = lib.mcu_conv_transpose2d_phased_s16 if phased else lib.mcu_conv_transpose2d_s16
    packed = np.ascontiguousarray(phase_pack(w, case["sh"], case["sw"])) if phased else w
    status = fn(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed), None if b is None else ptr(b),
                ptr(out))
    return status, out


@CASES
@given(st.booleans().flatmap(lambda phased: st.tuples(st.just(phased), convt_cases(phased))),
       st.sampled_from(["uniform", "small", "extremes", "worst"]), st.sampled_from(["none", "small", "large"]),
       st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_conv_transpose2d_s16(lib, form, data, bias, centre, act, seed):
    """Either kernel (``form``: phased, case), the phased one on dilation 1."""
    phased, case = form
    rng = np.random.default_rng(seed)
    cin, cout, kh, kw = case["cin"], case["cout"], case["kh"], case["kw"]
    x = int16_data(rng, (case["n"], case["h"], case["w"], cin), data)
    w = int8_weights(rng, (cout, kh, kw, cin), "worst" if data == "worst" else "uniform")
    b = biases64(rng, cout, bias)
    m = multipliers(rng, cout, False)
    taps = -(-kh // case["sh"]) * -(-kw // case["sw"]) * cin  # products a pixel sums, about
    s = np.clip(s16_shift(taps, centre) + rng.integers(-3, 4, size=cout), -31, SHIFT_MAX).astype(np.int32)
    status, out = _convt(lib, case, x, w, b, m, s, act, phased)
    assert status == MCU_OK
    want = conv_transpose2d_s16(x, w, b, m, s, stride=(case["sh"], case["sw"]), padding=(case["pt"], case["pl"]),
                                dilation=(case["dh"], case["dw"]), out_hw=(case["oh"], case["ow"]), act_min=act[0],
                                act_max=act[1])
    assert_equal(out, want)


@pytest.mark.parametrize("phased", [False, True])
def test_conv_transpose2d_s16_sums_past_int32(host, phased):
    """INT16_MIN inputs against -128 weights: 300 channels a tap, 9 taps a pixel, each product +2^22, so the
    sum passes 2^31 by far; the exact 64-bit sum requantizes to the reference's codes (not a wrapped one)."""
    case = dict(n=1, h=3, w=3, cin=300, cout=5, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pt=1, pl=1, oh=3, ow=3)
    x = np.full((1, 3, 3, 300), INT16_MIN, dtype=np.int16)
    w = np.full((5, 3, 3, 300), -128, dtype=np.int8)
    m, s = np.full(5, 2**30, np.int32), np.full(5, -20, np.int32)
    status, out = _convt(host, case, x, w, None, m, s, (INT16_MIN, INT16_MAX), phased)
    assert status == MCU_OK
    want = conv_transpose2d_s16(x, w, None, m, s, padding=(1, 1), out_hw=(3, 3))
    assert_equal(out, want)
    assert out[0, 1, 1, 0] == (9 * 300 * 2**22) >> 21  # exact: 9 taps of 300 products of 2^22, times 2^-21


def test_conv_transpose2d_s16_refuses_bad_arguments(host):
    case = dict(n=1, h=2, w=2, cin=2, cout=3, kh=2, kw=2, sh=2, sw=2, dh=1, dw=1, pt=0, pl=0, oh=4, ow=4)
    x = np.zeros((1, 2, 2, 2), dtype=np.int16)
    w = np.zeros((3, 2, 2, 2), dtype=np.int8)
    m, s = np.full(3, 2**30, np.int32), np.full(3, -2, np.int32)
    assert _convt(host, case, x, w, None, m, s, (INT16_MIN, INT16_MAX))[0] == MCU_OK
    bad_shift = np.array([-2, SHIFT_MAX + 1, -2], np.int32)
    assert _convt(host, case, x, w, None, m, bad_shift, (INT16_MIN, INT16_MAX))[0] == MCU_ERR_INVALID_ARG
    assert _convt(host, case, x, w, None, m, s, (5, 4))[0] == MCU_ERR_INVALID_ARG
    assert _convt(host, {**case, "oh": 0}, x, w, None, m, s, (INT16_MIN, INT16_MAX))[0] == MCU_ERR_SHAPE
    dilated = {**case, "dh": 2, "oh": 5}
    assert _convt(host, dilated, x, w, None, m, s, (INT16_MIN, INT16_MAX), phased=True)[0] == MCU_ERR_INVALID_ARG
    # the output over the input: refused
    out = np.zeros(64, dtype=np.int16)
    p = Conv2dS16Params(cb.Shape4(1, 2, 2, 2), cb.Shape4(1, 4, 4, 3), 2, 2, 2, 2, 0, 0, 1, 1, INT16_MIN, INT16_MAX)
    q = cb.Quant(m, s, 3)
    assert host.mcu_conv_transpose2d_s16(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(out), ptr(w), None,
                                         ptr(out)) == MCU_ERR_INVALID_ARG


def _div(lib, a, b, bits, m, s, act, out=None):
    out = np.zeros_like(a) if out is None else out
    p = DivS16Params(a.size, bits, m, s, act[0], act[1])
    return lib.mcu_div_s16(ctypes.byref(p), ptr(a), ptr(b), ptr(out)), out


def _operand(rng, n: int, mode: str) -> np.ndarray:
    if mode == "extremes":
        return rng.choice(np.array([INT16_MIN, INT16_MIN + 1, -1, 0, 1, INT16_MAX], dtype=np.int16), size=n)
    if mode == "small":
        return rng.integers(-5, 6, size=n).astype(np.int16)
    return rng.integers(INT16_MIN, INT16_MAX + 1, size=n).astype(np.int16)


@CASES
@given(n=st.integers(1, 200), a_mode=st.sampled_from(["uniform", "small", "extremes"]),
       b_mode=st.sampled_from(["uniform", "small", "extremes"]),
       bits=st.one_of(st.integers(0, DIV_MAX_BITS), st.sampled_from([0, 15, 16, 17, DIV_MAX_BITS])),
       shift=st.one_of(st.integers(-31, 30), st.sampled_from([-31, -16, -15, 0, 30])), act=acts,
       in_place=st.sampled_from([None, "a", "b"]), seed=st.integers(0, 2**32 - 1))
def test_div_s16(host, n, a_mode, b_mode, bits, shift, act, in_place, seed):
    rng = np.random.default_rng(seed)
    a, b = _operand(rng, n, a_mode), _operand(rng, n, b_mode)
    m = int(multipliers(rng, 1, True)[0])
    want = div_s16(a, b, bits, m, shift, act[0], act[1])
    out = {"a": a, "b": b}.get(in_place or "")
    status, got = _div(host, a, b, bits, m, shift, act, out)
    assert status == MCU_OK
    assert_equal(got, want)


@CASES
@given(s_a=st.floats(1e-5, 1e2), s_b=st.floats(1e-5, 1e2), s_out=st.floats(1e-5, 1e2), seed=st.integers(0, 2**32 - 1))
def test_div_s16_is_within_an_output_step_of_the_real_quotient(host, s_a, s_b, s_out, seed):
    """With the parameters div_params derives from three scales, every quotient inside the output's range lands
    within one output step of the real a s_a / (b s_b), and every one past it on the end it passed."""
    rng = np.random.default_rng(seed)
    a, b = _operand(rng, 300, "uniform"), _operand(rng, 300, "uniform")
    b[:5] = [1, -1, 2, INT16_MIN, 0]
    a[:5] = [INT16_MIN, INT16_MIN, 7, INT16_MAX, 3]
    p = div_params(s_a, s_b, s_out)
    status, got = _div(host, a, b, p["frac_bits"], p["out_multiplier"], p["out_shift"], (INT16_MIN, INT16_MAX))
    assert status == MCU_OK
    assert_equal(got, div_s16(a, b, **p))
    nz = b != 0
    real = a[nz].astype(np.float64) * s_a / (b[nz].astype(np.float64) * s_b) / s_out  # in output steps
    inside = np.abs(real) < INT16_MAX - 1
    assert np.all(np.abs(got[nz][inside] - real[inside]) <= 1.0)
    assert np.all(got[nz][~inside] == np.where(real[~inside] > 0, INT16_MAX, INT16_MIN))


def test_div_s16_zero_divisors_and_bad_arguments(host):
    a = np.array([5, -5, 0, INT16_MIN], dtype=np.int16)
    b = np.zeros(4, dtype=np.int16)
    status, got = _div(host, a, b, 16, 2**30, -15, (-100, 200))
    assert status == MCU_OK
    assert_equal(got, np.array([200, -100, 0, -100], dtype=np.int16))
    assert _div(host, a, b, DIV_MAX_BITS + 1, 2**30, -15, (INT16_MIN, INT16_MAX))[0] == MCU_ERR_INVALID_ARG
    assert _div(host, a, b, -1, 2**30, -15, (INT16_MIN, INT16_MAX))[0] == MCU_ERR_INVALID_ARG
    assert _div(host, a, b, 16, -1, -15, (INT16_MIN, INT16_MAX))[0] == MCU_ERR_INVALID_ARG
    wide = np.zeros(8, dtype=np.int16)
    p = DivS16Params(4, 16, 2**30, -15, INT16_MIN, INT16_MAX)
    assert host.mcu_div_s16(ctypes.byref(p), ptr(wide[1:]), ptr(b), ptr(wide)) == MCU_ERR_INVALID_ARG
