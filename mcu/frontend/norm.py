"""Frontend handlers of the normalisation, softmax and reduction family: batch norm with running statistics
(folded into a scale and shift), layer norm, RMSNorm, group norm and instance norm as exported, softmax and
log_softmax, reductions over any dims (sum, mean, amax, amin; a mean over height and width takes the
pooling kernel ``mean_hw``), variance and argmax.

RMSNorm written by hand exports as pow, mean, add, rsqrt and mul, which the frontend already lowers (and
the int8 lowering turns into tables, a reduction and a product); ``nn.RMSNorm``'s ``aten.rms_norm`` is
kept whole through Edge and runs one kernel (mcu_rms_norm_f32, or mcu_layer_norm_s8 without the mean).

Each handler maps one ATen overload onto an IR op whose kernel is in runtime_c/kernels
(mcu_batch_norm_f32, mcu_layer_norm_f32, mcu_group_norm_f32, mcu_reduce_f32, mcu_var_f32, mcu_argmax_f32, ...).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import add_op, emit, is_const, out_tensor

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _batch_norm(ctx: Any, node: Node, a: list[Any]) -> tuple[Tensor, None, None]:
    x, weight, bias, mean, var = a[:5]
    eps = float(a[6])
    for t in (weight, bias, mean, var):
        if t is not None and not is_const(t):
            raise McuError(f"batch norm statistics must be constant (call model.eval()){user_source_line(node)}")
    channels = x.shape[1]
    w = weight.data if weight is not None else np.ones(channels, np.float32)
    b = bias.data if bias is not None else np.zeros(channels, np.float32)
    scale = (w / np.sqrt(var.data.astype(np.float64) + eps)).astype(np.float32)
    shift = (b - mean.data * scale).astype(np.float32)
    out = out_tensor(ctx, node, node.meta["val"][0])
    sc = Tensor(name=ctx.fresh(f"{node.name}_scale"), shape=(channels,), data=scale)
    sh = Tensor(name=ctx.fresh(f"{node.name}_shift"), shape=(channels,), data=shift)
    ctx.ops.append(Op("batch_norm", [x, sc, sh], [out], {"eps": eps}, name=node.name,
                      source=op_source(node)))
    return (out, None, None)


def _softmax(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    rank = len(a[0].shape)
    return emit(ctx, node, "softmax", [a[0]], {"axis": int(a[1]) % rank})


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


def _reduce_handler(op: str) -> Handler:
    def handler(ctx: Any, node: Node, a: list[Any]) -> Tensor:

        if node.kwargs.get("dtype") is not None:
            raise McuError(f"{op} with a dtype is not supported{user_source_line(node)}")
        x, first, last = reduced_dims(ctx, node, a[0], a[1] if len(a) > 1 else None)
        return emit(ctx, node, "reduce", [x], {"op": op, "dims": (first, last)})
    return handler


def _mean(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    dims = a[1] if len(a) > 1 else None
    rank = len(x.shape)
    dims = sorted(d % rank for d in (dims if dims is not None else range(rank)))
    if rank == 4 and dims == [2, 3]:
        return emit(ctx, node, "mean_hw", [x], {"keepdim": bool(a[2]) if len(a) > 2 else False})
    return _reduce_handler("mean")(ctx, node, a)


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
    moved = add_op(ctx, node, "permute", [x], tuple(x.shape[d] for d in perm), x.dtype, {"perm": perm})
    return moved, rank - len(ds), rank - 1


def _var(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, first, last = reduced_dims(ctx, node, a[0], a[1] if len(a) > 1 else node.kwargs.get("dim"))
    correction = node.kwargs.get("correction", a[2] if len(a) > 2 else None)
    correction = 1.0 if correction is None else float(correction)
    count = math.prod(x.shape[first:last + 1])
    return emit(ctx, node, "var", [x], {"dims": (first, last), "divisor": max(0.0, count - correction)})


def _argmax(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    dim = a[1] if len(a) > 1 else node.kwargs.get("dim")
    first, last = (0, len(x.shape) - 1) if dim is None else (int(dim) % len(x.shape),) * 2
    return emit(ctx, node, "argmax", [x], {"dims": (first, last)})


def _log_softmax(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    rank = len(a[0].shape)
    return emit(ctx, node, "log_softmax", [a[0]], {"axis": int(a[1]) % rank})


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
    return emit(ctx, node, "rms_norm", ins, {"cols": cols, "eps": eps, "weight": weight is not None})


HANDLERS: dict[object, Handler] = {
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    aten.native_layer_norm.default: _layer_norm,
    aten.rms_norm.default: _rms_norm,
    aten.native_group_norm.default: _group_norm,
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    aten._softmax.default: _softmax,
    aten._log_softmax.default: _log_softmax,
    aten.sum.dim_IntList: _reduce_handler("sum"),
    aten.mean.dim: _mean,
    aten.amax.default: _reduce_handler("amax"),
    aten.amin.default: _reduce_handler("amin"),
    aten.var.correction: _var,
    aten.argmax.default: _argmax,
}
