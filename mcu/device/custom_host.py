"""The user's custom kernels built for the host, for program files run by the C interpreter in this
process (after mcu/device/custom_check.py has run each of the model's calls in a sanitized child process).

One shared library per set of kernels (cached by content): the user's sources, compiled with the
firmware's warnings-as-errors flags, plus a generated adapter per function that registers it in
the delegate registry as ``custom:<function>`` (runtime_c/include/mcu/custom.h). A source that does
not compile is an error showing the compiler's own messages (file and line).
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcu.capture.custom_ops import CustomKernel, CustomOp, delegate_id
from mcu.errors import McuError
from mcu.ir import Graph
from mcu.paths import cache_dir, runtime_dir
import re
import struct
from mcu.program import format as fmt
from mcu.capture.custom_ops import check_registrations

CFLAGS = ["-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror"]
# The compiler's messages in plain ASCII (no localized quotes), as the user will search for them.
C_LOCALE = {**__import__("os").environ, "LC_ALL": "C"}


class _Call(ctypes.Structure):
    _fields_ = [("params", ctypes.c_void_p), ("inputs", ctypes.c_void_p), ("output", ctypes.c_void_p),
                ("scratch", ctypes.c_void_p), ("scratch_bytes", ctypes.c_int32)]


@dataclass
class HostKernels:
    """A loaded host library of custom kernels: ``addresses`` of their delegate backends (for
    mcu.program.host.Program.load) and the functions themselves."""

    path: Path
    lib: ctypes.CDLL
    functions: list[str]
    addresses: list[int]

    def call(self, function: str, params: bytes, inputs: list[np.ndarray], output: np.ndarray,
             scratch_bytes: int) -> int:
        fn = getattr(self.lib, function)
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.POINTER(_Call)]
        pbuf = ctypes.create_string_buffer(params, len(params))
        ins = (ctypes.c_void_p * max(len(inputs), 1))(*[x.ctypes.data for x in inputs])
        scratch = ctypes.create_string_buffer(max(scratch_bytes, 1))
        call = _Call(ctypes.cast(pbuf, ctypes.c_void_p), ctypes.cast(ins, ctypes.c_void_p), output.ctypes.data,
                     ctypes.cast(scratch, ctypes.c_void_p) if scratch_bytes else None, scratch_bytes)
        return int(fn(ctypes.byref(call)))


def kernels_of(graph: Graph) -> list[tuple[CustomOp, CustomKernel]]:
    found: dict[str, tuple[CustomOp, CustomKernel]] = {}
    for op in graph.ops:
        if op.kind == "custom":
            reg = op.attrs["custom"]
            k = reg.kernel(op.output.dtype)
            found.setdefault(k.function, (reg, k))
    return list(found.values())


def _adapter(functions: list[str], guard: bool = False) -> str:
    """The delegate backends that run these kernels; ``guard``: through the test firmware's guards when built
    with them (an interpreter firmware's registry)."""
    lines = ['#include "mcu/custom.h"', ""] + ([_FIRMWARE_GUARD] if guard else [])
    for i, f in enumerate(functions):
        run = f"CUSTOM_RUN({i}u, {f}, " if guard else f"mcu_custom_run({f}, "
        lines += [f"mcu_status {f}(const mcu_custom_call *call);",
                  f"static mcu_status custom_execute_{i}(void *handle, void *const *tensors, const uint32_t *bytes,",
                  "                                    uint32_t n_inputs, uint32_t n_outputs)",
                  "{",
                  f"    return {run}handle, tensors, bytes, n_inputs, n_outputs);",
                  "}",
                  f'const mcu_delegate_backend mcu_custom_backend_{i} = {{"{delegate_id(f)}", {{\'M\', \'C\', \'U\', \'X\'}}, '
                  f"MCU_CUSTOM_VERSION, mcu_custom_init, custom_execute_{i}, mcu_custom_destroy}};", ""]
    return "\n".join(lines)


def compile_error(reg: CustomOp, stderr: str) -> McuError:
    """The compiler's messages about the user's files (file:line: error ...), first ones first."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error:" in ln or ": warning:" in ln] or lines
    return McuError(f"custom op {reg.name}: its C source does not compile:\n" + "\n".join(errors[:8]),
                    hint="fix the kernel source (it is compiled with -std=c11 -Wall -Wextra -Werror)")


def check_sources(kernels: list[tuple[CustomOp, CustomKernel]]) -> None:
    """Each op's C files compiled alone with the firmware's warnings-as-errors flags, so an error names its op."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.hostbuild import find_host_cc

    for reg, k in kernels:
        proc = subprocess.run([find_host_cc(), *CFLAGS[:2], "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                               f"-I{runtime_dir() / 'include'}", *map(str, k.sources)],
                              capture_output=True, text=True, env=C_LOCALE)
        if proc.returncode != 0:
            raise compile_error(reg, proc.stderr)


def build_host_kernels(graph: Graph) -> HostKernels | None:
    """The host library of ``graph``'s custom kernels, or None when it has none."""
    kernels = kernels_of(graph)
    return build_kernels(kernels) if kernels else None


def program_custom_functions(program: bytes) -> list[str]:
    """The C functions of the custom kernels a program file calls (its ``custom:<function>`` delegate ids)."""
    try:
        head = fmt.read_header(program)
        fb = program[head.fb_offset:head.fb_offset + head.fb_size]
    except (ValueError, struct.error):
        return []  # the loader names what is wrong with the file
    found: list[str] = []
    prefix = delegate_id("").encode()
    for m in re.finditer(re.escape(prefix) + rb"([A-Za-z_][A-Za-z0-9_]*)\x00", fb):
        start = m.start()
        # a flatbuffer string: its byte length in the 4 bytes before it
        if start >= 4 and struct.unpack_from("<I", fb, start - 4)[0] == m.end() - 1 - start:
            name = m.group(1).decode()
            if name not in found:
                found.append(name)
    return found


def _kernels_named(ops: tuple[CustomOp, ...], functions: list[str], where: str) -> list[tuple[CustomOp, CustomKernel]]:
    by_function = {k.function: (op, k) for op in ops for k in (op.fp32, op.int8) if k is not None}
    missing = [f for f in functions if f not in by_function]
    if missing:
        known = ", ".join(sorted(by_function)) or "none"
        raise McuError(f"the program calls custom kernel {missing[0]}, which {where} does not register "
                       f"(its kernels: {known})",
                       hint="pass custom= the model file the program was exported from")
    return [by_function[f] for f in functions]


def kernels_for(custom: Any, functions: list[str]) -> list[tuple[CustomOp, CustomKernel]]:
    """The registrations and kernels of ``functions`` (those a program calls) from ``custom=``: the model file
    the program was exported from (a path) or its ``custom_ops`` list."""
    if isinstance(custom, (str, Path)):
        # lazy: keeps torch out of this module's import
        from mcu.capture.loader import load_model_file

        path = Path(custom)
        return _kernels_named(load_model_file(path).custom_ops, functions, str(path))
    if isinstance(custom, CustomOp) or (isinstance(custom, (list, tuple)) and
                                        all(isinstance(c, CustomOp) for c in custom)):
        return _kernels_named(check_registrations(custom, "custom="), functions, "custom=")
    raise McuError(f"custom= takes the model file (a path) or its custom_ops list, got {type(custom).__name__}")


def host_kernels_for(custom: Any, functions: list[str], source: str) -> HostKernels:
    """``Program.load``'s ``custom=`` (see :func:`kernels_for`; also a :class:`HostKernels`) as the host library
    of the ``functions`` the program ``source`` calls."""
    if isinstance(custom, HostKernels):
        missing = [f for f in functions if f not in custom.functions]
        if missing:
            raise McuError(f"program {source} calls custom kernel {missing[0]}, which custom= does not hold",
                           hint="pass custom= the model file the program was exported from")
        return custom
    return build_kernels(kernels_for(custom, functions))


# Test builds of the interpreter firmware (GUARD_DEFINE) compare the GUARD_BYTES on each side of a custom
# kernel's output before and after its call, as the generated C's test harness does (codegen/model.c.j2);
# the firmware's arena has as many spare bytes at each end (codegen/program_firmware_main.c.j2).
_FIRMWARE_GUARD = """\
#if defined(MCU_GUARD_WRITES)
#include <string.h>

#include "mcu/log.h"

/* A change prints GUARD_PROGRAM <kernel> <first> <last>: offsets from the output's start plus the guard's
 * size, for the host to name the kernel, its op and the bytes. The kernel's scratch may change. */
static mcu_status guarded_run(uint32_t index, mcu_custom_fn fn, void *handle, void *const *tensors,
                              const uint32_t *bytes, uint32_t n_inputs, uint32_t n_outputs)
{
    const int32_t g = MCU_GUARD_BYTES;
    if (handle == NULL || tensors == NULL || bytes == NULL || n_outputs != 1u || n_inputs < 1u) {
        return mcu_custom_run(fn, handle, tensors, bytes, n_inputs, n_outputs);
    }
    uint8_t *out = (uint8_t *)tensors[n_inputs];
    const int32_t size = (int32_t)bytes[n_inputs];
    uint8_t saved[2 * MCU_GUARD_BYTES];
    memcpy(saved, out - g, (size_t)g);
    memcpy(saved + g, out + size, (size_t)g);
    const mcu_status status = mcu_custom_run(fn, handle, tensors, bytes, n_inputs, n_outputs);
    const mcu_custom_params *p = (const mcu_custom_params *)handle;
    const uint8_t *scratch = p->scratch_bytes > 0 ? (const uint8_t *)tensors[n_inputs - 1u] : NULL;
    int32_t first = -1;
    int32_t last = -1;
    for (int32_t k = 0; k < 2 * g; ++k) {
        const int32_t at = k < g ? k - g : size + k - g;
        const uint8_t *b = out + at;
        const int in_scratch = scratch != NULL && b >= scratch && b < scratch + p->scratch_bytes;
        if (!in_scratch && *b != saved[k]) {
            first = first < 0 ? at : first;
            last = at;
        }
    }
    if (first >= 0) {
        mcu_log_str("GUARD_PROGRAM ");
        mcu_log_u32(index);
        mcu_log_str(" ");
        mcu_log_u32((uint32_t)(first + g));
        mcu_log_str(" ");
        mcu_log_u32((uint32_t)(last + g));
        mcu_log_newline();
        return MCU_ERR_MISMATCH;
    }
    return status;
}
#define CUSTOM_RUN(index, fn, h, t, b, ni, no) guarded_run(index, fn, h, t, b, ni, no)
#else
#define CUSTOM_RUN(index, fn, h, t, b, ni, no) mcu_custom_run(fn, h, t, b, ni, no)
#endif
"""


def firmware_registry(functions: list[str]) -> str:
    """C of the delegate adapters of these kernels and the registry an interpreter firmware loads programs with."""
    refs = ", ".join(f"&mcu_custom_backend_{i}" for i in range(len(functions)))
    return _adapter(functions, guard=True) + "\n".join([
        f"const mcu_delegate_backend *const mcu_firmware_delegates[{len(functions)}] = {{{refs}}};",
        f"const uint32_t mcu_firmware_n_delegates = {len(functions)}u;", ""])


def build_kernels(kernels: list[tuple[CustomOp, CustomKernel]]) -> HostKernels:
    """The host library of these kernels (each ``(registration, kernel)``), cached by content."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.hostbuild import find_host_cc

    functions = [k.function for _, k in kernels]
    adapter = _adapter(functions)
    sources = sorted({s for _, k in kernels for s in k.sources})
    h = hashlib.sha256(" ".join(CFLAGS).encode() + adapter.encode())
    for s in sources:
        h.update(str(s).encode() + s.read_bytes())
    for extra in ("include/mcu/custom.h", "include/mcu/delegate.h", "include/mcu/status.h", "src/mcu_custom.c"):
        h.update((runtime_dir() / extra).read_bytes())
    out = cache_dir() / "custom-host" / f"custom-{h.hexdigest()[:24]}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="mcu-custom-") as tmp:
            adapter_c = Path(tmp) / "custom_adapters.c"
            adapter_c.write_text(adapter)
            check_sources(kernels)
            tmp_out = Path(tmp) / out.name
            cmd = [find_host_cc(), *CFLAGS, f"-I{runtime_dir() / 'include'}", str(adapter_c),
                   str(runtime_dir() / "src" / "mcu_custom.c"), *map(str, sources), "-o", str(tmp_out), "-lm"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise McuError("building the custom kernels for the host failed:\n" + proc.stderr[-2000:])
            tmp_out.replace(out)
    lib = ctypes.CDLL(str(out))
    addresses = [ctypes.addressof(ctypes.c_char.in_dll(lib, f"mcu_custom_backend_{i}")) for i in range(len(functions))]
    return HostKernels(out, lib, functions, addresses)
