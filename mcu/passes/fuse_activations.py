"""Fuse a clamp (ReLU, ReLU6, hardtanh, clamp) into the op that produces its input.

Kernels with an ``act`` attribute clamp their own output, so the separate
clamp and the tensor between them disappear. Only when the producer's output
has no other reader: otherwise that reader would see clamped values.
"""

from __future__ import annotations

from mcu.ir import Graph

FUSABLE = {"conv2d", "linear", "add", "sub", "mul", "max_pool2d", "avg_pool2d", "conv_transpose2d"}


def _combine(act: tuple[float | None, float | None] | None, lo: float | None,
             hi: float | None) -> tuple[float | None, float | None]:
    if act is None:
        return (lo, hi)
    a_lo, a_hi = act
    new_lo = lo if a_lo is None else (a_lo if lo is None else max(a_lo, lo))
    new_hi = hi if a_hi is None else (a_hi if hi is None else min(a_hi, hi))
    return (new_lo, new_hi)


def fuse_activations(graph: Graph) -> Graph:
    for clamp in [op for op in graph.ops if op.kind == "clamp"]:
        x = clamp.inputs[0]
        producer = graph.producer(x)
        if producer is None or producer.kind not in FUSABLE or len(graph.users(x)) != 1 or x.is_output:
            continue
        if x.dtype != "float32":  # int8 clamps fuse in the quantized lowering instead
            continue
        producer.attrs["act"] = _combine(producer.attrs.get("act"), clamp.attrs["min"], clamp.attrs["max"])
        producer.outputs = [clamp.outputs[0]]
        graph.ops.remove(clamp)
    return graph
