"""The host check of a model's custom kernels, run in a child process built with ASan and UBSan.

The user's C never runs inside mcu for the check: each kernel set becomes one executable (cached by
content) of the user's sources and runtime_c/check/mcu_custom_check.c, built with
``-fsanitize=address,undefined`` where the host compiler has them. It calls every custom op of the
graph once, with the op's own params, on buffers of exactly its planned sizes, each between two
guard zones. A stray access, undefined behaviour, a crash or a hang is an error that names the op,
its kernel, the tensor, the byte offset and the kernel's source line; then each output is compared
with the op's Python reference (int8 bit for bit, fp32 within :data:`FP32_RELATIVE`).
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcu.capture.custom_ops import CustomKernel, CustomOp, call_info
from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES, Graph, Op
from mcu.paths import cache_dir, runtime_dir
from mcu.reference.custom import run_custom
from mcu.device.custom_host import check_sources, kernels_of

FP32_RELATIVE = 1e-5  # an fp32 kernel against its numpy reference: of the largest reference value
TIMEOUT_S = 60.0
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
CFLAGS = ["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror"]
CHILD_ENV = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=3:print_summary=1",
             "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=3", "LC_ALL": "C"}


@dataclass(frozen=True)
class CheckTool:
    path: Path
    functions: tuple[str, ...]
    sanitized: bool  # False: the host compiler has no sanitizers, the guards are checked by pattern


def _table(functions: tuple[str, ...]) -> str:
    lines = ['#include "mcu/custom.h"', ""]
    lines += [f"mcu_status {f}(const mcu_custom_call *call);" for f in functions]
    lines += ["", f"const mcu_custom_fn mcu_check_kernels[] = {{{', '.join(functions)}}};",
              f"const uint32_t mcu_check_n_kernels = {len(functions)}u;", ""]
    return "\n".join(lines)


def build_check_tool(kernels: list[tuple[CustomOp, CustomKernel]], sanitize: bool = True) -> CheckTool:
    """The check executable of these kernels (each ``(registration, CustomKernel)``), built once per content;
    with ASan and UBSan when ``sanitize`` and the host compiler has them, else with pattern-checked guards."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.hostbuild import find_host_cc

    functions = tuple(dict.fromkeys(k.function for _, k in kernels))
    sources = sorted({s for _, k in kernels for s in k.sources})
    driver = runtime_dir() / "check" / "mcu_custom_check.c"
    table = _table(functions)
    cc = find_host_cc()
    h = hashlib.sha256(" ".join([cc, *CFLAGS, *SANITIZE]).encode() + table.encode() + driver.read_bytes())
    for s in sources:
        h.update(str(s).encode() + s.read_bytes())
    for header in ("custom.h", "delegate.h", "status.h"):
        h.update((runtime_dir() / "include" / "mcu" / header).read_bytes())
    folder = cache_dir() / "custom-check"
    key = h.hexdigest()[:24]
    variants = [(True, SANITIZE, f"check-{key}-san")] if sanitize else []
    variants.append((False, ["-g"], f"check-{key}"))
    folder.mkdir(parents=True, exist_ok=True)
    errors = ""
    for sanitized, flags, name in variants:  # the plain build only where the sanitizers do not link
        if (folder / name).exists():
            return CheckTool(folder / name, functions, sanitized)
        if not errors:
            check_sources(kernels)
        with tempfile.TemporaryDirectory(prefix="mcu-check-") as tmp:
            table_c = Path(tmp) / "check_table.c"
            table_c.write_text(table)
            tmp_out = Path(tmp) / name
            proc = subprocess.run([cc, *flags, *CFLAGS, f"-I{runtime_dir() / 'include'}", str(driver), str(table_c),
                                   *map(str, sources), "-o", str(tmp_out), "-lm"], capture_output=True, text=True,
                                  env={**os.environ, "LC_ALL": "C"})
            if proc.returncode == 0:
                tmp_out.replace(folder / name)
                return CheckTool(folder / name, functions, sanitized)
            errors = proc.stderr
    raise McuError("building the custom kernels' host check failed:\n" + errors[-2000:])


def _request(calls: list[tuple[int, bytes, list[np.ndarray], int, int]]) -> bytes:
    out = [b"MCUQ", struct.pack("<I", len(calls))]
    for kernel, params, inputs, out_bytes, scratch in calls:
        out += [struct.pack("<II", kernel, len(params)), params, struct.pack("<I", len(inputs))]
        for x in inputs:
            data = np.ascontiguousarray(x).tobytes()
            out += [struct.pack("<I", len(data)), data]
        out.append(struct.pack("<II", out_bytes, scratch))
    return b"".join(out)


@dataclass
class _Buffer:
    name: str
    address: int
    size: int


def _buffers(stderr: str) -> tuple[int, list[_Buffer]]:
    """The call the child was in when it stopped, and that call's buffers."""
    calls = re.findall(r"^MCU_CALL (\d+)$", stderr, re.M)
    call = int(calls[-1]) if calls else 0
    bufs = [_Buffer(n, int(a, 16), int(s)) for c, n, a, s in re.findall(r"^MCU_BUF (\d+) (\S+) (?:0x)?([0-9a-fA-F]+) "
                                                                      r"(\d+)$", stderr, re.M) if int(c) == call]
    return call, bufs


def _where(stderr: str) -> str:
    """The user's source line of the innermost frame that has one (the kernel, not the check driver)."""
    for m in re.finditer(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)(?::\d+)?$", stderr, re.M):
        if "mcu_custom_check.c" not in m.group(2) and "sanitizer" not in m.group(2):
            return f" at {Path(m.group(2)).name}:{m.group(3)}"
    m = re.search(r"^(\S+?):(\d+):\d+: runtime error", stderr, re.M)
    return f" at {Path(m.group(1)).name}:{m.group(2)}" if m else ""


def _tensor_name(op: Op, buffer: str) -> str:
    if buffer == "output":
        return f"output {op.output.name}"
    if buffer.startswith("input") and buffer[5:].isdigit() and int(buffer[5:]) < len(op.inputs):
        return f"input {op.inputs[int(buffer[5:])].name}"
    return {"scratch": "scratch buffer", "params": "params (mcu_custom_params)",
            "inputs": "input pointer list"}.get(buffer, buffer)


def _offset_words(op: Op, buf: _Buffer, offset: int) -> str:
    what = f"{_tensor_name(op, buf.name)}, which is {buf.size} B long"
    if offset >= buf.size:
        after = "just after its end" if offset == buf.size else f"{offset - buf.size} B after its end"
        return f"byte offset {offset} of its {what} ({after})"
    if offset < 0:
        return f"byte offset {offset} of its {what} ({-offset} B before its start)"
    return f"byte offset {offset} of its {what}"


def _locate(bufs: list[_Buffer], address: int) -> tuple[_Buffer, int] | None:
    """The buffer nearest ``address`` (inside it, else the least distance to either end) and its offset there."""
    if not bufs:
        return None

    def distance(b: _Buffer) -> int:
        return 0 if b.address <= address < b.address + b.size else \
            min(abs(address - b.address), abs(address - (b.address + b.size - 1)))

    best = min(bufs, key=distance)
    return best, address - best.address


def _child_failure(ops: list[Op], stderr: str, rc: int) -> McuError:
    call, bufs = _buffers(stderr)
    op = ops[min(call, len(ops) - 1)]
    reg: CustomOp = op.attrs["custom"]
    kernel = reg.kernel(op.output.dtype)
    head = f"custom op {reg.name} ({op.name}){_source(op)}: its C kernel {kernel.function}"  # type: ignore[union-attr]
    hint = ("a kernel reads its inputs' input_numel and writes numel elements of its output (mcu_custom_params), "
            "nothing else; it was run on the host under AddressSanitizer and UBSan")
    where = _where(stderr)
    guard = re.search(r"^MCU_GUARD \d+ (\S+) (-?\d+)$", stderr, re.M)
    if guard:
        buf = next(b for b in bufs if b.name == guard.group(1))
        return McuError(f"{head} writes outside its output: the first changed byte is at "
                        f"{_offset_words(op, buf, int(guard.group(2)))}", hint=hint)
    access = re.search(r"^(READ|WRITE) of size (\d+) at 0x([0-9a-f]+)", stderr, re.M)
    if access:
        kind, size, address = access.group(1), int(access.group(2)), int(access.group(3), 16)
        found = _locate(bufs, address)
        at = _offset_words(op, *found) if found else f"address 0x{address:x}"
        verb = "writes outside its output" if kind == "WRITE" else "reads outside its inputs"
        return McuError(f"{head} {verb}: {size} B at {at}{where}", hint=hint)
    ub = re.search(r"runtime error: (.*)$", stderr, re.M)
    if ub:
        return McuError(f"{head} has undefined behaviour{where}: {ub.group(1).strip()}",
                        hint="fix the kernel; it was run on the host under UBSan")
    crash = re.search(r"ERROR: AddressSanitizer: (\S+) on (?:unknown )?address 0x([0-9a-f]+)", stderr)
    if crash:
        return McuError(f"{head} crashed on the host ({crash.group(1)} at address 0x{crash.group(2)}){where}",
                        hint=hint)
    signal = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
    last = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("MCU_")][-1:] or [""]
    return McuError(f"{head} crashed on the host ({signal}){where}{': ' + last[0] if last[0] else ''}", hint=hint)


def _source(op: Op) -> str:
    return f" ({op.source})" if op.source else ""


def check_kernels(graph: Graph, seed: int = 0, sanitize: bool = True) -> None:
    """Run every custom op's C kernel in the check child and compare it with its Python reference: int8 bit for
    bit (inputs over the whole int8 range), fp32 within :data:`FP32_RELATIVE` of the largest reference value
    (inputs ~ N(0, 3^2)). Any stray access, crash or difference is an error naming the op."""

    ops = [op for op in graph.ops if op.kind == "custom"]
    if not ops:
        return
    tool = build_check_tool(kernels_of(graph), sanitize)
    rng = np.random.default_rng(seed)
    calls, all_inputs = [], []
    for op in ops:
        info = call_info(op)
        ins = []
        for t in op.inputs:
            if t.dtype == "int8":
                ins.append(rng.integers(-128, 128, size=t.numel, dtype=np.int8))
            else:
                ins.append((rng.standard_normal(t.numel) * 3.0).astype(NUMPY_DTYPES[t.dtype]))
        all_inputs.append(ins)
        function = op.attrs["custom"].kernel(op.output.dtype).function
        calls.append((tool.functions.index(function), info.payload()[8:], ins, op.output.nbytes,
                      max(info.scratch_bytes, 0)))
    with tempfile.TemporaryDirectory(prefix="mcu-check-") as tmp:
        request, result = Path(tmp) / "request.bin", Path(tmp) / "result.bin"
        request.write_bytes(_request(calls))
        try:
            proc = subprocess.run([str(tool.path), str(request), str(result)], capture_output=True, text=True,
                                  errors="replace", timeout=TIMEOUT_S, env={**os.environ, **CHILD_ENV})
        except subprocess.TimeoutExpired as e:
            call, _ = _buffers((e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes)
                               else (e.stderr or ""))
            op = ops[min(call, len(ops) - 1)]
            reg = op.attrs["custom"]
            raise McuError(f"custom op {reg.name} ({op.name}){_source(op)}: its C kernel "
                           f"{reg.kernel(op.output.dtype).function} did not return within {TIMEOUT_S:.0f} s on the "
                           "host", hint="look for a loop that does not end") from None
        if proc.returncode != 0:
            raise _child_failure(ops, proc.stderr, proc.returncode)
        blob = result.read_bytes()
    pos = 0
    for op, ins in zip(ops, all_inputs):
        status = struct.unpack_from("<i", blob, pos)[0]
        pos += 4
        out = np.frombuffer(blob, NUMPY_DTYPES[op.output.dtype], op.output.numel, pos).copy()
        pos += op.output.nbytes
        _compare(op, status, ins, out)


def _compare(op: Op, status: int, ins: list[np.ndarray], out: np.ndarray) -> None:
    reg: CustomOp = op.attrs["custom"]
    function = reg.kernel(op.output.dtype).function  # type: ignore[union-attr]
    if status != 0:
        raise McuError(f"custom op {reg.name} ({op.name}){_source(op)}: its C kernel {function} returned "
                       f"status {status} on the host")
    ref = run_custom(op, ins)
    if op.output.dtype == "int8":
        bad = np.flatnonzero(out != ref)
    else:
        bound = FP32_RELATIVE * max(float(np.max(np.abs(ref))), 1e-30)
        bad = np.flatnonzero(~(np.abs(out.astype(np.float64) - ref) <= bound))
    if bad.size:
        i = int(bad[0])
        raise McuError(f"custom op {reg.name} ({op.name}){_source(op)}: its C kernel {function} differs from "
                       f"its Python reference in {bad.size} of {ref.size} elements (first at {i}: C {out[i]}, "
                       f"reference {ref[i]})",
                       hint="fix the kernel or the reference so that they compute the same values")
