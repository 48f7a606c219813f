"""Model state in the frontend: buffers a method mutates (a KV cache) and ``aten.index_put``.

torch.export lists a buffer the method writes in its graph signature as a buffer mutation, and
functionalizes ``buf.index_put_(...)`` (or ``buf[:, pos] = v``) into ``index_put(buf, ...)`` whose
result becomes the buffer's new value. Such a buffer is *state*: not a constant, not an input the
caller passes, but memory that keeps its value from one call to the next and that every method of the
model shares (the memory planner puts it at a fixed place, mcu/plan/memory.py). Each ``index_put`` becomes an
``index_put`` op that writes the new positions into the state's own bytes (its output aliases the
state), so the state is never copied. A mutation of another form (``copy_``, an arithmetic update,
slicing assignment that decomposes to a whole-buffer ``where``) is an error naming the buffer.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
from torch.export.graph_signature import OutputKind
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Graph, Op, Tensor
from mcu.capture.sourceinfo import op_source, user_source_line


def mutated_buffers(ep: torch.export.ExportedProgram) -> dict[str, str]:
    """Placeholder name -> buffer name (its fully qualified name) of every buffer the graph mutates."""
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    return {name: target for name, target in sig.inputs_to_buffers.items() if target in mutated}


def state_tensor(node: Node, target: str, initial: torch.Tensor) -> Tensor:
    """The state tensor of a mutated buffer. States start at zero (the arena's state region is cleared
    when a model starts), so a buffer with another initial value is refused."""
    value = initial.detach()
    if value.dtype != torch.float32:
        raise McuError(f"state buffer {target} is {value.dtype}; only float32 state is supported",
                       hint="register the buffer as float32")
    if bool(torch.any(value != 0)):
        raise McuError(f"state buffer {target} does not start at zero; state starts cleared on the device",
                       hint="initialise the buffer with torch.zeros")
    return Tensor(name=node.name, shape=tuple(int(s) for s in value.shape), dtype="float32")


def user_outputs(ep: torch.export.ExportedProgram) -> list[bool]:
    """For each value the graph returns: True for a user output, False for a buffer's new value."""
    return [spec.kind == OutputKind.USER_OUTPUT for spec in ep.graph_signature.output_specs]


def check_final_value(value: Any, state: Tensor, target: str) -> None:
    """The value torch.export writes back to a buffer must be the state's own bytes (written in place)."""
    if not isinstance(value, Tensor) or value.base() is not state:
        raise McuError(f"buffer {target} is updated by something other than index_put_, which mcu would have to "
                       "copy whole", hint="write new positions with buf.index_put_((..., pos), values) "
                                          "or buf[:, pos] = values")


def index_put(states: dict[int, str], ops: list[Op], node: Node, a: list[Any],
              fresh: Callable[[str], str]) -> Tensor:
    """aten.index_put(state, indices, values, accumulate) -> the state, written in place at the positions."""
    base, indices, vals = a[0], a[1], a[2]
    accumulate = bool(a[3]) if len(a) > 3 else bool(node.kwargs.get("accumulate", False))
    where = user_source_line(node)
    if not isinstance(base, Tensor) or id(base.base()) not in states:
        raise McuError(f"index_put on a tensor that is not a mutated buffer is not supported{where}",
                       hint="index_put_ writes model state (a buffer); compute other tensors without it")
    if accumulate:
        raise McuError(f"index_put with accumulate=True is not supported{where}")
    present = [i for i, t in enumerate(indices) if t is not None]
    if len(present) != 1:
        raise McuError(f"index_put with {len(present)} index tensors is not supported (one position tensor, "
                       f"e.g. cache[:, pos] = v){where}")
    axis = present[0]
    index = indices[axis]
    if len(index.shape) != 1:
        raise McuError(f"index_put positions of shape {list(index.shape)} are not supported (a 1-D tensor){where}")
    state = base.base()
    shape = state.shape
    count = index.shape[0]
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    if not isinstance(vals, Tensor) or vals.numel != outer * count * inner:
        raise McuError(f"index_put values of shape {list(getattr(vals, 'shape', []))} do not fill the "
                       f"{count} written positions of {list(shape)} (broadcast values are not supported){where}")
    if vals.is_constant:
        raise McuError(f"index_put of constant values is not supported{where}")
    if index.is_constant:
        pos = np.asarray(index.data).reshape(-1)
        if np.any(pos != np.rint(pos)) or np.any(pos < -shape[axis]) or np.any(pos >= shape[axis]):
            raise McuError(f"index_put positions {pos.tolist()} are outside [0, {shape[axis]}){where}")
        index = Tensor(name=fresh(f"{node.name}_positions"), shape=(count,), dtype="int32",
                       data=pos.astype(np.int32))
    elif index.dtype != "int32":
        raise McuError(f"index_put positions of dtype {index.dtype} are not supported (integers){where}")
    out = Tensor(name=node.name, shape=shape, dtype=state.dtype, alias_of=state)
    ops.append(Op("index_put", [vals, index], [out],
                            {"outer": outer, "axis": shape[axis], "inner": inner, "count": count,
                             "state": states[id(state)]}, name=node.name, source=op_source(node)))
    return out


def _index_put(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    return index_put(ctx.states, ctx.ops, node, a, ctx.fresh)


HANDLERS: dict[object, Callable[[Any, Node, list[Any]], Any]] = {
    torch.ops.aten.index_put.default: _index_put,
}


def check_reads(graph: Graph) -> None:
    """Refuse a read of a state's value from before this call's write: the write happens in place, so
    an op that reads the old value could run after it and see the new one."""
    written = {id(t) for t in graph.state.values()}
    for op in graph.ops:
        for t in op.inputs:
            if id(t) in written:  # the state tensor itself, not the value index_put returned
                name = next(k for k, v in graph.state.items() if v is t)
                raise McuError(f"{op.kind} {op.name} reads buffer {name} as it was before this call wrote it"
                               + (f" ({op.source})" if op.source else ""),
                               hint="write the new positions first, then read the buffer")
