"""w8a16's broadcasting arithmetic and PReLU. A PReLU becomes relu(x) + alpha * min(x, 0) with alpha viewed on the
channel axis (one slope or one per channel): a ReLU, a clamp, a product with a constant and an add, each a 16x8
kernel; a clamp with tensor bounds a maximum and a minimum. Broadcasting arithmetic: an operand of an add, a difference, a product, a quotient, a maximum or a minimum
of two tensors whose shape is not the output's is expanded to it first (``aten.expand``), so that the op runs on the
16x8 kernels of same-shaped operands (mcu_add_s16, mcu_sub_s16, mcu_mul_s16, mcu_div_s16, mcu_maximum_s16,
mcu_minimum_s16) and the expansion as an int16 move (mcu_remap, sharing the operand's quantization). The expanded
copy costs an output-sized buffer and one pass of copying; the arithmetic and its rounding are the same-shape
kernels'."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten

BROADCAST_PAIRS = {aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.sub_.Tensor, aten.mul.Tensor,
                   aten.mul_.Tensor, aten.maximum.default, aten.minimum.default, aten.div.Tensor}


def _shape(node: object) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(val, torch.Tensor) or val.dtype != torch.float32:
        return None
    try:
        return tuple(int(d) for d in val.shape)
    except TypeError:  # a symbolic size: left to the refusal
        return None


def _call(model: GraphModule, like: Node, target: object, args: tuple, val: torch.Tensor) -> Node:
    with model.graph.inserting_before(like):
        node = model.graph.call_function(target, args)
    node.meta = {key: value for key, value in like.meta.items() if key != "val"}
    node.meta["val"] = val
    return node


def _finish(model: GraphModule, changed: int) -> int:
    """``changed`` after checking and recompiling ``model`` when a rewrite changed it."""
    if changed:
        model.graph.lint()
        model.recompile()
    return changed


def split_prelu(model: GraphModule) -> int:
    """Writes every PReLU of a float tensor of rank >= 2 (channels on axis 1) or 1 as ReLU, clamp, product and add
    in place; returns how many."""
    done = 0
    for node in list(model.graph.nodes):
        if node.op != "call_function" or node.target is not aten.prelu.default:
            continue
        x, alpha = node.args[0], node.args[1]
        shape, slopes = _shape(x), _shape(alpha)
        if shape is None or slopes is None or len(slopes) != 1:
            continue
        xv, av = x.meta["val"], alpha.meta["val"]
        view = [slopes[0]] + [1] * (len(shape) - 2) if len(shape) >= 2 else [slopes[0]]
        a = _call(model, node, aten.view.default, (alpha, view), av.view(view))
        pos = _call(model, node, aten.relu.default, (x,), torch.relu(xv))
        neg = _call(model, node, aten.clamp.default, (x, None, 0.0), torch.clamp(xv, None, 0.0))
        prod = _call(model, node, aten.mul.Tensor, (a, neg), a.meta["val"] * neg.meta["val"])
        out = _call(model, node, aten.add.Tensor, (pos, prod), pos.meta["val"] + prod.meta["val"])
        node.replace_all_uses_with(out)
        model.graph.erase_node(node)
        done += 1
    return _finish(model, done)


def split_clamp_tensor(model: GraphModule) -> int:
    """Writes every clamp with tensor bounds of a float tensor as ``minimum(maximum(x, lo), hi)`` in place (the
    int8 frontend's form, mcu/frontend/elementwise.py), so that each bound runs the 16x8 maximum and minimum
    (broadcast bounds expanded by :func:`expand_broadcasts` after); returns how many."""
    done = 0
    for node in list(model.graph.nodes):
        if node.op != "call_function" or node.target is not aten.clamp.Tensor or _shape(node.args[0]) is None:
            continue
        bounds = [node.args[i] if len(node.args) > i else node.kwargs.get(k) for i, k in ((1, "min"), (2, "max"))]
        if any(b is not None and _shape(b) is None for b in bounds) or bounds == [None, None]:
            continue
        cur = node.args[0]
        for target, bound, fn in ((aten.maximum.default, bounds[0], torch.maximum),
                                  (aten.minimum.default, bounds[1], torch.minimum)):
            if bound is not None:
                cur = _call(model, node, target, (cur, bound), fn(cur.meta["val"], bound.meta["val"]))
        node.replace_all_uses_with(cur)
        model.graph.erase_node(node)
        done += 1
    return _finish(model, done)


def expand_broadcasts(model: GraphModule) -> int:
    """Expands every broadcasting operand of a two-tensor add/sub/mul/div/maximum/minimum to the op's output shape
    in place; returns how many were expanded."""
    expanded = 0
    for node in list(model.graph.nodes):
        if node.op != "call_function" or node.target not in BROADCAST_PAIRS or len(node.args) < 2:
            continue
        out = _shape(node)
        shapes = [_shape(a) for a in node.args[:2]]
        if out is None or None in shapes:
            continue  # a number operand (a table) or not a float tensor
        args = list(node.args)
        for k, shape in enumerate(shapes):
            if shape == out:
                continue
            with model.graph.inserting_before(node):
                wide = model.graph.call_function(aten.expand.default, (args[k], list(out)))
            wide.meta = {key: value for key, value in node.meta.items() if key != "val"}
            wide.meta["val"] = args[k].meta["val"].expand(out)
            args[k] = wide
            expanded += 1
        node.args = tuple(args)
    return _finish(model, expanded)
