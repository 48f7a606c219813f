"""The generated C of a model with custom ops, run on the host in a child process instead of in mcu.

The user's kernels are C that mcu did not write: a host run (``CompiledModel.run_raw_c``, and so
``run``/``run_raw`` for such a model) builds the generated library, the kernels and a small main into one
executable with ASan and UBSan (where the host compiler has them) and the arena guards of the test
firmware (``MCU_GUARD_WRITES``, codegen/model.c.j2), and runs it once per call. A stray write is named
like on the board (mcu/device/guards.py); a sanitizer report or a crash is one error naming the model and the
kernel's source line. mcu itself never runs the user's C.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from mcu.device.custom_check import CHILD_ENV, SANITIZE, TIMEOUT_S
from mcu.emit.c_model import GUARD_DEFINE, GeneratedLibrary
from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES
from mcu.paths import cache_dir, runtime_dir
import sys
from mcu.device.hostbuild import find_host_cc, library_sources
from mcu.device.guards import raise_on_guard

CFLAGS = ["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", f"-D{GUARD_DEFINE}"]
HOST_RUNTIME = ["src/mcu_log.c", "src/mcu_platform_default.c"]


def _main(lib: GeneratedLibrary) -> str:
    view = lib.view
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "", f'#include "{view.prefix}_model.h"',
             '#include "mcu/platform.h"', "",
             "void mcu_platform_write(const char *s, size_t n)", "{", "    fwrite(s, 1, n, stdout);", "}", "",
             "int main(int argc, char **argv)", "{",
             "    FILE *in = argc == 3 ? fopen(argv[1], \"rb\") : NULL;",
             "    FILE *out = argc == 3 ? fopen(argv[2], \"wb\") : NULL;",
             "    if (in == NULL || out == NULL) {", "        return 4;", "    }"]
    for io in view.inputs:
        lines += [f"    static {io.c_type} input{io.index}[{io.numel}];",
                  f"    if (fread(input{io.index}, 1, sizeof(input{io.index}), in) != sizeof(input{io.index})) {{",
                  "        return 4;", "    }"]
    for io in view.outputs:
        lines.append(f"    static {io.c_type} output{io.index}[{io.numel}];")
    args = [f"input{io.index}" for io in view.inputs] + [f"output{io.index}" for io in view.outputs]
    lines += [f"    const mcu_status status = {view.prefix}_run({', '.join(args)});",
              "    fflush(stdout);",
              "    if (fwrite(&status, sizeof(status), 1, out) != 1) {", "        return 4;", "    }"]
    for io in view.outputs:
        lines += [f"    if (fwrite(output{io.index}, 1, sizeof(output{io.index}), out) != sizeof(output{io.index})) {{",
                  "        return 4;", "    }"]
    lines += ["    fclose(in);", "    return fclose(out) == 0 ? 0 : 4;", "}", ""]
    return "\n".join(lines)


def build_child(lib: GeneratedLibrary) -> Path:
    """The sanitized executable of ``lib`` (cached by content; unsanitized where the compiler has no ASan)."""
    main = _main(lib)
    sources = library_sources(lib) + [runtime_dir() / s for s in HOST_RUNTIME]
    h = hashlib.sha256(" ".join([*CFLAGS, *SANITIZE, *lib.libraries, *lib.define_flags()]).encode()
                       + main.encode())
    for name in sorted(lib.files):
        h.update(name.encode() + lib.files[name].encode())
    for path in sources:
        h.update(str(path).encode() + path.read_bytes())
    for header in sorted((runtime_dir() / "include").rglob("*.h")):
        h.update(header.read_bytes())
    folder = cache_dir() / "host-child"
    target = folder / f"{lib.prefix}-{h.hexdigest()[:24]}"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    errors = ""
    with tempfile.TemporaryDirectory(prefix="mcu-child-") as tmp:
        tmpdir = Path(tmp)
        for name, text in {**lib.files, "child_main.c": main}.items():
            (tmpdir / name).write_text(text)
        c_files = [tmpdir / n for n in (*lib.files, "child_main.c") if n.endswith(".c")] + sources
        for flags in (SANITIZE, ["-g"]):  # the plain build only where the sanitizers do not link
            out = tmpdir / "child"
            proc = subprocess.run([find_host_cc(), *flags, *CFLAGS, *lib.define_flags(), f"-I{tmpdir}",
                                   f"-I{runtime_dir() / 'include'}", *(f"-I{d}" for d in lib.include_dirs),
                                   *map(str, c_files), "-o", str(out), *lib.libraries, "-lm"],
                                  capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
            if proc.returncode == 0:
                os.replace(out, target)
                return target
            errors = proc.stderr
    raise McuError(f"host build of the generated C with its custom kernels failed:\n{errors.strip()[-2000:]}")


def run_child(cm: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """``cm``'s generated C on ``inputs`` (memory order, device dtypes) in the sanitized child; its outputs."""

    view = cm.library.view
    if len(inputs) != len(view.inputs):
        raise McuError(f"model takes {len(view.inputs)} inputs, got {len(inputs)}")
    blob = b""
    for io, x in zip(view.inputs, inputs):
        arr = np.ascontiguousarray(x, dtype=NUMPY_DTYPES[io.dtype]).reshape(-1)
        if arr.size != io.numel:
            raise McuError(f"input {io.index} has {arr.size} elements, the model expects {io.numel}")
        blob += arr.tobytes()
    exe = build_child(cm.library)
    with tempfile.TemporaryDirectory(prefix="mcu-child-") as tmp:
        request, result = Path(tmp) / "inputs.bin", Path(tmp) / "outputs.bin"
        request.write_bytes(blob)
        try:
            proc = subprocess.run([str(exe), str(request), str(result)], capture_output=True, text=True,
                                  errors="replace", timeout=TIMEOUT_S, env={**os.environ, **CHILD_ENV})
        except subprocess.TimeoutExpired:
            raise McuError(f"{cm.spec.name}'s generated C with its custom kernels did not finish within "
                           f"{TIMEOUT_S:.0f} s on the host", hint="look for a kernel loop that does not end") from None
        raise_on_guard(cm, proc.stdout, "the host")
        if proc.returncode != 0:
            raise _crash(cm, proc.stderr, proc.returncode)
        data = result.read_bytes()
    status = int(np.frombuffer(data[:4], np.int32)[0])
    if status != 0:
        # lazy: the C extension loads only when a program runs on the host
        from mcu._native import status_str  # the same names the firmware prints

        raise McuError(f"generated model returned status {status} ({status_str(status)})")
    outs, pos = [], 4
    for io in view.outputs:
        outs.append(np.frombuffer(data, NUMPY_DTYPES[io.dtype], io.numel, pos).copy())
        pos += outs[-1].nbytes
    return outs


def _crash(cm: Any, stderr: str, rc: int) -> McuError:
    what = re.search(r"(?:AddressSanitizer|runtime error): (.*)$", stderr, re.M)
    frame = re.search(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)", stderr, re.M)
    ub = re.search(r"^(\S+?):(\d+):\d+: runtime error", stderr, re.M)
    where = (f" in {frame.group(1)} at {Path(frame.group(2)).name}:{frame.group(3)}" if frame else
             f" at {Path(ub.group(1)).name}:{ub.group(2)}" if ub else "")
    cause = what.group(1).strip() if what else (f"signal {-rc}" if rc < 0 else f"exit status {rc}")
    return McuError(f"{cm.spec.name}'s generated C with its custom kernels failed on the host{where}: {cause}",
                    hint="it ran in a child process under AddressSanitizer and UBSan; fix the kernel")


_VERIFY = """
import sys
from mcu.errors import McuError
from mcu.program.host import verify_program_files
try:
    print(verify_program_files(sys.argv[1], sys.argv[2] or None, custom=sys.argv[3]))
except McuError as e:
    print(str(e), file=sys.stderr)
    sys.exit(2)
"""


def verify_program_in_child(program: Path, weights: Path | None, model_file: Path) -> str:
    """:func:`mcu.program.host.verify_program_files` of a program with custom ops, in a child process (the user's
    kernels registered from ``model_file``): its summary, or its error as an :class:`McuError`."""
    args = [str(program), str(weights) if weights is not None else "", str(model_file)]
    proc = subprocess.run([sys.executable, "-c", _VERIFY, *args], capture_output=True, text=True, errors="replace",
                          env={**os.environ, **CHILD_ENV})
    if proc.returncode == 0:
        return proc.stdout.strip().splitlines()[-1]
    last = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
    if proc.returncode == 2:
        raise McuError(last[0])
    raise McuError(f"verifying {program} with its custom kernels failed in a child process "
                   f"({'signal ' + str(-proc.returncode) if proc.returncode < 0 else 'exit ' + str(proc.returncode)}): "
                   f"{last[0]}", hint="a custom kernel may write outside its buffers for these inputs")
