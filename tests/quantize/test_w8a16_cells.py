"""w8a16 on recurrent cells stepped in a Python loop (tests/support/cell_models.py): an nn.LSTMCell loop returning
``{"logits", "c"}`` and an nn.RNNCell loop, each step its gate ops on the 16x8 kernels (the zero first states are
constants of the loop), every op int16; the generated C and the program file give the integer reference's codes on
the host and on the simulated M33; the outputs are closer to fp32 than int8's."""

from __future__ import annotations

import functools

import pytest

import mcu
from cell_models import MODELS, compile_model
from mcu.device.boards import load_board
from mcu.program.device import build_interpreter_firmware
from mcu.reference.interp import Reference
from int16_checks import assert_c_and_program_equal_reference, assert_device_equals_reference, output_sqnr_db
from repo import requires_qemu

# (each model compiles in about 10 s)
pytestmark = pytest.mark.slow


@functools.lru_cache(maxsize=None)
def _compiled(name: str, quantize: str) -> mcu.CompiledModel:
    return compile_model(name, quantize)


@pytest.mark.parametrize("name", MODELS)
def test_w8a16_cell_loops_are_int16_kernels_bit_exact_in_c_and_program(name: str) -> None:
    cm = _compiled(name, "w8a16")
    assert cm.graph.fallbacks == [] and Reference(cm.graph).exact
    kinds = {op.kind for op in cm.graph.ops}
    assert {"linear", "tanh", "add"} <= kinds and ("sigmoid" in kinds and "mul" in kinds) == (name == "lstm_cell")
    assert all(op.output.dtype == "int16" for op in cm.graph.ops)
    assert_c_and_program_equal_reference(cm)


@pytest.mark.parametrize("name", MODELS)
def test_w8a16_cell_loops_are_closer_to_fp32_than_int8(name: str) -> None:
    """lstm_cell 51.9 dB against 35.4 at int8, rnn_cell 49.4 / 36.0 (README)."""
    assert output_sqnr_db(_compiled(name, "w8a16")) > output_sqnr_db(_compiled(name, "int8")) + 10.0


@requires_qemu
@pytest.mark.qemu
def test_w8a16_lstm_cell_loop_is_bit_exact_on_the_m33() -> None:
    firmware = build_interpreter_firmware(load_board("mps2-an505"))
    assert_device_equals_reference(_compiled("lstm_cell", "w8a16"), firmware.elf)
