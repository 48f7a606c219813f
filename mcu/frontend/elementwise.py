"""Frontend handlers of the elementwise family: the binary ops (add, sub, mul, div, maximum, minimum; a
Python scalar operand becomes a constant), clamping (``relu``, ``hardtanh``, ``clamp`` with scalar or tensor
bounds), sigmoid, tanh and hardswish, the functions of ``mcu_unary_f32`` (GELU, SiLU, ELU, softplus, exp,
log, ... and arithmetic with a Python scalar, ``x * alpha + beta``), log-sigmoid and PReLU.

Each handler maps one ATen overload onto an IR op whose kernel is in runtime_c/kernels (mcu_add_f32,
mcu_unary_f32, mcu_maximum_f32, mcu_prelu_f32, ...).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx import Node

from mcu.capture.edge import op_name
from mcu.capture.sourceinfo import user_source_line
from mcu.errors import McuError
from mcu.frontend.common import add_op, emit, tensor_arg
from mcu.ir import Tensor

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _clamp_kind(lo: float | None, hi: float | None) -> Callable[[Any, Node, list[Any]], Tensor]:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        return emit(ctx, node, "clamp", [a[0]], {"min": lo, "max": hi})
    return handler


def _hardtanh(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    lo = float(a[1]) if len(a) > 1 else -1.0
    hi = float(a[2]) if len(a) > 2 else 1.0
    return emit(ctx, node, "clamp", [a[0]], {"min": lo, "max": hi})


def _clamp(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    lo = a[1] if len(a) > 1 else node.kwargs.get("min")
    hi = a[2] if len(a) > 2 else node.kwargs.get("max")
    return emit(ctx, node, "clamp", [a[0]], {"min": None if lo is None else float(lo),
                                             "max": None if hi is None else float(hi)})


def _binary(kind: str) -> Callable[[Any, Node, list[Any]], Tensor]:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        if node.kwargs.get("alpha", 1) != 1:
            raise McuError(f"{op_name(node.target)} with alpha is not supported{user_source_line(node)}")
        if node.kwargs.get("rounding_mode") is not None:
            raise McuError(f"division with rounding_mode is not supported{user_source_line(node)}")
        lhs = tensor_arg(ctx, node, a[0], "lhs")
        rhs = tensor_arg(ctx, node, a[1], "rhs")
        return emit(ctx, node, kind, [lhs, rhs], {"act": None})
    return handler


def _activation(kind: str) -> Callable[[Any, Node, list[Any]], Tensor]:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        return emit(ctx, node, kind, [a[0]])
    return handler


def _unary(fn: str, alpha: Callable[[list[Any], dict], float] | None = None,
           beta: Callable[[list[Any], dict], float] | None = None) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        kw = dict(node.kwargs)
        return emit(ctx, node, "unary", [a[0]], {"fn": fn, "alpha": float(alpha(a, kw)) if alpha else 0.0,
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
        return emit(ctx, node, "unary", [a[0]], {"fn": "affine", "alpha": scale(s), "beta": shift(s)})
    return handler


def _rsub(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    if not isinstance(a[1], (int, float)):
        raise McuError(f"rsub with a tensor operand is not supported{user_source_line(node)}")
    return emit(ctx, node, "unary", [a[0]], {"fn": "rsub", "alpha": 1.0, "beta": float(a[1])})


def _maxmin(kind: str) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:
        return emit(ctx, node, kind, [tensor_arg(ctx, node, a[0], "lhs"), tensor_arg(ctx, node, a[1], "rhs")],
                    {"act": None})
    return handler


def _prelu(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, w = a[0], a[1]
    if not isinstance(w, Tensor) or not w.is_constant:
        raise McuError(f"prelu with a weight that is not a constant{user_source_line(node)}")
    channels = x.shape[1] if len(x.shape) > 1 else 1
    if w.numel not in (1, channels):
        raise McuError(f"prelu with {w.numel} slopes for {channels} channels{user_source_line(node)}")
    weight = Tensor(name=w.name, shape=(w.numel,), dtype=w.dtype, data=w.data.reshape(-1))
    return emit(ctx, node, "prelu", [x, weight], {})


def _clamp_tensor(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """clamp with tensor bounds: min(max(x, lo), hi), broadcasting like torch.clamp (NaN stays NaN)."""
    x = a[0]
    lo = a[1] if len(a) > 1 else node.kwargs.get("min")
    hi = a[2] if len(a) > 2 else node.kwargs.get("max")
    if lo is None and hi is None:
        raise McuError(f"clamp without bounds{user_source_line(node)}")
    steps = [(k, b) for k, b in (("maximum", lo), ("minimum", hi)) if b is not None]
    shape = tuple(node.meta["val"].shape)
    cur = x
    for i, (kind, bound) in enumerate(steps):
        last = i == len(steps) - 1
        cur = add_op(ctx, node, kind, [cur, tensor_arg(ctx, node, bound, kind)], shape, "float32", {"act": None},
                     name=node.name if last else None)
    return cur


def _log_sigmoid(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None]:
    x = a[0]
    return add_op(ctx, node, "unary", [x], x.shape, x.dtype, {"fn": "log_sigmoid", "alpha": 0.0, "beta": 0.0},
                  name=node.name), None


HANDLERS: dict[object, Handler] = {
    aten.relu.default: _clamp_kind(0.0, None),
    aten.hardtanh.default: _hardtanh,
    aten.clamp.default: _clamp,
    aten.clamp.Tensor: _clamp_tensor,
    aten.add.Tensor: _binary("add"),
    aten.sub.Tensor: _binary("sub"),
    aten.mul.Tensor: _binary("mul"),
    aten.div.Tensor: _binary("div"),
    aten.maximum.default: _maxmin("maximum"),
    aten.minimum.default: _maxmin("minimum"),
    aten.sigmoid.default: _activation("sigmoid"),
    aten.tanh.default: _activation("tanh"),
    aten.hardswish.default: _activation("hardswish"),
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
    aten.log_sigmoid_forward.default: _log_sigmoid,
    aten._prelu_kernel.default: _prelu,
}
