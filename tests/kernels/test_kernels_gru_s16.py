"""The 16x8 GRU of w8a16, mcu_gru_s16, against its Python integer reference (mcu/reference/gru_s16.py) bit for bit
over hypothesis-drawn shapes, parameters, initial states and int16/int8 extremes, in the plain C and the emulated
dual-MAC build; the reference against PyTorch's GRU in float; the kernel's argument checks."""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_NULL_POINTER, MCU_ERR_SHAPE, MCU_OK, ptr
from host_builds import build_emulated_lib
from mcu.reference.gru_s16 import GruS16, gru_s16, layer_params

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MCU_ERR_BUFFER_TOO_SMALL = 5
_P = ctypes.c_void_p
c_int32 = ctypes.c_int32


class GruParams(ctypes.Structure):
    _fields_ = [(n, c_int32) for n in ("batch", "steps", "input_size", "hidden", "cand_mult", "cand_shift",
                                        "keep_mult", "keep_shift", "out_mult", "out_shift")]


class Context(ctypes.Structure):
    _fields_ = [("buf", _P), ("size", c_int32)]


@functools.lru_cache(maxsize=1)
def _emulated_lib() -> ctypes.CDLL:
    """The kernels built again with their DSP paths emulated in C (the dual-MAC order the M33 runs)."""
    return ctypes.CDLL(str(build_emulated_lib()))


def _kernel(dsp: bool = False):
    fn = (_emulated_lib() if dsp else cbind.lib()).mcu_gru_s16
    fn.argtypes = [_P] * 9
    fn.restype = ctypes.c_int
    return fn


def _params(p: GruS16, x: np.ndarray) -> GruParams:
    n, t, features = x.shape
    return GruParams(n, t, features, p.w_hh.shape[1], p.cand_mult, p.cand_shift, p.keep_mult, p.keep_shift,
                     p.out_mult, p.out_shift)


def run_kernel(p: GruS16, x: np.ndarray, h0: np.ndarray | None = None, scratch: int | None = None,
               params: GruParams | None = None, ctx_buf: int | None = None,
               dsp: bool = False) -> tuple[int, np.ndarray]:
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    params = _params(p, x) if params is None else params
    size = 2 * (hidden + features) if scratch is None else scratch
    buf = np.zeros(max(size, 1) // 2 + 8, np.int16)  # 2-byte aligned
    ctx = Context(buf.ctypes.data if ctx_buf is None else ctx_buf, size)
    out = np.full((n, t, hidden), 99, np.int16)
    arrays = [np.ascontiguousarray(a) for a in (x.astype(np.int16), p.w_ih, p.w_hh, p.bias.astype(np.int64),
                                                p.quant.astype(np.int32))]
    state = None if h0 is None else np.ascontiguousarray(h0, dtype=np.int16)
    status = _kernel(dsp)(ctypes.addressof(ctx), ctypes.addressof(params), ptr(arrays[0]),
                          None if state is None else ptr(state), *(ptr(a) for a in arrays[1:]), ptr(out))
    return status, out


def _data(rng: np.random.Generator, shape: tuple[int, ...], mode: str) -> np.ndarray:
    if mode == "extremes":
        return rng.choice(np.array([-32768, 32767, -1, 0]), size=shape).astype(np.int16)
    if mode == "small":
        return rng.integers(-300, 301, size=shape).astype(np.int16)
    return rng.integers(-32768, 32768, size=shape).astype(np.int16)


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 6), features=st.sampled_from([1, 2, 5, 10, 17, 40, 300]),
       hidden=st.sampled_from([1, 2, 3, 8, 16, 33]), weight_scale=st.sampled_from([1e-3, 0.2, 1.0, 30.0]),
       x_range=st.sampled_from([0.01, 1.0, 8.0, 100.0]), h_range=st.sampled_from([0.05, 1.0]),
       state_shift=st.integers(0, 15), bias=st.booleans(), state=st.booleans(),
       data=st.sampled_from(["random", "extremes", "small"]), seed=st.integers(0, 2**16))
def test_gru_s16_matches_the_reference(batch: int, steps: int, features: int, hidden: int, weight_scale: float,
                                       x_range: float, h_range: float, state_shift: int, bias: bool, state: bool,
                                       data: str, seed: int) -> None:
    """Layers quantized as the compiler quantizes them (layer_params), over scales that saturate the gates and
    the candidate term at one end and leave them near zero at the other, from the zero state or a given one."""
    rng = np.random.default_rng(seed)
    rows = 3 * hidden
    w_ih = rng.standard_normal((rows, features)) * weight_scale
    w_hh = rng.standard_normal((rows, hidden)) * weight_scale
    b_ih = rng.standard_normal(rows) * weight_scale if bias else None
    b_hh = rng.standard_normal(rows) * weight_scale if bias else None
    try:
        p = layer_params(w_ih, w_hh, b_ih, b_hh, x_range / 32767, h_range / 32767, state_shift)
    except ValueError:
        return  # a gate multiplier of 2^14 or more: the lowering refuses it (tested below)
    x = _data(rng, (batch, steps, features), data)
    h0 = _data(rng, (batch, hidden), data) if state else None
    want = gru_s16(x, p, h0)
    for dsp in (False, True):  # the plain C and the dual-MAC path
        status, got = run_kernel(p, x, h0, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(hidden=st.sampled_from([1, 4, 9]), features=st.sampled_from([3, 260, 600]), seed=st.integers(0, 2**32 - 1),
       mult=st.sampled_from([0, 2**30, 2**31 - 1, 0x7FFF0000, 0x7FFEFFFF]), shift=st.sampled_from([-31, -2, 0, 14]),
       cell_mult=st.sampled_from([0, 2**30, 2**31 - 1]), cell_shift=st.sampled_from([-31, -14, 0, 5]))
def test_gru_s16_matches_the_reference_at_extreme_constants(hidden: int, features: int, seed: int, mult: int,
                                                            shift: int, cell_mult: int, cell_shift: int) -> None:
    """Gate rows with Q31 multipliers at the ends of the Q15 reduction, 16x8 shifts at both ends, biases past
    int32, the candidate's, keep's and output's multipliers and shifts at their ends (left shifts that saturate
    the int32 requantization), int16 inputs and states and int8 weights at theirs: every saturation and wrap
    is reached and C equals the reference."""
    rng = np.random.default_rng(seed)
    rows = 3 * hidden
    quant = np.stack([np.full(rows, mult), np.full(rows, shift), rng.integers(2**30, 2**31, rows),
                      rng.integers(-31, 15, rows)], axis=1)
    p = GruS16(w_ih=rng.choice(np.array([-128, 127, 0, 5]), (rows, features)).astype(np.int8),
               w_hh=rng.choice(np.array([-128, 127, 0, -3]), (rows, hidden)).astype(np.int8),
               bias=rng.choice(np.array([-(2**40), 0, 2**40, 12345, -(2**31)]), 4 * hidden).astype(np.int64),
               quant=quant.astype(np.int32), state_shift=0, cand_mult=cell_mult, cand_shift=cell_shift,
               keep_mult=int(rng.integers(0, 2**31)), keep_shift=int(rng.integers(-31, 31)),
               out_mult=int(rng.integers(0, 2**31)), out_shift=int(rng.integers(-31, 31)))
    x = rng.choice(np.array([-32768, 32767, 0, -1]), (2, 4, features)).astype(np.int16)
    h0 = rng.choice(np.array([-32768, 32767, 0, -1]), (2, hidden)).astype(np.int16)
    for state in (None, h0):
        want = gru_s16(x, p, state)
        for dsp in (False, True):
            status, got = run_kernel(p, x, state, dsp=dsp)
            assert status == MCU_OK
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_s16_follows_pytorchs_gru(bias: bool) -> None:
    """The integer layer stays within a few int16 steps of the state of torch's GRU over a sequence, from the zero
    state and from a given one: the arithmetic is PyTorch's cell, only rounded."""
    torch.manual_seed(0)
    gru = torch.nn.GRU(6, 5, batch_first=True, bias=bias)
    x = torch.randn(2, 8, 6)
    h0 = torch.rand(1, 2, 5) - 0.5
    s_x, s_h = 4.0 / 32767, 1.0 / 32767
    w = [t.detach().numpy() for t in (gru.weight_ih_l0, gru.weight_hh_l0)]
    b = [t.detach().numpy() for t in (gru.bias_ih_l0, gru.bias_hh_l0)] if bias else [None, None]
    p = layer_params(w[0], w[1], b[0], b[1], s_x, s_h, 11)
    xq = np.clip(np.round(x.numpy() / s_x), -32768, 32767).astype(np.int16)
    for start in (None, h0):
        want = gru(x, start)[0].detach().numpy()
        hq = None if start is None else np.round(start[0].numpy() / s_h).astype(np.int16)
        got = gru_s16(xq, p, hq) * s_h
        assert np.max(np.abs(got - want)) < 0.01
        assert run_kernel(p, xq, hq)[1].tolist() == gru_s16(xq, p, hq).tolist()


def _small_layer(hidden: int = 3, features: int = 4) -> GruS16:
    rng = np.random.default_rng(1)
    return layer_params(rng.standard_normal((3 * hidden, features)), rng.standard_normal((3 * hidden, hidden)),
                        None, None, 2 / 32767, 1 / 32767, 12)


def test_gru_s16_checks_its_arguments() -> None:
    p = _small_layer()
    x = np.ones((1, 2, 4), np.int16)
    good = _params(p, x)
    assert run_kernel(p, x)[0] == MCU_OK
    assert run_kernel(p, x, scratch=13)[0] == MCU_ERR_BUFFER_TOO_SMALL
    assert run_kernel(p, x, ctx_buf=0)[0] == MCU_ERR_NULL_POINTER
    for field, value, status in (("hidden", 0, MCU_ERR_SHAPE), ("steps", -1, MCU_ERR_SHAPE),
                                 ("input_size", 4097, MCU_ERR_SHAPE), ("cand_mult", -1, MCU_ERR_INVALID_ARG),
                                 ("out_mult", -1, MCU_ERR_INVALID_ARG), ("keep_shift", 31, MCU_ERR_INVALID_ARG)):
        bad = GruParams.from_buffer_copy(good)
        setattr(bad, field, value)
        assert run_kernel(p, x, params=bad)[0] == status, field
    wrong = GruS16(p.w_ih, p.w_hh, p.bias, p.quant.copy(), p.state_shift, p.cand_mult, p.cand_shift, p.keep_mult,
                   p.keep_shift, p.out_mult, p.out_shift)
    wrong.quant[5, 3] = 15  # a 16x8 shift past 14
    assert run_kernel(wrong, x)[0] == MCU_ERR_INVALID_ARG
    # the output over the input, then over the state
    buf = np.zeros(16, np.int16)
    ctx = Context(buf.ctypes.data, 14)
    both = np.zeros((1, 2, 4), np.int16)
    consts = [ptr(a) for a in (p.w_ih, p.w_hh, p.bias, p.quant)]
    assert _kernel()(ctypes.addressof(ctx), ctypes.addressof(good), ptr(both), None, *consts, ptr(both)) == \
        MCU_ERR_INVALID_ARG
    out = np.zeros((1, 2, 3), np.int16)
    assert _kernel()(ctypes.addressof(ctx), ctypes.addressof(good), ptr(x), ptr(out), *consts, ptr(out)) == \
        MCU_ERR_INVALID_ARG


def test_gru_s16_layer_params_refuses_a_multiplier_past_the_16x8_range() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="2\\^14"):
        layer_params(rng.standard_normal((3, 2)) * 1e6, rng.standard_normal((3, 1)), None, None, 1.0, 1 / 32767, 12)
