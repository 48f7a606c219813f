"""An nn.LSTM's final cell state at w8a16, mcu_lstm_final_cell_s16, against its Python integer reference
(mcu/reference/lstm_s16.py) bit for bit, plain and dual-MAC, over hypothesis-drawn shapes, initial states, int16
extremes and extreme constants: from the hidden states mcu_lstm_s16 wrote it gives the cell the layer ended with
(the reference's whole-layer run); its argument checks."""

from __future__ import annotations

import ctypes
import functools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import cbind
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_NULL_POINTER, MCU_OK, ptr
from mcu.reference.lstm_s16 import LstmS16, layer_params, lstm_final_cell_s16, lstm_s16, run_layer
from test_kernels_lstm_s16 import (MCU_ERR_BUFFER_TOO_SMALL, SETTINGS, Context, LstmParams, emulated_lib, extreme_layer,
                                   int16_codes, small_layer)

_P = ctypes.c_void_p


@functools.lru_cache(maxsize=2)
def _kernel(dsp: bool):
    fn = (emulated_lib() if dsp else cbind.lib()).mcu_lstm_final_cell_s16
    fn.argtypes = [_P] * 11
    fn.restype = ctypes.c_int
    return fn


def run_final_cell(p: LstmS16, x: np.ndarray, seq: np.ndarray | None, h0: np.ndarray | None = None,
                   c0: np.ndarray | None = None, dsp: bool = False, scratch: int | None = None,
                   out: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    params = LstmParams(n, t, features, hidden, p.cell_shift, p.forget_mult, p.forget_shift, p.input_mult,
                        p.input_shift, p.out_mult, p.out_shift)
    size = 2 * (hidden + features) if scratch is None else scratch
    buf = np.zeros(max(size, 1) // 2 + 8, np.int16)
    ctx = Context(buf.ctypes.data, size)
    out = np.full((n, hidden), 99, np.int16) if out is None else out
    arrays = [np.ascontiguousarray(a) for a in (p.w_ih, p.w_hh, p.bias.astype(np.int64), p.quant.astype(np.int32))]
    operands = [None if a is None else ptr(np.ascontiguousarray(a, np.int16)) for a in (x, seq, h0, c0)]
    status = _kernel(dsp)(ctypes.addressof(ctx), ctypes.addressof(params), *operands, *(ptr(a) for a in arrays),
                          ptr(out))
    return status, out


def _check(p: LstmS16, x: np.ndarray, h0: np.ndarray | None, c0: np.ndarray | None) -> None:
    seq, cell = run_layer(x, p, h0, c0)
    np.testing.assert_array_equal(seq, lstm_s16(x, p, h0, c0))
    want = lstm_final_cell_s16(x, seq, p, h0, c0)
    np.testing.assert_array_equal(want, cell)  # from the hidden states: the cell the layer ended with
    for dsp in (False, True):
        status, got = run_final_cell(p, x, seq, h0, c0, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 6), features=st.sampled_from([1, 4, 17, 300]),
       hidden=st.sampled_from([1, 3, 8, 33]), weight_scale=st.sampled_from([1e-3, 0.2, 1.0, 30.0]),
       cell_shift=st.integers(0, 15), which=st.sampled_from(["none", "both", "h", "c"]),
       data=st.sampled_from(["random", "extremes", "small"]), seed=st.integers(0, 2**16))
def test_lstm_final_cell_s16_matches_the_reference(batch: int, steps: int, features: int, hidden: int,
                                                   weight_scale: float, cell_shift: int, which: str, data: str,
                                                   seed: int) -> None:
    """Layers quantized as the compiler quantizes them, from the zero state or given ones, over scales that
    saturate the gates and the cell at one end and leave them near zero at the other."""
    rng = np.random.default_rng(seed)
    rows = 4 * hidden
    try:
        p = layer_params(rng.standard_normal((rows, features)) * weight_scale,
                         rng.standard_normal((rows, hidden)) * weight_scale, rng.standard_normal(rows), None,
                         4 / 32767, 1 / 32767, cell_shift)
    except ValueError:
        return  # a gate multiplier of 2^14 or more: the lowering refuses it
    x = int16_codes(rng, (batch, steps, features), data)
    h0 = int16_codes(rng, (batch, hidden), data) if which in ("both", "h") else None
    c0 = int16_codes(rng, (batch, hidden), data) if which in ("both", "c") else None
    _check(p, x, h0, c0)


@SETTINGS
@given(hidden=st.sampled_from([1, 4, 9]), features=st.sampled_from([3, 260]), seed=st.integers(0, 2**32 - 1),
       mult=st.sampled_from([0, 2**30, 2**31 - 1, 0x7FFF0000]), shift=st.sampled_from([-31, -2, 0, 14]),
       cell_mult=st.sampled_from([0, 2**30, 2**31 - 1]), cell_shift_q=st.sampled_from([-31, -14, 0, 5]))
def test_lstm_final_cell_s16_matches_the_reference_at_extreme_constants(hidden: int, features: int, seed: int,
                                                                        mult: int, shift: int, cell_mult: int,
                                                                        cell_shift_q: int) -> None:
    """Multipliers and shifts at the ends of their ranges, biases past int32, int16 and int8 extremes, from
    extreme initial states: every saturation of the gates and the cell is reached and C equals the reference."""
    rng = np.random.default_rng(seed)
    p = extreme_layer(rng, hidden, features, mult, shift, cell_mult, cell_shift_q)
    extremes = np.array([-32768, 32767, 0, -1])
    x = rng.choice(extremes, (2, 4, features)).astype(np.int16)
    _check(p, x, rng.choice(extremes, (2, hidden)).astype(np.int16), rng.choice(extremes, (2, hidden)).astype(np.int16))


def test_lstm_final_cell_s16_reads_the_hidden_states() -> None:
    """Other hidden states give another cell (C and reference alike): the kernel reads them, not its own."""
    p = small_layer()
    x = np.full((1, 3, 4), 2000, np.int16)
    seq = lstm_s16(x, p)
    other = seq.copy()
    other[0, 0] = 30000
    got = run_final_cell(p, x, other)[1]
    assert not np.array_equal(got, run_final_cell(p, x, seq)[1])
    np.testing.assert_array_equal(got, lstm_final_cell_s16(x, other, p))


def test_lstm_final_cell_s16_checks_its_arguments() -> None:
    p = small_layer()
    x = np.ones((1, 2, 4), np.int16)
    seq = lstm_s16(x, p)
    assert run_final_cell(p, x, seq)[0] == MCU_OK
    assert run_final_cell(p, x, None)[0] == MCU_ERR_NULL_POINTER
    assert run_final_cell(p, x, seq, scratch=2 * (3 + 4) - 2)[0] == MCU_ERR_BUFFER_TOO_SMALL
    inside = np.zeros((1, 2, 3), np.int16)  # the output inside the hidden states
    status = _kernel(False)(None, None, None, None, None, None, None, None, None, None, None)
    assert status == MCU_ERR_NULL_POINTER
    assert run_final_cell(p, x, inside, out=inside[0])[0] == MCU_ERR_INVALID_ARG
