"""Bit-exact Python references of the int8 normalisation, softmax and reduction kernels: ``mcu_softmax_s8``
(gemmlowp fixed point, as TFLite's reference int8 softmax and CMSIS-NN's arm_softmax_s8),
``mcu_log_softmax_s8`` and its tables, ``mcu_layer_norm_s8`` with its compile-time parameters
(runtime_c/kernels/normalisation/mcu_layer_norm_s8.c, whose header comment states the arithmetic) and
``mcu_reduce_s8``.

Layer norm, per row of n int8 codes q: S = sum q; d_i = n q_i - S; W = sum d_i^2 + E with E = round(n^3 eps / s_in^2);
1/sqrt(W) ~ R 2^(k-47) from a 16-bit integer square root of W normalised by 4^k into [2^60, 2^62) and
R = (2^32 - 1) // t; u_i = round(d_i R 2^(k-23)) (Q24, |u_i| <= 2^24); a_i = round(u_i m_c 2^-e_c) + b_c
(output steps in Q8, m_c 2^-e_c = sqrt(n) w_c / s_out 2^-16, b_c = round(256 bias_c / s_out));
y_i = clamp(floor((a_i + 128) / 256) + zp_out). Rounding shifts round halves up. RMS norm: S = n zp_in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mcu.reference.arith import (
    INT32_MAX,
    SOFTMAX_ACCUM_BITS,
    rounding_divide_by_pot,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul,
)
from mcu.reference.common import as_int8, as_int64, finish

MAX_COLS = 4096  # MCU_LAYER_NORM_S8_MAX_COLS
Q = 24           # u_i in Q24
SUB = 8          # the output in 1/256 steps before the last rounding
EPS_LIMIT = 1 << 61


@dataclass(frozen=True)
class LayerNormS8:
    """The constants of one int8 layer norm: per column multiplier, shift (a right shift in [1, 62])
    and bias (Q8 output steps); the 64-bit eps term; the output zero-point and clamp."""

    multipliers: np.ndarray
    shifts: np.ndarray
    bias: np.ndarray
    eps_term: int
    output_offset: int
    act_min: int = -128
    act_max: int = 127
    rms: bool = False         # RMS norm: no mean, the values taken from the input zero-point
    input_zero_point: int = 0

    @property
    def eps_words(self) -> tuple[int, int]:
        """The eps term as the kernel's (eps_lo, eps_hi) int32 words."""
        lo, hi = self.eps_term & 0xFFFFFFFF, self.eps_term >> 32
        return (lo - (1 << 32) if lo >= 1 << 31 else lo), hi


def affine_multiplier(real: float) -> tuple[int, int]:
    """(m, e) with real ~= m 2^-e, |m| < 2^31 and e in [1, 62]; None when real is 2^30 or more."""
    if real == 0.0:
        return 0, 1
    mant, exp = math.frexp(abs(real))  # abs(real) = mant 2^exp, mant in [0.5, 1)
    m, e = round(mant * (1 << 31)), 31 - exp
    if m == 1 << 31:
        m, e = m >> 1, e - 1
    if e > 62:  # below 2^-32: fewer bits, same shift
        m, e = round(abs(real) * (1 << 62)), 62
    if e < 1:
        raise ValueError(f"layer norm multiplier {real!r} is too large for the int8 kernel")
    return (m if real > 0 else -m), e


def layer_norm_params(cols: int, s_in: float, s_out: float, zp_out: int, eps: float,
                      weight: np.ndarray | None, bias: np.ndarray | None, rms: bool = False,
                      zp_in: int = 0) -> LayerNormS8:
    """The kernel's constants; ValueError when the layer cannot run at int8 (too many columns, an eps
    term past 2^61 or a multiplier past 2^30: scales the kernel's 64-bit arithmetic cannot hold)."""
    if not 1 <= cols <= MAX_COLS:
        raise ValueError(f"int8 layer norm over {cols} values (at most {MAX_COLS})")
    eps_term = round(cols ** 3 * float(eps) / float(s_in) ** 2)
    if eps_term >= EPS_LIMIT:
        raise ValueError(f"eps {eps} is too large for input scale {s_in} at int8")
    w = np.ones(cols) if weight is None else np.asarray(weight, np.float64).reshape(-1)
    b = np.zeros(cols) if bias is None else np.asarray(bias, np.float64).reshape(-1)
    scale = math.sqrt(cols) / float(s_out) * 2.0 ** (SUB - Q)
    pairs = [affine_multiplier(float(v) * scale) for v in w]
    bias_q = np.clip(np.rint(b / float(s_out) * (1 << SUB)), -(2**31), 2**31 - 1)
    return LayerNormS8(np.array([m for m, _ in pairs], np.int32), np.array([e for _, e in pairs], np.int32),
                       bias_q.astype(np.int32), int(eps_term), int(zp_out), rms=bool(rms), input_zero_point=int(zp_in))


def _round_shift(v: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """floor((v + 2^(s-1)) / 2^s) on int64 (s >= 1)."""
    s = np.asarray(s, np.int64)
    return (v + (np.int64(1) << (s - 1))) >> s


def layer_norm_s8(x: np.ndarray, p: LayerNormS8) -> np.ndarray:
    """mcu_layer_norm_s8 on ``x`` ([..., cols] int8), bit for bit."""
    x = np.asarray(x, np.int8)
    n = p.multipliers.size
    rows = x.reshape(-1, n).astype(np.int64)
    out = np.empty(rows.shape, np.int8)
    for r, q in enumerate(rows):
        d = n * q - (n * p.input_zero_point if p.rms else int(q.sum()))
        w = int((d * d).sum()) + p.eps_term
        recip, k = 0, 0
        if w:
            while w < 1 << 60:
                w, k = w << 2, k + 1
            recip = 0xFFFFFFFF // (math.isqrt(w) >> 15)
        zf = d * recip
        sh = 23 - k
        u = _round_shift(zf, sh) if sh > 0 else zf << -sh
        a = _round_shift(u * p.multipliers.astype(np.int64), p.shifts) + p.bias
        y = ((a + 128) >> 8) + p.output_offset
        out[r] = np.clip(y, p.act_min, p.act_max)
    return out.reshape(x.shape)


def reduce_s8(x: np.ndarray, op: str, input_offset: int, multiplier: int, shift: int, output_offset: int,
              act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """mcu_reduce_s8 on ``x`` ([outer, reduce, inner] int8), bit for bit: the int32 sum (sum, mean) or the
    extreme code (amax, amin) plus input_offset per term, requantized."""
    q = np.asarray(x, np.int8).astype(np.int64)
    fold = {"sum": np.sum, "mean": np.sum, "amax": np.max, "amin": np.min}[op]
    count = 1 if op in ("amax", "amin") else q.shape[1]
    acc = fold(q, axis=1) + count * int(input_offset)
    return finish(acc, np.int64(multiplier), np.int64(shift), output_offset, act_min, act_max)


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
    a = as_int64(a)
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
    a = as_int64(a)
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


def softmax_s8(x, *, input_multiplier, input_left_shift, diff_min, outer=None, axis=None, inner=None, hidden=None):
    """mcu_softmax_s8 over the middle axis of ``x.reshape(outer, axis, inner)`` (default: the last axis).

    Output scale 1/256, zero-point -128. Per (outer, inner) column:
    diff = q - max; taps with diff < diff_min output -128 and add nothing;
    e = exp_on_negative_values(srdhm(saturate_int32(diff * 2^left_shift), input_multiplier)) (Q0.31);
    sum = sum(rounding_divide_by_pot(e, 12)) (Q12.19); headroom = clz(sum);
    scale = one_over_one_plus_x(((sum << headroom) - 2^31) as Q0.31);
    out = clamp(rounding_divide_by_pot(srdhm(scale, e), 35 - headroom) - 128, -128, 127).

    ``hidden`` (bool, x's shape; mcu_softmax_masked_s8): positions that are minus infinity before the softmax.
    They take no part in the maximum or the sum and output -128 (probability 0); every column keeps one.
    """
    x = as_int8(x)
    shape = x.shape
    if outer is None:
        outer, axis, inner = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1], 1
    v = x.reshape(int(outer), int(axis), int(inner)).astype(np.int64)
    shown = np.ones(v.shape, dtype=bool)
    if hidden is not None:
        shown = ~np.asarray(hidden, dtype=bool).reshape(v.shape)
        if not shown.any(axis=1).all():
            raise ValueError("a softmax column with every position hidden has no value")
    diff = v - np.where(shown, v, -128).max(axis=1, keepdims=True)
    keep = shown & (diff >= int(diff_min))
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
