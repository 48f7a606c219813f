"""mps3-an547 (Cortex-M55 with Helium) in QEMU: the board's memory map with .rodata in the QSPI
region, the shared start-up on Armv8.1-M, and MVE code both with the FPU and MVE-only (integer
Helium without an FPU still needs CP10/CP11 enabled)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.device.sim.qemu import run_qemu
from mcu.device.toolchain import board_defines, build_firmware, render_linker_script
from repo import requires_qemu

needs_cross = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")

# Sums 64 int8 products with the Helium multiply-accumulate-across-vector instruction and
# checks the result against a scalar loop. Weights are const, so they land in .rodata (QSPI).
MVE_C = r"""
#include <arm_mve.h>
#include <stdint.h>

#include "mcu/log.h"

static const int8_t weights[64] = {
#define W(i) (int8_t)((i) * 37 % 255 - 127)
    W(0), W(1), W(2), W(3), W(4), W(5), W(6), W(7), W(8), W(9), W(10), W(11), W(12), W(13), W(14), W(15),
    W(16), W(17), W(18), W(19), W(20), W(21), W(22), W(23), W(24), W(25), W(26), W(27), W(28), W(29), W(30),
    W(31), W(32), W(33), W(34), W(35), W(36), W(37), W(38), W(39), W(40), W(41), W(42), W(43), W(44), W(45),
    W(46), W(47), W(48), W(49), W(50), W(51), W(52), W(53), W(54), W(55), W(56), W(57), W(58), W(59), W(60),
    W(61), W(62), W(63),
};
static int8_t inputs[64];

int main(void)
{
    for (int i = 0; i < 64; i++) {
        inputs[i] = (int8_t)(i - 32);
    }
    int32_t scalar = 0;
    for (int i = 0; i < 64; i++) {
        scalar += (int32_t)weights[i] * inputs[i];
    }
    int32_t vector = 0;
    for (int i = 0; i < 64; i += 16) {
        vector = vmladavaq_s8(vector, vld1q_s8(&weights[i]), vld1q_s8(&inputs[i]));
    }
    mcu_log_str("mve ");
    mcu_log_i32(vector);
    mcu_log_str(" scalar ");
    mcu_log_i32(scalar);
    mcu_log_newline();
    return vector == scalar ? 0 : 1;
}
"""


def test_an547_board_file() -> None:
    b = load_board("mps3-an547")
    assert b.core == "cortex-m55" and b.mve and b.dsp and b.fpu == "fpv5-dp"
    assert "-mcpu=cortex-m55" in b.cpu_flags and b.qemu_machine == "mps3-an547"
    assert (b.flash.origin, b.flash.length) == (0x10000000, 512 * 1024)  # ITCM
    assert (b.ram.origin, b.ram.length) == (0x30000000, 512 * 1024)  # DTCM
    assert b.uart_base == 0x59303000
    qspi = b.region_for("rodata")
    assert (qspi.name, qspi.origin, qspi.length, qspi.holds) == ("qspi", 0x38000000, 8 * 1024 * 1024, ("rodata",))
    # The other boards keep read-only data in flash.
    assert load_board("mps2-an505").region_for("rodata") == load_board("mps2-an505").flash
    # The start-up code enables the M55's L1 caches (the timing model charges the SRAM and QSPI through
    # them); boards without [l1_cache] build without the sequence.
    assert "MCU_CM_L1_CACHES" in board_defines(b)
    assert "MCU_CM_L1_CACHES" not in board_defines(load_board("mps2-an505"))


def test_linker_script_puts_rodata_in_qspi() -> None:
    script = render_linker_script(load_board("mps3-an547"))
    assert "QSPI  (r)   : ORIGIN = 0x38000000, LENGTH = 0x00800000" in script
    rodata = script[script.index(".rodata :"):]
    assert rodata[: rodata.index("\n\n")].rstrip().endswith("} > QSPI")
    assert "} > QSPI" not in render_linker_script(load_board("mps2-an505"))


def test_extra_region_validation(tmp_path: Path) -> None:
    from mcu import paths

    text = (paths.boards_dir() / "mps3-an547.toml").read_text()
    (tmp_path / "mps3-an547.toml").write_text(text.replace('holds = ["rodata"]', 'holds = ["text"]'))
    with pytest.raises(McuError, match=r"memory.qspi.holds"):
        load_board("mps3-an547", directory=tmp_path)
    (tmp_path / "mps3-an547.toml").write_text(text.replace("origin = 0x38000000", "origin = 0x30040000"))
    with pytest.raises(McuError, match="overlapping ram and qspi"):
        load_board("mps3-an547", directory=tmp_path)


def _mve_firmware(tmp_path: Path, board_name: str = "mps3-an547", **changes):
    board = dataclasses.replace(load_board(board_name), **changes)
    src = tmp_path / "mve.c"
    src.write_text(MVE_C)
    return board, build_firmware(board, [src], [], tmp_path / "out")


@requires_qemu
@pytest.mark.qemu
def test_mve_with_fpu_runs(tmp_path: Path) -> None:
    board, fw = _mve_firmware(tmp_path)
    assert fw.region_bytes["qspi"] >= 64  # the const weights
    result = run_qemu(board, fw.elf, timeout_s=30)
    assert result.exit_code == 0, result.console
    assert result.console.startswith("mve ") and result.console.split()[1] == result.console.split()[3]


@requires_qemu
@pytest.mark.qemu
def test_mve_only_build_enables_the_coprocessor(tmp_path: Path) -> None:
    """Integer Helium without an FPU (no __ARM_FP): CP10/CP11 must still be enabled at reset,
    or the first vector instruction takes a NOCP UsageFault."""
    board, fw = _mve_firmware(tmp_path, cpu_flags=("-mcpu=cortex-m55+nofp", "-mthumb", "-mfloat-abi=hard"),
                              fpu=None)
    result = run_qemu(board, fw.elf, timeout_s=30)
    assert result.exit_code == 0, result.console
    assert not result.faulted and result.console.split()[1] == result.console.split()[3]


@needs_cross
def test_qspi_overflow_names_the_region(tmp_path: Path) -> None:
    src = tmp_path / "main.c"
    src.write_text("#include <stdint.h>\nconst uint8_t big[9u * 1024u * 1024u] = {1};\n"
                   "int main(void)\n{\n    const uint8_t *volatile p = big;\n    return p[1];\n}\n")
    with pytest.raises(McuError) as exc:
        build_firmware(load_board("mps3-an547"), [src], [], tmp_path / "out")
    assert "does not fit mps3-an547" in exc.value.message
    assert "of qspi memory (it holds rodata), the board has 8388608 B" in exc.value.message


@requires_qemu
@pytest.mark.qemu
def test_large_model_weights_live_in_qspi(compiled) -> None:
    cm = compiled("fc_autoencoder", "mps3-an547")
    fw = cm.build()
    assert fw.region_bytes["qspi"] > 1024 * 1024  # ~1.1 MB of fp32 weights: more than the ITCM holds
    assert fw.flash_bytes < 64 * 1024
    assert fw.sections[".rodata"] == fw.region_bytes["qspi"]
