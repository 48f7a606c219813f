"""int8 forms of resampling and data movement: the output keeps the input's scale and
zero-point (the quantizer shares them, mcu/quantize/quantizer.py), so remap, index_select and gather run on
the int8 values as they are, and bilinear resizing swaps its float weights
for 10-bit integer ones (mcu/reference/resample.py)."""

from __future__ import annotations

from mcu.ir import Graph, Op, Tensor
from mcu.passes.quantized.common import same_quant as _same_quant
from mcu.reference.resample import bilinear_tables_s8

KEEPS_EXTRA_INPUTS = {"remap", "index_select", "gather", "resize_bilinear"}


def _moves(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    if not _same_quant(ins[0], out):
        return "input and output quantization differ"
    return Op(op.kind, list(ins), [out], dict(op.attrs), op.name, op.source)


def _resize_bilinear(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    if not _same_quant(x, out):
        return "input and output quantization differ"
    (h, w), (oh, ow) = x.shape[2:], out.shape[2:]
    sh, sw = op.attrs["scales"]
    data = bilinear_tables_s8(h, w, oh, ow, op.attrs["align_corners"], sh, sw)
    table = Tensor(name=f"{op.name}_index_q", shape=data.shape, dtype="int32", data=data)
    return Op("resize_bilinear", [x, table], [out], dict(op.attrs), op.name, op.source)


CONVERTERS = {
    "remap": _moves,
    "index_select": _moves,
    "gather": _moves,
    "resize_bilinear": _resize_bilinear,
}
