"""Weight-only int8 (int8-weight) and dynamic activation quantization (int8-dynamic) of linear layers:
C kernels equal the Python reference bit for bit; models run on the simulated board."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind
import cbind_s8
from mcu.reference import mixed
from repo import requires_qemu

_P = ctypes.c_void_p


def _lib():
    lib = cbind.lib()
    lib.mcu_linear_w8_f32.argtypes = [_P] * 6
    lib.mcu_linear_dyn_s8.argtypes = [_P] * 7
    return lib


@st.composite
def linear_case(draw):
    batch, nin, nout = draw(st.integers(1, 3)), draw(st.integers(1, 70)), draw(st.integers(1, 20))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.sampled_from([1e-3, 0.5, 1.0, 30.0]))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((batch, nin)) * scale).astype(np.float32)
    if draw(st.booleans()):
        x = np.abs(x)  # all non-negative (after a ReLU): the range still includes 0
    if draw(st.integers(0, 9)) == 0:
        x[:] = 0  # a zero range
    w = rng.standard_normal((nout, nin)).astype(np.float32)
    b = rng.standard_normal(nout).astype(np.float32)
    lo, hi = draw(st.sampled_from([(-np.inf, np.inf), (0.0, np.inf), (0.0, 6.0)]))
    return x, w, b, lo, hi


def _params(x, w, lo, hi):
    return cbind.LinearParams(x.shape[0], w.shape[1], w.shape[0], lo, hi)


@settings(max_examples=300, deadline=None)
@given(linear_case())
def test_linear_w8_equals_reference(case) -> None:
    x, w, b, lo, hi = case
    q, scale = mixed.quantize_weights(w)
    out = np.zeros((x.shape[0], w.shape[0]), np.float32)
    p = _params(x, w, lo, hi)
    status = _lib().mcu_linear_w8_f32(ctypes.addressof(p), cbind.ptr(x), cbind.ptr(q), cbind.ptr(scale),
                                      cbind.ptr(b), cbind.ptr(out))
    assert status == 0
    np.testing.assert_array_equal(out.view(np.uint32), mixed.linear_w8_f32(x, q, scale, b, lo, hi).view(np.uint32))


@settings(max_examples=300, deadline=None)
@given(linear_case())
def test_linear_dyn_equals_reference(case) -> None:
    x, w, b, lo, hi = case
    q, scale = mixed.quantize_weights(w)
    out = np.zeros((x.shape[0], w.shape[0]), np.float32)
    scratch = np.zeros(x.size, np.int8)
    ctx = cbind_s8.Context(scratch.ctypes.data, x.size)
    p = _params(x, w, lo, hi)
    status = _lib().mcu_linear_dyn_s8(ctypes.addressof(ctx), ctypes.addressof(p), cbind.ptr(x), cbind.ptr(q),
                                      cbind.ptr(scale), cbind.ptr(b), cbind.ptr(out))
    assert status == 0
    np.testing.assert_array_equal(out.view(np.uint32), mixed.linear_dyn_s8(x, q, scale, b, lo, hi).view(np.uint32))
    # and it approximates the float layer (the error of 8-bit input and weights)
    want = np.clip(x @ w.T + b, lo, hi)
    assert np.max(np.abs(out - want)) <= 0.05 * (np.max(np.abs(x)) * np.abs(w).sum(axis=1).max() + 1e-3)


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("mode", ["int8-weight", "int8-dynamic"])
def test_autoencoder_with_int8_linear_weights(compiled, mode: str) -> None:
    cm = compiled("fc_autoencoder", quantize=mode)
    assert cm.graph.op_counts() == {"linear_w8" if mode == "int8-weight" else "linear_dyn": 10}
    assert cm.reference_is_exact and cm.tolerances() is None
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    fp32 = compiled("fc_autoencoder")
    assert sim.max_abs_error_vs_eager <= 0.02 * max(float(np.abs(y).max()) for row in fp32.eager_outputs
                                                      for y in row)
    assert cm.build().flash_bytes < fp32.build().flash_bytes * 0.4  # int8 weights: a quarter of fp32's
