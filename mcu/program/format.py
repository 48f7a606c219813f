"""The program file's fixed parts: header layout, kernel ids, dtype codes, field ids.

Mirrors runtime_c/include/mcu/program.h (header), runtime_c/schema/program.fbs (field ids = declaration
order); the kernel ids are read from the interpreter's table, runtime_c/interp/mcu_kernels.def. Tests check
these against the C sources.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from mcu.paths import runtime_dir

FORMAT_VERSION = 1
HEADER_SIZE = 64
ALIGN = 16
PROGRAM_MAGIC = b"MCUP"
WEIGHTS_MAGIC = b"MCUW"
FLAG_EXTERNAL_WEIGHTS = 1
PROGRAM_SUFFIX = ".mpk"
WEIGHTS_SUFFIX = ".mpw"

# magic, version, header size, total, fb offset, fb size, data offset, data size, content id,
# flags, two reserved words, CRC-32.
_HEADER = struct.Struct("<4sIIIIIII16sIIII")
assert _HEADER.size == HEADER_SIZE

# Per instruction (MCU_PROGRAM_MAX_OPERANDS, MCU_PROGRAM_MAX_PARAMS in program.h).
MAX_OPERANDS = 16
MAX_PARAMS = 32

DTYPE_CODES = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "uint8": 4, "int64": 5}
PLACEMENT_ARENA, PLACEMENT_CONSTANT, PLACEMENT_STREAMED = 0, 1, 2
SEGMENT_INLINE, SEGMENT_EXTERNAL = 0, 1

# One row per kernel in the interpreter's table (MCU_KERNEL(NAME, ID, ...)); NAME is the C function without mcu_.
_KERNEL_ROW = re.compile(r"^MCU_KERNEL\((\w+), (\d+),", re.M)


def kernel_table(path: Path | None = None) -> dict[str, int]:
    """C kernel function -> Instruction.kernel, read from runtime_c/interp/mcu_kernels.def (the table the
    interpreter's checks and dispatch are built from; its ids are mcu_program_kernel's in program.h)."""
    text = (path or runtime_dir() / "interp" / "mcu_kernels.def").read_text()
    return {f"mcu_{name.lower()}": int(kid) for name, kid in _KERNEL_ROW.findall(text)}


KERNEL_IDS: dict[str, int] = kernel_table()
KERNEL_DELEGATE = 255
# The interpreter's own steps (MCU_K_LOOP, MCU_K_FILL, MCU_K_MOVE, MCU_K_ROWS in program.h): no kernel, no
# table row.
KERNEL_LOOP, KERNEL_FILL, KERNEL_MOVE, KERNEL_ROWS = 256, 257, 258, 259


def kernel_macro(function: str) -> str:
    """``mcu_conv2d_s8`` -> ``CONV2D_S8`` (MCU_K_<name> and MCU_PROGRAM_HAS_<name> in C)."""
    return function.removeprefix("mcu_").upper()


class Field:
    """Field ids of each table in program.fbs (declaration order)."""

    QUANT = {"scale": 0, "zero_point": 1, "axis": 2}
    TENSOR = {"name": 0, "dtype": 1, "shape": 2, "dim_order": 3, "quant": 4, "placement": 5, "index": 6,
              "offset": 7, "nbytes": 8}
    INSTRUCTION = {"kernel": 0, "operands": 1, "params": 2, "name": 3, "strides": 4, "iterations": 5}
    BUNDLED = {"inputs": 0, "expected": 1, "tolerances": 2}
    METHOD = {"name": 0, "tensors": 1, "inputs": 2, "outputs": 3, "instructions": 4, "arena_sizes": 5,
              "bundled": 6}
    SEGMENT = {"name": 0, "location": 1, "offset": 2, "size": 3, "crc": 4}
    DELEGATE = {"backend_id": 0, "segment": 1}
    EXTERNAL = {"file_name": 0, "content_id": 1, "size": 2}
    PROGRAM = {"format_version": 0, "producer": 1, "methods": 2, "segments": 3, "delegates": 4,
               "external_weights": 5}


@dataclass(frozen=True)
class Header:
    magic: bytes
    version: int
    total: int
    fb_offset: int
    fb_size: int
    data_offset: int
    data_size: int
    content_id: bytes
    flags: int
    crc: int


def align(n: int, to: int = ALIGN) -> int:
    return (n + to - 1) // to * to


def content_id(data: bytes) -> bytes:
    """The 16-byte identity of a weights file's data (truncated SHA-256)."""
    return hashlib.sha256(data).digest()[:16]


def file_crc(blob: bytes) -> int:
    """CRC-32 of bytes [0, 60) and [64, end): everything but the CRC field."""
    return zlib.crc32(blob[HEADER_SIZE:], zlib.crc32(blob[:60])) & 0xFFFFFFFF


def assemble(magic: bytes, flatbuffer: bytes, data: bytes, content: bytes = bytes(16), flags: int = 0) -> bytes:
    """Header + flatbuffer + padding + data, with the CRC filled in."""
    data_offset = align(HEADER_SIZE + len(flatbuffer))
    total = data_offset + len(data)
    if total > 0x7FFFFFFF:
        raise ValueError(f"program of {total} bytes exceeds the format's 2 GiB limit")
    head = _HEADER.pack(magic, FORMAT_VERSION, HEADER_SIZE, total, HEADER_SIZE, len(flatbuffer), data_offset,
                        len(data), content, flags, 0, 0, 0)
    blob = bytearray(head + flatbuffer + bytes(data_offset - HEADER_SIZE - len(flatbuffer)) + data)
    struct.pack_into("<I", blob, 60, file_crc(bytes(blob)))
    return bytes(blob)


def read_header(blob: bytes) -> Header:
    if len(blob) < HEADER_SIZE:
        raise ValueError(f"{len(blob)} bytes is shorter than the {HEADER_SIZE}-byte header")
    (magic, version, _hsize, total, fb_offset, fb_size, data_offset, data_size, cid, flags, _r0, _r1,
     crc) = _HEADER.unpack_from(blob)
    return Header(magic, version, total, fb_offset, fb_size, data_offset, data_size, cid, flags, crc)
