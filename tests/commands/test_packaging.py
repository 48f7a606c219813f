"""`pip install .` (a wheel) carries the host runtime and every data folder the generator reads."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from repo import ROOT


def test_wheel_contains_native_module_and_data(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel = next(tmp_path.glob("mcu-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert any(n.startswith("mcu/_native") and n.endswith(".so") for n in names)
    for needed in ("mcu/_data/codegen/model.c.j2", "mcu/_data/boards/mps2-an505.toml",
                   "mcu/_data/ports/cortex-m/linker.ld.j2", "mcu/_data/runtime_c/include/mcu/kernels_s8.h",
                   "mcu/_data/runtime_c/kernels/convolution/mcu_conv2d_s8.c", "mcu/commands/cli.py", "mcu/pipeline.py"):
        assert needed in names, needed
