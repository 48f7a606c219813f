"""Index tables and Python references of the resampling and data-movement kernels:
mcu_remap, mcu_index_select, mcu_gather, mcu_resize_bilinear_f32/_s8
(runtime_c/include/mcu/kernels_generic.h, kernels_f32.h, kernels_s8.h).

The source coordinates follow PyTorch's CPU kernels (aten/src/ATen/native/UpSample.h) in float32:
the nearest index is ``min(floor(o * scale), in - 1)`` with ``scale = 1 / scale_factor`` when the
op carries one and ``in / out`` otherwise (``o >> 1`` when out == 2 * in, ``o`` when out == in);
bilinear takes ``src = scale * o`` (align_corners, ``scale = (in - 1) / (out - 1)``) or
``max(scale * (o + 0.5) - 0.5, 0)``, ``i0 = int(src)``, ``i1 = i0 + (i0 < in - 1)``,
``l1 = clamp(src - i0, 0, 1)``. The int8 kernel weighs i1 by ``f = floor(l1 * 1024 + 0.5)`` (TFLite's
10 fractional bits) and i0 by ``1024 - f``, sums the four products of the raw int8 values in int32
and divides by 2^20 rounding half away from zero.
"""

from __future__ import annotations

import math

import numpy as np
from mcu.ir import Tensor

from mcu.ir import Op

ONE = 1024  # the int8 bilinear weights' unit


def _scale(in_size: int, out_size: int, scale: float | None) -> np.float32:
    """compute_scales_value<float>: 1 / scale_factor when given, else in / out (in float32)."""
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


def nearest_table(in_size: int, out_size: int, scale: float | None) -> list[int]:
    if out_size == in_size:
        return list(range(out_size))
    if out_size == 2 * in_size:
        return [o >> 1 for o in range(out_size)]
    s = _scale(in_size, out_size, scale)
    return [min(int(math.floor(np.float32(o) * s)), in_size - 1) for o in range(out_size)]


def bilinear_axis(in_size: int, out_size: int, align_corners: bool, scale: float | None,
                  ) -> list[tuple[int, int, np.float32]]:
    """(i0, i1, lambda1) for each output index along one axis."""
    if out_size == in_size:
        return [(o, o, np.float32(0.0)) for o in range(out_size)]
    if align_corners:
        s = np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 else np.float32(0.0)
    else:
        s = _scale(in_size, out_size, scale)
    rows = []
    for o in range(out_size):
        if align_corners:
            src = np.float32(s * np.float32(o))
        else:
            src = np.float32(max(np.float32(s * (np.float32(o) + np.float32(0.5))) - np.float32(0.5), np.float32(0.0)))
        i0 = int(src)
        i1 = i0 + (1 if i0 < in_size - 1 else 0)
        lam = np.float32(min(max(np.float32(src - np.float32(i0)), np.float32(0.0)), np.float32(1.0)))
        rows.append((i0, i1, lam))
    return rows


def bilinear_tables_f32(h: int, w: int, oh: int, ow: int, align_corners: bool, scale_h: float | None,
                        scale_w: float | None) -> tuple[np.ndarray, np.ndarray]:
    """mcu_resize_bilinear_f32's tables: (y0, y1) per row then (x0, x1) per column; (1-l, l) alike."""
    axes = bilinear_axis(h, oh, align_corners, scale_h) + bilinear_axis(w, ow, align_corners, scale_w)
    index = np.array([[i0, i1] for i0, i1, _ in axes], np.int32).reshape(-1)
    lam = np.array([[np.float32(1.0) - l1, l1] for _, _, l1 in axes], np.float32).reshape(-1)
    return index, lam


def bilinear_tables_s8(h: int, w: int, oh: int, ow: int, align_corners: bool, scale_h: float | None,
                       scale_w: float | None) -> np.ndarray:
    """mcu_resize_bilinear_s8's table: (y0, y1, fy) per row then (x0, x1, fx) per column."""
    axes = bilinear_axis(h, oh, align_corners, scale_h) + bilinear_axis(w, ow, align_corners, scale_w)
    return np.array([[i0, i1, int(math.floor(float(l1) * ONE + 0.5))] for i0, i1, l1 in axes],
                    np.int32).reshape(-1)


# --- references (arrays in memory order) ----------------------------------------------------------


def remap(x: np.ndarray, in_shape: list[int], tables: list[list[int]]) -> np.ndarray:
    return x.reshape(in_shape)[np.ix_(*[np.asarray(t, np.int64) for t in tables])]


def index_select(x: np.ndarray, outer: int, axis: int, inner: int, indices: np.ndarray) -> np.ndarray:
    return x.reshape(outer, axis, inner)[:, np.asarray(indices, np.int64).reshape(-1), :]


def gather(x: np.ndarray, in_shape: list[int], index: np.ndarray, out_shape: list[int], dim: int) -> np.ndarray:
    src = x.reshape(in_shape)[tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(out_shape))]
    return np.take_along_axis(src, np.asarray(index, np.int64).reshape(out_shape), axis=dim)


def resize_bilinear_s8(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int,
                       index: np.ndarray) -> np.ndarray:
    return _resize_bilinear_codes(x, outer, h, w, inner, oh, ow, index).astype(np.int8)


def resize_bilinear_s16(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int,
                        index: np.ndarray) -> np.ndarray:
    """mcu_resize_bilinear_s16: mcu_resize_bilinear_s8's arithmetic on int16 codes (a weighted mean stays in range)."""
    return _resize_bilinear_codes(x, outer, h, w, inner, oh, ow, index).astype(np.int16)


def _resize_bilinear_codes(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int,
                           index: np.ndarray) -> np.ndarray:
    t = np.asarray(index, np.int64).reshape(-1, 3)
    ys, xs = t[:oh], t[oh:oh + ow]
    v = x.reshape(outer, h, w, inner).astype(np.int64)
    fy = ys[:, 2][None, :, None, None]
    fx = xs[:, 2][None, None, :, None]
    r0, r1 = v[:, ys[:, 0]], v[:, ys[:, 1]]
    acc = (r0[:, :, xs[:, 0]] * (ONE - fy) * (ONE - fx) + r0[:, :, xs[:, 1]] * (ONE - fy) * fx
           + r1[:, :, xs[:, 0]] * fy * (ONE - fx) + r1[:, :, xs[:, 1]] * fy * fx)
    half = 1 << 19
    q = np.where(acc >= 0, (acc + half) // (1 << 20), -((-acc + half) // (1 << 20)))  # C division truncates
    return q


def resize_bilinear_f32(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int,
                        index: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """The kernel's float32 expression, operation by operation (bit-exact without FMA contraction)."""
    t = np.asarray(index, np.int64).reshape(-1, 2)
    lt = np.asarray(lam, np.float32).reshape(-1, 2)
    ys, xs = t[:oh], t[oh:oh + ow]
    h0, h1 = lt[:oh, 0][None, :, None, None], lt[:oh, 1][None, :, None, None]
    w0, w1 = lt[oh:, 0][None, None, :, None], lt[oh:, 1][None, None, :, None]
    v = x.reshape(outer, h, w, inner).astype(np.float32)
    r0, r1 = v[:, ys[:, 0]], v[:, ys[:, 1]]
    top = w0 * r0[:, :, xs[:, 0]] + w1 * r0[:, :, xs[:, 1]]
    bottom = w0 * r1[:, :, xs[:, 0]] + w1 * r1[:, :, xs[:, 1]]
    return (h0 * top + h1 * bottom).astype(np.float32)


def physical_tables(op: Op) -> Tensor:
    """A remap's table constant with one table per dim in the output's memory order (layout pass)."""
    tables = op.attrs["tables"]
    data = np.concatenate([np.asarray(tables[d], np.int64) for d in op.output.dim_order]).astype(np.int32)
    old = op.inputs[1]
    return Tensor(name=old.name, shape=data.shape, dtype="int32", data=data)
