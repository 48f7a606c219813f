"""The int8 integer arithmetic of runtime_c/include/mcu/kernels_s8.h, in numpy.

Every function here mirrors a piece of C in runtime_c/kernels/common/requant.h
(or a kernel) exactly, with int64 intermediates so nothing overflows silently.
Array functions accept numpy integer arrays or Python ints and broadcast their
arguments; results are int64 arrays (callers narrow them).

The doubling high multiply appears in two spellings that are the same
function: :func:`rounding_doubling_high_mul` is the one inside
:func:`requantize` as the header writes it (CMSIS-NN's
``arm_nn_doubling_high_mult_no_sat``): ``(a*b + 2^30) >> 31`` with a floor
shift, so ties round up; :func:`saturating_rounding_doubling_high_mul` is
gemmlowp's ``SaturatingRoundingDoublingHighMul`` (nudge by +-2^30 and divide
truncating toward zero), used by the softmax code. Since
``trunc((ab + 1 - 2^30) / 2^31) == floor((ab + 2^30) / 2^31)`` for ``ab < 0``,
gemmlowp's rounding also sends ties toward +infinity, and the two agree on
every input (tests check it); both saturate the single overflowing case
``INT32_MIN * INT32_MIN`` to ``INT32_MAX``. Both are kept as written by their
sources so each reference reads like the code it mirrors.

Parameter helpers compute kernel parameters from real scales the way TFLite
does (``QuantizeMultiplier``, the add/mul preparation, ``PreprocessSoftmaxScaling``
and ``CalculateInputRadius``), in float64.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

#: Integer bits of the scaled input difference in the int8 softmax (Q5.26).
SOFTMAX_INPUT_INTEGER_BITS = 5
#: Integer bits of the softmax sum of exponentials (Q12.19).
SOFTMAX_ACCUM_BITS = 12


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def saturate_int32(x) -> np.ndarray:
    return np.clip(_i64(x), INT32_MIN, INT32_MAX)


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap to int32 (what a uint32 accumulator cast back to int32 gives)."""
    x = _i64(x)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def rounding_doubling_high_mul(a, b) -> np.ndarray:
    """``(a*b + 2^30) >> 31`` (floor shift), saturating ``INT32_MIN * INT32_MIN`` to ``INT32_MAX``."""
    a, b = _i64(a), _i64(b)
    y = (a * b + (1 << 30)) >> 31
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, y)


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul: (a*b +- 2^30) / 2^31 truncated (equal to
    :func:`rounding_doubling_high_mul`: ties round toward +infinity)."""
    a, b = _i64(a), _i64(b)
    ab = a * b
    v = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    y = np.where(v >= 0, v >> 31, -((-v) >> 31))  # C division truncates toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, y)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: round(x / 2^exponent), ties away from zero (exponent >= 0).

    Exact for any exponent up to 62; the C version covers [0, 31] and the
    softmax handles larger exponents (where the result of a value below 2^31
    is 0) itself.
    """
    x, e = _i64(x), _i64(exponent)
    if np.any(e < 0) or np.any(e > 62):
        raise ValueError("exponent must be in [0, 62]")
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def saturating_left_shift(x, exponent) -> np.ndarray:
    """saturate_int32(x * 2^exponent) for exponent >= 0 (gemmlowp's SaturatingRoundingMultiplyByPOT > 0)."""
    return saturate_int32(_i64(x) << _i64(exponent))


def requantize(x, multiplier, shift) -> np.ndarray:
    """Apply the Q31 multiplier and shift (see kernels_s8.h) to int32 values ``x``.

    ``left = max(shift, 0)``, ``right = max(-shift, 0)``;
    ``rounding_divide_by_pot(rounding_doubling_high_mul(saturate_int32(x * 2^left), multiplier), right)``.
    ``multiplier`` and ``shift`` broadcast against ``x`` (per-channel arrays
    along the last axis, for example).
    """
    x, m, s = _i64(x), _i64(multiplier), _i64(shift)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    y = rounding_doubling_high_mul(saturating_left_shift(x, left), m)
    return rounding_divide_by_pot(y, right)


# --------------------------------------------------------------------------
# parameter helpers


def _frexp_q31(real: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier without the shift clamp: (q, exp) with real ~= q * 2^(exp - 31)."""
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"multiplier must be finite and non-negative, got {real!r}")
    if real == 0.0:
        return 0, 0
    frac, exp = math.frexp(real)
    v = frac * (1 << 31)  # exact: only the exponent changes
    q = int(v)
    if v - q >= 0.5:  # std::round: half away from zero (v > 0)
        q += 1
    if q == 1 << 31:
        q //= 2
        exp += 1
    if exp < -31:
        return 0, 0
    return q, exp


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(multiplier, shift) with real ~= multiplier * 2^(shift - 31), as TFLite's QuantizeMultiplier.

    ``multiplier`` is in [2^30, 2^31 - 1] (or 0 for 0 and for values below
    2^-32, which TFLite also flushes to 0), ``shift`` in [-31, 30]. Real
    multipliers of 2^30 or more do not fit the shift range and saturate to
    (2^31 - 1, 30). Negative or non-finite values raise ValueError.
    """
    q, exp = _frexp_q31(float(real))
    if exp > 30:
        return INT32_MAX, 30
    return q, exp


def quantize_multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel :func:`quantize_multiplier`: (multiplier int32 array, shift int32 array)."""
    pairs = [quantize_multiplier(float(r)) for r in np.asarray(reals, dtype=np.float64).ravel()]
    m = np.array([p[0] for p in pairs], dtype=np.int32)
    s = np.array([p[1] for p in pairs], dtype=np.int32)
    return m, s


def add_params(s_a: float, s_b: float, s_out: float, *, zp_a: int = 0, zp_b: int = 0,
               zp_out: int = 0, left_shift: int = 20) -> dict:
    """Parameters of mcu_add_s8/mcu_sub_s8 (field names of mcu_binary_s8_params), as TFLite's add.

    twice_max = 2 * max(s_a, s_b); a' = (a - zp_a) * 2^20 * s_a / twice_max,
    likewise b'; out = (a' + b') * twice_max / (2^20 * s_out) + zp_out.
    """
    twice_max = 2.0 * max(float(s_a), float(s_b))
    if not (twice_max > 0 and s_out > 0):
        raise ValueError("scales must be positive")
    a_m, a_s = quantize_multiplier(float(s_a) / twice_max)
    b_m, b_s = quantize_multiplier(float(s_b) / twice_max)
    o_m, o_s = quantize_multiplier(twice_max / ((1 << left_shift) * float(s_out)))
    return dict(a_offset=-int(zp_a), b_offset=-int(zp_b), a_multiplier=a_m, a_shift=a_s,
                b_multiplier=b_m, b_shift=b_s, left_shift=left_shift, out_multiplier=o_m,
                out_shift=o_s, output_offset=int(zp_out))


def mul_params(s_a: float, s_b: float, s_out: float, *, zp_a: int = 0, zp_b: int = 0,
               zp_out: int = 0) -> dict:
    """Parameters of mcu_mul_s8: the output multiplier s_a * s_b / s_out (the add-only fields are 0)."""
    if not (s_a > 0 and s_b > 0 and s_out > 0):
        raise ValueError("scales must be positive")
    o_m, o_s = quantize_multiplier(float(s_a) * float(s_b) / float(s_out))
    return dict(a_offset=-int(zp_a), b_offset=-int(zp_b), a_multiplier=0, a_shift=0,
                b_multiplier=0, b_shift=0, left_shift=0, out_multiplier=o_m, out_shift=o_s,
                output_offset=int(zp_out))


def softmax_params(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(input_multiplier, input_left_shift, diff_min) of the int8 softmax, as TFLite computes them.

    PreprocessSoftmaxScaling with 5 integer bits: the real multiplier
    min(beta * input_scale * 2^26, 2^31 - 1) as a Q31 multiplier and a left
    shift in [0, 31]; diff_min = -CalculateInputRadius(5, left_shift) =
    -floor((2^5 - 1) * 2^26 / 2^left_shift). Raises ValueError when
    beta * input_scale < 2^-26 (TFLite rejects that too: the inputs could not
    be told apart).
    """
    bits = SOFTMAX_INPUT_INTEGER_BITS
    real = min(float(beta) * float(input_scale) * float(1 << (31 - bits)), float((1 << 31) - 1))
    if not real > 1.0:
        raise ValueError(f"beta * input_scale = {beta * input_scale!r} is too small for the int8 softmax")
    multiplier, left_shift = _frexp_q31(real)
    max_input_rescaled = 1.0 * ((1 << bits) - 1) * (1 << (31 - bits)) / (1 << left_shift)
    diff_min = -int(math.floor(max_input_rescaled))
    return multiplier, left_shift, diff_min


def lut_table(fn: Callable, s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """The 256-entry int8 table of a pointwise function, indexed by q_in + 128.

    ``out = clamp(round_half_even(fn(s_in * (q - zp_in)) / s_out) + zp_out, -128, 127)``
    in float64; ``fn`` takes and returns a float64 numpy array (numpy ufuncs
    work; a torch function is called on a float64 tensor).
    """
    q = np.arange(-128, 128, dtype=np.float64)
    x = float(s_in) * (q - float(zp_in))
    try:
        y = fn(x)
    except TypeError:
        # lazy: keeps torch out of this module's import
        import torch

        y = fn(torch.from_numpy(x)).numpy()
    y = np.asarray(y, dtype=np.float64)
    if y.shape != x.shape or np.isnan(y).any():
        raise ValueError("fn must map 256 float64 values to 256 non-NaN values")
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.rint(y / float(s_out)) + float(zp_out)
    return np.clip(r, -128, 127).astype(np.int8)
