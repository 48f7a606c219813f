"""Reference of the state kernels (runtime_c/include/mcu/kernels_generic.h, ``mcu_index_put``)."""

from __future__ import annotations

import numpy as np


def index_put(state: np.ndarray, indices: np.ndarray, values: np.ndarray, outer: int, axis: int,
              inner: int) -> np.ndarray:
    """A copy of the flat ``state`` viewed as [outer, axis, inner] with rows ``indices`` (negative: from the
    end) along ``axis`` set from ``values`` [outer, len(indices), inner], in order (the last of repeated
    positions wins)."""
    out = np.array(state, copy=True).reshape(outer, axis, inner)
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < -axis or idx.max() >= axis):
        raise IndexError(f"index_put position outside [-{axis}, {axis})")
    vals = np.asarray(values).reshape(outer, idx.size, inner)
    for j, pos in enumerate(idx):
        out[:, pos % axis, :] = vals[:, j, :]
    return out.reshape(-1)
