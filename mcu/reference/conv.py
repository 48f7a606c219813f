"""Bit-exact Python reference of the transposed convolution kernels:
``mcu_conv_transpose2d_s8`` and, in float64, what ``mcu_conv_transpose2d_f32`` computes.

TFLite defines int8 TRANSPOSE_CONV by scattering: every input pixel adds
``(x + input_offset) * w`` into the int32 accumulators of the output pixels its taps reach
(``o = i * stride - pad + k * dilation``), then each output channel adds its bias and takes the
per-channel requantization of convolution (:func:`mcu.reference.kernels.conv2d_s8`'s). This
reference scatters exactly like that; the C kernel gathers per output pixel, and integer sums do
not depend on the order, so both agree bit for bit (wrapped to int32 at the end, as the C's
uint32 accumulators are).

Layouts as the kernels read them: input NHWC, weights OHWI ``[out_c][kh][kw][in_c/groups]``,
output NHWC of the size given (which implies ``output_padding``).
"""

from __future__ import annotations

import numpy as np

from mcu.reference.arith import requantize, wrap_int32

__all__ = ["conv_transpose2d_s8", "conv_transpose2d_f64", "transposed_out_size", "phase_pack", "phase_unpack"]


def transposed_out_size(size: int, kernel: int, stride: int, pad: int, dilation: int, output_padding: int) -> int:
    """PyTorch's ConvTranspose output size along one dim."""
    return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1


def _scatter(x: np.ndarray, weight: np.ndarray, out_hw: tuple[int, int], stride: tuple[int, int],
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
    acc = _scatter(xo, weight.astype(np.int64), (oh, ow), (int(stride_h), int(stride_w)),
                   (int(pad_top), int(pad_left)), (int(dilation_h), int(dilation_w)), int(groups))
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    y = requantize(wrap_int32(acc), np.asarray(multiplier, np.int64), np.asarray(shift, np.int64))
    return np.clip(y + int(output_offset), int(act_min), int(act_max)).astype(np.int8)


def conv_transpose2d_f64(x, weight, bias, *, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                         output_hw) -> np.ndarray:
    """The float transposed convolution in float64 (NHWC in and out, OHWI weights): a tolerance oracle."""
    acc = _scatter(np.asarray(x, np.float64), np.asarray(weight, np.float64), tuple(output_hw), tuple(stride),
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
