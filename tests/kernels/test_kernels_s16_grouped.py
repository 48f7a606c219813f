"""mcu_conv2d_grouped_s16 and mcu_conv_transpose2d_grouped_s16 (w8a16's grouped convolutions; ours, CMSIS-NN's
arm_convolve_s16 takes one group) against the Python integer reference (mcu/reference/s16.py, each group's channels
on its own) over hypothesis-drawn groups, shapes, strides, dilations and paddings, group widths past the 256-product
partial sums and blocks of four channels that would cross a group's end, int16 and int8 extremes (sums that leave
int32), 64-bit biases and every shift the 16x8 requantization takes; on the host and the emulated DSP build. The
grouped convolution also equals CMSIS-NN's arm_convolve_s16 run on each group's channels (CMSIS_NN_PATH)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_SHAPE, MCU_OK, ptr
from cmsis_nn_host import Act, ConvParams, Dims, PerChannel, Tile
from host_builds import build_emulated_lib
from mcu.reference.conv import transposed_out_size
from mcu.reference.s16 import INT16_MAX, INT16_MIN, SHIFT_MAX, conv2d_s16, conv_transpose2d_s16
from s8_cases import assert_equal
from test_kernels_s16 import (Conv2dS16Params, _BiasData, acts, biases64, cmsis_conv, int8_weights,  # noqa: F401
                              int16_data, multipliers, s16_shift)

_P = ctypes.c_void_p
CASES = settings(max_examples=80, deadline=None)
FUNCTIONS = ("mcu_conv2d_grouped_s16", "mcu_conv_transpose2d_grouped_s16")


class GroupedS16Params(ctypes.Structure):
    _fields_ = [("conv", Conv2dS16Params), ("groups", ctypes.c_int32)]


def _bind(handle: ctypes.CDLL) -> ctypes.CDLL:
    for name in FUNCTIONS:
        fn = getattr(handle, name)
        fn.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(GroupedS16Params),
                       ctypes.POINTER(cb.PerChannelQuant), _P, _P, _P, _P]
        fn.restype = ctypes.c_int
    return handle


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (the plain path) and the DSP path emulated on the host (SMLAD)."""
    return _bind(cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib())))


@pytest.fixture(scope="module")
def host():
    return _bind(cb.lib())


@st.composite
def grouped_cases(draw, transposed: bool):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    groups = draw(st.integers(1, 4))
    # (300 input channels a group: past 256 products a tap; 5-7 output channels: a block of four, then two or one)
    icg, ocg = draw(st.one_of(st.integers(1, 6), st.just(300))), draw(st.integers(1, 7))
    if transposed:
        pt, pl = draw(st.integers(0, dh * (kh - 1))), draw(st.integers(0, dw * (kw - 1)))
        h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        oph, opw = draw(st.integers(0, max(sh, dh) - 1)), draw(st.integers(0, max(sw, dw) - 1))
        oh = max(transposed_out_size(h, kh, sh, pt, dh, oph), 1)
        ow = max(transposed_out_size(w, kw, sw, pl, dw, opw), 1)
    else:
        h, w = draw(st.integers(dh * (kh - 1) + 1, 9)), draw(st.integers(dw * (kw - 1) + 1, 9))
        pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
        pb, pr = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
        oh, ow = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, groups=groups, cin=icg * groups, cout=ocg * groups, kh=kh,
                kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, oh=oh, ow=ow, transposed=transposed)


def _run(lib, case, x, w, b, m, s, act):
    out = np.zeros((case["n"], case["oh"], case["ow"], case["cout"]), dtype=np.int16)
    conv = Conv2dS16Params(cb.Shape4(*x.shape), cb.Shape4(*out.shape), case["kh"], case["kw"], case["sh"],
                           case["sw"], case["pt"], case["pl"], case["dh"], case["dw"], act[0], act[1])
    p = GroupedS16Params(conv, case["groups"])
    q = cb.Quant(m, s, case["cout"])
    fn = getattr(lib, FUNCTIONS[case["transposed"]])
    status = fn(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(w), None if b is None else ptr(b),
                ptr(out))
    return status, out


def _reference(case, x, w, b, m, s, act):
    kw = dict(stride=(case["sh"], case["sw"]), padding=(case["pt"], case["pl"]), dilation=(case["dh"], case["dw"]),
              out_hw=(case["oh"], case["ow"]), act_min=act[0], act_max=act[1], groups=case["groups"])
    return (conv_transpose2d_s16 if case["transposed"] else conv2d_s16)(x, w, b, m, s, **kw)


@CASES
@given(st.booleans().flatmap(grouped_cases), st.sampled_from(["uniform", "small", "extremes", "worst"]),
       st.sampled_from(["none", "small", "large"]), st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_grouped_s16(lib, case, data, bias, centre, act, seed):
    rng = np.random.default_rng(seed)
    icg = case["cin"] // case["groups"]
    x = int16_data(rng, (case["n"], case["h"], case["w"], case["cin"]), data)
    w = int8_weights(rng, (case["cout"], case["kh"], case["kw"], icg), "worst" if data == "worst" else "extremes"
                     if data == "extremes" else "uniform")
    b = biases64(rng, case["cout"], bias)
    m = multipliers(rng, case["cout"], False)
    s = np.clip(s16_shift(case["kh"] * case["kw"] * icg, centre) + rng.integers(-3, 4, size=case["cout"]), -31,
                SHIFT_MAX).astype(np.int32)
    status, out = _run(lib, case, x, w, b, m, s, act)
    assert status == MCU_OK
    assert_equal(out, _reference(case, x, w, b, m, s, act))


@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_s16_sums_past_int32(host, transposed):
    """INT16_MIN inputs against -128 weights, 300 channels a group and 9 taps: each product +2^22, a pixel's sum
    far past 2^31, summed exactly (the centre pixel 9 * 300 * 2^22, times 2^-21)."""
    case = dict(n=1, h=3, w=3, groups=2, cin=600, cout=6, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, pt=1, pl=1, oh=3,
                ow=3, transposed=transposed)
    x = np.full((1, 3, 3, 600), INT16_MIN, dtype=np.int16)
    w = np.full((6, 3, 3, 300), -128, dtype=np.int8)
    m, s = np.full(6, 2**30, np.int32), np.full(6, -20, np.int32)
    status, out = _run(host, case, x, w, None, m, s, (INT16_MIN, INT16_MAX))
    assert status == MCU_OK
    assert_equal(out, _reference(case, x, w, None, m, s, (INT16_MIN, INT16_MAX)))
    assert out[0, 1, 1, 5] == (9 * 300 * 2**22) >> 21


@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_s16_refuses_groups_that_do_not_divide(host, transposed):
    case = dict(n=1, h=3, w=3, groups=2, cin=4, cout=6, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pt=0, pl=0, oh=3, ow=3,
                transposed=transposed)
    x, w = np.zeros((1, 3, 3, 4), np.int16), np.zeros((6, 1, 1, 2), np.int8)
    m, s = np.full(6, 2**30, np.int32), np.full(6, -2, np.int32)
    assert _run(host, case, x, w, None, m, s, (INT16_MIN, INT16_MAX))[0] == MCU_OK
    for bad in ({"groups": 3}, {"groups": 0}, {"groups": 4}):
        assert _run(host, {**case, **bad}, x, w, None, m, s, (INT16_MIN, INT16_MAX))[0] == MCU_ERR_SHAPE


@settings(max_examples=60, deadline=None)
@given(grouped_cases(False), st.sampled_from(["uniform", "small", "extremes"]),
       st.sampled_from(["none", "small", "large"]), st.integers(-4, 4), acts, st.integers(0, 2**32 - 1))
def test_grouped_s16_equals_cmsis_nn_per_group(host, cmsis_conv, case, data, bias, centre, act, seed):
    """Each group's channels equal CMSIS-NN's arm_convolve_s16 on that group's input channels, weights, biases and
    multipliers (an int32 window sum in CMSIS-NN: the data stays where none leaves int32, and 300-channel groups
    out, where arm_convolve_s16's int32 sum of a window would wrap)."""
    if case["cin"] // case["groups"] == 300:
        case = {**case, "cin": 5 * case["groups"]}
    rng = np.random.default_rng(seed)
    groups, icg, ocg = case["groups"], case["cin"] // case["groups"], case["cout"] // case["groups"]
    n, kh, kw = case["n"], case["kh"], case["kw"]
    x = int16_data(rng, (n, case["h"], case["w"], case["cin"]), data)
    w = int8_weights(rng, (case["cout"], kh, kw, icg), "uniform")
    b = biases64(rng, case["cout"], bias)
    m = multipliers(rng, case["cout"], False)
    s = np.clip(s16_shift(kh * kw * icg, centre) + rng.integers(-3, 4, size=case["cout"]), -31,
                SHIFT_MAX).astype(np.int32)
    status, ours = _run(host, case, x, w, b, m, s, act)
    assert status == MCU_OK
    conv = ConvParams(0, 0, Tile(case["sw"], case["sh"]), Tile(case["pl"], case["pt"]),
                      Tile(case["dw"], case["dh"]), Act(*act))
    for g in range(groups):
        xi, yo = slice(g * icg, (g + 1) * icg), slice(g * ocg, (g + 1) * ocg)
        xg, wg = np.ascontiguousarray(x[..., xi]), np.ascontiguousarray(w[yo])
        bg = None if b is None else np.ascontiguousarray(b[yo])
        mg, sg = np.ascontiguousarray(m[yo]), np.ascontiguousarray(s[yo])
        in_d, f_d = Dims(n, case["h"], case["w"], icg), Dims(ocg, kh, kw, icg)
        b_d, o_d = Dims(1, 1, 1, ocg), Dims(n, case["oh"], case["ow"], ocg)
        size = cmsis_conv.arm_convolve_s16_get_buffer_size(ctypes.byref(in_d), ctypes.byref(f_d))
        buf = np.zeros(max(size, 4), dtype=np.int8)
        ctx = cb.Context(buf.ctypes.data, size)
        theirs = np.zeros((n, case["oh"], case["ow"], ocg), dtype=np.int16)
        assert cmsis_conv.arm_convolve_s16(ctypes.byref(ctx), ctypes.byref(conv),
                                           ctypes.byref(PerChannel(mg.ctypes.data, sg.ctypes.data)),
                                           ctypes.byref(in_d), ptr(xg), ctypes.byref(f_d), ptr(wg),
                                           ctypes.byref(b_d), ctypes.byref(_BiasData(None if bg is None else
                                                                                     bg.ctypes.data, False)),
                                           ctypes.byref(o_d), ptr(theirs)) == 0
        assert_equal(ours[..., yo], theirs)
