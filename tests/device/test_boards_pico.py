"""The pico board (RP2040, Cortex-M0+) without the Pico SDK: `mcu build --board pico` writes a UF2 for the
RP2040 family whose image starts with the project's own 256-byte second-stage boot (valid CRC32, ARMv6-M
code, W25Q080 quad XIP set-up) followed by the vector table; the ARMv6-M code itself runs in QEMU on the
mps2-an385-m0plus board (tests/device/test_boards_m0plus.py)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cli_runner import mcu_in_process
from mcu.device.boards import load_board
from mcu.device.boot2 import BOOT2_SIZE, boot2_crc, seal_boot2
from mcu.device.elf import read_elf
from mcu.device.uf2 import FAMILY_RP2040, PAYLOAD_SIZE, read_uf2
from repo import EXAMPLES

FLASH = (0x10000000, 0x10200000)
SRAM = (0x20000000, 0x20042000)


def test_pico_board_file() -> None:
    b = load_board("pico")
    assert b.core == "cortex-m0plus" and "-mcpu=cortex-m0plus" in b.cpu_flags and "-mfloat-abi=soft" in b.cpu_flags
    assert b.fpu is None and not b.dsp and not b.mve
    assert (b.flash.origin, b.flash.end) == FLASH and b.flash.length == 2 * 1024 * 1024
    assert (b.ram.origin, b.ram.end) == SRAM and b.ram.length == 264 * 1024
    assert b.clock_hz == 125_000_000 and b.port == "rp2/rp2040"
    assert b.console_kind == "pl011-uart" and b.uart_base == 0x40034000 and b.console_baud == 115200
    assert b.deploy_method == "uf2" and b.uf2_family == FAMILY_RP2040 == 0xE48BFF56
    assert b.sim_kind is None


def test_boot2_crc_has_the_boot_roms_parameters() -> None:
    # The CRC-32/MPEG-2 check value (MSB first, init 0xFFFFFFFF, no final XOR).
    assert boot2_crc(b"123456789") == 0x0376E6E7
    assert boot2_crc(b"") == 0xFFFFFFFF


@pytest.fixture(scope="module")
def pico_build(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed (scripts/setup)")
    out = tmp_path_factory.mktemp("pico") / "out"
    proc = mcu_in_process("build", "--board", "pico", "--json", "-o", str(out), str(EXAMPLES / "small_cnn.py"))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_uf2_is_rp2040_family_from_flash_start(pico_build: dict) -> None:
    uf2 = read_uf2(Path(pico_build["uf2"]))
    blocks = uf2.blocks
    assert blocks and all(b.family == 0xE48BFF56 for b in blocks)
    assert blocks[0].address == FLASH[0]
    assert all(len(b.data) == PAYLOAD_SIZE and FLASH[0] <= b.address < FLASH[1] for b in blocks)
    for seg in read_elf(Path(pico_build["elf"])).load_segments():
        assert uf2.read(seg.paddr, seg.filesz) == seg.data


def test_boot_stage_crc_and_vector_table_after_it(pico_build: dict) -> None:
    uf2 = read_uf2(Path(pico_build["uf2"]))
    boot2 = uf2.read(FLASH[0], BOOT2_SIZE)
    assert struct.unpack("<I", boot2[252:])[0] == boot2_crc(boot2[:252]) != 0
    # one flipped bit and the ROM would refuse it
    assert boot2_crc(bytes([boot2[0] ^ 1]) + boot2[1:252]) != boot2_crc(boot2[:252])
    # boot2 vectors into the image at 0x10000100 (VTOR = that address, a literal in its pool)
    assert struct.pack("<I", FLASH[0] + BOOT2_SIZE) in boot2 and struct.pack("<I", 0xE000ED08) in boot2
    sp, reset = struct.unpack("<2I", uf2.read(FLASH[0] + BOOT2_SIZE, 8))
    assert sp == SRAM[1] and sp % 8 == 0
    elf = read_elf(Path(pico_build["elf"]))
    handler = elf.symbol("Reset_Handler")
    assert handler is not None and reset == handler.value | 1 and FLASH[0] < reset < FLASH[1]
    assert elf.section(".boot2").addr == FLASH[0] and elf.section(".vectors").addr == FLASH[0] + BOOT2_SIZE


@pytest.mark.skipif(shutil.which("arm-none-eabi-objdump") is None, reason="needs arm-none-eabi-objdump")
def test_firmware_is_armv6m_and_boot2_is_position_independent(pico_build: dict) -> None:
    elf_path = pico_build["elf"]
    attrs = subprocess.run(["arm-none-eabi-readelf", "-A", elf_path], capture_output=True, text=True,
                           check=True).stdout
    assert "Tag_CPU_arch: v6S-M" in attrs
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", "-j", ".boot2", elf_path], capture_output=True,
                         text=True, check=True).stdout
    # The ROM runs boot2 from SRAM (0x20041f00): any branch or literal must be PC-relative, and every
    # branch target must stay inside the 256 bytes.
    targets = [int(line.split()[-2], 16) for line in dis.splitlines() if "\tb" in line and "<" in line
               and line.split()[-2].startswith("100000")]
    assert targets and all(FLASH[0] <= t < FLASH[0] + 252 for t in targets)
    assert "blx" not in dis


def test_seal_refuses_a_boot2_of_the_wrong_size(tmp_path: Path) -> None:
    from mcu.errors import McuError

    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed (scripts/setup)")
    src = tmp_path / "b.c"
    src.write_text('__attribute__((section(".boot2"), used)) const unsigned char b[128] = {1};\n'
                   "void _start(void) {}\n")
    elf = tmp_path / "b.elf"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m0plus", "-mthumb", "-nostdlib", "-o", str(elf), str(src)],
                   check=True, capture_output=True)
    with pytest.raises(McuError, match="exactly 256"):
        seal_boot2(elf)


# --- mcu flash --board pico: the pico2 flow, with the RP2040 boot ROM's drive ----------------------------

RP2040_INFO = "UF2 Bootloader v3.0\nModel: Raspberry Pi RP2\nBoard-ID: RPI-RP2\n"


def test_flash_picks_the_rp2040_drive_by_family(tmp_path: Path) -> None:
    from mcu.device import flash

    media = tmp_path / "media"
    for name, info in (("RP2350", "Board-ID: RP2350\n"), ("RPI-RP2", RP2040_INFO)):
        (media / name).mkdir(parents=True)
        (media / name / "INFO_UF2.TXT").write_text(info)
    assert flash.chip_for_family(FAMILY_RP2040) == "RPI-RP2" and flash.chip_for_family(0xE48BFF59) == "RP2350"
    assert flash.find_bootsel_drive([media], chip="RPI-RP2") == media / "RPI-RP2"
    assert flash.find_bootsel_drive([media]) == media / "RP2350"


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")
def test_mcu_flash_pico_end_to_end(tmp_path: Path, pty) -> None:
    from fake_pico import PASS_LINES, FakePico, mcu_process

    drive = tmp_path / "media" / "RPI-RP2"
    drive.mkdir(parents=True)
    (drive / "INFO_UF2.TXT").write_text(RP2040_INFO)
    pico = FakePico(drive, pty, PASS_LINES, timeout_s=600)
    pico.start()
    proc = mcu_process("flash", "--board", "pico", "--drive", str(drive), "--port", pty.port, "--timeout", "20",
                "-o", str(tmp_path / "out"), str(EXAMPLES / "small_cnn.py"))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "RESULT PASS 0/1" in out and "at 125 MHz" in out
    received = read_uf2(tmp_path / "media" / "received.uf2")
    assert received.family == FAMILY_RP2040 and received.blocks[0].address == FLASH[0]
