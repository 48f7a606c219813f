"""The views around a 1-D convolution (mcu/frontend_conv.py).

The frontend runs a Conv1d as the 2-D convolution over ``[N, C, 1, L]``, with a ``unit_view``
reshape (``[N, C, L]`` <-> ``[N, C, 1, L]``: one size-1 dim inserted or dropped) on either side.
Such a view commutes with every elementwise op, so :func:`sink_unit_views` moves the views off
the convolution's neighbours, before activations fuse and int8 ops are formed:

* ``view -> clamp`` becomes ``clamp -> view``, so a ReLU after a Conv1d fuses into the convolution;
* ``dequantize -> view`` becomes ``view -> dequantize`` and ``view -> quantize`` becomes
  ``quantize -> view``, so the int8 lowering sees the plain ``dequantize -> conv2d -> quantize``
  of a pt2e graph, and the views run on int8 data.

The views themselves alias their input (no code); mcu/passes/layout.py carries a channels-last
layout through them (:func:`view_order`), so stacked Conv1d layers exchange ``[N, L, C]`` bytes
with no layout change between them.
"""

from __future__ import annotations

from mcu.ir import Graph, Op, Tensor

_SWAPPABLE = {"clamp"}  # elementwise ops a view moves past (then the clamp can fuse into its producer)


def is_unit_view(op: Op) -> bool:
    return op.kind == "reshape" and bool(op.attrs.get("unit_view"))


def _sink_once(graph: Graph) -> bool:
    for op in [o for o in graph.ops if is_unit_view(o)]:
        x, y = op.inputs[0], op.output
        producer = graph.producer(x)
        if producer is not None and producer.kind == "dequantize":
            src = producer.inputs[0]
            moved = Tensor(name=f"{y.name}_q", shape=y.shape, dtype=src.dtype, quant=src.quant)
            i = graph.ops.index(op)
            # (the first dequantize goes when nothing else reads it: lower_quantized's dead-code pass)
            graph.ops[i:i + 1] = [Op("reshape", [src], [moved], dict(op.attrs), op.name, op.source),
                                  Op("dequantize", [moved], [y], dict(producer.attrs), f"{producer.name}_{op.name}",
                                     producer.source)]
            return True
        users = graph.users(y)
        if len(users) != 1 or y.is_output:
            continue
        user = users[0]
        if user.kind == "quantize" or user.kind in _SWAPPABLE:
            z = user.output
            moved = Tensor(name=f"{z.name}_{len(x.shape)}d", shape=x.shape, dtype=z.dtype, quant=z.quant)
            graph.ops[graph.ops.index(op)] = Op(user.kind, [x], [moved], dict(user.attrs), user.name, user.source)
            graph.ops[graph.ops.index(user)] = Op("reshape", [moved], [z], dict(op.attrs), op.name, op.source)
            return True
    return False


def sink_unit_views(graph: Graph) -> Graph:
    while _sink_once(graph):
        pass
    return graph
