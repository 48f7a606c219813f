"""int8 forms of the data movement family: reshape, permute, pad, slice and concatenation move codes, so
their input and output share one quantization (the quantizer shares it); a padding value and a
concatenated constant are put on that grid. Also the rewrites that move a reshape or permute to the int8
side of a dequantize or quantize, so that the op next to it can become int8."""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.passes.quantized.common import same_quant as _same_quant
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp


def _shared(kind: str):
    """Ops that cannot change quantization: input and output parameters must be equal."""
    def convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
        if not all(_same_quant(t, out) for t in ins):
            return "input and output quantization differ"
        attrs = dict(op.attrs)
        if kind == "pad":
            lo, hi = (-32768, 32767) if out.dtype == "int16" else (-128, 127)
            attrs["value_q"] = int(np.clip(np.round(op.attrs["value"] / _scale(out)) + _zp(out), lo, hi))
        return Op(kind, list(ins), [out], attrs, op.name, op.source)
    return convert


def constant_on_grid(t: Tensor, quant: QuantParams | None) -> Tensor | None:
    """A float constant as int8 codes on ``quant``'s grid (ops whose operands and output share one
    quantization, as concatenation): the quantizer's codes when it quantized the constant on that grid,
    else its values rounded onto it (saturating, as the observer saw them within the shared range)."""
    if quant is None or t.dtype != "float32" or t.data is None or len(quant.scale) != 1:
        return None
    scale, zp = float(quant.scale[0]), int(quant.zero_point[0])
    qc = t.qconst
    if qc is not None and np.all(qc.scale == scale) and np.all(qc.zero_point == zp):
        codes = np.asarray(qc.values, dtype=np.int8).reshape(t.shape)
    else:
        data = np.asarray(t.data, dtype=np.float64)
        codes = np.clip(np.round(data / scale) + zp, -128, 127).astype(np.int8).reshape(t.shape)
    return Tensor(name=f"{t.name}_q", shape=t.shape, dtype="int8", data=np.ascontiguousarray(codes),
                  dim_order=t.dim_order, quant=quant)


def permute_before_dequantize(graph: Graph) -> None:
    """A permute or reshape of a dequantized tensor (the permute the frontend puts before a reduction over
    dims apart, matmul's views before its bmm) moves the int8 codes instead: dequantize(permute(q))
    computes the same values, and the op after it reads a dequantize again, so it can become int8."""
    for op in list(graph.ops):
        producer = graph.producer(op.inputs[0]) if op.kind in ("permute", "reshape") and op.inputs else None
        if producer is None or producer.kind != "dequantize" or op.output.is_output:
            continue
        src = producer.inputs[0]
        moved = Tensor(name=f"{op.name}_q", shape=op.output.shape, dtype=src.dtype, quant=src.quant)
        at = graph.ops.index(op)
        graph.ops[at:at + 1] = [Op(op.kind, [src], [moved], dict(op.attrs), op.name, op.source),
                                Op("dequantize", [moved], [op.output], dict(producer.attrs), f"{op.name}_dq",
                                   op.source)]


def quantize_before_moves(graph: Graph) -> None:
    """op -> reshape/permute -> quantize (matmul's view after its bmm) becomes op -> quantize -> int8
    reshape/permute: the same codes, and the op before now has a quantized output, so it can become int8."""
    for q in [op for op in graph.ops if op.kind == "quantize"]:
        move = graph.producer(q.inputs[0])
        if move is None or move.kind not in ("reshape", "permute") or len(graph.users(move.output)) != 1 \
                or move.output.is_output:
            continue
        before = graph.producer(move.inputs[0])
        if before is None or before.kind in ("dequantize", "quantize", "reshape", "permute") \
                or len(graph.users(move.inputs[0])) != 1:
            continue
        src = move.inputs[0]
        early = Tensor(name=f"{move.name}_q", shape=src.shape, dtype=q.output.dtype, quant=q.output.quant)
        at = graph.ops.index(move)
        graph.ops.remove(q)
        graph.ops[at:at + 1] = [Op("quantize", [src], [early], dict(q.attrs), q.name, q.source),
                                Op(move.kind, [early], [q.output], dict(move.attrs), move.name, move.source)]


CONVERTERS = {kind: _shared(kind) for kind in ("reshape", "permute", "pad", "slice", "concat")}
