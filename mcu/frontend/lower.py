"""Stage 3: turn an Edge-dialect ``ExportedProgram`` into the mcu IR.

Each supported ATen op has one handler in ``HANDLERS`` that emits IR ops with
PyTorch (logical, NCHW) semantics; layout and kernel choice come later. Nodes
whose tensor inputs are all constants are evaluated here with PyTorch itself
(for example the transpose of a linear weight), so no kernel ever runs on
constants.
"""

from __future__ import annotations

import hashlib
import operator
from typing import Any, Callable

import numpy as np
import torch
from torch.export.graph_signature import InputKind
from torch.fx import Node

from mcu.capture.edge import op_name, verify_edge
from mcu.errors import McuError
from mcu.frontend.common import Ctx as _Ctx
from mcu.frontend.common import adaptive_avg_pool as _adaptive_avg_pool
from mcu.frontend.common import const as _const
from mcu.frontend.common import emit as _emit
from mcu.frontend.common import is_const as _is_const
from mcu.frontend.common import linear_from as _linear_from
from mcu.frontend.common import mm as _mm
from mcu.frontend.common import out_tensor as _out_tensor
from mcu.frontend.common import pair as _pair
from mcu.frontend.common import permute as _permute
from mcu.frontend.common import tensor_arg as _tensor_arg
from mcu.frontend.common import tensor_dtype as _dtype
from mcu.frontend.conv import convolution
from mcu.frontend.custom import custom_handlers
from mcu.frontend.int4 import dequantize_affine_ops, fold_dequantize_affine
from mcu.frontend.norm import HANDLERS as NORM
from mcu.frontend.norm import constant_inputs
from mcu.frontend.ops import HANDLERS as MORE
from mcu.frontend.ops import reduce_handler
from mcu.frontend.recurrent import HANDLERS as RECURRENT
from mcu.frontend.resample import HANDLERS as RESAMPLE
from mcu.frontend.select import HANDLERS as SELECT
from mcu.frontend.select import bool_to_float
from mcu.frontend import state as frontend_state
from mcu.ir import Graph, Op, QConst, QuantParams, Tensor
from mcu.capture.sourceinfo import op_source, user_source_line

aten = torch.ops.aten

# Ops that only move data: folding them on a quantized constant moves its integer form along.
_DATA_MOVEMENT = {aten.permute.default, aten.t.default, aten.transpose.int, aten.view.default,
                  aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dims, aten.squeeze.dim,
                  aten.unsqueeze.default, aten.clone.default, aten.alias.default, aten.expand.default}


def _const_key(t: Tensor) -> tuple:
    q = t.qconst
    parts = (q.values, q.scale, q.zero_point) if q is not None else ()
    digest = hashlib.sha256(np.ascontiguousarray(t.data).tobytes())
    for a in parts:
        digest.update(np.ascontiguousarray(a).tobytes())
    return (t.dtype, t.shape, t.dim_order, t.quant, q is not None, digest.hexdigest())


def _share_constants(ops: list[Op]) -> None:
    """Equal constants become one tensor (one copy in flash): an unrolled LSTM transposes the same weights
    at every time step."""
    seen: dict[tuple, Tensor] = {}
    for op in ops:
        op.inputs = [seen.setdefault(_const_key(t), t) if t.is_constant and t.alias_of is None else t
                     for t in op.inputs]


def _torch_value(v: Any) -> Any:
    if isinstance(v, Tensor):
        return torch.from_numpy(np.ascontiguousarray(v.data))
    if isinstance(v, (list, tuple)):
        return type(v)(_torch_value(x) for x in v)
    return v


# --- handlers: (ctx, node, args) -> value -------------------------------------------------------


def _conv(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    x, w, b, stride, padding, dilation, transposed, _out_pad, groups = a[:9]
    if transposed or len(w.shape) != 4:  # conv1d and transposed convolution
        return convolution(ctx, node, a)
    if not _is_const(w) or (b is not None and not _is_const(b)):
        raise McuError(f"convolution weights must be constant{user_source_line(node)}")
    inputs = [x, w] + ([b] if b is not None else [])
    return _emit(ctx, node, "conv2d", inputs, {
        "stride": _pair(stride), "padding": _pair(padding), "dilation": _pair(dilation), "groups": int(groups),
        "act": None,
    })


def _addmm(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    bias, x, w_t = a[:3]
    beta = node.kwargs.get("beta", 1)
    alpha = node.kwargs.get("alpha", 1)
    if beta != 1 or alpha != 1:
        raise McuError(f"addmm with alpha/beta is not supported{user_source_line(node)}")
    if not _is_const(bias):
        raise McuError(f"addmm with a non-constant bias is not supported{user_source_line(node)}")
    bias = Tensor(name=bias.name, shape=(bias.numel,), dtype=bias.dtype, data=bias.data.reshape(-1))
    return _linear_from(ctx, node, x, w_t, bias, weight_is_transposed=True)


def _linear(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    return _linear_from(ctx, node, x, w, b, weight_is_transposed=False)


def _clamp_kind(lo: float | None, hi: float | None) -> Callable[[_Ctx, Node, list[Any]], Tensor]:
    def handler(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
        return _emit(ctx, node, "clamp", [a[0]], {"min": lo, "max": hi})
    return handler


def _hardtanh(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    lo = float(a[1]) if len(a) > 1 else -1.0
    hi = float(a[2]) if len(a) > 2 else 1.0
    return _emit(ctx, node, "clamp", [a[0]], {"min": lo, "max": hi})


def _clamp(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    lo = a[1] if len(a) > 1 else node.kwargs.get("min")
    hi = a[2] if len(a) > 2 else node.kwargs.get("max")
    return _emit(ctx, node, "clamp", [a[0]], {"min": None if lo is None else float(lo),
                                              "max": None if hi is None else float(hi)})


def _max_pool(ctx: _Ctx, node: Node, a: list[Any]) -> tuple[Tensor, None]:
    x, kernel = a[0], _pair(a[1])
    stride = _pair(a[2]) if len(a) > 2 and a[2] else kernel
    padding = _pair(a[3]) if len(a) > 3 else (0, 0)
    dilation = _pair(a[4]) if len(a) > 4 else (1, 1)
    ceil_mode = bool(a[5]) if len(a) > 5 else False
    out = _out_tensor(ctx, node, node.meta["val"][0])
    indices_used = any(u.args[1] != 0 for u in node.users)
    if indices_used:
        raise McuError(f"max pooling indices are not supported{user_source_line(node)}")
    ctx.ops.append(Op("max_pool2d", [x], [out], {"kernel": kernel, "stride": stride, "padding": padding,
                                                   "dilation": dilation, "ceil_mode": ceil_mode, "act": None},
                      name=node.name, source=op_source(node)))
    return (out, None)


def _avg_pool(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    x, kernel = a[0], _pair(a[1])
    stride = _pair(a[2]) if len(a) > 2 and a[2] else kernel
    padding = _pair(a[3]) if len(a) > 3 else (0, 0)
    ceil_mode = bool(a[4]) if len(a) > 4 else False
    count_include_pad = bool(a[5]) if len(a) > 5 else True
    divisor = a[6] if len(a) > 6 else None
    return _emit(ctx, node, "avg_pool2d", [x], {
        "kernel": kernel, "stride": stride, "padding": padding, "dilation": (1, 1), "ceil_mode": ceil_mode,
        "count_include_pad": count_include_pad, "divisor_override": int(divisor or 0), "act": None})


def _mean(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    dims = a[1] if len(a) > 1 else None
    rank = len(x.shape)
    dims = sorted(d % rank for d in (dims if dims is not None else range(rank)))
    if rank == 4 and dims == [2, 3]:
        return _emit(ctx, node, "mean_hw", [x], {"keepdim": bool(a[2]) if len(a) > 2 else False})
    return reduce_handler("mean")(ctx, node, a)


def _binary(kind: str) -> Callable[[_Ctx, Node, list[Any]], Tensor]:
    def handler(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
        if node.kwargs.get("alpha", 1) != 1:
            raise McuError(f"{op_name(node.target)} with alpha is not supported{user_source_line(node)}")
        if node.kwargs.get("rounding_mode") is not None:
            raise McuError(f"division with rounding_mode is not supported{user_source_line(node)}")
        lhs = _tensor_arg(ctx, node, a[0], "lhs")
        rhs = _tensor_arg(ctx, node, a[1], "rhs")
        return _emit(ctx, node, kind, [lhs, rhs], {"act": None})
    return handler


def _view(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    return _emit(ctx, node, "reshape", [a[0]])


def _cat(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    tensors = [_tensor_arg(ctx, node, t, "input") for t in a[0]]
    rank = len(tensors[0].shape)
    axis = int(a[1]) if len(a) > 1 else 0
    return _emit(ctx, node, "concat", tensors, {"axis": axis % rank})


def _softmax(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    rank = len(a[0].shape)
    return _emit(ctx, node, "softmax", [a[0]], {"axis": int(a[1]) % rank})


def _unary(kind: str) -> Callable[[_Ctx, Node, list[Any]], Tensor]:
    def handler(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
        return _emit(ctx, node, kind, [a[0]])
    return handler


def _batch_norm(ctx: _Ctx, node: Node, a: list[Any]) -> tuple[Tensor, None, None]:
    x, weight, bias, mean, var = a[:5]
    eps = float(a[6])
    for t in (weight, bias, mean, var):
        if t is not None and not _is_const(t):
            raise McuError(f"batch norm statistics must be constant (call model.eval()){user_source_line(node)}")
    channels = x.shape[1]
    w = weight.data if weight is not None else np.ones(channels, np.float32)
    b = bias.data if bias is not None else np.zeros(channels, np.float32)
    scale = (w / np.sqrt(var.data.astype(np.float64) + eps)).astype(np.float32)
    shift = (b - mean.data * scale).astype(np.float32)
    out = _out_tensor(ctx, node, node.meta["val"][0])
    sc = Tensor(name=ctx.fresh(f"{node.name}_scale"), shape=(channels,), data=scale)
    sh = Tensor(name=ctx.fresh(f"{node.name}_shift"), shape=(channels,), data=shift)
    ctx.ops.append(Op("batch_norm", [x, sc, sh], [out], {"eps": eps}, name=node.name,
                      source=op_source(node)))
    return (out, None, None)


def _pad(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
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
    return _emit(ctx, node, "pad", [x], {"before": tuple(before), "after": tuple(after), "value": value})


def _qparams(scale: Any, zero_point: Any, qmin: Any, qmax: Any, dtype: Any, node: Node) -> QuantParams:
    if dtype != torch.int8:
        raise McuError(f"quantization to {dtype} is not supported (int8 only){user_source_line(node)}")
    return QuantParams(scale=(float(scale),), zero_point=(int(zero_point),), qmin=int(qmin), qmax=int(qmax))


def _quantize(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    q = _qparams(*a[1:6], node)
    out = _emit(ctx, node, "quantize", [a[0]])
    out.quant = q
    return out


def _dequantize(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    q = _qparams(*a[1:6], node)
    src = a[0]
    if src.quant is None:
        src.quant = q
    return _emit(ctx, node, "dequantize", [src], {"quant": q})


def _quant_ops() -> dict[str, Any]:
    """The quantized_decomposed ops, registered once torchao is imported (only int8 graphs have them)."""
    try:
        qd = torch.ops.quantized_decomposed
        return {"q": qd.quantize_per_tensor.default, "dq": qd.dequantize_per_tensor.default,
                "dq_channel": qd.dequantize_per_channel.default}
    except AttributeError:
        return {}


def _handlers() -> dict[object, Callable[[_Ctx, Node, list[Any]], Any]]:
    ops = _quant_ops()
    extra = {ops["q"]: _quantize, ops["dq"]: _dequantize} if ops else {}
    return {**all_handlers(), **extra}


def _fold_quantized_constant(node: Node, args: list[Any], value: torch.Tensor) -> QConst | None:
    """The integer form of a constant produced by dequantizing (or moving) a quantized constant."""
    if node.target in dequantize_affine_ops():  # torchao's groupwise weights
        return fold_dequantize_affine(args)
    qops = _quant_ops()
    if qops and node.target in (qops["dq_channel"], qops["dq"]):
        src = args[0]
        values = torch.from_numpy(np.ascontiguousarray(src.data))
        if node.target is qops["dq_channel"]:
            scales, zps, axis = args[1], args[2], int(args[3])
            shape = [1] * values.dim()
            shape[axis] = -1
            scale = np.broadcast_to(scales.data.astype(np.float64).reshape(shape), values.shape)
            zp = np.broadcast_to(zps.data.astype(np.int64).reshape(shape), values.shape)
        else:
            scale = np.full(values.shape, float(args[1]))
            zp = np.full(values.shape, int(args[2]), dtype=np.int64)
        return QConst(values.numpy().astype(np.int8), np.ascontiguousarray(scale), np.ascontiguousarray(zp))
    qsrc = next((x for x in args if isinstance(x, Tensor) and x.qconst is not None), None)
    if qsrc is None or node.target not in _DATA_MOVEMENT:
        return None
    rest = [_torch_value(x) for x in args[1:]]
    moved = [node.target(torch.from_numpy(np.ascontiguousarray(arr)), *rest).contiguous().numpy()
             for arr in (qsrc.qconst.values, qsrc.qconst.scale, qsrc.qconst.zero_point)]
    return QConst(*moved)


def _identity(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    return a[0]


def _slice(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
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
    return _emit(ctx, node, "slice", [x], {"dim": dim, "start": start, "step": step})


def _select(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
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
    return _emit(ctx, node, "reshape", [kept])


def _index_put(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    return frontend_state.index_put(ctx.states, ctx.ops, node, a, ctx.fresh)


def _to_copy(ctx: _Ctx, node: Node, a: list[Any]) -> Tensor:
    src = node.args[0].meta["val"] if isinstance(node.args[0], Node) else None
    if src is not None and src.dtype == torch.bool and node.meta["val"].dtype == torch.float32:
        return bool_to_float(ctx, node, a[0])
    if _dtype(node.meta["val"], node) != a[0].dtype:
        raise McuError(f"dtype conversion to {node.meta['val'].dtype} is not supported{user_source_line(node)}")
    return a[0]


HANDLERS: dict[object, Callable[[_Ctx, Node, list[Any]], Any]] = {
    aten.convolution.default: _conv,
    aten.addmm.default: _addmm,
    aten.mm.default: _mm,
    aten.linear.default: _linear,
    aten.relu.default: _clamp_kind(0.0, None),
    aten.hardtanh.default: _hardtanh,
    aten.clamp.default: _clamp,
    aten.max_pool2d_with_indices.default: _max_pool,
    aten.max_pool2d.default: lambda c, n, a: _max_pool(c, n, a)[0],
    aten.avg_pool2d.default: _avg_pool,
    aten._adaptive_avg_pool2d.default: _adaptive_avg_pool,
    aten.adaptive_avg_pool2d.default: _adaptive_avg_pool,
    aten.mean.dim: _mean,
    aten.add.Tensor: _binary("add"),
    aten.sub.Tensor: _binary("sub"),
    aten.mul.Tensor: _binary("mul"),
    aten.div.Tensor: _binary("div"),
    aten.view.default: _view,
    aten._unsafe_view.default: _view,
    aten.reshape.default: _view,
    aten.squeeze.dims: _view,
    aten.squeeze.dim: _view,
    aten.squeeze.default: _view,
    aten.unsqueeze.default: _view,
    aten.flatten.using_ints: _view,
    aten.permute.default: _permute,
    aten.cat.default: _cat,
    aten._softmax.default: _softmax,
    aten.sigmoid.default: _unary("sigmoid"),
    aten.tanh.default: _unary("tanh"),
    aten.hardswish.default: _unary("hardswish"),
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    aten.constant_pad_nd.default: _pad,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    aten.clone.default: _identity,
    aten.alias.default: _identity,
    aten.detach.default: _identity,
    aten.dropout.default: _identity,
    aten._to_copy.default: _to_copy,
    # model state
    aten.index_put.default: _index_put,
}


def all_handlers() -> dict[object, Callable[[_Ctx, Node, list[Any]], Any]]:
    """Every ATen op's handler: the core ones above and those of each op family's module."""
    return {**HANDLERS, **MORE, **NORM, **SELECT, **RESAMPLE, **RECURRENT}


def state_dict_value(ep: torch.export.ExportedProgram, target: str) -> torch.Tensor:
    return {**ep.state_dict, **ep.constants}[target]


def supported_ops() -> list[str]:
    return sorted(op_name(t) for t in all_handlers()) + [
        "quantized_decomposed.quantize_per_tensor", "quantized_decomposed.dequantize_per_tensor",
        "quantized_decomposed.dequantize_per_channel (constant weights)"]


def _map_args(ctx: _Ctx, value: Any) -> Any:
    if isinstance(value, Node):
        return ctx.values[value.name]
    if isinstance(value, (list, tuple)):
        return type(value)(_map_args(ctx, v) for v in value)
    return value


def _no_tensor_inputs(node: Node) -> bool:
    """aten.full, zeros, arange and the like: computed once at compile time."""
    def nodes(v: Any) -> bool:
        return any(nodes(x) for x in v) if isinstance(v, (list, tuple)) else isinstance(v, Node)
    return not nodes(node.args) and not nodes(list(node.kwargs.values()))


def _all_constant(args: Any) -> bool:
    flat: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        else:
            flat.append(v)
    walk(args)
    # (no tensor at all, as in aten.full or zeros, is constant too)
    return all(v.is_constant for v in flat if isinstance(v, Tensor))


def from_exported(ep: torch.export.ExportedProgram, name: str = "model", custom_ops: tuple = ()) -> Graph:
    """``custom_ops``: the model's registered custom ops (mcu/capture/custom_ops.py); each of their nodes becomes one
    ``custom`` op."""
    handlers = {**_handlers(), **custom_handlers(ep, custom_ops)}
    foldable_only = {_quant_ops()["dq_channel"]} if _quant_ops() else set()  # only on constant weights
    foldable_only |= dequantize_affine_ops()

    folds = constant_inputs(ep)
    verify_edge(ep, set(handlers) | foldable_only, is_supported=lambda n: _no_tensor_inputs(n) or folds(n))
    sig = ep.graph_signature
    state = {**ep.state_dict, **ep.constants}
    const_names: dict[str, str] = {}
    for spec in sig.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            const_names[spec.arg.name] = spec.target
    ctx = _Ctx()
    inputs: list[Tensor] = []
    outputs: list[Tensor] = []
    mutated = frontend_state.mutated_buffers(ep)
    model_state: dict[str, Tensor] = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in mutated:  # model state: lives across calls, written in place
                t = frontend_state.state_tensor(node, mutated[node.name], state_dict_value(ep, mutated[node.name]))
                model_state[mutated[node.name]] = t
                ctx.states[id(t)] = mutated[node.name]
                ctx.values[node.name] = t
            elif node.name in const_names:
                value = state[const_names[node.name]]
                ctx.values[node.name] = _const(node.name, value)
            elif isinstance(node.meta.get("val"), torch.Tensor):
                t = _out_tensor(ctx, node)
                t.is_input = True
                inputs.append(t)
                ctx.values[node.name] = t
            else:
                raise McuError(f"model input {node.name} is not a tensor", hint="pass only tensors as inputs")
        elif node.op == "call_function":
            args = _map_args(ctx, node.args)
            if node.target is operator.getitem:
                ctx.values[node.name] = args[0][args[1]]
                continue
            if _all_constant(args):
                with torch.no_grad():
                    value = node.target(*_torch_value(list(args)), **_torch_value(dict(node.kwargs)))
                if isinstance(value, torch.Tensor):
                    const = _const(node.name, value)
                    const.qconst = _fold_quantized_constant(node, list(args), value)
                    ctx.values[node.name] = const
                else:
                    ctx.values[node.name] = tuple(_const(f"{node.name}_{i}", v) for i, v in enumerate(value))
                continue
            if node.target in foldable_only:
                raise McuError(f"{op_name(node.target)} on a non-constant tensor is not supported"
                               f"{user_source_line(node)}")
            ctx.values[node.name] = handlers[node.target](ctx, node, list(args))
        elif node.op == "output":
            returned = _map_args(ctx, node.args[0])
            by_target = {spec.arg.name: spec.target for spec in sig.output_specs}
            for v, user, arg in zip(returned, frontend_state.user_outputs(ep), node.args[0]):
                if not user:
                    target = by_target[arg.name]
                    frontend_state.check_final_value(v, model_state[target], target)
            for v in [v for v, user in zip(returned, frontend_state.user_outputs(ep)) if user]:
                if not isinstance(v, Tensor):
                    raise McuError("every model output must be a tensor")
                if v.is_constant:
                    raise McuError(f"model output {v.name} is a constant; mcu compiles only computed outputs")
                outputs.append(v)
    if not outputs:
        raise McuError("the model returns no tensor")
    _share_constants(ctx.ops)
    graph = Graph(inputs=inputs, outputs=outputs, ops=ctx.ops, name=name, state=model_state)
    frontend_state.check_reads(graph)
    for t in outputs:
        t.is_output = True
    return graph
