"""mcu_argmax_s16 (w8a16's argmax on int16 codes; ours, mcu_argmax_s8's form) against numpy's first-largest index
over hypothesis-drawn [outer, reduce, inner] shapes and int16 extremes with ties; its argument checks."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE, MCU_OK, ptr


def _argmax(x: np.ndarray, out: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    fn = cb.lib().mcu_argmax_s16
    fn.argtypes = [ctypes.c_int32] * 3 + [ctypes.c_void_p] * 2
    fn.restype = ctypes.c_int
    outer, reduce, inner = x.shape
    out = np.full((outer, inner), -7, np.int32) if out is None else out
    return fn(outer, reduce, inner, ptr(x), ptr(out)), out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.integers(1, 40), st.integers(1, 5), st.sampled_from(["uniform", "extremes", "equal"]),
       st.integers(0, 2**32 - 1))
def test_argmax_s16(outer: int, reduce: int, inner: int, data: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (outer, reduce, inner)
    x = {"uniform": lambda: rng.integers(-32768, 32768, shape),
         "extremes": lambda: rng.choice([-32768, -32767, 32766, 32767], shape),  # ties at both ends
         "equal": lambda: np.full(shape, -32768)}[data]().astype(np.int16)
    status, got = _argmax(x)
    assert status == MCU_OK
    np.testing.assert_array_equal(got, np.argmax(x, axis=1))  # (numpy: the first of equal largest)


def test_argmax_s16_checks_its_arguments() -> None:
    x = np.zeros((2, 3, 4), np.int16)
    assert _argmax(x)[0] == MCU_OK
    fn = cb.lib().mcu_argmax_s16
    out = np.zeros(8, np.int32)
    assert fn(2, 0, 4, ptr(x), ptr(out)) == MCU_ERR_SHAPE
    assert fn(2, 3, 4, ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG  # the output over the input
