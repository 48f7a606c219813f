"""ATen ops for the frontend: elementwise math, scalar arithmetic, maximum/minimum,
layer norm, batched matrix products, reductions over any dims, transpose and splits.

Each handler maps one ATen overload onto an IR op whose kernel is in runtime_c/kernels
(mcu_unary_f32, mcu_layer_norm_f32, mcu_bmm_f32, mcu_reduce_f32, mcu_maximum_f32, ...), or onto ops the
frontend already has (permute, slice, the binary ops with a constant scalar operand).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import emit
from mcu.frontend.common import permute as _permute
from mcu.frontend.common import tensor_arg as _tensor_arg
from mcu.frontend.norm import reduced_dims

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _emit(ctx: Any, node: Node, kind: str, inputs: list[Tensor], attrs: dict[str, Any]) -> Tensor:
    return emit(ctx, node, kind, inputs, attrs)


def _unary(fn: str, alpha: Callable[[list[Any], dict], float] | None = None,
           beta: Callable[[list[Any], dict], float] | None = None) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        kw = dict(node.kwargs)
        return _emit(ctx, node, "unary", [a[0]], {"fn": fn, "alpha": float(alpha(a, kw)) if alpha else 0.0,
                                                  "beta": float(beta(a, kw)) if beta else 0.0})
    return handler


def _arg(i: int, name: str, default: Any) -> Callable[[list[Any], dict], Any]:
    return lambda a, kw: a[i] if len(a) > i else kw.get(name, default)


def _gelu(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    approximate = a[1] if len(a) > 1 else node.kwargs.get("approximate", "none")
    return _unary("gelu_tanh" if approximate == "tanh" else "gelu")(ctx, node, a[:1])


def _elu(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    scale = a[2] if len(a) > 2 else node.kwargs.get("scale", 1)
    input_scale = a[3] if len(a) > 3 else node.kwargs.get("input_scale", 1)
    if scale != 1 or input_scale != 1:
        raise McuError(f"elu with scale or input_scale (SELU, CELU) is not supported{user_source_line(node)}")
    return _unary("elu", _arg(1, "alpha", 1.0))(ctx, node, a)


def _scalar_affine(scale: Callable[[float], float], shift: Callable[[float], float]) -> Handler:
    """x op s for a Python scalar s, as x * alpha + beta."""
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        if node.kwargs.get("alpha", 1) != 1 or (len(a) > 2 and a[2] != 1):
            raise McuError(f"{node.target} with alpha is not supported{user_source_line(node)}")
        s = float(a[1])
        return _emit(ctx, node, "unary", [a[0]], {"fn": "affine", "alpha": scale(s), "beta": shift(s)})
    return handler


def _rsub(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    if not isinstance(a[1], (int, float)):
        raise McuError(f"rsub with a tensor operand is not supported{user_source_line(node)}")
    return _emit(ctx, node, "unary", [a[0]], {"fn": "rsub", "alpha": 1.0, "beta": float(a[1])})


def _maxmin(kind: str) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        return _emit(ctx, node, kind, [_tensor_arg(ctx, node, a[0], "lhs"), _tensor_arg(ctx, node, a[1], "rhs")],
                     {"act": None})
    return handler


def _layer_norm(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None, None]:
    x, shape = a[0], list(a[1])
    weight = a[2] if len(a) > 2 else None
    bias = a[3] if len(a) > 3 else None
    eps = float(a[4]) if len(a) > 4 else 1e-5
    cols = math.prod(shape)
    if tuple(x.shape[len(x.shape) - len(shape):]) != tuple(shape):
        raise McuError(f"layer_norm over {shape} of a {list(x.shape)} tensor{user_source_line(node)}")
    ins = [x] + [t for t in (weight, bias) if t is not None]
    out = Tensor(name=node.name, shape=x.shape, dtype=x.dtype)
    ctx.ops.append(Op("layer_norm", ins, [out], {"eps": eps, "cols": cols, "weight": weight is not None,
                                                 "bias": bias is not None}, name=node.name,
                      source=op_source(node)))
    return out, None, None


def _bmm(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    return _emit(ctx, node, "bmm", [a[0], a[1]], {})


def reduce_handler(op: str) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:

        if node.kwargs.get("dtype") is not None:
            raise McuError(f"{op} with a dtype is not supported{user_source_line(node)}")
        x, first, last = reduced_dims(ctx, node, a[0], a[1] if len(a) > 1 else None)
        return _emit(ctx, node, "reduce", [x], {"op": op, "dims": (first, last)})
    return handler


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


HANDLERS: dict[object, Handler] = {
    aten.gelu.default: _gelu,
    aten.silu.default: _unary("silu"),
    aten.hardsigmoid.default: _unary("hardsigmoid"),
    aten.leaky_relu.default: _unary("leaky_relu", _arg(1, "negative_slope", 0.01)),
    aten.elu.default: _elu,
    aten.softplus.default: _unary("softplus", _arg(2, "threshold", 20.0), _arg(1, "beta", 1.0)),
    aten.exp.default: _unary("exp"),
    aten.log.default: _unary("log"),
    aten.sqrt.default: _unary("sqrt"),
    aten.rsqrt.default: _unary("rsqrt"),
    aten.abs.default: _unary("abs"),
    aten.neg.default: _unary("neg"),
    aten.reciprocal.default: _unary("reciprocal"),
    aten.erf.default: _unary("erf"),
    aten.mish.default: _unary("mish"),
    aten.pow.Tensor_Scalar: _unary("pow", _arg(1, "exponent", 1.0)),
    aten.add.Scalar: _scalar_affine(lambda s: 1.0, lambda s: s),
    aten.sub.Scalar: _scalar_affine(lambda s: 1.0, lambda s: -s),
    aten.mul.Scalar: _scalar_affine(lambda s: s, lambda s: 0.0),
    aten.div.Scalar: _scalar_affine(lambda s: 1.0 / s, lambda s: 0.0),
    aten.rsub.Scalar: _rsub,
    aten.maximum.default: _maxmin("maximum"),
    aten.minimum.default: _maxmin("minimum"),
    aten.native_layer_norm.default: _layer_norm,
    aten.bmm.default: _bmm,
    aten.sum.dim_IntList: reduce_handler("sum"),
    aten.amax.default: reduce_handler("amax"),
    aten.amin.default: reduce_handler("amin"),
    aten.transpose.int: _transpose,
    aten.split_with_sizes.default: _split_with_sizes,
    aten.split.Tensor: _split,
    aten.unbind.int: _unbind,
}
