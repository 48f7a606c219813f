"""Stage 2: the Edge dialect.

``run_decompositions()`` lowers the captured graph to Core ATen; the verifier
then checks the properties every later stage relies on: functional (no
in-place or aliasing mutation), static shapes, explicit dtypes, and only ops
that the lowering knows (Core ATen plus quantize/dequantize). An op outside
that set is an error naming the op and the user's source line.
"""

from __future__ import annotations

import operator
from typing import Callable, Iterable

import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.capture.sourceinfo import unsupported_op_message, user_source_line


# Ops that Core ATen would decompose but that have a kernel of their own here (a single lookup table
# at int8, one pass at fp32), so they stay whole.
KEPT_WHOLE = (torch.ops.aten.hardswish.default,
              # one kernel (one table at int8) rather than gt + mul + where, sigmoid + mul, ...
              torch.ops.aten._prelu_kernel.default, torch.ops.aten.silu.default, torch.ops.aten.hardsigmoid.default,
              torch.ops.aten.softplus.default, torch.ops.aten.log_sigmoid_forward.default,
              torch.ops.aten.mish.default,
              # 1-D linear interpolation: one bilinear resize over a height of 1
              torch.ops.aten.upsample_linear1d.vec, torch.ops.aten.upsample_linear1d.default,
              torch.ops.aten.rms_norm.default)


def torchao_kept_whole() -> tuple[object, ...]:
    """torchao's dequantize_affine, once torchao registered it: kept whole, the frontend folds it into a
    weight that remembers its 4-bit values and group scales (mcu/frontend/int4.py)."""
    try:
        return (torch.ops.torchao.dequantize_affine.default,)
    except (AttributeError, RuntimeError):
        return ()


def to_edge(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    table = torch.export.default_decompositions()
    for op in (*KEPT_WHOLE, *torchao_kept_whole()):
        table.pop(op, None)
    try:
        return ep.run_decompositions(table)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise McuError(f"decomposition to Core ATen failed: {first}") from None


def op_name(target: object) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"aten.{target._schema.name.split('::')[-1]}.{target._overloadname}" if target.namespace == "aten" \
            else f"{target.namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def verify_edge(ep: torch.export.ExportedProgram, supported: Iterable[object],
                is_supported: Callable[[Node], bool] | None = None) -> None:
    """Raise one :class:`McuError` naming every node that breaks the Edge contract (one line each, with the
    user's source line), so a model with several unsupported ops needs one run, not one per op."""
    supported = set(supported)
    problems: list[str] = []
    hints: list[str] = []

    def refuse(message: str, hint: str) -> None:
        if message not in problems:  # the same op on the same line (a loop) once
            problems.append(message)
        if hint not in hints:
            hints.append(hint)

    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        broken = False
        for v in (val if isinstance(val, (tuple, list)) else [val]):
            if isinstance(v, torch.Tensor) and not broken:
                if any(not isinstance(s, int) for s in v.shape):
                    refuse(f"{op_name(node.target)} has a dynamic shape {list(v.shape)}{user_source_line(node)}",
                           "export with static shapes")
                    broken = True
                elif v.dtype.is_complex:
                    refuse(f"cannot lower {op_name(node.target)}: complex tensors are not supported"
                           f"{user_source_line(node)}", "keep complex numbers out of the model")
                    broken = True
        if broken or node.target is operator.getitem:
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is not None and schema.is_mutable:
            refuse(f"{op_name(node.target)} mutates its input{user_source_line(node)}",
                   "use the out-of-place form of the op")
        elif node.target not in supported and not (is_supported and is_supported(node)):
            refuse(unsupported_op_message(node, op_name(node.target)),
                   "replace it with supported ops; `mcu ops` lists them")
    if len(problems) == 1:
        raise McuError(problems[0], hint=hints[0])
    if problems:
        raise McuError(f"{len(problems)} ops cannot be lowered:\n  " + "\n  ".join(problems),
                       hint="; ".join(hints))
