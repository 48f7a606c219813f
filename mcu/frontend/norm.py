"""Normalisation, reductions and products for the frontend: group norm and
instance norm as exported, variance, argmax, log_softmax, PReLU, clamp with tensor bounds, and matrix
products whose right operand is an activation (``a @ b`` on 2-D, 3-D and 4-D tensors).

RMSNorm written by hand exports as pow, mean, add, rsqrt and mul, which the frontend already lowers (and
the int8 lowering turns into tables, a reduction and a product); ``nn.RMSNorm``'s ``aten.rms_norm`` is
kept whole through Edge and runs one kernel (mcu_rms_norm_f32, or mcu_layer_norm_s8 without the mean).

Each handler maps one ATen overload onto an IR op whose kernel is in runtime_c/kernels
(mcu_group_norm_f32, mcu_var_f32, mcu_argmax_f32, ...), or onto ops the frontend already has
(maximum/minimum, bmm, reshape).
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
from mcu.frontend.common import tensor_arg as _tensor_arg
from mcu.frontend.common import mm as mm_const

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _emit(ctx: Any, node: Node, kind: str, inputs: list[Tensor], attrs: dict[str, Any]) -> Tensor:
    return emit(ctx, node, kind, inputs, attrs)


def _op(ctx: Any, node: Node, kind: str, inputs: list[Tensor], shape: tuple[int, ...], dtype: str,
        attrs: dict[str, Any], name: str | None = None) -> Tensor:
    """An op with an output of its own (for handlers that emit more than one op)."""
    out = Tensor(name=name or ctx.fresh(node.name), shape=tuple(shape), dtype=dtype)
    ctx.ops.append(Op(kind, inputs, [out], attrs, name=out.name, source=op_source(node)))
    return out


def _norm(ctx: Any, node: Node, x: Tensor, weight: Any, bias: Any, groups: int, eps: float) -> Tensor:
    if len(x.shape) < 2:
        raise McuError(f"group norm of a {len(x.shape)}-D tensor{user_source_line(node)}")
    if x.shape[1] % groups:
        raise McuError(f"group norm of {x.shape[1]} channels in {groups} groups{user_source_line(node)}")
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and (not isinstance(t, Tensor) or not t.is_constant or t.numel != x.shape[1]):
            raise McuError(f"group norm with a {what} that is not a constant per channel{user_source_line(node)}")
    ins = [x] + [Tensor(name=t.name, shape=(t.numel,), dtype=t.dtype, data=t.data.reshape(-1))
                 for t in (weight, bias) if t is not None]
    out = Tensor(name=node.name, shape=x.shape, dtype=x.dtype)
    ctx.ops.append(Op("group_norm", ins, [out], {"groups": int(groups), "eps": float(eps),
                                                 "weight": weight is not None, "bias": bias is not None},
                      name=node.name, source=op_source(node)))
    return out


def _group_norm(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None, None]:
    x, weight, bias, _n, _c, _hw, groups, eps = a[:8]
    return _norm(ctx, node, x, weight, bias, int(groups), float(eps)), None, None


def _batch_norm_no_stats(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None, None]:
    """Batch statistics without running ones: what instance norm exports as (the input viewed as one
    sample of batch x channels channels), i.e. a group norm with a group per channel."""
    x, weight, bias = a[0], a[1], a[2]
    eps = float(a[5]) if len(a) > 5 else 1e-5
    if x.shape[0] != 1:
        raise McuError(f"batch norm with batch statistics over a batch of {x.shape[0]} (training mode) is "
                       f"not supported{user_source_line(node)}", hint="call model.eval() before compiling")
    return _norm(ctx, node, x, weight, bias, x.shape[1], eps), None, None


def reduced_dims(ctx: Any, node: Node, x: Tensor, dims: Any) -> tuple[Tensor, int, int]:
    """The tensor to reduce and the first and last of its reduced dims (all when None or empty), which the
    kernels take adjacent: dims that are not are moved last by a permute (the kept dims keep their order,
    so the result is already in the output's order)."""
    rank = len(x.shape)
    if dims is None:
        dims = list(range(rank))
    ds = sorted({int(d) % rank for d in ([dims] if isinstance(dims, int) else dims)}) or list(range(rank))
    if ds == list(range(ds[0], ds[-1] + 1)):
        return x, ds[0], ds[-1]
    perm = tuple([d for d in range(rank) if d not in ds] + ds)
    moved = _op(ctx, node, "permute", [x], tuple(x.shape[d] for d in perm), x.dtype, {"perm": perm})
    return moved, rank - len(ds), rank - 1


def _var(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, first, last = reduced_dims(ctx, node, a[0], a[1] if len(a) > 1 else node.kwargs.get("dim"))
    correction = node.kwargs.get("correction", a[2] if len(a) > 2 else None)
    correction = 1.0 if correction is None else float(correction)
    count = math.prod(x.shape[first:last + 1])
    return _emit(ctx, node, "var", [x], {"dims": (first, last), "divisor": max(0.0, count - correction)})


def _argmax(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    dim = a[1] if len(a) > 1 else node.kwargs.get("dim")
    first, last = (0, len(x.shape) - 1) if dim is None else (int(dim) % len(x.shape),) * 2
    return _emit(ctx, node, "argmax", [x], {"dims": (first, last)})


def _log_softmax(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    rank = len(a[0].shape)
    return _emit(ctx, node, "log_softmax", [a[0]], {"axis": int(a[1]) % rank})


def _prelu(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, w = a[0], a[1]
    if not isinstance(w, Tensor) or not w.is_constant:
        raise McuError(f"prelu with a weight that is not a constant{user_source_line(node)}")
    channels = x.shape[1] if len(x.shape) > 1 else 1
    if w.numel not in (1, channels):
        raise McuError(f"prelu with {w.numel} slopes for {channels} channels{user_source_line(node)}")
    weight = Tensor(name=w.name, shape=(w.numel,), dtype=w.dtype, data=w.data.reshape(-1))
    return _emit(ctx, node, "prelu", [x, weight], {})


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
        cur = _op(ctx, node, kind, [cur, _tensor_arg(ctx, node, bound, kind)], shape, "float32", {"act": None},
                  name=node.name if last else None)
    return cur


def _reshape(ctx: Any, node: Node, x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x if tuple(x.shape) == tuple(shape) else _op(ctx, node, "reshape", [x], shape, x.dtype, {})


def _mm(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """a @ b: a constant b is a linear layer (the frontend's own handler); an activation b is a batched
    product of one batch."""
    x, w = a[0], a[1]
    if isinstance(w, Tensor) and w.is_constant:
        return mm_const(ctx, node, a)
    (m, k), n = x.shape, w.shape[1]
    out = _op(ctx, node, "bmm", [_reshape(ctx, node, x, (1, m, k)), _reshape(ctx, node, w, (1, k, n))],
              (1, m, n), "float32", {})
    return _op(ctx, node, "reshape", [out], (m, n), "float32", {}, name=node.name)


def _rms_norm(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """aten.rms_norm (nn.RMSNorm, kept whole through Edge); eps None is float32's machine epsilon, as in torch."""
    x, shape = a[0], [int(s) for s in a[1]]
    weight = a[2] if len(a) > 2 else node.kwargs.get("weight")
    eps = a[3] if len(a) > 3 else node.kwargs.get("eps")
    if tuple(x.shape[len(x.shape) - len(shape):]) != tuple(shape):
        raise McuError(f"rms_norm over {shape} of a {list(x.shape)} tensor{user_source_line(node)}")
    cols = math.prod(shape)
    if weight is not None and (not isinstance(weight, Tensor) or not weight.is_constant):
        raise McuError(f"rms_norm with a weight that is not a constant{user_source_line(node)}")
    ins = [x] + ([Tensor(name=weight.name, shape=(cols,), dtype=weight.dtype, data=weight.data.reshape(-1))]
                 if weight is not None else [])
    eps = float(torch.finfo(torch.float32).eps) if eps is None else float(eps)
    return _emit(ctx, node, "rms_norm", ins, {"cols": cols, "eps": eps, "weight": weight is not None})


def _log_sigmoid(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None]:
    x = a[0]
    return _op(ctx, node, "unary", [x], x.shape, x.dtype, {"fn": "log_sigmoid", "alpha": 0.0, "beta": 0.0},
               name=node.name), None


HANDLERS: dict[object, Handler] = {
    aten.log_sigmoid_forward.default: _log_sigmoid,
    aten.rms_norm.default: _rms_norm,
    aten.native_group_norm.default: _group_norm,
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    aten.var.correction: _var,
    aten.argmax.default: _argmax,
    aten._log_softmax.default: _log_softmax,
    aten._prelu_kernel.default: _prelu,
    aten.clamp.Tensor: _clamp_tensor,
    aten.mm.default: _mm,
}


def constant_inputs(ep: torch.export.ExportedProgram) -> Callable[[Node], bool]:
    """Whether a node computes from parameters and constants alone (instance norm's ``repeat`` of its
    weight): the frontend folds such ops at compile time, whatever they are."""
    sig = ep.graph_signature
    mutated = set(getattr(sig, "buffers_to_mutate", {}).values())
    fixed = {name for name, target in {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                                       **getattr(sig, "inputs_to_lifted_tensor_constants", {})}.items()
             if target not in mutated}
    memo: dict[str, bool] = {}

    def const(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return all(const(x) for x in v)
        if not isinstance(v, Node):
            return True
        if v.name not in memo:
            memo[v.name] = v.name in fixed if v.op == "placeholder" else (
                v.op == "call_function" and const(list(v.args)) and const(list(v.kwargs.values())))
        return memo[v.name]

    return lambda node: const(list(node.args)) and const(list(node.kwargs.values()))
