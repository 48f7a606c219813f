"""Turn the quantize/dequantize graph from pt2e into int8 ops with integer parameters.

Pattern: every float input of an op comes from a ``dequantize`` of an int8
tensor, and its only reader is a ``quantize``. Such an op becomes its int8
form, reading the int8 tensors directly and writing the quantize's output,
with everything the kernel needs precomputed by the converter of its op family
(one module per family in this package): Q31 multipliers and shifts (per
output channel for convolution and linear layers), offsets, clamp bounds in
the int8 domain, int32 biases, lookup tables. Ops that do not
match, or have no int8 kernel, stay fp32 between dequantize and quantize, and
are listed in ``graph.fallbacks`` with the reason. Finally the model boundary
becomes int8: a leading quantize and a trailing dequantize are removed, so
the generated API takes and returns int8 tensors.
"""

from __future__ import annotations

from typing import Callable

from mcu.ir import Graph, Op, Tensor
from mcu.passes.quantized import conv, elementwise, movement, norm, pool, recurrent, resample, select
from mcu.passes.quantized.attention import fold_scaling_into_bmm
from mcu.passes.quantized.common import same_quant as _same_quant
from mcu.passes.quantized.elementwise import constant_operand, constant_operand_s16, requantize_op
from mcu.passes.quantized.movement import constant_on_grid
from mcu.passes.quantized.select import keeps_as_is

Converter = Callable[[Graph, Op, list[Tensor], Tensor], "Op | str"]


def _custom(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    reg = op.attrs["custom"]
    if reg.int8 is None:
        return f"custom op {reg.name} registers no int8 kernel"
    return Op("custom", ins, [out], dict(op.attrs), op.name, op.source)


def _extra_inputs_kept(kind: str) -> bool:
    """Ops whose inputs after the first are indices or tables, not quantized values."""
    return kind in resample.KEEPS_EXTRA_INPUTS


# Every op family's converters: the family's module in this package computes the integer parameters.
CONVERTERS: dict[str, Converter] = {
    "custom": _custom,
    **conv.CONVERTERS, **pool.CONVERTERS, **elementwise.CONVERTERS, **norm.CONVERTERS, **movement.CONVERTERS,
    **select.CONVERTERS, **resample.CONVERTERS, **recurrent.CONVERTERS,
}
# Kinds whose converter quantizes their float constants (weights, biases, tables, slopes) itself.
OWN_CONSTANTS = {*conv.WEIGHTED, *elementwise.OWN_CONSTANTS, *norm.OWN_CONSTANTS, *select.OWN_CONSTANTS,
                 *recurrent.KINDS}


def _dequantized_source(graph: Graph, t: Tensor) -> Tensor | None:
    producer = graph.producer(t)
    if producer is not None and producer.kind == "dequantize":
        return producer.inputs[0]
    return None


def lower_quantized(graph: Graph) -> Graph:
    if not any(op.kind in ("quantize", "dequantize") for op in graph.ops):
        return graph  # an fp32 graph
    elementwise.scalars_to_unary(graph)  # scalar arithmetic as a table lookup
    movement.permute_before_dequantize(graph)
    movement.quantize_before_moves(graph)
    norm.argmax_on_codes(graph)

    elementwise.quantize_between_bounds(graph)
    fallbacks: list[tuple[str, str]] = []
    for op in list(graph.ops):
        if op.kind in ("quantize", "dequantize") or op.output.dtype != "float32" or op not in graph.ops:
            continue  # (an op already converted as part of a chain is no longer in the graph)
        reason = _try_convert(graph, op)
        if reason is not None:
            fallbacks.append((f"{op.kind} {op.name}" + (f" ({op.source})" if op.source else ""), reason))
    _fold_dequantize_quantize(graph)
    _remove_dead(graph)

    fold_scaling_into_bmm(graph)
    _int8_boundary(graph)
    graph.fallbacks = fallbacks
    return graph


# remap: reflect/replicate padding, one index op a dim; concat: torch.stack, a cat then a view;
# the average pools: adaptive_avg_pool1d, an unsqueeze, the pool and a squeeze; upsample_linear1d alike
_MOVES = {"slice", "reshape", "permute", "pad", "remap", "concat", "adaptive_avg_pool", "avg_pool2d",
          "resize_bilinear"}


def _convert_move_chain(graph: Graph, op: Op) -> bool:
    """dequantize -> slice -> reshape -> quantize (a select): data movement only, one quantization
    shared along the chain, so every op of it becomes int8 at once. The chain may start with a concat
    (torch.stack: cat then view), whose inputs then all share that quantization."""
    chain = [op]
    while True:
        users = graph.users(chain[-1].output)
        if len(users) != 1 or chain[-1].output.is_output:
            return False
        if users[0].kind == "quantize":
            q = users[0]
            break
        if users[0].kind not in _MOVES or users[0].kind == "concat":
            return False
        chain.append(users[0])
    firsts = op.inputs if op.kind == "concat" else op.inputs[:1]
    srcs = [_dequantized_source(graph, t) for t in firsts]
    if len(chain) < 2 or any(s is None or t.is_constant or not _same_quant(s, q.output) for s, t in zip(srcs, firsts)):
        return False
    current: list[Tensor] = [s for s in srcs if s is not None]
    for i, link in enumerate(chain):
        last = i == len(chain) - 1
        out = q.output if last else Tensor(name=link.output.name, shape=link.output.shape, dtype="int8",
                                           quant=q.output.quant)
        # (tables stay; the other links cannot change quantization, so their converter checks it is shared)
        ins = [*current, *link.inputs[1:]] if _extra_inputs_kept(link.kind) else current
        converted = CONVERTERS[link.kind](graph, link, ins, out)
        if isinstance(converted, str):
            return False
        graph.ops[graph.ops.index(link)] = converted
        current = [out]
    graph.ops.remove(q)
    return True


def _try_convert(graph: Graph, op: Op) -> str | None:
    if op.kind not in CONVERTERS:
        return "no int8 kernel"
    if op.kind in _MOVES and _convert_move_chain(graph, op):
        return None
    users = graph.users(op.output)
    if len(users) != 1 or users[0].kind != "quantize" or op.output.is_output:
        return "its output is not quantized"
    ins: list[Tensor] = []

    for t in op.inputs:
        if keeps_as_is(op, t):
            ins.append(t)
            continue
        if t is not op.inputs[0] and _extra_inputs_kept(op.kind):
            ins.append(t)  # indices or tables: the converter keeps them
            continue
        if t.is_constant:
            if op.kind in OWN_CONSTANTS and t is not op.inputs[0]:
                continue  # weights and bias are converted by the op's own converter

            # a concatenated constant (a learned class token) takes the grid the output shares with the inputs
            qconst = (constant_on_grid(t, users[0].output.quant) if op.kind == "concat"
                      else constant_operand_s16(op, t) if users[0].output.dtype == "int16"
                      else constant_operand(op, t))
            if qconst is None:
                return "an operand is a float constant"
            ins.append(qconst)
            continue
        src = _dequantized_source(graph, t)
        if src is None:
            return "its input is not quantized"
        ins.append(src)
    q = users[0]
    result = CONVERTERS[op.kind](graph, op, ins, q.output)
    if isinstance(result, str):
        return result
    if not q.output.is_input and not q.output.is_output:
        q.output.name = op.name  # the int8 tensor is what this op computes: name it after the op
    index = graph.ops.index(op)
    graph.ops[index] = result
    graph.ops.remove(q)
    return None


def _fold_dequantize_quantize(graph: Graph) -> None:
    """dequantize -> quantize becomes nothing (same parameters) or one requantize."""
    for q in [op for op in graph.ops if op.kind == "quantize"]:
        src = _dequantized_source(graph, q.inputs[0])
        if src is None or q not in graph.ops:
            continue
        if _same_quant(src, q.output) and not q.output.is_output:
            graph.replace_uses(q.output, src)
            graph.ops.remove(q)
        else:
            graph.ops[graph.ops.index(q)] = requantize_op(q.name, src, q.output, source=q.source)


def _remove_dead(graph: Graph) -> None:
    changed = True
    while changed:
        changed = False
        for op in list(graph.ops):
            if op.kind in ("dequantize", "quantize") and not graph.users(op.output) and not op.output.is_output:
                graph.ops.remove(op)
                changed = True


def _int8_boundary(graph: Graph) -> None:
    for i, t in enumerate(list(graph.inputs)):
        users = graph.users(t)
        if len(users) == 1 and users[0].kind == "quantize":
            q = users[0]
            q.output.is_input = True
            q.output.name = t.name  # the int8 input keeps the model's input name
            graph.inputs[i] = q.output
            graph.ops.remove(q)
    for i, t in enumerate(list(graph.outputs)):
        producer = graph.producer(t)
        if producer is not None and producer.kind == "dequantize" and len(graph.users(t)) == 0:
            src = producer.inputs[0]
            src.is_output = True
            graph.outputs[i] = src
            if not graph.users(producer.output) or all(o is not producer.output for o in graph.outputs):
                graph.ops.remove(producer)
