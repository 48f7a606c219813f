#!/usr/bin/env python3
"""Structure-aware mutation of program files: what loads must run.

    scripts/mutate_programs.py                      # 20,000 mutations, seed 1
    scripts/mutate_programs.py -n 50000 --seed 7 --workdir build/mutate

Where libFuzzer (scripts/fuzz_program) flips bytes blindly and meets the CRC,
this tool knows the file: it walks the flatbuffer of real program files (the
fuzz seeds: small models at fp32 and int8, one with external weights) and
lists every scalar it can change in place: vector counts, tensor shapes,
dtypes, placements, offsets and sizes, quantization parameters, arena sizes,
segment locations, offsets, sizes and CRCs, kernel ids, operand ids and
parameter words, bundled-vector segment ids, and the header's size, flag and
reserved words. Each mutant changes one to three of them to a boundary,
neighbouring, scaled or random value, and gets its file CRC recomputed, so
only the loader's own checks stand between it and the interpreter.

Each mutant goes through ``mcu.program.host.Program.load``. The contract checked:
it either raises ``ProgramError`` (counted by status) or loads, and then
every method runs every bundled vector (methods without one: zero inputs)
with status MCU_OK (outputs may differ: the weights changed). Anything else,
another exception type at load or a status from a run, is a failure, listed
with the mutated fields. Exit status 0 when there is none.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = 64
RUN_ARENA_LIMIT = 1 << 20  # bytes of arena a mutant may ask for; more is refused at load (MCU_ERR_ARENA_LIMIT)


@dataclass(frozen=True)
class Site:
    """One scalar of the file that a mutation may change: file position, width in bytes, what it is."""

    pos: int
    width: int
    label: str


@dataclass
class Seed:
    name: str
    program: bytes
    weights: bytes | None
    sites: list[Site]


@dataclass
class Tally:
    mutations: int = 0
    loaded: int = 0
    refused: Counter = field(default_factory=Counter)  # status name -> count
    vectors_run: int = 0
    run_errors: list[str] = field(default_factory=list)  # descriptions; must stay empty
    other_exceptions: list[str] = field(default_factory=list)  # load raised something but ProgramError

    def summary(self) -> str:
        refused = ", ".join(f"{k} {v}" for k, v in self.refused.most_common())
        return (f"{self.mutations} mutations: {self.loaded} loaded ({self.vectors_run} vector runs), "
                f"{sum(self.refused.values())} refused ({refused}); run errors {len(self.run_errors)}, "
                f"other exceptions {len(self.other_exceptions)}")


class _Walker:
    """Reads the program's flatbuffer (field ids as in program.fbs) and records every present scalar."""

    def __init__(self, blob: bytes) -> None:
        self.b = blob
        self.sites: list[Site] = []

    def u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.b, pos)[0]

    def field(self, table: int, slot: int) -> int:
        """File position of field ``slot`` of the table at file position ``table``, 0 when absent."""
        vt = table - struct.unpack_from("<i", self.b, table)[0]
        vt_size = struct.unpack_from("<H", self.b, vt)[0]
        if 4 + 2 * slot + 2 > vt_size:
            return 0
        off = struct.unpack_from("<H", self.b, vt + 4 + 2 * slot)[0]
        return table + off if off else 0

    def scalar(self, table: int, slot: int, width: int, label: str) -> None:
        pos = self.field(table, slot)
        if pos:
            self.sites.append(Site(pos, width, label))

    def vector(self, table: int, slot: int, elem: int | None, label: str) -> tuple[int, int]:
        """Record the count (and with ``elem`` every element) of a vector field; (first element, count)."""
        pos = self.field(table, slot)
        if not pos:
            return 0, 0
        vec = pos + self.u32(pos)
        n = self.u32(vec)
        self.sites.append(Site(vec, 4, f"{label}.count"))
        if elem is not None:
            for i in range(n):
                self.sites.append(Site(vec + 4 + elem * i, elem, f"{label}[{i}]"))
        return vec + 4, n

    def tables(self, table: int, slot: int, label: str) -> list[int]:
        start, n = self.vector(table, slot, None, label)
        return [start + 4 * i + self.u32(start + 4 * i) for i in range(n)]

    def child(self, table: int, slot: int) -> int:
        pos = self.field(table, slot)
        return pos + self.u32(pos) if pos else 0

    def walk(self) -> list[Site]:
        for pos, label in ((12, "header.total"), (20, "header.fb_size"), (24, "header.data_offset"),
                           (28, "header.data_size"), (48, "header.flags"), (52, "header.reserved0"),
                           (56, "header.reserved1")):
            self.sites.append(Site(pos, 4, label))
        root = HEADER + self.u32(HEADER)
        self.scalar(root, 0, 4, "format_version")
        for s, seg in enumerate(self.tables(root, 3, "segments")):
            for slot, width, name in ((1, 1, "location"), (2, 4, "offset"), (3, 4, "size"), (4, 4, "crc")):
                self.scalar(seg, slot, width, f"segment{s}.{name}")
        for d, dele in enumerate(self.tables(root, 4, "delegates")):
            self.scalar(dele, 1, 4, f"delegate{d}.segment")
        ext = self.child(root, 5)
        if ext:
            self.scalar(ext, 2, 4, "external.size")
        for m, method in enumerate(self.tables(root, 2, "methods")):
            self._method(method, f"method{m}")
        return self.sites

    def _method(self, method: int, label: str) -> None:
        for t, tensor in enumerate(self.tables(method, 1, f"{label}.tensors")):
            tl = f"{label}.tensor{t}"
            for slot, width, name in ((1, 1, "dtype"), (5, 1, "placement"), (6, 4, "index"), (7, 4, "offset"),
                                      (8, 4, "nbytes")):
                self.scalar(tensor, slot, width, f"{tl}.{name}")
            self.vector(tensor, 2, 4, f"{tl}.shape")
            self.vector(tensor, 3, 1, f"{tl}.dim_order")
            quant = self.child(tensor, 4)
            if quant:
                self.vector(quant, 0, 4, f"{tl}.scale")
                self.vector(quant, 1, 4, f"{tl}.zero_point")
                self.scalar(quant, 2, 4, f"{tl}.axis")
        self.vector(method, 2, 4, f"{label}.inputs")
        self.vector(method, 3, 4, f"{label}.outputs")
        self.vector(method, 5, 4, f"{label}.arena_sizes")
        for i, insn in enumerate(self.tables(method, 4, f"{label}.instructions")):
            pos = self.field(insn, 0)
            kernel = struct.unpack_from("<H", self.b, pos)[0] if pos else 0
            il = f"{label}.insn{i}(k{kernel})"
            self.scalar(insn, 0, 2, f"{il}.kernel")
            self.vector(insn, 1, 4, f"{il}.operands")
            self.vector(insn, 2, 4, f"{il}.params")
        for v, vec in enumerate(self.tables(method, 6, f"{label}.bundled")):
            self.vector(vec, 0, 4, f"{label}.bundled{v}.inputs")
            self.vector(vec, 1, 4, f"{label}.bundled{v}.expected")
            self.vector(vec, 2, 4, f"{label}.bundled{v}.tolerances")


def sites_of(program: bytes) -> list[Site]:
    return _Walker(program).walk()


def _new_value(rng: random.Random, old: int, width: int, pool: list[int]) -> int:
    bits = 8 * width
    mask = (1 << bits) - 1
    signed = old - (1 << bits) if old >> (bits - 1) else old
    choice = rng.randrange(14)
    if choice == 0:
        v = 0
    elif choice == 1:
        v = 1
    elif choice == 2:
        v = -1
    elif choice == 3:
        v = signed + rng.choice((1, -1))
    elif choice == 4:
        v = signed * 2
    elif choice == 5:
        v = signed // 2
    elif choice == 6:
        v = -signed
    elif choice == 7:
        v = (1 << (bits - 1)) - 1
    elif choice == 8:
        v = 1 << (bits - 1)
    elif choice == 9:
        v = rng.randrange(0, 64)
    elif choice == 10:
        v = signed + rng.choice((16, -16, 4, -4))
    elif choice == 11 and pool:
        v = rng.choice(pool)
    elif choice == 12 and width <= 2:
        v = rng.randrange(0, 41) if width == 2 else rng.randrange(0, 8)
    else:
        v = rng.getrandbits(bits)
    return v & mask


def mutate(seed: Seed, rng: random.Random) -> tuple[bytes, list[str]]:
    """One mutant of ``seed``: one to three sites changed, the file CRC recomputed; and what changed."""
    from mcu.program.format import file_crc

    blob = bytearray(seed.program)
    what = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        site = rng.choice(seed.sites)
        fmt = {1: "<B", 2: "<H", 4: "<I"}[site.width]
        old = struct.unpack_from(fmt, blob, site.pos)[0]
        pool = [struct.unpack_from(fmt, blob, s.pos)[0] for s in rng.sample(seed.sites, min(8, len(seed.sites)))
                if s.width == site.width]
        new = _new_value(rng, old, site.width, pool)
        struct.pack_into(fmt, blob, site.pos, new)
        what.append(f"{site.label}: {old} -> {new}")
    struct.pack_into("<I", blob, 60, file_crc(bytes(blob)))
    return bytes(blob), what


def check_one(program: bytes, weights: bytes | None, tally: Tally, what: list[str]) -> None:
    """Load one mutant and run what loads; record the outcome in ``tally``."""
    import numpy as np

    from mcu.program.host import NUMPY, Program, ProgramError

    tally.mutations += 1
    try:
        prog = Program.load(program, weights, arena_limit=RUN_ARENA_LIMIT)
    except ProgramError as exc:
        tally.refused[exc.status_name] += 1
        return
    except Exception as exc:  # noqa: BLE001 - the contract under test: nothing but ProgramError
        tally.other_exceptions.append(f"{type(exc).__name__}: {exc} [{'; '.join(what)}]")
        return
    tally.loaded += 1
    for m in prog.methods:
        try:
            runs = [m.bundled(v)[0] for v in range(m.n_bundled)] or \
                   [[np.zeros(s.numel, dtype=NUMPY[s.dtype]) for s in m.inputs]]
            for ins in runs:
                m.run_raw(*ins)
                tally.vectors_run += 1
        except Exception as exc:  # noqa: BLE001 - any failure after a successful load is a finding
            tally.run_errors.append(f"method {m.name}: {type(exc).__name__}: {exc} [{'; '.join(what)}]")


def load_seeds(seed_dir: Path, models: tuple[str, ...] | None = None) -> list[Seed]:
    """The fuzz seeds (written once into ``seed_dir``), split into program and weights, with their sites.
    The delegate seed is left out: its backend exists only in the libFuzzer harness; so is any seed that
    does not load as it is here (custom kernels, more arena than RUN_ARENA_LIMIT), named on stderr."""
    from mcu.program.format import read_header
    from mcu.program.fuzz import write_seeds
    from mcu.program.host import Program, ProgramError

    files = sorted(seed_dir.glob("*.mpk")) if seed_dir.is_dir() else []
    if not files:
        files = write_seeds(seed_dir, models=models)
    seeds = []
    for path in files:
        if path.name.startswith("delegate") or (models and not path.name.startswith(models)):
            continue
        blob = path.read_bytes()
        total = read_header(blob).total
        program, weights = blob[:total], (blob[total:] or None)
        try:
            Program.load(program, weights, arena_limit=RUN_ARENA_LIMIT)
        except ProgramError as exc:
            print(f"mutate_programs: seed {path.name} left out: {exc}", file=sys.stderr)
            continue
        seeds.append(Seed(path.stem, program, weights, sites_of(program)))
    return seeds


def run(seeds: list[Seed], count: int, seed: int, progress: bool = False) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    start = time.time()
    for i in range(count):
        s = rng.choice(seeds)
        program, what = mutate(s, rng)
        check_one(program, s.weights, tally, [f"{s.name}: {w}" for w in what])
        if progress and (i + 1) % 2000 == 0:
            print(f"  {i + 1}/{count} in {time.time() - start:.0f} s: {tally.summary()}", flush=True)
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--mutations", type=int, default=20000, help="how many mutants (default 20000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "mutate", help="where the seeds are kept")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    seeds = load_seeds(args.workdir / "seeds")
    print(f"mutate_programs: {len(seeds)} seed programs, {sum(len(s.sites) for s in seeds)} mutable fields, "
          f"{args.mutations} mutations, seed {args.seed}", flush=True)
    start = time.time()
    tally = run(seeds, args.mutations, args.seed, progress=True)
    print(f"mutate_programs: {tally.summary()} in {time.time() - start:.0f} s")
    for line in (tally.other_exceptions + tally.run_errors)[:40]:
        print(f"  FAIL {line}")
    return 0 if not tally.run_errors and not tally.other_exceptions else 1


if __name__ == "__main__":
    sys.exit(main())

