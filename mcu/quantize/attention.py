"""Graph rewrites before int8 annotation, so that attention quantizes op by op.

``F.scaled_dot_product_attention`` (which ``nn.MultiheadAttention`` calls when it need not return the
weights) is one node when the quantizer sees the graph and decomposes only later, after quantization,
into a float subgraph nothing annotated. Written out first as the product, the scaling, the softmax and the
second product, each piece is an op with an int8 kernel (``mcu_bmm_s8``, a table, ``mcu_softmax_s8``).

``chunk``, ``split`` and ``unbind`` return tuples, which a quantization annotation cannot describe, so the
query, key and value split from one projection were each quantized on their own. As one slice (or select)
per part they share their input's quantization like any other view.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch._guards import detect_fake_mode

aten = torch.ops.aten

SDPA = aten.scaled_dot_product_attention.default
_SPLITS = {aten.chunk.default, aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int,
           aten.tensor_split.sections}
# the node metadata a rewritten op keeps from the op it replaces: user source line and module path
_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "seq_nr")


def _val(v: Any) -> Any:
    if isinstance(v, Node):
        return v.meta.get("val")
    if isinstance(v, (list, tuple)):
        return type(v)(_val(x) for x in v)
    return v


def _add(gm: GraphModule, like: Node, target: Any, args: tuple) -> Node:
    """A new node before ``like`` with its metadata and an output value computed on the fake inputs."""
    vals = _val(args)
    mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    with gm.graph.inserting_before(like):
        node = gm.graph.call_function(target, args)
    for key in _META:
        if key in like.meta:
            node.meta[key] = like.meta[key]
    if mode is not None:
        with mode:
            node.meta["val"] = target(*vals)
    else:
        node.meta["val"] = target(*vals)
    return node


def _sdpa_args(node: Node) -> dict[str, Any]:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
    args = dict(zip(names, node.args))
    for k, v in node.kwargs.items():
        args[k] = v
    return args


def decompose_attention(gm: GraphModule) -> int:
    """Rewrite each unmasked, dropout-free ``scaled_dot_product_attention`` as
    ``softmax(q @ k^T * scale) @ v``; returns how many. A masked one (attn_mask, is_causal) stays whole:
    an infinite mask value has no int8 code, so that attention stays fp32 (exact, and named)."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not SDPA:
            continue
        a = _sdpa_args(node)
        q, k, v = a["query"], a["key"], a["value"]
        if a.get("attn_mask") is not None or a.get("is_causal") or a.get("dropout_p", 0.0) or \
                a.get("enable_gqa"):
            continue
        qv, kv = _val(q), _val(k)
        if not isinstance(qv, torch.Tensor) or not isinstance(kv, torch.Tensor) or qv.shape[:-2] != kv.shape[:-2]:
            continue
        scale = a.get("scale")
        scale = 1.0 / math.sqrt(qv.shape[-1]) if scale is None else float(scale)
        k_t = _add(gm, node, aten.transpose.int, (k, -2, -1))
        scores = _add(gm, node, aten.matmul.default, (q, k_t))
        scaled = _add(gm, node, aten.mul.Tensor, (scores, scale))
        weights = _add(gm, node, aten.softmax.int, (scaled, -1))
        out = _add(gm, node, aten.matmul.default, (weights, v))
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        count += 1
    return count


def _parts(node: Node) -> list[tuple[int, int]] | None:
    """(start, end) along the split dim of each output of a chunk/split/tensor_split."""
    x = _val(node.args[0])
    outs = node.meta.get("val")
    if not isinstance(x, torch.Tensor) or not isinstance(outs, (list, tuple)):
        return None
    dim = _split_dim(node)
    spans, start = [], 0
    for o in outs:
        size = int(o.shape[dim])
        spans.append((start, start + size))
        start += size
    return spans if start == int(x.shape[dim]) else None


def _split_dim(node: Node) -> int:
    x = _val(node.args[0])
    default = 0
    if node.target is aten.unbind.int:
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", default)
    else:
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", default)
    return int(dim) % x.dim()


def split_views(gm: GraphModule) -> int:
    """Each ``getitem`` of a chunk, split or unbind becomes one slice (a select for unbind) of the input;
    returns how many splits were rewritten."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SPLITS:
            continue
        users = list(node.users)
        if not users or any(u.target is not operator.getitem for u in users):
            continue
        x, dim = node.args[0], _split_dim(node)
        spans = None if node.target is aten.unbind.int else _parts(node)
        if spans is None and node.target is not aten.unbind.int:
            continue
        for u in users:
            i = int(u.args[1])
            if node.target is aten.unbind.int:
                part = _add(gm, u, aten.select.int, (x, dim, i))
            else:
                part = _add(gm, u, aten.slice.Tensor, (x, dim, spans[i][0], spans[i][1]))
            u.replace_all_uses_with(part)
            gm.graph.erase_node(u)
        gm.graph.erase_node(node)
        count += 1
    return count


def prepare_attention(gm: GraphModule) -> GraphModule:
    """Both rewrites, then the module recompiled (a no-op on a graph without attention or splits)."""
    if decompose_attention(gm) + split_views(gm):
        gm.graph.lint()
        gm.recompile()
    return gm
