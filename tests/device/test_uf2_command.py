"""`python -m mcu.commands.uf2`: the UF2 writer the exported Pico SDK example runs when the SDK has no picotool."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcu.commands.uf2 import main
from mcu.device.elf import read_elf
from mcu.device.uf2 import (BLOCK_SIZE, EXTENSION_RP2_IGNORE_BLOCK, FAMILY_ABSOLUTE, FAMILY_RP2040,
                            FAMILY_RP2350_ARM_NS, FAMILY_RP2350_ARM_S, decode, family_id, read_uf2)
from mcu.errors import McuError

# Code in flash and initialised data whose load image follows it: two load segments, the second's load address
# (in flash) differing from its run-time address (in RAM).
APP_C = r"""
const unsigned char table[300] = {1, 2, 3, [299] = 0x5a};
unsigned int counter = 0x12345678u;
void _start(void) { for (;;) { counter += table[counter % 300u]; } }
"""
LINK_LD = """
MEMORY { FLASH (rx) : ORIGIN = 0x10000000, LENGTH = 64K  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 16K }
SECTIONS {
    .text : { *(.text*) *(.rodata*) } > FLASH
    .data : { *(.data*) } > RAM AT > FLASH
}
"""


@pytest.fixture
def app_elf(tmp_path: Path) -> Path:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed (scripts/setup)")
    (tmp_path / "app.c").write_text(APP_C)
    (tmp_path / "link.ld").write_text(LINK_LD)
    elf = tmp_path / "app.elf"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m33", "-mthumb", "-O1", "-nostdlib",
                    "-T", str(tmp_path / "link.ld"), "-o", str(elf), str(tmp_path / "app.c")],
                   check=True, capture_output=True, text=True)
    return elf


def test_family_names_are_the_sdk_platforms() -> None:
    assert family_id("rp2040") == FAMILY_RP2040
    assert family_id("rp2350-arm-s") == FAMILY_RP2350_ARM_S
    assert family_id("0xE48BFF5B") == FAMILY_RP2350_ARM_NS
    with pytest.raises(McuError, match="unknown UF2 family 'rp2350'.*rp2350-arm-s"):
        family_id("rp2350")


def test_writes_every_load_byte_at_its_load_address(app_elf: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "app.uf2"
    assert main([str(app_elf), str(out), "--family", "rp2350-arm-s"]) == 0
    uf2 = read_uf2(out)
    assert uf2.family == FAMILY_RP2350_ARM_S
    segments = read_elf(app_elf).load_segments()
    assert len(segments) == 2 and any(s.paddr != s.vaddr for s in segments)
    for seg in segments:
        assert uf2.read(seg.paddr, len(seg.data)) == seg.data
    assert all(b.address % 256 == 0 and len(b.data) == 256 for b in uf2.blocks)
    assert f"wrote {out} ({len(uf2.blocks)} blocks, 0x10000000.." in capsys.readouterr().out


def test_runs_as_a_module_and_errors_are_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mcu.commands.uf2", str(tmp_path / "missing.elf"),
                           str(tmp_path / "x.uf2"), "--family", "rp2040"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"mcu: error: cannot read ELF file {tmp_path / 'missing.elf'}: "
                                                "No such file or directory"]
    assert not (tmp_path / "x.uf2").exists()


def test_abs_block_opens_an_rp2350_image_and_is_read_apart(app_elf: Path, tmp_path: Path) -> None:
    plain, opened = tmp_path / "plain.uf2", tmp_path / "opened.uf2"
    assert main([str(app_elf), str(plain), "--family", "rp2350-arm-s"]) == 0
    assert main([str(app_elf), str(opened), "--family", "rp2350-arm-s", "--abs-block"]) == 0
    blob = opened.read_bytes()
    assert blob[BLOCK_SIZE:] == plain.read_bytes()
    uf2 = read_uf2(opened)
    assert uf2.blocks == read_uf2(plain).blocks
    (block,) = uf2.ignored
    assert (block.address, block.block_no, block.num_blocks, block.family) == (0x10FFFF00, 0, 2, FAMILY_ABSOLUTE)
    assert block.data == b"\xef" * 256
    assert int.from_bytes(blob[32 + 256 : 32 + 260], "little") == EXTENSION_RP2_IGNORE_BLOCK
    # Without the tag, the same block is one more block in the file's numbering, and a second family.
    untagged = blob[: 32 + 256] + bytes(4) + blob[32 + 260 :]
    with pytest.raises(McuError, match="says the file has 2 blocks"):
        decode(untagged)
    # The RP2040's ROM has no such erratum: no block for it.
    rp2040 = tmp_path / "rp2040.uf2"
    assert main([str(app_elf), str(rp2040), "--family", "rp2040", "--abs-block"]) == 0
    assert read_uf2(rp2040).ignored == ()


def test_abs_block_address_must_be_a_page(app_elf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(app_elf), str(tmp_path / "x.uf2"), "--family", "rp2350-arm-s", "--abs-block", "0x10ffff80"]) == 2
    assert "not a 256-byte aligned 32-bit address" in capsys.readouterr().err
