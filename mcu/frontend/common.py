"""What every frontend module shares: the lowering context, dtypes and constants, emitting an IR op (the
handler's own output, or one of several a handler emits)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node

from mcu.capture.edge import op_name
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.errors import McuError
from mcu.ir import Op, Tensor

TORCH_DTYPES = {torch.float32: "float32", torch.int8: "int8", torch.int32: "int32", torch.uint8: "uint8",
                 torch.int16: "int16",
                 torch.int64: "int32",  # indices and positions: 32 bits on the device
                 torch.bool: "uint8"}  # masks: bytes 0/1


@dataclass
class Ctx:
    values: dict[str, Any] = field(default_factory=dict)  # node name -> Tensor | torch.Tensor | tuple
    ops: list[Op] = field(default_factory=list)
    counter: int = 0
    states: dict[int, str] = field(default_factory=dict)  # id(state tensor) -> buffer name

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"


def tensor_dtype(t: torch.Tensor, node: Node) -> str:
    if t.dtype not in TORCH_DTYPES:
        raise McuError(f"{op_name(node.target)} produces dtype {t.dtype}, which mcu does not support"
                       f"{user_source_line(node)}")
    return TORCH_DTYPES[t.dtype]


def out_tensor(ctx: Ctx, node: Node, val: torch.Tensor | None = None) -> Tensor:
    val = node.meta["val"] if val is None else val
    return Tensor(name=node.name, shape=tuple(int(s) for s in val.shape), dtype=tensor_dtype(val, node))


def const(name: str, value: torch.Tensor) -> Tensor:
    value = value.detach().contiguous()
    if value.dtype == torch.int64:  # stored as int32 on the device, when the values fit
        if value.numel() and (int(value.min()) < -2**31 or int(value.max()) >= 2**31):
            raise McuError(f"int64 constant {name} holds values beyond 32 bits")
        value = value.to(torch.int32)
    dtype = TORCH_DTYPES.get(value.dtype)
    if dtype is None:
        value = value.to(torch.float32)
        dtype = "float32"
    return Tensor(name=name, shape=tuple(value.shape), dtype=dtype, data=value.numpy().copy())


def is_const(v: Any) -> bool:
    return isinstance(v, Tensor) and v.is_constant


def pair(v: Any, n: int = 2) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(x) for x in v)
    return v * n if len(v) == 1 else v


def emit(ctx: Ctx, node: Node, kind: str, inputs: list[Tensor], attrs: dict[str, Any] | None = None) -> Tensor:
    out = out_tensor(ctx, node)
    ctx.ops.append(Op(kind=kind, inputs=inputs, outputs=[out], attrs=attrs or {}, name=node.name,
                      source=op_source(node)))
    return out


def tensor_arg(ctx: Ctx, node: Node, v: Any, what: str) -> Tensor:
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (int, float, bool)):
        return const(ctx.fresh(f"{node.name}_{what}"), torch.tensor(float(v), dtype=torch.float32))
    raise McuError(f"{op_name(node.target)}: unsupported {what} argument {v!r}{user_source_line(node)}")


def add_op(ctx: Any, node: Node, kind: str, inputs: list[Tensor], shape: tuple[int, ...], dtype: str,
           attrs: dict[str, Any], name: str | None = None) -> Tensor:
    """An op with an output of its own (for handlers that emit more than one op)."""
    out = Tensor(name=name or ctx.fresh(node.name), shape=tuple(shape), dtype=dtype)
    ctx.ops.append(Op(kind, inputs, [out], attrs, name=out.name, source=op_source(node)))
    return out
