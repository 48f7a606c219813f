"""Run firmware in ``qemu-system-arm``: count its instructions exactly and estimate its cycles.

The console is the board's UART0 on QEMU's stdout; the exit status is what
the firmware passes to semihosting SYS_EXIT_EXTENDED (see
ports/cortex-m/semihost.c). Instruction counts between ``mcu_bench_begin``
and ``mcu_bench_end`` come from the TCG plugin in ports/qemu/insn_count.c,
which QEMU loads from a build cached by the hash of its sources. The same
plugin estimates the board's core cycles over the same regions with the
timing model of ports/qemu/cycle_model.c and the wait states of the board's
memories (docs/cycles.md): an estimate, next to the exact count.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mcu import paths
from mcu.device.boards import Board
from mcu.device.elf import read_elf
from mcu.errors import McuError
from mcu.device.toolchain import find_host_compiler

QEMU = "qemu-system-arm"
QEMU_INSTALL_HINT = "install it with: sudo apt-get install --no-install-recommends qemu-system-arm"
QEMU_ENV = "MCU_QEMU"
BEGIN_MARKER = "mcu_bench_begin"
END_MARKER = "mcu_bench_end"
# The event tracer's per-op hooks (runtime_c/include/mcu/trace.h), present only in MCU_TRACE builds.
TRACE_BEGIN_MARKER = "mcu_trace_op_begin"
TRACE_END_MARKER = "mcu_trace_op_end"
# Fault handlers exit with this plus the exception number (HardFault -> 131);
# see MCU_EXIT_FAULT_BASE in ports/cortex-m/mcu_cortex_m.h.
FAULT_EXIT_BASE = 128
_PLUGIN_CFLAGS = ("-std=c11", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                  "-Wall", "-Wextra", "-Werror")
_PLUGIN_SOURCES = ("insn_count.c", "cycle_model.c")
_PLUGIN_HEADERS = ("cycle_model.h",)
# Cores the plugin's timing model covers (cm_core_from_name in ports/qemu/cycle_model.c).
TIMED_CORES = ("cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m33", "cortex-m55")


@dataclass(frozen=True)
class SimResult:
    exit_code: int
    console: str  # everything the firmware wrote to its UART
    instructions: list[int]  # one count per mcu_bench_begin/end pair, in order
    # One count per mcu_trace_op_begin/end pair, in order (profiling builds only; empty otherwise).
    trace_instructions: list[int] = field(default_factory=list)
    # Estimated core cycles over the same regions (empty when the board's core has no timing model).
    cycles: list[int] = field(default_factory=list)
    trace_cycles: list[int] = field(default_factory=list)

    @property
    def faulted(self) -> bool:
        """The firmware stopped in a fault handler rather than returning from main."""
        return self.exit_code >= FAULT_EXIT_BASE


def find_qemu() -> Path:
    """``qemu-system-arm`` from ``$MCU_QEMU`` or ``PATH``."""
    override = os.environ.get(QEMU_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise McuError(f"{QEMU} not found at {path} (set by {QEMU_ENV})",
                           hint=f"unset {QEMU_ENV} or {QEMU_INSTALL_HINT}")
        return path
    found = shutil.which(QEMU)
    if found is None:
        raise McuError(f"{QEMU} not found on PATH", hint=QEMU_INSTALL_HINT)
    return Path(found)


def build_plugin() -> Path:
    """The instruction-counting plugin, compiled once per source version.

    Parallel test workers may all get here at once: each compiles to a
    private temporary name and renames it into place, so a reader only ever
    sees a complete library.
    """
    folder = paths.ports_dir() / "qemu"
    sources = [folder / name for name in _PLUGIN_SOURCES]
    text = b"".join((folder / name).read_bytes() for name in (*_PLUGIN_SOURCES, *_PLUGIN_HEADERS))
    digest = hashlib.sha256(text + " ".join(_PLUGIN_CFLAGS).encode()).hexdigest()
    target = paths.cache_dir() / f"qemu-plugin-{digest[:16]}.so"
    if target.is_file():
        return target
    cc = find_host_compiler()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        proc = subprocess.run([str(cc), *_PLUGIN_CFLAGS, f"-I{folder}", "-o", tmp_name, *map(str, sources)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise McuError(f"compiling the QEMU plugin {sources[0]} failed:\n{proc.stderr.strip()}")
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


def qemu_opt(value: str) -> str:
    # QEMU splits -plugin options at commas; a literal comma is written twice.
    return value.replace(",", ",,")


def marker_args(elf: Path, trace_out: Path | None = None) -> list[str]:
    """Plugin arguments for the measured region, and for the per-op trace region when ``trace_out``
    names where the plugin writes it."""
    image = read_elf(elf)
    args: list[str] = []
    regions = [("", BEGIN_MARKER, END_MARKER)]
    if trace_out is not None:
        regions.append(("trace_", TRACE_BEGIN_MARKER, TRACE_END_MARKER))
    for prefix, begin_name, end_name in regions:
        begin, end = image.symbol(begin_name), image.symbol(end_name)
        if begin is None or end is None:
            # --gc-sections drops markers the firmware never calls: nothing to measure.
            continue
        args += [f"{prefix}begin={begin.value & ~1:#x}", f"{prefix}end={end.value & ~1:#x}"]
        if prefix:
            args.append(f"trace_out={qemu_opt(str(trace_out))}")
    return args


def timing_args(board: Board, cycles_out: Path, trace_cycles_out: Path | None = None) -> list[str]:
    """Plugin arguments for the cycle estimate: the board's core and its memories' wait states
    (thousandths of a cycle per fetch word and per data access, or a cache's geometry and what a miss
    costs; the core's L1 caches, shared by the memories behind them); none when the core has no model."""
    if board.core not in TIMED_CORES:
        return []
    args = [f"core={board.core}", f"cycles_out={qemu_opt(str(cycles_out))}"]
    if trace_cycles_out is not None:
        args.append(f"trace_cycles_out={qemu_opt(str(trace_cycles_out))}")
    if board.l1_cache is not None and any(region.l1_cached for region in board.regions):
        args += [f"l1i={':'.join(map(str, board.l1_cache.icache))}",
                 f"l1d={':'.join(map(str, board.l1_cache.dcache))}"]
    for region in board.regions:
        if region.l1_cached:
            args.append(f"l1={region.origin:#x}:{region.length:#x}:{round(1000 * region.wait_states)}")
            continue
        if region.cache_bytes:
            args.append(f"cache={region.origin:#x}:{region.length:#x}:{region.cache_bytes}:{region.cache_ways}:"
                        f"{region.cache_line}:{round(1000 * region.wait_states)}")
            if region.data_cache_bytes:
                args.append(f"dcache={region.origin:#x}:{region.length:#x}:{region.data_cache_bytes}:"
                            f"{region.data_cache_ways}:{region.data_cache_line}:{round(1000 * region.wait_states)}")
            continue
        fetch, data = region.fetch_millicycles, region.data_millicycles
        if fetch or data:
            args.append(f"mem={region.origin:#x}:{region.length:#x}:{fetch}:{data}")
    return args


def read_counts(path: Path) -> list[int]:
    """The plugin's numbers, one a line; none when it wrote no file."""
    return [int(word) for word in path.read_text().split()] if path.exists() else []


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_qemu(board: Board, elf: Path, timeout_s: float = 300) -> SimResult:
    """Boot ``elf`` on the board's QEMU machine and wait for it to exit."""
    if board.sim_kind != "qemu" or board.qemu_machine is None:
        raise McuError(f"board '{board.name}' cannot run in QEMU",
                       hint="pick a board whose file has [sim] kind = \"qemu\"")
    elf = Path(elf).resolve()
    if not elf.is_file():
        raise McuError(f"firmware {elf} does not exist")
    qemu = find_qemu()
    plugin = build_plugin()

    with tempfile.TemporaryDirectory(prefix="mcu-qemu-") as tmp:
        counts_path = Path(tmp) / "instructions.txt"
        trace_path = Path(tmp) / "trace.txt"
        cycles_path = Path(tmp) / "cycles.txt"
        trace_cycles_path = Path(tmp) / "trace_cycles.txt"
        plugin_opt = ",".join(
            [qemu_opt(str(plugin)), *marker_args(elf, trace_path), f"out={qemu_opt(str(counts_path))}",
             *timing_args(board, cycles_path, trace_cycles_path)]
        )
        cmd = [
            str(qemu), "-M", board.qemu_machine, "-nographic", "-monitor", "none",
            "-semihosting-config", "enable=on,target=native",
            "-kernel", str(elf), "-plugin", plugin_opt,
        ]
        try:
            # stdin from /dev/null: with a terminal on stdin QEMU's stdio
            # backend would switch it to raw mode.
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            console = (exc.stdout or b"").decode("utf-8", "replace")
            raise McuError(
                f"the firmware did not finish in {timeout_s:g} s on {board.qemu_machine}",
                hint=("it may be stuck in a loop; console so far:\n" + _tail(console))
                if console.strip() else "it printed nothing; it may hang before main",
            ) from exc
        console = proc.stdout.decode("utf-8", "replace")
        stderr = proc.stderr.decode("utf-8", "replace")
        # The firmware's status and QEMU's own failure (bad machine, plugin
        # load error) share the exit code; QEMU's failures say so on stderr.
        qemu_errors = [line for line in stderr.splitlines()
                       if line.startswith(f"{qemu.name}:") and "warning:" not in line]
        if qemu_errors:
            raise McuError(f"QEMU failed to run {elf.name} on {board.qemu_machine}:\n"
                           + "\n".join(qemu_errors))
        if proc.returncode < 0:
            # QEMU itself died (it aborts when the guest locks up, e.g. a
            # fault inside a fault handler): there is no firmware status.
            raise McuError(
                f"QEMU stopped with signal {-proc.returncode} running {elf.name} "
                f"on {board.qemu_machine}:\n" + "\n".join(stderr.strip().splitlines()[:6]),
                hint="the firmware locked up" if "Lockup" in stderr else None,
            )
        return SimResult(
            exit_code=proc.returncode,
            console=console,
            instructions=read_counts(counts_path),
            trace_instructions=read_counts(trace_path),
            cycles=read_counts(cycles_path),
            trace_cycles=read_counts(trace_cycles_path),
        )
