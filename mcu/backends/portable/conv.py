"""Portable-backend emitters of the convolution and linear family: float convolution and linear layers
(also with int8 or 4-bit weights), batched matrix products of two activations (fp32 and int8), int8 convolution, depthwise and linear layers through the variant table
(mcu/backends/portable/variants.py: kernels with different contracts), and the transposed convolution,
``mcu_conv_transpose2d_f32``/``_s8``, which takes the convolution's parameter structs and operands
(mcu/backends/calls.py), so program files carry it like a convolution (kernel ids 100 and 101). conv1d and
grouped convolution need nothing of their own: they are conv2d ops."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from mcu.backends.calls import (SCRATCH, KernelCall, Ref, act_bounds, conv_params_s8, offsets, quant_locals,
                                quant_operands, shape4)
from mcu.backends.optimized.specialise import PackedLayer, merge_defines, packed_defines
from mcu.backends.portable.s4_linear import FLAGS as S4_FC_FLAGS, s4_linear_defines, s4_linear_merge
from mcu.backends.portable.variants import select_variant
from mcu.backends.weights import s4_weights
from mcu.ir import Op, Tensor
from mcu.layouts import channel_rows, pack_palette
from mcu.plan.contracts import S4_STREAM_MAX, S4_STREAM_PIXELS, pointwise_ok, s4_stream_bytes


def _conv2d(op: Op, ref: Ref) -> KernelCall:
    x, w = op.inputs[0], op.inputs[1]
    b = op.inputs[2] if len(op.inputs) > 2 else None
    out = op.output
    params = {
        "input": shape4(x), "output": shape4(out),
        "kernel_h": w.shape[2], "kernel_w": w.shape[3],
        "stride_h": op.attrs["stride"][0], "stride_w": op.attrs["stride"][1],
        "pad_top": op.attrs["padding"][0], "pad_left": op.attrs["padding"][1],
        "dilation_h": op.attrs["dilation"][0], "dilation_w": op.attrs["dilation"][1],
        "groups": op.attrs["groups"], **act_bounds(op),
    }
    return KernelCall("mcu_conv2d_f32", ["&params", ref(x), ref(w), ref(b) if b is not None else "NULL", ref(out)],
                      ["mcu_conv2d_f32.c"], "mcu_conv2d_f32_params", params, operands=[x, w, b, out])


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


# Each s4 kernel and the kernels it runs: the depthwise one widens its weights into its scratch and runs
# the int8 depthwise kernel (and so its core's paths), the convolution with scratch widens them into the
# int8 packed kernel's stream and runs that.
S4_CALLS = {"mcu_conv2d_s4": ("mcu_conv2d_s4", "mcu_conv2d_packed_s8"),
            "mcu_depthwise_conv2d_s4": ("mcu_depthwise_conv2d_s4", "mcu_depthwise_conv2d_s8"),
            "mcu_linear_s4": ("mcu_linear_s4",)}
# On Helium cores a convolution with scratch (the stream's, or mve_s4_scratch_bytes) widens its weights to int8
# there instead and runs the int8 kernel's MVE paths (convolution/mve_conv_s4.h); other cores leave it
# unreferenced, and the linker drops it.
S4_WIDE_CALL = "mcu_conv2d_s8"


S4_STREAM = "MCU_S4_STREAM"  # 0: mcu_conv2d_s4 built without the stream path (no layer of the model takes it)
S4_WIDE = "MCU_S4_WIDE"  # 0: built without the Helium path through mcu_conv2d_s8 (no layer has scratch for it)


def s4_widens(op: Op) -> bool:
    """Whether a 4-bit convolution has scratch for its weights widened to int8 (the Helium path): the stream's,
    or what mve_s4_scratch_bytes asked for on a Helium core."""
    return bool(s4_stream_bytes(op) or op.attrs.get("scratch_bytes"))


def mve_s4_scratch_bytes(op: Op) -> int:
    """The scratch a 4-bit convolution asks for on a Helium core where the stream's is not planned (the stream
    would pass S4_STREAM_MAX): its weights widened to int8, one byte each, for mcu_conv2d_s8's MVE paths
    (convolution/mve_conv_s4.h), under the stream's other conditions (one group, at least S4_STREAM_PIXELS
    output pixels) and within S4_STREAM_MAX. Without it the layer reads the packed weights, from where the
    model's constants live, once per output pixel. 0 for the others."""
    if op.kind != "conv2d" or op.attrs.get("weight_bits") != 4 or op.attrs["groups"] != 1 \
            or op.attrs.get("s4_stream") is False or s4_stream_bytes(op):
        return 0
    w, out = op.inputs[1], op.output
    pixels = out.shape[0] * out.shape[2] * out.shape[3]
    return w.numel if pixels >= S4_STREAM_PIXELS and w.numel <= S4_STREAM_MAX else 0


def s4_defines(calls: Iterable[tuple[Op, KernelCall]]) -> dict[str, int]:
    """The compile definitions of a model's 4-bit layers: the packed kernel specialised to the convolutions that run
    it (mcu/backends/optimized/specialise.py), and MCU_S4_STREAM 0 when none does, so that mcu_conv2d_s4 does not
    link the packed kernel; mcu_linear_s4's paths its layers take (mcu/backends/portable/s4_linear.py); nothing
    without 4-bit layers."""
    calls = list(calls)
    linear = s4_linear_defines(calls)
    if not any(call.function == "mcu_conv2d_s4" for _, call in calls):
        return linear
    layers = s4_packed_layers(calls)
    wide = any(call.function == "mcu_conv2d_s4" and s4_widens(op) for op, call in calls)
    return {**packed_defines(layers), S4_STREAM: int(bool(layers)), S4_WIDE: int(wide), **linear}


def s4_merge_defines(parts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """The definitions of a library of several methods from each one's :func:`s4_defines`: every path any needs."""
    flags = (S4_STREAM, S4_WIDE, *S4_FC_FLAGS)
    packed = [{k: v for k, v in p.items() if k not in flags} for p in parts]
    merged = merge_defines([p for p in packed if p])
    conv = {name: max(p[name] for p in parts if name in p) for name in (S4_STREAM, S4_WIDE)
            if any(name in p for p in parts)}
    return {**merged, **conv, **s4_linear_merge(parts)}


def s4_packed_layers(calls: Iterable[tuple[Op, KernelCall]]) -> list[PackedLayer]:
    """What mcu_conv2d_packed_s8's dispatch reads of the 4-bit convolutions that run it on their widened
    weights (those with the stream's scratch, mcu/plan/contracts.py s4_stream_bytes); the stream's flag as
    mcu_conv2d_s4 sets it: every shift a right shift in [-23, -1] and every multiplier non-negative."""
    layers = []
    for op, call in calls:
        if call.function != "mcu_conv2d_s4" or call.params is None or not s4_stream_bytes(op):
            continue
        mult, shift = op.inputs[3], op.inputs[4]
        assert mult.data is not None and shift.data is not None
        m, s = np.asarray(mult.data).reshape(-1), np.asarray(shift.data).reshape(-1)
        right = bool(np.all((s >= -23) & (s <= -1) & (m >= 0)))
        layers.append(PackedLayer.from_params(call.params, right))
    return layers


def _matrix_s4(op: Op, ref: Ref) -> KernelCall:
    """4-bit weights with int8 activations (w4a8): the int8 kernel's struct and operands, the weights packed."""
    x, b = op.inputs[0], op.inputs[2]
    w = s4_weights(op)
    params_type, params = conv_params_s8(op)
    function = {"conv2d": "mcu_conv2d_s4", "depthwise_conv2d": "mcu_depthwise_conv2d_s4",
                "linear": "mcu_linear_s4"}[op.kind]
    operands = [w if o is op.inputs[1] else o for o in quant_operands(op)]
    sources = [f for f in S4_CALLS[function] if f != "mcu_conv2d_packed_s8" or s4_stream_bytes(op)]
    if function == "mcu_conv2d_s4" and s4_widens(op):
        sources.append(S4_WIDE_CALL)
    return KernelCall(function, ["&ctx", "&params", "&quant", ref(x), ref(w), ref(b), ref(op.output)],
                      [f"{f}.c" for f in sources], params_type, params, locals=quant_locals(op, ref),
                      operands=operands)


LUT_FUNCTIONS = {"conv2d": "mcu_conv2d_lut_s8", "depthwise_conv2d": "mcu_depthwise_conv2d_lut_s8",
                 "linear": "mcu_linear_lut_s8"}
# The depthwise one decodes its weights into its scratch and runs the int8 depthwise kernel, the convolution
# does so when its scratch holds every channel.
LUT_CALLS = {"mcu_conv2d_lut_s8": ("mcu_conv2d_lut_s8", "mcu_conv2d_s8"),
             "mcu_depthwise_conv2d_lut_s8": ("mcu_depthwise_conv2d_lut_s8", "mcu_depthwise_conv2d_s8"),
             "mcu_linear_lut_s8": ("mcu_linear_lut_s8",)}
# With int16 activations every one decodes the whole tensor into its scratch and runs the 16x8 kernel.
LUT_CALLS.update({f"mcu_{kind}_lut_s16": (f"mcu_{kind}_lut_s16", f"mcu_{kind}_s16")
                  for kind in ("conv2d", "depthwise_conv2d", "linear")})
LUT_SHARED = 16  # MCU_LUT_SHARED in the palette word: one table for every channel (runtime_c/kernels/common/lut.h)


def palette_tensors(op: Op) -> tuple[Tensor, Tensor]:
    """The op's look-up-table weights (indices, tables: mcu/layouts.py, pack_palette) derived from its int8
    weight values, made once and kept on the op so every emission names the same constants."""
    cached = op.attrs.get("palette_tensors")
    if isinstance(cached, tuple):
        return cached
    w, bits = op.inputs[1], int(op.attrs["palette_bits"])
    indices, tables = pack_palette(channel_rows(w), bits, shared=bool(op.attrs.get("palette_shared")))
    pair = (Tensor(name=f"{w.name}_lut{bits}_index", shape=(indices.size,), dtype="uint8", data=indices),
            Tensor(name=f"{w.name}_lut{bits}_table", shape=(tables.size,), dtype="int8", data=tables))
    op.attrs["palette_tensors"] = pair
    return pair


def _matrix_lut(op: Op, ref: Ref, s16: KernelCall | None = None) -> KernelCall:
    """Look-up-table weights: the int8 kernel's struct (or the 16x8 one of ``s16``, its call on the decoded
    weights) and per-channel quantization, then the palette word (bits, plus LUT_SHARED for one table),
    indices and tables. Program operands: input, indices, bias, multipliers, shifts, scratch, tables, output
    (the int8 kernels' places for the per-channel constants and scratch)."""
    x, b, mult, shift = op.inputs[0], op.inputs[2], op.inputs[3], op.inputs[4]
    indices, tables = palette_tensors(op)
    params_type, params = conv_params_s8(op) if s16 is None else (s16.params_type, s16.params)
    function = LUT_FUNCTIONS[op.kind] if s16 is None else f"mcu_{op.kind}_lut_s16"
    word = int(op.attrs["palette_bits"]) | (LUT_SHARED if op.attrs.get("palette_shared") else 0)
    return KernelCall(function, ["&ctx", "&params", "&quant", str(word), ref(x), ref(indices), ref(tables), ref(b),
                                 ref(op.output)],
                      [f"{f}.c" for f in LUT_CALLS[function]], params_type, params, locals=quant_locals(op, ref),
                      operands=[x, indices, b, mult, shift, SCRATCH, tables, op.output], scalars=[word],
                      headers=[] if s16 is None else ["mcu/kernels_s16.h"])


# The Helium three-pixel convolution (runtime_c/kernels/convolution/mve_conv3_s8.h): its stack copy of
# weight rows (MCU_S8_MVE_CONV3_BUF - 3 * MCU_S8_MVE_CONV3_COL_MAX bytes) and the layers it takes.
MVE_CONV3_COPY_BYTES = 2880
MVE_CONV3_COL_MAX = 576
MVE_CONV3_OC_MAX = 64


def mve_conv3_scratch_bytes(op: Op) -> int:
    """The scratch an int8 convolution asks for on a Helium core: a copy of all its weights, for a layer
    of mcu_mve_conv3 whose rows do not fit the stack copy (0 for the others). With it every weight is
    read once a call from where the model's constants live (a flash with wait states on
    mps3-an547) and every group of windows gathered once; without it such a layer whose output
    trails its input copies its rows once per few groups."""
    if op.kind != "conv2d" or op.output.dtype != "int8" or op.attrs.get("weight_bits") == 4 \
            or op.attrs.get("palette_bits") or pointwise_ok(op):
        return 0
    x, w = op.inputs[0], op.inputs[1]
    oc, icg, kh, kw = (int(d) for d in w.shape)
    n = kh * kw * icg
    shift = op.inputs[4].data if len(op.inputs) > 4 else None
    applies = (op.attrs["groups"] == 1 and x.dtype == "int8" and icg % 16 == 0
               and tuple(op.attrs["dilation"]) == (1, 1) and oc % 2 == 0 and oc <= MVE_CONV3_OC_MAX
               and n <= MVE_CONV3_COL_MAX and (kh, kw) != (1, 1)
               and int(op.attrs["act_min"]) == -128 and int(op.attrs["act_max"]) == 127
               and shift is not None and int(np.max(shift)) <= 0)
    return oc * n if applies and oc * n > MVE_CONV3_COPY_BYTES else 0


def _matrix_s8(op: Op, ref: Ref) -> KernelCall:
    """int8 convolution, depthwise and linear: the kernel comes from the variant table
    (mcu/backends/portable/variants.py); in-place variants take the data once."""
    if op.attrs.get("weight_bits") == 4:
        return _matrix_s4(op, ref)
    if op.attrs.get("palette_bits"):
        return _matrix_lut(op, ref)
    x, w, b = op.inputs[:3]
    out = op.output
    variant = select_variant(op, ref(x) == ref(out))
    params_type, params = conv_params_s8(op)
    data = [ref(out)] if variant.in_place else [ref(x)]
    tail = [ref(w), ref(b)] + ([] if variant.in_place else [ref(out)])
    return KernelCall(variant.function, ["&ctx", "&params", "&quant", *data, *tail], [variant.source], params_type,
                      params, locals=quant_locals(op, ref), operands=quant_operands(op))


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


def _bmm(op: Op, ref: Ref) -> KernelCall:
    a, b = op.inputs
    batch, m, k = a.shape
    n = b.shape[2]
    params = {"batch": batch, "m": m, "k": k, "n": n, "a_batch_stride": m * k, "b_batch_stride": k * n}
    return KernelCall("mcu_bmm_f32", ["&params", ref(a), ref(b), ref(op.output)], ["mcu_bmm_f32.c"],
                      "mcu_bmm_f32_params", params, operands=[a, b, op.output])


def _bmm_s8(op: Op, ref: Ref) -> KernelCall:
    a, b = op.inputs
    batch, m, k = a.shape
    n = b.shape[2]
    params = {"batch": batch, "m": m, "k": k, "n": n, "a_batch_stride": m * k, "b_batch_stride": k * n,
              **offsets(op, "a_offset", "b_offset", "multiplier", "shift", "output_offset", "act_min", "act_max")}
    return KernelCall("mcu_bmm_s8", ["&params", ref(a), ref(b), ref(op.output)], ["mcu_bmm_s8.c"],
                      "mcu_bmm_s8_params", params, operands=[a, b, op.output])


def _bmm_s16(op: Op, ref: Ref) -> KernelCall:
    """The 16x8 product of two activations (w8a16): CMSIS-NN's arm_batch_matmul_s16 arithmetic."""
    a, b = op.inputs
    batch, m, k = a.shape
    n = b.shape[2]
    params = {"batch": batch, "m": m, "k": k, "n": n, "a_batch_stride": m * k, "b_batch_stride": k * n,
              **offsets(op, "multiplier", "shift", "act_min", "act_max")}
    return KernelCall("mcu_bmm_s16", ["&params", ref(a), ref(b), ref(op.output)], ["mcu_bmm_s16.c"],
                      "mcu_bmm_s16_params", params, operands=[a, b, op.output], headers=["mcu/kernels_s16.h"])


def _conv_transpose2d(op: Op, ref: Ref) -> KernelCall:
    call = _conv2d(op, ref)
    return KernelCall("mcu_conv_transpose2d_f32", call.args, ["mcu_conv_transpose2d_f32.c"], call.params_type,
                      call.params, operands=call.operands)


def _conv_transpose2d_s8(op: Op, ref: Ref) -> KernelCall:
    x, w, b = op.inputs[:3]
    _, params = conv_params_s8(op)  # the convolution's struct: kind conv_transpose2d takes its conv2d form
    # weights packed by output phase (dilation 1, one group: mcu/passes/quantized/conv.py) or OHWI
    function = "mcu_conv_transpose2d_phased_s8" if op.attrs.get("phased") else "mcu_conv_transpose2d_s8"
    return KernelCall(function, ["&ctx", "&params", "&quant", ref(x), ref(w), ref(b), ref(op.output)],
                      [f"{function}.c"], "mcu_conv2d_s8_params", params, locals=quant_locals(op, ref),
                      operands=quant_operands(op))


def _matrix_s16(op: Op, ref: Ref) -> KernelCall:
    """16x8 convolution (transposed too) and linear layers (w8a16): int16 activations, int8 weights, int64 biases,
    the int8 kernels' per-channel multipliers and shifts (reduced to Q15 in the kernel)."""
    x, w, b = op.inputs[:3]
    out = op.output
    bounds = offsets(op, "act_min", "act_max")
    if op.kind == "linear":
        out_f, in_f = w.shape
        params_type, params = "mcu_linear_s16_params", {"batch": x.numel // in_f, "in_features": in_f,
                                                        "out_features": out_f, **bounds}
    else:
        a = op.attrs
        window = {"kernel_h": w.shape[2], "kernel_w": w.shape[3], "stride_h": a["stride"][0],
                  "stride_w": a["stride"][1], "pad_top": a["padding"][0], "pad_left": a["padding"][1],
                  "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1]}
    if op.kind == "depthwise_conv2d":
        params_type, params = "mcu_depthwise_conv2d_s16_params", {
            "input": shape4(x), "output": shape4(out), "ch_mult": op.attrs["ch_mult"], **window, **bounds}
    elif op.kind in ("conv2d", "conv_transpose2d"):  # (the transposed one: ours, on the convolution's struct)
        params_type, params = "mcu_conv2d_s16_params", {"input": shape4(x), "output": shape4(out), **window,
                                                        **bounds}
    # (a transposed one with its weights by output phase: dilation 1, mcu/passes/quantized/conv.py)
    function = f"mcu_{op.kind}_phased_s16" if op.attrs.get("phased") else f"mcu_{op.kind}_s16"
    if op.kind in ("conv2d", "conv_transpose2d") and op.attrs.get("groups", 1) > 1:  # (ours, the window's struct)
        params_type, params = "mcu_conv2d_grouped_s16_params", {"conv": params, "groups": op.attrs["groups"]}
        function = f"mcu_{op.kind}_grouped_s16"
    call = KernelCall(function, ["&ctx", "&params", "&quant", ref(x), ref(w), ref(b), ref(out)], [f"{function}.c"],
                      params_type, params, locals=quant_locals(op, ref), operands=quant_operands(op),
                      headers=["mcu/kernels_s16.h"])
    return _matrix_lut(op, ref, call) if op.attrs.get("palette_bits") else call


EMITTERS = {
    ("conv2d", "float32"): _conv2d,
    ("linear", "float32"): _linear,
    ("linear_w8", "float32"): _linear_w8,
    ("linear_dyn", "float32"): _linear_dyn,
    ("linear_w4", "float32"): _linear_w4,
    ("linear_w4_dyn", "float32"): _linear_w4_dyn,
    ("conv_transpose2d", "float32"): _conv_transpose2d,
    ("bmm", "float32"): _bmm,
    ("conv2d", "int8"): _matrix_s8,
    ("depthwise_conv2d", "int8"): _matrix_s8,
    ("linear", "int8"): _matrix_s8,
    ("conv_transpose2d", "int8"): _conv_transpose2d_s8,
    ("bmm", "int8"): _bmm_s8,
    ("bmm", "int16"): _bmm_s16,
    ("conv2d", "int16"): _matrix_s16,
    ("linear", "int16"): _matrix_s16,
    ("depthwise_conv2d", "int16"): _matrix_s16,
    ("conv_transpose2d", "int16"): _matrix_s16,
}
