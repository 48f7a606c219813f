"""Constant tensors in the board's fastest memory (``--weights-in fast``).

By default every constant array is read in place from the memory that holds read-only data (flash; the
MPS3 AN547's QSPI), whose wait states the timing model charges per access (docs/cycles.md). With ``fast``
the firmware is linked once as usual; then each constant, most re-read bytes first, goes into the
fastest memory that still has room after code, data, arenas and stack: a code memory faster than the
read-only one (the AN547's ITCM) takes it directly, a RAM gets a load image in the read-only memory
that ``Reset_Handler`` copies at boot (ports/cortex-m/startup.c, through the linker script's copy
table). What does not fit stays where it was. The arrays keep their own input sections
(``-fdata-sections``: ``.rodata.<symbol>``), so the linker script moves them by name and the compiled
code is the same in both placements: only addresses change. The model code's own read-only data (each
op's parameter struct, which the kernels read through a pointer in their loops) moves first, whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcu.device.boards import Board, MemoryRegion
from mcu.device.elf import ElfFile

ALIGN = 16  # the generated arrays are aligned(16)
# Bytes kept free in each memory for the alignment of the sections placed after the weights.
MARGIN = 64
# The preprocessor name that compiles the startup's copy loop in (ports/cortex-m/startup.c).
COPY_DEFINE = "MCU_WEIGHT_COPIES"


@dataclass(frozen=True)
class WeightSection:
    """One output section of constant arrays (``.mcu_weights_<name>``) in ``region``."""

    region: MemoryRegion
    copied: bool  # a RAM: loaded from the read-only memory and copied at boot
    symbols: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()  # source stems whose whole .rodata is here (the model code's parameters)

    @property
    def name(self) -> str:
        return self.region.name.replace("-", "_")

    @property
    def linker_name(self) -> str:
        return self.region.linker_name


def fast_regions(board: Board) -> list[WeightSection]:
    """The memories faster for data than the one holding read-only data, fastest first; at equal speed a code
    memory (no copy, no RAM) before a RAM. Empty when read-only data already sits in the fastest memory."""
    home = board.region_for("rodata")
    ram_like = [board.ram, *(r for r in board.extra_regions if "arena" in r.holds)]
    candidates = [WeightSection(r, copied=r is not board.flash) for r in (board.flash, *ram_like)
                  if r is not home and r.data_millicycles < home.data_millicycles]
    return sorted(candidates, key=lambda w: (w.region.data_millicycles, w.copied))


def free_bytes(board: Board, region: MemoryRegion, elf: ElfFile) -> int:
    """Bytes of ``region`` that nothing in the linked ``elf`` uses: in the code memory what no load image
    stores, in a RAM what no section (data, arenas, the stack) occupies."""
    if region is board.flash:
        used = sum(seg.filesz for seg in elf.load_segments() if region.contains(seg.paddr))
    else:
        used = sum(s.size for s in elf.sections if s.alloc and s.size and region.contains(s.addr))
    return region.length - used


def place(board: Board, elf: ElfFile, symbols: Sequence[str],
          objects: Sequence[tuple[str, int]] = ()) -> list[WeightSection]:
    """``objects`` (source stem, bytes of its .rodata) and then ``symbols`` (constant arrays, in order of
    priority) into :func:`fast_regions`, given the firmware ``elf`` linked with every one of them in read-only
    memory: each into the fastest memory with room left, or nowhere (it stays). Symbols the link dropped or
    put elsewhere than ``.rodata`` are skipped."""
    sections = fast_regions(board)
    rodata = {i for i, s in enumerate(elf.sections) if s.name == ".rodata"}
    sizes = {s.name: s.size for s in elf.symbols if s.defined and s.size and s.shndx in rodata}
    room = [free_bytes(board, w.region, elf) - MARGIN for w in sections]
    chosen: list[tuple[list[str], list[str]]] = [([], []) for _ in sections]
    # an object's small input sections keep their own alignment: one ALIGN of slack each is plenty
    wanted = [(1, stem, size + ALIGN) for stem, size in objects if size] + \
        [(0, sym, sizes[sym]) for sym in symbols if sym in sizes]
    for kind, name, size in wanted:
        need = -(-size // ALIGN) * ALIGN
        for i in range(len(sections)):
            if room[i] >= need:
                room[i] -= need
                chosen[i][kind].append(name)
                break
    return [WeightSection(w.region, w.copied, tuple(syms), tuple(objs)) for w, (syms, objs) in zip(sections, chosen)]


def weights_wait(board: Board, placement: str) -> bool:
    """Whether the model's constants are read from memory with data wait states, as the kernels choose their
    layouts by it before the link: the board's read-only memory waits (flash behind a cache counts: a miss
    waits) and ``placement`` ("flash" or "fast", --weights-in) leaves them there, "fast" moving them only when
    the board has a faster memory (:func:`fast_regions`). Arrays that "fast" cannot fit stay in the flash but
    count as moved: the choice is made per build, not per array."""
    if board.region_for("rodata").data_millicycles <= 0:
        return False
    return placement != "fast" or not fast_regions(board)


def weights_cache_bytes(board: Board, placement: str) -> int:
    """Bytes of the cache the model's constants are read through where they wait (:func:`weights_wait`), 0 where
    they do not wait or no cache serves their reads: the memory's data cache (a flash accelerator's, the L4R5's
    256 B), else its one cache (the U575's 8 kB ICACHE on the code bus), else the core's L1 data cache. Kernels
    that re-read a stream larger than a cache by parts choose by it whether the parts would stay cached."""
    if not weights_wait(board, placement):
        return 0
    region = board.region_for("rodata")
    if region.l1_cached and board.l1_cache is not None:
        return board.l1_cache.dcache[0]
    return region.data_cache_bytes or region.cache_bytes
