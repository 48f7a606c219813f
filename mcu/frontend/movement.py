"""Frontend handlers of the data movement family: views (reshape, squeeze, unsqueeze, flatten: no code, the
output aliases its input), permute and transpose, concatenation, constant padding, slicing, ``select``,
splits and ``unbind``, and the ops that leave their input as it is (clone, alias, detach, dropout, a
``_to_copy`` that keeps the dtype; a boolean mask converted to float is a selection)."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx import Node

from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.errors import McuError
from mcu.frontend.common import emit, tensor_arg, tensor_dtype
from mcu.frontend.select import bool_to_float
from mcu.ir import Op, Tensor

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _view(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    return emit(ctx, node, "reshape", [a[0]])


def _cat(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    tensors = [tensor_arg(ctx, node, t, "input") for t in a[0]]
    rank = len(tensors[0].shape)
    axis = int(a[1]) if len(a) > 1 else 0
    return emit(ctx, node, "concat", tensors, {"axis": axis % rank})


def _permute(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    rank = len(a[0].shape)
    return emit(ctx, node, "permute", [a[0]], {"perm": tuple(int(d) % rank for d in a[1])})


def _transpose(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    rank = len(a[0].shape)
    perm = list(range(rank))
    i, j = int(a[1]) % rank, int(a[2]) % rank
    perm[i], perm[j] = perm[j], perm[i]
    return _permute(ctx, node, [a[0], perm])


def _split_with_sizes(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, ...]:
    x = a[0]
    rank = len(x.shape)
    dim = int(a[2] if len(a) > 2 else node.kwargs.get("dim", 0)) % rank
    sizes = [int(s) for s in a[1]]
    return _pieces(ctx, node, x, dim, sizes)


def _split(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, ...]:
    x = a[0]
    rank = len(x.shape)
    dim = int(a[2] if len(a) > 2 else node.kwargs.get("dim", 0)) % rank
    size, step = x.shape[dim], int(a[1])
    return _pieces(ctx, node, x, dim, [min(step, size - s) for s in range(0, size, step)])


def _unbind(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, ...]:
    x = a[0]
    rank = len(x.shape)
    dim = int(a[1] if len(a) > 1 else 0) % rank
    kept = _pieces(ctx, node, x, dim, [1] * x.shape[dim])
    outs = []
    for i, t in enumerate(kept):
        out = Tensor(name=ctx.fresh(f"{node.name}_{i}"), shape=tuple(s for d, s in enumerate(x.shape) if d != dim),
                     dtype=x.dtype)
        ctx.ops.append(Op("reshape", [t], [out], {}, name=out.name, source=op_source(node)))
        outs.append(out)
    return tuple(outs)


def _pieces(ctx: Any, node: Node, x: Tensor, dim: int, sizes: list[int]) -> tuple[Tensor, ...]:
    if sum(sizes) != x.shape[dim]:
        raise McuError(f"split sizes {sizes} do not add up to {x.shape[dim]}{user_source_line(node)}")
    outs: list[Tensor] = []
    start = 0
    for i, n in enumerate(sizes):
        shape = tuple(n if d == dim else s for d, s in enumerate(x.shape))
        if n == x.shape[dim]:
            outs.append(x)
        else:
            out = Tensor(name=ctx.fresh(f"{node.name}_{i}"), shape=shape, dtype=x.dtype)
            ctx.ops.append(Op("slice", [x], [out], {"dim": dim, "start": start, "step": 1}, name=out.name,
                              source=op_source(node)))
            outs.append(out)
        start += n
    return tuple(outs)


def _pad(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, pads = a[0], [int(p) for p in a[1]]
    value = float(a[2]) if len(a) > 2 else 0.0
    rank = len(x.shape)
    before = [0] * rank
    after = [0] * rank
    for i in range(len(pads) // 2):
        before[rank - 1 - i] = pads[2 * i]
        after[rank - 1 - i] = pads[2 * i + 1]
    if any(p < 0 for p in before + after):
        raise McuError(f"negative padding (cropping) is not supported{user_source_line(node)}")
    return emit(ctx, node, "pad", [x], {"before": tuple(before), "after": tuple(after), "value": value})


def _identity(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    return a[0]


def _slice(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    rank = len(x.shape)
    dim = (int(a[1]) if len(a) > 1 else 0) % rank
    size = x.shape[dim]
    start = a[2] if len(a) > 2 and a[2] is not None else 0
    step = int(a[4]) if len(a) > 4 else 1
    start = max(0, min(size, start + size if start < 0 else start))
    out = tuple(int(s) for s in node.meta["val"].shape)
    if out == x.shape:
        return x  # the whole dim: nothing to copy
    if step < 1:
        raise McuError(f"slicing with step {step} is not supported{user_source_line(node)}")
    return emit(ctx, node, "slice", [x], {"dim": dim, "start": start, "step": step})


def _select(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """x.select(dim, i): a one-wide slice, then a reshape that drops the dim (an alias)."""
    x = a[0]
    rank = len(x.shape)
    dim = int(a[1]) % rank
    index = int(a[2]) % x.shape[dim]
    kept = Tensor(name=ctx.fresh(f"{node.name}_keepdim"), shape=tuple(1 if d == dim else s for d, s in
                                                                        enumerate(x.shape)), dtype=x.dtype)
    source = op_source(node)
    ctx.ops.append(Op("slice", [x], [kept], {"dim": dim, "start": index, "step": 1}, name=f"{node.name}_slice",
                      source=source))
    return emit(ctx, node, "reshape", [kept])


def _to_copy(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    src = node.args[0].meta["val"] if isinstance(node.args[0], Node) else None
    if src is not None and src.dtype == torch.bool and node.meta["val"].dtype == torch.float32:
        return bool_to_float(ctx, node, a[0])
    if tensor_dtype(node.meta["val"], node) != a[0].dtype:
        raise McuError(f"dtype conversion to {node.meta['val'].dtype} is not supported{user_source_line(node)}")
    return a[0]


HANDLERS: dict[object, Handler] = {
    aten.view.default: _view,
    aten._unsafe_view.default: _view,
    aten.reshape.default: _view,
    aten.squeeze.dims: _view,
    aten.squeeze.dim: _view,
    aten.squeeze.default: _view,
    aten.unsqueeze.default: _view,
    aten.flatten.using_ints: _view,
    aten.permute.default: _permute,
    aten.transpose.int: _transpose,
    aten.cat.default: _cat,
    aten.constant_pad_nd.default: _pad,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    aten.split_with_sizes.default: _split_with_sizes,
    aten.split.Tensor: _split,
    aten.unbind.int: _unbind,
    aten.clone.default: _identity,
    aten.alias.default: _identity,
    aten.detach.default: _identity,
    aten.dropout.default: _identity,
    aten._to_copy.default: _to_copy,
}
