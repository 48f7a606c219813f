"""mcu_amax_s16 and mcu_amin_s16 (w8a16's torch.amax / torch.amin over dims; ours, CMSIS-NN has no 16x8
reduction): the extreme int16 code along the middle axis of [outer][axis][inner], requantized with mcu_mean_s16's
arithmetic, bit-exact with mcu/reference/s16.py's extreme_s16 over extremes of data, multiplier, shift and clamp."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from mcu.reference.arith import quantize_multiplier
from mcu.reference.s16 import SHIFT_MAX, extreme_s16
from s8_cases import assert_equal
from test_kernels_s16 import acts, int16_data, multipliers

_P = ctypes.c_void_p


class MeanS16Params(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in ("outer", "axis", "inner", "multiplier", "shift", "act_min", "act_max")]


@pytest.fixture(scope="module")
def lib():
    handle = cb.lib()
    for name in ("mcu_amax_s16", "mcu_amin_s16"):
        fn = getattr(handle, name)
        fn.argtypes = [ctypes.POINTER(MeanS16Params), _P, _P]
        fn.restype = ctypes.c_int
    return handle


@settings(max_examples=60, deadline=None)
@given(largest=st.booleans(), outer=st.integers(1, 3), axis=st.one_of(st.integers(1, 40), st.just(700)),
       inner=st.integers(1, 9), data=st.sampled_from(["uniform", "small", "extremes", "worst"]),
       shift=st.one_of(st.integers(-31, SHIFT_MAX), st.sampled_from([-31, -1, 0, SHIFT_MAX])), act=acts,
       seed=st.integers(0, 2**32 - 1))
def test_extreme_s16(lib, largest, outer, axis, inner, data, shift, act, seed):
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (outer, axis, inner), data)
    m = int(multipliers(rng, 1, True)[0])
    p = MeanS16Params(outer, axis, inner, m, shift, act[0], act[1])
    out = np.zeros((outer, inner), dtype=np.int16)
    fn = lib.mcu_amax_s16 if largest else lib.mcu_amin_s16
    assert fn(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    assert_equal(out, extreme_s16(x, largest, m, shift, act_min=act[0], act_max=act[1]))


@pytest.mark.parametrize("largest", [True, False])
def test_extreme_s16_on_one_scale_is_the_extreme_code(lib, largest):
    """At s_in = s_out the kernel returns the extreme code itself, the largest and smallest codes included."""
    x = np.array([[[-32768, 5], [32767, -7], [0, 3]]], dtype=np.int16)
    m, shift = quantize_multiplier(1.0)
    p = MeanS16Params(1, 3, 2, m, shift, -32768, 32767)
    out = np.zeros((1, 2), dtype=np.int16)
    assert (lib.mcu_amax_s16 if largest else lib.mcu_amin_s16)(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    want = x.max(axis=1) if largest else x.min(axis=1)
    assert_equal(out, want)


def test_extreme_s16_refuses_an_overlapping_output(lib):
    x = np.zeros((1, 4, 2), dtype=np.int16)
    m, shift = quantize_multiplier(1.0)
    p = MeanS16Params(1, 4, 2, m, shift, -32768, 32767)
    assert lib.mcu_amax_s16(ctypes.byref(p), ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG
