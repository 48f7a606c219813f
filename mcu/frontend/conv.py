"""Frontend handlers of the convolution and linear family: 2-D convolution (grouped with ``groups``), linear
layers (``linear``, ``addmm``, and ``mm`` with a constant right operand), matrix products of two
activations (``bmm``, and ``mm`` as one batch), and convolutions beyond 2-D: conv1d (dilated, causal as users
write it with F.pad), and transposed convolution in 1-D and 2-D.

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

from typing import Any, Callable

import numpy as np
import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, QConst, Tensor
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import add_op, emit, is_const, pair
from mcu.frontend.common import tensor_dtype as _dtype

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


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
        out.qconst = QConst(*(np.ascontiguousarray(move(a)) for a in (q.values, q.scale, q.zero_point)), q.qmax)
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


def _conv(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, w, b, stride, padding, dilation, transposed, _out_pad, groups = a[:9]
    if transposed or len(w.shape) != 4:  # conv1d and transposed convolution
        return convolution(ctx, node, a)
    if not is_const(w) or (b is not None and not is_const(b)):
        raise McuError(f"convolution weights must be constant{user_source_line(node)}")
    inputs = [x, w] + ([b] if b is not None else [])
    return emit(ctx, node, "conv2d", inputs, {
        "stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "groups": int(groups),
        "act": None,
    })


def _addmm(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    bias, x, w_t = a[:3]
    beta = node.kwargs.get("beta", 1)
    alpha = node.kwargs.get("alpha", 1)
    if beta != 1 or alpha != 1:
        raise McuError(f"addmm with alpha/beta is not supported{user_source_line(node)}")
    if not is_const(bias):
        raise McuError(f"addmm with a non-constant bias is not supported{user_source_line(node)}")
    bias = Tensor(name=bias.name, shape=(bias.numel,), dtype=bias.dtype, data=bias.data.reshape(-1))
    return _linear_from(ctx, node, x, w_t, bias, weight_is_transposed=True)


def _linear(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    return _linear_from(ctx, node, x, w, b, weight_is_transposed=False)


def _linear_from(ctx: Any, node: Node, x: Tensor, w_t: torch.Tensor | Tensor, bias: Tensor | None,
                 weight_is_transposed: bool) -> Tensor:
    if not is_const(w_t):
        raise McuError(f"matrix multiply with a non-constant right operand is not supported"
                       f"{user_source_line(node)}")
    data = w_t.data.T.copy() if weight_is_transposed else w_t.data
    w = Tensor(name=ctx.fresh(f"{node.name}_weight"), shape=tuple(data.shape), dtype=w_t.dtype, data=data)
    if w_t.qconst is not None:
        qc = w_t.qconst
        w.qconst = (QConst(qc.values.T.copy(), qc.scale.T.copy(), qc.zero_point.T.copy(), qc.qmax)
                    if weight_is_transposed else qc)
    inputs = [x, w] + ([bias] if bias is not None else [])
    return emit(ctx, node, "linear", inputs, {"act": None})


def _reshape(ctx: Any, node: Node, x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x if tuple(x.shape) == tuple(shape) else add_op(ctx, node, "reshape", [x], shape, x.dtype, {})


def _mm(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """a @ b: a constant b is a linear layer; an activation b is a batched product of one batch."""
    x, w = a[0], a[1]
    if isinstance(w, Tensor) and w.is_constant:
        return _linear_from(ctx, node, x, w, None, weight_is_transposed=True)
    (m, k), n = x.shape, w.shape[1]
    out = add_op(ctx, node, "bmm", [_reshape(ctx, node, x, (1, m, k)), _reshape(ctx, node, w, (1, k, n))],
                 (1, m, n), "float32", {})
    return add_op(ctx, node, "reshape", [out], (m, n), "float32", {}, name=node.name)


def _bmm(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    return emit(ctx, node, "bmm", [a[0], a[1]], {})


HANDLERS: dict[object, Handler] = {
    aten.convolution.default: _conv,
    aten.addmm.default: _addmm,
    aten.mm.default: _mm,
    aten.linear.default: _linear,
    aten.bmm.default: _bmm,
}
