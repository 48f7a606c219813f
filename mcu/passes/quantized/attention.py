"""Attention's scaling folded into its product: ``softmax(q @ k^T * scale)`` lowers to an int8 bmm (int16 at
w8a16), a table that multiplies by the scale and the softmax. The bmm requantizes its sums anyway, so it can
write the scaled scores directly on the table's output grid (multiplier ``s_q * s_k * scale / s_out``): one pass
over the scores and one rounding fewer, the same arithmetic as any bmm (mcu/reference/conv.py ``bmm_s8``,
mcu/reference/s16_norm.py ``bmm_s16``).

A constant attention mask reaches the IR as ``where(hidden, -inf, scores)`` (or ``where(kept, scores, -inf)``)
read by a softmax over the last axis, between the scores' dequantize and the softmax's quantize
(mcu/quantize/attention.py). :func:`fold_softmax_masks` makes it one softmax with the hidden positions as an
attribute, which the int8 lowering turns into ``mcu_softmax_masked_s8``: a hidden position is minus infinity
before the softmax, so it takes no part in the row's maximum and sum and its probability is exactly 0
(code -128)."""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, Tensor
from mcu.reference import arith

_MOVES = ("reshape", "permute")  # an elementwise scaling commutes with moving the elements
# the product's clamp when it has none: int8, and int16 (w8a16's mcu_bmm_s16, whose table the scaling also is)
_BOUNDS = {"int8": (-128, 127), "int16": (-32768, 32767)}


def _sole_reader(graph: Graph, op: Op) -> Op | None:
    users = graph.users(op.output)
    return users[0] if len(users) == 1 and not op.output.is_output else None


def _scaling(op: Op) -> float | None:
    """The positive factor of a lut that only multiplies (x * alpha), else None."""
    if op.kind != "lut" or op.attrs.get("function") != "affine" or op.attrs.get("beta") != 0.0:
        return None
    alpha = op.attrs.get("alpha")
    return float(alpha) if isinstance(alpha, (int, float)) and alpha > 0.0 else None


def fold_scaling_into_bmm(graph: Graph) -> int:
    """bmm [-> reshape/permute] -> lut(x * alpha) becomes bmm [-> reshape/permute] on the lut's output
    parameters; returns how many were folded."""
    folded = 0
    for bmm in [op for op in graph.ops if op.kind == "bmm" and op.output.dtype in _BOUNDS]:
        dtype = bmm.output.dtype
        lo, hi = _BOUNDS[dtype]
        chain = [bmm]
        nxt = _sole_reader(graph, bmm)
        while nxt is not None and nxt.kind in _MOVES and nxt.output.dtype == dtype:
            chain.append(nxt)
            nxt = _sole_reader(graph, nxt)
        if nxt is None or bmm.attrs.get("act_min", lo) != lo or bmm.attrs.get("act_max", hi) != hi:
            continue
        alpha = _scaling(nxt)
        out = nxt.output
        if alpha is None or out.quant is None or len(out.quant.scale) != 1:
            continue
        a, b = bmm.inputs
        mult, shift = arith.quantize_multiplier(a.quant.scale[0] * b.quant.scale[0] * alpha / out.quant.scale[0])
        bmm.attrs.update(multiplier=mult, shift=shift, output_offset=out.quant.zero_point[0], scaling=alpha)
        for link in chain[:-1]:
            link.output.quant = out.quant
        chain[-1].outputs[0] = out
        graph.ops.remove(nxt)
        folded += 1
    return folded


def _minus_infinity(t: Tensor) -> bool:
    return t.is_constant and t.data is not None and np.asarray(t.data).size == 1 and \
        bool(np.isneginf(np.asarray(t.data, dtype=np.float64)).all())


def _hidden(where: Op) -> tuple[np.ndarray, Tensor] | None:
    """(hidden positions broadcast to the values' shape, the values) of a where that writes minus infinity
    where a constant condition says so, else None."""
    cond, a, b = where.inputs
    if not cond.is_constant or cond.data is None or cond.dtype != "uint8":
        return None
    flags = np.asarray(cond.data).reshape(cond.shape) != 0
    if _minus_infinity(a) and not b.is_constant:
        hidden, values = flags, b
    elif _minus_infinity(b) and not a.is_constant:
        hidden, values = ~flags, a
    else:
        return None
    try:
        return np.broadcast_to(hidden, values.shape).copy(), values
    except ValueError:
        return None


def fold_softmax_masks(graph: Graph) -> Graph:
    """``where(constant mask, -inf, x) -> softmax`` over the last axis becomes ``softmax(x)`` with
    ``attrs["hidden"]`` (bool, x's logical shape), where the softmax is quantized (its output read by
    quantize ops only) and no row hides every position (torch gives NaN there: left as it is)."""
    for sm in [op for op in graph.ops if op.kind == "softmax" and op.output.dtype == "float32"]:
        where = graph.producer(sm.inputs[0])
        if where is None or where.kind != "where" or where.output.is_output or len(graph.users(where.output)) != 1:
            continue
        readers = graph.users(sm.output)
        if not readers or any(r.kind != "quantize" for r in readers) or sm.output.is_output:
            continue
        found = _hidden(where)
        if found is None:
            continue
        hidden, values = found
        if sm.attrs["axis"] != len(values.shape) - 1 or hidden.all(axis=-1).any():
            continue
        sm.inputs[0] = values
        sm.attrs["hidden"] = hidden
        graph.ops.remove(where)
    return graph
