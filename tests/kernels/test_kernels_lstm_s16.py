"""The 16x8 LSTM of w8a16, mcu_lstm_s16, against its Python integer reference (mcu/reference/lstm_s16.py) bit for
bit over hypothesis-drawn shapes, parameters and int16/int8 extremes; its sigmoid and tanh against the real
functions; its argument checks; and against CMSIS-NN's arm_lstm_unidirectional_s16 built from CMSIS_NN_PATH
(per-gate multipliers, no recurrent bias, no cell clip: the conventions both share)."""

from __future__ import annotations

import ctypes
import functools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_NULL_POINTER, MCU_ERR_SHAPE, MCU_OK, ptr
from cmsis_nn_host import cmsis_nn_root, host_library
from host_builds import build_emulated_lib
from mcu.reference import arith
from repo import ROOT
from mcu.reference.lstm_s16 import SIGMOID_TABLE, LstmS16, activation_s16, layer_params, lstm_s16

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MCU_ERR_BUFFER_TOO_SMALL = 5
_P = ctypes.c_void_p
c_int32 = ctypes.c_int32


class LstmParams(ctypes.Structure):
    _fields_ = [(n, c_int32) for n in ("batch", "steps", "input_size", "hidden", "cell_shift", "forget_mult",
                                        "forget_shift", "input_mult", "input_shift", "out_mult", "out_shift")]


class Context(ctypes.Structure):
    _fields_ = [("buf", _P), ("size", c_int32)]


@functools.lru_cache(maxsize=1)
def emulated_lib() -> ctypes.CDLL:
    """The kernels built again with their DSP paths emulated in C (the dual-MAC order the M33 runs)."""
    return ctypes.CDLL(str(build_emulated_lib()))


def _kernel(dsp: bool = False):
    fn = (emulated_lib() if dsp else cbind.lib()).mcu_lstm_s16
    fn.argtypes = [_P] * 10
    fn.restype = ctypes.c_int
    return fn


def run_kernel(p: LstmS16, x: np.ndarray, scratch: int | None = None, params: LstmParams | None = None,
               out: np.ndarray | None = None, ctx_buf: int | None = None, dsp: bool = False,
               h0: np.ndarray | None = None, c0: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    if params is None:
        params = LstmParams(n, t, features, hidden, p.cell_shift, p.forget_mult, p.forget_shift, p.input_mult,
                            p.input_shift, p.out_mult, p.out_shift)
    size = 2 * (2 * hidden + features) if scratch is None else scratch
    buf = np.zeros(max(size, 1) // 2 + 8, np.int16)  # 2-byte aligned
    ctx = Context(buf.ctypes.data if ctx_buf is None else ctx_buf, size)
    out = np.full((n, t, hidden), 99, np.int16) if out is None else out
    arrays = [np.ascontiguousarray(a) for a in (x.astype(np.int16), p.w_ih, p.w_hh, p.bias.astype(np.int64),
                                                p.quant.astype(np.int32))]
    states = [None if s is None else np.ascontiguousarray(s, np.int16) for s in (h0, c0)]
    status = _kernel(dsp)(ctypes.addressof(ctx), ctypes.addressof(params), ptr(arrays[0]),
                          *(None if s is None else ptr(s) for s in states), *(ptr(a) for a in arrays[1:]), ptr(out))
    return status, out


def int16_codes(rng: np.random.Generator, shape: tuple[int, ...], mode: str) -> np.ndarray:
    if mode == "extremes":
        return rng.choice(np.array([-32768, 32767, -1, 0]), size=shape).astype(np.int16)
    if mode == "small":
        return rng.integers(-300, 301, size=shape).astype(np.int16)
    return rng.integers(-32768, 32768, size=shape).astype(np.int16)


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 6), features=st.sampled_from([1, 2, 5, 10, 17, 40, 300]),
       hidden=st.sampled_from([1, 3, 8, 16, 33]), weight_scale=st.sampled_from([1e-3, 0.2, 1.0, 30.0]),
       x_range=st.sampled_from([0.01, 1.0, 8.0, 100.0]), h_range=st.sampled_from([0.05, 1.0]),
       cell_shift=st.integers(0, 15), bias=st.booleans(), data=st.sampled_from(["random", "extremes", "small"]),
       seed=st.integers(0, 2**16))
def test_lstm_s16_matches_the_reference(batch: int, steps: int, features: int, hidden: int, weight_scale: float,
                                        x_range: float, h_range: float, cell_shift: int, bias: bool, data: str,
                                        seed: int) -> None:
    """Layers quantized as the compiler quantizes them (layer_params), over scales that saturate the gates and
    the cell at one end and leave them near zero at the other."""
    rng = np.random.default_rng(seed)
    rows = 4 * hidden
    w_ih = rng.standard_normal((rows, features)) * weight_scale
    w_hh = rng.standard_normal((rows, hidden)) * weight_scale
    b_ih = rng.standard_normal(rows) * weight_scale if bias else None
    b_hh = rng.standard_normal(rows) * weight_scale if bias else None
    try:
        p = layer_params(w_ih, w_hh, b_ih, b_hh, x_range / 32767, h_range / 32767, cell_shift)
    except ValueError:
        return  # a gate multiplier of 2^14 or more: the lowering refuses it (tested below)
    x = int16_codes(rng, (batch, steps, features), data)
    want = lstm_s16(x, p)
    for dsp in (False, True):  # the plain C and the dual-MAC path
        status, got = run_kernel(p, x, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(hidden=st.sampled_from([1, 4, 9]), features=st.sampled_from([3, 260, 600]), seed=st.integers(0, 2**32 - 1),
       mult=st.sampled_from([0, 2**30, 2**31 - 1, 0x7FFF0000, 0x7FFEFFFF]), shift=st.sampled_from([-31, -2, 0, 14]),
       cell_mult=st.sampled_from([0, 2**30, 2**31 - 1]), cell_shift_q=st.sampled_from([-31, -14, 0, 5]))
def test_lstm_s16_matches_the_reference_at_extreme_constants(hidden: int, features: int, seed: int, mult: int,
                                                             shift: int, cell_mult: int, cell_shift_q: int) -> None:
    """Gate rows with Q31 multipliers at the ends of the Q15 reduction, 16x8 shifts at both ends (wrapping the
    64-bit product's shifted value), biases past int32, the cell's and output's multipliers and shifts at their
    ends and int16/int8 inputs and weights at theirs: every saturation and wrap is reached and C equals the
    reference."""
    rng = np.random.default_rng(seed)
    p = extreme_layer(rng, hidden, features, mult, shift, cell_mult, cell_shift_q)
    x = rng.choice(np.array([-32768, 32767, 0, -1]), (2, 4, features)).astype(np.int16)
    want = lstm_s16(x, p)
    for dsp in (False, True):
        status, got = run_kernel(p, x, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 5), features=st.sampled_from([1, 4, 17]),
       hidden=st.sampled_from([1, 3, 8]), cell_shift=st.integers(0, 15), which=st.sampled_from(["both", "h", "c"]),
       data=st.sampled_from(["random", "extremes", "small"]), seed=st.integers(0, 2**16))
def test_lstm_s16_from_initial_states_matches_the_reference(batch: int, steps: int, features: int, hidden: int,
                                                            cell_shift: int, which: str, data: str,
                                                            seed: int) -> None:
    """From a given hidden state and cell (int16 extremes included), or either alone: plain and dual-MAC C equal
    the reference, and a given zero h0 equals no h0 (a recurrent product of zeros adds nothing)."""
    rng = np.random.default_rng(seed)
    rows = 4 * hidden
    p = layer_params(rng.standard_normal((rows, features)), rng.standard_normal((rows, hidden)),
                     rng.standard_normal(rows), None, 4 / 32767, 1 / 32767, cell_shift)
    x = int16_codes(rng, (batch, steps, features), data)
    h0 = int16_codes(rng, (batch, hidden), data) if which in ("both", "h") else None
    c0 = int16_codes(rng, (batch, hidden), data) if which in ("both", "c") else None
    want = lstm_s16(x, p, h0, c0)
    for dsp in (False, True):
        status, got = run_kernel(p, x, dsp=dsp, h0=h0, c0=c0)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)
    zeros = np.zeros((batch, hidden), np.int16)
    np.testing.assert_array_equal(lstm_s16(x, p, zeros, c0), lstm_s16(x, p, None, c0))


def test_lstm_s16_reads_its_initial_states() -> None:
    """A given hidden state and a given cell each change the output (C and reference), so the tests above would
    fail a kernel that ignored either."""
    p = small_layer(hidden=1, features=1)
    x = np.array([[[1000]]], np.int16)
    base = run_kernel(p, x)[1]
    for h0, c0 in ((np.array([[9000]], np.int16), None), (None, np.array([[3000]], np.int16))):
        got = run_kernel(p, x, h0=h0, c0=c0)[1]
        assert not np.array_equal(got, base)
        np.testing.assert_array_equal(got, lstm_s16(x, p, h0, c0))


def test_lstm_s16_sigmoid_and_tanh_follow_the_real_functions() -> None:
    q = np.arange(-32768, 32768)
    sig = activation_s16(q, 0, "sigmoid") / 32768.0
    tanh = activation_s16(q, 0, "tanh") / 32768.0
    real = q / 4096.0  # Q3.12
    assert np.max(np.abs(sig - 1.0 / (1.0 + np.exp(-real)))) < 1e-4
    assert np.max(np.abs(tanh - np.tanh(real))) < 2e-4
    assert np.all(np.diff(sig) >= 0) and np.all(np.diff(tanh) >= 0)
    for cs in (0, 5, 11, 12, 13, 15):  # the cell's tanh at its scale 2^-cs
        cell = activation_s16(q, 12 - cs, "tanh") / 32768.0
        assert np.max(np.abs(cell - np.tanh(q / 2.0 ** cs))) < 2e-4


def extreme_layer(rng: np.random.Generator, hidden: int, features: int, mult: int, shift: int, cell_mult: int,
                  cell_shift_q: int) -> LstmS16:
    """A layer's constants at the ends of their ranges: the gate rows' input multiplier and shift as given, the
    recurrent ones, the cell's and the output's drawn over theirs, int8 weights and int64 biases past int32."""
    rows = 4 * hidden
    quant = np.stack([np.full(rows, mult), np.full(rows, shift), rng.integers(2**30, 2**31, rows),
                      rng.integers(-31, 15, rows)], axis=1)
    return LstmS16(w_ih=rng.choice(np.array([-128, 127, 0, 5]), (rows, features)).astype(np.int8),
                   w_hh=rng.choice(np.array([-128, 127, 0, -3]), (rows, hidden)).astype(np.int8),
                   bias=rng.choice(np.array([-(2**40), 0, 2**40, 12345, -(2**31)]), rows).astype(np.int64),
                   quant=quant.astype(np.int32), cell_shift=int(rng.integers(0, 16)),
                   forget_mult=cell_mult, forget_shift=cell_shift_q, input_mult=int(rng.integers(0, 2**31)),
                   input_shift=int(rng.integers(-31, 1)), out_mult=int(rng.integers(0, 2**31)),
                   out_shift=int(rng.integers(-31, 1)))


def small_layer(hidden: int = 3, features: int = 4) -> LstmS16:
    rng = np.random.default_rng(1)
    return layer_params(rng.standard_normal((4 * hidden, features)), rng.standard_normal((4 * hidden, hidden)),
                        None, None, 2 / 32767, 1 / 32767, 12)


def test_lstm_s16_checks_its_arguments() -> None:
    p = small_layer()
    x = np.ones((1, 2, 4), np.int16)
    good = LstmParams(1, 2, 4, 3, p.cell_shift, p.forget_mult, p.forget_shift, p.input_mult, p.input_shift,
                      p.out_mult, p.out_shift)
    assert run_kernel(p, x, params=good)[0] == MCU_OK
    assert run_kernel(p, x, scratch=19)[0] == MCU_ERR_BUFFER_TOO_SMALL
    assert run_kernel(p, x, ctx_buf=0)[0] == MCU_ERR_NULL_POINTER
    for field, value, status in (("hidden", 0, MCU_ERR_SHAPE), ("steps", -1, MCU_ERR_SHAPE),
                                 ("input_size", 4097, MCU_ERR_SHAPE), ("cell_shift", 16, MCU_ERR_INVALID_ARG),
                                 ("out_mult", -1, MCU_ERR_INVALID_ARG), ("forget_shift", 31, MCU_ERR_INVALID_ARG)):
        bad = LstmParams.from_buffer_copy(good)
        setattr(bad, field, value)
        assert run_kernel(p, x, params=bad)[0] == status, field
    wrong = LstmS16(p.w_ih, p.w_hh, p.bias, p.quant.copy(), p.cell_shift, p.forget_mult, p.forget_shift,
                    p.input_mult, p.input_shift, p.out_mult, p.out_shift)
    wrong.quant[5, 1] = 15  # a 16x8 shift past 14
    assert run_kernel(wrong, x)[0] == MCU_ERR_INVALID_ARG
    # the output over the input
    both, buf = np.zeros((1, 2, 4), np.int16), np.zeros(16, np.int16)
    ctx = Context(buf.ctypes.data, 20)
    status = _kernel()(ctypes.addressof(ctx), ctypes.addressof(good), ptr(both), None, None, ptr(p.w_ih),
                       ptr(p.w_hh), ptr(p.bias), ptr(p.quant), ptr(both))
    assert status == MCU_ERR_INVALID_ARG
    # an initial state or cell over the output
    out = np.zeros((1, 2, 3), np.int16)
    for states in ((ptr(out), None), (None, ptr(out))):
        status = _kernel()(ctypes.addressof(ctx), ctypes.addressof(good), ptr(x), *states, ptr(p.w_ih),
                           ptr(p.w_hh), ptr(p.bias), ptr(p.quant), ptr(out))
        assert status == MCU_ERR_INVALID_ARG


def test_lstm_s16_layer_params_refuses_a_multiplier_past_the_16x8_range() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="2\\^14"):
        layer_params(rng.standard_normal((4, 2)) * 1e6, rng.standard_normal((4, 1)), None, None, 1.0, 1 / 32767, 12)


# --- CMSIS-NN ------------------------------------------------------------------------------------------------

CMSIS_LSTM_S16_SOURCES = ("LSTMFunctions/arm_lstm_unidirectional_s16.c", "NNSupportFunctions/arm_nn_lstm_step_s16.c",
                          "NNSupportFunctions/arm_nn_lstm_calculate_gate_s16.c",
                          "NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s16.c",
                          "ActivationFunctions/arm_nn_activation_s16.c",
                          "BasicMathFunctions/arm_elementwise_mul_s16.c",
                          "BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
                          "BasicMathFunctions/arm_elementwise_mul_s16_batch_offset.c",
                          "NNSupportFunctions/arm_nntables.c")
ARM_SIGMOID, ARM_TANH = 0, 1


class CmsisGate(ctypes.Structure):
    _fields_ = [("input_multiplier", c_int32), ("input_shift", c_int32), ("input_weights", _P),
                ("input_effective_bias", _P), ("hidden_multiplier", c_int32), ("hidden_shift", c_int32),
                ("hidden_weights", _P), ("hidden_effective_bias", _P), ("bias", _P), ("activation_type", c_int32)]


class CmsisLstmParams(ctypes.Structure):
    _fields_ = [(n, c_int32) for n in ("time_major", "batch_size", "time_steps", "input_size", "hidden_size",
                                        "input_offset", "forget_to_cell_multiplier", "forget_to_cell_shift",
                                        "input_to_cell_multiplier", "input_to_cell_shift", "cell_clip",
                                        "cell_scale_power", "output_multiplier", "output_shift", "output_offset")] + \
        [(g, CmsisGate) for g in ("forget_gate", "input_gate", "cell_gate", "output_gate")]


class CmsisLstmContext(ctypes.Structure):
    _fields_ = [("temp1", _P), ("temp2", _P), ("cell_state", _P), ("hidden_state", _P)]


@pytest.fixture(scope="module")
def cmsis_lstm():
    root = cmsis_nn_root(CMSIS_LSTM_S16_SOURCES, "arm_lstm_unidirectional_s16 (batch major, from a zero state)")
    handle = host_library(root, [root / "Source" / s for s in CMSIS_LSTM_S16_SOURCES], "lstm_s16")
    handle.arm_lstm_unidirectional_s16.argtypes = [_P] * 4
    handle.arm_lstm_unidirectional_s16.restype = ctypes.c_int
    return root, handle


def test_lstm_s16_table_is_cmsis_nns(cmsis_lstm) -> None:
    root, _ = cmsis_lstm
    text = (root / "Source" / "NNSupportFunctions" / "arm_nntables.c").read_text()
    body = re.search(r"sigmoid_table_uint16\[256\]\s*=\s*\{([^}]*)\}", text)
    assert body is not None
    np.testing.assert_array_equal(SIGMOID_TABLE, [int(v) for v in body.group(1).split(",") if v.strip()])


def test_lstm_s16_c_table_is_the_derived_one() -> None:
    """The C kernels' static table (recurrent_s16.h, the LSTM's and the GRU's) is the one the reference derives
    (no CMSIS-NN tree needed)."""
    text = (ROOT / "runtime_c" / "kernels" / "common" / "sigmoid_s16.h").read_text()
    body = re.search(r"mcu_sigmoid_s16_table\[256\]\s*=\s*\{([^}]*)\}", text)
    assert body is not None
    np.testing.assert_array_equal(SIGMOID_TABLE, [int(v) for v in body.group(1).split(",") if v.strip()])


def _run_cmsis(handle, p: LstmS16, x: np.ndarray, h0: np.ndarray | None = None,
               c0: np.ndarray | None = None) -> np.ndarray:
    """arm_lstm_unidirectional_s16 with our layer's constants: one multiplier and shift per gate (every row of a
    gate has its first row's), our gate order (i, f, g, o) split into CMSIS-NN's gates; from ``h0`` and ``c0``
    (its hidden_state and cell_state) when given."""
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    keep = []

    def arr(a: np.ndarray, dtype) -> int:
        a = np.ascontiguousarray(a, dtype=dtype)
        keep.append(a)
        return a.ctypes.data

    zeros = arr(np.zeros(hidden), np.int64)

    def gate(k: int, act: int) -> CmsisGate:
        rows = slice(k * hidden, (k + 1) * hidden)
        q = p.quant[k * hidden]
        return CmsisGate(int(q[0]), int(q[1]), arr(p.w_ih[rows], np.int8), arr(p.bias[rows], np.int64),
                         int(q[2]), int(q[3]), arr(p.w_hh[rows], np.int8), zeros, None, act)

    params = CmsisLstmParams(0, n, t, features, hidden, 0, p.forget_mult, p.forget_shift, p.input_mult,
                             p.input_shift, 0, -p.cell_shift, p.out_mult, p.out_shift, 0,
                             gate(1, ARM_SIGMOID), gate(0, ARM_SIGMOID), gate(2, ARM_TANH), gate(3, ARM_SIGMOID))
    ctx = CmsisLstmContext(arr(np.zeros(n * hidden), np.int16), arr(np.zeros(n * hidden), np.int16),
                           arr(np.zeros(n * hidden) if c0 is None else c0.flatten(), np.int16),
                           None if h0 is None else arr(h0.flatten(), np.int16))  # (copies: CMSIS-NN writes them)
    out = np.full((n, t, hidden), 99, np.int16)
    xs = np.ascontiguousarray(x, np.int16)
    status = handle.arm_lstm_unidirectional_s16(xs.ctypes.data, out.ctypes.data, ctypes.addressof(params),
                                                ctypes.addressof(ctx))
    assert status == 0
    return out


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 6), features=st.sampled_from([1, 5, 10, 40]),
       hidden=st.sampled_from([1, 4, 9, 32]), weight_scale=st.sampled_from([0.05, 0.3, 3.0]),
       x_range=st.sampled_from([0.1, 2.0, 30.0]), h_range=st.sampled_from([0.1, 1.0]), cell_shift=st.integers(0, 15),
       data=st.sampled_from(["random", "extremes", "small"]), initial=st.booleans(), seed=st.integers(0, 2**16))
def test_lstm_s16_equals_cmsis_nn(cmsis_lstm, batch: int, steps: int, features: int, hidden: int,
                                  weight_scale: float, x_range: float, h_range: float, cell_shift: int, data: str,
                                  initial: bool, seed: int) -> None:
    """Each gate's weights quantized per tensor (CMSIS-NN's one multiplier per gate), biases folded into the input
    product's effective bias: the same int16 hidden states, saturated gates and cells included, from the zero
    state or from a given hidden state and cell (CMSIS-NN's hidden_state; a tree before it has none: skipped)."""
    source = cmsis_lstm[0] / "Source" / CMSIS_LSTM_S16_SOURCES[0]
    if initial and "hidden_state" not in source.read_text():
        pytest.skip("this CMSIS-NN (7.0.0 and before) has no initial hidden state")
    rng = np.random.default_rng(seed)
    rows = 4 * hidden
    w_ih = rng.standard_normal((rows, features)) * weight_scale
    w_hh = rng.standard_normal((rows, hidden)) * weight_scale
    for w in (w_ih, w_hh):  # one scale per gate: every row of a gate reaches the gate's largest magnitude
        for k in range(4):
            block = w[k * hidden:(k + 1) * hidden]
            block[:, 0] = np.abs(block).max() * np.where(block[:, 0] < 0, -1, 1)
    p = layer_params(w_ih, w_hh, rng.standard_normal(rows) * weight_scale, rng.standard_normal(rows) * weight_scale,
                     x_range / 32767, h_range / 32767, cell_shift)
    for k in range(4):
        assert np.all(p.quant[k * hidden:(k + 1) * hidden] == p.quant[k * hidden])
    x = int16_codes(rng, (batch, steps, features), data)
    h0 = int16_codes(rng, (batch, hidden), data) if initial else None
    c0 = int16_codes(rng, (batch, hidden), data) if initial else None
    want = _run_cmsis(cmsis_lstm[1], p, x, h0, c0)
    status, got = run_kernel(p, x, h0=h0, c0=c0)
    assert status == MCU_OK
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(lstm_s16(x, p, h0, c0), want)


def test_lstm_s16_multipliers_are_tflite_micros() -> None:
    """The cell's requantizations are TFLite Micro's for a power-of-two cell scale: f c by 2^-15, i g by
    2^(cs - 30); the gates' inputs are Q3.12."""
    p = small_layer()
    assert (p.forget_mult, p.forget_shift) == arith.quantize_multiplier(2.0 ** -15)
    assert (p.input_mult, p.input_shift) == arith.quantize_multiplier(2.0 ** (12 - 30))
