"""`mcu export --target ...`: each ecosystem's output builds warning-free in a test project and its example
prints PASS for the bundled vectors.

The Pico SDK, Arduino cores and Zephyr are not installed here, so each build uses stand-ins written below for
the few tool targets and headers the output touches (pico_stdlib, Arduino.h, the Zephyr CMake package); the
stand-ins run on the host, so the examples really run. The real-tree variants need PICO_SDK_PATH (here) or
ZEPHYR_BASE and ZEPHYR_MODULES (tests/seams/test_seams_export.py) and skip without them.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from export_builds import (WARNINGS, cmake_build, expect_pass, header_macro, pico_stand_in, run_checked,
                           run_logged)
from mcu.commands.export import export_target
from mcu.emit.targets import TARGETS, pico_sdk
from mcu.emit.targets.common import EXAMPLE_OWN_BYTES
from mcu.device.boot2 import boot2_crc
from mcu.device.elf import read_elf
from mcu.device.uf2 import FAMILY_ABSOLUTE, FAMILY_RP2040, FAMILY_RP2350_ARM_S, Uf2File, read_uf2

BOARD = "mps2-an386"  # Cortex-M4 with DSP: the kernels' DSP paths are in the Arduino cross build

requires_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed (scripts/setup)")


@pytest.fixture(scope="module")
def cm(compiled):
    return compiled("small_cnn", board=BOARD, quantize="int8")


def test_every_target_is_registered_with_its_templates() -> None:
    from mcu.paths import codegen_dir

    assert set(TARGETS) == {"cmake", "make", "pico-sdk", "arduino", "zephyr", "cmsis-pack"}
    for name in ("cmake", "pico-sdk", "arduino", "zephyr", "cmsis-pack"):
        assert list((codegen_dir() / "targets" / name).glob("*.j2")), name


def test_unknown_target_is_one_line_error(cm, tmp_path: Path) -> None:
    from mcu.errors import McuError

    with pytest.raises(McuError, match="unknown export target 'keil'"):
        export_target(cm, "keil", tmp_path)


# --- pico-sdk ------------------------------------------------------------------------------------------------


@requires_cmake
def test_pico_sdk_example_builds_and_passes_with_stand_in_sdk(cm, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_target(cm, "pico-sdk", out)
    readme = (out / "README.md").read_text()
    assert f"target_link_libraries(your_app {cm.library.prefix} pico_stdlib)" in readme
    assert readme.count("cmake ") >= 2 and ".uf2" in readme
    sdk = pico_stand_in(tmp_path)
    cmake_build(out / "example", tmp_path / "build", f"-DPICO_SDK_PATH={sdk}")
    output = run_checked([str(tmp_path / "build" / f"{cm.library.prefix}_example")])
    expect_pass(output, len(cm.spec.test_inputs))
    assert "CYCLES " in output and "MHz" in output


# What the example's UF2 must hold for each board's boot ROM: its family, and the block the ROM checks before it
# runs the image (the RP2040's second-stage boot block with its CRC; the RP2350's IMAGE_DEF block markers).
PICO_UF2_FAMILY = {"pico": FAMILY_RP2040, "pico2": FAMILY_RP2350_ARM_S}
RP2350_BLOCK_START, RP2350_BLOCK_END = 0xFFFFDED3, 0xAB123579


def _arm_cxx_library_missing() -> bool:
    probe = subprocess.run(["arm-none-eabi-g++", "-E", "-x", "c++", "-", "-o", os.devnull],
                           input="#include <cstdlib>\n", capture_output=True, text=True)
    return probe.returncode != 0


def _check_boot_block(board: str, uf2: Uf2File) -> None:
    if board == "pico":
        boot2 = uf2.read(0x10000000, 256)
        assert boot2_crc(boot2[:252]) == struct.unpack_from("<I", boot2, 252)[0]
    else:
        words = list(struct.unpack("<1024I", uf2.read(0x10000000, 4096)))
        assert RP2350_BLOCK_START in words and RP2350_BLOCK_END in words[words.index(RP2350_BLOCK_START):]


@requires_cmake
@pytest.mark.skipif(not os.environ.get("PICO_SDK_PATH"), reason="set PICO_SDK_PATH to a Pico SDK 2.x checkout "
                    "(github.com/raspberrypi/pico-sdk; its submodules are not needed) to build the example with the "
                    "real SDK; with picotool_DIR (a picotool install) the SDK writes the UF2, else mcu's UF2 writer")
# Every precision's kernels through the SDK's compiler and flags; a model whose stack with the example's own
# does not fit core 0's SCRATCH_Y bank (DS-CNN's on the M33, small_cnn's int8 on the M0+) runs on core 1.
@pytest.mark.parametrize("model, board, quantize", [
    ("small_cnn", "pico", "int8"), ("small_cnn", "pico2", "int8"), ("ds_cnn", "pico2", "int8"),
    ("small_cnn", "pico2", "none"), ("small_cnn", "pico", "w8a16"), ("small_cnn", "pico2", "w4a8")])
def test_pico_sdk_example_builds_with_real_sdk(compiled, model: str, board: str, quantize: str,
                                               tmp_path: Path) -> None:
    if shutil.which("arm-none-eabi-g++") is None or _arm_cxx_library_missing():
        pytest.skip("the Pico SDK compiles a C++ file (pico_cxx_options/new_delete.cpp) and arm-none-eabi-g++ has no "
                    "C++ library: install libstdc++-arm-none-eabi-newlib")
    cm = compiled(model, board=board, quantize=quantize)
    out = tmp_path / "out"
    export_target(cm, "pico-sdk", out)
    stack = header_macro(out / f"{cm.library.prefix}_model.h", f"{cm.library.prefix.upper()}_STACK_BYTES")
    on_core1 = stack + EXAMPLE_OWN_BYTES > pico_sdk.SCRATCH_Y_BYTES
    assert ("pico_multicore" in (out / "example" / "CMakeLists.txt").read_text()) == on_core1
    # The SDK makes the UF2 with picotool, which it clones from GitHub unless picotool_DIR names an install;
    # without it the example's CMakeLists runs mcu's UF2 writer in this interpreter after the link.
    picotool_dir = os.environ.get("picotool_DIR")
    uf2_maker = ([f"-Dpicotool_DIR={picotool_dir}"] if picotool_dir else
                 ["-DPICO_NO_PICOTOOL=1", f"-DMCU_PYTHON={sys.executable}"])
    build = tmp_path / "build"
    # CFLAGS is joined to the SDK toolchain's CPU flags (a CMAKE_C_FLAGS would replace them); the warnings apply
    # to the SDK's sources as well as ours. PICO_BOARD is the example's default for the board.
    sdk = Path(os.environ["PICO_SDK_PATH"])
    configure = run_logged(["cmake", "-S", str(out / "example"), "-B", str(build), f"-DPICO_SDK_PATH={sdk}",
                            *uf2_maker], env={"CFLAGS": " ".join(WARNINGS)}, timeout=900)
    assert f"Target board (PICO_BOARD) is '{board}'" in configure, configure
    assert "cannot import mcu" not in configure, configure
    if not (sdk / "lib" / "tinyusb" / "src").is_dir():
        # The example asks for USB stdio; an SDK without TinyUSB says it has none and builds UART stdio only.
        assert "TinyUSB submodule has not been initialized" in configure, configure
    log = run_logged(["cmake", "--build", str(build), "-j2"], timeout=900)
    assert "warning:" not in log, log
    elf = build / f"{cm.library.prefix}_example.elf"
    made = build / f"{cm.library.prefix}_example.uf2"
    uf2 = read_uf2(made)
    assert uf2.family == PICO_UF2_FAMILY[board] and uf2.blocks[0].address == 0x10000000
    # The SDK opens an RP2350 board's UF2 with the RP2350-E10 absolute block (pico2.h sets
    # PICO_RP2350_A2_SUPPORTED); the example's CMakeLists asks mcu's writer for the same.
    absolute = [(0x10FFFF00, FAMILY_ABSOLUTE)] if board == "pico2" else []
    assert [(b.address, b.family) for b in uf2.ignored] == absolute
    if picotool_dir:
        # picotool wrote this UF2: mcu's writer makes the same bytes from the same ELF.
        again = tmp_path / "mcu.uf2"
        family = {"pico": ["rp2040"], "pico2": ["rp2350-arm-s", "--abs-block"]}[board]
        run_checked([sys.executable, "-m", "mcu.commands.uf2", str(elf), str(again), "--family", *family])
        assert again.read_bytes() == made.read_bytes()
    segments = [s for s in read_elf(elf).load_segments() if s.data]
    assert segments
    for seg in segments:
        assert uf2.read(seg.paddr, len(seg.data)) == seg.data, f"{seg.paddr:#x}"
    _check_boot_block(board, uf2)


# --- arduino -------------------------------------------------------------------------------------------------

ARDUINO_H = r"""
/* Stand-in for an Arduino core's Arduino.h: the calls the exported example makes. */
#ifndef STAND_IN_ARDUINO_H
#define STAND_IN_ARDUINO_H
#include <stdint.h>
#define F_CPU 64000000UL
unsigned long micros(void);
void delay(unsigned long ms);
class HardwareSerial {
public:
    void begin(unsigned long baud);
    void print(const char *s);
    void print(unsigned long v);
    void println(const char *s);
    void println(unsigned long v);
};
extern HardwareSerial Serial;
#endif
"""

ARDUINO_HOST_CORE = r"""
#include <chrono>
#include <cstdio>
#include "Arduino.h"
HardwareSerial Serial;
void HardwareSerial::begin(unsigned long) {}
void HardwareSerial::print(const char *s) { std::fputs(s, stdout); }
void HardwareSerial::print(unsigned long v) { std::printf("%lu", v); }
void HardwareSerial::println(const char *s) { std::puts(s); }
void HardwareSerial::println(unsigned long v) { std::printf("%lu\n", v); }
unsigned long micros(void)
{
    using namespace std::chrono;
    return (unsigned long)duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}
void delay(unsigned long) {}
void setup();
void loop();
int main() { setup(); loop(); return 0; }
"""


def _arduino_sketch_cpp(ino: Path, dest: Path) -> Path:
    """What the Arduino builder compiles: Arduino.h first, then the sketch (all functions defined before use)."""
    dest.write_text(f'#include <Arduino.h>\n#line 1 "{ino.name}"\n' + ino.read_text())
    return dest


def test_arduino_library_layout(cm, tmp_path: Path) -> None:
    p = cm.library.prefix
    export_target(cm, "arduino", tmp_path)
    props = dict(line.split("=", 1) for line in (tmp_path / "library.properties").read_text().splitlines() if line)
    for key in ("name", "version", "author", "maintainer", "sentence", "paragraph", "category", "url",
                "architectures"):
        assert props.get(key), key
    assert props["name"] == p and "mbed_nano" in props["architectures"].split(",")
    assert (tmp_path / "examples" / p / f"{p}.ino").is_file()
    assert (tmp_path / "src" / f"{p}_model.h").is_file() and (tmp_path / "src" / "mcu" / "status.h").is_file()
    # src/ is the library's only include folder: nothing in it may need another -I
    assert not (tmp_path / "src" / "include").exists()


@pytest.mark.skipif(shutil.which("arm-none-eabi-g++") is None, reason="needs arm-none-eabi-g++ (scripts/setup)")
def test_arduino_library_cross_compiles_like_an_arduino_core(cm, tmp_path: Path) -> None:
    """C files with gcc -std=gnu11 and the sketch with g++ -std=gnu++17, for a Cortex-M4F core (Nano 33 BLE)."""
    p = cm.library.prefix
    lib = tmp_path / p
    export_target(cm, "arduino", lib)
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "Arduino.h").write_text(ARDUINO_H)
    cpu = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-Os", *WARNINGS]
    example = lib / "examples" / p
    # the builder compiles the sketch folder's files beside the sketch, with the libraries' src/ folders
    includes = [f"-I{tmp_path / 'core'}", f"-I{lib / 'src'}", f"-I{example}"]
    c_files = sorted((lib / "src").rglob("*.c")) + sorted(example.glob("*.c"))
    assert len(c_files) > 5
    objs = tmp_path / "obj"
    objs.mkdir()
    for i, c in enumerate(c_files):
        run_checked(["arm-none-eabi-gcc", "-std=gnu11", *cpu, *includes, "-c", str(c), "-o", str(objs / f"{i}.o")])
    sketch = _arduino_sketch_cpp(example / f"{p}.ino", tmp_path / f"{p}.ino.cpp")
    run_checked(["arm-none-eabi-g++", "-std=gnu++17", "-fno-exceptions", "-fno-rtti", *cpu, *includes, "-c",
                 str(sketch),
                 "-o", str(objs / "sketch.o")])


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs the host g++")
def test_arduino_example_runs_on_host_stand_in_core(cm, tmp_path: Path) -> None:
    p = cm.library.prefix
    lib = tmp_path / p
    export_target(cm, "arduino", lib)
    core = tmp_path / "core"
    core.mkdir()
    (core / "Arduino.h").write_text(ARDUINO_H)
    (core / "core.cpp").write_text(ARDUINO_HOST_CORE)
    example = lib / "examples" / p
    includes = [f"-I{core}", f"-I{lib / 'src'}", f"-I{example}"]
    objs = []
    for i, c in enumerate(sorted((lib / "src").rglob("*.c")) + sorted(example.glob("*.c"))):
        objs.append(str(tmp_path / f"{i}.o"))
        run_checked(["gcc", "-std=gnu11", "-O2", *WARNINGS, *includes, "-c", str(c), "-o", objs[-1]])
    sketch = _arduino_sketch_cpp(example / f"{p}.ino", tmp_path / "sketch.cpp")
    app = tmp_path / "app"
    run_checked(["g++", "-std=gnu++17", "-O2", *WARNINGS, *includes, str(sketch), str(core / "core.cpp"), *objs, "-lm",
                 "-o", str(app)])
    output = run_checked([str(app)])
    expect_pass(output, len(cm.spec.test_inputs))
    assert "CYCLES " in output and "MICROS " in output


# --- zephyr --------------------------------------------------------------------------------------------------

ZEPHYR_CONFIG = r"""
# Stand-in for Zephyr's CMake package: Kconfig values from prj.conf, modules from ZEPHYR_EXTRA_MODULES (each
# zephyr/module.yml's build.cmake folder), zephyr_library*() as static libraries linked into `app`, on the host.
project(zephyr_stand_in C)
add_executable(app)
add_library(zephyr_interface INTERFACE)
target_include_directories(zephyr_interface INTERFACE ${CMAKE_CURRENT_LIST_DIR}/../../../include)
target_link_libraries(app PRIVATE zephyr_interface m)
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/prj.conf _conf)
foreach(_line IN LISTS _conf)
    if(_line MATCHES "^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
        set(${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
    endif()
endforeach()
function(zephyr_library_named name)
    add_library(${name} STATIC)
    target_link_libraries(${name} PUBLIC zephyr_interface)
    target_link_libraries(app PRIVATE ${name})
    set(ZEPHYR_CURRENT_LIBRARY ${name} PARENT_SCOPE)
endfunction()
function(zephyr_library_sources)
    target_sources(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_compile_definitions)
    target_compile_definitions(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_compile_options)
    target_compile_options(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_include_directories)
    target_include_directories(zephyr_interface INTERFACE ${ARGN})
endfunction()
foreach(_module IN LISTS ZEPHYR_EXTRA_MODULES)
    get_filename_component(_module ${_module} ABSOLUTE)
    file(STRINGS ${_module}/zephyr/module.yml _yml REGEX "^ +cmake: ")
    string(REGEX REPLACE "^ +cmake: +" "" _dir "${_yml}")
    get_filename_component(_name ${_module} NAME)
    add_subdirectory(${_module}/${_dir} ${CMAKE_BINARY_DIR}/modules/${_name})
endforeach()
set(Zephyr_FOUND TRUE)
"""

ZEPHYR_KERNEL_H = r"""
#ifndef STAND_IN_ZEPHYR_KERNEL_H
#define STAND_IN_ZEPHYR_KERNEL_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>
static inline uint32_t k_cycle_get_32(void) { return (uint32_t)clock(); }
struct k_thread { struct { size_t size; } stack_info; };
static inline struct k_thread *k_current_get(void) { static struct k_thread self; return &self; }
/* -ENOSYS: a host process has no painted stack to measure */
static inline int k_thread_stack_space_get(const struct k_thread *t, size_t *unused)
{
    (void)t;
    (void)unused;
    return -38;
}
#endif
"""

ZEPHYR_PRINTK_H = r"""
#ifndef STAND_IN_ZEPHYR_PRINTK_H
#define STAND_IN_ZEPHYR_PRINTK_H
#include <stdio.h>
#define printk printf
#endif
"""


def _zephyr_stand_in(root: Path) -> Path:
    base = root / "zephyr-stand-in"
    pkg = base / "share" / "zephyr-package" / "cmake"
    pkg.mkdir(parents=True)
    (pkg / "ZephyrConfig.cmake").write_text(ZEPHYR_CONFIG)
    (base / "include" / "zephyr" / "sys").mkdir(parents=True)
    (base / "include" / "zephyr" / "kernel.h").write_text(ZEPHYR_KERNEL_H)
    (base / "include" / "zephyr" / "sys" / "printk.h").write_text(ZEPHYR_PRINTK_H)
    return base


def test_zephyr_module_files(cm, tmp_path: Path) -> None:
    import yaml

    from mcu.emit.targets.zephyr import kconfig_symbol

    p = cm.library.prefix
    export_target(cm, "zephyr", tmp_path)
    module = yaml.safe_load((tmp_path / "zephyr" / "module.yml").read_text())
    assert module == {"build": {"cmake": ".", "kconfig": "Kconfig"}}  # Zephyr 2.4's schema has no name
    symbol = kconfig_symbol(p)
    assert f"config {symbol}\n\tbool " in (tmp_path / "Kconfig").read_text()
    assert f"CONFIG_{symbol}=y" in (tmp_path / "samples" / p / "prj.conf").read_text()
    cmake = (tmp_path / "CMakeLists.txt").read_text()
    assert f"if(CONFIG_{symbol})" in cmake and "zephyr_library_named" in cmake
    sample = yaml.safe_load((tmp_path / "samples" / p / "sample.yaml").read_text())
    assert sample["tests"][f"sample.mcu.{p}"]["harness_config"]["regex"] == ["RESULT PASS"]


@requires_cmake
def test_zephyr_sample_builds_and_passes_with_stand_in_zephyr(cm, tmp_path: Path) -> None:
    p = cm.library.prefix
    out = tmp_path / "out"
    export_target(cm, "zephyr", out)
    base = _zephyr_stand_in(tmp_path)
    cmake_build(out / "samples" / p, tmp_path / "build", env={"ZEPHYR_BASE": str(base)})
    output = run_checked([str(tmp_path / "build" / "app")])
    expect_pass(output, len(cm.spec.test_inputs))


# --- cmsis-pack ----------------------------------------------------------------------------------------------

def _pack(cm, out: Path) -> tuple[Path, Path]:
    export_target(cm, "cmsis-pack", out)
    (pdsc,) = out.glob("*.pdsc")
    (pack,) = out.glob("*.pack")
    return pdsc, pack


def test_cmsis_pack_archive_holds_the_pdsc_and_every_file_it_lists(cm, tmp_path: Path) -> None:
    pdsc, pack = _pack(cm, tmp_path)
    root = ET.parse(pdsc).getroot()
    vendor, name = root.findtext("vendor"), root.findtext("name")
    version = root.find("releases/release").get("version")
    assert pack.name == f"{vendor}.{name}.{version}.pack" and pdsc.name == f"{vendor}.{name}.pdsc"
    listed = [f.get("name") for f in root.iter("file")]
    assert f"{cm.library.prefix}_model.c" in listed
    with zipfile.ZipFile(pack) as z:
        members = set(z.namelist())
    assert pdsc.name in members
    for rel in listed:
        if rel.endswith("/"):
            assert any(m.startswith(rel) for m in members), rel
        else:
            assert rel in members, rel


def test_cmsis_pack_manager_accepts_the_pack_into_a_local_cache(cm, tmp_path: Path) -> None:
    cmsis_pack_manager = pytest.importorskip("cmsis_pack_manager", reason="pip install cmsis-pack-manager "
                                             "(scripts/setup installs it)")
    pdsc, pack = _pack(cm, tmp_path / "out")
    root = ET.parse(pdsc).getroot()
    # The cache layout CMSIS-Toolbox and pack managers use: <vendor>/<name>/<version>/ holding the unzipped pack.
    installed = tmp_path / "packs" / root.findtext("vendor") / root.findtext("name") / \
        root.find("releases/release").get("version")
    with zipfile.ZipFile(pack) as z:
        z.extractall(installed)
    cache = cmsis_pack_manager.Cache(True, True, json_path=str(tmp_path / "index"),
                                     data_path=str(tmp_path / "packs"))
    (tmp_path / "index").mkdir()
    assert cache.add_pack_from_path(str(installed / pdsc.name)) is not None


@pytest.mark.skipif(not os.environ.get("CMSIS_PACK_SCHEMA") or shutil.which("xmllint") is None,
                    reason="set CMSIS_PACK_SCHEMA to PACK.xsd from github.com/Open-CMSIS-Pack/Open-CMSIS-Pack-Spec "
                           "(schema/PACK.xsd) and install xmllint (libxml2-utils) to validate the .pdsc")
def test_pdsc_validates_against_open_cmsis_pack_schema(cm, tmp_path: Path) -> None:
    pdsc, _ = _pack(cm, tmp_path)
    run_checked(["xmllint", "--noout", "--schema", os.environ["CMSIS_PACK_SCHEMA"], str(pdsc)])


# --- CLI -----------------------------------------------------------------------------------------------------

def test_cli_export_target_writes_the_layout(tmp_path: Path) -> None:
    from repo import EXAMPLES
    from cli_runner import mcu_in_process

    proc = mcu_in_process("export", "--board", BOARD, "--target", "zephyr", str(EXAMPLES / "small_cnn.py"),
                          "-o", str(tmp_path / "z"))
    assert proc.returncode == 0, proc.stderr
    assert "zephyr" in proc.stdout
    assert (tmp_path / "z" / "zephyr" / "module.yml").is_file()
    assert (tmp_path / "z" / "samples" / "small_cnn" / "src" / "small_cnn_vectors.c").is_file()


def test_cli_target_with_program_format_is_one_line_error(tmp_path: Path) -> None:
    from repo import EXAMPLES
    from cli_runner import assert_one_line_error, mcu_in_process

    proc = mcu_in_process("export", "--format", "program", "--target", "arduino", str(EXAMPLES / "small_cnn.py"),
                          "-o", str(tmp_path / "m.mpk"))
    assert_one_line_error(proc, "--target arduino applies to the C library")


def test_cli_target_choices_are_the_registry() -> None:
    from mcu.commands.cli import build_parser

    export = build_parser()._subparsers._group_actions[0].choices["export"]
    (target,) = [a for a in export._actions if a.dest == "target"]
    assert tuple(target.choices) == tuple(TARGETS) and target.default == "cmake"
