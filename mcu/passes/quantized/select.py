"""int8 form of the selection family: ``where`` (TFLite SELECT_V2) moves codes between branches that share
the output's quantization; its condition stays bytes 0/1."""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, Tensor
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp

# Kinds whose converter turns their float constants (where's branches, on its output's grid) to int8.
OWN_CONSTANTS = {"where"}


def keeps_as_is(op: Op, t: Tensor) -> bool:
    """An input the int8 op reads as it is: where's condition (bytes 0/1, not a quantized value)."""
    return op.kind == "where" and t is op.inputs[0] and not t.is_constant and t.dtype != "float32"


def _where(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """TFLite SELECT_V2: both branches share the output's quantization (the quantizer shares them), so the
    select moves codes; a constant branch (``torch.where(m, x, 0.0)``, ``mask.float()``) is put on the
    output's grid."""
    dynamic = iter(ins)
    inputs: list[Tensor] = []
    for i, t in enumerate(op.inputs):
        if i > 0 and t.is_constant:
            data = np.asarray(t.data, dtype=np.float64)
            info = np.iinfo(out.dtype)  # (int8, or int16 at w8a16)
            codes = np.clip(np.round(data / _scale(out)) + _zp(out), info.min, info.max).astype(out.dtype)
            inputs.append(Tensor(name=f"{t.name}_q", shape=t.shape, dtype=out.dtype,
                                 data=np.ascontiguousarray(codes.reshape(t.shape)), dim_order=t.dim_order,
                                 quant=out.quant))
            continue
        v = next(dynamic)
        if i > 0 and (v.quant is None or v.quant.scale != out.quant.scale or
                      v.quant.zero_point != out.quant.zero_point):
            return "a branch and the output are quantized differently"
        inputs.append(v)
    return Op("where", inputs, [out], dict(op.attrs), op.name, op.source)


CONVERTERS = {"where": _where}
