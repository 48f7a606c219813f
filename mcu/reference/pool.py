"""Bit-exact Python references of the pooling kernels: ``mcu_max_pool2d_s8``, ``mcu_avg_pool2d_s8`` and
``mcu_mean_hw_s8`` (layouts and keyword parameters as :mod:`mcu.reference.common` describes), and
``mcu_adaptive_avg_pool_s8`` / ``_f32`` on [outer][h][w][inner] arrays."""

from __future__ import annotations

import numpy as np

from mcu.reference.common import as_int8, check_shape, finish, patches, window_geometry

__all__ = ["max_pool2d_s8", "avg_pool2d_s8", "mean_hw_s8", "adaptive_avg_pool_s8", "adaptive_avg_pool_s16",
           "adaptive_avg_pool_f32"]


def _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, input, output):
    x = as_int8(x)
    check_shape("input", input, x.shape)
    n, h, w, c = x.shape
    geo = window_geometry(x, int(kernel_h), int(kernel_w),
                          dict(stride_h=stride_h, stride_w=stride_w, pad_top=pad_top, pad_left=pad_left,
                               output=output))
    out_h, out_w, sh, sw, _, _, pt, pl = geo
    if output is not None:
        check_shape("output", output, (n, out_h, out_w, c))
    if not (pt < kernel_h and pl < kernel_w and (out_h - 1) * sh - pt < h and (out_w - 1) * sw - pl < w):
        raise ValueError("a pooling window lies entirely in the padding")
    return x, (out_h, out_w, int(kernel_h), int(kernel_w), sh, sw, 1, 1, pt, pl)


def max_pool2d_s8(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top=0, pad_left=0, act_min=-128,
                  act_max=127, input=None, output=None):
    """mcu_max_pool2d_s8: max over the window's real (unpadded) taps, then clamp."""
    x, g = _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, input, output)
    p = patches(x.astype(np.int16), *g, fill=-1000)
    return np.clip(p.max(axis=(3, 4)), int(act_min), int(act_max)).astype(np.int8)


def avg_pool2d_s8(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top=0, pad_left=0, act_min=-128,
                  act_max=127, input=None, output=None):
    """mcu_avg_pool2d_s8: sum / count over real taps, rounded half away from zero, then clamp."""
    x, g = _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, input, output)
    s = patches(x.astype(np.int64), *g).sum(axis=(3, 4))
    ones = np.ones(x.shape[:3] + (1,), dtype=np.int64)
    count = patches(ones, *g).sum(axis=(3, 4))
    q = np.sign(s) * ((np.abs(s) + count // 2) // count)
    return np.clip(q, int(act_min), int(act_max)).astype(np.int8)


def mean_hw_s8(x, *, input_offset, multiplier, shift, output_offset, act_min=-128, act_max=127,
               input=None):
    """mcu_mean_hw_s8: out[n][c] = clamp(rq(sum_hw(q + input_offset), multiplier, shift) + output_offset)."""
    x = as_int8(x)
    check_shape("input", input, x.shape)
    s = (x.astype(np.int64) + int(input_offset)).sum(axis=(1, 2))
    return finish(s, multiplier, shift, output_offset, act_min, act_max)


def _windows(in_size: int, out_size: int) -> list[tuple[int, int]]:
    return [(i * in_size // out_size, -(-(i + 1) * in_size // out_size)) for i in range(out_size)]


def adaptive_avg_pool_s8(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int) -> np.ndarray:
    return _adaptive_avg_pool(x, outer, h, w, inner, oh, ow).clip(-128, 127).astype(np.int8)


def adaptive_avg_pool_s16(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int) -> np.ndarray:
    """mcu_adaptive_avg_pool_s16: the int8 kernel's windows and rounding (half away from zero) on int16 codes."""
    return _adaptive_avg_pool(x, outer, h, w, inner, oh, ow).astype(np.int16)


def _adaptive_avg_pool(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int) -> np.ndarray:
    """Each window's exact sum divided by its size, rounded half away from zero (int64)."""
    v = x.reshape(outer, h, w, inner).astype(np.int64)
    out = np.zeros((outer, oh, ow, inner), np.int64)
    for i, (y0, y1) in enumerate(_windows(h, oh)):
        for j, (x0, x1) in enumerate(_windows(w, ow)):
            s = v[:, y0:y1, x0:x1, :].sum(axis=(1, 2))
            n = (y1 - y0) * (x1 - x0)
            out[:, i, j, :] = np.where(s > 0, (s + n // 2) // n, -((-s + n // 2) // n))
    return out


def adaptive_avg_pool_f32(x: np.ndarray, outer: int, h: int, w: int, inner: int, oh: int, ow: int) -> np.ndarray:
    """float32 sums in the kernel's order (rows, then columns), divided by the window size."""
    v = x.reshape(outer, h, w, inner).astype(np.float32)
    out = np.zeros((outer, oh, ow, inner), np.float32)
    for i, (y0, y1) in enumerate(_windows(h, oh)):
        for j, (x0, x1) in enumerate(_windows(w, ow)):
            s = np.zeros((outer, inner), np.float32)
            for yy in range(y0, y1):
                for xx in range(x0, x1):
                    s = (s + v[:, yy, xx, :]).astype(np.float32)
            out[:, i, j, :] = s / np.float32((y1 - y0) * (x1 - x0))
    return out
