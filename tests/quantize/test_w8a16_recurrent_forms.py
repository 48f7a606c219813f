"""w8a16 recurrent layers in the forms users write beyond a plain layer: an nn.LSTM called with (h0, c0), a
bidirectional nn.GRU classifier (batch_first), a bidirectional two-layer nn.LSTM returning a dict with h_n, and an
nn.GRU returning (output, h_n), and a sequence-to-sequence pair of two-layer nn.LSTMs, the encoder's (h_n, c_n)
starting the decoder. Each runs with no fp32 island and bit-exact with the integer reference as generated C and as
a program file on the host, and on QEMU; GPTQ rounds the matrices of the layers run from a given state on the
lowering's per-row grid. (c_n at int8: tests/kernels/test_recurrent_s8.py.)"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from torch import nn

import mcu
import mcu.api
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES
from mcu.program.device import build_interpreter_firmware, run_program
from mcu.reference.interp import Reference
from repo import requires_qemu


class LstmFromState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
        seq, _ = self.lstm(x, (h0, c0))
        return self.head(seq[:, -1])


class BiGruClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(5, 6, batch_first=True, bidirectional=True)
        self.head = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, _ = self.gru(x)
        return self.head(seq.mean(dim=1))


class BiLstmDict(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 5, num_layers=2, bidirectional=True)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        seq, (h, _c) = self.lstm(x)
        return {"out": seq, "h_n": h}


class GruWithState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(4, 6, num_layers=2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gru(x)


class Seq2Seq(nn.Module):
    """Two-layer encoder and decoder: the encoder's final (h_n, c_n), both read, are the decoder's initial states."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.LSTM(5, 8, num_layers=2, batch_first=True)
        self.decoder = nn.LSTM(3, 8, num_layers=2, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        _, (h, c) = self.encoder(source)
        return self.head(self.decoder(target, (h, c))[0])


def _samples(name: str, n: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    if name == "seq2seq":
        return [(torch.randn(1, 6, 5, generator=g), torch.randn(1, 4, 3, generator=g)) for _ in range(n)]
    if name == "lstm_state":
        return [(torch.randn(1, 5, 6, generator=g), 0.8 * torch.rand(1, 1, 8, generator=g) - 0.4,
                 torch.randn(1, 1, 8, generator=g)) for _ in range(n)]
    shape = {"bigru": (1, 6, 5), "bilstm_dict": (4, 1, 4), "gru_hn": (5, 1, 4)}[name]
    return [(torch.randn(*shape, generator=g),) for _ in range(n)]


MODELS = {"lstm_state": LstmFromState, "bigru": BiGruClassifier, "bilstm_dict": BiLstmDict, "gru_hn": GruWithState,
          "seq2seq": Seq2Seq}


@functools.lru_cache(maxsize=None)
def _lowered(name: str, rounding: str = "nearest") -> mcu.api.LoweredModel:
    """Nearest rounding and no bias correction (cheap); the test inputs are calibration inputs, so that the SQNR
    check measures the integer model, not how far one calibration generalises."""
    torch.manual_seed(3)
    calibration = _samples(name, 8, 1)
    return mcu.api.lower(MODELS[name]().eval(), calibration[0], quantize="w8a16", calibration=calibration,
                         test_inputs=calibration[:2], name=name, weight_rounding=rounding, bias_correction=False)


@pytest.mark.slow
@pytest.mark.parametrize("name, kind, count", [("lstm_state", "lstm", 1), ("bigru", "gru", 2),
                                               ("bilstm_dict", "lstm", 4), ("gru_hn", "gru", 2),
                                               ("seq2seq", "lstm_final_cell", 2)])
def test_w8a16_recurrent_forms_are_bit_exact_in_c_and_program(name: str, kind: str, count: int) -> None:
    cm = _lowered(name).compile()
    assert cm.graph.fallbacks == [] and Reference(cm.graph).exact
    layers = [op for op in cm.graph.ops if op.kind == kind]
    assert len(layers) == count and all(op.output.dtype == "int16" for op in layers)
    if name == "lstm_state":  # h0 on the output's scale, c0 on the cell's 2^-cs
        (op,) = layers
        assert len(op.inputs) == 7 and op.inputs[5].quant.scale == op.output.quant.scale
        assert op.inputs[6].quant.scale[0] == 2.0 ** -op.attrs["state_shift"]
    if name == "seq2seq":  # each encoder layer's c_n from the hidden states its layer wrote, on the cell's 2^-cs
        encoder = [op for op in cm.graph.ops if op.kind == "lstm" and len(op.inputs) == 5]
        for op, layer in zip(layers, encoder):
            assert op.inputs[5] is layer.output and op.output.quant.scale[0] == 2.0 ** -op.attrs["state_shift"]
            assert op.attrs["state_shift"] == layer.attrs["state_shift"]
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.runtime_program().method("forward").run_raw(*cm.encode_inputs(x)), cm.run_raw_c(*x)):
            assert len(got) == len(want)
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)
    signal = noise = 0.0
    for x in cm.spec.test_inputs:
        for got, ref in zip(cm.run(*x), cm.eager(*x)):
            signal += float((ref.double() ** 2).sum())
            noise += float(((got.double() - ref.double()) ** 2).sum())
    assert 10 * np.log10(signal / noise) > 35.0


@pytest.mark.slow
def test_gptq_rounds_the_matrices_of_layers_run_from_a_given_state() -> None:
    """An LSTM from (h0, c0) and a GRU from h0: GPTQ moves codes of both matrices of each, on the lowering's per
    gate row grid (every row's codes still reach 127, so the lowering gives them back)."""

    class FromStates(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(6, 8, batch_first=True)
            self.gru = nn.GRU(8, 8, batch_first=True)

        def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
            seq, _ = self.lstm(x, (h0, c0))
            return self.gru(seq, h0)[0]

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(5)
    factors = torch.randn(6, 3, generator=g)
    calibration = [((torch.randn(1, 12, 3, generator=g) @ factors.T), 0.8 * torch.rand(1, 1, 8, generator=g) - 0.4,
                    torch.randn(1, 1, 8, generator=g)) for _ in range(16)]
    codes = {}
    for rounding in ("nearest", "gptq"):
        low = mcu.api.lower(FromStates().eval(), calibration[0], quantize="w8a16", calibration=calibration,
                            name="from_states", weight_rounding=rounding, bias_correction=False)
        codes[rounding] = {op.kind: (op.inputs[1].data, op.inputs[2].data) for op in low.graph.ops
                           if op.kind in ("lstm", "gru")}
    assert set(codes["gptq"]) == {"lstm", "gru"}
    for kind in ("lstm", "gru"):
        for near, gptq in zip(codes["nearest"][kind], codes["gptq"][kind]):
            assert np.all(np.abs(gptq.astype(np.int32)).max(axis=1) == 127)
            assert int((near != gptq).sum()) > 0, kind


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_w8a16_recurrent_forms_are_bit_exact_on_qemu(name: str) -> None:
    """On the M33: the generated-C firmware and the program file on the interpreter firmware print the
    reference's bits."""
    cm = _lowered(name).compile("mps2-an505")
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    image = cm.program_image(bundle_tests=True)
    kernels = {fn for steps in image.instructions.values() for _, fn in steps if fn != "delegate"}
    firmware = build_interpreter_firmware(load_board("mps2-an505"), kernels=kernels)
    run = run_program(cm.board, firmware.elf, image.program)
    assert run.passed, run.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        want = cm.reference_raw(*x)
        for got, r in zip(sim.outputs_raw[v], cm.raw_outputs(want)):
            np.testing.assert_array_equal(got, r)
        for i, t in enumerate(cm.graph.outputs):
            got = run.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel)
            np.testing.assert_array_equal(got, want[i].reshape(-1))
