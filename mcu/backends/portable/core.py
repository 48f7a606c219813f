"""The portable backend: our own C kernels (runtime_c/kernels), the default and the fallback for every op.

Each IR op becomes one call of a C kernel: :data:`EMITTERS`, keyed by (op kind, output dtype), builds
the :class:`~mcu.backends.calls.KernelCall` (the C function, its parameter struct as an initializer computed
from physical (memory-order) shapes, the argument expressions and the kernel sources it needs).
The support table is that key set, so what this backend declares and what it can emit cannot drift.
int8 convolution, depthwise and fully connected layers pick among kernels with different contracts
through the variant table (mcu/backends/portable/variants.py); each kernel's architecture paths (plain C,
DSP, Helium) are chosen in C by the board's ``-mcpu``, so the same call serves every core and every
program file.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar

from mcu.backends.base import Backend, Context, Rule
from mcu.backends.portable.common import binary as _binary
from mcu.backends.portable.common import binary_s8 as _binary_s8
from mcu.backends.portable.common import conv2d as _conv2d
from mcu.backends.portable.common import slice_call as _slice
from mcu.backends.portable.conv import EMITTERS as CONV
from mcu.backends.portable.elementwise import EMITTERS as MORE
from mcu.backends.portable.islands import emitters
from mcu.backends.portable.recurrent import EMITTERS as RECURRENT
from mcu.backends.portable.resample import EMITTERS as RESAMPLE
from mcu.backends.portable.variants import select_variant
from mcu.backends.calls import (SCRATCH, KernelCall, Ref, act_bounds, at_source, bound, conv_params_s8, offsets,
                       physical_perm, quant_locals, quant_operands, shape4, split_at)
from mcu.emit.cvalues import c_float
from mcu.errors import McuError
from mcu.ir import DTYPE_BYTES, Op

Emitter = Callable[[Op, Ref], KernelCall]


def _linear(op: Op, ref: Ref) -> KernelCall:
    x, w = op.inputs[0], op.inputs[1]
    b = op.inputs[2] if len(op.inputs) > 2 else None
    out_f, in_f = w.shape
    params = {"batch": x.numel // in_f, "in_features": in_f, "out_features": out_f, **act_bounds(op)}
    return KernelCall("mcu_linear_f32", ["&params", ref(x), ref(w), ref(b) if b is not None else "NULL",
                                         ref(op.output)],
                      ["mcu_linear_f32.c"], "mcu_linear_f32_params", params, operands=[x, w, b, op.output])


def _linear_w8(op: Op, ref: Ref) -> KernelCall:
    x, w, scale, b = op.inputs
    out_f, in_f = w.shape
    params = {"batch": x.numel // in_f, "in_features": in_f, "out_features": out_f, **act_bounds(op)}
    return KernelCall("mcu_linear_w8_f32", ["&params", ref(x), ref(w), ref(scale), ref(b), ref(op.output)],
                      ["mcu_linear_w8_f32.c"], "mcu_linear_f32_params", params,
                      operands=[x, w, scale, b, op.output])


def _linear_dyn(op: Op, ref: Ref) -> KernelCall:
    x, w, scale, b = op.inputs
    out_f, in_f = w.shape
    params = {"batch": x.numel // in_f, "in_features": in_f, "out_features": out_f, **act_bounds(op)}
    assert ref.scratch is not None, "dynamic quantization needs its planned scratch buffer"
    return KernelCall("mcu_linear_dyn_s8", ["&ctx", "&params", ref(x), ref(w), ref(scale), ref(b), ref(op.output)],
                      ["mcu_linear_dyn_s8.c"], "mcu_linear_f32_params", params,
                      locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, x, w, scale, b, op.output])


def _pool(function: str, source: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a = op.attrs
        params = {
            "input": shape4(op.inputs[0]), "output": shape4(op.output),
            "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1],
            "stride_h": a["stride"][0], "stride_w": a["stride"][1],
            "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "pad_bottom": a["padding"][0], "pad_right": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
            "count_include_pad": int(a.get("count_include_pad", True)),
            "divisor_override": int(a.get("divisor_override", 0)),
            **act_bounds(op),
        }
        return KernelCall(function, ["&params", ref(op.inputs[0]), ref(op.output)], [source],
                          "mcu_pool2d_f32_params", params, operands=[op.inputs[0], op.output])
    return emit


def _mean_hw(op: Op, ref: Ref) -> KernelCall:
    return KernelCall("mcu_mean_hw_f32", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_mean_hw_f32.c"],
                      "mcu_shape4", shape4(op.inputs[0]), operands=[op.inputs[0], op.output])


def _clamp(op: Op, ref: Ref) -> KernelCall:
    lo, hi = op.attrs["min"], op.attrs["max"]
    return KernelCall("mcu_clamp_f32", [str(op.output.numel), c_float(lo, -1), c_float(hi, +1),
                                        ref(op.inputs[0]), ref(op.output)], ["mcu_clamp_f32.c"],
                      operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, bound(lo, -1), bound(hi, +1)])


def _unary(name: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        return KernelCall(f"mcu_{name}_f32", [str(op.output.numel), ref(op.inputs[0]), ref(op.output)],
                          [f"mcu_{name}_f32.c"], operands=[op.inputs[0], op.output], scalars=[op.output.numel])
    return emit


def _softmax(op: Op, ref: Ref) -> KernelCall:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    return KernelCall("mcu_softmax_f32", [str(outer), str(axis), str(inner), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_softmax_f32.c"], operands=[op.inputs[0], op.output], scalars=[outer, axis, inner])


def _batch_norm(op: Op, ref: Ref) -> KernelCall:
    x, scale, shift = op.inputs
    outer, channels, inner = split_at(x, 1)
    return KernelCall("mcu_batch_norm_f32", [str(outer), str(channels), str(inner), ref(scale), ref(shift),
                                             ref(x), ref(op.output)], ["mcu_batch_norm_f32.c"],
                      operands=[scale, shift, x, op.output], scalars=[outer, channels, inner])


def _permute_call(op: Op, ref: Ref, logical_perm: tuple[int, ...]) -> KernelCall:
    src, out = op.inputs[0], op.output
    rank = len(src.shape)
    if rank > 6:
        raise McuError(f"permute of a rank-{rank} tensor is not supported (at most 6 dims){at_source(op)}")
    pad = 6 - rank
    params = {"rank": rank, "in_shape": list(src.physical_shape) + [1] * pad,
              "perm": physical_perm(src, out, logical_perm) + list(range(rank, 6))}
    return KernelCall("mcu_permute", ["&params", str(DTYPE_BYTES[src.dtype]), ref(src), ref(out)],
                      ["mcu_permute.c"], "mcu_permute_params", params, operands=[src, out])


def _permute(op: Op, ref: Ref) -> KernelCall:
    return _permute_call(op, ref, op.attrs["perm"])


def _layout(op: Op, ref: Ref) -> KernelCall:
    return _permute_call(op, ref, tuple(range(len(op.inputs[0].shape))))


def _concat(op: Op, ref: Ref) -> KernelCall:
    out = op.output
    p = out.dim_order.index(op.attrs["axis"])
    outer = math.prod(out.physical_shape[:p])
    elem = DTYPE_BYTES[out.dtype]
    chunks = [math.prod(t.physical_shape[p:]) * elem for t in op.inputs]
    return KernelCall("mcu_concat", [str(outer), str(len(chunks)), "chunk_bytes", "inputs", ref(op.output)],
                      ["mcu_concat.c"],
                      locals=[f"static const int32_t chunk_bytes[{len(chunks)}] = {{{', '.join(map(str, chunks))}}};",
                              f"const void *const inputs[{len(chunks)}] = "
                              f"{{{', '.join(ref(t) for t in op.inputs)}}};"],
                      operands=[*op.inputs, op.output], scalars=[outer, *chunks])


def _pad(op: Op, ref: Ref) -> KernelCall:
    src = op.inputs[0]
    rank = len(src.shape)
    pad = 6 - rank
    before = [op.attrs["before"][d] for d in src.dim_order]
    after = [op.attrs["after"][d] for d in src.dim_order]
    params = {"rank": rank, "in_shape": list(src.physical_shape) + [1] * pad,
              "pad_before": before + [0] * pad, "pad_after": after + [0] * pad}
    fill = c_float(op.attrs["value"])
    return KernelCall("mcu_pad", ["&params", "4", "&fill", ref(src), ref(op.output)], ["mcu_pad.c"],
                      "mcu_pad_params", params, locals=[f"static const float fill = {fill};"],
                      operands=[src, op.output], scalars=[float(op.attrs["value"])])


EMITTERS: dict[tuple[str, str], Emitter] = {
    ("conv2d", "float32"): _conv2d,
    ("slice", "float32"): _slice,
    ("slice", "int8"): _slice,
    ("slice", "int32"): _slice,  # tokens and positions
    ("slice", "uint8"): _slice,
    ("linear", "float32"): _linear,
    ("linear_w8", "float32"): _linear_w8,
    ("linear_dyn", "float32"): _linear_dyn,
    ("max_pool2d", "float32"): _pool("mcu_max_pool2d_f32", "mcu_max_pool2d_f32.c"),
    ("avg_pool2d", "float32"): _pool("mcu_avg_pool2d_f32", "mcu_avg_pool2d_f32.c"),
    ("mean_hw", "float32"): _mean_hw,
    ("add", "float32"): _binary("add"),
    ("sub", "float32"): _binary("sub"),
    ("mul", "float32"): _binary("mul"),
    ("div", "float32"): _binary("div"),
    ("clamp", "float32"): _clamp,
    ("sigmoid", "float32"): _unary("sigmoid"),
    ("tanh", "float32"): _unary("tanh"),
    ("hardswish", "float32"): _unary("hardswish"),
    ("softmax", "float32"): _softmax,
    ("batch_norm", "float32"): _batch_norm,
    ("permute", "float32"): _permute,
    ("layout", "float32"): _layout,
    ("concat", "float32"): _concat,
    ("pad", "float32"): _pad,
}


def _matrix_s8(op: Op, ref: Ref) -> KernelCall:
    """int8 convolution, depthwise and linear: the kernel comes from the variant table
    (mcu/backends/portable/variants.py); in-place variants take the data once."""
    x, w, b = op.inputs[:3]
    out = op.output
    variant = select_variant(op, ref(x) == ref(out))
    params_type, params = conv_params_s8(op)
    data = [ref(out)] if variant.in_place else [ref(x)]
    tail = [ref(w), ref(b)] + ([] if variant.in_place else [ref(out)])
    return KernelCall(variant.function, ["&ctx", "&params", "&quant", *data, *tail], [variant.source], params_type,
                      params, locals=quant_locals(op, ref), operands=quant_operands(op))


def _pool_s8(function: str, source: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a = op.attrs
        params = {"input": shape4(op.inputs[0]), "output": shape4(op.output),
                  "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1],
                  "stride_h": a["stride"][0], "stride_w": a["stride"][1],
                  "pad_top": a["padding"][0], "pad_left": a["padding"][1],
                  "act_min": int(a["act_min"]), "act_max": int(a["act_max"])}
        return KernelCall(function, ["&params", ref(op.inputs[0]), ref(op.output)], [source],
                          "mcu_pool2d_s8_params", params, operands=[op.inputs[0], op.output])
    return emit


def _mean_hw_s8(op: Op, ref: Ref) -> KernelCall:
    params = {"input": shape4(op.inputs[0]),
              **offsets(op, "input_offset", "multiplier", "shift", "output_offset", "act_min", "act_max")}
    return KernelCall("mcu_mean_hw_s8", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_mean_hw_s8.c"],
                      "mcu_mean_hw_s8_params", params, operands=[op.inputs[0], op.output])


def _softmax_s8(op: Op, ref: Ref) -> KernelCall:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    params = {"outer": outer, "axis": axis, "inner": inner,
              **offsets(op, "input_multiplier", "input_left_shift", "diff_min")}
    return KernelCall("mcu_softmax_s8", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_softmax_s8.c"],
                      "mcu_softmax_s8_params", params, operands=[op.inputs[0], op.output])


def _lut_s8(op: Op, ref: Ref) -> KernelCall:
    x, table = op.inputs
    return KernelCall("mcu_lut_s8", [str(x.numel), ref(table), ref(x), ref(op.output)], ["mcu_lut_s8.c"],
                      operands=[table, x, op.output], scalars=[x.numel])


def _requantize_s8(op: Op, ref: Ref) -> KernelCall:
    a = op.attrs
    values = [op.output.numel] + [int(a[k]) for k in ("input_offset", "multiplier", "shift",
                                                       "output_offset", "act_min", "act_max")]
    return KernelCall("mcu_requantize_s8", [str(v) for v in values] + [ref(op.inputs[0]), ref(op.output)],
                      ["mcu_requantize_s8.c"], operands=[op.inputs[0], op.output], scalars=values)


def _clamp_s8(op: Op, ref: Ref) -> KernelCall:
    return KernelCall("mcu_clamp_s8", [str(op.output.numel), str(int(op.attrs["act_min"])),
                                       str(int(op.attrs["act_max"])), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_clamp_s8.c"], operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, int(op.attrs["act_min"]), int(op.attrs["act_max"])])


def _quantize(op: Op, ref: Ref) -> KernelCall:
    q = op.output.quant
    assert q is not None
    return KernelCall("mcu_quantize_f32_s8", [str(op.output.numel), c_float(1.0 / q.scale[0]),
                                              str(q.zero_point[0]), ref(op.inputs[0]), ref(op.output)],
                      ["mcu_quantize_f32_s8.c"], operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, float(1.0 / q.scale[0]), int(q.zero_point[0])])


def _dequantize(op: Op, ref: Ref) -> KernelCall:
    q = op.attrs["quant"]
    return KernelCall("mcu_dequantize_s8_f32", [str(op.output.numel), c_float(q.scale[0]), str(q.zero_point[0]),
                                                ref(op.inputs[0]), ref(op.output)], ["mcu_dequantize_s8_f32.c"],
                      operands=[op.inputs[0], op.output],
                      scalars=[op.output.numel, float(q.scale[0]), int(q.zero_point[0])])


def _pad_s8(op: Op, ref: Ref) -> KernelCall:
    call = _pad(op, ref)
    call.args[1] = "1"
    call.locals = [f"static const int8_t fill = {int(op.attrs['value_q'])};"]
    call.scalars = [int(op.attrs["value_q"])]
    return call


EMITTERS.update({
    ("conv2d", "int8"): _matrix_s8,
    ("depthwise_conv2d", "int8"): _matrix_s8,
    ("linear", "int8"): _matrix_s8,
    ("add", "int8"): _binary_s8("add"),
    ("sub", "int8"): _binary_s8("sub"),
    ("mul", "int8"): _binary_s8("mul"),
    ("max_pool2d", "int8"): _pool_s8("mcu_max_pool2d_s8", "mcu_max_pool2d_s8.c"),
    ("avg_pool2d", "int8"): _pool_s8("mcu_avg_pool2d_s8", "mcu_avg_pool2d_s8.c"),
    ("mean_hw", "int8"): _mean_hw_s8,
    ("softmax", "int8"): _softmax_s8,
    ("lut", "int8"): _lut_s8,
    ("requantize", "int8"): _requantize_s8,
    ("clamp", "int8"): _clamp_s8,
    ("quantize", "int8"): _quantize,
    ("dequantize", "float32"): _dequantize,
    ("permute", "int8"): _permute,
    ("layout", "int8"): _layout,
    ("concat", "int8"): _concat,
    ("pad", "int8"): _pad_s8,
})


# --- 4-bit groupwise weights ---------------------------------------------------------------


def _linear_w4(op: Op, ref: Ref) -> KernelCall:
    x, w, scale = op.inputs[:3]
    b = op.inputs[3] if len(op.inputs) > 3 else None
    out_f, half = w.shape
    in_f = 2 * half
    params = {"batch": x.numel // in_f, "in_features": in_f, "out_features": out_f,
              "group_size": int(op.attrs["group_size"]), **act_bounds(op)}
    return KernelCall("mcu_linear_w4_f32", ["&params", ref(x), ref(w), ref(scale), ref(b) if b is not None else "NULL",
                                            ref(op.output)],
                      ["mcu_linear_w4_f32.c"], "mcu_linear_w4_params", params, operands=[x, w, scale, b, op.output])


def _linear_w4_dyn(op: Op, ref: Ref) -> KernelCall:
    call = _linear_w4(op, ref)
    assert ref.scratch is not None, "dynamic quantization needs its planned scratch buffer"
    return KernelCall("mcu_linear_w4_s8", ["&ctx", *call.args], ["mcu_linear_w4_s8.c"], call.params_type,
                      call.params, locals=[f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"],
                      operands=[SCRATCH, *call.operands])


def _index_put(op: Op, ref: Ref) -> KernelCall:
    """Writes the new positions into the state (the op's output aliases the state's bytes)."""
    values, indices = op.inputs
    a = op.attrs
    params = {"outer": a["outer"], "axis": a["axis"], "inner": a["inner"], "count": a["count"]}
    size = DTYPE_BYTES[op.output.dtype]
    return KernelCall("mcu_index_put", ["&params", str(size), ref(indices), ref(values), ref(op.output)],
                      ["mcu_index_put.c"], "mcu_index_put_params", params, operands=[indices, values, op.output],
                      scalars=[size])


EMITTERS.update({
    ("linear_w4", "float32"): _linear_w4,
    ("linear_w4_dyn", "float32"): _linear_w4_dyn,
    ("index_put", "float32"): _index_put,
})


# each op family's emitters (elementwise, resampling, transposed convolution, recurrent layers, int8 islands)
EMITTERS.update(MORE)
EMITTERS.update(RESAMPLE)
EMITTERS.update(CONV)
EMITTERS.update(RECURRENT)
EMITTERS.update(emitters())


class PortableBackend(Backend):
    """Our C kernels: takes every op it has a kernel for (and every aliasing view, which emits no code)."""

    id: ClassVar[str] = "portable"
    rules: ClassVar[tuple[Rule, ...]] = tuple(Rule(kind, (dtype,)) for kind, dtype in EMITTERS)

    def refuse(self, op: Op, ctx: Context) -> str | None:
        if op.attrs.get("alias"):
            return None  # a view of its input's bytes: nothing to run
        why = super().refuse(op, ctx)
        if why is not None and op.outputs:
            return f"no {op.outputs[0].dtype} kernel for {op.kind}"
        return why

    def emit(self, op: Op, refs: Any) -> KernelCall:
        key = (op.kind, op.output.dtype)
        if key not in EMITTERS:
            raise McuError(f"no {op.output.dtype} kernel for {op.kind}{at_source(op)}")
        return EMITTERS[key](op, refs)
