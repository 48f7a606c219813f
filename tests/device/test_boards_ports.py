"""Boards, ports, the cross build and the QEMU runner with its instruction counter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcu import paths
from mcu.device.boards import Board, list_boards, load_board
from mcu.device.elf import read_elf
from mcu.errors import McuError
from mcu.device.sim.qemu import FAULT_EXIT_BASE, build_plugin, run_qemu
from mcu.device.toolchain import build_firmware, find_cross_compiler, render_linker_script

QEMU_BOARDS = ["mps2-an505", "mps2-an386", "mps2-an385"]
HAVE_CROSS = shutil.which("arm-none-eabi-gcc") is not None
HAVE_QEMU = shutil.which("qemu-system-arm") is not None
needs_cross = pytest.mark.skipif(not HAVE_CROSS, reason="arm-none-eabi-gcc not installed")
needs_qemu = pytest.mark.skipif(not (HAVE_CROSS and HAVE_QEMU), reason="qemu-system-arm not installed")

# Iterations of the measured loop; the second region runs 2 * N.
N = 1000
ARENA_BYTES = 1000

HELLO_C = r"""
#include <stdint.h>

#include "mcu/log.h"
#include "mcu/platform.h"

/* Non-const so it lives in .data and proves the startup copy. */
static char greeting[] = "hello from mcu";
/* NOLOAD arena: RAM only, nothing in flash. */
static uint8_t arena[ARENA_BYTES] __attribute__((section(".mcu_arena"), aligned(16)));

/* Exactly two instructions per iteration (subs + bne) on every Thumb-2 core,
 * so the instruction counter can be checked to the instruction. */
static void spin(uint32_t n)
{
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

int main(void)
{
    arena[ARENA_BYTES - 1] = 42u;
    mcu_log_str(greeting);
    mcu_log_str(" arena=");
    mcu_log_u32(arena[ARENA_BYTES - 1]);
    mcu_log_newline();
    mcu_bench_begin();
    spin(HELLO_N);
    mcu_bench_end();
    mcu_bench_begin();
    spin(2u * HELLO_N);
    mcu_bench_end();
    return HELLO_STATUS;
}
"""

TRAP_C = r"""
#include "mcu/log.h"

int main(void)
{
    mcu_log_str("about to trap\n");
    __builtin_trap();
}
"""

HANG_C = r"""
int main(void)
{
    for (;;) {
        __asm__ volatile("" ::: "memory");
    }
}
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- boards -------------------------------------------------------------------------------------


def test_list_boards_has_the_qemu_boards() -> None:
    names = [b.name for b in list_boards()]
    assert set(QEMU_BOARDS) <= set(names)
    assert names == sorted(names)


def test_board_fields() -> None:
    m4 = load_board("mps2-an386")
    assert m4.core == "cortex-m4" and m4.fpu == "fpv4-sp" and m4.dsp and not m4.mve
    assert "-mfpu=fpv4-sp-d16" in m4.cpu_flags and "-mfloat-abi=hard" in m4.cpu_flags
    assert (m4.flash.origin, m4.flash.length) == (0x0, 0x400000)
    assert (m4.ram.origin, m4.ram.length) == (0x20000000, 0x400000)
    assert m4.uart_base == 0x40004000 and m4.qemu_machine == "mps2-an386"

    m3 = load_board("mps2-an385")
    assert m3.fpu is None and not m3.dsp and "-mfloat-abi=soft" in m3.cpu_flags
    assert m3.flash == m4.flash and m3.ram == m4.ram and m3.port == "mps2"


def test_unknown_board_lists_the_available_ones() -> None:
    with pytest.raises(McuError) as exc:
        load_board("no-such-board")
    assert exc.value.message == "unknown board 'no-such-board'"
    assert exc.value.hint is not None and exc.value.hint.startswith("available boards: ")
    listed = exc.value.hint.removeprefix("available boards: ").split(", ")
    assert {"mps2-an385", "mps2-an386", "mps2-an386-l4r5", "mps2-an505", "pico2"} <= set(listed)


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("stack_bytes = 8192", 'stack_bytes = "big"', "stack_bytes"),
        ("origin = 0x38000000\n", "", "memory.ram.origin"),
        ("dsp = true", "dsp = 1", "dsp"),
    ],
)
def test_board_validation_names_file_and_key(tmp_path: Path, old: str, new: str, key: str) -> None:
    text = (paths.boards_dir() / "mps2-an505.toml").read_text()
    assert old in text
    bad = _write(tmp_path / "mps2-an505.toml", text.replace(old, new))
    with pytest.raises(McuError) as exc:
        load_board("mps2-an505", directory=tmp_path)
    assert str(bad) in exc.value.message and f"'{key}'" in exc.value.message


def test_linker_script_uses_the_board_memory_map() -> None:
    script = render_linker_script(load_board("mps2-an386"))
    assert "ORIGIN = 0x00000000, LENGTH = 0x00400000" in script
    assert "ORIGIN = 0x20000000, LENGTH = 0x00400000" in script
    assert "__stack_size__  = 8192;" in script
    assert ".mcu_arena (NOLOAD) : ALIGN(16)" in script


# --- toolchain ----------------------------------------------------------------------------------


def test_missing_cross_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCU_ARM_GCC", "/nonexistent/arm-none-eabi-gcc")
    with pytest.raises(McuError) as exc:
        find_cross_compiler()
    assert "arm-none-eabi-gcc" in exc.value.message
    assert exc.value.hint is not None
    assert "apt-get install --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi" in exc.value.hint
    src = _write(tmp_path / "main.c", "int main(void) { return 0; }\n")
    with pytest.raises(McuError, match="arm-none-eabi-gcc"):
        build_firmware(load_board("mps2-an505"), [src], [], tmp_path / "out")


@needs_cross
def test_compile_error_carries_the_compiler_message(tmp_path: Path) -> None:
    src = _write(tmp_path / "main.c", "int main(void) { return undeclared_name; }\n")
    with pytest.raises(McuError) as exc:
        build_firmware(load_board("mps2-an385"), [src], [], tmp_path / "out")
    assert "compiling" in exc.value.message and "undeclared_name" in exc.value.message


@needs_cross
def test_build_is_cached_until_a_header_changes(tmp_path: Path) -> None:
    header = _write(tmp_path / "inc" / "value.h", "#define VALUE 1\n")
    src = _write(tmp_path / "main.c", '#include "value.h"\nint main(void) { return VALUE; }\n')
    board = load_board("mps2-an386")
    first = build_firmware(board, [src], [header.parent], tmp_path / "out")
    stamp = first.elf.stat().st_mtime_ns
    first_bytes = first.elf.read_bytes()
    again = build_firmware(board, [src], [header.parent], tmp_path / "out")
    assert again == first and again.elf.stat().st_mtime_ns == stamp
    header.write_text("#define VALUE 2\n")
    rebuilt = build_firmware(board, [src], [header.parent], tmp_path / "out")
    assert rebuilt.elf.read_bytes() != first_bytes
    # Only the finished outputs stay; the private build folders are gone.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "firmware.elf", "firmware.ld", "firmware.map", "firmware.stamp.json"]


# --- firmware in QEMU ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hello_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hello")
    _write(d / "main.c", HELLO_C)
    return d


def _hello(board: Board, hello_dir: Path, status: int):
    return build_firmware(
        board, [hello_dir / "main.c"], [], hello_dir / f"{board.name}-{status}",
        defines={"HELLO_N": f"{N}u", "HELLO_STATUS": status, "ARENA_BYTES": ARENA_BYTES},
    )


@pytest.mark.qemu
@needs_qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_hello_console_exit_and_exact_instruction_counts(board_name: str, hello_dir: Path) -> None:
    board = load_board(board_name)
    fw = _hello(board, hello_dir, 0)

    first = run_qemu(board, fw.elf, timeout_s=30)
    assert first.console == "hello from mcu arena=42\n"
    assert first.exit_code == 0 and not first.faulted
    # One count per begin/end pair; the second region spins twice as long,
    # and each iteration is exactly subs + bne.
    assert len(first.instructions) == 2
    small, large = first.instructions
    assert large - small == 2 * N
    assert 2 * N <= small <= 2 * N + 10  # plus the call/return around the loop

    second = run_qemu(board, fw.elf, timeout_s=30)
    assert second.instructions == first.instructions


@pytest.mark.qemu
@needs_qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_exit_status_comes_back_exactly(board_name: str, hello_dir: Path) -> None:
    board = load_board(board_name)
    result = run_qemu(board, _hello(board, hello_dir, 7).elf, timeout_s=30)
    assert result.exit_code == 7
    assert result.console.startswith("hello from mcu")


@needs_cross
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_sizes_and_symbols(board_name: str, hello_dir: Path) -> None:
    board = load_board(board_name)
    fw = _hello(board, hello_dir, 0)
    s = fw.sections
    assert s[".vectors"] == 64 and s[".data"] >= len("hello from mcu") + 1
    assert s[".mcu_arena"] >= ARENA_BYTES and s[".stack"] == board.stack_bytes
    in_flash = s[".vectors"] + s[".text"] + s[".rodata"] + s[".data"] + s.get(".ARM.exidx", 0)
    assert in_flash <= fw.flash_bytes <= in_flash + 64  # alignment padding only
    assert fw.ram_bytes == s[".data"] + s[".bss"] + s[".mcu_arena"] + s[".stack"]
    assert fw.symbols["__stack_top__"] == board.ram.end
    assert board.flash.contains(fw.symbols["mcu_bench_begin"])
    assert fw.symbols["mcu_bench_begin"] % 2 == 0  # Thumb bit cleared

    elf = read_elf(fw.elf)
    arena = elf.section(".mcu_arena")
    assert arena is not None and arena.nobits and arena.addr % 16 == 0
    # The .data image is stored in flash right after the read-only sections.
    data = elf.section(".data")
    assert data is not None and board.ram.contains(data.addr)
    loads = elf.load_segments()
    assert all(board.flash.contains(seg.paddr) for seg in loads)
    assert sum(seg.filesz for seg in loads) == fw.flash_bytes
    assert any(b"hello from mcu" in seg.data for seg in loads)


@pytest.mark.qemu
@needs_qemu
@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_fault_prints_a_line_and_exits_with_the_fault_status(board_name: str, tmp_path: Path) -> None:
    board = load_board(board_name)
    fw = build_firmware(board, [_write(tmp_path / "main.c", TRAP_C)], [], tmp_path / "out")
    result = run_qemu(board, fw.elf, timeout_s=30)
    assert result.faulted and result.exit_code == FAULT_EXIT_BASE + 6  # UsageFault (UDF)
    lines = result.console.splitlines()
    assert lines[0] == "about to trap"
    assert lines[1].startswith("FAULT UsageFault exception=6 pc=")


@pytest.mark.qemu
@needs_qemu
def test_timeout_says_the_firmware_did_not_finish(tmp_path: Path) -> None:
    board = load_board("mps2-an385")
    fw = build_firmware(board, [_write(tmp_path / "main.c", HANG_C)], [], tmp_path / "out")
    with pytest.raises(McuError, match=r"did not finish in 0.5 s"):
        run_qemu(board, fw.elf, timeout_s=0.5)


@needs_qemu
def test_plugin_is_built_once() -> None:
    first = build_plugin()
    assert first.is_file() and first.parent == paths.cache_dir()
    assert build_plugin() == first


@pytest.mark.qemu
@needs_qemu
def test_lockup_is_an_error_not_an_exit_status(tmp_path: Path) -> None:
    # A fault inside the fault handler locks the core up; QEMU aborts.
    src = _write(tmp_path / "main.c", (
        "void HardFault_Handler(void) { __builtin_trap(); }\n"
        "void UsageFault_Handler(void) { __builtin_trap(); }\n"
        "int main(void) { __builtin_trap(); }\n"))
    board = load_board("mps2-an386")
    fw = build_firmware(board, [src], [], tmp_path / "out")
    with pytest.raises(McuError, match="Lockup") as exc:
        run_qemu(board, fw.elf, timeout_s=30)
    assert exc.value.hint == "the firmware locked up"
