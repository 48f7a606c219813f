"""The program file's fixed parts: header layout, kernel ids, dtype codes, field ids.

Mirrors runtime_c/include/mcu/program.h (header, kernel ids) and
runtime_c/schema/program.fbs (field ids = declaration order); tests check
both against the C sources.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass

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

DTYPE_CODES = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "uint8": 4}
PLACEMENT_ARENA, PLACEMENT_CONSTANT = 0, 1
SEGMENT_INLINE, SEGMENT_EXTERNAL = 0, 1

# C kernel function -> Instruction.kernel (mcu_program_kernel in program.h).
KERNEL_IDS: dict[str, int] = {
    "mcu_conv2d_f32": 1,
    "mcu_linear_f32": 2,
    "mcu_max_pool2d_f32": 3,
    "mcu_avg_pool2d_f32": 4,
    "mcu_mean_hw_f32": 5,
    "mcu_add_f32": 6,
    "mcu_sub_f32": 7,
    "mcu_mul_f32": 8,
    "mcu_div_f32": 9,
    "mcu_clamp_f32": 10,
    "mcu_sigmoid_f32": 11,
    "mcu_tanh_f32": 12,
    "mcu_hardswish_f32": 13,
    "mcu_softmax_f32": 14,
    "mcu_batch_norm_f32": 15,
    "mcu_permute": 16,
    "mcu_concat": 17,
    "mcu_pad": 18,
    "mcu_conv2d_s8": 19,
    "mcu_depthwise_conv2d_s8": 20,
    "mcu_linear_s8": 21,
    "mcu_add_s8": 22,
    "mcu_sub_s8": 23,
    "mcu_mul_s8": 24,
    "mcu_max_pool2d_s8": 25,
    "mcu_avg_pool2d_s8": 26,
    "mcu_mean_hw_s8": 27,
    "mcu_softmax_s8": 28,
    "mcu_lut_s8": 29,
    "mcu_requantize_s8": 30,
    "mcu_clamp_s8": 31,
    "mcu_quantize_f32_s8": 32,
    "mcu_dequantize_s8_f32": 33,
    "mcu_conv2d_1x1_s8": 34,
    "mcu_depthwise_conv2d_s8_inplace": 35,
    "mcu_linear_w8_f32": 36,
    "mcu_linear_dyn_s8": 37,
    "mcu_slice": 38,
    # 4-bit groupwise weights and model state: ids 230-259.
    "mcu_linear_w4_f32": 230,
    "mcu_linear_w4_s8": 231,
    "mcu_index_put": 232,
    "mcu_compare": 233,
    "mcu_where": 234,
    "mcu_embedding": 235,
    "mcu_embedding_s8_f32": 236,
    # normalisation, reductions and int8 activations: ids 180-219.
    "mcu_unary_f32": 180,
    "mcu_layer_norm_f32": 181,
    "mcu_bmm_f32": 182,
    "mcu_reduce_f32": 183,
    "mcu_maximum_f32": 184,
    "mcu_minimum_f32": 185,
    "mcu_layer_norm_s8": 186,
    "mcu_group_norm_f32": 187,
    "mcu_var_f32": 188,
    "mcu_argmax_f32": 189,
    "mcu_argmax_s8": 190,
    "mcu_log_softmax_f32": 191,
    "mcu_prelu_f32": 192,
    # resampling and data movement: ids 140-179.
    "mcu_remap": 140,
    "mcu_index_select": 141,
    "mcu_gather": 142,
    "mcu_resize_bilinear_f32": 143,
    "mcu_resize_bilinear_s8": 144,
    "mcu_adaptive_avg_pool_f32": 145,
    "mcu_adaptive_avg_pool_s8": 146,
    "mcu_reduce_s8": 193,
    "mcu_rms_norm_f32": 194,
    "mcu_bmm_s8": 195,
    # convolutions: ids 100-139.
    "mcu_conv_transpose2d_f32": 100,
    "mcu_conv_transpose2d_s8": 101,
    "mcu_conv_transpose2d_phased_s8": 102,
    "mcu_conv2d_grouped_s8": 103,
    # integer recurrent layers: ids 240-249.
    "mcu_lstm_s8": 240,
    "mcu_gru_s8": 241,
    # int8 islands made integer: ids 250-259.
    "mcu_maximum_s8": 250,
    "mcu_minimum_s8": 251,
    "mcu_div_s8": 252,
    "mcu_prelu_s8": 253,
    "mcu_log_softmax_s8": 254,
}
KERNEL_DELEGATE = 255


def kernel_macro(function: str) -> str:
    """``mcu_conv2d_s8`` -> ``CONV2D_S8`` (MCU_K_<name> and MCU_PROGRAM_HAS_<name> in C)."""
    return function.removeprefix("mcu_").upper()


class Field:
    """Field ids of each table in program.fbs (declaration order)."""

    QUANT = {"scale": 0, "zero_point": 1, "axis": 2}
    TENSOR = {"name": 0, "dtype": 1, "shape": 2, "dim_order": 3, "quant": 4, "placement": 5, "index": 6,
              "offset": 7, "nbytes": 8}
    INSTRUCTION = {"kernel": 0, "operands": 1, "params": 2, "name": 3}
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
