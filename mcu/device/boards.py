"""Board descriptions: one TOML file per board in ``boards/``.

A board file says which core to compile for, where flash and RAM are, how the
console is wired and how firmware runs (simulator or a real device). Every
other module reads boards through :func:`load_board`, so a malformed file is
reported once, here, naming the file and the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcu import paths
from mcu.errors import McuError

_U32_MAX = 0xFFFF_FFFF


# What a board may put in one of its extra memory regions (``holds`` in the
# board file): read-only data, which outgrows a small code memory (fp32
# weights, bundled test vectors), and tensor arenas beyond the main RAM's
# (see mcu.plan.memory.plan_memory for the policy that fills them).
MOVABLE_SECTIONS: tuple[str, ...] = ("rodata", "arena")

# Where a model's constant tensors go (``--weights-in``, the board file's ``weights_in``): "flash", read in
# place from the memory that holds read-only data; "fast", each into the fastest memory with room left
# (mcu/device/placement.py), copied there at boot when that memory is RAM.
WEIGHTS_IN: tuple[str, ...] = ("flash", "fast")


@dataclass(frozen=True)
class MemoryRegion:
    """A contiguous address range: ``[origin, origin + length)``."""

    name: str
    origin: int
    length: int
    holds: tuple[str, ...] = ()  # MOVABLE_SECTIONS placed here instead of flash (extra regions only)
    # Timing (docs/cycles.md): cycles the core waits per access beyond a zero-wait-state memory, at
    # the board's clock; per 32-bit instruction fetch word when fetches differ (a prefetch buffer);
    # and the fraction of accesses a cache serves without waiting (XIP flash behind a cache).
    wait_states: float = 0.0
    fetch_wait_states: float | None = None
    hit_rate: float = 0.0
    fetch_hit_rate: float | None = None  # instruction fetches' own hit rate (default: hit_rate)
    # A cache in front of the memory, simulated exactly instead of a hit rate (``cache_bytes`` > 0):
    # its size, ways and line length in bytes; then ``wait_states`` is what a miss costs.
    cache_bytes: int = 0
    cache_ways: int = 1
    cache_line: int = 0
    # A separate cache for data accesses (a flash accelerator's data cache, ``data_cache_bytes`` > 0):
    # then ``cache_*`` serves instruction fetches alone, and a data miss also costs ``wait_states``.
    data_cache_bytes: int = 0
    data_cache_ways: int = 1
    data_cache_line: int = 0
    # Behind the core's own L1 caches (``Board.l1_cache``, which the start-up code enables): fetches go
    # through its instruction cache, data accesses through its data cache, both shared with every other
    # such memory; then ``wait_states`` is what a miss costs.
    l1_cached: bool = False

    @property
    def data_millicycles(self) -> int:
        """Thousandths of a cycle a data access here costs on average beyond a zero-wait-state memory."""
        return round(1000 * self.wait_states * (1.0 - self.hit_rate))

    @property
    def fetch_millicycles(self) -> int:
        """Thousandths of a cycle an instruction fetch word costs on average beyond zero wait states."""
        ws = self.wait_states if self.fetch_wait_states is None else self.fetch_wait_states
        hit = self.hit_rate if self.fetch_hit_rate is None else self.fetch_hit_rate
        return round(1000 * ws * (1.0 - hit))

    @property
    def linker_name(self) -> str:
        """The MEMORY name in the rendered linker script (FLASH, RAM, QSPI, ...)."""
        return self.name.upper().replace("-", "_")

    @property
    def end(self) -> int:
        return self.origin + self.length

    def contains(self, address: int) -> bool:
        return self.origin <= address < self.end


@dataclass(frozen=True)
class L1Cache:
    """A core's split L1 caches: (bytes, ways, line) of the instruction and the data cache."""

    icache: tuple[int, int, int]
    dcache: tuple[int, int, int]


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    core: str
    cpu_flags: tuple[str, ...]
    fpu: str | None  # None when the core has no FPU ("none" in the file)
    dsp: bool
    mve: bool
    clock_hz: int
    port: str  # folder under ports/ with the board-specific platform code
    stack_bytes: int
    flash: MemoryRegion
    ram: MemoryRegion
    console_kind: str
    uart_base: int | None
    sim_kind: str | None  # e.g. "qemu"; None for boards that only run on hardware
    qemu_machine: str | None
    deploy_method: str
    path: Path
    # Memories beyond flash and ram that the linker may use (``[memory.<name>]``
    # with ``holds``), e.g. the 8 MB QSPI of the MPS3 AN547 for weights.
    extra_regions: tuple[MemoryRegion, ...] = ()
    uf2_family: int | None = None  # UF2 family ID for boards flashed with deploy.method = "uf2"
    console_baud: int = 115200
    # "mcu" (bare metal: linker script, QEMU system machine or a device) or "linux" (a CPU running
    # Linux: the harness is a hosted executable, built by ``linux_cc`` and run natively or under
    # ``linux_run``, e.g. qemu-aarch64).
    kind: str = "mcu"
    linux_cc: str = ""
    linux_run: tuple[str, ...] = ()
    linux_sysroot: str = ""  # inside the Python environment (sys.prefix): the target's XNNPACK (setup --arm64)
    linux_multiarch: str = ""  # Debian's library folder name under the sysroot, e.g. aarch64-linux-gnu
    # A QEMU board with the same core and compiler flags (``sim.twin``): a hardware-only board's cycle
    # prediction runs the model there with this board's memory timing and clock (mcu.device.timing).
    sim_twin: str | None = None
    weights_in: str = "flash"  # the default of ``--weights-in`` on this board (WEIGHTS_IN)
    # The core's L1 caches (``[l1_cache]``, e.g. the Cortex-M55's): the start-up code enables them, and the
    # timing model sends the accesses of ``l1_cached`` memories through them (docs/cycles.md).
    l1_cache: L1Cache | None = None

    @property
    def is_linux(self) -> bool:
        return self.kind == "linux"

    def arena_regions(self) -> list[tuple[str, int]]:
        """(region, bytes an arena may take there): the main RAM after the stack, then each region holding
        arenas, in the board file's order."""
        return [("ram", self.ram.length - self.stack_bytes)] + [
            (r.name, r.length) for r in self.extra_regions if "arena" in r.holds]

    def ram_regions(self) -> list[tuple[int, int]]:
        """[start, end) of every writable memory: the main RAM and each region holding arenas."""
        return [(r.origin, r.end) for r in (self.ram, *self.extra_regions) if r is self.ram or "arena" in r.holds]

    def region_for(self, section: str) -> MemoryRegion:
        """Where output section ``section`` (e.g. "rodata") is placed: an extra region that holds it, else flash."""
        return next((r for r in self.extra_regions if section in r.holds), self.flash)

    @property
    def regions(self) -> tuple[MemoryRegion, ...]:
        return (self.flash, self.ram, *self.extra_regions)


class _Reader:
    """Typed access to a parsed TOML table; errors name the file and dotted key."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self._path = path
        self._data = data

    def fail(self, key: str, problem: str) -> McuError:
        return McuError(
            f"board file {self._path}: key '{key}' {problem}",
            hint="see boards/mps2-an505.toml for the expected layout",
        )

    def _lookup(self, key: str) -> tuple[bool, Any]:
        node: Any = self._data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False, None
            node = node[part]
        return True, node

    def str_(self, key: str) -> str:
        found, value = self._lookup(key)
        if not found:
            raise self.fail(key, "is missing")
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def opt_str(self, key: str) -> str | None:
        found, _ = self._lookup(key)
        return self.str_(key) if found else None

    def bool_(self, key: str) -> bool:
        found, value = self._lookup(key)
        if not found:
            raise self.fail(key, "is missing")
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def opt_bool(self, key: str) -> bool:
        return self.bool_(key) if self._lookup(key)[0] else False

    def int_(self, key: str, minimum: int = 0, maximum: int = _U32_MAX) -> int:
        found, value = self._lookup(key)
        if not found:
            raise self.fail(key, "is missing")
        # bool is an int subclass; `true` is never a meaningful size or address.
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {value!r}")
        if not minimum <= value <= maximum:
            raise self.fail(key, f"must be between {minimum:#x} and {maximum:#x}, got {value:#x}")
        return value

    def opt_int(self, key: str) -> int | None:
        found, _ = self._lookup(key)
        return self.int_(key) if found else None

    def str_list(self, key: str) -> tuple[str, ...]:
        found, value = self._lookup(key)
        if not found:
            raise self.fail(key, "is missing")
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and v for v in value)
        ):
            raise self.fail(key, f"must be a non-empty list of strings, got {value!r}")
        return tuple(value)

    def region(self, name: str) -> MemoryRegion:
        key = f"memory.{name}"
        origin = self.int_(f"{key}.origin")
        length = self.int_(f"{key}.length", minimum=1)
        if origin + length - 1 > _U32_MAX:
            raise self.fail(key, "extends past the 32-bit address space")
        holds: tuple[str, ...] = ()
        if name not in ("flash", "ram") and self._lookup(f"{key}.holds")[0]:
            holds = self.str_list(f"{key}.holds")
            unknown = [h for h in holds if h not in MOVABLE_SECTIONS]
            if unknown:
                raise self.fail(f"{key}.holds", f"names {unknown}; it may only hold {list(MOVABLE_SECTIONS)}")
        wait = self.number(f"{key}.wait_states", 0.0)
        fetch_found = self._lookup(f"{key}.fetch_wait_states")[0]
        fetch_wait = self.number(f"{key}.fetch_wait_states", 0.0) if fetch_found else None
        hit_rate = self.number(f"{key}.hit_rate", 0.0, maximum=1.0)
        fetch_hit = (self.number(f"{key}.fetch_hit_rate", 0.0, maximum=1.0)
                     if self._lookup(f"{key}.fetch_hit_rate")[0] else None)
        cache = self.cache_geometry(key, "cache")
        data_cache = self.cache_geometry(key, "data_cache")
        if data_cache[0] and not cache[0]:
            raise self.fail(f"{key}.data_cache_bytes", "needs cache_bytes: the instruction side's cache")
        return MemoryRegion(name=name, origin=origin, length=length, holds=holds, wait_states=wait,
                            fetch_wait_states=fetch_wait, hit_rate=hit_rate, fetch_hit_rate=fetch_hit,
                            cache_bytes=cache[0], cache_ways=cache[1], cache_line=cache[2],
                            data_cache_bytes=data_cache[0], data_cache_ways=data_cache[1],
                            data_cache_line=data_cache[2], l1_cached=self.opt_bool(f"{key}.l1_cached"))

    def cache_geometry(self, key: str, prefix: str) -> tuple[int, int, int]:
        """``<prefix>_bytes``, ``_ways`` and ``_line`` of a memory's cache; (0, 1, 0) when it has none."""
        if not self._lookup(f"{key}.{prefix}_bytes")[0]:
            return (0, 1, 0)
        cache = (self.int_(f"{key}.{prefix}_bytes", minimum=1), self.int_(f"{key}.{prefix}_ways", minimum=1),
                 self.int_(f"{key}.{prefix}_line", minimum=1))
        if cache[2] & (cache[2] - 1) or cache[0] % (cache[1] * cache[2]):
            raise self.fail(f"{key}.{prefix}_bytes", "must be ways x sets x line, with a power-of-two line")
        return cache

    def number(self, key: str, default: float, maximum: float = 1000.0) -> float:
        """An optional non-negative number (integer or float) no larger than ``maximum``."""
        found, value = self._lookup(key)
        if not found:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"must be a number, got {value!r}")
        if not 0 <= value <= maximum:
            raise self.fail(key, f"must be between 0 and {maximum:g}, got {value!r}")
        return float(value)

    def table_keys(self, key: str) -> list[str]:
        found, value = self._lookup(key)
        if not found:
            return []
        if not isinstance(value, dict):
            raise self.fail(key, "must be a table")
        return list(value)


def _parse(path: Path) -> Board:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise McuError(f"board file {path} is not valid TOML: {exc}") from exc
    r = _Reader(path, data)

    name = r.str_("name")
    if name != path.stem:
        # load_board finds files by name; a mismatch would make the board unreachable.
        raise r.fail("name", f"must match the file name '{path.stem}', got '{name}'")
    fpu = r.str_("fpu")
    flash = r.region("flash")
    ram = r.region("ram")
    extra = tuple(r.region(n) for n in r.table_keys("memory") if n not in ("flash", "ram"))
    regions = (flash, ram, *extra)
    for i, a in enumerate(regions):
        for b in regions[i + 1:]:
            if a.origin < b.end and b.origin < a.end:
                raise r.fail("memory", f"has overlapping {a.name} and {b.name} regions")
    for section in ("rodata",):  # several regions may hold arenas, one each
        holders = [x.name for x in extra if section in x.holds]
        if len(holders) > 1:
            raise r.fail("memory", f"has more than one region holding {section}: {holders}")
    l1_cache = None
    if r.table_keys("l1_cache"):
        l1_cache = L1Cache(icache=r.cache_geometry("l1_cache", "icache"), dcache=r.cache_geometry("l1_cache", "dcache"))
        if not (l1_cache.icache[0] and l1_cache.dcache[0]):
            raise r.fail("l1_cache", "needs icache_bytes and dcache_bytes (with their _ways and _line)")
    for region in regions:
        if region.l1_cached and l1_cache is None:
            raise r.fail(f"memory.{region.name}.l1_cached", "needs the board's [l1_cache] table")
        if region.l1_cached and (region.cache_bytes or region.hit_rate or region.fetch_hit_rate):
            raise r.fail(f"memory.{region.name}.l1_cached", "excludes a cache or hit rate of the memory's own")
    stack_bytes = r.int_("stack_bytes", minimum=256, maximum=ram.length)
    if stack_bytes % 8:
        # AAPCS requires an 8-byte aligned stack at public interfaces.
        raise r.fail("stack_bytes", f"must be a multiple of 8, got {stack_bytes}")

    sim_kind = r.opt_str("sim.kind")
    qemu_machine = r.opt_str("sim.machine")
    if sim_kind == "qemu" and qemu_machine is None:
        raise r.fail("sim.machine", "is missing (required when sim.kind is \"qemu\")")
    console_kind = r.str_("console.kind")
    uart_base = r.opt_int("console.base")
    if console_kind.endswith("uart") and uart_base is None:
        raise r.fail("console.base", f"is missing (required for console kind '{console_kind}')")
    baud = r.opt_int("console.baud")
    kind = r.opt_str("kind") or "mcu"
    if kind not in ("mcu", "linux"):
        raise r.fail("kind", f"must be \"mcu\" or \"linux\", got '{kind}'")
    linux_cc = r.opt_str("linux.cc") or ""
    if kind == "linux" and not linux_cc:
        raise r.fail("linux.cc", "is missing (required when kind is \"linux\")")
    deploy_method = r.str_("deploy.method")
    weights_in = r.opt_str("weights_in") or "flash"
    if weights_in not in WEIGHTS_IN:
        raise r.fail("weights_in", f"must be one of {list(WEIGHTS_IN)}, got '{weights_in}'")
    uf2_family = r.opt_int("deploy.uf2_family")
    if deploy_method == "uf2" and uf2_family is None:
        raise r.fail("deploy.uf2_family", "is missing (required when deploy.method is \"uf2\")")

    return Board(
        name=name,
        description=r.str_("description"),
        core=r.str_("core"),
        cpu_flags=r.str_list("cpu_flags"),
        fpu=None if fpu == "none" else fpu,
        dsp=r.bool_("dsp"),
        mve=r.bool_("mve"),
        clock_hz=r.int_("clock_hz", minimum=1),
        port=r.str_("port"),
        stack_bytes=stack_bytes,
        flash=flash,
        ram=ram,
        console_kind=console_kind,
        uart_base=uart_base,
        sim_kind=sim_kind,
        qemu_machine=qemu_machine,
        deploy_method=deploy_method,
        path=path,
        extra_regions=extra,
        uf2_family=uf2_family,
        console_baud=baud if baud is not None else 115200,
        kind=kind,
        linux_cc=linux_cc,
        linux_run=r.str_list("linux.run") if kind == "linux" and r._lookup("linux.run")[0] else (),
        linux_sysroot=r.opt_str("linux.sysroot") or "",
        linux_multiarch=r.opt_str("linux.multiarch") or "",
        sim_twin=r.opt_str("sim.twin"),
        weights_in=weights_in,
        l1_cache=l1_cache,
    )


def _board_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.toml"))


def load_board(name: str, directory: Path | None = None) -> Board:
    """Load ``boards/<name>.toml`` (or ``<directory>/<name>.toml``)."""
    directory = directory if directory is not None else paths.boards_dir()
    path = directory / f"{name}.toml"
    # Reject path-like names so "../x" cannot read files outside the boards folder.
    if "/" in name or "\\" in name or not path.is_file():
        available = ", ".join(p.stem for p in _board_files(directory)) or "none"
        raise McuError(f"unknown board '{name}'", hint=f"available boards: {available}")
    return _parse(path)


def list_boards(directory: Path | None = None) -> list[Board]:
    """Every board in the boards folder, sorted by name."""
    directory = directory if directory is not None else paths.boards_dir()
    # by board name, not file name: "mps2-an385-m0plus.toml" sorts before "mps2-an385.toml"
    return sorted((_parse(p) for p in _board_files(directory)), key=lambda b: b.name)
