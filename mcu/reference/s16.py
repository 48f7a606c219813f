"""The 16x8 arithmetic (int16 activations, int8 weights, 64-bit accumulators) of
runtime_c/include/mcu/kernels_s16.h, in numpy, and the parameters a 16x8 layer derives from its real
scales.

The requantization is the one of CMSIS-NN's and TFLite Micro's s16 kernels: the Q31 multiplier of
:func:`mcu.reference.arith.quantize_multiplier` is rounded to Q15 and applied to the 64-bit accumulator
with one rounding step, ``((acc * m15) >> (14 - shift) + 1) >> 1``, the middle value taken modulo 2^32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcu.reference.arith import quantize_multipliers, requantize, saturate_int32
from mcu.reference.common import patches
from mcu.reference.conv import scatter_taps

INT16_MIN = -(2**15)
INT16_MAX = 2**15 - 1
#: shifts the 16x8 requantization accepts: 14 - shift is the right shift of the 64-bit product
SHIFT_MIN, SHIFT_MAX = -31, 14


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Two's complement wrap of int64-representable Python ints to ``bits``."""
    half = 1 << (bits - 1)
    return ((x + half) % (1 << bits)) - half


def reduce_multiplier(multiplier) -> np.ndarray:
    """Q31 -> Q15, rounding half up, saturating at 0x7FFF."""
    m = np.asarray(multiplier, dtype=np.int64)
    return np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def requantize_s64(acc, multiplier, shift) -> np.ndarray:
    """The 64-bit accumulators ``acc`` requantized by Q31 ``multiplier`` and ``shift`` (broadcasting)."""
    a = np.asarray(acc, dtype=object)
    m = np.asarray(reduce_multiplier(multiplier), dtype=object)
    s = np.asarray(shift, dtype=np.int64)
    if np.any(s < SHIFT_MIN) or np.any(s > SHIFT_MAX):
        raise ValueError(f"16x8 shifts must lie in [{SHIFT_MIN}, {SHIFT_MAX}]")
    prod = _wrap(a * m, 64)
    y = _wrap(prod >> np.asarray(14 - s, dtype=object), 32)
    return np.asarray((y + 1) >> 1, dtype=np.int64)


def linear_s16(x, weight, bias, multiplier, shift, *, act_min: int = INT16_MIN,
               act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_linear_s16: x ``[batch][in]`` int16, weight ``[out][in]`` int8, bias int64 per output (or None)."""
    x = np.asarray(x, dtype=np.int16).astype(np.int64)
    w = np.asarray(weight, dtype=np.int8).astype(np.int64)
    x = x.reshape(-1, w.shape[1]) if x.ndim != 2 else x
    if x.shape[1] != w.shape[1]:
        raise ValueError("in_features mismatch")
    acc = x @ w.T  # |acc| < 2^22 * in_features: exact in int64
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    y = requantize_s64(acc, multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def _group_slices(channels_in: int, channels_out: int, groups: int) -> list[tuple[slice, slice]]:
    """Each group's (input channels, output channels)."""
    if groups < 1 or channels_in % groups or channels_out % groups:
        raise ValueError("groups must divide the input and output channels")
    icg, ocg = channels_in // groups, channels_out // groups
    return [(slice(g * icg, (g + 1) * icg), slice(g * ocg, (g + 1) * ocg)) for g in range(groups)]


def _per_channel(values, channels: int) -> np.ndarray | None:
    return None if values is None else np.broadcast_to(np.asarray(values, dtype=np.int64), (channels,))


def conv2d_s16(x, weight, bias, multiplier, shift, *, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
               out_hw: tuple[int, int] | None = None, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
               groups: int = 1) -> np.ndarray:
    """mcu_conv2d_s16: x NHWC int16, weight OHWI int8, bias int64 per output channel (or None); ``padding`` is
    (top, left), the bottom and right following from ``out_hw`` (default: no more than fits). With ``groups`` > 1
    (mcu_conv2d_grouped_s16, ours) the weights are ``[out_c][kh][kw][in_c / groups]`` and each group's output
    channels are this convolution of its input channels: requantization is per channel, so the groups are apart."""
    if groups != 1:
        oc = np.shape(weight)[0]
        parts = [conv2d_s16(np.asarray(x)[..., xi], np.asarray(weight)[yo], None if bias is None else
                            _per_channel(bias, oc)[yo], _per_channel(multiplier, oc)[yo], _per_channel(shift, oc)[yo],
                            stride=stride, padding=padding, dilation=dilation, out_hw=out_hw, act_min=act_min,
                            act_max=act_max)
                 for xi, yo in _group_slices(np.shape(x)[3], oc, groups)]
        return np.concatenate(parts, axis=3)
    x = np.asarray(x, dtype=np.int16).astype(np.int64)
    w = np.asarray(weight, dtype=np.int8).astype(np.int64)
    n, h, wd, c = x.shape
    oc, kh, kw, icg = w.shape
    if icg != c:
        raise ValueError("input channels do not match the weights")
    (sh, sw), (pt, pl), (dh, dw) = stride, padding, dilation
    if out_hw is None:
        out_hw = ((h + pt - dh * (kh - 1) - 1) // sh + 1, (wd + pl - dw * (kw - 1) - 1) // sw + 1)
    oh, ow = out_hw
    pb = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
    pr = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - wd - pl)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))  # zero point 0: padding adds nothing
    acc = np.zeros((n, oh, ow, oc), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            tap = xp[:, ky * dh: ky * dh + (oh - 1) * sh + 1: sh, kx * dw: kx * dw + (ow - 1) * sw + 1: sw, :]
            acc += tap @ w[:, ky, kx, :].T
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    y = requantize_s64(acc, multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def depthwise_conv2d_s16(x, weight, bias, multiplier, shift, *, ch_mult: int = 1, stride=(1, 1), padding=(0, 0),
                         dilation=(1, 1), out_hw: tuple[int, int] | None = None, act_min: int = INT16_MIN,
                         act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_depthwise_conv2d_s16 (CMSIS-NN's arm_depthwise_conv_s16): x NHWC int16, weight ``[kh][kw][out_c]``
    int8 with output channel ``c * ch_mult + m`` reading input channel ``c``, bias int64 per output channel."""
    x = np.asarray(x, dtype=np.int16).astype(np.int64)
    w = np.asarray(weight, dtype=np.int8).astype(np.int64)
    n, h, wd, c = x.shape
    kh, kw, oc = w.shape
    if oc != c * ch_mult:
        raise ValueError("output channels must be input channels times ch_mult")
    (sh, sw), (pt, pl), (dh, dw) = stride, padding, dilation
    if out_hw is None:
        out_hw = ((h + pt - dh * (kh - 1) - 1) // sh + 1, (wd + pl - dw * (kw - 1) - 1) // sw + 1)
    oh, ow = out_hw
    pb = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
    pr = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - wd - pl)
    xp = np.repeat(np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0))), ch_mult, axis=3)
    acc = np.zeros((n, oh, ow, oc), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += xp[:, ky * dh: ky * dh + (oh - 1) * sh + 1: sh, kx * dw: kx * dw + (ow - 1) * sw + 1: sw, :] * w[ky, kx]
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    y = requantize_s64(acc, multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def conv_transpose2d_s16(x, weight, bias, multiplier, shift, *, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                         out_hw: tuple[int, int], act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                         groups: int = 1) -> np.ndarray:
    """mcu_conv_transpose2d_s16 (ours: CMSIS-NN has no 16x8 transposed convolution): TFLite's TRANSPOSE_CONV
    scattering (every input pixel adds ``x * w`` to the output pixels ``i * stride - pad + k * dilation`` its
    taps reach) on int16 codes of zero point 0 with int8 OHWI weights (one group), the exact sum plus the int64
    bias, then :func:`requantize_s64` per output channel (``arm_convolve_s16``'s) and the clamp. With ``groups`` > 1
    (mcu_conv_transpose2d_grouped_s16, ours) weights ``[out_c][kh][kw][in_c / groups]``, each group's output
    channels scattered from its input channels only."""
    x = np.asarray(x, dtype=np.int16).astype(np.int64)
    w = np.asarray(weight, dtype=np.int8).astype(np.int64)
    _group_slices(x.shape[3], w.shape[0], groups)
    if x.shape[3] != w.shape[3] * groups:
        raise ValueError("input channels do not match the weights")
    acc = scatter_taps(x, w, tuple(out_hw), tuple(stride), tuple(padding), tuple(dilation), groups)
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    y = requantize_s64(acc, multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def _pool_windows(x, kernel, stride, padding, out_hw, fill):
    """The pooling windows of NHWC ``x`` as (n, oh, ow, kh, kw, c) and which taps lie inside the input."""
    x = np.asarray(x, dtype=np.int16).astype(np.int64)
    g = (*out_hw, *kernel, *stride, 1, 1, *padding)
    inside = patches(np.ones(x.shape[:3] + (1,), dtype=np.int64), *g, fill=0)
    return patches(x, *g, fill=fill), inside


def max_pool2d_s16(x, *, kernel, stride, padding, out_hw, act_min: int = INT16_MIN,
                   act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_max_pool2d_s16 (CMSIS-NN's arm_max_pool_s16): the largest tap inside the input, then the clamp."""
    w, _ = _pool_windows(x, kernel, stride, padding, out_hw, fill=INT16_MIN - 1)
    return np.clip(w.max(axis=(3, 4)), act_min, act_max).astype(np.int16)


def avg_pool2d_s16(x, *, kernel, stride, padding, out_hw, act_min: int = INT16_MIN,
                   act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_avg_pool2d_s16 (CMSIS-NN's arm_avgpool_s16): the sum of the taps inside the input over their
    count, rounded half away from zero, then the clamp."""
    w, inside = _pool_windows(x, kernel, stride, padding, out_hw, fill=0)
    s, count = w.sum(axis=(3, 4)), inside.sum(axis=(3, 4))
    q = np.sign(s) * ((np.abs(s) + count // 2) // count)
    return np.clip(q, act_min, act_max).astype(np.int16)


def mean_s16(x, multiplier: int, shift: int, *, act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_mean_s16: x ``[outer][axis][inner]`` int16, the exact sum over the middle axis requantized once."""
    acc = np.asarray(x, dtype=np.int16).astype(np.int64).sum(axis=1)
    y = requantize_s64(acc, multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def extreme_s16(x, largest: bool, multiplier: int, shift: int, *, act_min: int = INT16_MIN,
                act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_amax_s16 (``largest``) / mcu_amin_s16: the extreme code over the middle axis of x ``[outer][axis][inner]``,
    requantized once as mcu_mean_s16 requantizes its sum."""
    v = np.asarray(x, dtype=np.int16).astype(np.int64)
    acc = v.max(axis=1) if largest else v.min(axis=1)
    y = requantize_s64(acc, multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def add_s16(a, b, *, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift, left_shift=15,
            act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_add_s16 (CMSIS-NN's arm_elementwise_add_s16): each operand shifted left and requantized to the
    common scale, the saturated sum requantized to the output's (the int32 requantization of kernels_s8.h)."""
    a1 = requantize(np.asarray(a, dtype=np.int64) << int(left_shift), a_multiplier, a_shift)
    b1 = requantize(np.asarray(b, dtype=np.int64) << int(left_shift), b_multiplier, b_shift)
    y = requantize(saturate_int32(a1 + b1), out_multiplier, out_shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


@dataclass(frozen=True)
class S16LayerParams:
    """What a 16x8 convolution or linear layer runs with, from its real scales."""

    multiplier: np.ndarray  # int32 Q31 per output channel
    shift: np.ndarray  # int32 per output channel, within [SHIFT_MIN, SHIFT_MAX]
    bias: np.ndarray | None  # int64 per output channel, scale s_in * s_w[c]


def s16_layer_params(s_in: float, s_w, s_out: float, bias=None) -> S16LayerParams:
    """Per-channel multipliers s_in s_w[c] / s_out and the bias rounded to int64 at scale s_in s_w[c]. A
    real multiplier of 2^14 or more has no 16x8 form (its shift would pass 14) and raises ValueError."""
    s_w = np.atleast_1d(np.asarray(s_w, dtype=np.float64))
    m, s = quantize_multipliers(float(s_in) * s_w / float(s_out))
    if np.any(s > SHIFT_MAX):
        raise ValueError("a 16x8 layer's real multiplier must stay below 2^14")
    b = None
    if bias is not None:
        b = np.rint(np.asarray(bias, dtype=np.float64) / (float(s_in) * s_w)).astype(np.int64)
    return S16LayerParams(m, s, b)


def quantize_s16(x, scale: float) -> np.ndarray:
    """Real values to symmetric int16 (zero point 0), rounding half to even as torch does."""
    return np.clip(np.rint(np.asarray(x, dtype=np.float64) / scale), INT16_MIN, INT16_MAX).astype(np.int16)


def dequantize_s16(q, scale: float) -> np.ndarray:
    return np.asarray(q, dtype=np.int64).astype(np.float64) * scale


def requantize_s8_s16(x, *, input_offset, multiplier, shift, act_min=INT16_MIN, act_max=INT16_MAX,
                      output_offset=0, size=None) -> np.ndarray:
    """mcu_requantize_s8_s16, an int8 -> int16 border of ``--quantize mixed``: clamp(requantize(q +
    input_offset, multiplier, shift), act_min, act_max) with the int32 requantization of kernels_s8.h (the
    multiplier s_in / s_out is large, so the shift is positive and the left shift saturates)."""
    if int(output_offset) != 0:
        raise ValueError("int16 activations are symmetric: the output offset must be 0")
    q = np.asarray(x, dtype=np.int8).astype(np.int64) + int(input_offset)
    return np.clip(requantize(q, multiplier, shift), int(act_min), int(act_max)).astype(np.int16)


def requantize_s16_s8(x, *, multiplier, shift, output_offset, act_min=-128, act_max=127, input_offset=0,
                      size=None) -> np.ndarray:
    """mcu_requantize_s16_s8, an int16 -> int8 border: clamp(requantize(q, multiplier, shift) +
    output_offset, act_min, act_max) (mcu_requantize_s8 with input offset 0)."""
    if int(input_offset) != 0:
        raise ValueError("int16 activations are symmetric: the input offset must be 0")
    q = np.asarray(x, dtype=np.int16).astype(np.int64)
    return np.clip(requantize(q, multiplier, shift) + int(output_offset), int(act_min), int(act_max)).astype(np.int8)
