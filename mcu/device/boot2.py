"""The RP2040's second-stage boot block: 256 bytes at the start of flash whose last word is a CRC32.

The RP2040 boot ROM copies the first 256 bytes of flash to SRAM and runs them only when the CRC32 of the
first 252 bytes equals the last word (RP2040 datasheet 2.8.1.3.1): polynomial 0x04C11DB7, initial value
0xFFFFFFFF, input and output not reflected, no final XOR (the CRC-32/MPEG-2 variant). The code itself is
ports/rp2/rp2040/boot2.c, linked into the ``.boot2`` output section with a zero placeholder; :func:`seal_boot2`
writes the CRC into the linked ELF before the UF2 is made from it.
"""

from __future__ import annotations

import struct
from pathlib import Path

from mcu.device.elf import read_elf
from mcu.errors import McuError

BOOT2_SIZE = 256
BOOT2_SECTION = ".boot2"
_POLY = 0x04C11DB7


def boot2_crc(data: bytes) -> int:
    """CRC32 with the RP2040 boot ROM's parameters (MSB first, init 0xFFFFFFFF, no final XOR)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ _POLY) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return crc


def seal_boot2(elf_path: Path) -> int | None:
    """Write the CRC32 into the last word of the ELF's ``.boot2`` section; None when it has none."""
    elf = read_elf(Path(elf_path))
    section = elf.section(BOOT2_SECTION)
    if section is None:
        return None
    if section.size != BOOT2_SIZE:
        raise McuError(f"{elf_path}: {BOOT2_SECTION} is {section.size} bytes, the RP2040 boot ROM reads "
                       f"exactly {BOOT2_SIZE}", hint="ports/rp2/rp2040/boot2.c must end at .org 252 plus one word")
    blob = bytearray(Path(elf_path).read_bytes())
    body = bytes(blob[section.offset : section.offset + BOOT2_SIZE - 4])
    crc = boot2_crc(body)
    blob[section.offset + BOOT2_SIZE - 4 : section.offset + BOOT2_SIZE] = struct.pack("<I", crc)
    Path(elf_path).write_bytes(bytes(blob))
    return crc
