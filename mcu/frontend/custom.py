"""Lowering of user custom ops (``torch.library`` ops registered with :func:`mcu.custom_op`).

Every node of an op outside the namespaces mcu lowers itself (aten, quantized_decomposed) must have a
registration: the node becomes one IR op ``custom`` whose attrs carry the registration and the op's
constant scalar arguments; an unregistered one is an error that names the op, the user's line and
how to register it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx import Node

from mcu.capture.custom_ops import CustomOp
from mcu.errors import McuError
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import out_tensor as _out_tensor
from mcu.ir import Op, Tensor

# Namespaces whose ops are ours to lower (or to refuse as unsupported ATen ops).
OWN_NAMESPACES = ("aten", "quantized_decomposed", "prims", "torchao",  # torchao: its int4 dequantize, folded
                  "mcu_rnn")  # integer recurrent layers (mcu/capture/recurrent.py)


def custom_name(target: object) -> str | None:
    """``namespace::op`` of a user op's overload, or None for ATen and other ops mcu knows."""
    if isinstance(target, torch._ops.OpOverload) and target.namespace not in OWN_NAMESPACES:
        return target._schema.name
    return None


def _handler(reg: CustomOp) -> Callable[..., Any]:
    def lower(ctx: Any, node: Node, args: list[Any]) -> Any:
        # Every schema argument in order: export leaves out trailing ones equal to their defaults.
        schema = node.target._schema.arguments
        full = list(args)
        for a in schema[len(full):]:
            if a.name in node.kwargs:
                full.append(node.kwargs[a.name])
            elif a.has_default_value():
                full.append(a.default_value)
            else:
                raise McuError(f"custom op {reg.name}: argument {a.name} is missing{user_source_line(node)}")
        tensors = [a for a in full if isinstance(a, Tensor)]
        scalars = [a for a in full if not isinstance(a, Tensor)]
        bad = [a for a in scalars if not isinstance(a, (int, float, bool))]
        if bad or not tensors or any(t.is_constant for t in tensors[:1]):
            raise McuError(f"custom op {reg.name} takes tensors then scalars; got {[type(a).__name__ for a in args]}"
                           f"{user_source_line(node)}")
        if len(node.meta.get("val", ()) if isinstance(node.meta.get("val"), (tuple, list)) else [0]) != 1:
            raise McuError(f"custom op {reg.name} must return one tensor{user_source_line(node)}")
        out = _out_tensor(ctx, node)
        ctx.ops.append(Op("custom", tensors, [out], {"custom": reg, "args": tuple(float(a) for a in scalars)},
                          name=node.name, source=op_source(node)))
        return out
    return lower


def custom_handlers(ep: torch.export.ExportedProgram, registered: tuple[CustomOp, ...]) -> dict[object, Callable]:
    """Handlers for the custom ops in ``ep``; an unregistered one raises, naming it."""
    by_name = {r.name: r for r in registered}
    handlers: dict[object, Callable] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        name = custom_name(node.target)
        if name is None or node.target in handlers:
            continue
        if name not in by_name:
            raise McuError(
                f"custom op {name} is not registered with mcu{user_source_line(node)}",
                hint=f'list it in the model file: custom_ops = [mcu.custom_op("{name}", fp32=("my_fn", "my_op.c"), '
                     "reference=my_numpy_reference)] (see examples/custom_op.py)")
        handlers[node.target] = _handler(by_name[name])
    return handlers
