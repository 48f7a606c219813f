"""The pico2 board (RP2350) without the Pico SDK: UF2 output, image layout, size limits, and the
claim that everything but clock/reset/pin/UART/IMAGE_DEF set-up is the shared Cortex-M33 code that
the simulated mps2-an505 runs."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cli_runner import assert_one_line_error, mcu_in_process
from mcu import paths
from mcu.device.boards import load_board
from mcu.device.elf import read_elf
from mcu.errors import McuError
from mcu.device.sim.qemu import run_qemu
from mcu.device.toolchain import build_firmware, compile_flags, find_cross_compiler, port_sources
from mcu.device.uf2 import (ABSOLUTE_BLOCK_ADDRESS, BLOCK_SIZE, FAMILY_ABSOLUTE, FAMILY_RP2350_ARM_S,
                            FLAG_FAMILY_ID_PRESENT, PAYLOAD_SIZE, decode, encode, pages_from_segments, read_uf2)
from repo import EXAMPLES, requires_qemu

needs_cross = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")

IMAGE_DEF = (0xFFFFDED3, 0x10210142, 0x000001FF, 0x00000000, 0xAB123579)
SRAM = (0x20000000, 0x20082000)
FLASH = (0x10000000, 0x10400000)
# The only files the RP2350 port may add: clocks/resets, pins/UART, IMAGE_DEF, the platform glue.
RP2350_SOURCES = {"rp2/clocks.c", "rp2/uart.c", "rp2/platform.c", "rp2/rp2350/image_def.c"}


def test_pico2_board_file() -> None:
    b = load_board("pico2")
    assert b.core == "cortex-m33" and b.fpu == "fpv5-sp" and b.dsp and not b.mve
    assert (b.flash.origin, b.flash.length) == (0x10000000, 4 * 1024 * 1024)
    assert (b.ram.origin, b.ram.end) == SRAM and b.ram.length == 520 * 1024
    assert b.clock_hz == 150_000_000 and b.port == "rp2/rp2350"
    assert b.console_kind == "pl011-uart" and b.uart_base == 0x40070000 and b.console_baud == 115200
    assert b.deploy_method == "uf2" and b.uf2_family == FAMILY_RP2350_ARM_S
    assert b.sim_kind is None and b.extra_regions == ()


def test_uf2_board_needs_a_family(tmp_path: Path) -> None:
    text = (paths.boards_dir() / "pico2.toml").read_text().replace("uf2_family = 0xe48bff59\n", "")
    (tmp_path / "pico2.toml").write_text(text)
    with pytest.raises(McuError, match="deploy.uf2_family"):
        load_board("pico2", directory=tmp_path)


# --- UF2 format -----------------------------------------------------------------------------------


def test_pages_merge_segments_and_zero_fill_gaps() -> None:
    pages = pages_from_segments([(0x10000000, b"\x01" * 300), (0x1000012C, b"\x02\x03")])
    assert [a for a, _ in pages] == [0x10000000, 0x10000100]
    assert all(len(p) == PAYLOAD_SIZE for _, p in pages)
    second = pages[1][1]
    assert second[:44] == b"\x01" * 44 and second[44:46] == b"\x02\x03" and second[46:] == bytes(210)


def test_uf2_blocks_round_trip_and_reject_damage() -> None:
    blob = encode([(0x10000000, bytes(range(256))), (0x10000100, b"\xff" * 256)], FAMILY_RP2350_ARM_S)
    assert len(blob) == 2 * BLOCK_SIZE
    f = decode(blob)
    assert f.family == FAMILY_RP2350_ARM_S
    assert [(b.block_no, b.num_blocks, b.flags) for b in f.blocks] == [(0, 2, FLAG_FAMILY_ID_PRESENT),
                                                                       (1, 2, FLAG_FAMILY_ID_PRESENT)]
    assert f.read(0x100000FE, 4) == b"\xfe\xff\xff\xff"
    with pytest.raises(McuError, match="bad magic"):
        decode(b"\0" + blob[1:])
    swapped = blob[BLOCK_SIZE:] + blob[:BLOCK_SIZE]
    with pytest.raises(McuError, match="numbered 1, expected 0"):
        decode(swapped)
    with pytest.raises(McuError, match="says the file has 2 blocks"):
        decode(blob[:BLOCK_SIZE])
    with pytest.raises(McuError, match="whole number"):
        decode(blob[:-1])


# --- the real build -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pico2_build(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    out = tmp_path_factory.mktemp("pico2") / "out"
    proc = mcu_in_process("build", "--board", "pico2", "--quantize", "none", "--json", "-o", str(out),
                          str(EXAMPLES / "small_cnn.py"))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_build_writes_elf_and_uf2(pico2_build: dict) -> None:
    elf, uf2 = Path(pico2_build["elf"]), Path(pico2_build["uf2"])
    assert elf.is_file() and uf2.is_file() and uf2.parent == elf.parent and uf2.name == "firmware.uf2"
    assert pico2_build["board"] == "pico2"
    assert 0 < pico2_build["flash_bytes"] <= 4 * 1024 * 1024
    assert pico2_build["ram_bytes"] <= 520 * 1024


def test_uf2_matches_the_elf(pico2_build: dict) -> None:
    elf = read_elf(Path(pico2_build["elf"]))
    uf2 = read_uf2(Path(pico2_build["uf2"]))
    assert uf2.family == 0xE48BFF59
    # The RP2350-E10 block first, as the SDK writes it, then the image.
    assert [(b.address, b.family) for b in uf2.ignored] == [(ABSOLUTE_BLOCK_ADDRESS, FAMILY_ABSOLUTE)]
    blocks = uf2.blocks
    assert len(blocks) == blocks[0].num_blocks
    assert [b.block_no for b in blocks] == list(range(len(blocks)))
    assert all(b.num_blocks == len(blocks) for b in blocks)
    assert all(len(b.data) == PAYLOAD_SIZE and b.address % PAYLOAD_SIZE == 0 for b in blocks)
    assert all(FLASH[0] <= b.address and b.address + PAYLOAD_SIZE <= FLASH[1] for b in blocks)
    assert len({b.address for b in blocks}) == len(blocks)  # one block per flash page
    # Every loadable byte at its load (flash) address, .data's image included.
    loads = elf.load_segments()
    assert loads
    for seg in loads:
        assert uf2.read(seg.paddr, seg.filesz) == seg.data
    # Nothing beyond the ELF's pages.
    pages = {a - a % PAYLOAD_SIZE for s in loads for a in range(s.paddr, s.paddr + s.filesz)}
    assert {b.address for b in blocks} == pages


def test_image_layout_for_the_boot_rom(pico2_build: dict) -> None:
    uf2 = read_uf2(Path(pico2_build["uf2"]))
    head = uf2.read(FLASH[0], 4096)
    words = struct.unpack("<1024I", head)
    # IMAGE_DEF inside the first 4 KB, right after the 16-entry vector table.
    at = next(i for i in range(1024 - 5) if words[i : i + 5] == IMAGE_DEF)
    assert at * 4 == 64
    sp, reset = words[0], words[1]
    assert SRAM[0] < sp <= SRAM[1] and sp % 8 == 0
    assert reset & 1 == 1 and FLASH[0] <= reset < FLASH[1]
    elf = read_elf(Path(pico2_build["elf"]))
    handler = elf.symbol("Reset_Handler")
    assert handler is not None and reset == handler.value | 1
    image_def = elf.symbol("mcu_rp2350_image_def")
    assert image_def is not None and image_def.value == FLASH[0] + 64


@needs_cross
def test_flash_overflow_is_refused_with_both_numbers(tmp_path: Path) -> None:
    src = tmp_path / "main.c"
    src.write_text("#include <stdint.h>\n"
                   "const uint8_t big[5u * 1024u * 1024u] = {1};\n"
                   "int main(void)\n{\n    const uint8_t *volatile p = big; /* keep it linked */\n"
                   "    return p[12345];\n}\n")
    with pytest.raises(McuError) as exc:
        build_firmware(load_board("pico2"), [src], [], tmp_path / "out")
    msg = exc.value.message
    assert "\n" not in msg
    assert "does not fit pico2" in msg and "flash, the board has 4194304 B" in msg
    needed = int(msg.split("it needs ")[1].split(" B")[0])
    assert needed > 5 * 1024 * 1024 and f"({needed - 4194304} B too many)" in msg


def test_arena_overflow_is_refused_with_both_numbers(tmp_path: Path) -> None:
    f = tmp_path / "wide.py"
    f.write_text("import torch\n"
                 "model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU())\n"
                 "example_inputs = (torch.randn(1, 3, 128, 128),)\n")
    proc = mcu_in_process("build", "--board", "pico2", "--quantize", "none", str(f))
    assert_one_line_error(proc, "does not fit pico2", "B too many")
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("mcu:"))
    assert str(520 * 1024 - 8192) in line  # the RAM left after the stack


# --- shared Cortex-M33 code -------------------------------------------------------------------------


def test_rp2350_port_adds_only_chip_setup() -> None:
    pico2, an505 = load_board("pico2"), load_board("mps2-an505")
    ports = paths.ports_dir()
    p_src, a_src = set(port_sources(pico2)), set(port_sources(an505))
    shared = p_src & a_src
    assert {p.name for p in shared if p.parent == ports / "cortex-m"} == {
        p.name for p in (ports / "cortex-m").glob("*.c")}
    assert any(p.name == "mcu_log.c" for p in shared)
    # Only the RP2 family's files (ports/rp2, shared with the RP2040) and the chip's own (ports/rp2/rp2350).
    assert {p.relative_to(ports).as_posix() for p in p_src - a_src} == RP2350_SOURCES
    # None of the chip files defines what the shared code owns (start-up, faults, cycles, log
    # formatting) or issues a semihosting BKPT, which would HardFault without a debugger.
    text = "".join((ports / n).read_text() for n in RP2350_SOURCES)
    for owned in ("Reset_Handler", "mcu_platform_cycles", "mcu_log_str", "mcu_log_u32", "mcu_cm_fault",
                  "mcu_cm_cycles_enable", "vector_table", "bkpt"):
        assert owned not in text, owned


def _code_sections(obj: Path) -> dict[str, bytes]:
    elf = read_elf(obj)
    blob = obj.read_bytes()
    return {s.name: blob[s.offset : s.offset + s.size] for s in elf.sections
            if s.alloc and not s.nobits and s.name.startswith((".text", ".rodata"))}


@needs_cross
def test_shared_code_compiles_to_the_same_machine_code_as_on_mps2_an505(tmp_path: Path) -> None:
    """Start-up, faults, cycles, exit line and log formatting: identical object code for both boards."""
    gcc = find_cross_compiler()
    pico2, an505 = load_board("pico2"), load_board("mps2-an505")
    shared = sorted(set(port_sources(pico2)) & set(port_sources(an505)))
    assert len(shared) >= 6
    for src in shared:
        objs = []
        for board in (pico2, an505):
            obj = tmp_path / f"{board.name}-{src.stem}.o"
            subprocess.run([str(gcc), *compile_flags(board), "-c", str(src), "-o", str(obj)], check=True)
            objs.append(_code_sections(obj))
        assert objs[0] == objs[1], f"{src.name} differs between pico2 and mps2-an505"
        assert objs[0], src


@requires_qemu
@pytest.mark.qemu
def test_hardware_exit_line_runs_on_the_simulated_m33(tmp_path: Path) -> None:
    """The exit path pico2 uses (EXIT line, no BKPT without a debugger) runs in QEMU on mps2-an505."""
    src = tmp_path / "main.c"
    src.write_text('#include "mcu/log.h"\n#include "mcu_cortex_m.h"\n'
                   "int main(void)\n{\n    mcu_log_str(\"RESULT PASS 0/1\\n\");\n"
                   "    mcu_cm_hardware_exit(3);\n}\n")
    board = load_board("mps2-an505")
    fw = build_firmware(board, [src], [], tmp_path / "out")
    # No debugger in QEMU (DHCSR.C_DEBUGEN reads 0): it prints the line and sleeps forever.
    with pytest.raises(McuError, match="did not finish") as exc:
        run_qemu(board, fw.elf, timeout_s=1.5)
    assert exc.value.hint is not None and exc.value.hint.splitlines()[-2:] == ["RESULT PASS 0/1", "EXIT 3"]


def test_boards_table_shows_how_each_board_runs() -> None:
    proc = mcu_in_process("boards", "--json")
    assert proc.returncode == 0
    boards = {b["name"]: b for b in json.loads(proc.stdout)["boards"]}
    pico2, an547 = boards["pico2"], boards["mps3-an547"]
    assert (pico2["core"], pico2["fpu"], pico2["dsp"], pico2["mve"]) == ("cortex-m33", "fpv5-sp", True, False)
    assert (pico2["flash_bytes"], pico2["ram_bytes"], pico2["clock_hz"]) == (4194304, 532480, 150_000_000)
    assert pico2["deploy"] == "uf2" and pico2["uf2_family"] == FAMILY_RP2350_ARM_S and pico2["simulator"] is None
    assert (an547["core"], an547["mve"], an547["simulator"]) == ("cortex-m55", True, "qemu")
    assert an547["memory"]["qspi"] == {"origin": 0x38000000, "length": 8 * 1024 * 1024, "holds": ["rodata"]}
    rows = {line.split()[0]: line for line in mcu_in_process("boards").stdout.splitlines()[1:]}
    assert "cortex-m33" in rows["pico2"] and "520 KiB" in rows["pico2"] and "4096 KiB" in rows["pico2"]
    assert "150MHz" in rows["pico2"] and "UF2" in rows["pico2"] and "BOOTSEL" in rows["pico2"]
    assert "cortex-m55" in rows["mps3-an547"] and "qemu (mps3-an547" in rows["mps3-an547"]
