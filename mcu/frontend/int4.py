"""torchao's groupwise weights in the frontend: ``torchao.dequantize_affine`` on constant weights.

torchao's ``IntxWeightOnlyConfig`` stores a linear weight as integer values, a scale and a zero-point
per block of ``block_size`` elements and dequantizes it inside the graph. The op is kept whole by the
Edge stage (mcu/capture/edge.py) and folded here like the int8 per-channel dequantize: the float constant it
computes, plus a :class:`~mcu.ir.QConst` with the integers and the per-element scale and zero-point, so
that the int4 lowering (mcu/passes/weights_int4.py) can store the 4-bit values instead of floats.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mcu.capture.edge import torchao_kept_whole
from mcu.errors import McuError
from mcu.ir import QConst, Tensor


def dequantize_affine_ops() -> set[object]:
    return set(torchao_kept_whole())


def fold_dequantize_affine(args: list[Any]) -> QConst:
    """The integer form of ``dequantize_affine(values, block_size, scale, zero_point, ...)`` on constants."""
    values, block_size, scale, zero_point = args[:4]
    if not all(isinstance(t, Tensor) and t.is_constant for t in (values, scale)):
        raise McuError("torchao.dequantize_affine on a non-constant tensor is not supported",
                       hint="only weights quantized by torchao (constants) can be dequantized")
    data = np.asarray(values.data)
    if data.dtype != np.int8:
        raise McuError(f"torchao.dequantize_affine of {data.dtype} values is not supported (int8 storage only)")
    blocks = [int(b) for b in block_size]
    if len(blocks) != data.ndim or any(b < 1 or n % b for b, n in zip(blocks, data.shape)):
        raise McuError(f"torchao.dequantize_affine block size {blocks} does not tile a weight of shape "
                       f"{list(data.shape)}")

    def per_element(t: Tensor | None, dtype: Any) -> np.ndarray:
        if t is None:
            return np.zeros(data.shape, dtype)
        arr = np.asarray(t.data).astype(dtype).reshape([n // b for n, b in zip(data.shape, blocks)])
        for axis, b in enumerate(blocks):
            arr = np.repeat(arr, b, axis=axis)
        return np.ascontiguousarray(arr)

    zp = zero_point if isinstance(zero_point, Tensor) else None
    return QConst(data.copy(), per_element(scale, np.float64), per_element(zp, np.int64))

