"""w8a16 on attention and normalisation as users write them: nn.MultiheadAttention (batch_first, with and without
the weights), a transformer encoder layer built by hand (LayerNorm, attention, MLP) with a log-softmax head,
nn.RMSNorm, a learned position embedding (an add of a constant), a causal transformer block (nn.MultiheadAttention
with a boolean causal mask) and attention written by hand with masks applied by ``torch.where`` and ``masked_fill``.
Every product of two activations is mcu_bmm_s16, every norm mcu_layer_norm_s16, every masked softmax
mcu_softmax_masked_s16 and the head mcu_log_softmax_s16; the generated C and the program file
on the host, and both on the simulated M33, give the integer reference's codes; the outputs are closer to fp32
than int8's."""

from __future__ import annotations

import pytest

import mcu
from attention_models import KINDS, MASKED, MODELS, compile_model
from mcu.device.boards import load_board
from mcu.program.device import build_interpreter_firmware
from mcu.reference.interp import Reference
from int16_checks import assert_c_and_program_equal_reference, assert_device_equals_reference, output_sqnr_db
from repo import requires_qemu

# (each model compiles in 10 to 40 s: the kernels' fast tests are tests/kernels/test_kernels_s16_norm.py)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=MODELS)
def w8a16(request) -> mcu.CompiledModel:
    return compile_model(request.param, "w8a16")


def test_w8a16_attention_and_norms_are_int16_kernels(w8a16) -> None:
    assert w8a16.graph.fallbacks == [] and Reference(w8a16.graph).exact
    kinds = KINDS[w8a16.spec.name]
    assert kinds <= {op.kind for op in w8a16.graph.ops}
    assert all(op.output.dtype == "int16" for op in w8a16.graph.ops)
    if w8a16.spec.name in MASKED:  # each constant mask is the masked softmax's operand, no op of its own
        masked = [op for op in w8a16.graph.ops if op.kind == "softmax" and len(op.inputs) == 2]
        assert len(masked) == MASKED[w8a16.spec.name] and all(op.inputs[1].dtype == "uint8" for op in masked)
        assert not [op for op in w8a16.graph.ops if op.kind == "where"]
    if w8a16.spec.name != "mha_weights":  # (torch scales q itself when it returns the weights: a table)
        # the scores' scaling is in the bmm's requantization
        assert not [op for op in w8a16.graph.ops if op.kind == "lut" and op.attrs.get("function") == "affine"]


def test_w8a16_attention_and_norms_are_bit_exact_in_c_and_program(w8a16) -> None:
    assert_c_and_program_equal_reference(w8a16)


def test_w8a16_attention_and_norms_are_closer_to_fp32_than_int8(w8a16) -> None:
    """mha 47.1 dB against 34.1 at int8, mha_weights 48.8 / 33.9, encoder 45.3 / 40.6, rms 46.1 / 34.7, pos
    49.5 / 35.7 (bench/w8a16_attention.py; README)."""
    margin = {"mha": 10.0, "mha_weights": 10.0, "encoder": 3.0, "rms": 8.0, "pos": 10.0, "causal": 3.0,
              "masked": 10.0}[w8a16.spec.name]
    assert output_sqnr_db(w8a16) > output_sqnr_db(compile_model(w8a16.spec.name, "int8")) + margin


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
def test_w8a16_attention_and_norms_are_bit_exact_on_the_m33() -> None:
    """Every model's generated-C firmware and program file (one interpreter firmware) give the reference's codes."""
    board = "mps2-an505"
    firmware = build_interpreter_firmware(load_board(board))
    for name in MODELS:
        assert_device_equals_reference(compile_model(name, "w8a16", board), firmware.elf)
