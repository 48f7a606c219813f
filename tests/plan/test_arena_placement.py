"""Where an exported library's arena lands in a firmware whose linker script knows nothing of mcu.

By default the arena is a zero-initialised static, so any linker script puts it in .bss: a NOBITS
section that takes RAM and no flash. The placement option (Make fragment variable, CMake cache
variable or the macro itself) moves it into a section the integrator names.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mcu.device.elf import read_elf
from mcu.commands.export import export_library

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                                reason="needs arm-none-eabi-gcc (run scripts/setup)")

# A bare-metal script as a user might write it: flash, RAM, .text/.data/.bss and nothing of mcu's.
LINKER_SCRIPT = """
MEMORY
{
    FLASH (rx)  : ORIGIN = 0x00000000, LENGTH = 1M
    RAM   (rwx) : ORIGIN = 0x20000000, LENGTH = 256K
}
ENTRY(main)
SECTIONS
{
    .text : { *(.text .text.*) *(.rodata .rodata.*) } > FLASH
    .data : { *(.data .data.*) } > RAM AT > FLASH
    .bss (NOLOAD) : { *(.bss .bss.*) *(COMMON) } > RAM
}
"""

MAIN_C = r"""
#include "{p}_model.h"

static int8_t input[{P}_INPUT0_SIZE];
static int8_t output[{P}_OUTPUT0_SIZE];

int main(void)
{{
    return {p}_run(input, output) == MCU_OK ? (int)output[0] : -1;
}}
"""

MAKEFILE = """
CC := arm-none-eabi-gcc
CFLAGS := -mcpu=cortex-m33 -mthumb -Os -ffunction-sections -fdata-sections -Wall -Wextra -Werror
{placement}
include lib/{p}.mk
app.elf: main.c $({P}_SRCS)
\t$(CC) $(CFLAGS) $({P}_CFLAGS) -nostartfiles --specs=nano.specs --specs=nosys.specs \\
\t    -Wl,--gc-sections -T app.ld -o $@ $^ -lm
"""


@pytest.fixture(scope="module")
def int8_small_cnn(compiled):
    return compiled("small_cnn", quantize="int8")


def _link(tmp_path: Path, cm, placement: str = "") -> Path:
    p = cm.library.prefix
    export_library(cm.library, tmp_path / "lib")
    (tmp_path / "main.c").write_text(MAIN_C.format(p=p, P=p.upper()))
    (tmp_path / "app.ld").write_text(LINKER_SCRIPT)
    (tmp_path / "Makefile").write_text(MAKEFILE.format(p=p, P=p.upper(), placement=placement))
    proc = subprocess.run(["make", "-s", "app.elf"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp_path / "app.elf"


def _arena_section(elf_path: Path, cm):
    elf = read_elf(elf_path)
    sym = elf.symbol(f"{cm.library.prefix}_arena0") or elf.symbol(f"{cm.library.prefix}_arena")
    assert sym is not None, [s.name for s in elf.symbols if "arena" in s.name]
    assert sym.size == cm.memory.arenas[0].plan.arena_size
    return elf, elf.sections[sym.shndx]


def test_default_arena_is_bss_and_takes_no_flash(int8_small_cnn, tmp_path: Path) -> None:
    cm = int8_small_cnn
    elf, section = _arena_section(_link(tmp_path, cm), cm)
    assert section.name == ".bss" and section.nobits
    assert section.size >= cm.memory.arena_size
    # Flash holds .text and .data's load image; the arena is in neither.
    stored = sum(seg.filesz for seg in elf.load_segments())
    text, data = elf.section(".text"), elf.section(".data")
    assert stored == text.size + (data.size if data is not None else 0)
    assert (data.size if data is not None else 0) < cm.memory.arena_size


def test_make_option_places_arena_in_named_section(int8_small_cnn, tmp_path: Path) -> None:
    cm = int8_small_cnn
    p = cm.library.prefix.upper()
    elf, section = _arena_section(_link(tmp_path, cm, placement=f"{p}_ARENA_SECTION := .fast_ram"), cm)
    assert section.name == ".fast_ram"
    assert elf.section(".bss") is None or elf.section(".bss").size < cm.memory.arena_size


def _weights_sections(elf_path: Path, cm) -> set[str]:
    elf = read_elf(elf_path)
    symbols = {c.symbol for c in cm.library.view.constants}
    found = [s for s in elf.symbols if s.name in symbols and s.size]
    assert found, "no weight array in the link"
    return {elf.sections[s.shndx].name for s in found}


def test_weights_stay_in_rodata_unless_a_section_is_named(int8_small_cnn, tmp_path: Path) -> None:
    """MCU_WEIGHTS_SECTION puts every constant array in the integrator's section (their RAM, copied at boot);
    without it they are ordinary .rodata (here in the script's .text)."""
    cm = int8_small_cnn
    assert _weights_sections(_link(tmp_path / "default", cm), cm) == {".text"}
    placed = _link(tmp_path / "named", cm, placement="MCU_WEIGHTS_SECTION := .fast_weights")
    assert _weights_sections(placed, cm) == {".fast_weights"}
    readme = (tmp_path / "named" / "lib" / "README.md").read_text()
    assert "## Where the weights live" in readme and "MCU_WEIGHTS_SECTION" in readme


def test_header_and_readme_say_where_the_arena_lives(int8_small_cnn, tmp_path: Path) -> None:
    cm = int8_small_cnn
    P = cm.library.prefix.upper()
    export_library(cm.library, tmp_path / "lib")
    header = (tmp_path / "lib" / f"{cm.library.prefix}_model.h").read_text()
    readme = (tmp_path / "lib" / "README.md").read_text()
    cmake = (tmp_path / "lib" / "CMakeLists.txt").read_text()
    for text in (header, readme):
        assert ".bss" in text and f"{P}_ARENA_SECTION" in text
    assert f"set({P}_ARENA_SECTION" in cmake and f"{P}_ARENA_SECTION=" in cmake


CMAKELISTS = """
cmake_minimum_required(VERSION 3.13)
project(firmware C)
add_subdirectory(lib)
add_executable(app.elf main.c)
target_link_libraries(app.elf PRIVATE {p})
target_link_options(app.elf PRIVATE -nostartfiles --specs=nano.specs --specs=nosys.specs -Wl,--gc-sections
                    -T${{CMAKE_CURRENT_SOURCE_DIR}}/app.ld)
"""


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.parametrize("section", [None, ".fast_ram"])
def test_cmake_option_places_arena(int8_small_cnn, tmp_path: Path, section: str | None) -> None:
    cm = int8_small_cnn
    p = cm.library.prefix
    export_library(cm.library, tmp_path / "lib")
    (tmp_path / "main.c").write_text(MAIN_C.format(p=p, P=p.upper()))
    (tmp_path / "app.ld").write_text(LINKER_SCRIPT)
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS.format(p=p))
    flags = "-mcpu=cortex-m33 -mthumb -Os -ffunction-sections -fdata-sections -Wall -Wextra -Werror"
    configure = ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), "-DCMAKE_SYSTEM_NAME=Generic",
                 "-DCMAKE_C_COMPILER=arm-none-eabi-gcc", "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY",
                 f"-DCMAKE_C_FLAGS={flags}"]
    if section is not None:
        configure.append(f"-D{p.upper()}_ARENA_SECTION={section}")
    for cmd in (configure, ["cmake", "--build", str(tmp_path / "b")]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    _, where = _arena_section(tmp_path / "b" / "app.elf", cm)
    assert where.name == (section or ".bss")
    assert where.nobits or section is not None


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="the firmware build is checked with QEMU's tools "
                    "installed (run scripts/setup)")
def test_our_firmware_keeps_its_noload_arena_section(int8_small_cnn) -> None:
    """mcu's own linker scripts place the arena in .mcu_arena (NOLOAD, not zeroed at reset)."""
    cm = int8_small_cnn
    fw = cm.build()
    elf, section = _arena_section(fw.elf, cm)
    assert section.name == ".mcu_arena" and section.nobits
