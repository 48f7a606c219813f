"""Frontend handlers of the pooling family: max and average pooling (``max_pool2d``, ``avg_pool2d``) and
adaptive average pooling: to sizes that divide the input a global mean (``mean_hw``) or an average pool,
to any other size one ``adaptive_avg_pool`` op (its kernel's row bounds come from
:mod:`mcu.reference.resample`). A mean over height and width is a reduction (mcu/frontend/norm.py) that
takes the pooling kernel ``mean_hw``."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx import Node

from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.errors import McuError
from mcu.frontend.common import emit, out_tensor, pair
from mcu.ir import Op, Tensor

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _max_pool(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None]:
    x, kernel = a[0], pair(a[1])
    stride = pair(a[2]) if len(a) > 2 and a[2] else kernel
    padding = pair(a[3]) if len(a) > 3 else (0, 0)
    dilation = pair(a[4]) if len(a) > 4 else (1, 1)
    ceil_mode = bool(a[5]) if len(a) > 5 else False
    out = out_tensor(ctx, node, node.meta["val"][0])
    indices_used = any(u.args[1] != 0 for u in node.users)
    if indices_used:
        raise McuError(f"max pooling indices are not supported{user_source_line(node)}")
    ctx.ops.append(Op("max_pool2d", [x], [out], {"kernel": kernel, "stride": stride, "padding": padding,
                                                   "dilation": dilation, "ceil_mode": ceil_mode, "act": None},
                      name=node.name, source=op_source(node)))
    return (out, None)


def _avg_pool(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, kernel = a[0], pair(a[1])
    stride = pair(a[2]) if len(a) > 2 and a[2] else kernel
    padding = pair(a[3]) if len(a) > 3 else (0, 0)
    ceil_mode = bool(a[4]) if len(a) > 4 else False
    count_include_pad = bool(a[5]) if len(a) > 5 else True
    divisor = a[6] if len(a) > 6 else None
    return emit(ctx, node, "avg_pool2d", [x], {
        "kernel": kernel, "stride": stride, "padding": padding, "dilation": (1, 1), "ceil_mode": ceil_mode,
        "count_include_pad": count_include_pad, "divisor_override": int(divisor or 0), "act": None})


def _adaptive_divisible(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, size = a[0], pair(a[1])
    h, w = x.shape[2], x.shape[3]
    if size == (1, 1):
        return emit(ctx, node, "mean_hw", [x], {"keepdim": True})
    if h % size[0] or w % size[1]:
        raise McuError(f"adaptive average pooling from {h}x{w} to {size[0]}x{size[1]} is not supported"
                       f"{user_source_line(node)}", hint="use sizes that divide the input")
    k = (h // size[0], w // size[1])
    return emit(ctx, node, "avg_pool2d", [x], {
        "kernel": k, "stride": k, "padding": (0, 0), "dilation": (1, 1), "ceil_mode": False,
        "count_include_pad": True, "divisor_override": 0, "act": None})


def _check_4d(node: Node, x: Tensor, what: str) -> None:
    if len(x.shape) != 4:
        raise McuError(f"{what} of a {len(x.shape)}-D tensor is not supported (N, C, H, W only)"
                       f"{user_source_line(node)}")


def _adaptive_any(ctx: Any, node: Node, x: Tensor) -> Tensor:
    """Any output size: each cell averages rows [floor(i*H/oh), ceil((i+1)*H/oh)) and the columns alike."""
    _check_4d(node, x, "adaptive average pooling")
    out = Tensor(name=node.name, shape=tuple(int(s) for s in node.meta["val"].shape), dtype=x.dtype)
    ctx.ops.append(Op("adaptive_avg_pool", [x], [out], {}, name=node.name, source=op_source(node)))
    return out


def _adaptive(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    _check_4d(node, x, "adaptive average pooling")
    oh, ow = (int(s) for s in node.meta["val"].shape[2:])
    if (oh, ow) == (1, 1) or (x.shape[2] % oh == 0 and x.shape[3] % ow == 0):
        return _adaptive_divisible(ctx, node, a)  # a global mean or an ordinary average pool
    return _adaptive_any(ctx, node, x)


HANDLERS: dict[object, Handler] = {
    aten.max_pool2d_with_indices.default: _max_pool,
    aten.max_pool2d.default: lambda c, n, a: _max_pool(c, n, a)[0],
    aten.avg_pool2d.default: _avg_pool,
    aten._adaptive_avg_pool2d.default: _adaptive,
    aten.adaptive_avg_pool2d.default: _adaptive,
}
