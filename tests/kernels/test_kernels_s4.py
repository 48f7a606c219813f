"""The 4-bit weight kernels (w4a8: mcu_conv2d_s4, mcu_depthwise_conv2d_s4, mcu_linear_s4) against the
Python integer reference on the unpacked weights, over hypothesis-drawn shapes (odd channel and feature
counts, so rows and windows start mid-byte), strides, paddings, dilations, groups, zero points,
multipliers, shifts and weights at the 4-bit extremes; and the packing against its definition."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from host_builds import build_emulated_lib
from mcu.layouts import pack_s4
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8
from s8_cases import (EXACT, act_bounds, assert_equal, bias_kinds, biases, conv_cases, conv_shift_centres, data_modes,
                      int8_data, per_channel, shift_for, zero_points)

_P = ctypes.c_void_p
_CP, _QP = ctypes.POINTER(cb.Context), ctypes.POINTER(cb.PerChannelQuant)
_SIGNATURES = {
    "mcu_conv2d_s4": ctypes.POINTER(cb.Conv2dS8Params),
    "mcu_depthwise_conv2d_s4": ctypes.POINTER(cb.DepthwiseConv2dS8Params),
    "mcu_linear_s4": ctypes.POINTER(cb.LinearS8Params),
}
s4_modes = st.sampled_from(["symmetric", "full", "extremes"])


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (the plain paths) and the DSP paths emulated on the host (the dual-MAC loop
    of Cortex-M4/M33/M55)."""
    handle = cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib()))
    for name, params in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = [_CP, params, _QP, _P, _P, _P, _P]
        fn.restype = ctypes.c_int
    return handle


def s4_weights(rng, shape, mode: str) -> np.ndarray:
    """4-bit codes: symmetric [-7, 7] (what the quantizer makes), the full [-8, 7], or only the extremes."""
    if mode == "extremes":
        return rng.choice(np.array([-8, -7, 7], dtype=np.int8), size=shape)
    low = -8 if mode == "full" else -7
    return rng.integers(low, 8, size=shape, dtype=np.int64).astype(np.int8)


def _run(lib, name: str, params_type, params: dict, x, w, b, q, out_shape, scratch: int = 0):
    """The kernel on ``w`` packed, with a context of ``scratch`` bytes (0: none)."""
    p = cb._fields(params_type, params)
    out = np.zeros(out_shape, dtype=np.int8)
    packed = np.ascontiguousarray(pack_s4(w))
    buf = np.zeros(max(scratch, 1), dtype=np.int8)
    ctx = ctypes.byref(cb.Context(buf.ctypes.data, scratch)) if scratch else None
    st_ = getattr(lib, name)(ctx, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed), ptr(b), ptr(out))
    return st_, out


@given(st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_pack_s4_is_two_codes_a_byte_low_first(count, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(-8, 8, size=count).astype(np.int8)
    packed = pack_s4(codes).view(np.uint8)
    assert packed.size == (count + 1) // 2
    low = (packed & 0xF).astype(np.int64)
    high = (packed >> 4).astype(np.int64)
    unpacked = np.stack([low, high], axis=1).reshape(-1)[:count]
    np.testing.assert_array_equal(np.where(unpacked > 7, unpacked - 16, unpacked), codes)
    if count % 2:
        assert high[-1] == 0
    with pytest.raises(ValueError):
        pack_s4(np.array([8], dtype=np.int8))


@EXACT
@given(conv_cases(), s4_modes)
def test_conv2d_s4(lib, case, wmode):
    rng = np.random.default_rng(case["seed"])
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    cin, cout = g * icg, g * ocg
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = s4_weights(rng, (cout, case["kh"], case["kw"], icg), wmode)
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"] * icg), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], groups=g, input_offset=-case["in_zp"],
        output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1],
    )
    status, out = _run(lib, "mcu_conv2d_s4", cb.Conv2dS8Params, params, x, w, b, cb.Quant(m, s, cout),
                       params["output"])
    assert status == MCU_OK
    assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@EXACT
@given(conv_cases(depthwise=True), s4_modes, st.booleans())
def test_depthwise_conv2d_s4(lib, case, wmode, widened):
    """Its own loop without scratch; with its _get_buffer_size of scratch, the weights widened to int8 and
    the int8 depthwise kernel's paths."""
    rng = np.random.default_rng(case["seed"])
    cin, cm = case["channels"], case["ch_mult"]
    cout = cin * cm
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = s4_weights(rng, (case["kh"], case["kw"], cout), wmode)
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"]), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), ch_mult=cm, kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], input_offset=-case["in_zp"], output_offset=case["out_zp"],
        act_min=case["act"][0], act_max=case["act"][1],
    )
    scratch = case["kh"] * case["kw"] * cout if widened else 0
    status, out = _run(lib, "mcu_depthwise_conv2d_s4", cb.DepthwiseConv2dS8Params, params, x, w, b,
                       cb.Quant(m, s, cout), params["output"], scratch)
    assert status == MCU_OK
    assert_equal(out, depthwise_conv2d_s8(x, w, b, m, s, **params))


@EXACT
@given(batch=st.integers(1, 4), fin=st.integers(1, 70), fout=st.integers(1, 20), in_zp=zero_points,
       out_zp=zero_points, act=act_bounds(), bias=bias_kinds, shift=conv_shift_centres,
       pc=st.sampled_from(["same", "varied"]), data=data_modes, wmode=s4_modes, seed=st.integers(0, 2**32 - 1))
def test_linear_s4(lib, batch, fin, fout, in_zp, out_zp, act, bias, shift, pc, data, wmode, seed):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (batch, fin), data)
    w = s4_weights(rng, (fout, fin), wmode)
    b = biases(rng, fout, bias)
    m, s = per_channel(rng, fout, shift_for(shift, fin), pc)
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = _run(lib, "mcu_linear_s4", cb.LinearS8Params, params, x, w, b, cb.Quant(m, s, fout),
                       (batch, fout))
    assert status == MCU_OK
    assert_equal(out, linear_s8(x, w, b, m, s, **params))


def test_output_on_the_input_is_refused(lib):
    """The s4 kernels promise no overlap: an output on its input is an argument error, not wrong bytes."""
    x = np.arange(-20, 20, dtype=np.int8).reshape(1, 2, 4, 5)
    w = np.ones((5, 1, 1, 5), dtype=np.int8)
    q = cb.Quant(2**30, -1, 5)
    params = dict(input=x.shape, output=x.shape, kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
                  pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
                  act_max=127)
    p = cb._fields(cb.Conv2dS8Params, params)
    packed = pack_s4(w)
    bias = np.zeros(5, dtype=np.int32)
    assert lib.mcu_conv2d_s4(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed), ptr(bias),
                             ptr(x)) == MCU_ERR_INVALID_ARG
