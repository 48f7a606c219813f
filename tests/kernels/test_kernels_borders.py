"""The borders between int8 and int16 activations of ``--quantize mixed``: mcu_requantize_s8_s16 and
mcu_requantize_s16_s8 against the Python integer reference (mcu/reference/s16.py) over hypothesis-drawn
parameters across their whole valid range and int8/int16 extremes, the parameters a border derives from its
scales (mcu/passes/quantized/elementwise.py, requantize_op), and the arguments the kernels refuse."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_NULL_POINTER, MCU_ERR_SHAPE, MCU_OK, ptr
from mcu.ir import QuantParams, Tensor
from mcu.passes.quantized.elementwise import requantize_op
from mcu.reference import derive
from mcu.reference.s16 import INT16_MAX, INT16_MIN, requantize_s8_s16, requantize_s16_s8
from s8_cases import assert_equal

_P = ctypes.c_void_p
_I = ctypes.c_int32
CASES = settings(max_examples=60, deadline=None)


@pytest.fixture(scope="module")
def lib():
    handle = cb.lib()
    for name in ("mcu_requantize_s8_s16", "mcu_requantize_s16_s8"):
        fn = getattr(handle, name)
        fn.argtypes = [_I] * 6 + [_P, _P]
        fn.restype = ctypes.c_int
    return handle


def _int8(rng, n: int, mode: str) -> np.ndarray:
    if mode == "extremes":
        return rng.choice(np.array([-128, 127, -1, 0], dtype=np.int8), size=n)
    return rng.integers(-128, 128, size=n).astype(np.int8)


def _int16(rng, n: int, mode: str) -> np.ndarray:
    if mode == "extremes":
        return rng.choice(np.array([INT16_MIN, INT16_MAX, -1, 0], dtype=np.int16), size=n)
    return rng.integers(INT16_MIN, INT16_MAX + 1, size=n).astype(np.int16)


multipliers = st.one_of(st.integers(2**30, 2**31 - 1), st.sampled_from([0, 1, 2**30, 2**31 - 1]))
acts16 = st.one_of(st.just((INT16_MIN, INT16_MAX)), st.tuples(st.integers(INT16_MIN, 0), st.integers(0, INT16_MAX)))
acts8 = st.one_of(st.just((-128, 127)), st.tuples(st.integers(-128, 0), st.integers(0, 127)))


@CASES
@given(size=st.integers(0, 70), offset=st.integers(-127, 128), m=multipliers, shift=st.integers(-31, 30),
       act=acts16, data=st.sampled_from(["uniform", "extremes"]), seed=st.integers(0, 2**32 - 1))
def test_requantize_s8_s16(lib, size, offset, m, shift, act, data, seed):
    x = _int8(np.random.default_rng(seed), size, data)
    want = requantize_s8_s16(x, input_offset=offset, multiplier=m, shift=shift, act_min=act[0], act_max=act[1])
    out = np.zeros(size, dtype=np.int16)
    assert lib.mcu_requantize_s8_s16(size, offset, m, shift, act[0], act[1], ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, want)


@CASES
@given(size=st.integers(0, 70), offset=st.integers(-128, 127), m=multipliers, shift=st.integers(-31, 30),
       act=acts8, data=st.sampled_from(["uniform", "extremes"]), seed=st.integers(0, 2**32 - 1))
def test_requantize_s16_s8(lib, size, offset, m, shift, act, data, seed):
    x = _int16(np.random.default_rng(seed), size, data)
    want = requantize_s16_s8(x, multiplier=m, shift=shift, output_offset=offset, act_min=act[0], act_max=act[1])
    out = np.zeros(size, dtype=np.int8)
    assert lib.mcu_requantize_s16_s8(size, m, shift, offset, act[0], act[1], ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, want)


def _tensor(name: str, dtype: str, scale: float, zp: int) -> Tensor:
    return Tensor(name=name, shape=(256,), dtype=dtype, quant=QuantParams(scale=(scale,), zero_point=(zp,)))


@given(scale=st.floats(1e-4, 10.0), zp=st.integers(-128, 127))
@settings(max_examples=40, deadline=None)
def test_borders_from_scales_round_trip(lib, scale, zp):
    """Every int8 code through a border to the int16 scale that spans the int8 range (s_8 * 255 / 32767 at
    most, as mixed widens) and back comes out as itself, in C and in the reference, the parameters derived
    from the scales alone."""
    s16 = scale * max(128 + zp, 127 - zp) / INT16_MAX
    x8, x16, y8 = _tensor("x8", "int8", scale, zp), _tensor("x16", "int16", s16, 0), _tensor("y8", "int8", scale, zp)
    up, down = (requantize_op("b", x8, x16, INT16_MIN, INT16_MAX), requantize_op("b", x16, y8))
    pu, pd = derive.requantize(up), derive.requantize(down)
    codes = np.arange(-128, 128, dtype=np.int8)
    wide = requantize_s8_s16(codes, **pu)
    back = requantize_s16_s8(wide, **pd)
    assert_equal(back, codes)
    out16, out8 = np.zeros(256, np.int16), np.zeros(256, np.int8)
    assert lib.mcu_requantize_s8_s16(256, pu["input_offset"], pu["multiplier"], pu["shift"], pu["act_min"],
                                     pu["act_max"], ptr(codes), ptr(out16)) == MCU_OK
    assert lib.mcu_requantize_s16_s8(256, pd["multiplier"], pd["shift"], pd["output_offset"], pd["act_min"],
                                     pd["act_max"], ptr(out16), ptr(out8)) == MCU_OK
    assert_equal(out16, wide)
    assert_equal(out8, codes)
    # the int16 codes keep the int8 value: q16 * s16 within half an int16 step of (q8 - zp) * s8
    assert np.all(np.abs(wide * s16 - (codes.astype(np.int64) - zp) * scale) <= s16 / 2 * (1 + 1e-6))


def test_borders_refuse(lib):
    buf = np.zeros(64, dtype=np.int16)
    x8, y16 = np.zeros(8, np.int8), np.zeros(8, np.int16)
    base = buf.ctypes.data
    up, down = lib.mcu_requantize_s8_s16, lib.mcu_requantize_s16_s8
    assert up(8, 0, 2**30, 0, INT16_MIN, INT16_MAX, None, ptr(y16)) == MCU_ERR_NULL_POINTER
    assert up(8, 129, 2**30, 0, INT16_MIN, INT16_MAX, ptr(x8), ptr(y16)) == MCU_ERR_INVALID_ARG
    assert up(8, 0, -1, 0, INT16_MIN, INT16_MAX, ptr(x8), ptr(y16)) == MCU_ERR_INVALID_ARG
    assert up(8, 0, 2**30, 31, INT16_MIN, INT16_MAX, ptr(x8), ptr(y16)) == MCU_ERR_INVALID_ARG
    assert up(8, 0, 2**30, 0, 1, 0, ptr(x8), ptr(y16)) == MCU_ERR_INVALID_ARG
    assert up(-1, 0, 2**30, 0, INT16_MIN, INT16_MAX, ptr(x8), ptr(y16)) == MCU_ERR_SHAPE
    # a wider output over its own input, even exactly, would overwrite codes not yet read
    assert up(8, 0, 2**30, 0, INT16_MIN, INT16_MAX, base, base) == MCU_ERR_INVALID_ARG
    assert down(8, 2**30, 0, 0, -128, 127, base, base) == MCU_ERR_INVALID_ARG
    assert down(8, 2**30, 0, 0, -129, 127, ptr(y16), ptr(x8)) == MCU_ERR_INVALID_ARG
    assert down(8, 2**30, 0, 128, -128, 127, ptr(y16), ptr(x8)) == MCU_ERR_INVALID_ARG
    assert down(8, 2**30, -32, 0, -128, 127, ptr(y16), ptr(x8)) == MCU_ERR_INVALID_ARG
    assert down(8, 2**30, 0, 0, -128, 127, ptr(y16), None) == MCU_ERR_NULL_POINTER
    # apart: fine
    assert up(8, 0, 2**30, 0, INT16_MIN, INT16_MAX, base, base + 16) == MCU_OK
    assert down(8, 2**30, 0, 0, -128, 127, base + 16, base) == MCU_OK
