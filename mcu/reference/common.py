"""What the int8 kernel references of every family share: the array checks, the last step of a
requantizing kernel (:func:`finish`) and the sliding-window geometry.

The references compute exactly what the C kernels compute, on numpy arrays in the kernels' physical
layouts: activations NHWC, convolution weights OHWI ``[out_c][kh][kw][in_c/groups]``, depthwise weights
``[kh][kw][out_c]``, linear weights ``[out][in]``. Parameters are keyword arguments named like the
fields of the C parameter structs, so a dict of struct fields can be splatted in (``**params``). Shape
fields (``input``, ``output``, ``batch``...) are optional: when given they are checked against the arrays
(``output`` also fixes the output size of the sliding-window ops, which implies the bottom/right
padding); when omitted they follow from the arrays, and sliding windows default to bottom/right padding
equal to top/left. Per-channel ``multiplier`` / ``shift`` are int32 arrays with one entry per output
channel (a scalar broadcasts). Activations/outputs are int8 arrays.
"""

from __future__ import annotations

import numpy as np

from mcu.reference.arith import requantize


def as_int64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def as_int8(x) -> np.ndarray:
    """``x`` as an array, which must already hold int8 codes."""
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise TypeError(f"expected an int8 array, got {x.dtype}")
    return x


def finish(acc, multiplier, shift, output_offset, act_min, act_max) -> np.ndarray:
    """clamp(requantize(acc) + output_offset, act_min, act_max) as int8."""
    y = requantize(acc, multiplier, shift) + int(output_offset)
    return np.clip(y, int(act_min), int(act_max)).astype(np.int8)


def check_shape(name, given, actual) -> None:
    if given is not None and tuple(int(v) for v in given) != tuple(actual):
        raise ValueError(f"{name} {tuple(given)} does not match the array shape {tuple(actual)}")


def _out_size(size, k, stride, dilation, pad):
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def patches(xo: np.ndarray, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, fill=0) -> np.ndarray:
    """Windows of NHWC ``xo`` as (n, out_h, out_w, kh, kw, c); taps outside the input read ``fill``."""
    n, h, w, c = xo.shape
    rows = np.arange(out_h)[:, None] * sh + np.arange(kh)[None, :] * dh - pt  # (out_h, kh)
    cols = np.arange(out_w)[:, None] * sw + np.arange(kw)[None, :] * dw - pl  # (out_w, kw)
    top = max(0, -int(rows.min()))
    left = max(0, -int(cols.min()))
    bottom = max(0, int(rows.max()) + 1 - h)
    right = max(0, int(cols.max()) + 1 - w)
    xp = np.pad(xo, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    r = (rows + top)[:, None, :, None]
    cc = (cols + left)[None, :, None, :]
    return xp[:, r, cc, :]


def window_geometry(x, kh, kw, params):
    """(out_h, out_w, sh, sw, dh, dw, pt, pl) of a sliding window over NHWC ``x``; ``params`` holds the
    struct's stride, padding, optional dilation and optional output shape."""
    n, h, w, c = x.shape
    sh, sw = int(params["stride_h"]), int(params["stride_w"])
    dh, dw = int(params.get("dilation_h", 1)), int(params.get("dilation_w", 1))
    pt, pl = int(params["pad_top"]), int(params["pad_left"])
    output = params.get("output")
    if output is not None:
        out_h, out_w = int(output[1]), int(output[2])
    else:
        out_h, out_w = _out_size(h, kh, sh, dh, pt), _out_size(w, kw, sw, dw, pl)
    if out_h <= 0 or out_w <= 0:
        raise ValueError("empty output")
    return out_h, out_w, sh, sw, dh, dw, pt, pl
