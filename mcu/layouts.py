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
