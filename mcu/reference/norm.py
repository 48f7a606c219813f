"""int8 layer and RMS normalisation (issue 18): the compile-time parameters and the bit-exact Python reference
of ``mcu_layer_norm_s8`` (runtime_c/kernels/mcu_layer_norm_s8.c, whose header comment states the
arithmetic), and the 256-entry tables of the elementwise functions of ``mcu_unary_f32`` at int8.

Per row of n int8 codes q: S = sum q; d_i = n q_i - S; W = sum d_i^2 + E with E = round(n^3 eps / s_in^2);
1/sqrt(W) ~ R 2^(k-47) from a 16-bit integer square root of W normalised by 4^k into [2^60, 2^62) and
R = (2^32 - 1) // t; u_i = round(d_i R 2^(k-23)) (Q24, |u_i| <= 2^24); a_i = round(u_i m_c 2^-e_c) + b_c
(output steps in Q8, m_c 2^-e_c = sqrt(n) w_c / s_out 2^-16, b_c = round(256 bias_c / s_out));
y_i = clamp(floor((a_i + 128) / 256) + zp_out). Rounding shifts round halves up. RMS norm: S = n zp_in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from mcu.reference import kernels as ref

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


def _multiplier(real: float) -> tuple[int, int]:
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
    pairs = [_multiplier(float(v) * scale) for v in w]
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
    return ref.finish(acc, np.int64(multiplier), np.int64(shift), output_offset, act_min, act_max)


def bmm_s8(a: np.ndarray, b: np.ndarray, a_offset: int, b_offset: int, multiplier: int, shift: int,
           output_offset: int, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """mcu_bmm_s8 on a [batch, m, k] and b [batch, k, n] int8, bit for bit."""
    acc = np.matmul(np.asarray(a, np.int8).astype(np.int64) + int(a_offset),
                    np.asarray(b, np.int8).astype(np.int64) + int(b_offset))
    return ref.finish(acc, np.int64(multiplier), np.int64(shift), output_offset, act_min, act_max)


# --- int8 tables of mcu_unary_f32's functions ---------------------------------------------------------

# Each function in float64 on a torch tensor, with its scalar parameters (alpha, beta as the IR op has them).
UNARY_TABLE_FN: dict[str, Callable[[torch.Tensor, float, float], torch.Tensor]] = {
    "gelu": lambda x, a, b: F.gelu(x),
    "gelu_tanh": lambda x, a, b: F.gelu(x, approximate="tanh"),
    "silu": lambda x, a, b: F.silu(x),
    "hardsigmoid": lambda x, a, b: F.hardsigmoid(x),
    "leaky_relu": lambda x, a, b: F.leaky_relu(x, a),
    "elu": lambda x, a, b: F.elu(x, a),
    "softplus": lambda x, a, b: F.softplus(x, beta=b, threshold=a),
    "exp": lambda x, a, b: torch.exp(x),
    "log": lambda x, a, b: torch.log(x),
    "sqrt": lambda x, a, b: torch.sqrt(x),
    "rsqrt": lambda x, a, b: torch.rsqrt(x),
    "abs": lambda x, a, b: torch.abs(x),
    "neg": lambda x, a, b: -x,
    "reciprocal": lambda x, a, b: torch.reciprocal(x),
    "erf": lambda x, a, b: torch.erf(x),
    "pow": lambda x, a, b: torch.pow(x, a),
    "log_sigmoid": lambda x, a, b: F.logsigmoid(x),
    "affine": lambda x, a, b: x * a + b,
    "rsub": lambda x, a, b: b - x * a,
}


def unary_real(fn: str, alpha: float, beta: float) -> Callable[[np.ndarray], np.ndarray]:
    """The function a table holds, on float64 values. Inputs outside its domain (log, sqrt, rsqrt, pow of a
    negative value: NaN, which no int8 code can hold) take its value at 0, the domain's edge: a calibrated
    model reaches such codes only through rounding near 0. What is still NaN becomes 0."""
    f = UNARY_TABLE_FN[fn]

    def real(x: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.asarray(x, np.float64))
        y = f(t, float(alpha), float(beta)).numpy()
        bad = np.isnan(y)
        if bad.any():
            y = np.where(bad, f(torch.zeros_like(t), float(alpha), float(beta)).numpy(), y)
        return np.nan_to_num(y, nan=0.0, posinf=np.inf, neginf=-np.inf)

    return real
