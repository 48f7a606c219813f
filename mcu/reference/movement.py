"""The reference's data-movement ops (``mcu_permute``, ``mcu_pad``, ``mcu_concat``, ``mcu_slice``) on
memory-order arrays: exact at any dtype, they move values without arithmetic. Each takes the input's
logical values, moves them as the op says and puts the result in the output's memory order; an int8
pad's fill code comes from the output's quantization (:func:`mcu.reference.derive.pad_code`)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from mcu.ir import Op
from mcu.layouts import from_memory_order, to_memory_order
from mcu.reference import derive

Run = Callable[[Op, list[np.ndarray]], np.ndarray]


def _permute_like(op: Op, x: list[np.ndarray], perm: tuple[int, ...]) -> np.ndarray:
    return to_memory_order(np.transpose(from_memory_order(x[0], op.inputs[0]), perm), op.output)


def _slice(op: Op, x: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    index = tuple(slice(a["start"], a["start"] + op.output.shape[d] * a["step"], a["step"]) if d == a["dim"]
                  else slice(None) for d in range(len(op.inputs[0].shape)))
    return to_memory_order(from_memory_order(x[0], op.inputs[0])[index], op.output)


def _concat(op: Op, x: list[np.ndarray]) -> np.ndarray:
    parts = [from_memory_order(v, t) for v, t in zip(x, op.inputs)]
    return to_memory_order(np.concatenate(parts, axis=op.attrs["axis"]), op.output)


def _pad(op: Op, x: list[np.ndarray]) -> np.ndarray:
    src = op.inputs[0]
    width = [(op.attrs["before"][d], op.attrs["after"][d]) for d in range(len(src.shape))]
    fill = derive.pad_code(op) if op.output.dtype == "int8" else op.attrs["value"]
    return to_memory_order(np.pad(from_memory_order(x[0], src), width, constant_values=fill), op.output)


# The same at int8 and fp32.
OPS: dict[str, Run] = {
    "permute": lambda op, x: _permute_like(op, x, op.attrs["perm"]),
    "layout": lambda op, x: _permute_like(op, x, tuple(range(len(op.inputs[0].shape)))),
    "concat": _concat,
    "pad": _pad,
    "slice": _slice,
}
