"""w8a16's activations and products: mcu_activation_s16 (sigmoid, tanh as CMSIS-NN's arm_nn_activation_s16, with
TFLite's general input multiplier), mcu_softmax_s16 (arm_softmax_s16 over any axis), mcu_mul_s16
(arm_elementwise_mul_s16), mcu_sub_s16 (TFLite's 16x8 SUB), mcu_maximum_s16 / mcu_minimum_s16, mcu_lut_s16
(TFLite's int16 LUT) and mcu_requantize_s16 against the Python integer reference (mcu/reference/s16_act.py) over hypothesis-drawn
sizes, scales and int16 extremes, every int16 input at a few scales, the real functions, and CMSIS-NN's own
kernels and tables built from CMSIS_NN_PATH."""

from __future__ import annotations

import ctypes
import math
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE, MCU_OK, ptr
from cmsis_nn_host import cmsis_nn_root, host_library
from mcu.reference import lstm_s16
from mcu.reference.arith import add_params, quantize_multiplier
from mcu.reference.s16_act import (EXP_TABLE, INT16_MAX, INT16_MIN, ONE_OVER_ONE_PLUS_TABLE, activation_params,
                                   activation_s16, cmsis_nn_differs, lut_s16, lut_table_s16, maximum_s16,
                                   minimum_s16, mul_params, mul_s16, requantize_s16, softmax_params, softmax_s16,
                                   sub_s16)
from repo import ROOT
from s8_cases import assert_equal
from test_kernels_s16 import acts, int16_data

_P = ctypes.c_void_p
CASES = settings(max_examples=40, deadline=None)
KIND = {"sigmoid": 0, "tanh": 1}
ALL_INT16 = np.arange(INT16_MIN, INT16_MAX + 1, dtype=np.int16)
# input scales: a pre-activation's int16 scale is max|x| / 32767 (|x| from 1/1000 to 80,000)
in_scales = st.floats(-25.0, 1.2).map(lambda e: 2.0 ** e)


class ActivationS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("size", "input_multiplier", "input_shift", "kind")]


class MulS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("size", "out_multiplier", "out_shift", "act_min", "act_max")]


class AddS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("size", "a_multiplier", "a_shift", "b_multiplier", "b_shift",
                                              "left_shift", "out_multiplier", "out_shift", "act_min", "act_max")]


class RequantizeS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("size", "multiplier", "shift", "act_min", "act_max")]


class SoftmaxS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("outer", "axis", "inner", "input_multiplier", "input_shift")]


class SoftmaxMaskedS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("outer", "axis", "inner", "input_multiplier", "input_shift",
                                              "mask_rows")]


@pytest.fixture(scope="module")
def lib():
    handle = cb.lib()
    handle.mcu_activation_s16.argtypes = [ctypes.POINTER(ActivationS16Params), _P, _P]
    handle.mcu_activation_s16.restype = ctypes.c_int
    handle.mcu_mul_s16.argtypes = [ctypes.POINTER(MulS16Params), _P, _P, _P]
    handle.mcu_mul_s16.restype = ctypes.c_int
    handle.mcu_softmax_s16.argtypes = [ctypes.POINTER(SoftmaxS16Params), _P, _P]
    handle.mcu_softmax_s16.restype = ctypes.c_int
    handle.mcu_softmax_masked_s16.argtypes = [ctypes.POINTER(SoftmaxMaskedS16Params), _P, _P, _P]
    handle.mcu_softmax_masked_s16.restype = ctypes.c_int
    for name in ("sub", "maximum", "minimum"):
        getattr(handle, f"mcu_{name}_s16").argtypes = [ctypes.POINTER(AddS16Params), _P, _P, _P]
        getattr(handle, f"mcu_{name}_s16").restype = ctypes.c_int
    handle.mcu_requantize_s16.argtypes = [ctypes.POINTER(RequantizeS16Params), _P, _P]
    handle.mcu_requantize_s16.restype = ctypes.c_int
    handle.mcu_lut_s16.argtypes = [ctypes.c_int32, _P, _P, _P]
    handle.mcu_lut_s16.restype = ctypes.c_int
    return handle


def _activation(lib, x: np.ndarray, s_in: float, kind: str, in_place: bool = False) -> np.ndarray:
    m, sh = activation_params(s_in)
    p = ActivationS16Params(x.size, m, sh, KIND[kind])
    out = x.copy() if in_place else np.zeros_like(x)
    assert lib.mcu_activation_s16(ctypes.byref(p), ptr(out if in_place else x), ptr(out)) == MCU_OK
    return out


# --- sigmoid and tanh ----------------------------------------------------------------------------------------

@CASES
@given(size=st.integers(1, 90), s_in=in_scales, kind=st.sampled_from(["sigmoid", "tanh"]),
       data=st.sampled_from(["uniform", "small", "extremes"]), in_place=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_activation_s16(lib, size, s_in, kind, data, in_place, seed):
    x = int16_data(np.random.default_rng(seed), (size,), data)
    m, sh = activation_params(s_in)
    assert_equal(_activation(lib, x, s_in, kind, in_place), activation_s16(x, m, sh, kind))


@pytest.mark.parametrize("s_in", [2.0 ** -20, 1e-4, 2.0 ** -12, 3.3e-3, 0.05, 2.0])
@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
def test_activation_s16_every_input(lib, s_in, kind):
    """Every int16 code, at scales from the smallest the observer gives to past the table's range."""
    m, sh = activation_params(s_in)
    assert_equal(_activation(lib, ALL_INT16, s_in, kind), activation_s16(ALL_INT16, m, sh, kind))


@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
def test_activation_s16_follows_the_real_functions(lib, kind):
    """Within 2^-13 of the real function (2.5 codes of 2^-15) over the table's range and past it."""
    s_in = 1e-3  # |x| up to 32.8
    y = _activation(lib, ALL_INT16, s_in, kind).astype(np.float64) * 2.0 ** -15
    x = ALL_INT16.astype(np.float64) * s_in
    real = 1.0 / (1.0 + np.exp(-x)) if kind == "sigmoid" else np.tanh(x)
    assert np.abs(y - real).max() < 2.0 ** -13


@pytest.mark.parametrize("left_shift", range(-4, 4))
def test_activation_params_at_a_power_of_two_are_cmsis_nns(left_shift):
    """At input scale 2^(left_shift - 12) TFLite's general multiplier is CMSIS-NN's 3 << left_shift (or 3 and a
    rounding shift): the LSTM's form of arm_nn_activation_s16 gives the same codes for every input."""
    m, sh = activation_params(2.0 ** (left_shift - 12))
    for kind in ("sigmoid", "tanh"):
        assert_equal(activation_s16(ALL_INT16, m, sh, kind), lstm_s16.activation_s16(ALL_INT16, left_shift, kind))


def test_activation_params_refuse_an_input_scale_past_the_int32_product():
    assert activation_params(32767.0 / 12288.0)[0] == 32767
    with pytest.raises(ValueError):
        activation_params(2.7)


def test_activation_s16_checks_its_arguments(lib):
    x = np.zeros(8, np.int16)
    for m, sh, kind in ((0, 3, 0), (32768, 3, 0), (100, -1, 0), (100, 32, 0), (100, 3, 2)):
        p = ActivationS16Params(8, m, sh, kind)
        assert lib.mcu_activation_s16(ctypes.byref(p), ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG
    p = ActivationS16Params(4, 24576, 13, 0)
    assert lib.mcu_activation_s16(ctypes.byref(p), ptr(x), ctypes.c_void_p(x.ctypes.data + 2)) == \
        MCU_ERR_INVALID_ARG


def test_activation_s16_c_table_is_the_derived_one():
    text = (ROOT / "runtime_c" / "kernels" / "common" / "sigmoid_s16.h").read_text()
    body = re.search(r"mcu_sigmoid_s16_table\[256\]\s*=\s*\{([^}]*)\}", text)
    assert body is not None
    np.testing.assert_array_equal(lstm_s16.SIGMOID_TABLE, [int(v) for v in body.group(1).split(",") if v.strip()])


# --- softmax -------------------------------------------------------------------------------------------------

def _softmax(lib, x: np.ndarray, outer: int, axis: int, inner: int, s_in: float, in_place: bool = False):
    m, sh = softmax_params(s_in)
    p = SoftmaxS16Params(outer, axis, inner, m, sh)
    out = x.copy() if in_place else np.zeros_like(x)
    assert lib.mcu_softmax_s16(ctypes.byref(p), ptr(out if in_place else x), ptr(out)) == MCU_OK
    return out


def _rows(x: np.ndarray, outer: int, axis: int, inner: int) -> np.ndarray:
    return np.ascontiguousarray(x.reshape(outer, axis, inner).transpose(0, 2, 1)).reshape(-1, axis)


def _from_rows(y: np.ndarray, outer: int, axis: int, inner: int) -> np.ndarray:
    return np.ascontiguousarray(y.reshape(outer, inner, axis).transpose(0, 2, 1)).reshape(-1)


@CASES
@given(outer=st.integers(1, 4), axis=st.one_of(st.integers(1, 40), st.sampled_from([300, 1000])),
       inner=st.integers(1, 3), s_in=st.floats(-18.0, 0.0).map(lambda e: 2.0 ** e),
       data=st.sampled_from(["uniform", "small", "extremes"]), in_place=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_softmax_s16(lib, outer, axis, inner, s_in, data, in_place, seed):
    x = int16_data(np.random.default_rng(seed), (outer * axis * inner,), data)
    m, sh = softmax_params(s_in)
    want = _from_rows(softmax_s16(_rows(x, outer, axis, inner), m, sh), outer, axis, inner)
    assert_equal(_softmax(lib, x, outer, axis, inner, s_in, in_place), want)


def test_softmax_s16_follows_the_real_function(lib):
    """Probabilities within 2^-10 of float softmax for logits spread over [-12, 12] (differences past -10 read
    the table's first entry)."""
    rng = np.random.default_rng(5)
    s_in = 12.0 / 32767
    x = rng.integers(INT16_MIN + 1, INT16_MAX + 1, size=(50, 10)).astype(np.int16)
    y = _softmax(lib, x.reshape(-1), 50, 10, 1, s_in).reshape(50, 10) * 2.0 ** -15
    z = x * s_in
    real = np.exp(z - z.max(axis=1, keepdims=True))
    real /= real.sum(axis=1, keepdims=True)
    assert np.abs(y - real).max() < 2.0 ** -10


def test_softmax_s16_saturates_where_cmsis_nn_wraps(lib):
    """A row of one element is probability 1: 32767 (CMSIS-NN's arithmetic rounds it to 32769 and wraps)."""
    m, sh = softmax_params(1e-3)
    x = np.array([1234, -7, 0], np.int16)
    assert _softmax(lib, x, 3, 1, 1, 1e-3).tolist() == [INT16_MAX] * 3
    assert cmsis_nn_differs(x.reshape(3, 1), m, sh).all()


def test_softmax_s16_checks_its_arguments(lib):
    x = np.zeros(8, np.int16)
    p = SoftmaxS16Params(1, 4, 1, -1, 0)
    assert lib.mcu_softmax_s16(ctypes.byref(p), ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG
    p = SoftmaxS16Params(1, 4, 1, 1 << 30, 0)
    assert lib.mcu_softmax_s16(ctypes.byref(p), ptr(x), ctypes.c_void_p(x.ctypes.data + 2)) == MCU_ERR_INVALID_ARG


@CASES
@given(heads=st.integers(1, 3), mask_rows=st.integers(1, 5), axis=st.one_of(st.integers(1, 40), st.just(300)),
       s_in=st.floats(-18.0, 0.0).map(lambda e: 2.0 ** e), data=st.sampled_from(["uniform", "small", "extremes"]),
       pattern=st.sampled_from(["random", "causal", "one_left", "none"]), in_place=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_softmax_masked_s16(lib, heads, mask_rows, axis, s_in, data, pattern, in_place, seed):
    """Hidden positions (a constant mask repeated every mask_rows rows, as an attention mask over heads) take no
    part in the maximum and the sum and give 0; the rest are mcu_softmax_s16's arithmetic."""
    rng = np.random.default_rng(seed)
    outer = heads * mask_rows
    x = int16_data(rng, (outer * axis,), data)
    if pattern == "causal":
        hidden = np.arange(axis)[None, :] > (np.arange(mask_rows)[:, None] % axis)
    elif pattern == "one_left":  # every position but one hidden: probability 1 there
        hidden = np.ones((mask_rows, axis), bool)
        hidden[np.arange(mask_rows), rng.integers(0, axis, size=mask_rows)] = False
    else:
        hidden = rng.random((mask_rows, axis)) < (0.5 if pattern == "random" else 0.0)
        hidden[np.arange(mask_rows), rng.integers(0, axis, size=mask_rows)] = False
    m, sh = softmax_params(s_in)
    want = softmax_s16(x.reshape(outer, axis), m, sh, hidden=np.tile(hidden, (heads, 1))).reshape(-1)
    p = SoftmaxMaskedS16Params(outer, axis, 1, m, sh, mask_rows)
    out = x.copy() if in_place else np.zeros_like(x)
    mask = hidden.astype(np.uint8)
    assert lib.mcu_softmax_masked_s16(ctypes.byref(p), ptr(mask), ptr(out if in_place else x), ptr(out)) == MCU_OK
    assert_equal(out, want)
    assert (out.reshape(heads, mask_rows, axis)[:, hidden] == 0).all()
    if pattern == "none":  # nothing hidden: the plain softmax
        assert_equal(out, softmax_s16(x.reshape(outer, axis), m, sh).reshape(-1))


def test_softmax_masked_s16_checks_its_arguments(lib):
    """A mask row with every position hidden (no value: NaN in torch) is refused before anything is written, and
    so are rows that do not repeat the mask evenly and a partial overlap."""
    x = np.arange(8, dtype=np.int16)
    out = np.full(8, 7, np.int16)
    m, sh = softmax_params(1e-3)
    mask = np.array([[0, 1, 1, 1], [1, 1, 1, 1]], np.uint8)
    assert lib.mcu_softmax_masked_s16(ctypes.byref(SoftmaxMaskedS16Params(2, 4, 1, m, sh, 2)), ptr(mask), ptr(x),
                                      ptr(out)) == MCU_ERR_INVALID_ARG
    assert (out == 7).all()
    assert lib.mcu_softmax_masked_s16(ctypes.byref(SoftmaxMaskedS16Params(3, 4, 1, m, sh, 2)), ptr(mask), ptr(x),
                                      ptr(out)) == MCU_ERR_SHAPE
    assert lib.mcu_softmax_masked_s16(ctypes.byref(SoftmaxMaskedS16Params(1, 4, 1, m, sh, 1)), ptr(mask), ptr(x),
                                      ctypes.c_void_p(x.ctypes.data + 2)) == MCU_ERR_INVALID_ARG
    with pytest.raises(ValueError):
        softmax_s16(x.reshape(2, 4), m, sh, hidden=mask.astype(bool))


@pytest.mark.parametrize("source,name,table", [("tables_s16.h", "exp", EXP_TABLE),
                                               ("softmax_row_s16.h", "recip", ONE_OVER_ONE_PLUS_TABLE)])
def test_softmax_s16_c_tables_are_the_derived_ones(source, name, table):
    text = (ROOT / "runtime_c" / "kernels" / "softmax" / source).read_text()
    body = re.search(rf"mcu_{name}_s16_table\[513\]\s*=\s*\{{([^}}]*)\}}", text)
    assert body is not None
    np.testing.assert_array_equal(table, [int(v) for v in body.group(1).split(",") if v.strip()])


# --- mul -----------------------------------------------------------------------------------------------------

@CASES
@given(size=st.integers(1, 90), s_a=in_scales, s_b=in_scales, ratio=st.floats(-12.0, 4.0),
       data=st.sampled_from(["uniform", "small", "extremes"]), act=acts, alias=st.sampled_from(["none", "a", "b"]),
       seed=st.integers(0, 2**32 - 1))
def test_mul_s16(lib, size, s_a, s_b, ratio, data, act, alias, seed):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (size,), data), int16_data(rng, (size,), data)
    m, sh = mul_params(s_a, s_b, s_a * s_b * 2.0 ** ratio)
    want = mul_s16(a, b, m, sh, act[0], act[1])
    out = {"none": np.zeros(size, np.int16), "a": a, "b": b}[alias]
    p = MulS16Params(size, m, sh, act[0], act[1])
    assert lib.mcu_mul_s16(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    assert_equal(out, want)


def test_mul_s16_refuses_a_partial_overlap(lib):
    a = np.ones(8, np.int16)
    p = MulS16Params(4, 1 << 30, 0, INT16_MIN, INT16_MAX)
    assert lib.mcu_mul_s16(ctypes.byref(p), ptr(a), ptr(a), ctypes.c_void_p(a.ctypes.data + 2)) == MCU_ERR_INVALID_ARG


# --- sub and requantize -------------------------------------------------------------------------------------

PAIRS = {"sub": (sub_s16, lambda x, y: x - y), "maximum": (maximum_s16, np.maximum),
         "minimum": (minimum_s16, np.minimum)}


@CASES
@given(kind=st.sampled_from(sorted(PAIRS)), size=st.integers(1, 90), s_a=in_scales, s_b=in_scales,
       ratio=st.floats(0.3, 3.0), data=st.sampled_from(["uniform", "small", "extremes"]), act=acts,
       alias=st.sampled_from(["none", "a", "b"]), seed=st.integers(0, 2**32 - 1))
def test_sub_maximum_minimum_s16(lib, kind, size, s_a, s_b, ratio, data, act, alias, seed):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (size,), data), int16_data(rng, (size,), data)
    prm = add_params(s_a, s_b, max(s_a, s_b) * ratio, left_shift=15)
    keys = ("a_multiplier", "a_shift", "b_multiplier", "b_shift", "out_multiplier", "out_shift", "left_shift")
    reference, real_fn = PAIRS[kind]
    want = reference(a, b, **{k: prm[k] for k in keys}, act_min=act[0], act_max=act[1])
    real = real_fn(a.astype(np.float64) * s_a, b.astype(np.float64) * s_b) / (max(s_a, s_b) * ratio)
    p = AddS16Params(size, prm["a_multiplier"], prm["a_shift"], prm["b_multiplier"], prm["b_shift"], 15,
                     prm["out_multiplier"], prm["out_shift"], act[0], act[1])
    out = {"none": np.zeros(size, np.int16), "a": a, "b": b}[alias]
    assert getattr(lib, f"mcu_{kind}_s16")(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    assert_equal(out, want)
    if data == "small" and act == (INT16_MIN, INT16_MAX):  # and it is the function, within a code or so
        assert np.abs(out - np.clip(real, INT16_MIN, INT16_MAX)).max() <= 1.5


@CASES
@given(size=st.integers(1, 90), ratio=st.floats(-20.0, 20.0).map(lambda e: 2.0 ** e),
       data=st.sampled_from(["uniform", "small", "extremes"]), act=acts, in_place=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_requantize_s16(lib, size, ratio, data, act, in_place, seed):
    x = int16_data(np.random.default_rng(seed), (size,), data)
    m, sh = quantize_multiplier(ratio)
    want = requantize_s16(x, m, sh, act[0], act[1])
    out = x if in_place else np.zeros(size, np.int16)
    p = RequantizeS16Params(size, m, sh, act[0], act[1])
    assert lib.mcu_requantize_s16(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, want)


def test_sub_and_requantize_s16_refuse_a_partial_overlap(lib):
    a = np.ones(8, np.int16)
    prm = add_params(1e-3, 1e-3, 2e-3, left_shift=15)
    p = AddS16Params(4, prm["a_multiplier"], prm["a_shift"], prm["b_multiplier"], prm["b_shift"], 15,
                     prm["out_multiplier"], prm["out_shift"], INT16_MIN, INT16_MAX)
    assert lib.mcu_sub_s16(ctypes.byref(p), ptr(a), ptr(a), ctypes.c_void_p(a.ctypes.data + 2)) == MCU_ERR_INVALID_ARG
    q = RequantizeS16Params(4, 1 << 30, 0, INT16_MIN, INT16_MAX)
    assert lib.mcu_requantize_s16(ctypes.byref(q), ptr(a), ctypes.c_void_p(a.ctypes.data + 2)) == MCU_ERR_INVALID_ARG


# --- lut -----------------------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(tables=st.sampled_from(["uniform", "extremes", "steps"]), in_place=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_lut_s16_every_input(lib, tables, in_place, seed):
    """Any 513-entry table (adjacent entries as far apart as int16 allows), every int16 input."""
    rng = np.random.default_rng(seed)
    if tables == "extremes":
        table = rng.choice(np.array([INT16_MIN, INT16_MAX, 0, -1], np.int16), size=513)
    elif tables == "steps":
        table = np.where(np.arange(513) % 2 == 0, INT16_MIN, INT16_MAX).astype(np.int16)
    else:
        table = rng.integers(INT16_MIN, INT16_MAX + 1, size=513).astype(np.int16)
    x = ALL_INT16.copy()
    out = x if in_place else np.zeros_like(x)
    assert lib.mcu_lut_s16(x.size, ptr(table), ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, lut_s16(ALL_INT16, table))


@pytest.mark.parametrize("name,fn,s_in,s_out", [
    ("gelu", lambda v: v * 0.5 * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0))), 8.0 / 32767, 8.0 / 32767),
    ("exp", np.exp, 4.0 / 32767, 55.0 / 32767),
    ("silu", lambda v: v / (1.0 + np.exp(-v)), 1e-3, 1e-3),
    ("affine", lambda v: v * 0.5 + 1.0, 6.0 / 32767, 4.0 / 32767)])
def test_lut_s16_follows_the_function(lib, name, fn, s_in, s_out):
    """Within 2 output codes of the real function over every input (linear interpolation of 512 segments)."""
    table = lut_table_s16(fn, s_in, s_out).astype(np.int16)
    out = np.zeros_like(ALL_INT16)
    assert lib.mcu_lut_s16(ALL_INT16.size, ptr(table), ptr(ALL_INT16), ptr(out)) == MCU_OK
    real = np.clip(fn(ALL_INT16.astype(np.float64) * s_in) / s_out, INT16_MIN, INT16_MAX)
    assert np.abs(out - real).max() <= 2.0, name


def test_lut_s16_refuses_a_table_in_the_output(lib):
    x = np.zeros(600, np.int16)
    assert lib.mcu_lut_s16(8, ptr(x), ptr(x[513:]), ctypes.c_void_p(x.ctypes.data + 2)) == MCU_ERR_INVALID_ARG


# --- CMSIS-NN ------------------------------------------------------------------------------------------------

CMSIS_SOURCES = ("ActivationFunctions/arm_nn_activation_s16.c", "NNSupportFunctions/arm_nntables.c",
                 "SoftmaxFunctions/arm_softmax_s16.c", "BasicMathFunctions/arm_elementwise_mul_s16.c")


class CmsisSoftmaxLut(ctypes.Structure):
    _fields_ = [("exp_lut", _P), ("one_by_one_lut", _P)]


@pytest.fixture(scope="module")
def cmsis():
    root = cmsis_nn_root(CMSIS_SOURCES, "arm_nn_activation_s16, arm_softmax_s16 and arm_elementwise_mul_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_SOURCES], "s16_act")
    handle.arm_nn_activation_s16.argtypes = [_P, _P, ctypes.c_int32, ctypes.c_int32, ctypes.c_int]
    handle.arm_softmax_s16.argtypes = [_P, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                                       ctypes.POINTER(CmsisSoftmaxLut), _P]
    handle.arm_elementwise_mul_s16.argtypes = [_P, _P, ctypes.c_int32, ctypes.c_int32, _P] + [ctypes.c_int32] * 6
    for f in ("arm_nn_activation_s16", "arm_softmax_s16", "arm_elementwise_mul_s16"):
        getattr(handle, f).restype = ctypes.c_int
    return root, handle


@pytest.mark.parametrize("left_shift", range(-4, 4))
@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
def test_activation_s16_equals_cmsis_nn(lib, cmsis, left_shift, kind):
    """Every int16 input at the power-of-two scales CMSIS-NN's kernel takes, 2^(left_shift - 12)."""
    _, handle = cmsis
    theirs = np.zeros_like(ALL_INT16)
    assert handle.arm_nn_activation_s16(ptr(ALL_INT16), ptr(theirs), ALL_INT16.size, left_shift, KIND[kind]) == 0
    assert_equal(_activation(lib, ALL_INT16, 2.0 ** (left_shift - 12), kind), theirs)


@pytest.mark.parametrize("name,table", [("exp_lut_data.h", EXP_TABLE), ("one_by_one_lut_data.h",
                                                                         ONE_OVER_ONE_PLUS_TABLE)])
def test_softmax_s16_tables_are_cmsis_nns(cmsis, name, table):
    """The derived tables are the ones CMSIS-NN's softmax tests take (TFLite's gen_lut)."""
    root, _ = cmsis
    path = root / "Tests" / "UnitTest" / "TestCases" / "Common" / "Softmax" / name
    if not path.exists():
        pytest.skip(f"the CMSIS-NN tree has no {name}")
    text = path.read_text()
    body = re.search(r"\{([^}]*)\}", text[text.index("#pragma"):])
    assert body is not None
    np.testing.assert_array_equal(table, [int(v) for v in re.findall(r"-?\d+", body.group(1))])


@CASES
@given(rows=st.integers(1, 5), axis=st.integers(2, 60), s_in=st.floats(-18.0, 0.0).map(lambda e: 2.0 ** e),
       data=st.sampled_from(["uniform", "small", "extremes"]), seed=st.integers(0, 2**32 - 1))
def test_softmax_s16_equals_cmsis_nn(lib, cmsis, rows, axis, s_in, data, seed):
    _, handle = cmsis
    x = int16_data(np.random.default_rng(seed), (rows, axis), data)
    m, sh = softmax_params(s_in)
    assume(not cmsis_nn_differs(x, m, sh).any())
    exp_lut, recip_lut = EXP_TABLE.astype(np.int16), ONE_OVER_ONE_PLUS_TABLE.astype(np.int16)
    luts = CmsisSoftmaxLut(exp_lut.ctypes.data, recip_lut.ctypes.data)
    theirs = np.zeros_like(x)
    assert handle.arm_softmax_s16(ptr(x), rows, axis, m, sh, ctypes.byref(luts), ptr(theirs)) == 0
    assert_equal(_softmax(lib, x.reshape(-1), rows, axis, 1, s_in).reshape(rows, axis), theirs)


@CASES
@given(size=st.integers(1, 90), s_a=in_scales, s_b=in_scales, ratio=st.floats(-12.0, 0.0),
       data=st.sampled_from(["uniform", "small", "extremes"]), act=acts, seed=st.integers(0, 2**32 - 1))
def test_mul_s16_equals_cmsis_nn(lib, cmsis, size, s_a, s_b, ratio, data, act, seed):
    """(real multipliers below 1: CMSIS-NN's left shift of the product is unsaturated)"""
    _, handle = cmsis
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (size,), data), int16_data(rng, (size,), data)
    m, sh = mul_params(s_a, s_b, s_a * s_b / 2.0 ** ratio)
    assume(sh <= 0)
    theirs = np.zeros(size, np.int16)
    assert handle.arm_elementwise_mul_s16(ptr(a), ptr(b), 0, 0, ptr(theirs), 0, m, sh, act[0], act[1], size) == 0
    ours = np.zeros(size, np.int16)
    p = MulS16Params(size, m, sh, act[0], act[1])
    assert lib.mcu_mul_s16(ctypes.byref(p), ptr(a), ptr(b), ptr(ours)) == MCU_OK
    assert_equal(ours, theirs)


def test_softmax_s16_cmsis_nn_wraps_a_normalised_sum_of_2_to_the_17(lib, cmsis):
    """A row whose exps sum to 2^18 - 1 (the normalised sum rounds up to 2^17): CMSIS-NN's kernel reads the
    reciprocal at -32768 (1 instead of 1/2) and doubles every probability; ours (TFLite's reference) does not."""
    _, handle = cmsis
    m, sh = softmax_params(1e-3)
    # eight maxima (exp 32767 each) and one smaller logit, over every value: the sums 8 * 32767 + e(d)
    rows = np.zeros((32768, 9), np.int16)
    rows[:, 8] = np.arange(INT16_MIN, 0)
    hits = np.nonzero(cmsis_nn_differs(rows, m, sh))[0]
    assert hits.size
    x = rows[hits[:1]]
    exp_lut, recip_lut = EXP_TABLE.astype(np.int16), ONE_OVER_ONE_PLUS_TABLE.astype(np.int16)
    luts = CmsisSoftmaxLut(exp_lut.ctypes.data, recip_lut.ctypes.data)
    theirs = np.zeros_like(x)
    assert handle.arm_softmax_s16(ptr(x), 1, 9, m, sh, ctypes.byref(luts), ptr(theirs)) == 0
    ours = _softmax(lib, x.reshape(-1), 1, 9, 1, 1e-3)
    assert abs(int(ours.astype(np.int64).sum()) - 32768) < 64
    assert abs(int(theirs.astype(np.int64).sum()) - 65536) < 128
