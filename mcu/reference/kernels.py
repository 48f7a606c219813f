"""Bit-exact Python reference of every int8 kernel in runtime_c/include/mcu/kernels_s8.h.

Each function computes exactly what the C kernel computes (the C kernels are
tested against these bit for bit), on numpy arrays in the kernels' physical
layouts: activations NHWC, convolution weights OHWI ``[out_c][kh][kw][in_c/groups]``,
depthwise weights ``[kh][kw][out_c]``, linear weights ``[out][in]``.

Parameters are keyword arguments named like the fields of the C parameter
structs, so a dict of struct fields can be splatted in (``**params``). Shape
fields (``input``, ``output``, ``batch``...) are optional: when given they are
checked against the arrays (``output`` also fixes the output size of the
sliding-window ops, which implies the bottom/right padding); when omitted
they follow from the arrays, and sliding windows default to bottom/right
padding equal to top/left. Per-channel ``multiplier`` / ``shift`` are int32
arrays with one entry per output channel (a scalar broadcasts).

Activations/outputs are int8 arrays; accumulation is int64 and then wrapped
to int32 where the C accumulates in 32 bits (convolution, linear: the C adds
in uint32, i.e. modulo 2^32, as CMSIS-NN's int32 accumulators do on the
device).

Broadcasting of the binary ops (add/sub/mul): by default numpy broadcasting
of the two physical arrays. Alternatively pass the C struct's ``out_shape``
and ``a_strides`` / ``b_strides`` (element strides, 0 where broadcast, as
:func:`broadcast_params` produces them); ``a`` and ``b`` are then read as
flat buffers with those strides, exactly like the C kernel.
"""

from __future__ import annotations

import numpy as np

from mcu.reference.arith import (
    INT32_MAX,
    SOFTMAX_ACCUM_BITS,
    rounding_divide_by_pot,
    requantize,
    saturate_int32,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)

__all__ = [
    "conv2d_s8", "depthwise_conv2d_s8", "linear_s8", "add_s8", "sub_s8", "mul_s8",
    "max_pool2d_s8", "avg_pool2d_s8", "mean_hw_s8", "softmax_s8", "lut_s8", "requantize_s8",
    "clamp_s8", "quantize_f32_s8", "dequantize_s8_f32", "broadcast_params", "inv_scale",
    "exp_on_negative_values", "one_over_one_plus_x_for_x_in_0_1",
]


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _s8(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise TypeError(f"expected an int8 array, got {x.dtype}")
    return x


def finish(acc, multiplier, shift, output_offset, act_min, act_max) -> np.ndarray:
    """clamp(requantize(acc) + output_offset, act_min, act_max) as int8."""
    y = requantize(acc, multiplier, shift) + int(output_offset)
    return np.clip(y, int(act_min), int(act_max)).astype(np.int8)


def _check_shape(name, given, actual):
    if given is not None and tuple(int(v) for v in given) != tuple(actual):
        raise ValueError(f"{name} {tuple(given)} does not match the array shape {tuple(actual)}")


def _out_size(size, k, stride, dilation, pad):
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def _patches(xo: np.ndarray, out_h, out_w, kh, kw, sh, sw, dh, dw, pt, pl, fill=0) -> np.ndarray:
    """Windows of NHWC ``xo`` as (n, out_h, out_w, kh, kw, c); taps outside the input read ``fill``."""
    n, h, w, c = xo.shape
    rows = np.arange(out_h)[:, None] * sh + np.arange(kh)[None, :] * dh - pt  # (out_h, kh)
    cols = np.arange(out_w)[:, None] * sw + np.arange(kw)[None, :] * dw - pl  # (out_w, kw)
    top = max(0, -int(rows.min()))
    left = max(0, -int(cols.min()))
    bottom = max(0, int(rows.max()) + 1 - h)
    right = max(0, int(cols.max()) + 1 - w)
    xp = np.pad(xo, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    r = (rows + top)[:, None, :, None]
    cc = (cols + left)[None, :, None, :]
    return xp[:, r, cc, :]


def _window_geometry(x, kh, kw, params):
    n, h, w, c = x.shape
    sh, sw = int(params["stride_h"]), int(params["stride_w"])
    dh, dw = int(params.get("dilation_h", 1)), int(params.get("dilation_w", 1))
    pt, pl = int(params["pad_top"]), int(params["pad_left"])
    output = params.get("output")
    if output is not None:
        out_h, out_w = int(output[1]), int(output[2])
    else:
        out_h, out_w = _out_size(h, kh, sh, dh, pt), _out_size(w, kw, sw, dw, pl)
    if out_h <= 0 or out_w <= 0:
        raise ValueError("empty output")
    return out_h, out_w, sh, sw, dh, dw, pt, pl


# --------------------------------------------------------------------------
# convolution and linear


def _conv_geometry(x, kh, kw, out_c, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, output):
    """Window geometry of a convolution (see _window_geometry), with the output shape checked."""
    geo = _window_geometry(x, kh, kw, dict(stride_h=stride_h, stride_w=stride_w, dilation_h=dilation_h,
                                           dilation_w=dilation_w, pad_top=pad_top, pad_left=pad_left,
                                           output=output))
    if output is not None:
        _check_shape("output", output, (x.shape[0], geo[0], geo[1], out_c))
    return geo


def conv2d_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset, act_min=-128,
              act_max=127, stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1,
              dilation_w=1, groups=1, kernel_h=None, kernel_w=None, input=None, output=None):
    """mcu_conv2d_s8: x NHWC int8, weight OHWI int8 ``[out_c][kh][kw][in_c/groups]``, bias int32 or None.

    acc[c] = bias[c] + sum((x + input_offset) * w) over the window (taps in
    the padding contribute 0), wrapped to int32;
    out = clamp(requantize(acc, multiplier[c], shift[c]) + output_offset).
    """
    x, weight = _s8(x), _s8(weight)
    _check_shape("input", input, x.shape)
    n, h, w, c = x.shape
    out_c, kh, kw, icg = weight.shape
    _check_shape("kernel", (kernel_h or kh, kernel_w or kw), (kh, kw))
    groups = int(groups)
    if c != icg * groups or out_c % groups:
        raise ValueError("channels do not match groups")
    geo = _conv_geometry(x, kh, kw, out_c, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, output)
    out_h, out_w = geo[:2]
    xo = x.astype(np.float64) + float(input_offset)
    p = _patches(xo, out_h, out_w, kh, kw, *geo[2:])  # (n, oh, ow, kh, kw, c)
    P, K, ocg = n * out_h * out_w, kh * kw * icg, out_c // groups
    p = p.reshape(P, kh, kw, groups, icg).transpose(3, 0, 1, 2, 4).reshape(groups, P, K)
    wg = weight.astype(np.float64).reshape(groups, ocg, K).transpose(0, 2, 1)
    # Integer-valued float64 products and sums stay far below 2^53: exact.
    acc = np.rint(np.matmul(p, wg)).astype(np.int64)  # (groups, P, ocg)
    acc = acc.transpose(1, 0, 2).reshape(n, out_h, out_w, out_c)
    if bias is not None:
        acc = acc + _i64(bias)
    acc = wrap_int32(acc)
    return finish(acc, _i64(multiplier), _i64(shift), output_offset, act_min, act_max)


def depthwise_conv2d_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset,
                        act_min=-128, act_max=127, ch_mult=1, stride_h=1, stride_w=1, pad_top=0,
                        pad_left=0, dilation_h=1, dilation_w=1, kernel_h=None, kernel_w=None,
                        input=None, output=None):
    """mcu_depthwise_conv2d_s8: weight ``[kh][kw][out_c]``; output channel o reads input channel o // ch_mult."""
    x, weight = _s8(x), _s8(weight)
    _check_shape("input", input, x.shape)
    n, h, w, c = x.shape
    kh, kw, out_c = weight.shape
    _check_shape("kernel", (kernel_h or kh, kernel_w or kw), (kh, kw))
    if out_c != c * int(ch_mult):
        raise ValueError("weight channels must be input channels * ch_mult")
    geo = _conv_geometry(x, kh, kw, out_c, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, output)
    out_h, out_w = geo[:2]
    xo = x.astype(np.int64) + int(input_offset)
    p = _patches(xo, out_h, out_w, kh, kw, *geo[2:])  # (n, oh, ow, kh, kw, c)
    p = p[..., np.arange(out_c) // int(ch_mult)]
    acc = np.einsum("nhwijc,ijc->nhwc", p, weight.astype(np.int64))
    if bias is not None:
        acc = acc + _i64(bias)
    acc = wrap_int32(acc)
    return finish(acc, _i64(multiplier), _i64(shift), output_offset, act_min, act_max)


def linear_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset, act_min=-128,
              act_max=127, batch=None, in_features=None, out_features=None):
    """mcu_linear_s8: x ``[batch][in]``, weight ``[out][in]``, per-output-feature requantization."""
    x, weight = _s8(x), _s8(weight)
    x = x.reshape(-1, weight.shape[1]) if x.ndim != 2 else x
    _check_shape("linear", (batch or x.shape[0], in_features or x.shape[1], out_features or weight.shape[0]),
                 (x.shape[0], x.shape[1], weight.shape[0]))
    if x.shape[1] != weight.shape[1]:
        raise ValueError("in_features mismatch")
    xo = x.astype(np.float64) + float(input_offset)
    acc = np.rint(xo @ weight.astype(np.float64).T).astype(np.int64)
    if bias is not None:
        acc = acc + _i64(bias)
    acc = wrap_int32(acc)
    return finish(acc, _i64(multiplier), _i64(shift), output_offset, act_min, act_max)


# --------------------------------------------------------------------------
# elementwise binary


def broadcast_params(a_shape, b_shape) -> dict:
    """``rank``, ``out_shape``, ``a_strides``, ``b_strides`` of mcu_binary_s8_params for numpy broadcasting
    of contiguous arrays of these shapes (element strides, 0 along broadcast dims)."""
    out_shape = tuple(int(v) for v in np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    rank = max(len(out_shape), 1)
    if rank > 6:
        raise ValueError("rank above MCU_MAX_DIMS")

    def strides(shape):
        shape = (1,) * (rank - len(shape)) + tuple(int(v) for v in shape)
        out, step = [0] * rank, 1
        for d in range(rank - 1, -1, -1):
            out[d] = 0 if shape[d] == 1 else step
            step *= shape[d]
        return out

    return dict(rank=rank, out_shape=list(out_shape) or [1], a_strides=strides(a_shape),
                b_strides=strides(b_shape))


def _gather(flat: np.ndarray, out_shape, strides) -> np.ndarray:
    idx = np.zeros((), dtype=np.int64)
    for n, s in zip(out_shape, strides):
        idx = idx[..., None] + np.arange(int(n), dtype=np.int64) * int(s)
    return np.asarray(flat).reshape(-1)[idx]


def operands(a, b, rank, out_shape, a_strides, b_strides):
    a, b = _s8(a), _s8(b)
    if out_shape is None:
        a, b = np.broadcast_arrays(a, b)
    else:
        out_shape = list(out_shape)[: int(rank) if rank is not None else len(out_shape)]
        a = _gather(a, out_shape, a_strides)
        b = _gather(b, out_shape, b_strides)
    return a.astype(np.int64), b.astype(np.int64)


def _add_sub(sign, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
             out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
             b_strides):
    a, b = operands(a, b, rank, out_shape, a_strides, b_strides)
    a1 = requantize((a + int(a_offset)) << int(left_shift), a_multiplier, a_shift)
    b1 = requantize((b + int(b_offset)) << int(left_shift), b_multiplier, b_shift)
    s = saturate_int32(a1 + sign * b1)
    return finish(s, out_multiplier, out_shift, output_offset, act_min, act_max)


def add_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
           out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None,
           out_shape=None, a_strides=None, b_strides=None):
    """mcu_add_s8: a' = rq((a + a_offset) * 2^left_shift, a_multiplier, a_shift), likewise b';
    out = clamp(rq(saturate_int32(a' + b'), out_multiplier, out_shift) + output_offset)."""
    return _add_sub(1, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape,
                    a_strides, b_strides)


def sub_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
           out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None,
           out_shape=None, a_strides=None, b_strides=None):
    """mcu_sub_s8: as :func:`add_s8` with saturate_int32(a' - b')."""
    return _add_sub(-1, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape,
                    a_strides, b_strides)


def mul_s8(a, b, *, a_offset, b_offset, out_multiplier, out_shift, output_offset, act_min=-128,
           act_max=127, rank=None, out_shape=None, a_strides=None, b_strides=None, a_multiplier=None,
           a_shift=None, b_multiplier=None, b_shift=None, left_shift=None):
    """mcu_mul_s8: out = clamp(rq((a + a_offset) * (b + b_offset)) + output_offset); add-only fields ignored."""
    a, b = operands(a, b, rank, out_shape, a_strides, b_strides)
    prod = (a + int(a_offset)) * (b + int(b_offset))
    return finish(prod, out_multiplier, out_shift, output_offset, act_min, act_max)


# --------------------------------------------------------------------------
# pooling and mean


def _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, input, output):
    x = _s8(x)
    _check_shape("input", input, x.shape)
    n, h, w, c = x.shape
    geo = _window_geometry(x, int(kernel_h), int(kernel_w),
                           dict(stride_h=stride_h, stride_w=stride_w, pad_top=pad_top, pad_left=pad_left,
                                output=output))
    out_h, out_w, sh, sw, _, _, pt, pl = geo
    if output is not None:
        _check_shape("output", output, (n, out_h, out_w, c))
    if not (pt < kernel_h and pl < kernel_w and (out_h - 1) * sh - pt < h and (out_w - 1) * sw - pl < w):
        raise ValueError("a pooling window lies entirely in the padding")
    return x, (out_h, out_w, int(kernel_h), int(kernel_w), sh, sw, 1, 1, pt, pl)


def max_pool2d_s8(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top=0, pad_left=0, act_min=-128,
                  act_max=127, input=None, output=None):
    """mcu_max_pool2d_s8: max over the window's real (unpadded) taps, then clamp."""
    x, g = _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, input, output)
    p = _patches(x.astype(np.int16), *g, fill=-1000)
    return np.clip(p.max(axis=(3, 4)), int(act_min), int(act_max)).astype(np.int8)


def avg_pool2d_s8(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top=0, pad_left=0, act_min=-128,
                  act_max=127, input=None, output=None):
    """mcu_avg_pool2d_s8: sum / count over real taps, rounded half away from zero, then clamp."""
    x, g = _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, input, output)
    s = _patches(x.astype(np.int64), *g).sum(axis=(3, 4))
    ones = np.ones(x.shape[:3] + (1,), dtype=np.int64)
    count = _patches(ones, *g).sum(axis=(3, 4))
    q = np.sign(s) * ((np.abs(s) + count // 2) // count)
    return np.clip(q, int(act_min), int(act_max)).astype(np.int8)


def mean_hw_s8(x, *, input_offset, multiplier, shift, output_offset, act_min=-128, act_max=127,
               input=None):
    """mcu_mean_hw_s8: out[n][c] = clamp(rq(sum_hw(q + input_offset), multiplier, shift) + output_offset)."""
    x = _s8(x)
    _check_shape("input", input, x.shape)
    s = (x.astype(np.int64) + int(input_offset)).sum(axis=(1, 2))
    return finish(s, multiplier, shift, output_offset, act_min, act_max)


# --------------------------------------------------------------------------
# softmax (gemmlowp fixed point, as TFLite's reference int8 softmax and CMSIS-NN's arm_softmax_s8)


def _srdhm(a, b):
    return saturating_rounding_doubling_high_mul(a, b)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for Q0.31 a in [-1/4, 0): Taylor expansion around -1/8."""
    constant_term = 1895147668          # exp(-1/8), Q0.31
    constant_1_over_3 = 715827883       # 1/3, Q0.31
    x = a + (1 << 28)                   # a + 1/8
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(_srdhm(x4_over_4 + x3, constant_1_over_3) + x2, 1)
    return constant_term + _srdhm(constant_term, x + poly)


def exp_on_negative_values(a, integer_bits: int = 5):
    """gemmlowp exp_on_negative_values: exp of Q(integer_bits).(31-integer_bits) values a <= 0, as Q0.31."""
    a = _i64(a)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = (a & (one_quarter - 1)) - one_quarter
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_left_shift(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = a_mod_quarter_minus_one_quarter - a
    for exponent, mult in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                           (2, 39332535), (3, 720401), (4, 242)):
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where(remainder & bit, _srdhm(result, mult), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a) for Q0.31 a in [0, 1), three Newton steps in Q2.29."""
    a = _i64(a)
    s = a + INT32_MAX
    half_denominator = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # (s + sign) / 2, truncating
    x = 1515870810 + _srdhm(half_denominator, -1010580540)  # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus_half_denominator_times_x = (1 << 29) - _srdhm(half_denominator, x)
        x = x + saturating_left_shift(_srdhm(x, one_minus_half_denominator_times_x), 2)
    return saturating_left_shift(x, 1)


def _clz32(v):
    """Leading zeros of positive int32 values."""
    _, e = np.frexp(np.asarray(v, dtype=np.float64))
    return 32 - e.astype(np.int64)


def softmax_s8(x, *, input_multiplier, input_left_shift, diff_min, outer=None, axis=None, inner=None):
    """mcu_softmax_s8 over the middle axis of ``x.reshape(outer, axis, inner)`` (default: the last axis).

    Output scale 1/256, zero-point -128. Per (outer, inner) column:
    diff = q - max; taps with diff < diff_min output -128 and add nothing;
    e = exp_on_negative_values(srdhm(saturate_int32(diff * 2^left_shift), input_multiplier)) (Q0.31);
    sum = sum(rounding_divide_by_pot(e, 12)) (Q12.19); headroom = clz(sum);
    scale = one_over_one_plus_x(((sum << headroom) - 2^31) as Q0.31);
    out = clamp(rounding_divide_by_pot(srdhm(scale, e), 35 - headroom) - 128, -128, 127).
    """
    x = _s8(x)
    shape = x.shape
    if outer is None:
        outer, axis, inner = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1], 1
    v = x.reshape(int(outer), int(axis), int(inner)).astype(np.int64)
    diff = v - v.max(axis=1, keepdims=True)
    keep = diff >= int(diff_min)
    scaled = _srdhm(saturating_left_shift(diff, int(input_left_shift)), int(input_multiplier))
    e = exp_on_negative_values(scaled, 5)
    total = np.where(keep, rounding_divide_by_pot(e, SOFTMAX_ACCUM_BITS), 0).sum(axis=1, keepdims=True)
    if np.any(total > INT32_MAX):
        raise ValueError("softmax axis too long: the Q12.19 sum overflows int32")
    headroom = _clz32(total)
    shifted = ((total << headroom) & 0xFFFFFFFF) - (1 << 31)
    scale = one_over_one_plus_x_for_x_in_0_1(shifted)
    bits_over_unit = SOFTMAX_ACCUM_BITS - headroom + 31 - 8
    out = rounding_divide_by_pot(_srdhm(scale, e), bits_over_unit) - 128
    out = np.where(keep, np.clip(out, -128, 127), -128)
    return out.astype(np.int8).reshape(shape)


# --------------------------------------------------------------------------
# pointwise


def lut_s8(x, table):
    """mcu_lut_s8: out[i] = table[x[i] + 128]."""
    table = _s8(table)
    if table.shape != (256,):
        raise ValueError("table must hold 256 int8 entries")
    return table[_s8(x).astype(np.int64) + 128]


def requantize_s8(x, *, input_offset, multiplier, shift, output_offset, act_min=-128, act_max=127, size=None):
    """mcu_requantize_s8: clamp(rq(q + input_offset, multiplier, shift) + output_offset, act_min, act_max)."""
    return finish(_s8(x).astype(np.int64) + int(input_offset), multiplier, shift, output_offset,
                   act_min, act_max)


def clamp_s8(x, *, act_min, act_max, size=None):
    """mcu_clamp_s8: elementwise clamp to [act_min, act_max]."""
    return np.clip(_s8(x), int(act_min), int(act_max)).astype(np.int8)


def inv_scale(scale: float) -> np.float32:
    """The float32 ``inv_scale`` argument of mcu_quantize_f32_s8 for a quantization scale (torch's 1.0 / scale)."""
    return np.float32(1.0 / float(scale))


def quantize_f32_s8(x, *, inv_scale, zero_point, size=None):
    """mcu_quantize_f32_s8, equal to torch.ops.quantized_decomposed.quantize_per_tensor on float32 input.

    v = x * inv_scale in float32 (torch multiplies by the float32 value of
    1.0 / scale); q = clamp(round_half_even(v) + zero_point, -128, 127).
    NaN maps to zero_point (torch leaves that case undefined).
    """
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        v = x * np.float32(inv_scale)
        r = np.rint(v) + np.float32(zero_point)
        q = np.clip(r, -128, 127)
    q = np.where(np.isnan(v), float(zero_point), q)
    return q.astype(np.int8)


def dequantize_s8_f32(x, *, scale, zero_point, size=None):
    """mcu_dequantize_s8_f32: (float32)(q - zero_point) * float32(scale), as torch's dequantize_per_tensor."""
    q = _s8(x).astype(np.float32) - np.float32(zero_point)
    return (q * np.float32(scale)).astype(np.float32)
