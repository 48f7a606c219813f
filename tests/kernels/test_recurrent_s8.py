"""Integer recurrent layers: mcu_lstm_s8 and mcu_gru_s8 against their Python reference
(mcu/reference/recurrent.py) bit for bit over many shapes and parameters, extremes included; the int16
sigmoid and tanh against the real functions; the kernels' argument checks; nn.LSTM and nn.GRU models
compiled for int8 with no fp32 island, the program file and the generated C equal to the reference, and
agreeing with eager PyTorch; the two keyword spotters on the simulated M33."""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import cbind  # noqa: E402
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_NULL_POINTER, MCU_ERR_SHAPE, MCU_OK, ptr  # noqa: E402
from compiled import compiled_model
from host_builds import build_emulated_lib  # noqa: E402
from mcu.api import compile as mcu_compile  # noqa: E402
from mcu.errors import McuError  # noqa: E402
from mcu.passes.quantized.recurrent import scratch_bytes  # noqa: E402
from mcu.reference import recurrent  # noqa: E402
from repo import requires_qemu  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MCU_ERR_BUFFER_TOO_SMALL = 5
c_int32 = ctypes.c_int32


class RecurrentParams(ctypes.Structure):
    _fields_ = [(n, c_int32) for n in ("batch", "steps", "input_size", "hidden", "hidden_zp", "out_mult",
                                        "out_shift", "state_shift")]


class Context(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("size", c_int32)]


@functools.lru_cache(maxsize=1)
def emulated_lib() -> ctypes.CDLL:
    """The kernels built again with their DSP paths emulated in C (the dual-MAC order the M33 runs)."""
    return ctypes.CDLL(str(build_emulated_lib()))


def _kernel(name: str, dsp: bool = False):
    fn = getattr(emulated_lib() if dsp else cbind.lib(), name)
    fn.argtypes = [ctypes.c_void_p] * 8
    fn.restype = ctypes.c_int
    return fn


def run_kernel(p: recurrent.RecurrentS8, x: np.ndarray, scratch: int | None = None, out: np.ndarray | None = None,
               table: np.ndarray | None = None, params: RecurrentParams | None = None,
               dsp: bool = False) -> tuple[int, np.ndarray]:
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    if params is None:
        params = RecurrentParams(n, t, features, hidden, p.hidden_zp, p.out_mult, p.out_shift, p.state_shift)
    size = scratch_bytes(p.kind, features, hidden) if scratch is None else scratch
    buf = np.zeros(max(size, 1) + 8, np.int16)  # 2-byte aligned
    ctx = Context(buf.ctypes.data, size)
    out = np.full((n, t, hidden), 99, np.int8) if out is None else out
    table = recurrent.sigmoid_table() if table is None else table
    arrays = [np.ascontiguousarray(a) for a in (x, p.w_ih, p.w_hh, p.rows.astype(np.int32), table)]
    status = _kernel(f"mcu_{p.kind}_s8", dsp)(ctypes.addressof(ctx), ctypes.addressof(params),
                                              *(ptr(a) for a in arrays), ptr(out))
    return status, out


def random_params(kind: str, rng: np.random.Generator, features: int, hidden: int, weight_scale: float, s_x: float,
            zp_x: int, s_h: float, zp_h: int, shift: int, per_channel: bool, bias: bool) -> recurrent.RecurrentS8:
    g = 4 if kind == "lstm" else 3
    w_ih = rng.standard_normal((g * hidden, features)) * weight_scale
    w_hh = rng.standard_normal((g * hidden, hidden)) * weight_scale
    b_ih = rng.standard_normal(g * hidden) * weight_scale if bias else None
    b_hh = rng.standard_normal(g * hidden) * weight_scale if bias else None
    return recurrent.layer_params(kind, w_ih, w_hh, b_ih, b_hh, s_x, zp_x, s_h, zp_h, shift, per_channel)


@SETTINGS
@given(kind=st.sampled_from(["lstm", "gru"]), batch=st.integers(1, 3), steps=st.integers(1, 7),
       features=st.sampled_from([1, 2, 5, 10, 17, 40]), hidden=st.sampled_from([1, 3, 8, 16, 33]),
       weight_scale=st.sampled_from([1e-3, 0.2, 1.0, 30.0]), s_x=st.sampled_from([1e-3, 0.02, 0.5]),
       zp_x=st.sampled_from([-128, -5, 0, 127]), s_h=st.sampled_from([1.0 / 128, 0.004, 0.05]),
       zp_h=st.sampled_from([-128, 0, 3, 127]), shift=st.integers(0, 15), per_channel=st.booleans(),
       bias=st.booleans(), data=st.sampled_from(["random", "extreme", "zero-point"]), seed=st.integers(0, 2**16))
def test_kernels_match_the_reference(kind: str, batch: int, steps: int, features: int, hidden: int,
                                     weight_scale: float, s_x: float, zp_x: int, s_h: float, zp_h: int, shift: int,
                                     per_channel: bool, bias: bool, data: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = random_params(kind, rng, features, hidden, weight_scale, s_x, zp_x, s_h, zp_h, shift, per_channel, bias)
    shape = (batch, steps, features)
    x = {"random": lambda: rng.integers(-128, 128, shape),
         "extreme": lambda: rng.choice([-128, 127], shape),
         "zero-point": lambda: np.full(shape, zp_x)}[data]().astype(np.int8)
    want = (recurrent.lstm_s8 if kind == "lstm" else recurrent.gru_s8)(x, p)
    for dsp in (False, True):  # the plain C and the dual-MAC path
        status, got = run_kernel(p, x, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(kind=st.sampled_from(["lstm", "gru"]), hidden=st.sampled_from([1, 4, 9]), seed=st.integers(0, 2**16),
       mult_extreme=st.sampled_from([0, 2**31 - 1, 2**30]), shift_extreme=st.sampled_from([-31, 0, 30]))
def test_kernels_match_the_reference_at_extreme_constants(kind: str, hidden: int, seed: int, mult_extreme: int,
                                                          shift_extreme: int) -> None:
    """Gate rows with multipliers and shifts at the ends of their range and biases at +-2^30: every int16
    and int32 saturation of the arithmetic is reached, and the C still equals the reference."""
    rng = np.random.default_rng(seed)
    g = 4 if kind == "lstm" else 3
    rows = np.stack([rng.choice([-2**30, 0, 2**30, 12345], g * hidden), np.full(g * hidden, mult_extreme),
                     np.full(g * hidden, shift_extreme), rng.choice([-2**30, 0, 2**30, -777], g * hidden),
                     rng.integers(2**30, 2**31 - 1, g * hidden), rng.integers(-31, 31, g * hidden)], axis=1)
    w_ih = rng.choice([-127, 127, 0, 5], (g * hidden, 6)).astype(np.int8)
    w_hh = rng.choice([-127, 127, 0, -3], (g * hidden, hidden)).astype(np.int8)
    out_mult, out_shift = int(rng.integers(2**30, 2**31 - 1)), int(rng.integers(-31, 31))
    p = recurrent.RecurrentS8(kind, w_ih, w_hh, rows.astype(np.int32), int(rng.integers(-128, 128)), out_mult,
                              out_shift, int(rng.integers(0, 16)))
    x = rng.choice([-128, 127, 0], (2, 5, 6)).astype(np.int8)
    want = (recurrent.lstm_s8 if kind == "lstm" else recurrent.gru_s8)(x, p)
    for dsp in (False, True):
        status, got = run_kernel(p, x, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


def test_int16_sigmoid_and_tanh_follow_the_real_functions() -> None:
    table = recurrent.sigmoid_table()
    q = np.arange(-32768, 32768)
    real = q / 4096.0
    sig = recurrent.sigmoid_s16(q, table) / 32768.0
    tanh = recurrent.tanh_s16(q, table) / 32768.0
    assert np.max(np.abs(sig - 1.0 / (1.0 + np.exp(-real)))) < 3e-4
    assert np.max(np.abs(tanh - np.tanh(real))) < 7e-4  # the table ends at sigmoid(8): tanh stops at 0.99933
    assert np.all(np.diff(sig) >= 0) and np.all(np.diff(tanh) >= 0)  # monotone, as the functions
    assert sig.min() >= 0 and tanh.min() >= -1 and tanh.max() < 1


def test_power_of_two_state_scale_keeps_the_calibrated_range() -> None:
    for peak in (1e-6, 0.3, 0.999, 1.0, 3.7, 7.99, 8.0, 100.0, 40000.0):
        s = recurrent.power_of_two_shift(peak)
        assert 0 <= s <= 15
        assert peak * 2.0 ** s <= 32767 or s == 0
        assert s == 15 or peak * 2.0 ** (s + 1) > 32767
    assert recurrent.power_of_two_shift(0.0) == 15


def test_kernels_check_their_arguments() -> None:
    rng = np.random.default_rng(1)
    for kind in ("lstm", "gru"):
        p = random_params(kind, rng, 4, 5, 0.3, 0.02, 0, 0.01, 0, 12, True, True)
        x = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
        need = scratch_bytes(kind, 4, 5)
        assert run_kernel(p, x)[0] == MCU_OK
        assert run_kernel(p, x, scratch=need - 1)[0] == MCU_ERR_BUFFER_TOO_SMALL
        ok = RecurrentParams(2, 3, 4, 5, p.hidden_zp, p.out_mult, p.out_shift, p.state_shift)
        for field, bad, code in (("steps", 0, MCU_ERR_SHAPE), ("hidden", 4097, MCU_ERR_SHAPE),
                                 ("state_shift", 16, MCU_ERR_INVALID_ARG), ("state_shift", -1, MCU_ERR_INVALID_ARG),
                                 ("hidden_zp", 128, MCU_ERR_INVALID_ARG), ("out_shift", 31, MCU_ERR_INVALID_ARG),
                                 ("out_mult", -1, MCU_ERR_INVALID_ARG)):
            params = RecurrentParams(*(getattr(ok, n) for n, _ in RecurrentParams._fields_))
            setattr(params, field, bad)
            assert run_kernel(p, x, params=params)[0] == code, (kind, field)
        bad_rows = p.rows.copy()
        bad_rows[0, 0] = 2**30 + 1  # a bias beyond the bound that keeps the sums inside int32
        assert run_kernel(recurrent.RecurrentS8(kind, p.w_ih, p.w_hh, bad_rows, p.hidden_zp, p.out_mult,
                                                p.out_shift, p.state_shift), x)[0] == MCU_ERR_INVALID_ARG
        bad_table = recurrent.sigmoid_table().copy()
        bad_table[10] = bad_table[9] - 1  # not increasing
        assert run_kernel(p, x, table=bad_table)[0] == MCU_ERR_INVALID_ARG
        # the output on top of the input
        alias = np.zeros((2, 3, 5), np.int8)
        status = _kernel(f"mcu_{kind}_s8")(None, ctypes.addressof(ok), ptr(x), ptr(p.w_ih), ptr(p.w_hh),
                                          ptr(p.rows), ptr(recurrent.sigmoid_table()), ptr(alias))
        assert status == MCU_ERR_NULL_POINTER
        ctx_buf = np.zeros(64, np.int16)
        ctx = Context(ctx_buf.ctypes.data, 128)
        status = _kernel(f"mcu_{kind}_s8")(ctypes.addressof(ctx), ctypes.addressof(ok), ptr(alias), ptr(p.w_ih),
                                          ptr(p.w_hh), ptr(p.rows), ptr(recurrent.sigmoid_table()), ptr(alias))
        assert status in (MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE)


# --- models ------------------------------------------------------------------------------------------------


class _Spotter(nn.Module):
    def __init__(self, kind: str, layers: int, batch_first: bool, bias: bool = True, use_h_n: bool = False) -> None:
        super().__init__()
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(6, 12, num_layers=layers, batch_first=batch_first, bias=bias)
        self.head = nn.Linear(12, 4)
        self.batch_first = batch_first
        self.use_h_n = use_h_n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, state = self.rnn(x)
        if self.use_h_n:
            h_n = state[0] if isinstance(state, tuple) else state
            return self.head(h_n[-1])
        return self.head(seq[:, -1] if self.batch_first else seq[-1])


def _inputs(batch_first: bool, seed: int, n: int) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    shape = (1, 9, 6) if batch_first else (9, 1, 6)
    return [(torch.randn(shape, generator=g),) for _ in range(n)]


_MODELS: dict[tuple, object] = {}


def _compiled(kind: str, layers: int, batch_first: bool, bias: bool = True, use_h_n: bool = False):
    key = (kind, layers, batch_first, bias, use_h_n)
    if key not in _MODELS:
        torch.manual_seed(7)
        model = _Spotter(kind, layers, batch_first, bias, use_h_n).eval()
        _MODELS[key] = mcu_compile(model, _inputs(batch_first, 0, 1)[0], board="mps2-an505", quantize="int8",
                                   calibration=_inputs(batch_first, 1, 32), test_inputs=_inputs(batch_first, 2, 3))
    return _MODELS[key]


@pytest.mark.parametrize("kind,layers,batch_first,bias,use_h_n", [
    ("lstm", 1, True, True, False), ("lstm", 2, False, True, True), ("gru", 1, False, False, False),
    ("gru", 2, True, True, True)])
def test_models_run_integer_layers_equal_to_the_reference(kind: str, layers: int, batch_first: bool, bias: bool,
                                                          use_h_n: bool) -> None:
    cm = _compiled(kind, layers, batch_first, bias, use_h_n)
    assert cm.graph.fallbacks == []
    assert [op.kind for op in cm.graph.ops].count(kind) == layers
    assert cm.reference_is_exact
    for x, eager in zip(cm.spec.test_inputs, cm.eager_outputs):
        want = cm.reference_raw(*x)
        enc = cm.encode_inputs(x)
        for got in (cm.run_raw(*x), cm.host_model().run_physical(enc)):  # the program file, the generated C
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))
        out = cm.graph.outputs[0].quant
        real = (want[0].astype(np.float64) - out.zero_point[0]) * out.scale[0]
        # eager inside the output's int8 range (a test input may reach beyond what calibration saw)
        lo, hi = ((-128 - out.zero_point[0]) * out.scale[0], (127 - out.zero_point[0]) * out.scale[0])
        expect = np.clip(eager[0].reshape(-1), lo, hi)
        assert np.max(np.abs(real - expect)) <= 0.1 * np.max(np.abs(expect)) + 3 * out.scale[0]


def run_with(name: str, p: recurrent.RecurrentS8, x: np.ndarray, extra: np.ndarray | None, out: np.ndarray,
             dsp: bool = False, scratch: int | None = None) -> int:
    """A recurrent kernel taking one more operand after the table (``extra``; None: a null pointer)."""
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    params = RecurrentParams(n, t, features, hidden, p.hidden_zp, p.out_mult, p.out_shift, p.state_shift)
    size = scratch_bytes(p.kind, features, hidden) if scratch is None else scratch
    buf = np.zeros(max(size, 1) + 8, np.int16)
    ctx = Context(buf.ctypes.data, size)
    arrays = [np.ascontiguousarray(a) for a in (x, p.w_ih, p.w_hh, p.rows.astype(np.int32),
                                                recurrent.sigmoid_table())]
    fn = _kernel(name, dsp)
    fn.argtypes = [ctypes.c_void_p] * 9
    return fn(ctypes.addressof(ctx), ctypes.addressof(params), *(ptr(a) for a in arrays),
              None if extra is None else ptr(extra), ptr(out))


def _final_cell_kernel(p: recurrent.RecurrentS8, x: np.ndarray, seq: np.ndarray, dsp: bool = False,
                       out: np.ndarray | None = None, scratch: int | None = None) -> tuple[int, np.ndarray]:
    """mcu_lstm_final_cell_s8 on the layer's input ``x`` and the hidden states ``seq`` it wrote."""
    out = np.full((x.shape[0], p.w_hh.shape[1]), 99, np.int16) if out is None else out
    return run_with("mcu_lstm_final_cell_s8", p, x, np.ascontiguousarray(seq), out, dsp, scratch), out


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 7), features=st.sampled_from([1, 2, 5, 17, 40]),
       hidden=st.sampled_from([1, 3, 8, 33]), weight_scale=st.sampled_from([1e-3, 0.2, 1.0, 30.0]),
       s_x=st.sampled_from([1e-3, 0.02, 0.5]), zp_x=st.sampled_from([-128, 0, 127]),
       s_h=st.sampled_from([1.0 / 128, 0.004, 0.05]), zp_h=st.sampled_from([-128, 0, 3, 127]),
       shift=st.integers(0, 15), bias=st.booleans(), data=st.sampled_from(["random", "extreme"]),
       seed=st.integers(0, 2**16))
def test_final_cell_kernel_matches_the_reference(batch: int, steps: int, features: int, hidden: int,
                                                 weight_scale: float, s_x: float, zp_x: int, s_h: float, zp_h: int,
                                                 shift: int, bias: bool, data: str, seed: int) -> None:
    """The cell from the hidden states mcu_lstm_s8 wrote equals the reference's own recurrence (extreme inputs and
    weights saturate the gates and the int16 cell), on the plain C and the dual-MAC path."""
    rng = np.random.default_rng(seed)
    p = random_params("lstm", rng, features, hidden, weight_scale, s_x, zp_x, s_h, zp_h, shift, True, bias)
    shape = (batch, steps, features)
    x = (rng.integers(-128, 128, shape) if data == "random" else rng.choice([-128, 127], shape)).astype(np.int8)
    want = recurrent.lstm_final_cell_s8(x, p)
    for dsp in (False, True):
        status, seq = run_kernel(p, x, dsp=dsp)
        assert status == MCU_OK
        status, got = _final_cell_kernel(p, x, seq, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


def test_final_cell_kernel_checks_its_arguments() -> None:
    rng = np.random.default_rng(2)
    p = random_params("lstm", rng, 4, 5, 0.3, 0.02, 0, 0.01, 0, 12, True, True)
    x = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    seq = run_kernel(p, x)[1]
    assert _final_cell_kernel(p, x, seq)[0] == MCU_OK
    assert _final_cell_kernel(p, x, seq, scratch=scratch_bytes("lstm", 4, 5) - 1)[0] == MCU_ERR_BUFFER_TOO_SMALL
    # the cell written over the hidden states it reads
    over = np.zeros(2 * 3 * 5, np.int8)
    over[:] = seq.reshape(-1)
    status, _ = _final_cell_kernel(p, x, over.reshape(2, 3, 5), out=over.view(np.int16)[:10].reshape(2, 5))
    assert status == MCU_ERR_INVALID_ARG


class _ReadsCell(nn.Module):
    """An LSTM whose final (h_n, c_n) feed a classifier, and c_n returned as well."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, (h, c) = self.lstm(x)
        return self.head(torch.cat([h[-1], c[-1]], dim=1)), c[-1]


def test_final_cell_state_runs_at_int8() -> None:
    """c_n read by the model: mcu_lstm_final_cell_s8 (its cell int16 at 2^-state_shift), no fp32 island, the
    generated C and the program file equal to the reference, and close to eager PyTorch."""
    torch.manual_seed(4)
    model = _ReadsCell().eval()
    calibration = [(torch.randn(2, 6, 4),) for _ in range(16)]
    tests = [(torch.randn(2, 6, 4),) for _ in range(3)]
    cm = mcu_compile(model, calibration[0], board="mps2-an505", quantize="int8", calibration=calibration,
                     test_inputs=tests)
    assert cm.graph.fallbacks == []
    cells = [op for op in cm.graph.ops if op.kind == "lstm_final_cell"]
    assert len(cells) == 1 and cells[0].output.dtype == "int16" and cells[0].inputs[0].dtype == "int8"
    assert "mcu_lstm_final_cell_s8.c" in cm.library.kernel_sources
    signal = noise = 0.0
    for x in tests:
        want = cm.reference_raw(*x)
        for got in (cm.runtime_program().method("forward").run_raw(*cm.encode_inputs(x)), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)
        for got, ref in zip(cm.run(*x), cm.eager(*x)):
            signal += float((ref.double() ** 2).sum())
            noise += float(((got.double() - ref.double()) ** 2).sum())
    assert 10 * np.log10(signal / noise) > 25.0  # (29.5 dB: the int8 hidden states bound it)


def test_an_initial_state_keeps_the_unrolled_fp32_island() -> None:
    class WithState(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(4, 8, batch_first=True)
            self.register_buffer("h0", torch.full((1, 1, 8), 0.1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seq, _ = self.gru(x, self.h0)
            return seq[:, -1]

    x = torch.randn(1, 3, 4)
    cm = mcu_compile(WithState().eval(), (x,), board="mps2-an505", quantize="int8", calibration=[(x,)])
    assert "gru" not in [op.kind for op in cm.graph.ops] and cm.graph.fallbacks


def test_bundled_inputs_agree_with_eager_top1() -> None:
    for name in ("kws_gru", "kws_lstm"):
        cm = compiled_model(name, "mps2-an505", "int8")
        assert cm.graph.fallbacks == [] and cm.reference_is_exact
        for x, eager in zip(cm.spec.test_inputs, cm.eager_outputs):
            codes = cm.reference_raw(*x)[0]
            assert int(np.argmax(codes)) == int(np.argmax(eager[0].reshape(-1))), name


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("name", ["kws_gru", "kws_lstm"])
def test_keyword_spotters_are_bit_exact_on_m33(name: str) -> None:
    cm = compiled_model(name, "mps2-an505", "int8")
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        for got, want in zip(sim.outputs_raw[v], cm.raw_outputs(cm.reference_raw(*x))):
            np.testing.assert_array_equal(got, want)
