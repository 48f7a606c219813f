"""Make reshapes (view, flatten, squeeze, unsqueeze) aliases instead of copies.

After layout assignment a reshape's input holds its bytes in logical
row-major order, so the output can share those bytes: the op stays in the
graph for bookkeeping but emits no code, and the memory planner extends the
base buffer's lifetime over the alias's uses.
"""

from __future__ import annotations

from mcu.ir import Graph
from mcu.passes.conv_views import keeps_layout, view_order
from mcu.passes.layout import same_bytes


def alias_views(graph: Graph) -> Graph:
    for op in graph.ops:
        if op.kind != "reshape":
            continue
        src, out = op.inputs[0], op.output
        if src.is_constant:
            continue
        order = view_order(src, out) if keeps_layout(op) or op.attrs.get("unit_view") else None
        if order is not None and same_bytes(out, order):
            pass  # a size-1 dim in or out: same bytes in any layout (mcu/passes/conv_views.py)
        elif op.attrs.get("unit_view"):
            raise AssertionError(f"view {op.name} does not keep its input's bytes")
        elif not src.is_contiguous_layout():
            raise AssertionError(f"reshape {op.name} reads a non-contiguous tensor; layout pass missed it")
        out.alias_of = src
        op.attrs["alias"] = True
    return graph
