"""Firmware mode: the interpreter lives in the firmware, the program in its own flash region.

The board's read-only memory (flash, or the region that holds .rodata) is
split in three: the firmware's code at the start, then a program region and
a weights region (for programs written with external weights; a program that
carries its weights inline may run on into it). The firmware
is built once per board (or once per kernel set); a new program is written
to its region without rebuilding it: ``-device loader`` in QEMU, a UF2 of
just that region for the Pico 2 (:func:`program_uf2`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from mcu.version import __version__
from mcu.backends.portable.conv import LUT_CALLS, S4_CALLS
from mcu.device.boards import Board, MemoryRegion
from mcu.device.console import HarnessReport, parse_harness
from mcu.emit.c_model import GUARD_BYTES, GUARD_DEFINE, environment
from mcu.errors import McuError
from mcu.paths import all_kernel_sources, cache_dir, kernel_source, runtime_dir
from mcu.program.format import kernel_macro
from mcu.device.toolchain import Firmware, build_firmware, find_cross_compiler
from mcu.device.custom_host import firmware_registry, kernels_for, program_custom_functions
from mcu.device.elf import read_elf
from mcu.device.guards import HINT, side_of
from mcu.device.uf2 import encode, pages_from_segments
from mcu.device.sim.qemu import build_plugin, find_qemu, marker_args, qemu_opt, read_counts, timing_args

FIRMWARE_SHARE = 1 << 20  # bytes of the read-only region kept for the firmware itself (at most half of it)
RAM_RESERVE = 32 << 10  # RAM left to .data, .bss and the harness besides the arena, output buffer and stack
# The interpreter links every kernel and calls them through its table, so the stack cannot be bounded per
# model as for generated C (mcu/device/stack.py refuses indirect calls): it reserves enough for the deepest
# kernel (the depthwise pixel paths keep ~6 KB of rows and tables on the stack) and the interpreter.
INTERPRETER_STACK = 16 << 10
PAGE = 4096


@dataclass(frozen=True)
class ProgramLayout:
    """Where the firmware, the program and its weights live on a board."""

    firmware_board: Board  # the board as the firmware's linker script sees it (read-only region shortened)
    program: MemoryRegion
    weights: MemoryRegion
    arena_bytes: int
    output_bytes: int
    delegates: int = 0  # linked custom kernels (their registry: mcu_firmware_delegates)

    def program_limit(self, external_weights: bool) -> int:
        """Bytes a program may take: the weights region follows the program region, so a program that
        carries its weights inline may run on into it."""
        return self.program.length if external_weights else self.program.length + self.weights.length


def program_layout(board: Board) -> ProgramLayout:
    rom = board.region_for("rodata")
    keep = min(FIRMWARE_SHARE, rom.length // 2) // PAGE * PAGE
    rest = (rom.length - keep) // 2 // PAGE * PAGE
    program = MemoryRegion("program", rom.origin + keep, rest)
    weights = MemoryRegion("weights", rom.origin + keep + rest, rom.length - keep - rest)
    short = dataclasses.replace(rom, length=keep)
    if rom is board.flash:
        fw_board = dataclasses.replace(board, flash=short)
    else:
        fw_board = dataclasses.replace(board, extra_regions=tuple(short if r is rom else r
                                                                  for r in board.extra_regions))
    stack = max(board.stack_bytes, INTERPRETER_STACK)
    fw_board = dataclasses.replace(fw_board, stack_bytes=stack)
    output_bytes = min(64 << 10, board.ram.length // 32) // 16 * 16
    arena = (board.ram.length - stack - RAM_RESERVE - output_bytes) // 16 * 16
    if arena <= 0:
        raise McuError(f"board {board.name} has too little RAM for the interpreter firmware")
    return ProgramLayout(fw_board, program, weights, arena, output_bytes)


@dataclass(frozen=True)
class _FirmwareView:
    board: str
    version: str
    region_hex: str
    region_size: int
    weights_hex: str
    weights_size: int
    arena_bytes: int
    output_bytes: int
    delegates: int = 0  # linked custom kernels (their registry: mcu_firmware_delegates)
    program_fast_bytes: int = 0  # --weights-in fast: a RAM copy of the program of this size, out of the arena


def program_fast_bytes(board: Board, program: bytes) -> int:
    """Bytes of RAM that a copy of ``program`` takes with ``--weights-in fast`` (its weights and bundled vectors
    read from there instead of from their slower read-only region); 0 when the RAM is not faster."""
    if board.ram.data_millicycles >= board.region_for("rodata").data_millicycles:
        return 0
    return -(-len(program) // 16) * 16


def interpreter_sources() -> list[Path]:
    """The interpreter's own C files (runtime_c/interp) and the delegate registry it runs partitions through."""
    return [*sorted((runtime_dir() / "interp").glob("*.c")), runtime_dir() / "src" / "mcu_delegate.c"]


def kernel_sources(functions: Iterable[str] | None = None) -> list[Path]:
    """Kernel files for these C functions (one public kernel per file), or every kernel."""
    if functions is None:
        return all_kernel_sources()
    calls = {**S4_CALLS, **LUT_CALLS}
    needed = {g for f in functions for g in calls.get(f, (f,))}  # kernels that run another kernel
    return [kernel_source(f"{f}.c") for f in sorted(needed)]


def firmware_view(board: Board) -> _FirmwareView:
    """What an interpreter firmware's main needs to know of the board's layout."""
    layout = program_layout(board)
    return _FirmwareView(board=board.name, version=__version__, region_hex=f"0x{layout.program.origin:08x}",
                         region_size=layout.program_limit(external_weights=False), weights_hex=f"0x{layout.weights.origin:08x}",
                         weights_size=layout.weights.length, arena_bytes=layout.arena_bytes,
                         output_bytes=layout.output_bytes)


def render_main(board: Board, delegates: int = 0, fast_bytes: int = 0) -> str:
    """``fast_bytes``: the RAM copy of the program (:func:`program_fast_bytes`), taken from the arena."""
    view = firmware_view(board)
    view = dataclasses.replace(view, delegates=delegates, program_fast_bytes=fast_bytes,
                               arena_bytes=view.arena_bytes - fast_bytes)
    return environment().get_template("program_firmware_main.c.j2").render(f=view)


def build_interpreter_firmware(board: Board, kernels: Iterable[str] | None = None,
                               out_dir: Path | None = None, trace: bool = False, main: str | None = None,
                               custom: Any = None, program: bytes | None = None, guard: bool = False,
                               fast_bytes: int = 0) -> Firmware:
    """The interpreter firmware for ``board``: every kernel, or only ``kernels`` (C function names).

    ``trace``: with the event tracer compiled in (``MCU_TRACE``: a TRACE line per instruction, and the
    per-op region the instruction-count plugin measures), for ``mcu profile --program``. ``main``: another
    main than the test-vector harness (the C text; e.g. mcu.generate's generation loop). ``custom`` with
    ``program``: the user's kernels that program calls (custom ops), linked in and registered as its
    delegates; ``custom`` is the model file the program was exported from or its ``custom_ops`` list.
    ``guard``: a test build, whose custom kernels run inside guards (GUARD_PROGRAM lines,
    :func:`raise_on_program_guard`). ``fast_bytes``: the firmware copies the program into that much RAM at boot
    and runs it from there (``--weights-in fast``, :func:`program_fast_bytes`)."""

    layout = program_layout(board)
    functions = program_custom_functions(program) if program is not None else []
    if functions and custom is None:
        raise McuError(f"the program calls custom kernels ({', '.join(functions)}): pass custom= the model file "
                       "that registers them to build_interpreter_firmware")
    pairs = kernels_for(custom, functions) if functions else []
    registry = firmware_registry([k.function for _, k in pairs]) if pairs else ""
    user_sources = sorted({s for _, k in pairs for s in k.sources})
    main = main if main is not None else render_main(board, len(pairs), fast_bytes)
    subset = None if kernels is None else sorted(set(kernels))
    defines: dict[str, str | int | None] = {}
    if subset is not None:
        defines["MCU_PROGRAM_KERNEL_SUBSET"] = None
        defines.update({f"MCU_PROGRAM_HAS_{kernel_macro(k)}": 1 for k in subset})
    if trace:
        defines["MCU_TRACE"] = None
    if guard and registry:
        defines.update({GUARD_DEFINE: None, "MCU_GUARD_BYTES": GUARD_BYTES})
    if out_dir is None:
        h = hashlib.sha256((main + repr(subset) + repr(trace) + repr(sorted(defines.items())) + registry).encode())
        for path in user_sources:
            h.update(str(path).encode() + path.read_bytes())
        key = h.hexdigest()[:20]
        out_dir = cache_dir() / "program-firmware" / board.name / key
    src = Path(out_dir) / "src"
    src.mkdir(parents=True, exist_ok=True)
    main_c = src / "program_main.c"
    if not main_c.exists() or main_c.read_text() != main:
        main_c.write_text(main)
    sources = [main_c, *interpreter_sources(), *kernel_sources(subset)]
    if registry:
        registry_c = src / "custom_registry.c"
        if not registry_c.exists() or registry_c.read_text() != registry:
            registry_c.write_text(registry)
        sources += [registry_c, runtime_dir() / "src" / "mcu_custom.c", *user_sources]
    if trace:
        sources.append(runtime_dir() / "src" / "mcu_trace.c")
    return build_firmware(layout.firmware_board, sources, [], Path(out_dir), name="interpreter", defines=defines)


@dataclass(frozen=True)
class CodeSize:
    """Bytes of the interpreter's own code (runtime_c/interp, no kernels) for one core and optimization."""

    per_file: dict[str, int]  # .text + .rodata + .data of each object, every function included

    @property
    def total(self) -> int:
        return sum(self.per_file.values())


def interpreter_code_size(board: Board, optimization: str = "-Os") -> CodeSize:
    """Compile runtime_c/interp for ``board``'s core and sum each object's allocated sections.

    Every function counts, also those a given firmware would drop with --gc-sections, so this is
    an upper bound on what the interpreter adds to any firmware.
    """
    gcc = find_cross_compiler()
    include = runtime_dir() / "include"
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="mcu-interp-size-") as tmp:
        for src in interpreter_sources():
            obj = Path(tmp) / f"{src.stem}.o"
            cmd = [str(gcc), *board.cpu_flags, "-std=c11", optimization, "-ffunction-sections", "-fdata-sections",
                   "-Wall", "-Wextra", "-Werror", f"-I{include}", "-c", str(src), "-o", str(obj)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise McuError(f"compiling {src.name} for {board.name} failed:\n{proc.stderr.strip()}")
            sizes[src.name] = sum(s.size for s in read_elf(obj).sections if s.alloc and not s.nobits)
    return CodeSize(sizes)


def program_uf2(board: Board, program: bytes, weights: bytes | None = None) -> bytes:
    """A UF2 that writes only the program (and weights) regions: flash it over an installed firmware."""
    if board.uf2_family is None:
        raise McuError(f"board {board.name} is not flashed with UF2")
    layout = program_layout(board)
    check_fits(layout, program, weights)
    segments = [(layout.program.origin, program)]
    if weights is not None:
        segments.append((layout.weights.origin, weights))
    return encode(pages_from_segments(segments), board.uf2_family)


def check_fits(layout: ProgramLayout, program: bytes, weights: bytes | None, board: str = "") -> None:
    """Refuse a program (or weights file) larger than its flash region; callers check before building."""
    where = f" of the interpreter firmware on {board}" if board else ""
    limit = layout.program_limit(external_weights=weights is not None)
    if len(program) > limit:
        region = "program region" if weights is not None else "program and weights regions"
        raise McuError(f"the program file ({len(program)} B) does not fit the {limit} B {region}{where}",
                       hint="use a board with more flash, or run the generated C (drop --program)")
    if weights is not None and len(weights) > layout.weights.length:
        raise McuError(f"the weights ({len(weights)} B) do not fit the {layout.weights.length} B weights region{where}")


_PROGRAM_GUARD = re.compile(r"^GUARD_PROGRAM (\d+) (\d+) (\d+)\s*$", re.M)


def raise_on_program_guard(graph: Any, functions: list[str], console: str, board: str) -> None:
    """Raise for the first GUARD_PROGRAM line of a guarded interpreter firmware's console: the custom kernel
    (``functions[index]``, the registry's order), the ops that call it, and which bytes beside its output
    it changed."""
    m = _PROGRAM_GUARD.search(console)
    if m is None:
        return
    index, first, last = (int(g) for g in m.groups())
    first -= GUARD_BYTES
    last -= GUARD_BYTES
    function = functions[index] if index < len(functions) else f"#{index}"
    ops = [op for op in graph.ops if op.kind == "custom" and op.attrs["custom"].kernel(op.output.dtype).function
           == function]
    op = ops[0] if ops else None
    name = op.attrs["custom"].name if op is not None else function
    where = f" ({op.name})" + (f" ({op.source})" if op.source else "") if op is not None else ""
    size = op.output.nbytes if op is not None else 0
    side = side_of(first, size)
    raise McuError(f"custom op {name}{where}: its C kernel {function} writes outside its output on {board} "
                   f"(interpreter firmware): the first changed byte is at byte offset {first} of its output"
                   f"{' ' + op.output.name if op is not None else ''}, which is {size} B long ({side}); the changed "
                   f"bytes span {last - first + 1} B of the {2 * GUARD_BYTES} B guarded", hint=HINT)


@dataclass
class ProgramRun:
    """One run of the interpreter firmware on a simulator."""

    exit_code: int
    console: str
    instructions: list[int]  # one count per inference, methods in order
    trace_instructions: list[int] = field(default_factory=list)  # per traced instruction (a tracing firmware)
    methods: dict[str, HarnessReport] = field(default_factory=dict)
    error: str | None = None  # the firmware's ERROR line about the program, if any
    # Estimated core cycles over the same regions (docs/cycles.md); empty when the core has no timing model.
    cycles: list[int] = field(default_factory=list)
    trace_cycles: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and "RESULT PASS" in self.console

    def output(self, method: str, vector: int, index: int, dtype: type, count: int) -> np.ndarray:
        report = self.methods[method]
        if (vector, index) not in report.outputs:
            raise McuError(f"the interpreter firmware printed no output {index} of vector {vector} of {method}:\n"
                           f"{self.console.strip()[-2000:]}")
        return report.output_array(vector, index, np.dtype(dtype), count)


def parse_program_console(text: str) -> tuple[dict[str, HarnessReport], str | None]:
    """Split the console at METHOD lines and parse each part like the generated-C harness."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    error = None
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith("METHOD "):
            current = sections.setdefault(line[len("METHOD "):], [])
        elif line.startswith("ERROR program "):
            error = line[len("ERROR program "):]
        elif current is not None:
            current.append(line)
    return {name: parse_harness("\n".join(lines)) for name, lines in sections.items()}, error


def run_program(board: Board, firmware: Path, program: bytes, weights: bytes | None = None,
                timeout_s: float = 600.0, trace: bool = False) -> ProgramRun:
    """Boot the interpreter firmware in QEMU with ``program`` (and ``weights``) loaded into their regions."""
    if board.sim_kind != "qemu" or board.qemu_machine is None:
        raise McuError(f"board '{board.name}' cannot run in QEMU")
    layout = program_layout(board)
    check_fits(layout, program, weights)
    qemu = find_qemu()
    plugin = build_plugin()
    with tempfile.TemporaryDirectory(prefix="mcu-program-") as tmp:
        prog_path = Path(tmp) / "program.mpk"
        prog_path.write_bytes(program)
        counts = Path(tmp) / "instructions.txt"
        trace_counts = Path(tmp) / "trace.txt"
        cycles = Path(tmp) / "cycles.txt"
        trace_cycles = Path(tmp) / "trace_cycles.txt"
        markers = marker_args(Path(firmware), trace_counts if trace else None)
        plugin_opt = ",".join([qemu_opt(str(plugin)), *markers, f"out={qemu_opt(str(counts))}",
                               *timing_args(board, cycles, trace_cycles if trace else None)])
        cmd = [str(qemu), "-M", board.qemu_machine, "-nographic", "-monitor", "none",
               "-semihosting-config", "enable=on,target=native", "-kernel", str(firmware),
               "-device", f"loader,file={prog_path},addr=0x{layout.program.origin:x},force-raw=on",
               "-plugin", plugin_opt]
        if weights is not None:
            w_path = Path(tmp) / "weights.mpw"
            w_path.write_bytes(weights)
            cmd[-2:-2] = ["-device", f"loader,file={w_path},addr=0x{layout.weights.origin:x},force-raw=on"]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise McuError(f"the interpreter firmware did not finish in {timeout_s:g} s on {board.qemu_machine}") \
                from exc
        console = proc.stdout.decode("utf-8", "replace")
        stderr = proc.stderr.decode("utf-8", "replace")
        if proc.returncode < 0 or any(line.startswith(f"{qemu.name}:") and "warning:" not in line
                                      for line in stderr.splitlines()):
            raise McuError(f"QEMU failed running the interpreter firmware (status {proc.returncode}):\n"
                           + "\n".join(stderr.strip().splitlines()[:6]))
        instructions = read_counts(counts)
        traced = read_counts(trace_counts)
        cycle_counts, traced_cycles = read_counts(cycles), read_counts(trace_cycles)
    methods, error = parse_program_console(console)
    return ProgramRun(exit_code=proc.returncode, console=console, instructions=instructions, methods=methods,
                      error=error, trace_instructions=traced, cycles=cycle_counts, trace_cycles=traced_cycles)
