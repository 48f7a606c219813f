"""Convert arrays between logical (PyTorch) order and a tensor's memory order."""

from __future__ import annotations

import numpy as np

from mcu.ir import Tensor


def to_memory_order(x: np.ndarray, t: Tensor) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(np.asarray(x).reshape(t.shape), t.dim_order)).reshape(-1)


def from_memory_order(flat: np.ndarray, t: Tensor) -> np.ndarray:
    inverse = np.argsort(t.dim_order)
    return np.ascontiguousarray(np.transpose(np.asarray(flat).reshape(t.physical_shape), inverse))


def pack_s4(values: np.ndarray) -> np.ndarray:
    """4-bit codes (int8 values in [-8, 7], flattened in memory order) two a byte: element 2i in the low
    nibble of byte i, 2i + 1 in its high nibble, an odd count's last byte with a zero high nibble (the
    layout of CMSIS-NN's s4 kernels)."""
    flat = np.asarray(values, dtype=np.int64).reshape(-1)
    if flat.size and (flat.min() < -8 or flat.max() > 7):
        raise ValueError(f"4-bit codes out of [-8, 7]: {int(flat.min())} .. {int(flat.max())}")
    nibbles = np.zeros(flat.size + (flat.size & 1), dtype=np.int64)
    nibbles[:flat.size] = flat & 0xF
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).view(np.int8)


def channel_rows(t: Tensor) -> np.ndarray:
    """A weight tensor's values as one row per output channel (logical dim 0), each row in memory order
    (a depthwise [kh][kw][out_c] tensor gives rows of kh * kw taps)."""
    assert t.data is not None
    arr = np.asarray(t.data).reshape(t.physical_shape)
    return np.ascontiguousarray(np.moveaxis(arr, t.dim_order.index(0), 0)).reshape(t.shape[0], -1)


def set_channel_rows(t: Tensor, rows: np.ndarray) -> None:
    """Writes :func:`channel_rows`' rows back into ``t.data`` (its memory order, its dtype)."""
    assert t.data is not None
    p = t.dim_order.index(0)
    phys = t.physical_shape
    moved = np.asarray(rows).reshape((phys[p], *phys[:p], *phys[p + 1:]))
    t.data = np.ascontiguousarray(np.moveaxis(moved, 0, p)).astype(t.data.dtype).reshape(np.shape(t.data))


def palette_row_bytes(count: int, bits: int) -> int:
    return (count * bits + 7) // 8


def pack_palette(rows: np.ndarray, bits: int, shared: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Look-up-table weights of int8 ``rows`` (one per output channel, at most 2^bits distinct values
    each): (indices, tables). Each row's indices are ``bits`` wide, little-endian bit order (index i
    takes bits [i * bits, (i + 1) * bits) of its row, bit k being bit k % 8 of byte k / 8), every row
    padded to a whole byte (uint8, channels * ceil(count * bits / 8)); each row's table holds its
    distinct values in ascending order, the last repeated to 2^bits entries (int8, channels * 2^bits).
    With ``shared``, one table for all rows (int8, 2^bits). The kernels' decoder is
    runtime_c/kernels/common/lut.h."""
    rows = np.asarray(rows, dtype=np.int64)
    channels, count = rows.shape
    size = 1 << bits
    if shared:
        values = np.unique(rows)
        if values.size > size:
            raise ValueError(f"the tensor has {values.size} distinct weights; a {bits}-bit palette holds {size}")
        table = np.concatenate([values, np.repeat(values[-1:], size - values.size)]).astype(np.int8)
        return _pack_indices(np.searchsorted(values, rows), bits), table
    tables = np.zeros((channels, size), dtype=np.int8)
    index = np.zeros((channels, count), dtype=np.int64)
    for c in range(channels):
        values = np.unique(rows[c])
        if values.size > size:
            raise ValueError(f"channel {c} has {values.size} distinct weights; a {bits}-bit palette holds {size}")
        tables[c, :values.size] = values
        tables[c, values.size:] = values[-1]
        index[c] = np.searchsorted(values, rows[c])
    return _pack_indices(index, bits), tables.reshape(-1)


def _pack_indices(index: np.ndarray, bits: int) -> np.ndarray:
    """Rows of indices [channels, count], ``bits`` wide, little-endian, each row byte-padded (uint8)."""
    channels, count = index.shape
    bit_pos = np.arange(count)[:, None] * bits + np.arange(bits)[None, :]  # [count, bits]
    row_bits = np.zeros((channels, palette_row_bytes(count, bits) * 8), dtype=np.uint8)
    row_bits[:, bit_pos.reshape(-1)] = ((index[:, :, None] >> np.arange(bits)) & 1).reshape(channels, -1)
    return np.packbits(row_bits.reshape(channels, -1, 8), axis=2, bitorder="little").reshape(-1).astype(np.uint8)


def unpack_palette(indices: np.ndarray, tables: np.ndarray, bits: int, channels: int, count: int) -> np.ndarray:
    """The int8 rows [channels, count] that :func:`pack_palette` stored."""
    row_bytes = palette_row_bytes(count, bits)
    raw = np.asarray(indices, dtype=np.uint8).reshape(channels, row_bytes)
    row_bits = np.unpackbits(raw, axis=1, bitorder="little")[:, :count * bits].reshape(channels, count, bits)
    index = (row_bits.astype(np.int64) << np.arange(bits)).sum(axis=2)
    table = np.asarray(tables, dtype=np.int8).reshape(-1, 1 << bits)  # (one row: shared)
    table = np.broadcast_to(table, (channels, 1 << bits))
    return np.take_along_axis(table, index, axis=1)
