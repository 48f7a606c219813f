"""ARMv6-M in CI: the mps2-an385-m0plus board compiles for the Cortex-M0+ (the RP2040's core: no DSP, no
FPU, no IT blocks) and runs on QEMU's Cortex-M3 machine, where ARMv6-M code runs unchanged. Every reference
model at int8 must print the outputs of the Python integer reference, bit for bit."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from mcu.device.boards import load_board
from repo import REFERENCE_MODELS, requires_qemu

BOARD = "mps2-an385-m0plus"


def test_m0plus_board_file() -> None:
    b = load_board(BOARD)
    assert b.core == "cortex-m0plus" and "-mcpu=cortex-m0plus" in b.cpu_flags
    assert not b.dsp and not b.mve and b.fpu is None and "-mfloat-abi=soft" in b.cpu_flags
    assert b.qemu_machine == "mps2-an385" and b.port == "mps2"


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_int8_model_runs_as_armv6m_code_equal_to_reference(compiled, name: str) -> None:
    cm = compiled(name, BOARD, "int8")
    assert cm.reference_is_exact
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    assert len(sim.outputs_raw) == len(cm.spec.test_inputs)
    for raw, x in zip(sim.outputs_raw, cm.spec.test_inputs):
        for got, want in zip(raw, cm.raw_outputs(cm.reference_raw(*x))):
            np.testing.assert_array_equal(got, want)  # zero differences from the Python reference
    assert sim.instructions and sim.instructions > 0
    print(f"{name}: {sim.instructions} ARMv6-M instructions per inference")
    if shutil.which("arm-none-eabi-readelf"):
        attrs = subprocess.run(["arm-none-eabi-readelf", "-A", str(cm.build().elf)], capture_output=True,
                               text=True, check=True).stdout
        assert "Tag_CPU_arch: v6S-M" in attrs and "Tag_CPU_arch_profile: Microcontroller" in attrs
        assert "Tag_THUMB_ISA_use: Thumb-1" in attrs, attrs  # no Thumb-2 (v7-M) instructions
