"""4-bit groupwise weights for fp32 linear layers (the ``int4-weight`` mode).

A linear layer whose weight came from torchao's ``IntxWeightOnlyConfig(weight_dtype=torch.int4,
granularity=PerGroup(g))`` reaches here as a float constant that remembers its integer form
(:class:`~mcu.ir.QConst`, folded from ``torchao.dequantize_affine`` by mcu/frontend/int4.py). It becomes
``linear_w4``: the values packed two per byte (an eighth of the fp32 bytes), one float32 scale per group
of ``group_size`` inputs, activations in fp32 (mcu_linear_w4_f32); in the ``int4-dynamic`` mode
``linear_w4_dyn``, whose activations are quantized to int8 per row at run time (mcu_linear_w4_s8). Weights that are not symmetric 4-bit
groupwise (a zero-point, values outside [-8, 7], an odd or ragged group) stay fp32 linear layers and are
listed in the graph's fallbacks with the reason.
"""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, QConst, Tensor
from mcu.reference.int4 import INT4_MAX, INT4_MIN, pack_int4


def group_size(qc: QConst) -> int | None:
    """The largest even group size (dividing the row) over which every scale of the weight is constant."""
    scale = qc.scale
    n_in = scale.shape[1]
    for g in sorted((d for d in range(2, n_in + 1, 2) if n_in % d == 0), reverse=True):
        blocks = scale.reshape(scale.shape[0], n_in // g, g)
        if np.all(blocks == blocks[:, :, :1]):
            return g
    return None


def _why_not(op: Op) -> str | None:
    w = op.inputs[1]
    qc = w.qconst
    if qc is None:
        return "its weight is not quantized (torchao left it fp32)"
    if len(w.shape) != 2 or qc.values.shape != w.shape:
        return f"weight of shape {list(w.shape)} is not a 2-D matrix"
    if np.any(qc.zero_point != 0):
        return "asymmetric weights (a non-zero zero-point) have no int4 kernel"
    if qc.values.size and (qc.values.min() < INT4_MIN or qc.values.max() > INT4_MAX):
        return "weight values lie outside [-8, 7]"
    if group_size(qc) is None:
        return "no even group size divides the row with one scale per group"
    return None


def lower_int4_linear(graph: Graph, dynamic: bool = False) -> Graph:
    """``dynamic``: ``linear_w4_dyn`` (int8 activations quantized per row at run time, mcu_linear_w4_s8)."""
    for op in graph.ops:
        if op.kind != "linear" or op.output.dtype != "float32" or not op.inputs[1].is_constant:
            continue
        why = _why_not(op)
        if why is not None:
            graph.fallbacks.append((f"linear {op.name}", f"kept fp32: {why}"))
            continue
        w = op.inputs[1]
        qc = w.qconst
        assert qc is not None
        g = group_size(qc)
        assert g is not None
        out_f, in_f = w.shape
        packed = pack_int4(qc.values)
        scales = qc.scale[:, ::g].astype(np.float32)
        op.inputs = [op.inputs[0], Tensor(name=f"{w.name}_w4", shape=(out_f, in_f // 2), dtype="uint8", data=packed),
                     Tensor(name=f"{w.name}_scale", shape=(out_f, in_f // g), data=np.ascontiguousarray(scales)),
                     *op.inputs[2:]]
        op.kind = "linear_w4_dyn" if dynamic else "linear_w4"
        op.attrs["group_size"] = g
        if dynamic:
            op.attrs["scratch_bytes"] = 2 * in_f  # the row's q - zp as int16
    return graph


def lower_int8_embedding(graph: Graph) -> Graph:
    """Embedding tables torchao stored as int8 with one scale per row become ``embedding_s8``: the int8
    table and a float32 scale per row in flash, rows dequantized as they are gathered
    (mcu_embedding_s8_f32: value * scale, the product torchao computes)."""
    for op in graph.ops:
        if op.kind != "embedding" or op.output.dtype != "float32" or not op.inputs[0].is_constant:
            continue
        table = op.inputs[0]
        qc = table.qconst
        if qc is None:
            continue
        rows = qc.scale.reshape(table.shape[0], -1)
        if np.any(qc.zero_point != 0) or not np.all(rows == rows[:, :1]):
            graph.fallbacks.append((f"embedding {op.name}", "kept fp32: not symmetric int8 with one scale per row"))
            continue
        op.inputs = [Tensor(name=f"{table.name}_s8", shape=table.shape, dtype="int8",
                            data=np.ascontiguousarray(qc.values.astype(np.int8))),
                     Tensor(name=f"{table.name}_scale", shape=(table.shape[0],),
                            data=np.ascontiguousarray(rows[:, 0].astype(np.float32))),
                     op.inputs[1]]
        op.kind = "embedding_s8"
    return graph
