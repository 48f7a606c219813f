"""Build generated C for the host as a shared library and call it through ctypes.

The host library is the exact C that goes to the device (model, weights,
kernels), compiled with the host compiler, so host runs predict device runs.
Libraries are cached by a hash of their sources and flags.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcu.device.objcache import Compile, compile_each
from mcu.emit.c_model import GeneratedLibrary
from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES
from mcu.paths import cache_dir, kernel_source, kernels_dir, runtime_dir

COMPILE_CFLAGS = ["-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror"]
HOST_CFLAGS = [*COMPILE_CFLAGS, "-shared"]


def find_host_cc() -> str:
    cc = os.environ.get("CC", "cc")
    path = shutil.which(cc)
    if path is None:
        raise McuError(f"host C compiler `{cc}` not found",
                       hint="install one: sudo apt-get install gcc (or set CC)")
    return path


def library_sources(lib: GeneratedLibrary) -> list[Path]:
    rt = runtime_dir()
    return [kernel_source(s) for s in lib.kernel_sources] + [rt / s for s in lib.runtime_sources]


def _digest(lib: GeneratedLibrary, extra: list[Path]) -> str:
    h = hashlib.sha256()
    h.update(" ".join(HOST_CFLAGS + lib.libraries + lib.define_flags()).encode())
    for name in sorted(lib.files):
        h.update(name.encode())
        h.update(lib.files[name].encode())
    for path in extra:
        h.update(str(path.name).encode())
        h.update(path.read_bytes())
    for header in sorted((runtime_dir() / "include").rglob("*.h")):
        h.update(header.read_bytes())
    for header in sorted(kernels_dir().rglob("*.h")):
        h.update(header.read_bytes())
    for d in lib.include_dirs:  # an external backend's headers (CMSIS-NN)
        for header in sorted(Path(d).rglob("*.h")):
            h.update(str(header).encode())
            h.update(header.read_bytes())
    return h.hexdigest()[:24]


def build_host_library(lib: GeneratedLibrary) -> Path:
    sources = library_sources(lib)
    digest = _digest(lib, sources)
    target = cache_dir() / "host" / f"{lib.prefix}-{digest}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    cc = find_host_cc()
    with tempfile.TemporaryDirectory(prefix="mcu-host-") as tmp:
        tmpdir = Path(tmp)
        for name, text in lib.files.items():
            (tmpdir / name).write_text(text)
        # Kernels and the runtime never see the generated folder: their objects are the same for every
        # model with these definitions, and come from the shared object cache (mcu/device/objcache.py).
        shared = [*COMPILE_CFLAGS, *lib.define_flags(), f"-I{runtime_dir() / 'include'}",
                  *(f"-I{d}" for d in lib.include_dirs)]
        units = [Compile(tmpdir / n, [*shared, f"-I{tmpdir}"], False) for n in lib.files if n.endswith(".c")]
        units += [Compile(src, shared, True) for src in sources]
        objects = compile_each(cc, units, tmpdir, _run_host_cc)
        out = tmpdir / "model.so"
        _run_host_cc([cc, "-shared", *map(str, objects), "-o", str(out), *lib.libraries, "-lm"], out)
        os.replace(out, target)  # atomic: parallel test workers may build the same library
    return target


def _run_host_cc(cmd: list[str], what: Path) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise McuError(f"host build of the generated C failed ({what.name}):\n{proc.stderr.strip()}")


@dataclass
class HostModel:
    """The generated model loaded in-process. Arrays are in memory layout and dtype."""

    lib: GeneratedLibrary
    path: Path

    def __post_init__(self) -> None:
        self._dll = ctypes.CDLL(str(self.path))
        self._fn = getattr(self._dll, f"{self.lib.prefix}_run")
        self._fn.restype = ctypes.c_int

    def run_physical(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        view = self.lib.view
        if len(inputs) != len(view.inputs):
            raise McuError(f"model takes {len(view.inputs)} inputs, got {len(inputs)}")
        args = []
        keep = []
        for io, x in zip(view.inputs, inputs):
            arr = np.ascontiguousarray(x, dtype=NUMPY_DTYPES[io.dtype]).reshape(-1)
            if arr.size != io.numel:
                raise McuError(f"input {io.index} has {arr.size} elements, the model expects {io.numel}")
            keep.append(arr)
            args.append(arr.ctypes.data_as(ctypes.c_void_p))
        outs = [np.zeros(io.numel, dtype=NUMPY_DTYPES[io.dtype]) for io in view.outputs]
        args += [o.ctypes.data_as(ctypes.c_void_p) for o in outs]
        status = self._fn(*args)
        if status != 0:
            # lazy: the C extension loads only when a program runs on the host
            from mcu._native import status_str  # the same names the firmware prints

            raise McuError(f"generated model returned status {status} ({status_str(status)})")
        return outs
