"""An int8 GRU from a given state: mcu_gru_from_s8 against its Python reference (mcu/reference/recurrent.py), and an
nn.GRUCell stepped in a Python loop lowered to one such op per step, equal to the reference in the program file and
the generated C."""

from __future__ import annotations

import functools

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_NULL_POINTER, MCU_OK  # noqa: E402
from mcu.api import compile as mcu_compile  # noqa: E402
from mcu.reference import recurrent  # noqa: E402
from test_recurrent_s8 import SETTINGS, random_params, run_kernel, run_with  # noqa: E402


def run_from(p: recurrent.RecurrentS8, x: np.ndarray, h0: np.ndarray | None, dsp: bool = False,
             out: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    """mcu_gru_from_s8 on ``x`` [N, T, I] from ``h0`` [N, H] (None: a null pointer)."""
    out = np.full((*x.shape[:2], p.w_hh.shape[1]), 99, np.int8) if out is None else out
    return run_with("mcu_gru_from_s8", p, x, h0, out, dsp), out


@SETTINGS
@given(batch=st.integers(1, 3), steps=st.integers(1, 5), features=st.sampled_from([1, 2, 5, 17, 40]),
       hidden=st.sampled_from([1, 3, 8, 33]), weight_scale=st.sampled_from([1e-3, 0.2, 1.0, 30.0]),
       s_x=st.sampled_from([1e-3, 0.02, 0.5]), zp_x=st.sampled_from([-128, 0, 127]),
       s_h=st.sampled_from([1.0 / 128, 0.004, 0.05]), zp_h=st.sampled_from([-128, 0, 3, 127]),
       shift=st.integers(0, 15), data=st.sampled_from(["random", "extreme"]), seed=st.integers(0, 2**16))
def test_kernel_from_a_state_matches_the_reference(batch: int, steps: int, features: int, hidden: int,
                                                    weight_scale: float, s_x: float, zp_x: int, s_h: float,
                                                    zp_h: int, shift: int, data: str, seed: int) -> None:
    """Random and extreme inputs and states (every code at -128 or 127 saturates the gates), on the plain C and
    the dual-MAC path."""
    rng = np.random.default_rng(seed)
    p = random_params("gru", rng, features, hidden, weight_scale, s_x, zp_x, s_h, zp_h, shift, True, True)
    draw = (lambda shape: rng.integers(-128, 128, shape)) if data == "random" else \
        (lambda shape: rng.choice([-128, 127], shape))
    x = draw((batch, steps, features)).astype(np.int8)
    h0 = draw((batch, hidden)).astype(np.int8)
    want = recurrent.gru_s8(x, p, h0=h0)
    for dsp in (False, True):
        status, got = run_from(p, x, h0, dsp=dsp)
        assert status == MCU_OK
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(split=st.integers(1, 5), seed=st.integers(0, 2**16), zp_h=st.sampled_from([-128, 0, 3]))
def test_steps_from_the_state_chain_like_one_layer(split: int, seed: int, zp_h: int) -> None:
    """A GRUCell loop is one step at a time from the last state: the sequence cut anywhere and run again from
    the state before the cut equals the whole layer from the zero state (and from the zero state's codes, the
    given-state kernel equals mcu_gru_s8)."""
    rng = np.random.default_rng(seed)
    p = random_params("gru", rng, 5, 8, 0.4, 0.02, -3, 0.01, zp_h, 10, True, True)
    x = rng.integers(-128, 128, (2, 6, 5)).astype(np.int8)
    whole = run_kernel(p, x)[1]
    zero = np.full((2, 8), zp_h, np.int8)
    assert np.array_equal(run_from(p, x, zero)[1], whole)
    head = run_from(p, np.ascontiguousarray(x[:, :split]), zero)[1]
    tail = run_from(p, np.ascontiguousarray(x[:, split:]), np.ascontiguousarray(head[:, -1]))[1]
    np.testing.assert_array_equal(np.concatenate([head, tail], axis=1), whole)


def test_kernel_checks_its_state() -> None:
    rng = np.random.default_rng(4)
    p = random_params("gru", rng, 4, 5, 0.3, 0.02, 0, 0.01, 0, 12, True, True)
    x = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    assert run_from(p, x, None)[0] == MCU_ERR_NULL_POINTER
    out = np.zeros((2, 3, 5), np.int8)
    assert run_from(p, x, out.reshape(-1)[:10].reshape(2, 5), out=out)[0] == MCU_ERR_INVALID_ARG


class GruCellLoop(nn.Module):
    """How a user writes it: a GRUCell over the frames of x.unbind(1), the last state classified."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(6, 12)
        self.head = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], 12)
        for frame in x.unbind(1):
            h = self.cell(frame, h)
        return self.head(h)


@functools.lru_cache(maxsize=1)
def _cell_model():
    torch.manual_seed(5)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(2, 5, 6, generator=g),) for _ in range(12)]
    return mcu_compile(GruCellLoop().eval(), data[0], board="mps2-an505", quantize="int8", calibration=data[:9],
                       test_inputs=data[9:])


def test_a_gru_cell_loop_runs_one_int8_op_per_step() -> None:
    cm = _cell_model()
    kinds = [op.kind for op in cm.graph.ops]
    assert cm.graph.fallbacks == [] and kinds.count("gru") == 5
    assert not {"lut", "mul", "sub"} & set(kinds)  # no gate is left an op of its own
    steps = [op for op in cm.graph.ops if op.kind == "gru"]
    # every step reads the state the step before wrote, on one quantization
    for before, after in zip(steps, steps[1:]):
        assert after.inputs[5] is before.output and after.inputs[5].quant == before.output.quant
    assert cm.reference_is_exact
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.host_model().run_physical(cm.encode_inputs(x))):  # program file, C
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))
