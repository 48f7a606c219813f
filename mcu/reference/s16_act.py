"""w8a16's activations and products: the arithmetic of ``mcu_activation_s16`` (sigmoid, tanh), ``mcu_softmax_s16``
and ``mcu_mul_s16`` (runtime_c/kernels/), bit for bit, with the parameters each derives from its tensors' scales.

All follow CMSIS-NN's int16 kernels (TFLite Micro's 16x8 LOGISTIC, TANH, SOFTMAX and MUL); int16 codes have zero
point 0.

sigmoid, tanh (``arm_nn_activation_s16``): ``v = (x * m + 2^(sh - 1)) >> sh`` brings the input to steps of
1 / (3 * 2^12), where ``m / 2^sh ~= s_in * 3 * 2^12`` with ``m`` in [2^14, 2^15) (TFLite's general multiplier;
for a power-of-two input scale it is exactly CMSIS-NN's ``3 << left_shift``). ``|v|`` indexes the table of
sigmoid(k / 24) (:func:`mcu.reference.lstm_s16.sigmoid_table`) at ``|v| >> 9`` (tanh: ``>> 8``, as
2 sigmoid(2x) - 1) with linear interpolation on the bits below; the output's scale is 2^-15.

softmax (``arm_softmax_s16``): per row, ``d = x - max`` requantized by s_in / (10 / 65535) to the exp table's
input (65536 steps over [-10, 0]), both tables of 513 int16 entries read at ``256 + (v >> 7)`` with a 7-bit
interpolation; the sum normalised to 16 bits indexes the 1 / (1 + x) table; each exp times that reciprocal,
shifted back, is the probability at scale 2^-15. The tables are TFLite's ``gen_lut``: f sampled at 512 steps,
each sample lowered by half the chord's error at the step's midpoint (all in float32), the last entry f(max).

mul (``arm_elementwise_mul_s16``): ``a * b`` (exact in int32) requantized by s_a s_b / s_out.

sub (TFLite's 16x8 SUB; CMSIS-NN has none): ``arm_elementwise_add_s16``'s arithmetic with ``a' - b'`` for the sum;
maximum and minimum (ours, as the int8 ones): ``max(a', b')`` or ``min(a', b')`` of the add's rescaled operands.

lut (ours, TFLite's int16 LUT conventions; CMSIS-NN has no int16 table kernel): every other elementwise function
(GELU, SiLU, hardswish, ELU, exp, log, arithmetic with a number...) as 513 int16 entries over the input's whole
code range, entry i at code -32768 + 128 i, read as softmax's tables are (``256 + (x >> 7)``, a 7-bit
interpolation); each entry lowered by half the chord's rounded error at the segment's midpoint (gen_lut's
correction), the last one f at code 32768.

requantize (ours; TFLite's int16 QUANTIZE of an int16 input): ``x`` requantized by s_in / s_out, where two readers
of one tensor want different scales (a table's fixed 2^-15 output read by an op with an observer of its own).
"""

from __future__ import annotations

import math

import numpy as np

from mcu.reference import arith
from mcu.reference.lstm_s16 import SIGMOID_TABLE

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
OUTPUT_SCALE = 2.0 ** -15  # sigmoid's, tanh's and softmax's int16 output
KINDS = {"sigmoid": 0, "tanh": 1}  # mcu_activation_s16_kind
_STEPS = 3.0 * 4096.0  # the activation table's input steps per unit


def _wrap16(v) -> np.ndarray:
    """The C's (int16_t) of a value outside int16 (two's complement)."""
    return (np.asarray(v, dtype=np.int64) + 32768) % 65536 - 32768


# --- sigmoid and tanh ----------------------------------------------------------------------------------------

def activation_params(s_in: float) -> tuple[int, int]:
    """(input_multiplier, input_shift) of TFLite's int16 LOGISTIC/TANH for input scale ``s_in``: the largest
    doubling of s_in * 3 * 2^12 that stays at most 32767 (so an int16 code times it fits int32), truncated. An
    input scale above 32767 / (3 * 2^12) (|x| past 87,000) has no such multiplier and raises ValueError."""
    real = float(s_in) * _STEPS
    if not (real > 0.0 and math.isfinite(real)) or real > 32767.0:
        raise ValueError(f"a 16x8 sigmoid or tanh takes input scales in (0, {32767.0 / _STEPS:.3f}]")
    shift = 0
    while real <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        real *= 2.0
    return int(real), shift


def activation_s16(x, input_multiplier: int, input_shift: int, kind: str) -> np.ndarray:
    """mcu_activation_s16 on int16 ``x``: ``kind`` "sigmoid" or "tanh"; int16 codes of scale 2^-15."""
    x = np.asarray(x, dtype=np.int64)
    rounding = (1 << (input_shift - 1)) if input_shift > 0 else 0
    v = (x * int(input_multiplier) + rounding) >> int(input_shift)
    idx_shift = 9 if kind == "sigmoid" else 8
    a = np.abs(v)
    uh = a >> idx_shift
    inside = uh < 255
    k = np.where(inside, uh, 0)
    ua, ub = SIGMOID_TABLE[k], SIGMOID_TABLE[k + 1]
    ut = a & ((1 << idx_shift) - 1)
    top = (0x7FFF << 10) if kind == "sigmoid" else (0xFFFF << 8)
    r = np.where(inside, (ua << idx_shift) + ut * (ub - ua), top)
    if kind == "sigmoid":
        y = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
    else:
        y = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
    return _wrap16(y).astype(np.int16)


# --- softmax -------------------------------------------------------------------------------------------------

def gen_lut(fn, lo: float, hi: float) -> np.ndarray:
    """TFLite's gen_lut for int16 in and out: 513 entries of fn over [lo, hi] scaled by 2^15, each of the first
    512 lowered by half the rounded error of the chord at the step's midpoint; float32 arithmetic, rounding half
    away from zero, clamped to int16."""
    f32 = np.float32

    def rnd(v: np.float32) -> np.float32:
        return f32(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))

    step = f32(f32(hi) - f32(lo)) / f32(512)
    half = step / f32(2)
    inv = f32(65536) / f32(2)
    table = []
    for i in range(512):
        x0 = f32(lo) + f32(i) * step
        val, mid, nxt = f32(fn(x0)), f32(fn(x0 + half)), f32(fn(f32(lo) + f32(i + 1) * step))
        sample = rnd(val * inv)
        interp = rnd((nxt * inv + rnd(val * inv)) / f32(2))
        bias = rnd((interp - rnd(mid * inv)) / f32(2))
        table.append(min(max(float(sample - bias), INT16_MIN), INT16_MAX))
    table.append(min(max(float(rnd(f32(fn(f32(hi))) * inv)), INT16_MIN), INT16_MAX))
    return np.array(table, dtype=np.int64)


def _exp(v: np.float32) -> np.float32:
    return np.float32(np.exp(np.float32(v)))


def _one_over_one_plus(v: np.float32) -> np.float32:
    return np.float32(np.float32(1.0) / (np.float32(1.0) + np.float32(v)))


EXP_TABLE = gen_lut(_exp, -10.0, 0.0)
ONE_OVER_ONE_PLUS_TABLE = gen_lut(_one_over_one_plus, 0.0, 1.0)


def softmax_params(s_in: float, beta: float = 1.0) -> tuple[int, int]:
    """(input_multiplier, input_shift) of TFLite's int16 SOFTMAX: s_in * beta over the exp table's step,
    10 / 65535."""
    return arith.quantize_multiplier(float(s_in) * beta / (10.0 / 65535.0))


def table_read(table: np.ndarray, v) -> np.ndarray:
    """CMSIS-NN's int16 table read: entry 256 + (v >> 7) and the next, interpolated on v's low 7 bits."""
    v = np.asarray(v, dtype=np.int64)
    index = 256 + (v >> 7)
    base = table[index]
    slope = _wrap16(table[index + 1] - base)
    delta = _wrap16((slope * (v & 0x7F) + 64) >> 7)
    return _wrap16(base + delta)


def _softmax_parts(rows, input_multiplier: int, input_shift: int, hidden=None):
    x = np.asarray(rows, dtype=np.int64)
    shown = np.ones(x.shape, dtype=bool) if hidden is None else ~np.asarray(hidden, dtype=bool).reshape(x.shape)
    if not shown.any(axis=1).all():
        raise ValueError("a softmax row with every position hidden has no value")
    diff = x - np.where(shown, x, INT16_MIN).max(axis=1, keepdims=True)
    scaled = arith.requantize(diff, input_multiplier, input_shift)
    exps = np.where(shown, table_read(EXP_TABLE, np.clip(scaled + INT16_MAX, INT16_MIN, INT16_MAX)), 0)
    total = exps.sum(axis=1, keepdims=True)
    headroom = np.array([[32 - int(t).bit_length()] for t in total.ravel()], dtype=np.int64).reshape(total.shape)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    return exps, headroom, shifted - 98304


def softmax_s16(rows, input_multiplier: int, input_shift: int, hidden=None) -> np.ndarray:
    """mcu_softmax_s16 on int16 ``rows`` [n, axis]: int16 probabilities of scale 2^-15 (zero point 0).
    ``hidden`` (bool [n, axis]; mcu_softmax_masked_s16): positions that are minus infinity before the softmax (a
    constant attention mask): no part in the row's maximum and sum, probability 0; every row keeps one."""
    exps, headroom, recip_in = _softmax_parts(rows, input_multiplier, input_shift, hidden)
    # TFLite's reference saturates the reciprocal's input (CMSIS-NN's kernel wraps it to -32768 when the
    # normalised sum rounds up to 2^17)
    recip = table_read(ONE_OVER_ONE_PLUS_TABLE, np.clip(recip_in, INT16_MIN, INT16_MAX))
    y = (((exps * recip) >> (30 - headroom)) + 1) >> 1
    return np.minimum(y, INT16_MAX).astype(np.int16)  # (a row of one element rounds to 32769)


def cmsis_nn_differs(rows, input_multiplier: int, input_shift: int) -> np.ndarray:
    """Per row: whether CMSIS-NN's arm_softmax_s16 gives another result than mcu_softmax_s16: where the
    normalised sum rounds up to 2^17 (it wraps the reciprocal's input to -32768, doubling the row) or a
    probability rounds past 32767 (it wraps to negative)."""
    exps, headroom, recip_in = _softmax_parts(rows, input_multiplier, input_shift)
    recip = table_read(ONE_OVER_ONE_PLUS_TABLE, np.clip(recip_in, INT16_MIN, INT16_MAX))
    y = (((exps * recip) >> (30 - headroom)) + 1) >> 1
    return (recip_in[:, 0] > INT16_MAX) | (y > INT16_MAX).any(axis=1)


# --- mul -----------------------------------------------------------------------------------------------------

def mul_params(s_a: float, s_b: float, s_out: float) -> tuple[int, int]:
    """(out_multiplier, out_shift) of the 16x8 product: s_a s_b / s_out."""
    return arith.quantize_multiplier(float(s_a) * float(s_b) / float(s_out))


def mul_s16(a, b, out_multiplier: int, out_shift: int, act_min: int = INT16_MIN,
            act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_mul_s16 (CMSIS-NN's arm_elementwise_mul_s16) on two int16 arrays of one shape."""
    prod = np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)
    y = arith.requantize(prod, out_multiplier, out_shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


# --- div -----------------------------------------------------------------------------------------------------

#: the most fractional bits of mcu_div_s16's quotient (|a| 2^31 / |b| is long division in 32-bit steps)
DIV_MAX_BITS = 31


def div_params(s_a: float, s_b: float, s_out: float) -> dict:
    """mcu_div_s16's parameters: ``frac_bits`` D puts the quotient's multiplier s_a / (s_b s_out 2^D) in
    [2^-16, 2^-15) (D within [0, DIV_MAX_BITS]), so that a quotient rounded in D bits errs by less than 2^-16 of
    an output step and one saturated at 2^31 - 1 is past the int16 range anyway."""
    real = float(s_a) / (float(s_b) * float(s_out))
    if not (real > 0.0 and math.isfinite(real)):
        raise ValueError("scales must be positive")
    bits = min(max(math.frexp(real)[1] + 15, 0), DIV_MAX_BITS)
    mult, shift = arith.quantize_multiplier(real / 2.0**bits)
    return {"frac_bits": bits, "out_multiplier": mult, "out_shift": shift}


def div_s16(a, b, frac_bits: int, out_multiplier: int, out_shift: int, act_min: int = INT16_MIN,
            act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_div_s16 (ours: CMSIS-NN and TFLite have no 16x8 division) on two int16 arrays of one shape (zero
    points 0): q = round(|a| 2^D / |b|) half away from zero, saturated at 2^31 - 1, with the sign of a / b, then
    the 16x8 product's int32 requantization and the clamp; a zero divisor gives act_max (act_min) for a positive
    (negative) numerator and the clamped 0 for 0 / 0, as mcu_div_s8."""
    num = np.asarray(a, dtype=np.int16).astype(np.int64)
    den = np.asarray(b, dtype=np.int16).astype(np.int64)
    d = np.where(den == 0, 1, np.abs(den))
    q = np.minimum(((np.abs(num) << int(frac_bits)) + d // 2) // d, 2**31 - 1)
    q = np.where((num < 0) != (den < 0), -q, q)
    y = np.clip(arith.requantize(q, out_multiplier, out_shift), act_min, act_max)
    ends = np.where(num > 0, act_max, np.where(num < 0, act_min, min(max(0, act_min), act_max)))
    return np.where(den == 0, ends, y).astype(np.int16)


# --- requantize ----------------------------------------------------------------------------------------------

def requantize_s16(x, multiplier: int, shift: int, act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_requantize_s16: int16 codes requantized by (multiplier, shift) ~= s_in / s_out, then clamped."""
    y = arith.requantize(np.asarray(x, dtype=np.int64), multiplier, shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


# --- sub, maximum, minimum ----------------------------------------------------------------------------------

def _pair_s16(pick, a, b, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift, left_shift,
              act_min, act_max) -> np.ndarray:
    a1 = arith.requantize(np.asarray(a, dtype=np.int64) << int(left_shift), a_multiplier, a_shift)
    b1 = arith.requantize(np.asarray(b, dtype=np.int64) << int(left_shift), b_multiplier, b_shift)
    y = arith.requantize(arith.saturate_int32(pick(a1, b1)), out_multiplier, out_shift)
    return np.clip(y, act_min, act_max).astype(np.int16)


def sub_s16(a, b, *, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift, left_shift=15,
            act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_sub_s16: each operand shifted left and requantized to the common scale (as the 16x8 add), the
    difference requantized to the output's."""
    return _pair_s16(np.subtract, a, b, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift,
                     left_shift, act_min, act_max)


def maximum_s16(a, b, *, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift, left_shift=15,
                act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_maximum_s16: the larger of the two operands on the add's common scale, requantized to the output's."""
    return _pair_s16(np.maximum, a, b, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift,
                     left_shift, act_min, act_max)


def minimum_s16(a, b, *, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift, left_shift=15,
                act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_minimum_s16: as :func:`maximum_s16` with the smaller."""
    return _pair_s16(np.minimum, a, b, a_multiplier, a_shift, b_multiplier, b_shift, out_multiplier, out_shift,
                     left_shift, act_min, act_max)


# --- lut -----------------------------------------------------------------------------------------------------

def lut_table_s16(fn, s_in: float, s_out: float) -> np.ndarray:
    """The 513-entry int16 table of ``fn`` (float64 values to float64) from input scale ``s_in`` to output
    scale ``s_out`` (zero points 0): f at codes -32768 + 128 i in output codes, rounded half away from zero,
    each of the first 512 lowered by half the rounded error of the chord at its segment's midpoint, clamped to
    int16. Non-finite values clamp to the int16 ends (NaN to 0)."""
    codes = -32768.0 + 128.0 * np.arange(513, dtype=np.float64)

    def f(c: np.ndarray) -> np.ndarray:
        y = np.asarray(fn(c * float(s_in)), dtype=np.float64) / float(s_out)
        return np.clip(np.nan_to_num(y, nan=0.0, posinf=65536.0, neginf=-65536.0), -65536.0, 65536.0)

    def rnd(v: np.ndarray) -> np.ndarray:
        return np.sign(v) * np.floor(np.abs(v) + 0.5)

    val = f(codes)
    sample = rnd(val)
    mid_interp = rnd((val[1:] + sample[:-1]) / 2.0)
    bias = rnd((mid_interp - rnd(f(codes[:-1] + 64.0))) / 2.0)
    table = np.concatenate([sample[:-1] - bias, sample[-1:]])
    return np.clip(table, INT16_MIN, INT16_MAX).astype(np.int64)


def lut_s16(x, table: np.ndarray) -> np.ndarray:
    """mcu_lut_s16: entry 256 + (x >> 7) of the 513-entry table and the next, interpolated on x's low 7 bits
    (the slope in int32: adjacent entries may differ by more than int16 holds)."""
    v = np.asarray(x, dtype=np.int64)
    t = np.asarray(table, dtype=np.int64)
    index = 256 + (v >> 7)
    base = t[index]
    return (base + (((t[index + 1] - base) * (v & 0x7F) + 64) >> 7)).astype(np.int16)
