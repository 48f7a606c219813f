"""Convert arrays between logical (PyTorch) order and a tensor's memory order."""

from __future__ import annotations

import numpy as np

from mcu.ir import Tensor


def to_memory_order(x: np.ndarray, t: Tensor) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(np.asarray(x).reshape(t.shape), t.dim_order)).reshape(-1)


def from_memory_order(flat: np.ndarray, t: Tensor) -> np.ndarray:
    inverse = np.argsort(t.dim_order)
    return np.ascontiguousarray(np.transpose(np.asarray(flat).reshape(t.physical_shape), inverse))
