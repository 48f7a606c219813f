"""w8a16 on attention and normalisation as users write them: nn.MultiheadAttention (batch_first, with and without
the weights), a transformer encoder layer built by hand (LayerNorm, attention, MLP) with a log-softmax head, and
nn.RMSNorm. Every product of two activations is mcu_bmm_s16, every norm mcu_layer_norm_s16 and the head
mcu_log_softmax_s16; the generated C and the program file on the host, and both on the simulated M33, give the
integer reference's codes; the outputs are closer to fp32 than int8's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.device.boards import load_board
from mcu.ir import NUMPY_DTYPES
from mcu.program.device import build_interpreter_firmware, run_program
from mcu.reference.interp import Reference
from repo import requires_qemu

# (each model compiles in 10 to 40 s: the kernels' fast tests are tests/kernels/test_kernels_s16_norm.py)
pytestmark = pytest.mark.slow

MODELS = ["mha", "mha_weights", "encoder", "rms"]
D, T = 16, 6


class Mha(nn.Module):
    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, w = self.attn(x, x, x, need_weights=self.need_weights)
        return torch.cat([y, w], dim=-1) if self.need_weights else y


class Encoder(nn.Module):
    """A pre-norm encoder layer and a classifier head over each position."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 32), nn.GELU(), nn.Linear(32, D))
        self.head = nn.Linear(D, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return nn.functional.log_softmax(self.head(x), dim=-1)


class Rms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.norm, self.b = nn.Linear(D, 24), nn.RMSNorm(24), nn.Linear(24, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.norm(self.a(x)))


KINDS = {"mha": {"bmm", "softmax"}, "mha_weights": {"bmm", "softmax"}, "encoder": {"bmm", "layer_norm", "log_softmax"},
         "rms": {"layer_norm"}}


def build(name: str) -> nn.Module:
    torch.manual_seed(11)
    model = {"mha": lambda: Mha(False), "mha_weights": lambda: Mha(True), "encoder": Encoder, "rms": Rms}[name]()
    with torch.no_grad():  # (trained-looking affine parameters, not the initial ones and zeros)
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
                m.weight.uniform_(0.5, 1.5)
                if getattr(m, "bias", None) is not None:
                    m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def compile_model(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    model = build(name)
    torch.manual_seed(3)
    # (enough calibration that the test inputs stay inside its ranges: clipping would hide the modes' difference)
    calibration = [(torch.randn(1, T, D),) for _ in range(32)]
    tests = [(torch.randn(1, T, D) * 0.8,) for _ in range(3)]
    return mcu.compile(model, calibration[0], quantize=quantize, calibration=calibration, test_inputs=tests,
                       name=name, board=board)


def sqnr(cm: mcu.CompiledModel) -> float:
    signal = noise = 0.0
    for x in cm.spec.test_inputs:
        for got, want in zip(cm.run(*x), cm.eager(*x)):
            signal += float((want.double() ** 2).sum())
            noise += float(((got.double() - want.double()) ** 2).sum())
    return 10 * np.log10(signal / noise)


@pytest.fixture(scope="module", params=MODELS)
def w8a16(request) -> mcu.CompiledModel:
    return compile_model(request.param, "w8a16")


def test_w8a16_attention_and_norms_are_int16_kernels(w8a16) -> None:
    assert w8a16.graph.fallbacks == [] and Reference(w8a16.graph).exact
    kinds = KINDS[w8a16.spec.name]
    assert kinds <= {op.kind for op in w8a16.graph.ops}
    assert all(op.output.dtype == "int16" for op in w8a16.graph.ops)
    if w8a16.spec.name != "mha_weights":  # (torch scales q itself when it returns the weights: a table)
        # the scores' scaling is in the bmm's requantization
        assert not [op for op in w8a16.graph.ops if op.kind == "lut" and op.attrs.get("function") == "affine"]


def test_w8a16_attention_and_norms_are_bit_exact_in_c_and_program(w8a16) -> None:
    for x in w8a16.spec.test_inputs:
        want = w8a16.reference_raw(*x)
        for got in (w8a16.runtime_program().method("forward").run_raw(*w8a16.encode_inputs(x)),
                    w8a16.run_raw_c(*x)):
            for g, r in zip(got, want):
                assert g.dtype == np.int16
                np.testing.assert_array_equal(g, r)


@pytest.mark.slow
def test_w8a16_attention_and_norms_are_closer_to_fp32_than_int8(w8a16) -> None:
    assert sqnr(w8a16) > sqnr(compile_model(w8a16.spec.name, "int8")) + 10.0


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_w8a16_attention_and_norms_are_bit_exact_on_the_m33() -> None:
    """Every model's generated-C firmware and program file (one interpreter firmware) give the reference's codes."""
    board = "mps2-an505"
    firmware = build_interpreter_firmware(load_board(board))
    for name in MODELS:
        cm = compile_model(name, "w8a16", board)
        sim = cm.simulate()
        assert sim.passed, sim.console[-2000:]
        run = run_program(cm.board, firmware.elf, cm.program_image(bundle_tests=True).program)
        assert run.passed, run.console[-2000:]
        for v, x in enumerate(cm.spec.test_inputs):
            want = cm.reference_raw(*x)
            for got, r in zip(sim.outputs_raw[v], cm.raw_outputs(want)):
                np.testing.assert_array_equal(got, r)
            device = [run.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel)
                      for i, t in enumerate(cm.graph.outputs)]
            for got, r in zip(device, want):
                np.testing.assert_array_equal(got, r)
