"""w8a16's products of two activations, layer and RMS norm and log-softmax: mcu_bmm_s16 (CMSIS-NN's
arm_batch_matmul_s16), mcu_layer_norm_s16 and mcu_log_softmax_s16 (ours: CMSIS-NN has neither at 16 bits) against
the Python integer reference (mcu/reference/s16_norm.py) over hypothesis-drawn shapes, scales and int16 extremes,
against float64 layer norm and log-softmax, and mcu_bmm_s16 against CMSIS-NN's own kernel built from
CMSIS_NN_PATH."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from cmsis_nn_host import Act, Dims, FcParams, PerTensor, cmsis_nn_root, host_library
from mcu.reference.s16 import INT16_MAX, INT16_MIN
from mcu.reference.s16_norm import (LN2_Q30, LOG1P_TABLE, bmm_params, bmm_s16, layer_norm_params, layer_norm_s16,
                                    log_softmax_params, log_softmax_s16)
from repo import ROOT
from s8_cases import assert_equal
from test_kernels_s16 import int16_data

_P = ctypes.c_void_p
CASES = settings(max_examples=40, deadline=None)
MODES = st.sampled_from(["random", "extremes", "small", "worst"])
scales = st.floats(-20.0, 2.0).map(lambda e: 2.0 ** e)


class BmmS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("batch", "m", "k", "n", "a_batch_stride", "b_batch_stride",
                                              "multiplier", "shift", "act_min", "act_max")]


class LayerNormS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("rows", "cols", "eps_lo", "eps_hi", "act_min", "act_max", "rms")]


class LogSoftmaxS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("outer", "axis", "inner", "input_multiplier", "input_shift",
                                              "diff_multiplier", "diff_shift", "log_multiplier", "log_shift")]


@pytest.fixture(scope="module")
def lib():
    handle = cb.lib()
    handle.mcu_bmm_s16.argtypes = [ctypes.POINTER(BmmS16Params), _P, _P, _P]
    handle.mcu_layer_norm_s16.argtypes = [ctypes.POINTER(LayerNormS16Params), _P, _P, _P, _P, _P]
    handle.mcu_log_softmax_s16.argtypes = [ctypes.POINTER(LogSoftmaxS16Params), _P, _P]
    for f in ("mcu_bmm_s16", "mcu_layer_norm_s16", "mcu_log_softmax_s16"):
        getattr(handle, f).restype = ctypes.c_int
    return handle


def _bmm(lib, a: np.ndarray, b: np.ndarray, mult: int, shift: int, lo: int = INT16_MIN,
         hi: int = INT16_MAX) -> np.ndarray:
    batch, m, k = a.shape
    n = b.shape[2]
    out = np.zeros((batch, m, n), np.int16)
    p = BmmS16Params(batch, m, k, n, m * k, k * n, mult, shift, lo, hi)
    assert lib.mcu_bmm_s16(ctypes.byref(p), ptr(np.ascontiguousarray(a)), ptr(np.ascontiguousarray(b)),
                           ptr(out)) == MCU_OK
    return out


@CASES
@given(batch=st.integers(1, 3), m=st.integers(1, 5), k=st.integers(1, 40), n=st.integers(1, 6), mode=MODES,
       s_a=scales, s_b=scales, s_out=scales, clamp=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_bmm_s16_equals_reference(lib, batch, m, k, n, mode, s_a, s_b, s_out, clamp, seed):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (batch, m, k), mode), int16_data(rng, (batch, k, n), "random")
    mult, shift = bmm_params(s_a, s_b, s_out)
    shift = min(shift, 14)  # (the 16x8 requantization's range: the lowering saturates its scales there too)
    lo, hi = (-1000, 2000) if clamp else (INT16_MIN, INT16_MAX)
    assert_equal(_bmm(lib, a, b, mult, shift, lo, hi), bmm_s16(a, b, mult, shift, lo, hi))


def test_bmm_s16_sums_exactly(lib):
    """k = 4096 products of -32768 * -32768 (2^42 in all) and a multiplier that brings them back to 2^14."""
    a = np.full((1, 2, 4096), INT16_MIN, np.int16)
    b = np.full((1, 4096, 3), INT16_MIN, np.int16)
    mult, shift = bmm_params(1.0, 1.0, 2.0 ** 28)
    got = _bmm(lib, a, b, mult, shift)
    assert_equal(got, bmm_s16(a, b, mult, shift))
    assert (got == 1 << 14).all()


def test_bmm_s16_checks_its_arguments(lib):
    a = np.zeros(8, np.int16)
    p = BmmS16Params(1, 2, 2, 2, 4, 4, 1 << 30, 15, INT16_MIN, INT16_MAX)  # shift past 14
    assert lib.mcu_bmm_s16(ctypes.byref(p), ptr(a), ptr(a[4:]), ptr(np.zeros(4, np.int16))) == MCU_ERR_INVALID_ARG
    p = BmmS16Params(1, 2, 2, 2, 4, 4, 1 << 30, 0, INT16_MIN, INT16_MAX)
    assert lib.mcu_bmm_s16(ctypes.byref(p), ptr(a), ptr(a[4:]), ptr(a)) == MCU_ERR_INVALID_ARG  # output on a


def _layer_norm(lib, x: np.ndarray, p) -> np.ndarray:
    rows, cols = x.shape
    out = np.zeros_like(x)
    lo, hi = p.eps_words
    params = LayerNormS16Params(rows, cols, lo, hi, p.act_min, p.act_max, int(p.rms))
    status = lib.mcu_layer_norm_s16(ctypes.byref(params), ptr(x), ptr(p.multipliers), ptr(p.shifts), ptr(p.bias),
                                    ptr(out))
    assert status == MCU_OK
    return out


@CASES
@given(rows=st.integers(1, 4), cols=st.sampled_from([1, 2, 7, 16, 64, 4096]), mode=MODES, s_in=scales,
       s_out=st.floats(-16.0, -8.0).map(lambda e: 2.0 ** e), eps=st.sampled_from([0.0, 1e-6, 1e-5, 0.1]),
       rms=st.booleans(), affine=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_layer_norm_s16_equals_reference(lib, rows, cols, mode, s_in, s_out, eps, rms, affine, seed):
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (rows, cols), mode)
    w = rng.uniform(-2.0, 2.0, cols) if affine else None
    b = rng.uniform(-1.0, 1.0, cols) if affine else None
    try:
        p = layer_norm_params(cols, s_in, s_out, eps, w, b, rms=rms)
    except ValueError:
        return  # (an eps term past 2^61: the lowering refuses the layer)
    assert_equal(_layer_norm(lib, x.copy(), p), layer_norm_s16(x, p))


@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_s16_is_within_a_step_of_float64(lib, rms):
    rng = np.random.default_rng(5)
    x = rng.integers(-20000, 20001, (16, 48)).astype(np.int16)
    s_in, eps = 1e-3, 1e-5
    w, b = rng.uniform(0.5, 1.5, 48), rng.uniform(-0.2, 0.2, 48)
    xf = x.astype(np.float64) * s_in
    centred = xf if rms else xf - xf.mean(-1, keepdims=True)
    want = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + eps) * w + (0 if rms else b)
    s_out = np.abs(want).max() / 32000
    p = layer_norm_params(48, s_in, s_out, eps, w, None if rms else b, rms=rms)
    got = _layer_norm(lib, x, p).astype(np.float64)
    assert np.abs(got - want / s_out).max() <= 1.0


def test_layer_norm_s16_in_place_and_constant_rows(lib):
    """A row of one value with eps 0 is all zeros (W = 0); in place gives the same codes."""
    p = layer_norm_params(8, 1e-3, 1e-3, 0.0, None, None)
    x = np.array([[INT16_MIN] * 8, [5] * 8], np.int16)
    assert (_layer_norm(lib, x.copy(), p) == 0).all()
    y = np.arange(-8, 8, dtype=np.int16).reshape(2, 8) * 2000
    want = layer_norm_s16(y, p)
    params = LayerNormS16Params(2, 8, *p.eps_words, INT16_MIN, INT16_MAX, 0)
    assert lib.mcu_layer_norm_s16(ctypes.byref(params), ptr(y), ptr(p.multipliers), ptr(p.shifts), ptr(p.bias),
                                  ptr(y)) == MCU_OK
    assert_equal(y, want)


def _log_softmax(lib, x: np.ndarray, outer: int, axis: int, inner: int, params: dict) -> np.ndarray:
    out = np.zeros_like(x)
    p = LogSoftmaxS16Params(outer, axis, inner, *params.values())
    assert lib.mcu_log_softmax_s16(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    return out


@CASES
@given(outer=st.integers(1, 3), axis=st.integers(1, 40), inner=st.integers(1, 3), mode=MODES, s_in=scales,
       s_out=st.floats(-14.0, -4.0).map(lambda e: 2.0 ** e), seed=st.integers(0, 2**31 - 1))
def test_log_softmax_s16_equals_reference(lib, outer, axis, inner, mode, s_in, s_out, seed):
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (outer, axis, inner), mode)
    params = log_softmax_params(s_in, s_out)
    rows = np.moveaxis(x, 1, -1).reshape(-1, axis)
    want = np.moveaxis(log_softmax_s16(rows, **params).reshape(outer, inner, axis), -1, 1)
    assert_equal(_log_softmax(lib, x, outer, axis, inner, params), want)


def test_log_softmax_s16_is_within_two_steps_of_float64(lib):
    """Rows of 1000 values too: values past exp's table (-10) count 0, not its first entry, once each."""
    rng = np.random.default_rng(9)
    for axis, spread in ((10, 3.0), (1000, 6.0)):
        x = rng.integers(-32768, 32768, (4, axis)).astype(np.int16)
        s_in = spread / 32768
        xf = x.astype(np.float64) * s_in
        want = xf - xf.max(-1, keepdims=True) - np.log(np.exp(xf - xf.max(-1, keepdims=True)).sum(-1, keepdims=True))
        s_out = np.abs(want).max() / 32767
        got = _log_softmax(lib, x, 4, axis, 1, log_softmax_params(s_in, s_out)).astype(np.float64)
        assert np.abs(got - want / s_out).max() <= 2.0
    assert LN2_Q30 == 744261118


def test_log_softmax_s16_c_table_is_the_derived_one():
    text = (ROOT / "runtime_c" / "kernels" / "softmax" / "mcu_log_softmax_s16.c").read_text()
    body = re.search(r"mcu_log1p_s16_table\[513\]\s*=\s*\{([^}]*)\}", text)
    assert body is not None
    np.testing.assert_array_equal(LOG1P_TABLE, [int(v) for v in body.group(1).split(",") if v.strip()])


def test_log_softmax_s16_checks_its_arguments(lib):
    x = np.zeros(8, np.int16)
    p = LogSoftmaxS16Params(1, 4, 1, 1 << 30, 0, -1, 0, 1 << 30, 0)
    assert lib.mcu_log_softmax_s16(ctypes.byref(p), ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG
    p = LogSoftmaxS16Params(1, 4, 1, 1 << 30, 0, 1 << 30, 0, 1 << 30, 0)
    assert lib.mcu_log_softmax_s16(ctypes.byref(p), ptr(x), ptr(x[1:])) == MCU_ERR_INVALID_ARG


# --- CMSIS-NN's own kernel ------------------------------------------------------------------------------------

CMSIS_SOURCES = ("FullyConnectedFunctions/arm_batch_matmul_s16.c", "NNSupportFunctions/arm_nn_vec_mat_mult_t_s16_s16.c")


class CmsisBmmParams(ctypes.Structure):
    _fields_ = [("adj_x", ctypes.c_bool), ("adj_y", ctypes.c_bool), ("fc_params", FcParams)]


class CmsisContext(ctypes.Structure):
    _fields_ = [("buf", _P), ("size", ctypes.c_int32)]


@pytest.fixture(scope="module")
def cmsis():
    root = cmsis_nn_root(CMSIS_SOURCES, "arm_batch_matmul_s16")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_SOURCES], "bmm_s16")
    handle.arm_batch_matmul_s16.argtypes = [ctypes.POINTER(CmsisContext), ctypes.POINTER(CmsisBmmParams),
                                            ctypes.POINTER(PerTensor), ctypes.POINTER(Dims), _P,
                                            ctypes.POINTER(Dims), _P, ctypes.POINTER(Dims), _P]
    handle.arm_batch_matmul_s16.restype = ctypes.c_int
    return handle


@CASES
@given(batch=st.integers(1, 3), m=st.integers(1, 5), k=st.integers(1, 40), n=st.integers(1, 7), mode=MODES,
       s_a=scales, s_b=scales, s_out=scales, seed=st.integers(0, 2**31 - 1))
def test_bmm_s16_equals_cmsis_nn(lib, cmsis, batch, m, k, n, mode, s_a, s_b, s_out, seed):
    """CMSIS-NN reads the right operand transposed ([n][k]); ours [k][n]: the same codes."""
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, (batch, m, k), mode), int16_data(rng, (batch, k, n), mode)
    mult, shift = bmm_params(s_a, s_b, s_out)
    shift = min(shift, 14)
    theirs = np.zeros((batch, m, n), np.int16)
    bt = np.ascontiguousarray(np.transpose(b, (0, 2, 1)))
    params = CmsisBmmParams(False, False, FcParams(0, 0, 0, Act(INT16_MIN, INT16_MAX)))
    status = cmsis.arm_batch_matmul_s16(ctypes.byref(CmsisContext(None, 0)), ctypes.byref(params),
                                        ctypes.byref(PerTensor(mult, shift)), ctypes.byref(Dims(batch, 1, m, k)),
                                        ptr(np.ascontiguousarray(a)), ctypes.byref(Dims(batch, 1, n, k)), ptr(bt),
                                        ctypes.byref(Dims(batch, 1, m, n)), ptr(theirs))
    assert status == 0
    assert_equal(_bmm(lib, a, b, mult, shift), theirs)
