"""Python integer references of the int8 kernels that replace fp32 islands (issue 18): bit for bit what
runtime_c/kernels/mcu_maximum_s8.c and mcu_minimum_s8.c compute."""

from __future__ import annotations

import numpy as np

from mcu.reference.kernels import finish, operands, requantize
from mcu.reference.arith import quantize_multiplier


def _extreme(pick, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
             out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides, b_strides):
    a, b = operands(a, b, rank, out_shape, a_strides, b_strides)
    a1 = requantize((a + int(a_offset)) << int(left_shift), a_multiplier, a_shift)
    b1 = requantize((b + int(b_offset)) << int(left_shift), b_multiplier, b_shift)
    return finish(pick(a1, b1), out_multiplier, out_shift, output_offset, act_min, act_max)


def maximum_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
               out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None, out_shape=None,
               a_strides=None, b_strides=None) -> np.ndarray:
    """mcu_maximum_s8 (TFLite MAXIMUM with its own output scale): a' and b' as in add_s8;
    out = clamp(rq(max(a', b'), out_multiplier, out_shift) + output_offset)."""
    return _extreme(np.maximum, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
                    b_strides)


def minimum_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
               out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None, out_shape=None,
               a_strides=None, b_strides=None) -> np.ndarray:
    """mcu_minimum_s8: as :func:`maximum_s8` with min(a', b')."""
    return _extreme(np.minimum, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
                    b_strides)


DIV_BITS = 16  # MCU_BINARY_S8_DIV_BITS


def div_params(s_a: float, s_b: float, s_out: float, *, zp_a: int = 0, zp_b: int = 0, zp_out: int = 0) -> dict:
    """Parameters of mcu_div_s8: the Q16 quotient of the offset codes times s_a / (s_b s_out 2^16)."""
    if not (s_a > 0 and s_b > 0 and s_out > 0):
        raise ValueError("scales must be positive")
    m, s = quantize_multiplier(float(s_a) / (float(s_b) * float(s_out) * 2.0**DIV_BITS))
    return dict(a_offset=-int(zp_a), b_offset=-int(zp_b), a_multiplier=0, a_shift=0, b_multiplier=0, b_shift=0,
                left_shift=0, out_multiplier=m, out_shift=s, output_offset=int(zp_out))


def div_s8(a, b, *, a_offset, b_offset, out_multiplier, out_shift, output_offset, act_min=-128, act_max=127,
           rank=None, out_shape=None, a_strides=None, b_strides=None, a_multiplier=None, a_shift=None,
           b_multiplier=None, b_shift=None, left_shift=None) -> np.ndarray:
    """mcu_div_s8: q = round((a + a_offset) 2^16 / (b + b_offset)), half away from zero; out = clamp(rq(q) +
    output_offset); a zero divisor gives act_max (act_min) for a positive (negative) numerator, 0 / 0 the
    output's zero."""
    a, b = operands(a, b, rank, out_shape, a_strides, b_strides)
    num, den = a + int(a_offset), b + int(b_offset)
    d = np.where(den == 0, 1, np.abs(den))
    q = (np.abs(num) * (1 << DIV_BITS) + d // 2) // d
    q = np.where((num < 0) != (den < 0), -q, q)
    out = finish(q, out_multiplier, out_shift, output_offset, act_min, act_max).astype(np.int64)
    zero = int(np.clip(int(output_offset), int(act_min), int(act_max)))
    ends = np.where(num > 0, int(act_max), np.where(num < 0, int(act_min), zero))
    return np.where(den == 0, ends, out).astype(np.int8)


def prelu_params(s_in: float, s_alpha: float, s_out: float, *, zp_in: int = 0, zp_out: int = 0) -> dict:
    """Parameters of mcu_prelu_s8 (TFLite PRELU) but the shape: s_in / s_out and s_in s_alpha / s_out."""
    pm, ps = quantize_multiplier(s_in / s_out)
    nm, ns = quantize_multiplier(s_in * s_alpha / s_out)
    return dict(input_offset=-int(zp_in), pos_multiplier=pm, pos_shift=ps, neg_multiplier=nm, neg_shift=ns,
                output_offset=int(zp_out))


def quantize_slopes(slopes: np.ndarray) -> tuple[np.ndarray, float]:
    """Symmetric int8 slopes [-127, 127] and their scale (max |slope| / 127; 1 when all are zero)."""
    slopes = np.asarray(slopes, dtype=np.float64).reshape(-1)
    top = float(np.max(np.abs(slopes))) if slopes.size else 0.0
    scale = top / 127.0 if top > 0 else 1.0
    return np.clip(np.round(slopes / scale), -127, 127).astype(np.int8), scale


def prelu_s8(x, alpha, *, channels, inner, input_offset, pos_multiplier, pos_shift, neg_multiplier, neg_shift,
             output_offset, act_min=-128, act_max=127, size=None) -> np.ndarray:
    """mcu_prelu_s8 on a flat int8 array in memory order: element i has slope alpha[(i / inner) % channels]."""
    xs = np.asarray(x, dtype=np.int8).reshape(-1).astype(np.int64) + int(input_offset)
    c = (np.arange(xs.size) // int(inner)) % int(channels)
    neg = xs * np.asarray(alpha, dtype=np.int8).reshape(-1).astype(np.int64)[c]
    y = np.where(xs >= 0, requantize(xs, pos_multiplier, pos_shift), requantize(neg, neg_multiplier, neg_shift))
    return np.clip(y + int(output_offset), int(act_min), int(act_max)).astype(np.int8)


LOG_SOFTMAX_SCALE, LOG_SOFTMAX_ZERO_POINT = 16.0 / 256.0, 127  # TFLite's int8 LOG_SOFTMAX output: [-16, 0]


def log_softmax_tables(s_in: float, s_out: float) -> tuple[np.ndarray, int, int]:
    """(exp table, input multiplier, log multiplier) of mcu_log_softmax_s8: exp(-k s_in) in Q20 for the 256
    possible distances below a row's maximum, s_in / s_out and ln 2 / s_out in Q16 (computed in float64)."""
    k = np.arange(256, dtype=np.float64)
    table = np.round(np.exp(-k * float(s_in)) * 2.0**20).astype(np.int64)
    a = int(round(float(s_in) / float(s_out) * 2.0**16))
    c = int(round(np.log(2.0) / float(s_out) * 2.0**16))
    if not (0 <= a < 2**31 and 0 <= c < 2**31):
        raise ValueError("log_softmax scales out of the kernel's range")
    return table.astype(np.int32), a, c


def _log2_q16(s: int) -> int:
    msb = int(s).bit_length() - 1
    f = s >> (msb - 30) if msb >= 30 else s << (30 - msb)
    frac = 0
    for _ in range(16):
        f = (f * f) >> 30
        frac <<= 1
        if f >= 1 << 31:
            f >>= 1
            frac |= 1
    return (msb << 16) + frac


def _round_q16(v: np.ndarray) -> np.ndarray:
    return (np.asarray(v, dtype=np.int64) + (1 << 15)) >> 16  # floor of v + 1/2: halves up, either sign


def log_softmax_s8(x, exp_table, *, outer, axis, inner, input_multiplier, log_multiplier, output_offset) -> np.ndarray:
    """mcu_log_softmax_s8 on a flat int8 array in memory order ([outer][axis][inner])."""
    q = np.asarray(x, dtype=np.int8).reshape(int(outer), int(axis), int(inner)).astype(np.int64)
    table = np.asarray(exp_table, dtype=np.int64)
    m = q.max(axis=1, keepdims=True)
    sums = table[m - q].sum(axis=1)  # [outer, inner]
    logs = np.vectorize(lambda s: _log2_q16(int(s)) - (20 << 16), otypes=[np.int64])(sums)
    b = _round_q16(logs * int(log_multiplier))[:, None, :]
    r = int(output_offset) + _round_q16((q - m) * int(input_multiplier) - b)
    return np.clip(r, -128, 127).astype(np.int8).reshape(-1)
