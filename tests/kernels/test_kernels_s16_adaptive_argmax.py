"""mcu_adaptive_avg_pool_s16 (w8a16's adaptive average pooling to any size; ours, the int8 kernel's windows on int16
codes) against the Python integer reference (mcu/reference/pool.py) and PyTorch's adaptive_avg_pool2d of the codes,
and mcu_argmax_s16 (w8a16's argmax on int16 codes; ours, mcu_argmax_s8's form) against numpy's first-largest index,
over hypothesis-drawn shapes and int16 extremes (ties, sums past int32); their argument checks."""

from __future__ import annotations

import ctypes

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE, MCU_OK, ptr
from mcu.reference.pool import adaptive_avg_pool_s16


class ResampleParams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in ("outer", "in_h", "in_w", "out_h", "out_w", "inner")]


def _adaptive(x: np.ndarray, oh: int, ow: int, out: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    fn = cb.lib().mcu_adaptive_avg_pool_s16
    fn.argtypes = [ctypes.c_void_p] * 3
    fn.restype = ctypes.c_int
    n, h, w, c = x.shape
    out = np.full((n, oh, ow, c), 7, np.int16) if out is None else out
    return fn(ctypes.byref(ResampleParams(n, h, w, oh, ow, c)), ptr(x), ptr(out)), out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 2), st.integers(1, 9), st.integers(1, 9), st.integers(1, 4), st.integers(1, 5),
       st.integers(1, 5), st.sampled_from(["uniform", "extremes", "-32768", "32767"]), st.integers(0, 2**32 - 1))
def test_adaptive_avg_pool_s16(n: int, h: int, w: int, c: int, oh: int, ow: int, data: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (n, h, w, c)
    x = {"uniform": lambda: rng.integers(-32768, 32768, shape), "extremes": lambda: rng.choice([-32768, 32767], shape),
         "-32768": lambda: np.full(shape, -32768), "32767": lambda: np.full(shape, 32767)}[data]().astype(np.int16)
    status, got = _adaptive(x, oh, ow)
    assert status == MCU_OK
    np.testing.assert_array_equal(got, adaptive_avg_pool_s16(x, n, h, w, c, oh, ow).reshape(got.shape))
    # PyTorch's windows: its average of the codes within the rounding's half step
    real = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2),
                                                   (oh, ow)).permute(0, 2, 3, 1).numpy()
    assert np.abs(got - real).max() <= 0.5


def test_adaptive_avg_pool_s16_window_bound() -> None:
    """The int32 sum's edge: 253x253 to 1x1 (64,009 values of 32767 or -32768, the sum within 2^31 of overflowing)
    averages exactly; 254x254, whose window bound (fewer than in / out + 2 along each axis: 65,536 values) passes
    the 65,534 the sum takes, is refused."""
    for v in (32767, -32768):
        status, got = _adaptive(np.full((1, 253, 253, 1), v, np.int16), 1, 1)
        assert status == MCU_OK and got.item() == v
    assert _adaptive(np.full((1, 254, 254, 1), 32767, np.int16), 1, 1)[0] == MCU_ERR_SHAPE


def test_adaptive_avg_pool_s16_checks_its_arguments() -> None:
    x = np.zeros((1, 4, 4, 2), np.int16)
    assert _adaptive(x, 2, 3)[0] == MCU_OK
    assert _adaptive(x, 0, 3, out=np.zeros(8, np.int16))[0] == MCU_ERR_SHAPE
    fn = cb.lib().mcu_adaptive_avg_pool_s16
    assert fn(ctypes.byref(ResampleParams(1, 4, 4, 2, 2, 2)), ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG


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


def test_w8a16_lowering_refuses_what_the_kernel_refuses() -> None:
    """The lowering applies the kernel's window bound, so a model the kernel would refuse at run time is refused
    at build time with the pool's sizes."""
    from mcu.ir import Op, QuantParams, Tensor
    from mcu.passes.quantized.pool import CONVERTERS, S16_ADAPTIVE_WINDOW_MAX

    q = QuantParams(scale=(0.01,), zero_point=(0,), qmin=-32768, qmax=32767)

    def lower(h: int, oh: int) -> object:
        x = Tensor(name="x", shape=(1, 1, h, h), dtype="int16", quant=q)
        y = Tensor(name="y", shape=(1, 1, oh, oh), dtype="int16", quant=q)
        return CONVERTERS["adaptive_avg_pool"](None, Op("adaptive_avg_pool", [x], [y], {}, "pool"), [x], y)

    assert isinstance(lower(253, 1), Op) and isinstance(lower(500, 2), Op)
    refusal = lower(254, 1)
    assert isinstance(refusal, str) and "254x254 to 1x1" in refusal and f"{S16_ADAPTIVE_WINDOW_MAX:,}" in refusal
