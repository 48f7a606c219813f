"""int8 forms of the pooling family: max and average pooling keep their input's quantization (the quantizer
shares it) and take the fused activation's bounds, as adaptive average pooling to any size keeps its input's
quantization; the mean over height and width requantizes its sum."""

from __future__ import annotations

from mcu.ir import Graph, Op, Tensor
from mcu.passes.quantized.common import act_bounds
from mcu.passes.quantized.common import same_quant as _same_quant
from mcu.passes.quantized.common import scale as _scale
from mcu.passes.quantized.common import zero_point as _zp
from mcu.reference import arith, s16


def _pool(kind: str):
    """Pooling cannot change quantization: input and output parameters must be equal."""
    def convert(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
        if not all(_same_quant(t, out) for t in ins):
            return "input and output quantization differ"
        attrs = dict(op.attrs)
        attrs["act_min"], attrs["act_max"] = act_bounds(op, out)
        if tuple(attrs.get("dilation", (1, 1))) != (1, 1):
            # (the integer pooling kernels read adjacent taps: a dilated window would be pooled as a dense one)
            return "a dilated pool has no integer kernel"
        if kind == "avg_pool2d":
            if attrs.get("divisor_override"):
                return "divisor_override has no int8 kernel"
            if attrs.get("count_include_pad") and any(attrs["padding"]):
                return "count_include_pad with padding has no int8 kernel"
        return Op(kind, list(ins), [out], attrs, op.name, op.source)
    return convert


def mean_s16_attrs(op: Op, x: Tensor, out: Tensor, count: int) -> dict | str:
    """A 16x8 mean's (mcu_mean_s16, w8a16) multiplier and shift of s_in / (s_out * count) and its clamp."""
    if x.dtype != "int16" or out.dtype != "int16":
        return "a 16x8 mean reads and writes int16"
    mult, shift = arith.quantize_multiplier(_scale(x) / (_scale(out) * count))
    if shift > s16.SHIFT_MAX:
        return "its real multiplier has no 16x8 form"
    act_min, act_max = act_bounds(op, out)
    return {"multiplier": mult, "shift": shift, "act_min": act_min, "act_max": act_max}


def _mean_hw(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    x = ins[0]
    count = x.shape[2] * x.shape[3]
    if x.dtype == "int16":
        attrs = mean_s16_attrs(op, x, out, count)
        return attrs if isinstance(attrs, str) else Op("mean_hw", [x], [out], {**op.attrs, **attrs}, op.name,
                                                       op.source)
    mult, shift = arith.quantize_multiplier(_scale(x) / (_scale(out) * count))
    return Op("mean_hw", [x], [out], {**op.attrs, "input_offset": -_zp(x), "multiplier": mult, "shift": shift,
                                      "output_offset": _zp(out), "act_min": -128, "act_max": 127},
              op.name, op.source)


# mcu_adaptive_avg_pool_s16 sums a window in int32: at most this many int16 values (and half their count)
S16_ADAPTIVE_WINDOW_MAX = 65534


def _adaptive(graph: Graph, op: Op, ins: list[Tensor], out: Tensor) -> Op | str:
    if not _same_quant(ins[0], out):
        return "input and output quantization differ"
    if out.dtype == "int16":
        (h, w), (oh, ow) = ins[0].shape[2:], out.shape[2:]
        window = (h // oh + 2) * (w // ow + 2)  # the kernel's bound: fewer than in / out + 2 along each axis
        if window > S16_ADAPTIVE_WINDOW_MAX:
            return (f"a 16x8 adaptive average pool from {h}x{w} to {oh}x{ow} (windows bounded by {window:,} values; "
                    f"its int32 sum takes at most {S16_ADAPTIVE_WINDOW_MAX:,})")
    return Op(op.kind, list(ins), [out], dict(op.attrs), op.name, op.source)


CONVERTERS = {"max_pool2d": _pool("max_pool2d"), "avg_pool2d": _pool("avg_pool2d"), "mean_hw": _mean_hw,
              "adaptive_avg_pool": _adaptive}
