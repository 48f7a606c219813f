"""The 16x8 products of two activations, layer and RMS norm and log-softmax (w8a16) in numpy, bit for bit with
``mcu_bmm_s16``, ``mcu_layer_norm_s16`` and ``mcu_log_softmax_s16`` (runtime_c/include/mcu/kernels_s16.h), and the
parameters each derives from its real scales.

bmm is CMSIS-NN's arm_batch_matmul_s16: exact 64-bit sums of int16 products (zero points 0), the Q31
multiplier of s_a s_b / s_out rounded to Q15 and applied with one rounding (:func:`mcu.reference.s16.requantize_s64`).

CMSIS-NN and TFLite Micro have no int16 layer norm or log-softmax; ours keep their conventions (int64 sums,
Q31 multipliers, the 513-entry int16 tables of TFLite's ``gen_lut``):

Layer norm, per row of n int16 codes q: S = sum q (0 for RMS norm), d_i = n q_i - S, W = n sum q^2 - S^2 + E with
E = round(n^2 eps / s_in^2), so that z_i = (x_i - mean) / sqrt(var + eps) = d_i / sqrt(W) exactly (|d_i| < 2^28,
W < 2^62). W normalised by 4^k into [2^60, 2^62), r = isqrt (31 bits), R = 2^62 // r; u_i = round(d_i R 2^(k-38))
in Q24 (|u_i| <= sqrt(n) 2^24); a_i = round(u_i m_c 2^-e_c) + b_c in Q8 output steps (m_c 2^-e_c = w_c / s_out
2^-16, b_c = round(256 bias_c / s_out)); y_i = clamp(floor((a_i + 128) / 256)). Rounding shifts round halves up.

Log-softmax, per row: diff_i = q_i - max; exp(diff_i s_in) read in Q15 from softmax's exp table (as
``mcu_softmax_s16``; 0 below the table's -10), summed in int32; ln of that sum as e ln 2 (Q30) plus
ln(1 + f) from a 513-entry table over [0, 1] (f: the sum's mantissa in Q16), L in Q15;
y_i = clamp(rq(diff_i, s_in / s_out) - rq(L, 2^-15 / s_out)), two TFLite requantizations (at most one output
step of rounding between them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mcu.reference import arith
from mcu.reference.norm import affine_multiplier
from mcu.reference.s16 import INT16_MAX, INT16_MIN, requantize_s64
from mcu.reference.s16_act import EXP_TABLE, gen_lut, softmax_params, table_read

MAX_COLS = 4096  # MCU_LAYER_NORM_S16_MAX_COLS
Q = 24           # u_i in Q24
SUB = 8          # the output in 1/256 steps before the last rounding
EPS_LIMIT = 1 << 61
LN2_Q30 = round(math.log(2.0) * (1 << 30))


# --- bmm -----------------------------------------------------------------------------------------------------

def bmm_params(s_a: float, s_b: float, s_out: float) -> tuple[int, int]:
    """(multiplier, shift): s_a s_b / s_out as a Q31 multiplier (the kernel rounds it to Q15)."""
    return arith.quantize_multiplier(float(s_a) * float(s_b) / float(s_out))


def bmm_s16(a, b, multiplier: int, shift: int, act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> np.ndarray:
    """mcu_bmm_s16 on a [batch, m, k] and b [batch, k, n] int16: int16 [batch, m, n]."""
    acc = np.matmul(np.asarray(a, np.int16).astype(np.int64), np.asarray(b, np.int16).astype(np.int64))
    return np.clip(requantize_s64(acc, multiplier, shift), act_min, act_max).astype(np.int16)


# --- layer norm and RMS norm ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerNormS16:
    """One int16 layer norm's constants: per column multiplier, shift (a right shift in [1, 62]) and bias (Q8
    output steps); the 64-bit eps term; the clamp; RMS norm (no mean)."""

    multipliers: np.ndarray
    shifts: np.ndarray
    bias: np.ndarray
    eps_term: int
    act_min: int = INT16_MIN
    act_max: int = INT16_MAX
    rms: bool = False

    @property
    def eps_words(self) -> tuple[int, int]:
        """The eps term as the kernel's (eps_lo, eps_hi) int32 words."""
        lo, hi = self.eps_term & 0xFFFFFFFF, self.eps_term >> 32
        return (lo - (1 << 32) if lo >= 1 << 31 else lo), hi


def layer_norm_params(cols: int, s_in: float, s_out: float, eps: float, weight: np.ndarray | None,
                      bias: np.ndarray | None, rms: bool = False, act_min: int = INT16_MIN,
                      act_max: int = INT16_MAX) -> LayerNormS16:
    """The kernel's constants; ValueError when the layer cannot run at 16 bits (too many columns, an eps term
    past 2^61, a multiplier past 2^30)."""
    if not 1 <= cols <= MAX_COLS:
        raise ValueError(f"16x8 layer norm over {cols} values (at most {MAX_COLS})")
    eps_term = round(cols ** 2 * float(eps) / float(s_in) ** 2)
    if eps_term >= EPS_LIMIT:
        raise ValueError(f"eps {eps} is too large for input scale {s_in} at 16 bits")
    w = np.ones(cols) if weight is None else np.asarray(weight, np.float64).reshape(-1)
    b = np.zeros(cols) if bias is None else np.asarray(bias, np.float64).reshape(-1)
    scale = 2.0 ** (SUB - Q) / float(s_out)
    pairs = [affine_multiplier(float(v) * scale) for v in w]
    bias_q = np.clip(np.rint(b / float(s_out) * (1 << SUB)), -(2**31), 2**31 - 1)
    return LayerNormS16(np.array([m for m, _ in pairs], np.int32), np.array([e for _, e in pairs], np.int32),
                        bias_q.astype(np.int32), int(eps_term), int(act_min), int(act_max), bool(rms))


def _round_shift(v: np.ndarray, s) -> np.ndarray:
    """floor((v + 2^(s-1)) / 2^s) on int64 (s >= 1)."""
    s = np.asarray(s, np.int64)
    return (v + (np.int64(1) << (s - 1))) >> s


def layer_norm_s16(x: np.ndarray, p: LayerNormS16) -> np.ndarray:
    """mcu_layer_norm_s16 on ``x`` ([..., cols] int16)."""
    x = np.asarray(x, np.int16)
    n = p.multipliers.size
    rows = x.reshape(-1, n).astype(np.int64)
    out = np.empty(rows.shape, np.int16)
    for r, q in enumerate(rows):
        s = 0 if p.rms else int(q.sum())
        w = n * int((q * q).sum()) - s * s + p.eps_term
        d = n * q - s
        recip, k = 0, 0
        if w:
            while w < 1 << 60:
                w, k = w << 2, k + 1
            recip = (1 << 62) // math.isqrt(w)
        u = _round_shift(d * recip, 38 - k)
        a = _round_shift(u * p.multipliers.astype(np.int64), p.shifts) + p.bias
        out[r] = np.clip((a + 128) >> 8, p.act_min, p.act_max)
    return out.reshape(x.shape)


# --- log-softmax ----------------------------------------------------------------------------------------------

def _log1p(v: np.float32) -> np.float32:
    return np.float32(np.log1p(np.float32(v)))


LOG1P_TABLE = gen_lut(_log1p, 0.0, 1.0)


def log_softmax_params(s_in: float, s_out: float) -> dict[str, int]:
    """The exp table's input multiplier (softmax's), s_in / s_out for the differences and 2^-15 / s_out for
    the row's ln(sum)."""
    in_mult, in_shift = softmax_params(s_in)
    diff_mult, diff_shift = arith.quantize_multiplier(float(s_in) / float(s_out))
    log_mult, log_shift = arith.quantize_multiplier(2.0 ** -15 / float(s_out))
    return {"input_multiplier": in_mult, "input_shift": in_shift, "diff_multiplier": diff_mult,
            "diff_shift": diff_shift, "log_multiplier": log_mult, "log_shift": log_shift}


def log_sum_q15(total: int) -> int:
    """ln(total / 2^15) in Q15 for an int32 total >= 2^14: the exponent's share in Q30 rounded to Q15, plus
    ln(1 + f) read at the mantissa's fraction f in Q16."""
    e = int(total).bit_length() - 1
    mant = int(total) << (30 - e) if e <= 30 else int(total) >> (e - 30)
    frac = min(((mant - (1 << 30)) + (1 << 13)) >> 14, 65535)
    ln_mant = int(table_read(LOG1P_TABLE, frac - 32768))
    return (((e - 15) * LN2_Q30 + (1 << 14)) >> 15) + ln_mant


def log_softmax_s16(rows, input_multiplier: int, input_shift: int, diff_multiplier: int, diff_shift: int,
                    log_multiplier: int, log_shift: int) -> np.ndarray:
    """mcu_log_softmax_s16 on int16 ``rows`` [n, axis]: int16 log-probabilities."""
    x = np.asarray(rows, dtype=np.int64)
    diff = x - x.max(axis=1, keepdims=True)
    v = arith.requantize(diff, input_multiplier, input_shift) + INT16_MAX
    exps = np.where(v < INT16_MIN, 0, table_read(EXP_TABLE, np.clip(v, INT16_MIN, INT16_MAX)))
    logs = np.array([[log_sum_q15(int(t))] for t in exps.sum(axis=1)], dtype=np.int64)
    y = arith.requantize(diff, diff_multiplier, diff_shift) - arith.requantize(logs, log_multiplier, log_shift)
    return np.clip(y, INT16_MIN, INT16_MAX).astype(np.int16)
