"""A small reader for 32-bit little-endian ELF files (the Arm firmware we link).

Enough for sizes, symbol addresses and the loadable bytes: section headers,
the symbol table and PT_LOAD segments with their contents. Pure Python so
nothing beyond the cross compiler is needed (no pyelftools, no objdump).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from mcu.errors import McuError

# Section types and flags (ELF gABI).
SHT_SYMTAB = 2
SHT_NOBITS = 8
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

# Symbol types and bindings.
STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3
STT_FILE = 4
STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2
SHN_UNDEF = 0
SHN_ABS = 0xFFF1

PT_LOAD = 1
EM_ARM = 40

_EHDR = struct.Struct("<16sHHIIIIIHHHHHH")
_SHDR = struct.Struct("<IIIIIIIIII")
_PHDR = struct.Struct("<IIIIIIII")
_SYM = struct.Struct("<IIIBBH")


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int  # run-time (virtual) address
    offset: int
    size: int

    @property
    def alloc(self) -> bool:
        """Occupies memory on the target (as opposed to debug info, notes)."""
        return bool(self.flags & SHF_ALLOC)

    @property
    def nobits(self) -> bool:
        """Takes RAM but no bytes in the file (.bss, NOLOAD sections)."""
        return self.type == SHT_NOBITS


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int  # for Thumb functions bit 0 is set; mask it for the address
    size: int
    type: int
    bind: int
    shndx: int

    @property
    def defined(self) -> bool:
        return self.shndx != SHN_UNDEF


@dataclass(frozen=True)
class Segment:
    """A PT_LOAD program header with the bytes it loads (``filesz`` of them)."""

    vaddr: int  # where it runs
    paddr: int  # where it is stored (flash for .data's load image)
    filesz: int
    memsz: int
    flags: int
    data: bytes


@dataclass(frozen=True)
class ElfFile:
    path: Path
    machine: int
    entry: int
    sections: tuple[Section, ...]
    symbols: tuple[Symbol, ...]
    segments: tuple[Segment, ...]

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def symbol(self, name: str) -> Symbol | None:
        """The defined symbol called ``name``, preferring global over weak over local."""
        candidates = [s for s in self.symbols if s.name == name and s.defined]
        rank = {STB_GLOBAL: 0, STB_WEAK: 1}
        candidates.sort(key=lambda s: rank.get(s.bind, 2))
        return candidates[0] if candidates else None

    def load_segments(self) -> list[Segment]:
        """Segments that put bytes on the target (what a flasher or UF2 writer needs)."""
        return [s for s in self.segments if s.filesz > 0]


def _bad(path: Path, why: str) -> McuError:
    return McuError(f"{path} is not a usable ELF file: {why}")


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def read_elf(path: Path) -> ElfFile:
    """Parse a 32-bit little-endian ELF file."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise McuError(f"cannot read ELF file {path}: {exc.strerror}") from exc
    if len(blob) < _EHDR.size or blob[:4] != b"\x7fELF":
        raise _bad(path, "no ELF header")
    if blob[4] != 1 or blob[5] != 1:
        raise _bad(path, "only 32-bit little-endian ELF is supported")
    try:
        return _parse(path, blob)
    except struct.error as exc:
        # A truncated file shows up as a short read in one of the tables.
        raise _bad(path, f"truncated ({exc})") from exc


def _parse(path: Path, blob: bytes) -> ElfFile:
    (_, _, machine, _, entry, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx) = (
        _EHDR.unpack_from(blob, 0)
    )

    raw_sections = [
        _SHDR.unpack_from(blob, shoff + i * shentsize) for i in range(shnum)
    ] if shoff else []
    shstr = b""
    if raw_sections and shstrndx < len(raw_sections):
        _, _, _, _, off, size, *_ = raw_sections[shstrndx]
        shstr = blob[off : off + size]
    sections = tuple(
        Section(
            name=_cstr(shstr, name),
            type=sh_type,
            flags=flags,
            addr=addr,
            offset=off,
            size=size,
        )
        for (name, sh_type, flags, addr, off, size, *_) in raw_sections
    )

    symbols: list[Symbol] = []
    for sh_name, sh_type, _, _, off, size, link, _, _, entsize in raw_sections:
        if sh_type != SHT_SYMTAB or entsize == 0:
            continue
        _, _, _, _, str_off, str_size, *_ = raw_sections[link]
        strtab = blob[str_off : str_off + str_size]
        for i in range(1, size // entsize):  # entry 0 is the reserved null symbol
            st_name, value, st_size, info, _, shndx = _SYM.unpack_from(blob, off + i * entsize)
            stype, bind = info & 0xF, info >> 4
            if stype in (STT_SECTION, STT_FILE) or st_name == 0:
                continue
            symbols.append(Symbol(_cstr(strtab, st_name), value, st_size, stype, bind, shndx))

    segments: list[Segment] = []
    for i in range(phnum if phoff else 0):
        p_type, p_off, vaddr, paddr, filesz, memsz, flags, _ = _PHDR.unpack_from(
            blob, phoff + i * phentsize
        )
        if p_type != PT_LOAD:
            continue
        data = blob[p_off : p_off + filesz]
        if len(data) != filesz:
            raise _bad(path, "a loadable segment runs past the end of the file")
        segments.append(Segment(vaddr, paddr, filesz, memsz, flags, data))

    return ElfFile(
        path=path,
        machine=machine,
        entry=entry,
        sections=sections,
        symbols=tuple(symbols),
        segments=tuple(segments),
    )
