"""Int8 weights for fp32 linear layers: weight-only (w8a32) and dynamic activation quantization.

The ``int8-weight`` and ``int8-dynamic`` modes keep activations in fp32 and
need no calibration: every linear layer's weight becomes int8, symmetric per
output row (scale max|w| / 127), a quarter of its fp32 flash. ``int8-weight``
multiplies float activations by the int8 weights; ``int8-dynamic`` quantizes
each input at run time from its own range and runs an int8 GEMM. Other ops
stay fp32.
"""

from __future__ import annotations

from mcu.ir import Graph, Tensor
from mcu.reference.mixed import quantize_weights


def quantize_linear_weights(graph: Graph, dynamic: bool) -> Graph:
    for op in graph.ops:
        if op.kind != "linear" or op.output.dtype != "float32" or not op.inputs[1].is_constant:
            continue
        w = op.inputs[1]
        q, scale = quantize_weights(w.data.reshape(w.shape))
        bias = op.inputs[2] if len(op.inputs) > 2 else Tensor(name=f"{op.name}_bias0", shape=(w.shape[0],),
                                                                 data=scale * 0)
        op.inputs = [op.inputs[0], Tensor(name=f"{w.name}_w8", shape=w.shape, dtype="int8", data=q),
                     Tensor(name=f"{w.name}_scale", shape=(w.shape[0],), data=scale), bias]
        op.kind = "linear_dyn" if dynamic else "linear_w8"
        if dynamic:
            op.attrs["scratch_bytes"] = op.inputs[0].numel
    return graph
