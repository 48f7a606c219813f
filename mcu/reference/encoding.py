"""A model's inputs and outputs as the device holds them: real values in PyTorch's logical shape <->
flat arrays in the tensor's memory order and dtype, quantized and dequantized with the arithmetic of
mcu_quantize_f32_s8 and mcu_dequantize_s8_f32. The Python API and the program runtime both use it."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES
from mcu.reference.kernels import dequantize_s8_f32, inv_scale, quantize_f32_s8


def encode(values: Any, name: str, shape: Sequence[int], dim_order: Sequence[int], dtype: str,
           scale: float | None = None, zero_point: int = 0) -> np.ndarray:
    """Values in logical shape -> the device's flat array in memory order. Floating values for an int8
    tensor with a scale are quantized; any other values are taken as the device's own."""
    arr = np.asarray(values)
    if dtype == "int8" and scale is not None and np.issubdtype(arr.dtype, np.floating):
        arr = quantize_f32_s8(arr.astype(np.float32), inv_scale=inv_scale(scale), zero_point=zero_point)
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
    if not real or dtype != "int8" or scale is None:
        return values
    return dequantize_s8_f32(values, scale=scale, zero_point=zero_point).reshape(values.shape)
