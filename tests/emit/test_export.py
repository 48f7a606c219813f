"""`mcu export` output builds warning-free inside a throwaway foreign project and computes what eager does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mcu.commands.export import export_library
from mcu.layouts import from_memory_order, to_memory_order

MAIN_C = r"""
#include <stdio.h>
#include "{p}_model.h"

int main(int argc, char **argv)
{{
    static float input[{P}_INPUT0_SIZE];
    static float output[{P}_OUTPUT0_SIZE];
    FILE *f = fopen(argv[1], "rb");
    if (argc < 3 || f == NULL || fread(input, sizeof(float), {P}_INPUT0_SIZE, f) != {P}_INPUT0_SIZE) {{
        return 2;
    }}
    fclose(f);
    mcu_status status = {p}_run(input, output);
    if (status != MCU_OK) {{
        fprintf(stderr, "%s\n", mcu_status_str(status));
        return 3;
    }}
    f = fopen(argv[2], "wb");
    fwrite(output, sizeof(float), {P}_OUTPUT0_SIZE, f);
    fclose(f);
    return 0;
}}
"""

MAKEFILE = """
CFLAGS := -O2 -Wall -Wextra -Werror -Wshadow
include lib/{p}.mk
CFLAGS += $({P}_CFLAGS)
app: main.c $({P}_SRCS)
\t$(CC) $(CFLAGS) -o $@ $^ -lm
"""

CMAKELISTS = """
cmake_minimum_required(VERSION 3.13)
project(foreign C)
set(CMAKE_C_FLAGS "${{CMAKE_C_FLAGS}} -Wall -Wextra -Werror")
add_subdirectory(lib)
add_executable(app main.c)
target_link_libraries(app PRIVATE {p})
"""


def _project(tmp_path: Path, cm) -> tuple[Path, str]:
    p = cm.library.prefix
    export_library(cm.library, tmp_path / "lib")
    (tmp_path / "main.c").write_text(MAIN_C.format(p=p, P=p.upper()))
    return tmp_path, p


def _check_app(app: Path, cm, tmp_path: Path) -> None:
    x = cm.spec.test_inputs[0]
    (tmp_path / "in.bin").write_bytes(to_memory_order(x[0].numpy(), cm.graph.inputs[0]).astype(np.float32).tobytes())
    subprocess.run([str(app), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True, timeout=60)
    got = from_memory_order(np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32), cm.graph.outputs[0])
    want = cm.eager(*x)[0].numpy()
    assert float(np.max(np.abs(got - want))) <= 1e-4 * float(np.max(np.abs(want)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small_cnn", "resnet8"])
def test_export_builds_with_make_fragment(compiled, tmp_path: Path, name: str) -> None:
    cm = compiled(name)
    root, p = _project(tmp_path, cm)
    (root / "Makefile").write_text(MAKEFILE.format(p=p, P=p.upper()))
    proc = subprocess.run(["make", "-s", "app"], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    _check_app(root / "app", cm, tmp_path)
    # only the kernels this model uses are shipped
    shipped = sorted(f.name for f in (root / "lib" / "kernels").rglob("*.c"))
    assert shipped == sorted(cm.library.kernel_sources)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_export_builds_with_cmake(compiled, tmp_path: Path) -> None:
    cm = compiled("small_cnn")
    root, p = _project(tmp_path, cm)
    (root / "CMakeLists.txt").write_text(CMAKELISTS.format(p=p))
    build = root / "build"
    for cmd in (["cmake", "-S", str(root), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", str(build)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_app(build / "app", cm, tmp_path)


def test_export_cli_writes_header_and_fragments(tmp_path: Path) -> None:
    from cli_runner import mcu_in_process
    from repo import EXAMPLES

    proc = mcu_in_process("export", "--board", "mps2-an505", str(EXAMPLES / "small_cnn.py"),
                          "-o", str(tmp_path / "lib"))
    assert proc.returncode == 0, proc.stderr
    header = (tmp_path / "lib" / "small_cnn_model.h").read_text()
    assert "#define SMALL_CNN_ARENA_SIZE" in header and "small_cnn_run(" in header
    assert (tmp_path / "lib" / "small_cnn.mk").is_file() and (tmp_path / "lib" / "CMakeLists.txt").is_file()
