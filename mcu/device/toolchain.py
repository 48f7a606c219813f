"""Compilers and the firmware build: C sources + a board -> a linked ELF.

The cross build is plain ``arm-none-eabi-gcc`` driven from Python (no make,
no CMake): render the board's linker script, compile every source in
parallel, link against newlib for memcpy/memset/libm, and read the sizes back
from the ELF. A build is skipped when a stamp in ``out_dir`` shows that the
compiler, flags, linker script, sources and every header they included are
unchanged, so callers can keep one ``out_dir`` per firmware as a cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from mcu import paths, progress
from mcu.device.boards import Board
from mcu.device.boot2 import seal_boot2
from mcu.device.objcache import Compile, compile_each, compiler_identity, file_digest, parse_depfile
from mcu.device.elf import STB_GLOBAL, STB_WEAK, STT_FUNC, ElfFile, read_elf
from mcu.errors import DoesNotFit, McuError
from mcu.device.stack import StackReport, bound as bound_stack, read_su, save_frames
from mcu.device.uf2 import ABSOLUTE_BLOCK_ADDRESS, write_uf2
from mcu.device.placement import COPY_DEFINE, WeightSection, fast_regions, place
from mcu.device.mapfile import object_section_bytes
import sys

CROSS_GCC = "arm-none-eabi-gcc"
CROSS_GCC_ENV = "MCU_ARM_GCC"
CROSS_INSTALL_HINT = (
    "install it with: sudo apt-get install --no-install-recommends "
    "gcc-arm-none-eabi libnewlib-arm-none-eabi"
)
HOST_CC_ENV = "MCU_HOST_CC"
HOST_INSTALL_HINT = "install it with: sudo apt-get install --no-install-recommends gcc libc6-dev"

COMMON_CFLAGS: tuple[str, ...] = (
    "-std=c11",
    "-O2",
    # Line tables and function descriptions (backtraces and breakpoints by line in a debugger) without
    # the local-variable information, which took a fifth of every firmware's compile time.
    "-g1",
    "-ffunction-sections",
    "-fdata-sections",
    "-Wall",
    "-Wextra",
    "-Werror",
)
# newlib-nano: same API, but its reentrancy block (pulled in by errno from
# libm) is ~120 bytes of .data instead of ~1.1 KB. Passed when compiling too,
# so newlib.h describes the library that is linked.
NEWLIB_SPECS = "--specs=nano.specs"
LINK_LIBS: tuple[str, ...] = ("-lm", "-lc", "-lgcc")
RUNTIME_SOURCES: tuple[str, ...] = ("mcu_status.c", "mcu_log.c", "mcu_platform_default.c")
# Writes <object>.su beside the object; the object's code and data are the same with it or without it.
STACK_USAGE_FLAG = "-fstack-usage"
# Bump when the build recipe changes in a way the stamp key cannot see.
_RECIPE_VERSION = "3"

Defines = Mapping[str, "str | int | None"]


@dataclass(frozen=True)
class Firmware:
    elf: Path
    map_path: Path
    flash_bytes: int  # bytes stored in flash: vectors, code, rodata, exidx, .data image
    ram_bytes: int  # .data + .bss + .mcu_arena + stack
    sections: dict[str, int]  # size of every section that occupies target memory
    symbols: dict[str, int]  # global symbols -> address (Thumb bit cleared on functions)
    # Bytes used in every memory region of the board, by region name ("flash",
    # "ram", and extra regions such as the AN547's "qspi" that holds .rodata).
    region_bytes: dict[str, int] = field(default_factory=dict)
    uf2: Path | None = None  # written next to the ELF for boards flashed as UF2 (deploy.method = "uf2")
    # The worst-case stack the linker script reserves (builds with stack_usage=True; see mcu/device/stack.py).
    stack: StackReport | None = None
    # --weights-in fast: bytes of constant tensors each faster memory took (by region name; mcu/device/placement.py).
    weights_placed: dict[str, int] = field(default_factory=dict)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_cross_compiler() -> Path:
    """``arm-none-eabi-gcc`` from ``$MCU_ARM_GCC`` or ``PATH``."""
    override = os.environ.get(CROSS_GCC_ENV)
    if override:
        path = Path(override)
        if not _executable(path):
            raise McuError(
                f"{CROSS_GCC} not found at {path} (set by {CROSS_GCC_ENV})",
                hint=f"unset {CROSS_GCC_ENV} or {CROSS_INSTALL_HINT}",
            )
        return path
    found = shutil.which(CROSS_GCC)
    if found is None:
        raise McuError(f"{CROSS_GCC} not found on PATH", hint=CROSS_INSTALL_HINT)
    return Path(found)


def find_host_compiler() -> Path:
    """The host C compiler: ``$MCU_HOST_CC``, else ``cc``, ``gcc`` or ``clang`` on PATH."""
    override = os.environ.get(HOST_CC_ENV)
    if override:
        path = Path(override)
        if not _executable(path):
            raise McuError(
                f"host C compiler not found at {path} (set by {HOST_CC_ENV})",
                hint=f"unset {HOST_CC_ENV} or {HOST_INSTALL_HINT}",
            )
        return path
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found is not None:
            return Path(found)
    raise McuError("no host C compiler (cc) found on PATH", hint=HOST_INSTALL_HINT)


def port_dirs(board: Board) -> list[Path]:
    """``ports/cortex-m``, then each folder on the way to the board's own port folder: a chip family's
    shared code sits one level up from its chips (``port = "rp2/rp2350"``: ``ports/rp2`` holds what the
    RP2040 and RP2350 share, ``ports/rp2/rp2350`` the chip's own files)."""
    root = paths.ports_dir()
    own = root / board.port
    if not own.is_dir():
        raise McuError(
            f"board '{board.name}' uses port '{board.port}' but {own} does not exist",
            hint=f"fix 'port' in {board.path}",
        )
    parts = Path(board.port).parts
    return [root / "cortex-m", *(root.joinpath(*parts[: i + 1]) for i in range(len(parts)))]


def port_sources(board: Board) -> list[Path]:
    """The C files every firmware for ``board`` links: ports and runtime basics."""
    sources = [p for d in port_dirs(board) for p in sorted(d.glob("*.c"))]
    sources += [paths.runtime_dir() / "src" / name for name in RUNTIME_SOURCES]
    return sources


def board_defines(board: Board) -> dict[str, str | int | None]:
    """Preprocessor values the ports read from the board file."""
    defines: dict[str, str | int | None] = {"MCU_CLOCK_HZ": f"{board.clock_hz}u",
                                            "MCU_CONSOLE_BAUD": f"{board.console_baud}u",
                                            # Our linker scripts have NOLOAD arena sections (not
                                            # zeroed at reset); an exported library defaults to .bss.
                                            "MCU_ARENA_SECTIONS": None}
    if board.uart_base is not None:
        defines["MCU_UART_BASE"] = f"0x{board.uart_base:08x}u"
    if board.l1_cache is not None:
        defines["MCU_CM_L1_CACHES"] = None  # the start-up code enables them
    return defines


def compile_flags(
    board: Board, include_dirs: Sequence[Path] = (), defines: Defines | None = None
) -> list[str]:
    """Flags for compiling one C file for ``board`` (without -c/-o)."""
    merged = board_defines(board)
    # One -D per name: a repeated -D is a redefinition warning, fatal under -Werror.
    merged.update(defines or {})
    flags = [*board.cpu_flags, NEWLIB_SPECS, *COMMON_CFLAGS]
    for d in [paths.runtime_dir() / "include", *port_dirs(board), *include_dirs]:
        flags.append(f"-I{d}")
    for key, value in merged.items():
        flags.append(f"-D{key}" if value is None else f"-D{key}={value}")
    return flags


def render_linker_script(board: Board, stack_bytes: int | None = None,
                         weights: Sequence[WeightSection] = ()) -> str:
    """``stack_bytes``: the stack to reserve (default: the board's fixed ``stack_bytes``); ``weights``: the
    sections of constant arrays in faster memories (mcu/device/placement.py; none: all stay in .rodata)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(paths.ports_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template("cortex-m/linker.ld.j2").render(
        board_name=board.name,
        flash_origin=board.flash.origin,
        flash_length=board.flash.length,
        ram_origin=board.ram.origin,
        ram_length=board.ram.length,
        extra_regions=board.extra_regions,
        rodata_region=board.region_for("rodata").linker_name,
        stack_bytes=board.stack_bytes if stack_bytes is None else stack_bytes,
        weight_sections=list(weights),
    )


def build_recipe(script: str, board: Board, stack_usage: bool) -> str:
    """What a firmware build's stamp keys on besides sources and flags: the linker script, the UF2 family and,
    when the build reports its stack, the analyser's own source (the report is an output of the build too,
    so a changed analyser must not reuse an old report)."""
    recipe = script + f"\nuf2={board.uf2_family}"
    if stack_usage:
        recipe += f"\nstack-analysis={file_digest(Path(bound_stack.__code__.co_filename))}"
    return recipe


def _stamp_key(
    gcc: Path, sources: Sequence[Path], cflags: Sequence[str], ldflags: Sequence[str], script: str
) -> str:
    h = hashlib.sha256()
    for part in (_RECIPE_VERSION, compiler_identity(gcc), *cflags, "--", *ldflags, "--", script):
        h.update(part.encode() + b"\0")
    for src in sources:
        h.update(str(src).encode() + b"\0" + file_digest(src).encode() + b"\0")
    return h.hexdigest()


def _stamp_valid(stamp_path: Path, key: str, outputs: Sequence[Path]) -> bool:
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        return False
    if stamp.get("key") != key or not all(p.is_file() for p in outputs):
        return False
    try:
        return all(file_digest(Path(dep)) == digest for dep, digest in stamp["deps"].items())
    except (OSError, KeyError, AttributeError):
        return False


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _run(cmd: Sequence[str], what: str, hint: str | None = None) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if proc.returncode != 0:
        output = (proc.stderr + proc.stdout).strip()
        raise McuError(f"{what} failed:\n{output}", hint=hint)


_REGION_OVERFLOW = re.compile(r"region `(\w+)' overflowed by (\d+) bytes")


def _link_error(board: Board, name: str, output: str) -> McuError:
    """One line with both numbers when a memory region overflows, else the linker's own output."""
    m = _REGION_OVERFLOW.search(output)
    region = next((r for r in board.regions if m and r.linker_name == m.group(1)), None)
    if m and region is not None:
        over = int(m.group(2))
        what = {"flash": "flash", "ram": f"RAM (including a {board.stack_bytes} B stack)"}.get(
            region.name, f"{region.name} memory (it holds {', '.join(region.holds) or 'nothing'})")
        return DoesNotFit(
            f"firmware does not fit {board.name}: it needs {region.length + over} B of {what}, the board has "
            f"{region.length} B ({over} B too many)",
            hint="use a smaller model or quantize to int8", region=region.name, need=region.length + over,
            capacity=region.length)
    hint = None
    if "RAM" in output and ("overflow" in output or "overlaps" in output):
        hint = (f"the program needs more RAM than {board.name} has "
                f"({board.ram.length} bytes including a {board.stack_bytes}-byte stack)")
    return McuError(f"linking {name} for {board.name} failed:\n{output}", hint=hint)


def find_cross_objdump(gcc: Path) -> Path:
    """The objdump of the same toolchain as ``gcc``."""
    if gcc.name.endswith("gcc"):
        sibling = gcc.with_name(gcc.name[:-3] + "objdump")
        if _executable(sibling):
            return sibling
    found = shutil.which("arm-none-eabi-objdump")
    if found is None:
        raise McuError("arm-none-eabi-objdump not found (the stack analysis needs it)", hint=CROSS_INSTALL_HINT)
    return Path(found)


def _firmware_from_elf(board: Board, elf_path: Path, map_path: Path, uf2_path: Path | None,
                       stack_path: Path | None = None) -> Firmware:
    elf: ElfFile = read_elf(elf_path)
    alloc = [s for s in elf.sections if s.alloc]
    flash_bytes = sum(seg.filesz for seg in elf.load_segments() if board.flash.contains(seg.paddr))
    ram_bytes = sum(s.size for s in alloc if board.ram.contains(s.addr))
    region_bytes = {"flash": flash_bytes, "ram": ram_bytes}
    for region in board.extra_regions:
        # Extra regions hold loaded read-only data: count what is stored there.
        region_bytes[region.name] = sum(seg.filesz for seg in elf.load_segments() if region.contains(seg.paddr))
    placed = {s.name[len(".mcu_weights_"):]: s.size for s in alloc if s.name.startswith(".mcu_weights_")}
    symbols: dict[str, int] = {}
    for sym in elf.symbols:
        if sym.defined and sym.bind in (STB_GLOBAL, STB_WEAK):
            symbols[sym.name] = sym.value & ~1 if sym.type == STT_FUNC else sym.value
    return Firmware(
        elf=elf_path,
        map_path=map_path,
        flash_bytes=flash_bytes,
        ram_bytes=ram_bytes,
        sections={s.name: s.size for s in alloc},
        symbols=symbols,
        region_bytes=region_bytes,
        uf2=uf2_path,
        stack=StackReport.from_json(json.loads(stack_path.read_text())) if stack_path is not None else None,
        weights_placed=placed,
    )


def build_firmware(
    board: Board,
    sources: Sequence[Path],
    include_dirs: Sequence[Path],
    out_dir: Path,
    name: str = "firmware",
    defines: Defines | None = None,
    stack_usage: bool = False,
    fast_weights: Sequence[str] | None = None,
    fast_objects: Sequence[str] = (),
) -> Firmware:
    """Compile ``sources`` with the board's port and runtime basics into ``out_dir/<name>.elf``.

    ``stack_usage``: compile with ``-fstack-usage``, bound the worst-case stack over the call graph
    (mcu/device/stack.py; an indirect call or recursion is refused) and reserve that plus a margin instead of
    the board's fixed ``stack_bytes``.

    ``fast_weights``: the constant arrays to move into faster memories where they fit, most important first
    (``--weights-in fast``, mcu/device/placement.py); the firmware is linked once more with them placed.
    ``fast_objects``: source stems whose whole ``.rodata`` goes there before them (the model code's).

    Safe to call concurrently for the same ``out_dir``: each build works in a
    private temporary folder and moves finished files into place atomically.
    """
    gcc = find_cross_compiler()
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    all_sources = _firmware_sources(board, sources)
    weights = fast_regions(board) if fast_weights is not None else []
    if any(w.copied for w in weights):
        defines = {**(defines or {}), COPY_DEFINE: None}
    cflags = compile_flags(board, [Path(d).resolve() for d in include_dirs], defines)
    if stack_usage:
        cflags.append(STACK_USAGE_FLAG)
    script = render_linker_script(board, weights=weights)
    if weights:
        script += "\n/* fast weights: " + " ".join([*fast_objects, *(fast_weights or ())]) + " */"
    ldflags = [*board.cpu_flags, NEWLIB_SPECS, "-nostartfiles", "-Wl,--gc-sections"]
    out = _BuildOutputs.of(board, out_dir, name, stack_usage)
    key = _stamp_key(gcc, all_sources, cflags, ldflags, build_recipe(script, board, stack_usage))
    if _stamp_valid(out.stamp, key, out.checked()):
        progress.note("compile", "up to date")
        progress.note("link", "up to date")
        return _firmware_from_elf(board, out.elf, out.map_file, out.uf2, out.stack)
    # Two processes building the same image into one folder (test workers sharing the cache) build it once:
    # the second waits here and finds the first's stamp valid.
    with _building(out_dir):
        _remove_dead_builds(out_dir, name)
        if not _stamp_valid(out.stamp, key, out.checked()):
            # The pid in the name lets a later build tell a killed build's leftovers from a running one's.
            work = Path(tempfile.mkdtemp(prefix=f".{name}-build-{os.getpid()}-", dir=out_dir))
            try:
                (work / out.ld.name).write_text(script)
                objects = _compile_objects(gcc, board, cflags, all_sources, work, out_dir)
                _link_firmware(gcc, board, name, ldflags, objects, work, out,
                               (list(fast_weights or ()), list(fast_objects)) if weights else None)
                _install(board, work, out, key, _dependency_digests(objects))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return _firmware_from_elf(board, out.elf, out.map_file, out.uf2, out.stack)


@contextmanager
def _building(out_dir: Path) -> Iterator[None]:
    """The lock of the builds into ``out_dir``: ``flock`` on the folder itself (no file left beside the outputs),
    released when the process ends, even when killed."""
    fd = os.open(out_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _BuildOutputs:
    """The files one firmware build puts in its folder, all named ``<name>.*``."""

    elf: Path
    map_file: Path
    ld: Path
    stamp: Path
    uf2: Path | None  # boards flashed over USB mass storage get the UF2 image next to the ELF
    stack: Path | None  # the stack report and its frames, for builds that bound their stack
    frames: Path | None

    @classmethod
    def of(cls, board: Board, out_dir: Path, name: str, stack_usage: bool) -> _BuildOutputs:
        return cls(elf=out_dir / f"{name}.elf", map_file=out_dir / f"{name}.map", ld=out_dir / f"{name}.ld",
                   stamp=out_dir / f"{name}.stamp.json",
                   uf2=out_dir / f"{name}.uf2" if board.deploy_method == "uf2" else None,
                   stack=out_dir / f"{name}.stack.json" if stack_usage else None,
                   frames=out_dir / f"{name}.frames.json" if stack_usage else None)

    def checked(self) -> tuple[Path, ...]:
        """The outputs a valid stamp requires to be in place."""
        return tuple(p for p in (self.elf, self.map_file, self.uf2, self.stack, self.frames) if p is not None)


def _firmware_sources(board: Board, sources: Sequence[Path]) -> list[Path]:
    """The caller's sources, then the board's port and runtime basics, each once."""
    all_sources: list[Path] = []
    for src in [*map(Path, sources), *port_sources(board)]:
        src = src.resolve()
        if not src.is_file():
            raise McuError(f"source file {src} does not exist")
        if src not in all_sources:  # a caller may list a runtime file the build adds anyway
            all_sources.append(src)
    return all_sources


def shared_objects(board: Board, sources: Sequence[Path], work: Path) -> list[Path]:
    """``sources`` (outside any build folder: kernels, ports, the runtime) compiled into ``work`` as a firmware
    for ``board`` without definitions of its own compiles them (the interpreter's with every kernel): the
    same flags, so each object comes from the shared cache when such a build compiled it already, and such a
    build takes it from there when this compiled it first."""
    gcc = find_cross_compiler()
    units = [Compile(src, _shared_flags(compile_flags(board), ()), True) for src in sources]
    return compile_each(gcc, units, work, lambda cmd, src: _run(cmd, f"compiling {src} for {board.name}"))


def _shared_flags(cflags: Sequence[str], own: Sequence[str]) -> list[str]:
    # Shared objects are compiled with -fstack-usage whether this build bounds its stack or not (the code is the
    # same), so the builds that do and those that do not take one object from the cache.
    return [f for f in cflags if f not in own] + ([] if STACK_USAGE_FLAG in cflags else [STACK_USAGE_FLAG])


def _compile_objects(gcc: Path, board: Board, cflags: Sequence[str], sources: Sequence[Path],
                     work: Path, out_dir: Path) -> list[Path]:
    """Every source compiled in parallel into ``work``, each with its ``-MMD`` dependency file.

    A source outside ``out_dir`` (kernels, ports, the runtime, a test's own file) is compiled without the
    include folders inside ``out_dir``: it cannot use the generated model's headers, so its flags are
    the same for every model on the board and its object comes from the shared cache when another build
    compiled it already."""
    own = [f for f in cflags if f.startswith("-I") and Path(f[2:]).resolve().is_relative_to(out_dir)]
    shared_flags = _shared_flags(cflags, own)
    units = [Compile(src, cflags, False) if src.is_relative_to(out_dir) else Compile(src, shared_flags, True)
             for src in sources]
    with progress.stage("compile"):
        return compile_each(gcc, units, work, lambda cmd, src: _run(cmd, f"compiling {src} for {board.name}"))


def _link_firmware(gcc: Path, board: Board, name: str, ldflags: Sequence[str], objects: Sequence[Path],
                   work: Path, out: _BuildOutputs, fast: tuple[list[str], list[str]] | None = None) -> None:
    """Link the objects into ``work`` with the linker script there. A build that bounds its stack bounds it
    on the image linked with the board's fixed stack, then links again reserving only that (the code is the
    same: only __stack_size__ and the symbols after it move) and saves the report and frames in ``work``."""
    tmp_ld = work / out.ld.name
    tmp_elf = work / out.elf.name
    link = [str(gcc), *ldflags, f"-T{tmp_ld}", f"-Wl,-Map={work / out.map_file.name}",
            *map(str, objects), *LINK_LIBS, "-o", str(tmp_elf)]
    weights = fast_regions(board) if fast is not None else []
    with progress.stage("link"):
        _run_link(link, board, name)
    reserved: int | None = None
    if out.stack is not None:
        frames = read_su(sorted(work.glob("*.su")))
        stack = bound_stack(tmp_elf, frames, find_cross_objdump(gcc))
        reserved = stack.reserved_bytes
        tmp_ld.write_text(render_linker_script(board, reserved, weights))
        _run_link(link, board, name)
        stack.save(work / out.stack.name)
        assert out.frames is not None
        save_frames(frames, work / out.frames.name)
    if fast is not None and weights:
        # Room is what the link with every constant in read-only memory left free; the code is the same
        # in the next link, so the stack bound above holds for it too.
        symbols, stems = fast
        map_path = work / out.map_file.name
        placed = place(board, read_elf(tmp_elf), symbols,
                       [(stem, object_section_bytes(map_path, ".rodata", stem)) for stem in stems])
        tmp_ld.write_text(render_linker_script(board, reserved, placed))
        _run_link(link, board, name)


def _run_link(command: Sequence[str], board: Board, name: str) -> None:
    proc = subprocess.run(list(command), capture_output=True, text=True)
    if proc.returncode != 0:
        raise _link_error(board, name, (proc.stderr + proc.stdout).strip())


def _dependency_digests(objects: Sequence[Path]) -> dict[str, str]:
    """Every file the compiler read (from the objects' ``-MMD`` files) -> its SHA-256, for the stamp."""
    deps: dict[str, str] = {}
    for obj in objects:
        for dep in parse_depfile(obj.with_suffix(".d").read_text()):
            dep_path = Path(dep).resolve()
            deps.setdefault(str(dep_path), file_digest(dep_path))
    return deps


def _install(board: Board, work: Path, out: _BuildOutputs, key: str, deps: dict[str, str]) -> None:
    """Finish the image (boot block CRC, UF2) and move every output from ``work`` into place."""
    tmp_elf = work / out.elf.name
    seal_boot2(tmp_elf)  # RP2040: the boot block's CRC32 (no-op for images without one)
    if out.uf2 is not None:
        assert board.uf2_family is not None  # the board loader requires it for "uf2"
        # As the Pico SDK does: an RP2350 image in flash opens with the RP2350-E10 block, so that an A2
        # chip's boot ROM writes it where it runs from; RP2040 images get none.
        write_uf2(tmp_elf, work / out.uf2.name, board.uf2_family, ABSOLUTE_BLOCK_ADDRESS)
        os.replace(work / out.uf2.name, out.uf2)
    os.replace(work / out.ld.name, out.ld)
    os.replace(work / out.map_file.name, out.map_file)
    os.replace(tmp_elf, out.elf)
    if out.stack is not None and out.frames is not None:
        os.replace(work / out.stack.name, out.stack)
        os.replace(work / out.frames.name, out.frames)
    # Written last: a stamp never vouches for outputs that are not in place.
    _atomic_write(out.stamp, json.dumps({"key": key, "deps": deps}, indent=1))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _remove_dead_builds(out_dir: Path, name: str) -> None:
    """Remove the work folders of builds into ``out_dir`` whose process is gone (killed by SIGKILL or a power
    cut, which no handler sees); folders without a pid (older builds) are removed too."""
    for work in out_dir.glob(f".{name}-build-*"):
        pid_text = work.name[len(f".{name}-build-"):].split("-", 1)[0]
        if pid_text.isdigit() and "-" in work.name[len(f".{name}-build-"):] and _pid_alive(int(pid_text)):
            continue
        if work.is_dir():
            shutil.rmtree(work, ignore_errors=True)


# --- Linux boards (kind = "linux"): the harness as a hosted executable ------------------------------------

LINUX_CFLAGS: tuple[str, ...] = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror")
LINUX_INSTALL_HINT = "run scripts/setup (and scripts/setup --arm64 for the arm64-linux board)"


def linux_sysroot(board: Board) -> Path | None:
    """The board's target libraries (arm64 XNNPACK), inside the Python environment; None for native boards."""
    if not board.linux_sysroot:
        return None
    return Path(os.environ.get("MCU_ARM64_SYSROOT", str(Path(sys.prefix) / board.linux_sysroot)))


def linux_link_flags(board: Board, libraries: Sequence[str]) -> list[str]:
    """Include, library and run-path flags for a delegate's libraries on ``board``."""
    root = linux_sysroot(board)
    if root is None or not libraries:
        return list(libraries)
    if not (root / "usr" / "include" / "xnnpack.h").is_file():
        raise McuError(f"{board.name}: no target XNNPACK in {root}", hint=LINUX_INSTALL_HINT)
    lib = root / "usr" / "lib" / board.linux_multiarch
    # --disable-new-dtags: an RPATH (not RUNPATH) also serves libXNNPACK's own dependency libcpuinfo.so.0.
    return [f"-I{root / 'usr' / 'include'}", f"-L{lib}", f"-Wl,--disable-new-dtags,-rpath,{lib}", *libraries]


def build_linux_executable(board: Board, files: Mapping[str, str], sources: Sequence[Path],
                           libraries: Sequence[str], include_dirs: Sequence[str] = ()) -> Path:
    """Compile generated files (name -> text) and runtime ``sources`` into one executable for a Linux
    board; cached by a hash of everything that goes in."""
    cc = shutil.which(board.linux_cc)
    if cc is None:
        raise McuError(f"{board.name}: compiler {board.linux_cc} not found", hint=LINUX_INSTALL_HINT)
    port = paths.ports_dir() / board.port
    all_sources = [*sources, *sorted(port.glob("*.c"))]
    flags = [*LINUX_CFLAGS, *board.cpu_flags, f"-I{paths.runtime_dir() / 'include'}",
             *(f"-I{d}" for d in include_dirs)]
    link = linux_link_flags(board, libraries)
    h = hashlib.sha256(" ".join([cc, *flags, *link]).encode())
    for name in sorted(files):
        h.update(name.encode() + files[name].encode())
    for src in all_sources:
        h.update(src.read_bytes())
    for header in [*sorted((paths.runtime_dir() / "include").rglob("*.h")), *sorted(paths.kernels_dir().rglob("*.h"))]:
        h.update(header.read_bytes())
    target = paths.cache_dir() / board.name / f"harness-{h.hexdigest()[:24]}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    shared = [*flags, *(f for f in link if f.startswith("-I"))]
    with tempfile.TemporaryDirectory(prefix="mcu-linux-") as tmp:
        tmpdir = Path(tmp)
        for name, text in files.items():
            (tmpdir / name).write_text(text)
        units = [Compile(tmpdir / n, [*shared, f"-I{tmpdir}"], False) for n in files if n.endswith(".c")]
        units += [Compile(Path(src), shared, True) for src in all_sources]

        def run(cmd: list[str], src: Path) -> None:
            _run(cmd, f"{board.name} build of the harness ({src.name})", LINUX_INSTALL_HINT)

        objects = compile_each(cc, units, tmpdir, run)
        out = tmpdir / "harness"
        run([cc, *map(str, objects), "-o", str(out), *(f for f in link if not f.startswith("-I")), "-lm"], out)
        os.replace(out, target)
    return target
