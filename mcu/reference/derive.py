"""The kernel parameters of each int8 op, derived from the quantized graph alone.

What an int8 kernel needs beyond its operands (Q31 multipliers and shifts, offsets, clamp bounds, softmax's
scaling, layer norm's per-column constants) follows from the scales and zero points of the op's tensors,
the per-channel scales of its weights and its structural attributes (window, reduced dims, the fused
activation ``act`` as the float bounds the model wrote). This module computes them with this package's
own arithmetic and never reads a number the int8 lowering stored for the kernel, so a lowering that
stores a wrong one makes the device disagree with the reference.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mcu.errors import McuError
from mcu.ir import Op, Tensor
from mcu.reference import arith, elementwise, gru_s16, lstm_s16, norm, recurrent, s16, s16_act, s16_norm
from mcu.reference.resample import bilinear_tables_s8


def scale_zp(t: Tensor) -> tuple[float, int]:
    """A per-tensor quantized tensor's scale and zero point."""
    if t.quant is None:
        raise McuError(f"the integer reference needs the quantization of {t.name}")
    return float(t.quant.scale[0]), int(t.quant.zero_point[0])


def act_range(op: Op) -> tuple[int, int]:
    """The fused activation's float bounds (``act``: lo, hi, None for an open side) as int8 codes of the
    output, rounded to nearest and saturated; the whole int8 range when the op has none."""
    lo, hi = op.attrs.get("act") or (None, None)
    s, zp = scale_zp(op.output)
    qmin, qmax = (-32768, 32767) if op.output.dtype == "int16" else (-128, 127)  # int16: w8a16

    def code(v: float | None, open_end: int) -> int:
        return open_end if v is None else max(qmin, min(qmax, zp + int(np.round(v / s))))

    return code(lo, qmin), code(hi, qmax)


def _act(op: Op) -> dict[str, int]:
    act_min, act_max = act_range(op)
    return {"act_min": act_min, "act_max": act_max}


def weighted(op: Op) -> dict:
    """conv2d, depthwise, transposed convolution and linear: the int32 bias (the float bias over s_in s_w[c],
    rounded and saturated), one multiplier and shift per output channel for s_in s_w[c] / s_out, the input's
    and output's offsets, the clamp."""
    x, w = op.inputs[0], op.inputs[1]
    s_x, zp_x = scale_zp(x)
    s_o, zp_o = scale_zp(op.output)
    if w.quant is None:
        raise McuError(f"the integer reference needs the per-channel scales of {w.name}")
    s_w = np.array(w.quant.scale, np.float64)
    bias = np.clip(np.round(np.asarray(op.attrs["bias_real"], np.float64) / (s_x * s_w)), -(2**31), 2**31 - 1)
    pairs = [arith.quantize_multiplier(s_x * float(s) / s_o) for s in s_w]
    return {"bias": bias.astype(np.int32), "multiplier": np.array([m for m, _ in pairs], np.int32),
            "shift": np.array([s for _, s in pairs], np.int32), "input_offset": -zp_x, "output_offset": zp_o,
            **_act(op)}


def weighted_s16(op: Op) -> dict:
    """A 16x8 convolution or linear layer (w8a16): the int64 bias, the per-channel multipliers and shifts
    of s_in s_w[c] / s_out (mcu.reference.s16.s16_layer_params), the clamp in int16."""
    x, w = op.inputs[0], op.inputs[1]
    s_x, _ = scale_zp(x)
    s_o, _ = scale_zp(op.output)
    if w.quant is None:
        raise McuError(f"the integer reference needs the per-channel scales of {w.name}")
    p = s16.s16_layer_params(s_x, np.array(w.quant.scale, np.float64), s_o,
                             np.asarray(op.attrs["bias_real"], np.float64))
    return {"bias": p.bias, "multiplier": p.multiplier, "shift": p.shift, **_act(op)}


def add_s16(op: Op) -> dict:
    """The 16x8 add, difference, maximum and minimum: arith.add_params of the operands' and the output's scales with left shift 15."""
    a, b = op.inputs
    params = arith.add_params(scale_zp(a)[0], scale_zp(b)[0], scale_zp(op.output)[0], left_shift=15)
    keep = ("a_multiplier", "a_shift", "b_multiplier", "b_shift", "out_multiplier", "out_shift", "left_shift")
    return {**{k: params[k] for k in keep}, **_act(op)}


def _q15_output(op: Op) -> None:
    s_out, zp_out = scale_zp(op.output)
    if not math.isclose(s_out, s16_act.OUTPUT_SCALE) or zp_out != 0:
        raise McuError(f"the 16x8 {op.kind} {op.name} writes scale 2^-15 and zero point 0, not {s_out} and {zp_out}")


def activation_s16(op: Op) -> dict:
    """A 16x8 sigmoid or tanh (mcu_activation_s16): TFLite's input multiplier and shift from the input's scale;
    the output's scale must be 2^-15."""
    _q15_output(op)
    mult, shift = s16_act.activation_params(scale_zp(op.inputs[0])[0])
    return {"input_multiplier": mult, "input_shift": shift, "kind": op.kind}


def softmax_s16(op: Op) -> dict:
    """A 16x8 softmax (mcu_softmax_s16): the input's scale over the exp table's step; output scale 2^-15."""
    _q15_output(op)
    mult, shift = s16_act.softmax_params(scale_zp(op.inputs[0])[0])
    return {"input_multiplier": mult, "input_shift": shift}


def requantize_s16(op: Op) -> dict:
    """An int16 requantization: s_in / s_out, the clamp in int16."""
    mult, shift = arith.quantize_multiplier(scale_zp(op.inputs[0])[0] / scale_zp(op.output)[0])
    return {"multiplier": mult, "shift": shift, **_act(op)}


def mul_s16(op: Op) -> dict:
    """The 16x8 product: s_a s_b / s_out, the clamp in int16."""
    a, b = op.inputs
    mult, shift = s16_act.mul_params(scale_zp(a)[0], scale_zp(b)[0], scale_zp(op.output)[0])
    return {"out_multiplier": mult, "out_shift": shift, **_act(op)}


def div_s16(op: Op) -> dict:
    """The 16x8 quotient (mcu_div_s16): its fractional bits and s_a / (s_b s_out 2^bits), the clamp in int16."""
    a, b = op.inputs
    return {**s16_act.div_params(scale_zp(a)[0], scale_zp(b)[0], scale_zp(op.output)[0]), **_act(op)}


def mean_s16(op: Op, count: int) -> dict:
    """A 16x8 mean (mcu_mean_s16): the multiplier and shift of s_in / (s_out * count), the clamp in int16."""
    mult, shift = arith.quantize_multiplier(scale_zp(op.inputs[0])[0] / (scale_zp(op.output)[0] * count))
    return {"multiplier": mult, "shift": shift, **_act(op)}


def binary(op: Op) -> dict:
    """add, sub, maximum, minimum (TFLite's add rescaling), mul and div: the fields of mcu_binary_s8_params."""
    (s_a, zp_a), (s_b, zp_b) = (scale_zp(t) for t in op.inputs)
    s_o, zp_o = scale_zp(op.output)
    if op.kind == "mul":
        params = arith.mul_params(s_a, s_b, s_o, zp_a=zp_a, zp_b=zp_b, zp_out=zp_o)
    elif op.kind == "div":
        params = elementwise.div_params(s_a, s_b, s_o, zp_a=zp_a, zp_b=zp_b, zp_out=zp_o)
    else:
        params = arith.add_params(s_a, s_b, s_o, zp_a=zp_a, zp_b=zp_b, zp_out=zp_o)
    return {**params, **_act(op)}


def rescale(op: Op, real: float) -> dict:
    """One requantization of ``real`` from the input's offset codes to the output's: requantize, mean_hw,
    reduce."""
    _, zp_x = scale_zp(op.inputs[0])
    _, zp_o = scale_zp(op.output)
    mult, shift = arith.quantize_multiplier(real)
    return {"input_offset": -zp_x, "multiplier": mult, "shift": shift, "output_offset": zp_o, **_act(op)}


def requantize(op: Op) -> dict:
    return rescale(op, scale_zp(op.inputs[0])[0] / scale_zp(op.output)[0])


def mean_hw(op: Op) -> dict:
    """The sum over H and W times s_in / (s_out H W)."""
    x = op.inputs[0]
    count = x.shape[2] * x.shape[3]
    return rescale(op, scale_zp(x)[0] / (scale_zp(op.output)[0] * count))


def reduce(op: Op) -> dict:
    """mcu_reduce_s8: the sum (or the extreme code) times s_in / s_out, divided by the count for a mean."""
    x = op.inputs[0]
    first, last = op.attrs["dims"]
    count = math.prod(x.shape[first:last + 1])
    return rescale(op, scale_zp(x)[0] / scale_zp(op.output)[0] / (count if op.attrs["op"] == "mean" else 1))


def bmm(op: Op) -> dict:
    """mcu_bmm_s8: s_a s_b / s_out, times the positive factor of a scaling folded into the product."""
    (s_a, zp_a), (s_b, zp_b) = (scale_zp(t) for t in op.inputs)
    s_o, zp_o = scale_zp(op.output)
    mult, shift = arith.quantize_multiplier(s_a * s_b * float(op.attrs.get("scaling", 1.0)) / s_o)
    return {"a_offset": -zp_a, "b_offset": -zp_b, "multiplier": mult, "shift": shift, "output_offset": zp_o,
            **_act(op)}


def bmm_s16(op: Op) -> dict:
    """mcu_bmm_s16: s_a s_b / s_out (zero points 0), times the positive factor of a scaling folded into it."""
    (s_a, _), (s_b, _) = (scale_zp(t) for t in op.inputs)
    mult, shift = arith.quantize_multiplier(s_a * s_b * float(op.attrs.get("scaling", 1.0)) / scale_zp(op.output)[0])
    return {"multiplier": mult, "shift": shift, **_act(op)}


def layer_norm_s16(op: Op) -> s16_norm.LayerNormS16:
    """mcu_layer_norm_s16's constants from the scales, eps and the float affine weights the op keeps."""
    weight, bias = op.attrs["affine"]
    act_min, act_max = act_range(op)
    return s16_norm.layer_norm_params(int(op.attrs["cols"]), scale_zp(op.inputs[0])[0], scale_zp(op.output)[0],
                                      float(op.attrs["eps"]), weight, bias, rms=bool(op.attrs["rms"]),
                                      act_min=act_min, act_max=act_max)


def log_softmax_s16(op: Op) -> dict:
    """mcu_log_softmax_s16: the exp table's input multiplier, s_in / s_out and 2^-15 / s_out."""
    return s16_norm.log_softmax_params(scale_zp(op.inputs[0])[0], scale_zp(op.output)[0])


def softmax(op: Op) -> dict:
    """TFLite's int8 softmax scaling of the input (beta 1)."""
    mult, left_shift, diff_min = arith.softmax_params(1.0, scale_zp(op.inputs[0])[0])
    return {"input_multiplier": mult, "input_left_shift": left_shift, "diff_min": diff_min}


def layer_norm(op: Op) -> norm.LayerNormS8:
    """mcu_layer_norm_s8's constants from the scales, eps and the float affine weights the op keeps."""
    s_x, zp_x = scale_zp(op.inputs[0])
    s_o, zp_o = scale_zp(op.output)
    weight, bias = op.attrs["affine"]
    p = norm.layer_norm_params(int(op.attrs["cols"]), s_x, s_o, zp_o, float(op.attrs["eps"]), weight, bias,
                               rms=bool(op.attrs["rms"]), zp_in=zp_x)
    act_min, act_max = act_range(op)
    return norm.LayerNormS8(p.multipliers, p.shifts, p.bias, p.eps_term, p.output_offset, act_min, act_max,
                            p.rms, p.input_zero_point)


def pad_code(op: Op) -> int:
    """The fill value as a code of the output's grid."""
    s, zp = scale_zp(op.output)
    return int(np.clip(np.round(op.attrs["value"] / s) + zp, -128, 127))


def resize_bilinear_table(op: Op) -> np.ndarray:
    """mcu_resize_bilinear_s8's table from the shapes, the scale factors and align_corners."""
    (h, w), (oh, ow) = op.inputs[0].shape[2:], op.output.shape[2:]
    sh, sw = op.attrs["scales"]
    return bilinear_tables_s8(h, w, oh, ow, op.attrs["align_corners"], sh, sw)


# The activations the int8 form looks up in a table under their own name, in float64.
_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "hardswish": lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
}


def lut_table(op: Op) -> np.ndarray:
    """The 256-entry table of a ``lut`` op: its function (with its alpha and beta) between the input's and the
    output's grids."""
    a = op.attrs
    fn = _ACTIVATIONS.get(a["function"]) or elementwise.unary_real(a["function"], a["alpha"], a["beta"])
    s_x, zp_x = scale_zp(op.inputs[0])
    s_o, zp_o = scale_zp(op.output)
    return arith.lut_table(fn, s_x, zp_x, s_o, zp_o)


def lut_table_s16(op: Op) -> np.ndarray:
    """The 513-entry int16 table of a 16x8 ``lut`` op: its function between the input's and output's scales."""
    a = op.attrs
    fn = _ACTIVATIONS.get(a["function"]) or elementwise.unary_real(a["function"], a["alpha"], a["beta"])
    return s16_act.lut_table_s16(fn, scale_zp(op.inputs[0])[0], scale_zp(op.output)[0])


def recurrent_layer(op: Op) -> recurrent.RecurrentS8:
    """An LSTM's or GRU's int8 (or 4-bit: attrs weight_bits) weights, per-row biases and multipliers and the output requantization, from the
    float weights and biases the op keeps, the input's and the hidden state's (the output's) quantization and
    the state's power-of-two scale."""
    s_x, zp_x = scale_zp(op.inputs[0])
    final = op.kind == "lstm_final_cell"  # (a final cell: its layer's, the hidden states its last operand)
    s_h, zp_h = scale_zp(op.inputs[5] if final else op.output)
    w_ih, w_hh, b_ih, b_hh = op.attrs["weights_real"]
    return recurrent.layer_params("lstm" if final else op.kind, w_ih, w_hh, b_ih, b_hh, s_x, zp_x, s_h, zp_h,
                                  int(op.attrs["state_shift"]), weight_bits=int(op.attrs.get("weight_bits", 8)))


def lstm_s16_layer(op: Op) -> lstm_s16.LstmS16:
    """A 16x8 LSTM's int8 weights, int64 biases, per-row and cell multipliers, from the float weights and biases
    the op keeps, the input's and the hidden state's (the output's; a final cell's: its layer's hidden states')
    int16 scales and the cell's power-of-two scale."""
    w_ih, w_hh, b_ih, b_hh = op.attrs["weights_real"]
    hidden = op.inputs[5] if op.kind == "lstm_final_cell" else op.output
    return lstm_s16.layer_params(w_ih, w_hh, b_ih, b_hh, scale_zp(op.inputs[0])[0], scale_zp(hidden)[0],
                                 int(op.attrs["state_shift"]))


def gru_s16_layer(op: Op) -> gru_s16.GruS16:
    """A 16x8 GRU's int8 weights, int64 biases, per-row and state multipliers, from the float weights and biases
    the op keeps, the input's and the hidden state's (the output's) int16 scales and the candidate term's
    power-of-two scale."""
    w_ih, w_hh, b_ih, b_hh = op.attrs["weights_real"]
    return gru_s16.layer_params(w_ih, w_hh, b_ih, b_hh, scale_zp(op.inputs[0])[0], scale_zp(op.output)[0],
                                int(op.attrs["state_shift"]))
