"""A model's inputs and outputs as the device holds them: real values in PyTorch's logical shape <->
flat arrays in the tensor's memory order and dtype, quantized and dequantized with the arithmetic of
mcu_quantize_f32_s8 and mcu_dequantize_s8_f32, whose bit-exact references are here (kept free of torch:
the program runtime imports this module). The Python API and the program runtime both use it."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES
from mcu.reference.common import as_int8


def inv_scale(scale: float) -> np.float32:
    """The float32 ``inv_scale`` argument of mcu_quantize_f32_s8 for a quantization scale (torch's 1.0 / scale)."""
    return np.float32(1.0 / float(scale))


def quantize_f32_s8(x, *, inv_scale, zero_point, size=None):
    """mcu_quantize_f32_s8, equal to torch.ops.quantized_decomposed.quantize_per_tensor on float32 input.

    v = x * inv_scale in float32 (torch multiplies by the float32 value of
    1.0 / scale); q = clamp(round_half_even(v) + zero_point, -128, 127).
    NaN maps to zero_point (torch leaves that case undefined).
    """
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        v = x * np.float32(inv_scale)
        r = np.rint(v) + np.float32(zero_point)
        q = np.clip(r, -128, 127)
    q = np.where(np.isnan(v), float(zero_point), q)
    return q.astype(np.int8)


def quantize_f32_s16(x, *, inv_scale, zero_point, size=None):
    """mcu_quantize_f32_s16: mcu_quantize_f32_s8's rule on [-32768, 32767] (w8a16's inputs)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        v = x * np.float32(inv_scale)
        q = np.clip(np.rint(v).astype(np.float64) + zero_point, -32768, 32767)
    q = np.where(np.isnan(v), float(zero_point), q)
    return q.astype(np.int16)


def dequantize_s16_f32(x, *, scale, zero_point, size=None):
    """mcu_dequantize_s16_f32: (float32)(q - zero_point) * float32(scale)."""
    q = np.asarray(x, dtype=np.int16).astype(np.float32) - np.float32(zero_point)
    return (q * np.float32(scale)).astype(np.float32)


def dequantize_s8_f32(x, *, scale, zero_point, size=None):
    """mcu_dequantize_s8_f32: (float32)(q - zero_point) * float32(scale), as torch's dequantize_per_tensor."""
    q = as_int8(x).astype(np.float32) - np.float32(zero_point)
    return (q * np.float32(scale)).astype(np.float32)


def encode(values: Any, name: str, shape: Sequence[int], dim_order: Sequence[int], dtype: str,
           scale: float | None = None, zero_point: int = 0) -> np.ndarray:
    """Values in logical shape -> the device's flat array in memory order. Floating values for an int8
    (or int16) tensor with a scale are quantized; any other values are taken as the device's own."""
    arr = np.asarray(values)
    if dtype in ("int8", "int16") and scale is not None and np.issubdtype(arr.dtype, np.floating):
        quantize = quantize_f32_s16 if dtype == "int16" else quantize_f32_s8
        arr = quantize(arr.astype(np.float32), inv_scale=inv_scale(scale), zero_point=zero_point)
    numel = int(np.prod(shape, dtype=np.int64))
    if arr.size != numel:
        raise McuError(f"{name} has shape {list(shape)} ({numel} elements), got an array "
                       f"of shape {list(arr.shape)}")
    arr = np.transpose(arr.reshape(tuple(shape)), tuple(dim_order)) if len(shape) else arr.reshape(())
    return np.ascontiguousarray(arr, dtype=NUMPY_DTYPES[dtype]).reshape(-1)


def decode(flat: np.ndarray, shape: Sequence[int], dim_order: Sequence[int], dtype: str,
           scale: float | None = None, zero_point: int = 0, real: bool = True) -> np.ndarray:
    """The device's flat array in memory order -> logical shape; ``real``: an int8 tensor with a scale
    dequantized to float32, as the model's real values."""
    flat = np.asarray(flat)
    if not len(shape):
        values = flat.reshape(())
    else:
        physical = tuple(shape[d] for d in dim_order)
        values = np.ascontiguousarray(np.transpose(flat.reshape(physical), np.argsort(tuple(dim_order))))
    if not real or dtype not in ("int8", "int16") or scale is None:
        return values
    dequantize = dequantize_s16_f32 if dtype == "int16" else dequantize_s8_f32
    return dequantize(values, scale=scale, zero_point=zero_point).reshape(values.shape)
