"""A user custom op in the reference: its registered Python reference (the registration is the IR op's
``custom`` attribute) on logical-shape arrays, with the call's quantization taken from the op's tensors.
:class:`CustomQuant` is what an int8 Python reference receives (mcu/capture/custom_ops.py registers them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.layouts import from_memory_order, to_memory_order


@dataclass(frozen=True)
class CustomQuant:
    """Quantization of an int8 call, as the C kernel sees it in ``mcu_custom_call``."""

    input_scales: tuple[float, ...]
    input_zero_points: tuple[int, ...]
    output_scale: float
    output_zero_point: int


def _quant(t: Tensor) -> tuple[float, int]:
    return (float(t.quant.scale[0]), int(t.quant.zero_point[0])) if t.quant is not None else (1.0, 0)


def run_custom(op: Op, flat_inputs: list[np.ndarray]) -> np.ndarray:
    """The op's Python reference on memory-order inputs; memory-order output."""
    reg = op.attrs["custom"]
    args = tuple(op.attrs.get("args", ()))
    xs = [from_memory_order(np.asarray(x).reshape(-1), t) for x, t in zip(flat_inputs, op.inputs)]
    out = op.output
    if out.dtype == "int8":
        if reg.reference_int8 is None:
            raise McuError(f"custom op {reg.name} has an int8 call but no integer reference")
        ins = [_quant(t) for t in op.inputs]
        quant = CustomQuant(tuple(s for s, _ in ins), tuple(z for _, z in ins), *_quant(out))
        y = reg.reference_int8([x.astype(np.int8) for x in xs], args, quant)
    else:
        if reg.reference_fp32 is None:
            raise McuError(f"custom op {reg.name} has an fp32 call but no Python reference")
        y = reg.reference_fp32([x.astype(np.float32) for x in xs], args)
    y = np.asarray(y)
    if tuple(y.shape) != tuple(out.shape):
        raise McuError(f"custom op {reg.name}: its Python reference returned shape {list(y.shape)}, "
                       f"the op's output is {list(out.shape)}")
    return to_memory_order(y.astype(np.int8 if out.dtype == "int8" else np.float32), out).reshape(-1)
