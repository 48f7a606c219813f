"""Attention's scaling folded into its product: ``softmax(q @ k^T * scale)`` lowers to an int8 bmm, a table
that multiplies by the scale and the softmax. The bmm requantizes its int32 sums anyway, so it can write the
scaled scores directly on the table's output grid (multiplier ``s_q * s_k * scale / s_out``): one pass
over the scores and one rounding fewer, the same arithmetic as any bmm (mcu/reference/norm.py ``bmm_s8``)."""

from __future__ import annotations

from mcu.ir import Graph, Op
from mcu.reference import arith

_MOVES = ("reshape", "permute")  # an elementwise scaling commutes with moving the elements


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
    for bmm in [op for op in graph.ops if op.kind == "bmm" and op.output.dtype == "int8"]:
        chain = [bmm]
        nxt = _sole_reader(graph, bmm)
        while nxt is not None and nxt.kind in _MOVES and nxt.output.dtype == "int8":
            chain.append(nxt)
            nxt = _sole_reader(graph, nxt)
        if nxt is None or bmm.attrs.get("act_min", -128) != -128 or bmm.attrs.get("act_max", 127) != 127:
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
