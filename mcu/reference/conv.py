"""Bit-exact Python references of the convolution, linear and matrix-product kernels: ``mcu_conv2d_s8``,
``mcu_depthwise_conv2d_s8``, ``mcu_linear_s8``, ``mcu_bmm_s8``, ``mcu_conv_transpose2d_s8`` and, in
float64, what ``mcu_conv_transpose2d_f32`` computes (layouts and keyword parameters as
:mod:`mcu.reference.common` describes).

Accumulation is int64 and then wrapped to int32 where the C accumulates in 32 bits (convolution,
linear: the C adds in uint32, i.e. modulo 2^32, as CMSIS-NN's int32 accumulators do on the device).

TFLite defines int8 TRANSPOSE_CONV by scattering: every input pixel adds
``(x + input_offset) * w`` into the int32 accumulators of the output pixels its taps reach
(``o = i * stride - pad + k * dilation``), then each output channel adds its bias and takes the
per-channel requantization of convolution (:func:`conv2d_s8`'s). This
reference scatters exactly like that; the C kernel gathers per output pixel, and integer sums do
not depend on the order, so both agree bit for bit (wrapped to int32 at the end, as the C's
uint32 accumulators are). Its layouts: input NHWC, weights OHWI ``[out_c][kh][kw][in_c/groups]``,
output NHWC of the size given (which implies ``output_padding``).
"""

from __future__ import annotations

import numpy as np

from mcu.reference.arith import requantize, wrap_int32
from mcu.reference.common import as_int8, as_int64, check_shape, finish, patches, window_geometry

__all__ = ["conv2d_s8", "depthwise_conv2d_s8", "linear_s8", "bmm_s8", "conv_transpose2d_s8", "conv_transpose2d_f64",
           "transposed_out_size", "phase_pack", "phase_unpack", "scatter_taps"]


def _conv_geometry(x, kh, kw, out_c, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, output):
    """Window geometry of a convolution (see window_geometry), with the output shape checked."""
    geo = window_geometry(x, kh, kw, dict(stride_h=stride_h, stride_w=stride_w, dilation_h=dilation_h,
                                           dilation_w=dilation_w, pad_top=pad_top, pad_left=pad_left,
                                           output=output))
    if output is not None:
        check_shape("output", output, (x.shape[0], geo[0], geo[1], out_c))
    return geo


def conv2d_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset, act_min=-128,
              act_max=127, stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1,
              dilation_w=1, groups=1, kernel_h=None, kernel_w=None, input=None, output=None):
    """mcu_conv2d_s8: x NHWC int8, weight OHWI int8 ``[out_c][kh][kw][in_c/groups]``, bias int32 or None.

    acc[c] = bias[c] + sum((x + input_offset) * w) over the window (taps in
    the padding contribute 0), wrapped to int32;
    out = clamp(requantize(acc, multiplier[c], shift[c]) + output_offset).
    """
    x, weight = as_int8(x), as_int8(weight)
    check_shape("input", input, x.shape)
    n, h, w, c = x.shape
    out_c, kh, kw, icg = weight.shape
    check_shape("kernel", (kernel_h or kh, kernel_w or kw), (kh, kw))
    groups = int(groups)
    if c != icg * groups or out_c % groups:
        raise ValueError("channels do not match groups")
    geo = _conv_geometry(x, kh, kw, out_c, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, output)
    out_h, out_w = geo[:2]
    xo = x.astype(np.float64) + float(input_offset)
    p = patches(xo, out_h, out_w, kh, kw, *geo[2:])  # (n, oh, ow, kh, kw, c)
    P, K, ocg = n * out_h * out_w, kh * kw * icg, out_c // groups
    p = p.reshape(P, kh, kw, groups, icg).transpose(3, 0, 1, 2, 4).reshape(groups, P, K)
    wg = weight.astype(np.float64).reshape(groups, ocg, K).transpose(0, 2, 1)
    # Integer-valued float64 products and sums stay far below 2^53: exact.
    acc = np.rint(np.matmul(p, wg)).astype(np.int64)  # (groups, P, ocg)
    acc = acc.transpose(1, 0, 2).reshape(n, out_h, out_w, out_c)
    if bias is not None:
        acc = acc + as_int64(bias)
    acc = wrap_int32(acc)
    return finish(acc, as_int64(multiplier), as_int64(shift), output_offset, act_min, act_max)


def depthwise_conv2d_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset,
                        act_min=-128, act_max=127, ch_mult=1, stride_h=1, stride_w=1, pad_top=0,
                        pad_left=0, dilation_h=1, dilation_w=1, kernel_h=None, kernel_w=None,
                        input=None, output=None):
    """mcu_depthwise_conv2d_s8: weight ``[kh][kw][out_c]``; output channel o reads input channel o // ch_mult."""
    x, weight = as_int8(x), as_int8(weight)
    check_shape("input", input, x.shape)
    n, h, w, c = x.shape
    kh, kw, out_c = weight.shape
    check_shape("kernel", (kernel_h or kh, kernel_w or kw), (kh, kw))
    if out_c != c * int(ch_mult):
        raise ValueError("weight channels must be input channels * ch_mult")
    geo = _conv_geometry(x, kh, kw, out_c, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, output)
    out_h, out_w = geo[:2]
    xo = x.astype(np.int64) + int(input_offset)
    p = patches(xo, out_h, out_w, kh, kw, *geo[2:])  # (n, oh, ow, kh, kw, c)
    p = p[..., np.arange(out_c) // int(ch_mult)]
    acc = np.einsum("nhwijc,ijc->nhwc", p, weight.astype(np.int64))
    if bias is not None:
        acc = acc + as_int64(bias)
    acc = wrap_int32(acc)
    return finish(acc, as_int64(multiplier), as_int64(shift), output_offset, act_min, act_max)


def linear_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset, act_min=-128,
              act_max=127, batch=None, in_features=None, out_features=None):
    """mcu_linear_s8: x ``[batch][in]``, weight ``[out][in]``, per-output-feature requantization."""
    x, weight = as_int8(x), as_int8(weight)
    x = x.reshape(-1, weight.shape[1]) if x.ndim != 2 else x
    check_shape("linear", (batch or x.shape[0], in_features or x.shape[1], out_features or weight.shape[0]),
                 (x.shape[0], x.shape[1], weight.shape[0]))
    if x.shape[1] != weight.shape[1]:
        raise ValueError("in_features mismatch")
    xo = x.astype(np.float64) + float(input_offset)
    acc = np.rint(xo @ weight.astype(np.float64).T).astype(np.int64)
    if bias is not None:
        acc = acc + as_int64(bias)
    acc = wrap_int32(acc)
    return finish(acc, as_int64(multiplier), as_int64(shift), output_offset, act_min, act_max)


def bmm_s8(a: np.ndarray, b: np.ndarray, a_offset: int, b_offset: int, multiplier: int, shift: int,
           output_offset: int, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """mcu_bmm_s8 on a [batch, m, k] and b [batch, k, n] int8, bit for bit."""
    acc = np.matmul(np.asarray(a, np.int8).astype(np.int64) + int(a_offset),
                    np.asarray(b, np.int8).astype(np.int64) + int(b_offset))
    return finish(acc, np.int64(multiplier), np.int64(shift), output_offset, act_min, act_max)



def transposed_out_size(size: int, kernel: int, stride: int, pad: int, dilation: int, output_padding: int) -> int:
    """PyTorch's ConvTranspose output size along one dim."""
    return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1


def scatter_taps(x: np.ndarray, weight: np.ndarray, out_hw: tuple[int, int], stride: tuple[int, int],
                 pad: tuple[int, int], dilation: tuple[int, int], groups: int) -> np.ndarray:
    """sum over taps of x[n, i, j, g-group] . w[oc, kh, kw, :] into output (n, oh, ow, oc); any dtype."""
    n, h, w, c = x.shape
    out_c, kh, kw, icg = weight.shape
    if c != icg * groups or out_c % groups:
        raise ValueError("channels do not match groups")
    ocg = out_c // groups
    oh, ow = out_hw
    acc = np.zeros((n, oh, ow, out_c), dtype=x.dtype)
    xg = x.reshape(n, h, w, groups, icg)
    wg = weight.reshape(groups, ocg, kh, kw, icg)
    rows = np.arange(h) * stride[0] - pad[0]
    cols = np.arange(w) * stride[1] - pad[1]
    for a in range(kh):
        r = rows + a * dilation[0]
        rk = (r >= 0) & (r < oh)
        for b in range(kw):
            cc = cols + b * dilation[1]
            ck = (cc >= 0) & (cc < ow)
            if not rk.any() or not ck.any():
                continue
            # (n, h, w, groups, ocg): every input pixel's contribution through tap (a, b)
            contrib = np.einsum("nhwgi,goi->nhwgo", xg, wg[:, :, a, b, :]).reshape(n, h, w, out_c)
            sub = contrib[:, rk][:, :, ck]
            acc[:, r[rk][:, None], cc[ck][None, :], :] += sub
    return acc


def conv_transpose2d_s8(x, weight, bias, multiplier, shift, *, input_offset, output_offset, act_min=-128,
                        act_max=127, stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1, dilation_w=1,
                        groups=1, output, kernel_h=None, kernel_w=None, input=None):
    """mcu_conv_transpose2d_s8. ``output`` is the NHWC output shape (n, oh, ow, out_c)."""
    x, weight = np.asarray(x), np.asarray(weight)
    if x.dtype != np.int8 or weight.dtype != np.int8:
        raise TypeError("input and weight must be int8")
    if input is not None and tuple(input) != x.shape:
        raise ValueError(f"input {tuple(input)} does not match the array shape {x.shape}")
    out_c, kh, kw, _ = weight.shape
    if (kernel_h or kh, kernel_w or kw) != (kh, kw):
        raise ValueError("kernel size does not match the weights")
    n, oh, ow, oc = (int(v) for v in output)
    if (n, oc) != (x.shape[0], out_c):
        raise ValueError("output batch or channels do not match")
    xo = x.astype(np.int64) + int(input_offset)
    acc = scatter_taps(xo, weight.astype(np.int64), (oh, ow), (int(stride_h), int(stride_w)),
                       (int(pad_top), int(pad_left)), (int(dilation_h), int(dilation_w)), int(groups))
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    y = requantize(wrap_int32(acc), np.asarray(multiplier, np.int64), np.asarray(shift, np.int64))
    return np.clip(y + int(output_offset), int(act_min), int(act_max)).astype(np.int8)


def conv_transpose2d_f64(x, weight, bias, *, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                         output_hw) -> np.ndarray:
    """The float transposed convolution in float64 (NHWC in and out, OHWI weights): a tolerance oracle."""
    acc = scatter_taps(np.asarray(x, np.float64), np.asarray(weight, np.float64), tuple(output_hw), tuple(stride),
                       tuple(padding), tuple(dilation), int(groups))
    return acc if bias is None else acc + np.asarray(bias, np.float64)


def phase_pack(weight: np.ndarray, stride_h: int, stride_w: int) -> np.ndarray:
    """OHWI weights in the order mcu_conv_transpose2d_phased_s8 reads them (flat): per output phase
    (a, b) (rows a, a + stride_h, ...; columns b, b + stride_w, ...), per output channel, those taps
    with their input channels."""
    kh, kw = weight.shape[1:3]
    blocks = [weight[:, a::stride_h, b::stride_w, :].reshape(-1)
              for a in range(min(stride_h, kh)) for b in range(min(stride_w, kw))]
    return np.concatenate(blocks)


def phase_unpack(packed: np.ndarray, shape: tuple[int, int, int, int], stride_h: int, stride_w: int) -> np.ndarray:
    """The OHWI weights of :func:`phase_pack`'s output."""
    out_c, kh, kw, in_c = shape
    weight = np.zeros(shape, dtype=packed.dtype)
    flat, start = np.asarray(packed).reshape(-1), 0
    for a in range(min(stride_h, kh)):
        for b in range(min(stride_w, kw)):
            block = weight[:, a::stride_h, b::stride_w, :]
            weight[:, a::stride_h, b::stride_w, :] = flat[start:start + block.size].reshape(block.shape)
            start += block.size
    return weight
