"""w4a8's recurrent layers: mcu_lstm_s4, mcu_gru_s4 and mcu_lstm_final_cell_s4 (4-bit matrices packed two a byte,
continuous across rows) against the reference on the same codes, bit for bit, on the plain C and the dual-MAC
path, rows of odd length starting mid-byte and codes at -8 and 7 included; nn.LSTM and nn.GRU models at w4a8 run
the 4-bit kernels in the program file and the generated C equal to the reference; kws_lstm at w4a8 on the M33."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import cbind  # noqa: E402
from cbind import MCU_OK, ptr  # noqa: E402
from compiled import compiled_model
from mcu.api import compile as mcu_compile  # noqa: E402
from mcu.layouts import pack_s4  # noqa: E402
from mcu.passes.quantized.recurrent import scratch_bytes  # noqa: E402
from mcu.reference import recurrent  # noqa: E402
from repo import requires_qemu  # noqa: E402
from test_recurrent_s8 import Context, RecurrentParams, emulated_lib  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(name: str, p: recurrent.RecurrentS8, x: np.ndarray, dsp: bool, seq: np.ndarray | None = None) -> np.ndarray:
    """The 4-bit kernel ``name`` on the codes of ``p`` packed (a final cell: on the hidden states ``seq``)."""
    n, t, features = x.shape
    hidden = p.w_hh.shape[1]
    params = RecurrentParams(n, t, features, hidden, p.hidden_zp, p.out_mult, p.out_shift, p.state_shift)
    size = scratch_bytes("gru" if p.kind == "gru" else "lstm", features, hidden)
    buf = np.zeros(size + 8, np.int16)
    ctx = Context(buf.ctypes.data, size)
    out = np.full((n, hidden) if seq is not None else (n, t, hidden), 99,
                  np.int16 if seq is not None else np.int8)
    arrays = [np.ascontiguousarray(a) for a in (x, pack_s4(p.w_ih), pack_s4(p.w_hh), p.rows.astype(np.int32),
                                                recurrent.sigmoid_table(), *([seq] if seq is not None else []))]
    fn = getattr(emulated_lib() if dsp else cbind.lib(), name)
    fn.argtypes = [ctypes.c_void_p] * (len(arrays) + 3)
    fn.restype = ctypes.c_int
    assert fn(ctypes.addressof(ctx), ctypes.addressof(params), *(ptr(a) for a in arrays), ptr(out)) == MCU_OK
    return out


@SETTINGS
@given(kind=st.sampled_from(["lstm", "gru", "final_cell"]), batch=st.integers(1, 2), steps=st.integers(1, 5),
       features=st.sampled_from([1, 3, 7, 8, 9, 17, 40]), hidden=st.sampled_from([1, 2, 5, 8, 9, 33]),
       weight_scale=st.sampled_from([1e-3, 0.3, 30.0]), zp_x=st.sampled_from([-128, 0, 127]),
       zp_h=st.sampled_from([-128, 3, 127]), shift=st.integers(0, 15), codes=st.sampled_from(["derived", "extreme"]),
       data=st.sampled_from(["random", "extreme"]), seed=st.integers(0, 2**16))
def test_s4_kernels_match_the_reference(kind: str, batch: int, steps: int, features: int, hidden: int,
                                        weight_scale: float, zp_x: int, zp_h: int, shift: int, codes: str, data: str,
                                        seed: int) -> None:
    rng = np.random.default_rng(seed)
    layer = "gru" if kind == "gru" else "lstm"
    g = 4 if layer == "lstm" else 3
    w_ih = rng.standard_normal((g * hidden, features)) * weight_scale
    w_hh = rng.standard_normal((g * hidden, hidden)) * weight_scale
    b = rng.standard_normal(g * hidden) * weight_scale
    p = recurrent.layer_params(layer, w_ih, w_hh, b, b, 0.02, zp_x, 0.01, zp_h, shift, weight_bits=4)
    assert max(np.abs(p.w_ih).max(), np.abs(p.w_hh).max()) <= 7
    if codes == "extreme":  # the packing's whole range, -8 included, which the quantizer never makes
        p = recurrent.RecurrentS8(layer, rng.choice([-8, 7], p.w_ih.shape).astype(np.int8),
                                  rng.choice([-8, 7], p.w_hh.shape).astype(np.int8), p.rows, p.hidden_zp,
                                  p.out_mult, p.out_shift, p.state_shift)
    shape = (batch, steps, features)
    x = (rng.integers(-128, 128, shape) if data == "random" else rng.choice([-128, 127], shape)).astype(np.int8)
    if kind == "final_cell":
        seq = recurrent.lstm_s8(x, p)
        want = recurrent.lstm_final_cell_s8(x, p)
    else:
        seq = None
        want = (recurrent.lstm_s8 if kind == "lstm" else recurrent.gru_s8)(x, p)
    name = f"mcu_{'lstm_final_cell' if kind == 'final_cell' else kind}_s4"
    for dsp in (False, True):  # the plain C and the dual-MAC path
        np.testing.assert_array_equal(_run(name, p, x, dsp, seq), want)


class _Spotter(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(7, 9, batch_first=True)  # odd rows: mid-byte starts
        self.head = nn.Linear(9, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        seq, state = self.rnn(x)
        if isinstance(state, tuple):  # the LSTM's c_n too: its final cell
            return self.head(seq[:, -1]), state[1]
        return (self.head(seq[:, -1]),)


def _inputs(seed: int, n: int) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn((1, 6, 7), generator=g),) for _ in range(n)]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_w4a8_models_run_the_4_bit_kernels_equal_to_the_reference(kind: str) -> None:
    torch.manual_seed(3)
    cm = mcu_compile(_Spotter(kind).eval(), _inputs(0, 1)[0], board="mps2-an505", quantize="w4a8",
                     calibration=_inputs(1, 16), test_inputs=_inputs(2, 2))
    layers = [op for op in cm.graph.ops if op.kind in ("lstm", "gru", "lstm_final_cell")]
    assert layers and all(op.attrs.get("weight_bits") == 4 for op in layers)
    for op in layers:
        assert max(np.abs(op.inputs[1].data).max(), np.abs(op.inputs[2].data).max()) <= 7
    assert cm.reference_is_exact
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.host_model().run_physical(cm.encode_inputs(x))):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_kws_lstm_at_w4a8_is_bit_exact_on_m33() -> None:
    cm = compiled_model("kws_lstm", "mps2-an505", "w4a8")
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        for got, want in zip(sim.outputs_raw[v], cm.raw_outputs(cm.reference_raw(*x))):
            np.testing.assert_array_equal(got, want)
