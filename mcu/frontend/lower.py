"""Stage 3: turn an Edge-dialect ``ExportedProgram`` into the mcu IR.

Each supported ATen op has one handler, in the ``HANDLERS`` of its op family's module (``conv``,
``pool``, ``elementwise``, ``norm``, ``movement``, ``select``, ``state``, ``resample``, ``recurrent``),
that emits IR ops with PyTorch (logical, NCHW) semantics; layout and kernel choice come later. Nodes
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
from mcu.frontend import conv, elementwise, movement, norm, pool, recurrent, resample, select
from mcu.frontend.common import Ctx as _Ctx
from mcu.frontend.common import const as _const
from mcu.frontend.common import emit as _emit
from mcu.frontend.common import out_tensor as _out_tensor
from mcu.frontend.custom import custom_handlers
from mcu.frontend.int4 import dequantize_affine_ops, fold_dequantize_affine
from mcu.frontend import state as frontend_state
from mcu.ir import Graph, Op, QConst, QuantParams, Tensor
from mcu.capture.sourceinfo import user_source_line

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


# --- the int8 boundary: pt2e's quantize and dequantize nodes --------------------------------------


def _qparams(scale: Any, zero_point: Any, qmin: Any, qmax: Any, dtype: Any, node: Node) -> QuantParams:
    if dtype not in (torch.int8, torch.int16):
        raise McuError(f"quantization to {dtype} is not supported (int8 and int16 only){user_source_line(node)}")
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
            scales, zps, axis, qmax = args[1], args[2], int(args[3]), int(args[5])
            shape = [1] * values.dim()
            shape[axis] = -1
            scale = np.broadcast_to(scales.data.astype(np.float64).reshape(shape), values.shape)
            zp = np.broadcast_to(zps.data.astype(np.int64).reshape(shape), values.shape)
        else:
            scale = np.full(values.shape, float(args[1]))
            zp = np.full(values.shape, int(args[2]), dtype=np.int64)
            qmax = int(args[4])
        codes = values.numpy().astype(np.int8 if qmax <= 127 else np.int16)  # (int16: w8a16's constant operands)
        return QConst(codes, np.ascontiguousarray(scale), np.ascontiguousarray(zp), qmax)
    qsrc = next((x for x in args if isinstance(x, Tensor) and x.qconst is not None), None)
    if qsrc is None or node.target not in _DATA_MOVEMENT:
        return None
    rest = [_torch_value(x) for x in args[1:]]
    moved = [node.target(torch.from_numpy(np.ascontiguousarray(arr)), *rest).contiguous().numpy()
             for arr in (qsrc.qconst.values, qsrc.qconst.scale, qsrc.qconst.zero_point)]
    return QConst(*moved, qsrc.qconst.qmax)


def all_handlers() -> dict[object, Callable[[_Ctx, Node, list[Any]], Any]]:
    """Every ATen op's handler: each op family's module keeps its own."""
    return {**conv.HANDLERS, **pool.HANDLERS, **elementwise.HANDLERS, **norm.HANDLERS, **movement.HANDLERS,
            **select.HANDLERS, **frontend_state.HANDLERS, **resample.HANDLERS, **recurrent.HANDLERS}


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
