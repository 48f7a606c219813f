"""Recurrent cells stepped in a Python loop (nn.GRUCell, nn.LSTMCell, nn.RNNCell, the state carried from
step to step, a linear head): at int8 every op of every step is an int8 op (a GRU cell's step one
mcu_gru_from_s8 op, mcu/capture/recurrent.py; mcu/quantize/cells.py breaks the others into their gates before
quantization), the generated C and the program file equal the integer
reference bit for bit, the output agrees with eager PyTorch, every step shares one set of constants, and the
firmware is bit-exact on the M33."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from torch import nn

from mcu.api import CompiledModel, compile as mcu_compile  # noqa: E402
from repo import requires_qemu  # noqa: E402

STEPS, FEATURES, HIDDEN = 8, 6, 12


class CellLoop(nn.Module):
    """What users write: a cell, a zero state, a loop over time, a head on the last state."""

    def __init__(self, kind: str, outputs: int) -> None:
        super().__init__()
        self.kind = kind
        cell = {"gru": nn.GRUCell, "lstm": nn.LSTMCell, "rnn": nn.RNNCell}[kind]
        self.cell = cell(FEATURES, HIDDEN)
        self.head = nn.Linear(HIDDEN, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], HIDDEN)
        c = torch.zeros(x.shape[0], HIDDEN)
        for t in range(x.shape[1]):
            if self.kind == "lstm":
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
        return self.head(h)


_MODELS: dict[str, CompiledModel] = {}


def _compiled(kind: str) -> CompiledModel:
    if kind not in _MODELS:
        torch.manual_seed(1)
        model = CellLoop(kind, 1 if kind == "gru" else 4).eval()
        data = [(torch.randn(1, STEPS, FEATURES),) for _ in range(20)]
        _MODELS[kind] = mcu_compile(model, data[0], board="mps2-an505", quantize="int8", calibration=data[:16],
                                    test_inputs=data[16:19], name=f"{kind}_cell_loop")
    return _MODELS[kind]


def _sqnr_db(cm: CompiledModel) -> float:
    """The int8 program's output against eager fp32 over 32 fresh inputs (in dB)."""
    gen = torch.Generator().manual_seed(5)
    signal, noise = 0.0, 0.0
    for _ in range(32):
        x = torch.randn(1, STEPS, FEATURES, generator=gen)
        got = np.asarray(cm.run(x)[0], dtype=np.float64).reshape(-1)
        want = cm.eager(x)[0].numpy().astype(np.float64).reshape(-1)
        signal += float(np.sum(want ** 2))
        noise += float(np.sum((want - got) ** 2))
    return 10.0 * np.log10(signal / max(noise, 1e-30))


@pytest.mark.parametrize("kind", ["gru", "lstm", "rnn"])
def test_cells_in_a_loop_run_every_step_in_int8(kind: str) -> None:
    cm = _compiled(kind)
    assert cm.graph.fallbacks == []
    kinds = Counter(op.kind for op in cm.graph.ops)
    if kind == "gru":  # one mcu_gru_from_s8 op a step, and the head
        assert kinds["gru"] == STEPS and kinds["linear"] == 1 and not kinds["lut"], kinds
    else:  # two linear layers a step (input and recurrent products) and the head
        assert kinds["linear"] == 2 * STEPS
    assert all(op.output.dtype == "int8" for op in cm.graph.ops if op.kind != "dequantize"), kinds
    assert cm.reference_is_exact
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.host_model().run_physical(cm.encode_inputs(x))):  # program file, generated C
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))
    assert _sqnr_db(cm) >= 18.0  # measured: GRU 31, LSTM 33, RNN 21 dB


@pytest.mark.parametrize("kind", ["gru", "rnn"])
def test_gates_and_states_read_the_table_codes(kind: str) -> None:
    """A sigmoid's or tanh's fixed output feeds the product with the state, or the next step's linear layer,
    as it is: no requantize between them."""
    cm = _compiled(kind)
    assert not [op for op in cm.graph.ops if op.kind == "requantize"]


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_every_step_shares_one_set_of_constants(kind: str) -> None:
    """The steps' activation ranges are one (mcu.quantize.cells.share_step_ranges), so each step's linear layers
    have the same int8 weights, biases and multipliers and its tables the same entries: stored once."""
    cm = _compiled(kind)
    linears = {tuple(t.data.tobytes() for t in op.inputs[1:]) for op in cm.graph.ops if op.kind == "linear"}
    if kind == "gru":  # one int8 GRU op a step: its weights and gate rows
        steps = {tuple(t.data.tobytes() for t in op.inputs[1:5]) for op in cm.graph.ops if op.kind == "gru"}
        assert len(steps) == 1 and len(linears) == 1
        return
    assert len(linears) == 3  # the input product, the recurrent product, the head
    tables = {op.inputs[1].data.tobytes() for op in cm.graph.ops if op.kind == "lut"}
    assert len(tables) <= (3 if kind == "gru" else 5)  # r, z, n / i, f, g, o, tanh of the cell (or fewer)


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_cell_loops_are_bit_exact_on_m33(kind: str) -> None:
    cm = _compiled(kind)
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        for got, want in zip(sim.outputs_raw[v], cm.raw_outputs(cm.reference_raw(*x))):
            np.testing.assert_array_equal(got, want)
