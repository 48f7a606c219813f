"""Graph rewrites before int8 annotation, so that attention quantizes op by op.

``F.scaled_dot_product_attention`` (which ``nn.MultiheadAttention`` calls when it need not return the
weights) is one node when the quantizer sees the graph and decomposes only later, after quantization,
into a float subgraph nothing annotated. Written out first as the product, the scaling, the softmax and the
second product, each piece is an op with an int8 kernel (``mcu_bmm_s8``, a table, ``mcu_softmax_s8``).

A mask known when the model is compiled (``attn_mask`` computed from the model's buffers, bool or an
additive float mask of zeros and minus infinity, ``key_padding_mask`` merged into it by
``nn.MultiheadAttention``, ``is_causal=True``, or ``torch.where(kept, scores, -inf)`` written by hand) is written as ``masked_fill(scores, hidden, -inf)`` before
the softmax, with ``hidden`` one constant bool tensor: the quantizer reads the pair as one softmax that skips
the hidden positions (mcu/passes/quantized/attention.py folds it into the int8 softmax), so no mask op is
left to run in fp32. A mask computed from the model's inputs, a float mask with other values (a bias, not a
mask) and a mask that hides a whole row (torch's output is NaN there) keep the attention whole; with a mask from
the inputs the ops from the mask to the softmax run in fp32 (:func:`runtime_mask_islands`; a whole
``scaled_dot_product_attention`` when it keeps its mask), and the projections around them stay int8.

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


# An additive mask entry at or below this hides its position: exp of it underflows to 0 in float32 whatever the
# scores are (a mask written with -1e9 or torch.finfo(float).min instead of -inf).
_HIDDEN = -1.0e4


def _constant_value(gm: GraphModule, node: Any) -> torch.Tensor | None:
    """The value of ``node`` when it is computed from the module's buffers and parameters alone (a mask the
    model builds from its buffers), else None."""
    if not isinstance(node, Node):
        return None
    order: list[Node] = []
    seen: set[Node] = set()

    def visit(n: Node) -> bool:
        if n in seen:
            return True
        seen.add(n)
        if n.op == "placeholder" or n.op not in ("get_attr", "call_function"):
            return False
        if not all(visit(m) for m in n.all_input_nodes):
            return False
        order.append(n)
        return True

    if not visit(node):
        return None
    env: dict[Node, Any] = {}
    for n in order:
        if n.op == "get_attr":
            obj: Any = gm
            for part in str(n.target).split("."):
                obj = getattr(obj, part)
            env[n] = obj.detach().clone() if isinstance(obj, torch.Tensor) else obj
        else:
            args = torch.fx.node.map_arg(n.args, lambda m: env[m])
            kwargs = torch.fx.node.map_arg(n.kwargs, lambda m: env[m])
            with torch.no_grad():
                env[n] = n.target(*args, **kwargs)
    value = env[node]
    return value if isinstance(value, torch.Tensor) else None


def hidden_positions(mask: torch.Tensor | None, causal: bool, scores: tuple[int, ...]) -> torch.Tensor | None:
    """The positions of the scores (shape ``scores``, ``[..., L, S]``) a constant mask hides, as a bool tensor
    broadcast to that shape; None when the mask cannot be folded into the softmax (a float mask with values
    other than 0 and minus infinity, or a row with every position hidden)."""
    rows, cols = scores[-2], scores[-1]
    hidden = torch.zeros(scores, dtype=torch.bool)
    if causal:
        hidden |= torch.ones(rows, cols, dtype=torch.bool).tril().logical_not()
    if mask is not None:
        if mask.dtype == torch.bool:
            hidden |= ~mask  # True: takes part in attention
        else:
            m = mask.to(torch.float64)
            if not bool(((m == 0.0) | (m <= _HIDDEN)).all()):
                return None
            hidden |= m <= _HIDDEN
    if bool(hidden.all(dim=-1).any()):
        return None
    return hidden


def _drop_dead(gm: GraphModule, node: Any) -> None:
    """Erase ``node`` and what only it used, when nothing reads it any more (a mask built from buffers)."""
    stack = [node] if isinstance(node, Node) else []
    while stack:
        n = stack.pop()
        if n.users or n.op not in ("call_function", "get_attr"):
            continue
        inputs = list(n.all_input_nodes)
        gm.graph.erase_node(n)
        stack.extend(inputs)


def _mask_node(gm: GraphModule, like: Node, hidden: torch.Tensor, count: int) -> Node:
    name = f"_mcu_attention_hidden_{count}"
    gm.register_buffer(name, hidden)
    with gm.graph.inserting_before(like):
        node = gm.graph.get_attr(name)
    mode = detect_fake_mode([v for v in (_val(a) for a in like.args) if isinstance(v, torch.Tensor)])
    node.meta["val"] = mode.from_tensor(hidden) if mode is not None else hidden
    return node


def decompose_attention(gm: GraphModule) -> int:
    """Rewrite each dropout-free ``scaled_dot_product_attention`` as ``softmax(q @ k^T * scale) @ v``, with
    a constant mask as ``masked_fill(.., hidden, -inf)`` before the softmax; returns how many. One whose mask
    is not constant (computed from the inputs) or not a mask (:func:`hidden_positions`) stays whole, fp32."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not SDPA:
            continue
        a = _sdpa_args(node)
        q, k, v = a["query"], a["key"], a["value"]
        if a.get("dropout_p", 0.0) or a.get("enable_gqa"):
            continue
        qv, kv = _val(q), _val(k)
        if not isinstance(qv, torch.Tensor) or not isinstance(kv, torch.Tensor) or qv.shape[:-2] != kv.shape[:-2]:
            continue
        hidden = None
        mask_arg = a.get("attn_mask")
        if mask_arg is not None or a.get("is_causal"):
            mask = _constant_value(gm, mask_arg) if mask_arg is not None else None
            if mask_arg is not None and mask is None:
                continue
            hidden = hidden_positions(mask, bool(a.get("is_causal")), (*qv.shape[:-1], kv.shape[-2]))
            if hidden is None:
                continue
            if not bool(hidden.any()):
                hidden = None  # a mask that hides nothing: the plain softmax
        scale = a.get("scale")
        scale = 1.0 / math.sqrt(qv.shape[-1]) if scale is None else float(scale)
        k_t = _add(gm, node, aten.transpose.int, (k, -2, -1))
        scores = _add(gm, node, aten.matmul.default, (q, k_t))
        scaled = _add(gm, node, aten.mul.Tensor, (scores, scale))
        if hidden is not None:
            scaled = _add(gm, node, aten.masked_fill.Scalar,
                          (scaled, _mask_node(gm, node, hidden, count), float("-inf")))
        weights = _add(gm, node, aten.softmax.int, (scaled, -1))
        out = _add(gm, node, aten.matmul.default, (weights, v))
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        _drop_dead(gm, mask_arg)
        count += 1
    return count


_MASK_FILL = (aten.masked_fill.Scalar, aten.masked_fill_.Scalar)
_WHERE = (aten.where.ScalarOther, aten.where.ScalarSelf)
# the ops that write a number where a mask says (the fills an attention mask is made with)
FILLS = {*_MASK_FILL, *_WHERE, aten.full.default, aten.fill_.Scalar}


def _masked_scores(gm: GraphModule, x: Node) -> tuple[Node | tuple[Node, Node], torch.Tensor, Any] | None:
    """(scores, mask value, the mask's node) when a softmax's input ``x`` adds a constant mask to the scores:
    ``baddbmm(mask, a, b)`` (nn.MultiheadAttention when it returns the weights; the scores are then the
    operands ``(a, b)`` of the product still to be written), ``scores + mask`` or
    ``scores.masked_fill(mask, -inf)``, ``torch.where(kept, scores, -inf)`` or ``torch.where(hidden, -inf, scores)``;
    the mask as a bool tensor of hidden positions or an additive float one."""
    if x.target is aten.baddbmm.default and len(x.args) == 3 and not x.kwargs:
        mask = _constant_value(gm, x.args[0])
        if mask is not None and mask.dtype != torch.bool:
            return (x.args[1], x.args[2]), mask, x.args[0]
    if x.target is aten.add.Tensor and len(x.args) == 2 and not x.kwargs:
        for i in (0, 1):
            mask = _constant_value(gm, x.args[i])
            if mask is not None and mask.dtype != torch.bool and isinstance(x.args[1 - i], Node) and \
                    _constant_value(gm, x.args[1 - i]) is None:
                return x.args[1 - i], mask, x.args[i]
    if x.target in _WHERE and len(x.args) == 3:  # where(kept, scores, -inf) or where(hidden, -inf, scores)
        at = 1 if x.target is aten.where.ScalarOther else 2
        fill = x.args[3 - at]
        cond = _constant_value(gm, x.args[0])
        if isinstance(fill, (int, float)) and fill <= _HIDDEN and isinstance(x.args[at], Node) and \
                cond is not None and cond.dtype == torch.bool and _constant_value(gm, x.args[at]) is None:
            return x.args[at], ~cond if at == 1 else cond, x.args[0]
    if x.target in _MASK_FILL and len(x.args) == 3 and isinstance(x.args[2], (int, float)) and \
            x.args[2] <= _HIDDEN and isinstance(x.args[0], Node):
        mask = _constant_value(gm, x.args[1])
        if mask is not None and mask.dtype == torch.bool and _constant_value(gm, x.args[0]) is None:
            return x.args[0], mask, x.args[1]
    return None


def mask_softmax_inputs(gm: GraphModule) -> int:
    """A softmax over the last axis of scores plus a constant mask, written by hand or by
    nn.MultiheadAttention (:func:`_masked_scores`), becomes ``masked_fill(scores, hidden, -inf)`` on one
    constant bool tensor, as :func:`decompose_attention` writes it; returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in (aten.softmax.int, aten._softmax.default):
            continue
        x = node.args[0]
        xv = _val(x)
        if not isinstance(x, Node) or not isinstance(xv, torch.Tensor) or int(node.args[1]) % xv.dim() != xv.dim() - 1:
            continue
        if x.target is aten.masked_fill.Scalar and x.args[2] == float("-inf") and \
                isinstance(x.args[1], Node) and x.args[1].op == "get_attr":
            continue  # already in the form the quantizer reads
        found = _masked_scores(gm, x)
        if found is None:
            continue
        scores, mask, mask_node = found
        if mask.dtype == torch.bool:
            hidden = torch.broadcast_to(mask, tuple(xv.shape)).clone()
        else:
            hidden = hidden_positions(mask, False, tuple(xv.shape))
        if hidden is None or not bool(hidden.any()) or bool(hidden.all(dim=-1).any()):
            continue  # not a mask, a mask that hides nothing (left as it is), or one that hides a whole row
        if isinstance(scores, tuple):
            scores = _add(gm, x, aten.bmm.default, scores)
        filled = _add(gm, node, aten.masked_fill.Scalar,
                      (scores, _mask_node(gm, node, hidden, 1000 + count), float("-inf")))
        node.replace_input_with(x, filled)
        if not x.users:
            gm.graph.erase_node(x)
        _drop_dead(gm, mask_node)
        count += 1
    return count


# the ops a mask computed from the inputs passes through to reach the scores: views, copies and the sum
MASK_PATH = {aten.view.default, aten.reshape.default, aten.expand.default, aten.unsqueeze.default,
             aten.squeeze.dim, aten.squeeze.dims, aten.transpose.int, aten.permute.default, aten.contiguous.default,
             aten.clone.default, aten._to_copy.default, aten.to.dtype, aten.repeat.default, aten.add.Tensor,
             aten.baddbmm.default, *_MASK_FILL, *_WHERE}
_ATTENTION_ENDS = {aten.softmax.int, aten._softmax.default, SDPA}


def _fills_hidden(node: Node) -> bool:
    """Whether ``node`` writes a hiding value (minus infinity, -1e9) under a condition: a masked_fill or a where."""
    if node.target in _MASK_FILL:
        fill = node.args[2] if len(node.args) > 2 else None
    elif node.target in _WHERE and len(node.args) == 3:
        fill = node.args[2] if node.target is aten.where.ScalarOther else node.args[1]
    else:
        return False
    return isinstance(fill, (int, float)) and not isinstance(fill, bool) and fill <= _HIDDEN


def _mask_reach(seed: Node) -> set[Node] | None:
    """The ops ``seed``'s values reach through MASK_PATH, with the softmax (or SDPA) they end in as its scores (or
    its mask); None when they reach anything else or no such end."""
    found, stack, ends = {seed}, [seed], 0
    while stack:
        node = stack.pop()
        for user in node.users:
            if user in found:
                continue
            if user.target in _ATTENTION_ENDS:
                read = _sdpa_args(user).get("attn_mask") if user.target is SDPA else user.args[0]
                if read is not node:
                    return None  # read as anything but the mask or the scores
                ends += 1
                found.add(user)
            elif user.op == "call_function" and user.target in MASK_PATH:
                found.add(user)
                stack.append(user)
            else:
                return None  # the infinite values reach an op that is not attention's
    return found if ends else None


def runtime_mask_islands(gm: GraphModule) -> set[Node]:
    """The ops of each attention whose mask is computed from the model's inputs (``key_padding_mask`` or
    ``attn_mask`` from an input): the fill that writes minus infinity, the views and sums that carry it to the
    scores, and the softmax (or the whole ``scaled_dot_product_attention``) that reads them. They run in fp32:
    their values are infinite where the mask hides, which no int8 grid holds, and which mask hides is known only
    at run time. A fill whose values reach anything else is not an attention mask: left to the quantizer."""
    islands: set[Node] = set()
    for seed in gm.graph.nodes:
        if seed.op != "call_function" or seed in islands or not _fills_hidden(seed) or \
                _constant_value(gm, seed.args[1] if seed.target in _MASK_FILL else seed.args[0]) is not None:
            continue
        islands |= _mask_reach(seed) or set()
    return islands


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
    if decompose_attention(gm) + mask_softmax_inputs(gm) + split_views(gm):
        gm.graph.lint()
        gm.recompile()
    return gm
