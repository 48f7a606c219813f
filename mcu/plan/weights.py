"""Which constant tensors gain most from fast memory (``--weights-in fast``, mcu/device/placement.py).

A constant's bytes are read about once per output position of the op that uses it: a convolution's or
depthwise's weights, bias and requantization words once per output pixel (the kernels walk the whole
filter for each pixel or pair of pixels), a fully connected layer's once per row of its batch. So the
order is by that count, the estimate of bytes read per inference per byte stored, highest first; ties
(and constants of ops whose output has fewer than two dimensions) keep op order. The estimate ignores a
cache in front of flash, which serves re-reads of a small filter anyway: moving the many-times-read
arrays first is still what saves the most wait states per byte of fast memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcu.ir import Graph, Tensor


def positions(t: Tensor) -> int:
    """Output positions of an op writing ``t``: all elements but its channel dimension (logical dim 1)."""
    if len(t.shape) < 2 or t.shape[1] == 0:
        return 1
    return max(1, t.numel // t.shape[1])


def reads_per_inference(graph: Graph) -> dict[str, int]:
    """Constant tensor name -> the times one inference reads its bytes (estimated, see the module docstring)."""
    reads: dict[str, int] = {}
    for op in graph.ops:
        count = positions(op.output) if op.outputs else 1
        for t in [*op.inputs, *_attr_tensors(op.attrs)]:
            if t.is_constant:
                reads[t.name] = reads.get(t.name, 0) + count
    return reads


def _attr_tensors(attrs: dict[str, Any]) -> list[Tensor]:
    """Tensors a backend keeps in an op's attributes (a packed weight stream replaces the op's weights)."""
    found: list[Tensor] = []
    for value in attrs.values():
        items = value if isinstance(value, (list, tuple)) else [value]
        found += [v for v in items if isinstance(v, Tensor)]
    return found


def by_priority(graph: Graph, constants: Sequence[tuple[str, str]]) -> list[str]:
    """``constants`` (tensor name, C symbol) in op order -> their symbols, most re-read first."""
    reads = reads_per_inference(graph)
    order = sorted(range(len(constants)), key=lambda i: -reads.get(constants[i][0], 1))
    return [constants[i][1] for i in order]
