"""UF2 files: what a board's USB mass-storage bootloader (the RP2350's BOOTSEL drive) flashes.

A UF2 file is a sequence of independent 512-byte blocks, each carrying up to
476 bytes of payload for one target address (Microsoft's UF2 specification,
https://github.com/microsoft/uf2). We write the conventional 256-byte
payloads, one per 256-byte aligned page of flash, because the RP2350 boot ROM
programs flash page by page and rejects blocks that are not page-aligned.
Target addresses are the *load* (physical) addresses of the ELF's loadable
segments, so ``.data``'s initial values land in flash where the startup code
copies them from, not at their RAM run-time address.

The reader parses a file back into its blocks and checks magic numbers,
numbering and family; the tests use it to compare a UF2 with its ELF.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mcu.device.elf import read_elf
from mcu.errors import McuError

BLOCK_SIZE = 512
PAYLOAD_SIZE = 256
DATA_AREA = 476  # bytes reserved for payload in every block, whatever its payload size
MAGIC_START0 = 0x0A324655  # "UF2\n"
MAGIC_START1 = 0x9E5D5157
MAGIC_END = 0x0AB16F30
FLAG_NOT_MAIN_FLASH = 0x00000001
FLAG_FILE_CONTAINER = 0x00001000
FLAG_FAMILY_ID_PRESENT = 0x00002000
FLAG_MD5_PRESENT = 0x00004000
FLAG_EXTENSION_TAGS = 0x00008000

# Family IDs (the RP2350 ROM picks the image type from the family).
FAMILY_RP2040 = 0xE48BFF56
FAMILY_ABSOLUTE = 0xE48BFF57
FAMILY_RP2350_ARM_S = 0xE48BFF59
FAMILY_RP2350_RISCV = 0xE48BFF5A
FAMILY_RP2350_ARM_NS = 0xE48BFF5B
# The families by the names the Pico SDK gives its platforms (PICO_PLATFORM) and picotool its families.
FAMILIES = {"rp2040": FAMILY_RP2040, "absolute": FAMILY_ABSOLUTE, "rp2350-arm-s": FAMILY_RP2350_ARM_S,
            "rp2350-riscv": FAMILY_RP2350_RISCV, "rp2350-arm-ns": FAMILY_RP2350_ARM_NS}

# RP2350 erratum E10: the A2 boot ROM can write a drag-and-dropped UF2 into a partition of the flash's
# partition table instead of at its own addresses, unless the file opens with a block of the absolute family.
# The Pico SDK adds one for RP2350 boards (PICO_RP2350_A2_SUPPORTED, picotool's --abs-block): a page of 0xEF
# bytes at the last page of the first 16 MB, tagged with the RP2 "ignore block" extension so that nothing is
# written for it, and numbered block 0 of 2 so that it is never a complete download of its own.
EXTENSION_RP2_IGNORE_BLOCK = 0x9957E304
ABSOLUTE_BLOCK_ADDRESS = 0x10FFFF00
ABSOLUTE_BLOCK_FILL = 0xEF
RP2350_FLASH = (0x10000000, 0x12000000)

_HEADER = struct.Struct("<8I")  # magic0, magic1, flags, addr, size, block_no, num_blocks, family
_END = struct.Struct("<I")


@dataclass(frozen=True)
class Uf2Block:
    address: int
    data: bytes
    block_no: int
    num_blocks: int
    flags: int
    family: int | None  # None when the block carries a file size instead of a family ID


@dataclass(frozen=True)
class Uf2File:
    blocks: tuple[Uf2Block, ...]
    ignored: tuple[Uf2Block, ...] = ()  # blocks tagged "ignore" (the RP2350-E10 absolute block), in file order

    @property
    def family(self) -> int | None:
        return self.blocks[0].family if self.blocks else None

    def chunks(self) -> list[tuple[int, bytes]]:
        """(address, payload) per block, in file order."""
        return [(b.address, b.data) for b in self.blocks]

    def memory(self) -> dict[int, int]:
        """Address -> byte for every byte the file writes."""
        image: dict[int, int] = {}
        for block in self.blocks:
            for i, byte in enumerate(block.data):
                image[block.address + i] = byte
        return image

    def read(self, address: int, length: int) -> bytes:
        """The bytes the file writes at ``[address, address + length)``; missing bytes are an error."""
        image = self.memory()
        missing = [a for a in range(address, address + length) if a not in image]
        if missing:
            raise McuError(f"the UF2 file writes nothing at {missing[0]:#010x} ({len(missing)} bytes missing)")
        return bytes(image[a] for a in range(address, address + length))


def family_id(name: str) -> int:
    """The family ID named ``name``: a key of :data:`FAMILIES` or a number (``0xe48bff59``)."""
    if name.lower() in FAMILIES:
        return FAMILIES[name.lower()]
    try:
        value = int(name, 0)
    except ValueError:
        value = -1
    if not 0 <= value <= 0xFFFFFFFF:
        raise McuError(f"unknown UF2 family {name!r} (known: {', '.join(FAMILIES)}, or a 32-bit number)")
    return value


def pages_from_segments(segments: Iterable[tuple[int, bytes]], page_size: int = PAYLOAD_SIZE) -> list[tuple[int, bytes]]:
    """Split (address, bytes) ranges into ``page_size``-aligned pages; gaps inside a page are zero.

    Two segments that share a page (``.text`` ending mid-page, ``.data``'s load
    image starting right after) are merged into one page, since the boot ROM
    erases and programs whole pages and a second block for the same page would
    overwrite the first.
    """
    pages: dict[int, bytearray] = {}
    for address, data in segments:
        for offset, byte in enumerate(data):
            where = address + offset
            base = where - where % page_size
            page = pages.get(base)
            if page is None:
                page = pages[base] = bytearray(page_size)
            page[where - base] = byte
    return [(base, bytes(pages[base])) for base in sorted(pages)]


def encode(chunks: list[tuple[int, bytes]], family: int) -> bytes:
    """UF2 blocks for ``chunks`` (address, payload <= 476 bytes), numbered in order."""
    out = bytearray()
    for number, (address, payload) in enumerate(chunks):
        if len(payload) > DATA_AREA:
            raise ValueError(f"UF2 payload of {len(payload)} bytes is larger than {DATA_AREA}")
        out += _HEADER.pack(MAGIC_START0, MAGIC_START1, FLAG_FAMILY_ID_PRESENT, address, len(payload),
                            number, len(chunks), family)
        out += payload.ljust(DATA_AREA, b"\0")
        out += _END.pack(MAGIC_END)
    return bytes(out)


def absolute_block(address: int = ABSOLUTE_BLOCK_ADDRESS) -> bytes:
    """The RP2350-E10 block (see EXTENSION_RP2_IGNORE_BLOCK) at ``address``."""
    payload = bytes([ABSOLUTE_BLOCK_FILL]) * PAYLOAD_SIZE + struct.pack("<I", EXTENSION_RP2_IGNORE_BLOCK)
    header = _HEADER.pack(MAGIC_START0, MAGIC_START1, FLAG_FAMILY_ID_PRESENT | FLAG_EXTENSION_TAGS, address,
                          PAYLOAD_SIZE, 0, 2, FAMILY_ABSOLUTE)
    return header + payload.ljust(DATA_AREA, b"\0") + _END.pack(MAGIC_END)


def elf_to_uf2(elf_path: Path, family: int, absolute_block_at: int | None = None) -> bytes:
    """The UF2 image of an ELF's loadable bytes at their load addresses. With ``absolute_block_at``, an
    RP2350 image that starts in flash opens with the RP2350-E10 block at that address (as the SDK's does);
    RP2040 and absolute-family images never need it."""
    elf = read_elf(elf_path)
    segments = [(seg.paddr, seg.data) for seg in elf.load_segments()]
    if not segments:
        raise McuError(f"{elf_path} has no loadable bytes to put in a UF2 file")
    pages = pages_from_segments(segments)
    opening = b""
    if (absolute_block_at is not None and family not in (FAMILY_RP2040, FAMILY_ABSOLUTE)
            and RP2350_FLASH[0] <= pages[0][0] < RP2350_FLASH[1]):
        opening = absolute_block(absolute_block_at)
    return opening + encode(pages, family)


def write_uf2(elf_path: Path, uf2_path: Path, family: int, absolute_block_at: int | None = None) -> Path:
    uf2_path = Path(uf2_path)
    uf2_path.write_bytes(elf_to_uf2(elf_path, family, absolute_block_at))
    return uf2_path


def _ignored(flags: int, size: int, raw: bytes) -> bool:
    """Whether a block carries the RP2 "ignore block" extension tag (the first tag after its payload)."""
    if not flags & FLAG_EXTENSION_TAGS or 32 + size + 4 > 32 + DATA_AREA:
        return False
    return struct.unpack_from("<I", raw, 32 + size)[0] == EXTENSION_RP2_IGNORE_BLOCK


def decode(blob: bytes, source: str = "UF2 data") -> Uf2File:
    """Parse and check a UF2 file: magic numbers, sizes, block numbering and one family throughout. Blocks
    tagged "ignore" (the RP2350-E10 absolute block) are kept apart and count in no numbering."""
    if len(blob) == 0 or len(blob) % BLOCK_SIZE:
        raise McuError(f"{source} is {len(blob)} bytes, not a whole number of {BLOCK_SIZE}-byte UF2 blocks")
    parsed: list[tuple[int, Uf2Block]] = []
    ignored: list[Uf2Block] = []
    for index in range(len(blob) // BLOCK_SIZE):
        raw = blob[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
        magic0, magic1, flags, address, size, number, total, family_or_size = _HEADER.unpack_from(raw, 0)
        (magic_end,) = _END.unpack_from(raw, BLOCK_SIZE - _END.size)
        if (magic0, magic1, magic_end) != (MAGIC_START0, MAGIC_START1, MAGIC_END):
            raise McuError(f"{source}, block {index}: bad magic numbers")
        if size > DATA_AREA:
            raise McuError(f"{source}, block {index}: payload size {size} is larger than {DATA_AREA}")
        family = family_or_size if flags & FLAG_FAMILY_ID_PRESENT else None
        block = Uf2Block(address=address, data=raw[32 : 32 + size], block_no=number, num_blocks=total,
                         flags=flags, family=family)
        if _ignored(flags, size, raw):
            ignored.append(block)
        else:
            parsed.append((index, block))
    if not parsed:
        raise McuError(f"{source} has no block to write, only blocks tagged to be ignored")
    for expected, (index, block) in enumerate(parsed):
        where = f"{source}, block {index}"
        if block.block_no != expected:
            raise McuError(f"{where}: numbered {block.block_no}, expected {expected}")
        if block.num_blocks != len(parsed):
            raise McuError(f"{where}: says the file has {block.num_blocks} blocks, it has {len(parsed)}")
    blocks = tuple(block for _, block in parsed)
    families = {b.family for b in blocks}
    if len(families) != 1:
        raise McuError(f"{source} mixes UF2 families {sorted(f'{f:#x}' for f in families if f is not None)}")
    return Uf2File(blocks=blocks, ignored=tuple(ignored))


def read_uf2(path: Path) -> Uf2File:
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise McuError(f"cannot read UF2 file {path}: {exc.strerror}") from exc
    return decode(blob, source=str(path))
