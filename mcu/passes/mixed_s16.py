"""int16 activations for some layers of a static int8 graph (``--quantize mixed``): a run of convolution,
depthwise or linear layers (int8 weights as lowered) runs on w8a16's 16x8 kernels, with a border
(mcu_requantize_s8_s16, mcu_requantize_s16_s8) wherever an int8 tensor meets it.

A widened layer's int16 tensors take the range its int8 tensors were calibrated to, at 2^8 times the
resolution: scale s8 * max(127 - zp, zp + 128) / 32767, zero point 0. Its constants become the 16x8 ones
(mcu/reference/s16.py, s16_layer_params) from its float bias and its weights' scales, as the w8a16 lowering
derives them. A tensor between two widened layers, read by nothing else, stays int16: that is where the
precision is gained; a widened layer with int8 on both sides only rounds twice."""

from __future__ import annotations

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.passes.quantized.common import int_const
from mcu.passes.quantized.elementwise import requantize_op
from mcu.reference import derive, s16

A16 = "a16"  # int8 weights, int16 activations
BORDERS = ("mcu_requantize_s8_s16", "mcu_requantize_s16_s8")
# Instructions per multiply-accumulate of the portable 16x8 kernels relative to int8's (mcu_linear_s16 ran
# 3.9-4.1 per MAC where mcu/passes/mixed.py counts int8 at 1.24), and per element of a border (37-38), from
# `mcu profile --board mps2-an505 bench/models/outlier_mlp.py --quantize mixed --accuracy-budget 0`:
# estimates to rank configurations, not measurements of one.
A16_RELATIVE_COST = 3.2
BORDER_PER_ELEMENT = 38


def int16_scale(t: Tensor) -> float:
    """The int16 scale that spans int8 tensor ``t``'s calibrated range."""
    assert t.quant is not None
    s, zp = float(t.quant.scale[0]), int(t.quant.zero_point[0])
    return s * max(127 - zp, zp + 128) / s16.INT16_MAX


def _wide(t: Tensor, name: str) -> Tensor:
    return Tensor(name=name, shape=t.shape, dtype="int16", dim_order=t.dim_order,
                  quant=QuantParams(scale=(int16_scale(t),), zero_point=(0,), qmin=s16.INT16_MIN, qmax=s16.INT16_MAX))


def feasible(op: Op) -> bool:
    """Whether ``op``'s 16x8 requantization exists (a real multiplier below 2^14, as s16_layer_params wants)."""
    x, w = op.inputs[0], op.inputs[1]
    if x.dtype != "int8" or op.output.dtype != "int8" or w.quant is None or op.attrs.get("alias"):
        return False
    try:
        s16.s16_layer_params(int16_scale(x), w.quant.scale, int16_scale(op.output))
    except ValueError:
        return False
    return True


def _readers(graph: Graph) -> dict[int, list[Op]]:
    out: dict[int, list[Op]] = {}
    for op in graph.ops:
        for t in op.inputs:
            out.setdefault(id(t.base()), []).append(op)
    return out


def widen(graph: Graph, chosen: set[int]) -> None:
    """Runs ops ``chosen`` (indices into ``graph.ops``; each ``feasible``) at int16 activations, in place."""
    ops = [graph.ops[i] for i in sorted(chosen)]
    wide_ops = {id(op) for op in ops}
    readers = _readers(graph)
    outputs = {id(t.base()) for t in graph.outputs}
    # int16 end to end: made by a widened layer and read only by widened layers (as their input)
    inner = {id(op.output) for op in ops
             if id(op.output) not in outputs and readers.get(id(op.output))
             and all(id(r) in wide_ops and r.inputs[0] is op.output and op.output not in r.inputs[1:]
                     for r in readers[id(op.output)])}
    new_ops: list[Op] = []
    for op in graph.ops:
        if id(op) not in wide_ops:
            new_ops.append(op)
            continue
        x, y = op.inputs[0], op.output
        if id(x) in inner:
            x16 = x  # retyped when its producer was widened
        else:
            x16 = _wide(x, f"{op.name}_in16")
            new_ops.append(requantize_op(f"{op.name}_in16", x, x16, s16.INT16_MIN, s16.INT16_MAX, op.source))
        y16 = _wide(y, f"{op.name}_out16")
        if id(y) in inner:
            y.dtype, y.quant = y16.dtype, y16.quant
            y16 = y
        w = op.inputs[1]
        assert w.quant is not None
        p = s16.s16_layer_params(derive.scale_zp(x16)[0], w.quant.scale, derive.scale_zp(y16)[0], op.attrs["bias_real"])
        assert p.bias is not None
        op.inputs[0] = x16
        op.inputs[2:5] = [int_const(op.inputs[2].name, p.bias, "int64"), int_const(op.inputs[3].name, p.multiplier),
                          int_const(op.inputs[4].name, p.shift)]
        op.outputs[0] = y16
        op.attrs.update(input_offset=0, output_offset=0)
        op.attrs["act_min"], op.attrs["act_max"] = derive.act_range(op)
        new_ops.append(op)
        if y16 is not y:
            new_ops.append(requantize_op(f"{op.name}_out8", y16, y, -128, 127, op.source))
    graph.ops = new_ops
