"""Convolutions beyond 2-D: conv1d (dilated, causal as users write it with F.pad), and
transposed convolution in 1-D and 2-D. Grouped convolution is the 2-D path's ``groups``.

A 1-D convolution over ``[N, C, L]`` runs as the 2-D one over ``[N, C, 1, L]``: the input and output
pass through ``reshape`` ops marked ``unit_view`` (one size-1 dim inserted or removed, so they alias
their input), which keeps every 2-D kernel path (portable, DSP, Helium, packed, CMSIS-NN) and the
int8 arithmetic exactly as they are. :func:`mcu.passes.conv_views.commute_unit_views` moves
those views past the model's dequantize/quantize nodes so the int8 lowering sees the usual
``dequantize -> conv2d -> quantize``.

A transposed convolution becomes one ``conv_transpose2d`` op. Its weights, ``[in_c, out_c/groups,
kh, kw]`` in PyTorch, are rearranged here to the logical ``[out_c, in_c/groups, kh, kw]`` of a
convolution, so the layout pass stores them OHWI like any convolution's and the int8 lowering
quantizes them per output channel (axis 0) with the same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, QConst, Tensor
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import tensor_dtype as _dtype


def _ints(v: Any, n: int) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    t = tuple(int(x) for x in v)
    return t * n if len(t) == 1 else t


def _const_like(ctx: Any, node: Node, w: Tensor, what: str, move) -> Tensor:
    """A copy of constant ``w`` with ``move`` (a numpy rearrangement) applied to its data and, when it
    dequantizes int8 weights, to their integer values and per-element parameters alike."""
    data = np.ascontiguousarray(move(w.data))
    out = Tensor(name=ctx.fresh(f"{node.name}_{what}"), shape=tuple(data.shape), dtype=w.dtype, data=data)
    if w.qconst is not None:
        q = w.qconst
        out.qconst = QConst(*(np.ascontiguousarray(move(a)) for a in (q.values, q.scale, q.zero_point)))
    return out


def _unit_view(ctx: Any, node: Node, x: Tensor, shape: tuple[int, ...], name: str) -> Tensor:
    out = Tensor(name=name, shape=shape, dtype=x.dtype)
    ctx.ops.append(Op("reshape", [x], [out], {"unit_view": True}, name=name, source=op_source(node)))
    return out


def convolution(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """aten.convolution on a 3-D input (conv1d), or transposed (conv_transpose1d/2d)."""
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = a[:9]
    if not (isinstance(w, Tensor) and w.is_constant) or (b is not None and not b.is_constant):
        raise McuError(f"convolution weights must be constant{user_source_line(node)}")
    rank = len(w.shape)
    if rank not in (3, 4):
        raise McuError(f"{rank - 2}-D convolution is not supported (1-D and 2-D are){user_source_line(node)}")
    one_d = rank == 3
    n = 1 if one_d else 2
    stride, padding, dilation = _ints(stride, n), _ints(padding, n), _ints(dilation, n)
    out_pad = _ints(out_pad, n) if transposed else (0,) * n
    if any(p < 0 for p in padding):
        raise McuError(f"negative convolution padding is not supported{user_source_line(node)}")
    groups = int(groups)
    if one_d:  # [.., L] as [.., 1, L]: the 2-D kernels with a window of height 1
        stride, padding, dilation, out_pad = (1, *stride), (0, *padding), (1, *dilation), (0, *out_pad)
        w = _const_like(ctx, node, w, "weight2d", lambda v: v.reshape(v.shape[0], v.shape[1], 1, v.shape[2]))
        x = _unit_view(ctx, node, x, (x.shape[0], x.shape[1], 1, x.shape[2]), ctx.fresh(f"{node.name}_as2d"))
    if transposed:
        in_c, ocg, kh, kw = w.shape
        icg = in_c // groups
        # [in_c, out_c/g, kh, kw] -> [out_c, in_c/g, kh, kw]: output channel g*ocg+m reads input channels of group g
        w = _const_like(ctx, node, w, "weight_t", lambda v: v.reshape(groups, icg, ocg, kh, kw)
                        .transpose(0, 2, 1, 3, 4).reshape(groups * ocg, icg, kh, kw))
    kind = "conv_transpose2d" if transposed else "conv2d"
    attrs: dict[str, Any] = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
                             "act": None}
    if transposed:
        attrs["output_padding"] = out_pad
    val = node.meta["val"]

    dtype = _dtype(val, node)
    shape = tuple(int(s) for s in val.shape)
    out4 = Tensor(name=ctx.fresh(f"{node.name}_2d") if one_d else node.name,
                  shape=(shape[0], shape[1], 1, shape[2]) if one_d else shape, dtype=dtype)
    inputs = [x, w] + ([b] if b is not None else [])
    ctx.ops.append(Op(kind, inputs, [out4], attrs, name=out4.name if one_d else node.name, source=op_source(node)))
    if not one_d:
        return out4
    return _unit_view(ctx, node, out4, shape, node.name)
