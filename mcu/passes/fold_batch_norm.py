"""Fold inference batch norm into the convolution or linear layer before it.

``bn(conv(x)) = conv'(x)`` with ``w' = w * scale[o]`` and ``b' = b * scale + shift``,
valid when the producer's output feeds only the batch norm. Batch norms that
cannot fold stay and run as their own kernel.
"""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Tensor


def fold_batch_norm(graph: Graph) -> Graph:
    for bn in [op for op in graph.ops if op.kind == "batch_norm"]:
        x, scale_t, shift_t = bn.inputs
        producer = graph.producer(x)
        if producer is None or producer.kind not in ("conv2d", "linear", "conv_transpose2d") or producer.attrs.get("act") is not None:
            continue
        if len(graph.users(x)) != 1 or x.is_output or x.quant is not None:
            continue
        weight = producer.inputs[1]
        out_channels = weight.shape[0]
        if scale_t.numel != out_channels:
            continue
        scale = scale_t.data.astype(np.float32)
        shift = shift_t.data.astype(np.float32)
        bshape = (-1,) + (1,) * (weight.data.ndim - 1)
        new_w = Tensor(name=f"{weight.name}_bnfold", shape=weight.shape, dtype=weight.dtype,
                       data=(weight.data * scale.reshape(bshape)).astype(np.float32))
        old_bias = producer.inputs[2].data if len(producer.inputs) > 2 else np.zeros(out_channels, np.float32)
        new_b = Tensor(name=f"{producer.name}_bias_bnfold", shape=(out_channels,),
                       data=(old_bias * scale + shift).astype(np.float32))
        producer.inputs = [producer.inputs[0], new_w, new_b]
        out = bn.outputs[0]
        producer.outputs = [out]
        graph.ops.remove(bn)
    return graph
