"""Host shared libraries of all kernels and the runtime built with another set of kernel paths than the
extension's (``-DMCU_S8_DSP_EMULATE``: the DSP paths with portable emulations of their instructions;
others for the plain loops of small cores), cached by the sources' content, and ways to point cbind_s8
at one of them."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import cbind_s8 as cb
from mcu.device.objcache import Compile, compile_each
from mcu.paths import all_kernel_sources, cache_dir, kernels_dir
from repo import ROOT

RT = ROOT / "runtime_c"


def build_host_variant(define: str, name: str) -> Path:
    """All kernels and the runtime as one host shared library built with ``-D<define>`` (another set of
    kernel paths than the extension's), cached by the sources' content."""
    sources = all_kernel_sources() + sorted((RT / "src").glob("*.c"))
    headers = sorted(kernels_dir().glob("*/*.h")) + sorted((RT / "include" / "mcu").glob("*.h"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources + headers)).hexdigest()[:16]
    out = cache_dir() / name / f"libmcu_{name}_{digest}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        flags = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", f"-D{define}", f"-I{RT / 'include'}"]
        with tempfile.TemporaryDirectory(prefix=f"mcu-{name}-") as tmp:
            objects = compile_each("cc", [Compile(src, flags, True) for src in sources], Path(tmp), _run)
            tmp_out = out.with_suffix(f".{os.getpid()}.tmp.so")
            _run(["cc", "-shared", *map(str, objects), "-o", str(tmp_out), "-lm"], tmp_out)
        tmp_out.replace(out)
    return out


def _run(cmd: list[str], what: Path) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def build_interpreter_app(main_c: str, out: Path) -> Path:
    """``main_c`` linked with the program interpreter, every kernel and the runtime's status and delegate
    registry, as a host executable at ``out``. The library's objects come from the shared object cache: compiled
    once for every test that links one (a compiler call of all the sources took ten seconds a test)."""
    from mcu.device.hostbuild import find_host_cc

    cc = find_host_cc()
    flags = ["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{RT / 'include'}"]
    sources = [*sorted((RT / "interp").glob("*.c")), *all_kernel_sources(), RT / "src" / "mcu_status.c",
               RT / "src" / "mcu_delegate.c"]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mcu-app-") as tmp:
        main = Path(tmp) / "main.c"
        main.write_text(main_c)
        objects = compile_each(cc, [Compile(main, flags, False), *(Compile(s, flags, True) for s in sources)],
                               Path(tmp), _run)
        _run([cc, *map(str, objects), "-lm", "-o", str(out)], out)
    return out


def build_emulated_lib() -> Path:
    """The host library with the DSP paths emulated."""
    return build_host_variant("MCU_S8_DSP_EMULATE", "dsp_emulated")


def load_bound(path: Path) -> ctypes.CDLL:
    """A host kernel library with cbind_s8's signatures on its functions."""
    handle = ctypes.CDLL(str(path))
    for name, (argtypes, restype) in cb._SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return handle


def route_cbind(handle: ctypes.CDLL):
    """Route cbind_s8.lib() (what cb.conv2d_packed and the other wrappers call) to `handle` until the
    generator is closed: a body for module fixtures that yield it."""
    original = cb.lib
    cb.lib = lambda: handle
    try:
        yield handle
    finally:
        cb.lib = original
