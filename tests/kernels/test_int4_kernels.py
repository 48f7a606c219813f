"""4-bit groupwise weights: packing, and the C kernel mcu_linear_w4_f32 equal to its Python
reference (mcu/reference/int4.py) bit for bit over shapes, group sizes, scales and the int4 extremes."""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind
import cbind_s8
from host_builds import build_emulated_lib
from mcu.reference import int4

_P = ctypes.c_void_p


class LinearW4Params(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int32), ("in_features", ctypes.c_int32), ("out_features", ctypes.c_int32),
                ("group_size", ctypes.c_int32), ("act_min", ctypes.c_float), ("act_max", ctypes.c_float)]


def _lib():
    lib = cbind.lib()
    lib.mcu_linear_w4_f32.argtypes = [_P] * 6
    lib.mcu_linear_w4_s8.argtypes = [_P] * 7
    lib.mcu_linear_w4_s8_get_buffer_size.argtypes = [_P]
    return lib


def _run(x, packed, scales, bias, group, lo=-np.inf, hi=np.inf):
    out = np.full((x.shape[0], packed.shape[0]), np.nan, np.float32)
    p = LinearW4Params(x.shape[0], x.shape[1], packed.shape[0], group, lo, hi)
    status = _lib().mcu_linear_w4_f32(ctypes.addressof(p), cbind.ptr(x), cbind.ptr(packed), cbind.ptr(scales),
                                      cbind.ptr(bias), cbind.ptr(out))
    return status, out


def test_pack_roundtrip_and_nibble_order() -> None:
    values = np.array([[-8, 7, 0, -1, 3, -5]], np.int8)
    packed = int4.pack_int4(values)
    assert packed.tolist() == [[0x78, 0xF0, 0xB3]]  # element 2k low nibble, 2k+1 high nibble
    np.testing.assert_array_equal(int4.unpack_int4(packed), values)
    every = np.array(np.meshgrid(np.arange(-8, 8), np.arange(-8, 8))).reshape(2, -1).T.reshape(1, -1)
    np.testing.assert_array_equal(int4.unpack_int4(int4.pack_int4(every)), every)
    with pytest.raises(ValueError):
        int4.pack_int4(np.array([[8, 0]]))
    with pytest.raises(ValueError):
        int4.pack_int4(np.array([[1, 2, 3]]))


@st.composite
def w4_case(draw):
    group = draw(st.sampled_from([2, 4, 8, 16, 32, 64]))
    batch, groups, nout = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 24))
    nin = groups * group
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    x = (rng.standard_normal((batch, nin)) * draw(st.sampled_from([1e-3, 1.0, 30.0]))).astype(np.float32)
    kind = draw(st.sampled_from(["random", "extremes", "zeros"]))
    if kind == "random":
        q = rng.integers(-8, 8, (nout, nin)).astype(np.int8)
    elif kind == "extremes":
        q = rng.choice(np.array([-8, 7], np.int8), (nout, nin))
    else:
        q = np.zeros((nout, nin), np.int8)
    scales = (rng.uniform(0.5, 2.0, (nout, groups)) * draw(st.sampled_from([1e-4, 0.05, 3.0]))).astype(np.float32)
    bias = rng.standard_normal(nout).astype(np.float32) if draw(st.booleans()) else None
    lo, hi = draw(st.sampled_from([(-np.inf, np.inf), (0.0, np.inf), (-0.5, 0.5)]))
    return x, q, scales, bias, group, lo, hi


@settings(max_examples=40, deadline=None)
@given(w4_case())
def test_linear_w4_equals_reference(case) -> None:
    x, q, scales, bias, group, lo, hi = case
    packed = int4.pack_int4(q)
    status, out = _run(x, packed, scales, bias, group, lo, hi)
    assert status == cbind.MCU_OK
    want = int4.linear_w4_f32(x, packed, scales, bias, group, lo, hi)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    # and it is the float layer of the dequantized weights, up to float32 rounding
    w = q.astype(np.float64) * np.repeat(scales.astype(np.float64), group, axis=1)
    exact = np.clip(x.astype(np.float64) @ w.T + (0 if bias is None else bias), lo, hi)
    bound = 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(w).T + 1e-30).max() + 1e-6 * np.abs(exact).max()
    assert np.max(np.abs(out - exact)) <= bound


@pytest.mark.parametrize("group, nin, expect", [(0, 32, cbind.MCU_ERR_SHAPE), (3, 6, cbind.MCU_ERR_SHAPE),
                                                (8, 12, cbind.MCU_ERR_SHAPE), (-2, 8, cbind.MCU_ERR_SHAPE)])
def test_linear_w4_refuses_bad_groups(group: int, nin: int, expect: int) -> None:
    x = np.ones((1, nin), np.float32)
    packed = np.zeros((2, max(nin // 2, 1)), np.uint8)
    scales = np.ones((2, 4), np.float32)
    status, _ = _run(x, packed, scales, None, group)
    assert status == expect


def test_linear_w4_refuses_null_and_overlap() -> None:
    x = np.ones((1, 8), np.float32)
    packed = np.zeros((2, 4), np.uint8)
    scales = np.ones((2, 1), np.float32)
    p = LinearW4Params(1, 8, 2, 8, -np.inf, np.inf)
    lib = _lib()
    assert lib.mcu_linear_w4_f32(ctypes.addressof(p), cbind.ptr(x), None, cbind.ptr(scales), None,
                                 cbind.ptr(x)) == cbind.MCU_ERR_NULL_POINTER
    assert lib.mcu_linear_w4_f32(ctypes.addressof(p), cbind.ptr(x), cbind.ptr(packed), cbind.ptr(scales), None,
                                 cbind.ptr(x)) == cbind.MCU_ERR_INVALID_ARG  # output over the input


@functools.lru_cache(maxsize=None)
def _emulated_lib():
    """The kernels built with the DSP paths emulated (tests/kernels/test_kernels_s8_opt.py): the SMLAD path of
    mcu_linear_w4_s8 (group sizes that are multiples of 8) runs on the host."""
    lib = ctypes.CDLL(str(build_emulated_lib()))
    lib.mcu_linear_w4_s8.argtypes = [_P] * 7
    lib.mcu_linear_w4_s8_get_buffer_size.argtypes = [_P]
    return lib


def _run_s8(x, packed, scales, bias, group, lo=-np.inf, hi=np.inf, emulated=False):
    out = np.full((x.shape[0], packed.shape[0]), np.nan, np.float32)
    p = LinearW4Params(x.shape[0], x.shape[1], packed.shape[0], group, lo, hi)
    lib = _emulated_lib() if emulated else _lib()
    size = lib.mcu_linear_w4_s8_get_buffer_size(ctypes.addressof(p))
    assert size == 2 * x.shape[1]
    scratch = np.zeros(size // 2, np.int16)
    ctx = cbind_s8.Context(scratch.ctypes.data, size)
    status = lib.mcu_linear_w4_s8(ctypes.addressof(ctx), ctypes.addressof(p), cbind.ptr(x), cbind.ptr(packed),
                                  cbind.ptr(scales), cbind.ptr(bias), cbind.ptr(out))
    return status, out


@settings(max_examples=24, deadline=None)
@given(w4_case(), st.sampled_from(["as drawn", "non-negative", "zeros", "one sign extreme"]), st.booleans())
def test_linear_w4_s8_equals_reference(case, inputs: str, emulated: bool) -> None:
    x, q, scales, bias, group, lo, hi = case
    if inputs == "non-negative":
        x = np.abs(x)  # after a ReLU: the zero-point sits at -128
    elif inputs == "zeros":
        x = np.zeros_like(x)  # a zero range: scale 1
    elif inputs == "one sign extreme":
        x = -np.abs(x) * 1e4  # the zero-point at 127
    packed = int4.pack_int4(q)
    status, out = _run_s8(x, packed, scales, bias, group, lo, hi, emulated=emulated)
    assert status == cbind.MCU_OK
    want = int4.linear_w4_s8(x, packed, scales, bias, group, lo, hi)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    # within the error of 8-bit activations of the float layer of the dequantized weights
    w = q.astype(np.float64) * np.repeat(scales.astype(np.float64), group, axis=1)
    exact = np.clip(x.astype(np.float64) @ w.T + (0 if bias is None else bias), lo, hi)
    # a value is off by at most one step (half a step of rounding, and the zero-point's rounding at the ends)
    step = (np.maximum(x.max(axis=1), 0) - np.minimum(x.min(axis=1), 0)) / 255
    assert np.all(np.abs(out - exact) <= (step[:, None] * np.abs(w).sum(axis=1)[None, :]) * 1.01 + 1e-4 *
                  (np.abs(exact) + 1))


def test_linear_w4_s8_refuses_small_or_misaligned_scratch() -> None:
    x = np.ones((1, 8), np.float32)
    packed = np.zeros((2, 4), np.uint8)
    scales = np.ones((2, 1), np.float32)
    out = np.zeros((1, 2), np.float32)
    p = LinearW4Params(1, 8, 2, 8, -np.inf, np.inf)
    scratch = np.zeros(16, np.int16)
    lib = _lib()
    for buf, size, want in [(scratch.ctypes.data, 15, cbind.MCU_ERR_BUFFER_TOO_SMALL),
                            (scratch.ctypes.data + 2, 16, cbind.MCU_ERR_INVALID_ARG),
                            (scratch.ctypes.data, 16, cbind.MCU_OK)]:
        ctx = cbind_s8.Context(buf, size)
        assert lib.mcu_linear_w4_s8(ctypes.addressof(ctx), ctypes.addressof(p), cbind.ptr(x), cbind.ptr(packed),
                                    cbind.ptr(scales), None, cbind.ptr(out)) == want
