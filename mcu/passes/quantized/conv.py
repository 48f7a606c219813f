"""int8 forms of the convolution and linear family: convolution (depthwise when it has a group per input
channel), linear layers and transposed convolution take int8 weights quantized per output channel, int32
biases and a Q31 multiplier and shift per output channel; a batched matrix product of two activations
requantizes its int32 sums with one multiplier."""

from __future__ import annotations

import numpy as np

from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.passes.quantized.common import act_bounds
from mcu.passes.quantized.common import int_const as _int_const
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp
from mcu.errors import McuError
from mcu.reference import arith, s16, s16_norm
from mcu.reference.conv import phase_pack

# Kinds whose converter quantizes their float constants (weights, bias) itself.
WEIGHTED = ("conv2d", "linear", "conv_transpose2d")


def _per_channel_requant(name: str, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
                         ) -> tuple[Tensor, Tensor, Tensor, Tensor] | str:
    qc = w.qconst
    if qc is None:
        return "its weight is not quantized"
    w_scale, w_zp = qc.per_channel(0)
    if np.any(w_zp != 0):
        return "weights must be symmetric (zero-point 0)"
    s_x, s_o = _scale(x), _scale(out)
    mults, shifts = zip(*(arith.quantize_multiplier(s_x * float(sw) / s_o) for sw in w_scale))
    channels = w.shape[0]
    b = bias.data.astype(np.float64).reshape(-1) if bias is not None else np.zeros(channels)
    bias_q = np.clip(np.round(b / (s_x * w_scale)), -(2**31), 2**31 - 1)
    top = 7 if qc.qmax <= 7 else 127  # 4-bit weights (w4a8) keep int8 codes here; the emitters pack them
    wq = Tensor(name=f"{name}_weight_q", shape=w.shape, dtype="int8", data=qc.values.astype(np.int8),
                quant=QuantParams(scale=tuple(float(v) for v in w_scale), zero_point=(0,) * channels, axis=0,
                                  qmin=-top, qmax=top))
    return (wq, _int_const(f"{name}_bias_q", bias_q), _int_const(f"{name}_multiplier", np.array(mults)),
            _int_const(f"{name}_shift", np.array(shifts)))


def _where(op: Op) -> str:
    return f" at {op.source}" if op.source else ""


def _s16_requant(op: Op, x: Tensor, out: Tensor, packed: tuple[Tensor, Tensor, Tensor, Tensor],
                 bias: Tensor | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """16x8 (int16 activations, w8a16): the int64 bias and the multipliers of mcu/reference/s16.py, whose
    shifts must stay within the 16x8 requantization's range."""
    wq = packed[0]
    assert wq.quant is not None
    if _zp(x) != 0 or _zp(out) != 0:
        raise McuError(f"{op.name}: w8a16 activations must be symmetric (zero point 0){_where(op)}")
    b = bias.data.astype(np.float64).reshape(-1) if bias is not None else None
    try:
        p = s16.s16_layer_params(_scale(x), np.array(wq.quant.scale), _scale(out), b)
    except ValueError as exc:
        raise McuError(f"{op.name}: {exc}{_where(op)}") from None
    bias_q = p.bias if p.bias is not None else np.zeros(wq.shape[0], dtype=np.int64)
    return (wq, _int_const(f"{op.name}_bias_q", bias_q, "int64"), _int_const(f"{op.name}_multiplier", p.multiplier),
            _int_const(f"{op.name}_shift", p.shift))


def _weighted(op: Op, ins: list[Tensor], out: Tensor) -> tuple[list[Tensor], dict] | str:
    """Inputs [x, int8 weight, int32 bias, multipliers, shifts] and int8 attrs of a conv/linear op (int16
    activations: an int64 bias, w8a16)."""
    x, w = ins[0], op.inputs[1]
    bias = op.inputs[2] if len(op.inputs) > 2 else None
    packed = _per_channel_requant(op.name, x, w, bias, out)
    if isinstance(packed, str):
        return packed
    if x.dtype == "int16" or out.dtype == "int16":
        if x.dtype != out.dtype:
            raise McuError(f"{op.name}: a 16x8 layer reads and writes int16{_where(op)}")
        packed = _s16_requant(op, x, out, packed, bias)
    act_min, act_max = act_bounds(op, out)
    # (the float bias the int32 one comes from stays, for the integer reference)
    bias_real = bias.data.astype(np.float64).reshape(-1) if bias is not None else np.zeros(w.shape[0])
    attrs = {**op.attrs, "input_offset": -_zp(x), "output_offset": _zp(out), "act_min": act_min, "act_max": act_max,
             "bias_real": bias_real}
    if packed[0].quant is not None and packed[0].quant.qmax <= 7:
        # 4-bit weights: the s4 kernels (two weights a byte); they keep the window contract only
        attrs.update(weight_bits=4)
    return [x, *packed], attrs


def _conv2d(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    result = _weighted(op, ins, out)
    if isinstance(result, str):
        return result
    inputs, attrs = result
    x, wq = inputs[0], inputs[1]
    groups, in_c = op.attrs["groups"], x.shape[1]
    if groups == in_c and groups > 1:
        # Depthwise weights are read as [kh][kw][out_c] (TFLite's 1HWO).
        wq.data = np.ascontiguousarray(np.transpose(wq.data, (1, 2, 3, 0)))
        wq.dim_order = (1, 2, 3, 0)
        attrs["ch_mult"] = wq.shape[0] // in_c
        return Op("depthwise_conv2d", inputs, [out], attrs, op.name, op.source)
    return Op("conv2d", inputs, [out], attrs, op.name, op.source)


def _linear(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    result = _weighted(op, ins, out)
    if isinstance(result, str):
        return result
    inputs, attrs = result
    return Op("linear", inputs, [out], attrs, op.name, op.source)


def _conv_transpose2d(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    """TFLite's int8 TRANSPOSE_CONV: the convolution's per-channel requantization (weights already
    [out_c, in_c/groups, kh, kw], mcu/frontend/conv.py)."""
    result = _weighted(op, ins, out)
    if isinstance(result, str):
        return result
    inputs, attrs = result
    if tuple(attrs["dilation"]) == (1, 1) and attrs["groups"] == 1:
        # the weights by output phase, as mcu_conv_transpose2d_phased_s8 (_s16) reads them (already physical)

        wq = inputs[1]
        ohwi = np.transpose(wq.data, (0, 2, 3, 1))
        wq.data = phase_pack(ohwi, *attrs["stride"]).reshape(ohwi.shape)
        wq.dim_order = (0, 2, 3, 1)
        attrs["phased"] = True
    return Op("conv_transpose2d", inputs, [out], attrs, op.name, op.source)


def _bmm_s16(op: Op, a: Tensor, b: Tensor, out: Tensor) -> Op | str:
    """The 16x8 product of two activations (w8a16, mcu_bmm_s16 as CMSIS-NN's arm_batch_matmul_s16): int16 codes
    with zero point 0, s_a s_b / s_out."""
    if any(t.is_constant or t.dtype != "int16" or _zp(t) != 0 for t in (a, b)):
        return "a 16x8 bmm takes two int16 activations of zero point 0"
    mult, shift = s16_norm.bmm_params(_scale(a), _scale(b), _scale(out))
    act_min, act_max = act_bounds(op, out)
    return Op("bmm", [a, b], [out], {**op.attrs, "multiplier": mult, "shift": shift, "act_min": act_min,
                                     "act_max": act_max}, op.name, op.source)


def _bmm(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    a, b = ins
    if a.shape[0] != b.shape[0]:
        return "batches differ"
    if out.dtype == "int16":
        return _bmm_s16(op, a, b, out)
    mult, shift = arith.quantize_multiplier(_scale(a) * _scale(b) / _scale(out))
    act_min, act_max = act_bounds(op, out)
    return Op("bmm", [a, b], [out], {**op.attrs, "a_offset": -_zp(a), "b_offset": -_zp(b), "multiplier": mult,
                                     "shift": shift, "output_offset": _zp(out), "act_min": act_min,
                                     "act_max": act_max}, op.name, op.source)


CONVERTERS = {"conv2d": _conv2d, "linear": _linear, "conv_transpose2d": _conv_transpose2d, "bmm": _bmm}
