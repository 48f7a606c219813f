"""Selection ops for the frontend: embedding lookups, comparisons, ``where`` and
boolean ``logical_not``/``logical_and``/``logical_or``/``any`` (scaled_dot_product_attention's guard).

A causal or position mask is written as a comparison of positions feeding ``torch.where`` (the tiny
LLM's ``keys <= pos``); with constant positions (a prefill of known length) the frontend folds it,
with runtime positions (decode) it runs on the device. Booleans are bytes 0/1 (IR dtype ``uint8``);
int64 tokens and positions are int32 on the device.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.frontend.opcodes import COMPARE_OP
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import emit
from mcu.frontend.common import const as _const
from mcu.frontend.common import tensor_dtype as _dtype
from mcu.frontend.norm import reduced_dims

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]
_COMPARABLE = ("float32", "int32", "int8", "uint8")


def _emit(ctx: Any, node: Node, kind: str, inputs: list[Tensor], attrs: dict[str, Any]) -> Tensor:
    return emit(ctx, node, kind, inputs, attrs)


def _scalar(ctx: Any, node: Node, value: Any, dtype: str, what: str) -> Tensor:
    """A Python scalar as a 0-d constant of ``dtype``, refused when that type cannot hold it exactly."""
    torch_dtype = {"float32": torch.float32, "int32": torch.int32, "int8": torch.int8, "uint8": torch.uint8}[dtype]
    t = torch.tensor(value, dtype=torch_dtype)
    if float(t) != float(value) and not (isinstance(value, float) and np.isinf(value) and dtype == "float32"):
        raise McuError(f"{node.target}: the {what} {value!r} is not exactly representable as {dtype}"
                       f"{user_source_line(node)}")
    return _const(ctx.fresh(f"{node.name}_{what}"), t)


def _same_type(ctx: Any, node: Node, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands as tensors of one type: a scalar or a constant takes the other operand's type."""
    if not isinstance(a, Tensor):
        a, b = b, a
        swapped = True
    else:
        swapped = False
    if not isinstance(b, Tensor):
        b = _scalar(ctx, node, b, a.dtype, "operand")
    elif b.dtype != a.dtype:
        if b.is_constant:
            b = _const(ctx.fresh(f"{node.name}_operand"), torch.from_numpy(b.data.astype(np.dtype(a.dtype))))
        elif a.is_constant:
            a = _const(ctx.fresh(f"{node.name}_operand"), torch.from_numpy(a.data.astype(np.dtype(b.dtype))))
        else:
            raise McuError(f"{node.target} compares {a.dtype} with {b.dtype}{user_source_line(node)}",
                           hint="convert one operand with .to() so that both have the same dtype")
    if a.dtype not in _COMPARABLE:
        raise McuError(f"{node.target} on {a.dtype} is not supported{user_source_line(node)}")
    return (b, a) if swapped else (a, b)


def _compare(cmp: str) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        x, y = _same_type(ctx, node, a[0], a[1])
        return _emit(ctx, node, "compare", [x, y], {"cmp": cmp})
    return handler


def _logical_not(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    zero = _scalar(ctx, node, 0, x.dtype, "zero")
    return _emit(ctx, node, "compare", [x, zero], {"cmp": "eq"})


def _where(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    cond, x, y = a[0], a[1], a[2]
    if not isinstance(cond, Tensor) or cond.dtype != "uint8":
        raise McuError(f"where needs a boolean condition tensor{user_source_line(node)}")

    out_dtype = _dtype(node.meta["val"], node)
    x = x if isinstance(x, Tensor) else _scalar(ctx, node, x, out_dtype, "self")
    y = y if isinstance(y, Tensor) else _scalar(ctx, node, y, out_dtype, "other")
    if x.dtype != out_dtype or y.dtype != out_dtype:
        raise McuError(f"where over {x.dtype} and {y.dtype} is not supported{user_source_line(node)}",
                       hint="give both branches the same dtype")
    return _emit(ctx, node, "where", [cond, x, y], {})


def _embedding(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    table, indices = a[0], a[1]
    if not isinstance(table, Tensor) or len(table.shape) != 2:
        raise McuError(f"embedding needs a 2-D table{user_source_line(node)}")
    if not isinstance(indices, Tensor) or indices.dtype != "int32":
        raise McuError(f"embedding indices must be an integer tensor{user_source_line(node)}")
    return _emit(ctx, node, "embedding", [table, indices], {})


def bool_to_float(ctx: Any, node: Node, x: Tensor, name: str | None = None) -> Tensor:
    """``mask.float()``: 1.0 where true, 0.0 elsewhere (the node's output, or a new tensor ``name``)."""
    one, zero = _scalar(ctx, node, 1.0, "float32", "one"), _scalar(ctx, node, 0.0, "float32", "zero")
    if name is None:
        return _emit(ctx, node, "where", [x, one, zero], {})
    values = Tensor(name=ctx.fresh(name), shape=x.shape, dtype="float32")
    ctx.ops.append(Op("where", [x, one, zero], [values], {}, name=values.name, source=op_source(node)))
    return values


def _as_bool(ctx: Any, node: Node, x: Any) -> Tensor:
    """A boolean operand as bytes 0/1 (a number or another dtype compares unequal to zero)."""
    if not isinstance(x, Tensor):
        return _scalar(ctx, node, int(bool(x)), "uint8", "flag")
    if x.dtype == "uint8":
        return x
    zero = _scalar(ctx, node, 0, x.dtype, "zero")
    out = Tensor(name=ctx.fresh(f"{node.name}_bool"), shape=x.shape, dtype="uint8")
    ctx.ops.append(Op("compare", [x, zero], [out], {"cmp": "ne"}, name=out.name, source=op_source(node)))
    return out


def _logical(which: str) -> Handler:
    """logical_and(a, b) = a ? b : false; logical_or(a, b) = a ? true : b (one where over bytes)."""
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        x, y = _as_bool(ctx, node, a[0]), _as_bool(ctx, node, a[1])
        flag = _scalar(ctx, node, 0 if which == "and" else 1, "uint8", "flag")
        return _emit(ctx, node, "where", [x, y, flag] if which == "and" else [x, flag, y], {})
    return handler


def _any_dim(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """any over dims: the largest of the 0.0/1.0 values, then > 0 (the reduction kernels are numeric)."""
    values = bool_to_float(ctx, node, _as_bool(ctx, node, a[0]), f"{node.name}_values")
    zero = _scalar(ctx, node, 0.0, "float32", "zero")
    moved, first, last = reduced_dims(ctx, node, values, a[1] if len(a) > 1 else None)
    shape = tuple(int(d) for d in node.meta["val"].shape)
    largest = Tensor(name=ctx.fresh(f"{node.name}_max"), shape=shape, dtype="float32")
    ctx.ops.append(Op("reduce", [moved], [largest], {"op": "amax", "dims": (first, last)}, name=largest.name,
                      source=op_source(node)))
    return _emit(ctx, node, "compare", [largest, zero], {"cmp": "gt"})


def _full_like(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """A constant of the input's shape (only its shape is read, so it folds whatever the input is)."""
    val = node.meta["val"]
    return _const(ctx.fresh(node.name), torch.full(tuple(val.shape), a[1], dtype=val.dtype))


HANDLERS: dict[object, Handler] = {
    # a dtype and shape check torch.export leaves before conversions; nothing to run
    aten._assert_tensor_metadata.default: lambda ctx, node, a: None,
    aten.embedding.default: _embedding,
    **{getattr(aten, c).Tensor: _compare(c) for c in COMPARE_OP},
    **{getattr(aten, c).Scalar: _compare(c) for c in COMPARE_OP},
    aten.logical_not.default: _logical_not,
    aten.logical_and.default: _logical("and"),
    aten.logical_or.default: _logical("or"),
    aten.any.dim: _any_dim,
    aten.full_like.default: _full_like,
    aten.where.self: _where,
}
