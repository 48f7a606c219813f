"""Resampling and data movement for the frontend: nearest and bilinear upsampling, flip, repeat, expand, reflect and replicate padding (exported as
``aten.index.Tensor`` with constant indices), index_select and gather.

Every op that only moves elements by indices known at compile time becomes one ``remap`` op: a table
of source indices per output dim (mcu_remap), computed here with PyTorch's own index arithmetic, so
the result is exact at fp32 and int8 alike. Run-time indices become ``index_select`` or ``gather``.
Bilinear resizing has a kernel of its own; its tables come from :mod:`mcu.reference.resample`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch.fx import Node

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.reference.resample import bilinear_tables_f32, nearest_table
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.frontend.common import emit as _emit

aten = torch.ops.aten

Handler = Callable[[Any, Node, list[Any]], Any]


def _out(node: Node, dtype: str) -> Tensor:
    return Tensor(name=node.name, shape=tuple(int(s) for s in node.meta["val"].shape), dtype=dtype)


def _int_const(ctx: Any, node: Node, what: str, values: np.ndarray, dtype: str = "int32") -> Tensor:
    arr = np.ascontiguousarray(values, dtype=np.float32 if dtype == "float32" else np.int32)
    return Tensor(name=ctx.fresh(f"{node.name}_{what}"), shape=arr.shape, dtype=dtype, data=arr)


def remap(ctx: Any, node: Node, x: Tensor, tables: list[list[int]]) -> Tensor:
    """out[i0]..[ik] = x[tables[0][i0]]..[tables[k][ik]]; x may have fewer dims (leading ones added)."""
    out = _out(node, x.dtype)
    if [len(t) for t in tables] != list(out.shape):
        raise McuError(f"internal: remap tables {[len(t) for t in tables]} for output {list(out.shape)}")
    in_shape = (1,) * (len(out.shape) - len(x.shape)) + tuple(x.shape)
    if all(list(t) == list(range(n)) for t, n in zip(tables, in_shape)) and in_shape == out.shape \
            and len(x.shape) == len(out.shape):
        return x  # nothing moves
    flat = np.concatenate([np.asarray(t, np.int64) for t in tables]).astype(np.int32)
    const = _int_const(ctx, node, "tables", flat)
    ctx.ops.append(Op("remap", [x, const], [out], {"tables": tuple(tuple(int(v) for v in t) for t in tables)},
                      name=node.name, source=op_source(node)))
    return out


def _identity(n: int) -> list[int]:
    return list(range(n))


# --- upsampling ---------------------------------------------------------------------------------------


def _scales(node: Node, a: list[Any], vec_index: int, h_index: int) -> tuple[float | None, float | None]:
    """(scale_h, scale_w) as the kernel receives them: from scale_factors (.vec) or scales_h/scales_w."""
    if node.target in (aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec):
        factors = a[vec_index] if len(a) > vec_index else node.kwargs.get("scale_factors")
        if factors is None:
            return None, None
        factors = list(factors)
        return float(factors[0]), float(factors[-1])
    sh = a[h_index] if len(a) > h_index else node.kwargs.get("scales_h")
    sw = a[h_index + 1] if len(a) > h_index + 1 else node.kwargs.get("scales_w")
    return (None if sh is None else float(sh)), (None if sw is None else float(sw))


def _check_4d(node: Node, x: Tensor, what: str) -> None:
    if len(x.shape) != 4:
        raise McuError(f"{what} of a {len(x.shape)}-D tensor is not supported (N, C, H, W only)"
                       f"{user_source_line(node)}")


def _upsample_nearest(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    _check_4d(node, x, "nearest upsampling")
    sh, sw = _scales(node, a, 2, 2)
    n, c, h, w = x.shape
    oh, ow = (int(s) for s in node.meta["val"].shape[2:])
    return remap(ctx, node, x, [_identity(n), _identity(c), nearest_table(h, oh, sh), nearest_table(w, ow, sw)])


def _upsample_bilinear(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    _check_4d(node, x, "bilinear upsampling")
    align = bool(a[2]) if len(a) > 2 else bool(node.kwargs.get("align_corners", False))
    sh, sw = _scales(node, a, 3, 3)
    h, w = x.shape[2:]
    oh, ow = (int(s) for s in node.meta["val"].shape[2:])
    index, lam = bilinear_tables_f32(h, w, oh, ow, align, sh, sw)
    ins = [x, _int_const(ctx, node, "index", index), _int_const(ctx, node, "lambda", lam, "float32")]
    out = _out(node, x.dtype)
    ctx.ops.append(Op("resize_bilinear", ins, [out], {"align_corners": align, "scales": (sh, sw)},
                      name=node.name, source=op_source(node)))
    return out


def _upsample_linear1d(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """(N, C, L) -> (N, C, 1, L), a bilinear resize of height 1, and back."""
    x = a[0]
    if len(x.shape) != 3:
        raise McuError(f"linear upsampling of a {len(x.shape)}-D tensor{user_source_line(node)}")
    align = bool(a[2]) if len(a) > 2 else bool(node.kwargs.get("align_corners", False))
    if node.target is aten.upsample_linear1d.vec:
        factors = a[3] if len(a) > 3 else node.kwargs.get("scale_factors")
        scale = None if factors is None else float(list(factors)[0])
    else:
        scale = a[3] if len(a) > 3 else node.kwargs.get("scales")
        scale = None if scale is None else float(scale)
    n, c, length = x.shape
    out_len = int(node.meta["val"].shape[2])
    source = op_source(node)
    rows = Tensor(name=ctx.fresh(f"{node.name}_rows"), shape=(n, c, 1, length), dtype=x.dtype)
    ctx.ops.append(Op("reshape", [x], [rows], {}, name=rows.name, source=source))
    index, lam = bilinear_tables_f32(1, length, 1, out_len, align, None, scale)
    resized = Tensor(name=ctx.fresh(f"{node.name}_resized"), shape=(n, c, 1, out_len), dtype=x.dtype)
    ins = [rows, _int_const(ctx, node, "index", index), _int_const(ctx, node, "lambda", lam, "float32")]
    ctx.ops.append(Op("resize_bilinear", ins, [resized], {"align_corners": align, "scales": (None, scale)},
                      name=resized.name, source=source))
    out = _out(node, x.dtype)
    ctx.ops.append(Op("reshape", [resized], [out], {}, name=node.name, source=source))
    return out


# --- data movement ------------------------------------------------------------------------------------


def _flip(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    rank = len(x.shape)
    dims = {int(d) % rank for d in a[1]}
    return remap(ctx, node, x, [list(range(n - 1, -1, -1)) if d in dims else _identity(n)
                                for d, n in enumerate(x.shape)])


def _repeat(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, reps = a[0], [int(r) for r in a[1]]
    in_shape = [1] * (len(reps) - len(x.shape)) + list(x.shape)
    return remap(ctx, node, x, [[i % n for i in range(n * r)] for n, r in zip(in_shape, reps)])


def _expand(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x = a[0]
    out_shape = [int(s) for s in node.meta["val"].shape]
    if tuple(out_shape) == tuple(x.shape):
        return x
    if int(np.prod(out_shape)) == x.numel:  # only size-1 dims added in front: a view, nothing copied
        return _emit(ctx, node, "reshape", [x], {})
    in_shape = [1] * (len(out_shape) - len(x.shape)) + list(x.shape)
    return remap(ctx, node, x, [[0] * o if n == 1 else _identity(n) for n, o in zip(in_shape, out_shape)])


def _const_indices(t: Tensor, size: int) -> np.ndarray:
    v = np.asarray(t.data).astype(np.int64)
    return np.where(v < 0, v + size, v)


def _index_select(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, dim, index = a[0], int(a[1]) % len(a[0].shape), a[2]
    if index.is_constant:
        idx = _const_indices(index, x.shape[dim]).reshape(-1)
        return remap(ctx, node, x, [idx.tolist() if d == dim else _identity(n) for d, n in enumerate(x.shape)])
    if len(index.shape) > 1:
        raise McuError(f"index_select with a {len(index.shape)}-D index{user_source_line(node)}")
    return _select_runtime(ctx, node, x, dim, index)


def _select_runtime(ctx: Any, node: Node, x: Tensor, dim: int, index: Tensor) -> Tensor:
    if index.dtype != "int32":
        raise McuError(f"indices of dtype {index.dtype} are not supported (integers only){user_source_line(node)}")
    out = _out(node, x.dtype)
    ctx.ops.append(Op("index_select", [x, index], [out], {"dim": dim}, name=node.name, source=op_source(node)))
    return out


def _index(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    """x[..., i0, i1, ...] with index tensors on adjacent dims. Constant indices that form an outer
    product (index k varies along its own dim only, as reflect and replicate padding export them) are
    one remap; a single run-time 1-D index is an index_select."""
    x, indices = a[0], list(a[1])
    rank = len(x.shape)
    given = [i for i, t in enumerate(indices) if t is not None]
    if not given or given != list(range(given[0], given[-1] + 1)) or given[-1] >= rank:
        raise McuError(f"indexing with index tensors on dims {given} is not supported{user_source_line(node)}")
    tensors = [indices[i] for i in given]
    if not all(isinstance(t, Tensor) for t in tensors):
        raise McuError(f"indexing with {tensors} is not supported{user_source_line(node)}")
    if not all(t.is_constant for t in tensors):
        if len(tensors) == 1 and len(tensors[0].shape) == 1:
            return _select_runtime(ctx, node, x, given[0], tensors[0])
        raise McuError(f"indexing with several or multi-dimensional run-time index tensors is not supported"
                       f"{user_source_line(node)}", hint="use index_select or gather")
    k = len(tensors)
    shapes = [tuple(t.shape) for t in tensors]
    bshape = np.broadcast_shapes(*shapes)
    masks = [i for i in node.args[1] if isinstance(i, Node) and getattr(i.meta.get("val"), "dtype", None) == torch.bool]
    if masks or len(bshape) != k:
        raise McuError(f"indexing with index tensors of shapes {shapes} is not supported{user_source_line(node)}")
    tables: list[list[int]] = []
    for j, (d, t) in enumerate(zip(given, tensors)):
        full = (1,) * (k - len(t.shape)) + tuple(t.shape)
        if any(s != 1 for i, s in enumerate(full) if i != j):
            raise McuError(f"indexing with index tensors of shapes {shapes} (not an outer product) is not "
                           f"supported{user_source_line(node)}")
        idx = _const_indices(t, x.shape[d]).reshape(-1)
        tables.append(np.broadcast_to(idx, (bshape[j],)).tolist())
    out_tables = [_identity(n) for n in x.shape[:given[0]]] + tables + [_identity(n) for n in x.shape[given[-1] + 1:]]
    return remap(ctx, node, x, out_tables)


def _gather(ctx: Any, node: Node, a: list[Any]) -> Tensor:
    x, dim, index = a[0], int(a[1]) % len(a[0].shape), a[2]
    if (a[3] if len(a) > 3 else node.kwargs.get("sparse_grad", False)):
        raise McuError(f"gather with sparse_grad is not supported{user_source_line(node)}")
    if len(index.shape) != len(x.shape):
        raise McuError(f"gather with a {len(index.shape)}-D index of a {len(x.shape)}-D tensor{user_source_line(node)}")
    if index.is_constant:
        index = _int_const(ctx, node, "index", _const_indices(index, x.shape[dim]))
    elif index.dtype != "int32":
        raise McuError(f"indices of dtype {index.dtype} are not supported (integers only){user_source_line(node)}")
    out = _out(node, x.dtype)
    ctx.ops.append(Op("gather", [x, index], [out], {"dim": dim}, name=node.name, source=op_source(node)))
    return out


HANDLERS: dict[object, Handler] = {
    aten.upsample_nearest2d.vec: _upsample_nearest,
    aten.upsample_nearest2d.default: _upsample_nearest,
    aten.upsample_bilinear2d.vec: _upsample_bilinear,
    aten.upsample_bilinear2d.default: _upsample_bilinear,
    aten.upsample_linear1d.vec: _upsample_linear1d,
    aten.upsample_linear1d.default: _upsample_linear1d,
    aten.flip.default: _flip,
    aten.repeat.default: _repeat,
    aten.expand.default: _expand,
    aten.index_select.default: _index_select,
    aten.index.Tensor: _index,
    aten.gather.default: _gather,
}
