"""`mcu export` where it meets the stack analysis, the kernel specialisation and the include graph.

* The exported header carries ``<PREFIX>_STACK_BYTES``, the analysed worst case of ``<prefix>_run`` on the
  board's core, and it is the same figure the firmware's own bound gives below ``<prefix>_run``.
* The Zephyr sample's CONFIG_MAIN_STACK_SIZE and the Pico SDK example's PICO_STACK_SIZE are derived from it.
* Every target passes the model's kernel specialisation (mcu/backends/optimized/specialise.py) to its build, and a
  target without per-library flags (Arduino) compiles the same specialised kernel as mcu's own build.
* The folder ships exactly the headers its sources include, and builds with only those.
* On a real Zephyr tree (ZEPHYR_BASE, ZEPHYR_MODULES) the sample runs in QEMU and passes within its stack.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from export_builds import header_macro
from mcu.commands.export import export_target, model_stack
from mcu.emit.targets.common import EXAMPLE_OWN_BYTES

requires_cross = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                                    reason="needs arm-none-eabi-gcc (run scripts/setup)")


@pytest.fixture(scope="module")
def ds(compiled):
    """DS-CNN at int8 on the M33: packed layers, so its kernels are specialised; the issue's 5,288 B stack."""
    return compiled("ds_cnn", quantize="int8")


@pytest.fixture(scope="module")
def exports(ds, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exports")
    for target in ("cmake", "pico-sdk", "arduino", "zephyr", "cmsis-pack"):
        export_target(ds, target, root / target)
    return {t: root / t for t in ("cmake", "pico-sdk", "arduino", "zephyr", "cmsis-pack")}


def _define(text: str, name: str) -> int:
    m = re.search(rf"\b{name}=(\d+)", text)
    assert m, f"{name} not in\n{text}"
    return int(m.group(1))


# --- the stack figure ----------------------------------------------------------------------------------------

@requires_cross
def test_header_stack_macro_is_the_run_functions_bound_in_the_firmware(ds, exports) -> None:
    p, P = ds.library.prefix, ds.library.prefix.upper()
    stack = header_macro(exports["cmake"] / f"{p}_model.h", f"{P}_STACK_BYTES")
    # The firmware's own bound (from Reset_Handler, what its linker script reserves) runs through the
    # model's run function: below it, its frames add up to the header's figure.
    fw = ds.build()
    names = [f for f, _ in fw.stack.path]
    assert f"{p}_run" in names, fw.stack.chain()
    below = sum(b for _f, b in fw.stack.path[names.index(f"{p}_run"):])
    assert stack == below == model_stack(ds).bytes
    assert 0 < stack <= fw.stack.worst_case_bytes
    # every target ships the same header
    for target, folder in exports.items():
        (header,) = folder.rglob(f"{p}_model.h")
        assert header_macro(header, f"{P}_STACK_BYTES") == stack, target


def test_board_without_a_bare_metal_build_says_why_there_is_no_stack_figure(compiled, tmp_path: Path) -> None:
    cm = compiled("small_cnn", "host", "int8")
    export_target(cm, "cmake", tmp_path)
    text = (tmp_path / f"{cm.library.prefix}_model.h").read_text()
    assert f"#define {cm.library.prefix.upper()}_STACK_BYTES" not in text
    assert "not a bare-metal board" in text


@requires_cross
def test_zephyr_and_pico_stacks_are_derived_from_the_analysis(ds, exports) -> None:
    p, P = ds.library.prefix, ds.library.prefix.upper()
    stack = header_macro(exports["cmake"] / f"{p}_model.h", f"{P}_STACK_BYTES")
    want = (stack + EXAMPLE_OWN_BYTES + 255) // 256 * 256
    conf = (exports["zephyr"] / "samples" / p / "prj.conf").read_text()
    main_stack = _define(conf, "CONFIG_MAIN_STACK_SIZE")
    assert main_stack == want and main_stack > stack and main_stack > 4096  # 4096 overflowed for DS-CNN
    assert "CONFIG_INIT_STACKS=y" in conf
    # More than the SDK's core-0 stack (its 4 KB SCRATCH_Y bank): the example runs the model on core 1
    pico = exports["pico-sdk"] / "example"
    assert f"#define EXAMPLE_MODEL_STACK_BYTES {want}u" in (pico / "main.c").read_text()
    cmake = (pico / "CMakeLists.txt").read_text()
    assert "pico_multicore" in cmake and "PICO_STACK_SIZE" not in cmake


@requires_cross
def test_pico_stack_fits_core0_for_a_small_model(compiled, tmp_path: Path) -> None:
    cm = compiled("small_cnn", "mps2-an385", "int8")
    export_target(cm, "pico-sdk", tmp_path)
    stack = header_macro(tmp_path / f"{cm.library.prefix}_model.h", f"{cm.library.prefix.upper()}_STACK_BYTES")
    cmake = (tmp_path / "example" / "CMakeLists.txt").read_text()
    assert f"PICO_STACK_SIZE={(stack + EXAMPLE_OWN_BYTES + 255) // 256 * 256})" in cmake
    assert "pico_multicore" not in cmake


@requires_cross
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed (scripts/setup)")
def test_pico_example_running_the_model_on_core1_passes_with_stand_in_sdk(ds, exports, tmp_path: Path) -> None:
    from export_builds import cmake_build, expect_pass, pico_stand_in, run_checked

    sdk = pico_stand_in(tmp_path)
    cmake_build(exports["pico-sdk"] / "example", tmp_path / "build", f"-DPICO_SDK_PATH={sdk}")
    output = run_checked([str(tmp_path / "build" / f"{ds.library.prefix}_example")])
    expect_pass(output, len(ds.spec.test_inputs))


# --- the kernel specialisation -------------------------------------------------------------------------------

def test_every_target_passes_the_specialisation_definitions(ds, exports) -> None:
    p, P = ds.library.prefix, ds.library.prefix.upper()
    defines = ds.library.defines
    assert defines, "DS-CNN on the M33 has packed layers: its kernel is specialised"
    built = {
        "cmake": [exports["cmake"] / "CMakeLists.txt", exports["cmake"] / f"{p}.mk"],
        "pico-sdk": [exports["pico-sdk"] / "CMakeLists.txt"],
        "zephyr": [exports["zephyr"] / "CMakeLists.txt"],
        "arduino": sorted((exports["arduino"] / "src").rglob("*.c")),
        "cmsis-pack": sorted(exports["cmsis-pack"].rglob("*.c")),
    }
    for target, files in built.items():
        assert files, target
        for f in files:
            text = f.read_text()
            for k, v in defines.items():
                assert re.search(rf"({k}={v}\b|^#define {k} {v}$)", text, re.MULTILINE), f"{target}: {k} in {f}"
    assert "zephyr_library_compile_definitions(" in built["zephyr"][0].read_text()
    assert f"{P}_CFLAGS +=" in built["cmake"][1].read_text()


@requires_cross
def test_arduino_kernel_compiles_to_the_specialised_kernel(ds, exports, tmp_path: Path) -> None:
    """Arduino takes no per-library flags: its copy of the packed kernel, compiled with none, is the same
    machine code as the kernel compiled with mcu's definitions (and not the full kernel)."""
    from mcu.paths import kernel_source, kernels_dir
    from mcu.device.toolchain import compile_flags, find_cross_compiler

    gcc = str(find_cross_compiler())
    src = exports["arduino"] / "src"
    kernel = "mcu_conv2d_packed_s8.c"

    def text_bytes(source: Path, flags: list[str], name: str) -> int:
        obj = tmp_path / f"{name}.o"
        subprocess.run([gcc, *flags, "-c", str(source), "-o", str(obj)], check=True, capture_output=True)
        out = subprocess.run([gcc.replace("gcc", "size"), "-A", str(obj)], check=True, capture_output=True,
                             text=True).stdout
        return sum(int(line.split()[1]) for line in out.splitlines() if line.startswith(".text"))

    exported = text_bytes(src / "kernels" / kernel_source(kernel).relative_to(kernels_dir()), compile_flags(ds.board, [src]), "arduino")
    own = text_bytes(kernel_source(kernel), compile_flags(ds.board, defines=ds.library.defines), "own")
    full = text_bytes(kernel_source(kernel), compile_flags(ds.board), "full")
    assert exported == own < full


# --- the shipped headers -------------------------------------------------------------------------------------

# Preprocessor views of the sources: the host, a DSP core and an MVE core (kernels include their DSP and
# MVE helpers under #if), so that a header one core's build reads counts as used.
CORES = [["gcc"], ["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
         ["arm-none-eabi-gcc", "-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"]]


def _used_headers(root: Path, include_dirs: list[Path], sources: list[Path]) -> set[Path]:
    """Every header under ``root`` a compiler reads for ``sources`` on some core (gcc -MM: it also fails
    on a header that is not there)."""
    used: set[Path] = set()
    for cc in CORES:
        for src in sources:
            flags = [f"-I{d}" for d in [src.parent, *include_dirs]]
            out = subprocess.run([*cc, "-std=c11", "-MM", *flags, str(src)], check=True, capture_output=True,
                                 text=True).stdout
            for dep in out.replace("\\\n", " ").split(":", 1)[1].split():
                path = Path(dep).resolve()
                if path.suffix == ".h" and root.resolve() in path.parents:
                    used.add(path)
    return used


@requires_cross
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs the host gcc (scripts/setup)")
@pytest.mark.parametrize("target", ["cmake", "arduino", "zephyr"])
def test_shipped_headers_are_the_include_closure(exports, target: str) -> None:
    root = exports[target]
    base = root / "src" if target == "arduino" else root
    include_dirs = [base] if target == "arduino" else [base, base / "include"]
    shipped = {h.resolve() for h in root.rglob("*.h")}
    used = _used_headers(root, include_dirs, sorted(root.rglob("*.c")))
    assert shipped == used, {"unused": sorted(map(str, shipped - used)), "missing": sorted(map(str, used - shipped))}
    assert len(shipped) < 40  # the whole runtime has over 50


@requires_cross
def test_exported_library_cross_compiles_with_only_its_headers(ds, exports, tmp_path: Path) -> None:
    from mcu.device.toolchain import find_cross_compiler

    root = exports["cmake"]
    gcc = str(find_cross_compiler())
    flags = [*ds.board.cpu_flags, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{root}",
             f"-I{root / 'include'}", *(f"-D{k}={v}" for k, v in ds.library.defines.items())]
    for i, src in enumerate(sorted(root.rglob("*.c"))):
        subprocess.run([gcc, *flags, "-c", str(src), "-o", str(tmp_path / f"{i}.o")], check=True)


# Zephyr's default C library (the minimal libc) ships a <math.h> that declares nothing
MINIMAL_MATH_H = "/* a C library without the math functions, as Zephyr's minimal libc */\n"


@requires_cross
@pytest.mark.parametrize("board, quantize", [("mps2-an385", "int8"), ("mps2-an385", "w4a8"), ("mps2-an505", "none")])
def test_zephyr_module_asks_for_a_full_libc_exactly_when_its_sources_need_math(compiled, board: str, quantize: str,
                                                                               tmp_path: Path) -> None:
    from mcu.device.toolchain import find_cross_compiler

    cm = compiled("small_cnn", board, quantize)
    out = tmp_path / "out"
    export_target(cm, "zephyr", out)
    selects = "select REQUIRES_FULL_LIBC" in (out / "Kconfig").read_text()
    libc = tmp_path / "minimal"
    libc.mkdir()
    (libc / "math.h").write_text(MINIMAL_MATH_H)
    # -I comes before the C library's own headers for <math.h>
    flags = [*cm.board.cpu_flags, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{libc}", f"-I{out}",
             f"-I{out / 'include'}", *(f"-D{k}={v}" for k, v in cm.library.defines.items())]
    gcc = str(find_cross_compiler())
    sources = [s for s in sorted(out.rglob("*.c")) if s.name != "main.c"]  # main.c needs Zephyr's headers
    failed = [s.name for i, s in enumerate(sources)
              if subprocess.run([gcc, *flags, f"-I{s.parent}", "-c", str(s), "-o", str(tmp_path / f"{i}.o")],
                                capture_output=True).returncode != 0]
    assert selects == bool(failed), failed
    assert f"{cm.library.prefix}_vectors.c" not in failed  # the sample itself needs no math library
    assert selects == (quantize == "none")


# --- Zephyr on a real tree -----------------------------------------------------------------------------------

ZEPHYR_SKIP = ("set ZEPHYR_BASE to a Zephyr tree (tested: 2.4.99, github.com/mkschreder/zephyr) and ZEPHYR_MODULES "
               "to its CMSIS module (github.com/zephyrproject-rtos/cmsis at the tree's west.yml revision), with "
               "cmake, ninja, dtc and qemu-system-arm, to build and run the sample on qemu_cortex_m3 and mps2_an521")


def _put_back_dev_null() -> None:
    """Zephyr 2.4's Kconfig step writes its configuration to os.devnull with kconfiglib's save-old rename: run as
    root that moves the device to /dev/null.old and leaves a regular file in its place, which breaks every later
    redirection on the machine (apt among them). Put the device back when that happened."""
    import stat

    dev, old = Path("/dev/null"), Path("/dev/null.old")
    if old.exists() and stat.S_ISCHR(old.stat().st_mode) and not stat.S_ISCHR(dev.stat().st_mode):
        os.replace(old, dev)


ZEPHYR_QEMU_MACHINES = {"qemu_cortex_m3": ["-cpu", "cortex-m3", "-machine", "lm3s6965evb"],
                        "mps2_an521": ["-machine", "mps2-an521"]}


@requires_cross
@pytest.mark.skipif(not (os.environ.get("ZEPHYR_BASE") and os.environ.get("ZEPHYR_MODULES")), reason=ZEPHYR_SKIP)
@pytest.mark.skipif(any(shutil.which(t) is None for t in ("cmake", "ninja", "dtc", "qemu-system-arm")),
                    reason=ZEPHYR_SKIP)
@pytest.mark.parametrize("zephyr_board,model,board,quantize", [
    ("qemu_cortex_m3", "small_cnn", "mps2-an385", "int8"),
    # DS-CNN's specialised packed kernel on the M33 (Zephyr 2.4 builds mps2_an521 without the DSP extension)
    ("mps2_an521", "ds_cnn", "mps2-an505", "int8"),
    # fp32's arena does not fit the LM3S6965's 64 KB of SRAM beside the kernel's
    ("mps2_an521", "small_cnn", "mps2-an505", "none"),
    ("qemu_cortex_m3", "small_cnn", "mps2-an385", "w8a16"),
    ("qemu_cortex_m3", "small_cnn", "mps2-an385", "w4a8"),
])
def test_zephyr_sample_runs_on_a_real_tree_in_qemu(compiled, tmp_path: Path, zephyr_board: str, model: str,
                                                   board: str, quantize: str) -> None:
    import sys

    machine = ZEPHYR_QEMU_MACHINES[zephyr_board]
    cm = compiled(model, board, quantize)  # the core of the Zephyr board
    p = cm.library.prefix
    out = tmp_path / "out"
    export_target(cm, "zephyr", out)
    env = {**os.environ, "ZEPHYR_TOOLCHAIN_VARIANT": os.environ.get("ZEPHYR_TOOLCHAIN_VARIANT", "gnuarmemb"),
           "GNUARMEMB_TOOLCHAIN_PATH": os.environ.get("GNUARMEMB_TOOLCHAIN_PATH", "/usr"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    build = tmp_path / "build"
    for cmd in (["cmake", "-G", "Ninja", "-S", str(out / "samples" / p), "-B", str(build), f"-DBOARD={zephyr_board}",
                 f"-DZEPHYR_MODULES={os.environ['ZEPHYR_MODULES']}", f"-DPython3_EXECUTABLE={sys.executable}"],
                ["ninja", "-C", str(build)]):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        finally:
            _put_back_dev_null()
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    elf = build / "zephyr" / "zephyr.elf"
    for k, v in cm.library.defines.items():
        assert f"{k}={v}" in (build / "build.ninja").read_text(), k
    qemu = subprocess.Popen(["qemu-system-arm", *machine, "-nographic",
                             "-vga", "none", "-net", "none", "-serial", "stdio", "-monitor", "none", "-kernel",
                             str(elf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    watchdog = threading.Timer(120, qemu.kill)
    watchdog.start()
    try:
        assert qemu.stdout is not None
        for line in qemu.stdout:  # the sample prints STACK last, then main returns and the idle thread runs
            lines.append(line)
            if line.startswith("STACK ") or len(lines) > 50:
                break
    finally:
        watchdog.cancel()
        qemu.kill()
        qemu.wait()
    text = "".join(lines)
    assert f"RESULT PASS 0/{len(cm.spec.test_inputs)}" in text, text
    m = re.search(r"^STACK (\d+) of (\d+) B$", text, re.MULTILINE)
    assert m, text
    used, size = int(m.group(1)), int(m.group(2))
    conf = (out / "samples" / p / "prj.conf").read_text()
    assert size >= _define(conf, "CONFIG_MAIN_STACK_SIZE") > used
    model = header_macro(out / f"{p}_model.h", f"{p.upper()}_STACK_BYTES")
    # The sample's own use on top of the model's bound is within the allowance the export adds.
    assert used - model < EXAMPLE_OWN_BYTES
