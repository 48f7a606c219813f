"""The views around a 1-D convolution (mcu/frontend/conv.py).

The frontend runs a Conv1d as the 2-D convolution over ``[N, C, 1, L]``, with a ``unit_view``
reshape (``[N, C, L]`` <-> ``[N, C, 1, L]``: one size-1 dim inserted or dropped) on either side.
Such a view commutes with every elementwise op, so :func:`sink_unit_views` moves the views off
the convolution's neighbours, before activations fuse and int8 ops are formed:

* ``view -> clamp`` becomes ``clamp -> view``, so a ReLU after a Conv1d fuses into the convolution
  (likewise a BatchNorm1d, which then folds into it);
* ``dequantize -> view`` becomes ``view -> dequantize`` and ``view -> quantize`` becomes
  ``quantize -> view``, so the int8 lowering sees the plain ``dequantize -> conv2d -> quantize``
  of a pt2e graph, and the views run on int8 data.

A zero padding right before a convolution becomes the convolution's own (:func:`fold_conv_pads`),
here for the float graph and again after the int8 lowering. The views themselves alias their input
(no code); mcu/passes/layout.py carries a channels-last layout through them (:func:`view_order`),
so stacked Conv1d layers exchange ``[N, L, C]`` bytes with no layout change between them.
"""

from __future__ import annotations

from mcu.ir import Graph, Op, Tensor

# Ops a view moves past: elementwise, or per channel (dim 1, which the views keep), so a ReLU can fuse
# into the convolution before it and a BatchNorm1d fold into it.
_SWAPPABLE = {"clamp", "batch_norm"}


def is_unit_view(op: Op) -> bool:
    return op.kind == "reshape" and bool(op.attrs.get("unit_view"))


def keeps_layout(op: Op) -> bool:
    """A reshape that only inserts or drops one size-1 spatial dim (``[N, C, L]`` <-> ``[N, C, 1, L]``: a
    Conv1d's view, or the unsqueeze and squeeze around a MaxPool1d or AdaptiveAvgPool1d): it keeps its
    input's bytes in any layout (:func:`view_order`), so no layout change is needed on either side."""
    if op.kind != "reshape" or op.inputs[0].is_constant:
        return False
    src, out = op.inputs[0].shape, op.output.shape
    longer, shorter = (out, src) if len(out) == len(src) + 1 else (src, out)
    if len(longer) != len(shorter) + 1:
        return False
    p = _unit_dim(longer, shorter)
    return p is not None and p >= 2 and view_order(op.inputs[0], op.output) is not None


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
            inputs = [x if t is y else t for t in user.inputs]
            graph.ops[graph.ops.index(op)] = Op(user.kind, inputs, [moved], dict(user.attrs), user.name, user.source)
            graph.ops[graph.ops.index(user)] = Op("reshape", [moved], [z], dict(op.attrs), op.name, op.source)
            return True
    return False


def sink_unit_views(graph: Graph) -> Graph:
    # A float zero pad right before a convolution folds first: padding="same" with an even window
    # (decomposed to F.pad + convolution after pt2e quantized the convolution as one node) leaves the
    # convolution between dequantize and quantize as the int8 lowering needs it.
    fold_conv_pads(graph)
    while _sink_once(graph):
        pass
    return graph


def _unit_dim(longer: tuple[int, ...], shorter: tuple[int, ...]) -> int | None:
    """The size-1 dim of ``longer`` whose removal leaves ``shorter``."""
    for p in range(len(longer)):
        if longer[p] == 1 and longer[:p] + longer[p + 1:] == shorter:
            return p
    return None


def view_order(src: Tensor, out: Tensor) -> tuple[int, ...] | None:
    """The dim order of a unit view's output with exactly its input's bytes (None: not a unit view).

    ``[N, C, L]`` laid out ``(0, 2, 1)`` (channels last) is ``[N, C, 1, L]`` laid out ``(0, 2, 3, 1)``
    (NHWC), so a Conv1d's output feeds the next Conv1d with no layout change in between."""
    if len(out.shape) == len(src.shape) + 1:
        p = _unit_dim(out.shape, src.shape)
        if p is None:
            return None
        order = [d if d < p else d + 1 for d in src.dim_order]
        order.insert(order.index(p + 1) if p + 1 in order else len(order), p)
        return tuple(order)
    if len(src.shape) == len(out.shape) + 1:
        p = _unit_dim(src.shape, out.shape)
        if p is None:
            return None
        return tuple(d if d < p else d - 1 for d in src.dim_order if d != p)
    return None


def _zero_fill(pad: Op, conv: Op) -> bool:
    if conv.output.dtype in ("int8", "int16"):  # (int16: w8a16)
        return pad.output.dtype == conv.output.dtype and \
            int(pad.attrs.get("value_q", 1 << 20)) == -int(conv.attrs["input_offset"])
    return float(pad.attrs["value"]) == 0.0


def fold_conv_pads(graph: Graph) -> Graph:
    """A zero padding of the spatial dims right before a convolution (causal padding,
    ``F.pad(x, ((k - 1) * d, 0))``, or any F.pad a model writes) becomes the convolution's own: the
    padded copy disappears, ``padding`` grows by the leading pads and the output size implies the
    trailing ones, which every convolution kernel takes (common/window.h). In int8 the fill must
    be the input's zero-point, the value a padded tap contributes nothing with."""
    for conv in [op for op in graph.ops if op.kind in ("conv2d", "depthwise_conv2d")]:
        x = conv.inputs[0]
        view = graph.producer(x)
        if view is not None and is_unit_view(view):
            src, pad = view.inputs[0], graph.producer(view.inputs[0])
        else:
            src, pad, view = x, view, None
        if pad is None or pad.kind != "pad" or not _zero_fill(pad, conv) or x.is_output or src.is_output:
            continue
        if len(graph.users(src)) != 1 or len(graph.users(x)) != 1:
            continue
        before, after = list(pad.attrs["before"]), list(pad.attrs["after"])
        if view is not None:  # [N, C, L] seen as [N, C, 1, L]
            if len(before) != 3:
                continue
            before.insert(2, 0)
            after.insert(2, 0)
        if len(before) != 4 or any(before[:2]) or any(after[:2]):
            continue
        orig = pad.inputs[0]
        if view is not None:
            shape = (*orig.shape[:2], 1, orig.shape[2])
            x = Tensor(name=x.name, shape=shape, dtype=x.dtype, quant=x.quant)
            view.inputs, view.outputs = [orig], [x]
            conv.inputs[0] = x
        else:
            conv.inputs[0] = orig
        top, left = conv.attrs["padding"]
        conv.attrs["padding"] = (top + before[2], left + before[3])
        graph.ops.remove(pad)
    return graph
