"""Integer LSTM and GRU layers: the arithmetic of ``mcu_lstm_s8`` and ``mcu_gru_s8``
(runtime_c/kernels/recurrent/mcu_lstm_s8.c, mcu_gru_s8.c), bit for bit, and their compile-time parameters.

The LSTM follows TFLite Micro's integer LSTM (int8 input and hidden state, int8 weights, int32 bias,
int16 gates and cell): per gate row r, the input and the recurrent products are requantized
separately to int16 Q3.12 (scale 2^-12) and added with saturation; sigmoid and tanh take Q3.12 and
give Q0.15; the cell state is int16 with a power-of-two scale 2^-cell_shift chosen from calibration;
the hidden state is ``o * tanh(c)`` (Q0.30) requantized to the int8 output's scale and zero-point. The
weights are symmetric per gate row (one row per output channel; per-tensor is the case of equal
scales). PyTorch's two biases fold into the input product's bias, with the zero-point corrections
(``-zp * sum(w_row)``), so the kernels accumulate ``bias + sum(w * q)``.

TFLite has no builtin GRU. The GRU here is PyTorch's cell on the same integer machinery:

    r = sigmoid(Wir x + bir + Whr h + bhr)         (Q3.12 in, Q0.15 out, as the LSTM's gates)
    z = sigmoid(Wiz x + biz + Whz h + bhz)
    n = tanh(Win x + bin + r * (Whn h + bhn))      (Whn h + bhn in int16 with a calibrated 2^-cand_shift)
    h' = (1 - z) * n + z * h

with an int8 hidden state (scale and zero-point of the layer's output, from calibration):
``h'_q = zp + requant((2^15 - z) n, 2^-30 / s_h) + round(z (h_q - zp) / 2^15)``; the second term needs
no multiplier since z h is already in output steps.

Shared fixed-point pieces (``round_shift`` ties up, as floor((v + 2^(s-1)) / 2^s)):

* sigmoid(x), x in Q3.12: a 257-entry table T[k] = round(2^15 sigmoid(k / 32)), k = 0..256, read at
  |x| / 2^7 with linear interpolation on the low 7 bits; sigmoid(-x) = 2^15 - sigmoid(x).
* tanh(x) = 2 sigmoid(2x) - 1 from the same table at 2|x| (saturating at T[256]), odd in x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mcu.reference import arith

GATE_FRAC = 12  # gate pre-activations are Q3.12
TABLE_SIZE = 257
BIAS_LIMIT = 1 << 30  # |bias| bound the kernels check: with |sum w q| < 2^26 the int32 sum cannot overflow
MAX_FEATURES = 4096  # MCU_RECURRENT_S8_MAX_FEATURES


def sigmoid_table() -> np.ndarray:
    k = np.arange(TABLE_SIZE, dtype=np.float64)
    return np.round(32768.0 / (1.0 + np.exp(-k / 32.0))).astype(np.int16)


def round_shift(v, s: int) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64)
    return v if s == 0 else (v + (1 << (s - 1))) >> s


def sat16(v) -> np.ndarray:
    return np.clip(np.asarray(v, dtype=np.int64), -32768, 32767)


def _lookup(table: np.ndarray, a: np.ndarray, idx_shift: int, frac_bits: int) -> np.ndarray:
    """T at a / 2^idx_shift with linear interpolation on the low bits (``frac_bits`` = 7 after scaling)."""
    t = table.astype(np.int64)
    idx = a >> idx_shift
    frac = (a & ((1 << idx_shift) - 1)) << (7 - idx_shift)
    top = idx >= TABLE_SIZE - 1
    i = np.minimum(idx, TABLE_SIZE - 2)
    inner = t[i] + ((t[i + 1] - t[i]) * frac + 64 >> 7)
    return np.where(top, t[TABLE_SIZE - 1], inner)


def sigmoid_s16(x, table: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    s = _lookup(table, np.abs(x), 7, 7)
    return np.where(x >= 0, s, 32768 - s)


def tanh_s16(x, table: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    s = _lookup(table, np.abs(x), 6, 7)
    t = 2 * s - 32768
    return np.where(x >= 0, t, -t)


@dataclass(frozen=True)
class RecurrentS8:
    """One layer's integer parameters (what the kernels take). ``rows`` is [G*H, 6] int32: per gate row
    bias_x, mult_x, shift_x (input product to Q3.12), bias_h, mult_h, shift_h (recurrent product to
    Q3.12, or to 2^-cand_shift for the GRU's n rows)."""

    kind: str  # "lstm" | "gru"
    w_ih: np.ndarray  # int8 [G*H, I] (codes on [-7, 7] for 4-bit weights)
    w_hh: np.ndarray  # int8 [G*H, H]
    rows: np.ndarray  # int32 [G*H, 6]
    hidden_zp: int
    out_mult: int
    out_shift: int
    state_shift: int  # LSTM: cell scale 2^-state_shift; GRU: scale 2^-state_shift of Whn h + bhn


def symmetric_rows(w: np.ndarray, per_channel: bool = True, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """A recurrent matrix as codes on [-qmax, qmax] (127 at 8 bits, 7 at 4: w4a8's range, as its convolution and
    linear weights) and their scales, one per gate row (or one for all): the largest magnitude over qmax, at
    least 2^-12 / qmax. The 16x8 LSTM (mcu/reference/lstm_s16.py) rounds so too."""
    qmax = (1 << (bits - 1)) - 1
    amax = np.abs(w).max(axis=1) if per_channel else np.full(w.shape[0], np.abs(w).max())
    scale = np.maximum(amax, 2.0 ** -12) / qmax
    q = np.clip(np.round(w / scale[:, None]), -qmax, qmax).astype(np.int8)
    return q, scale


def _bias(real: np.ndarray, scale: np.ndarray, zp: int, wq: np.ndarray) -> np.ndarray:
    b = np.round(real / scale) - zp * wq.astype(np.int64).sum(axis=1)
    return np.clip(b, -BIAS_LIMIT, BIAS_LIMIT).astype(np.int64)


def layer_params(kind: str, w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray | None, b_hh: np.ndarray | None,
                 s_x: float, zp_x: int, s_h: float, zp_h: int, state_shift: int,
                 per_channel: bool = True, weight_bits: int = 8) -> RecurrentS8:
    """Quantize one PyTorch layer's float weights for the kernels, given the input's and the hidden state's
    (the output's) int8 parameters and the calibrated power-of-two shift. ``weight_bits`` 4: both matrices on
    [-7, 7] (mcu_lstm_s4, mcu_gru_s4 read them packed; the arithmetic on the codes is the same)."""
    gates = 4 if kind == "lstm" else 3
    hidden = w_hh.shape[1]
    w_ih, w_hh = np.asarray(w_ih, np.float64), np.asarray(w_hh, np.float64)
    b_ih = np.zeros(gates * hidden) if b_ih is None else np.asarray(b_ih, np.float64)
    b_hh = np.zeros(gates * hidden) if b_hh is None else np.asarray(b_hh, np.float64)
    qx, sx_w = symmetric_rows(w_ih, per_channel, weight_bits)
    qh, sh_w = symmetric_rows(w_hh, per_channel, weight_bits)
    # recurrent bias: the GRU's n rows keep b_hn (it is multiplied by r); every other bias joins the input's
    rec_bias = np.zeros(gates * hidden)
    in_bias = b_ih + b_hh
    h_target = np.full(gates * hidden, 2.0 ** -GATE_FRAC)
    if kind == "gru":
        n = slice(2 * hidden, 3 * hidden)
        rec_bias[n] = b_hh[n]
        in_bias[n] = b_ih[n]
        h_target[n] = 2.0 ** -state_shift
    mx, ex = arith.quantize_multipliers(s_x * sx_w / 2.0 ** -GATE_FRAC)
    mh, eh = arith.quantize_multipliers(s_h * sh_w / h_target)
    rows = np.stack([_bias(in_bias, s_x * sx_w, zp_x, qx), mx, ex,
                     _bias(rec_bias, s_h * sh_w, zp_h, qh), mh, eh], axis=1).astype(np.int32)
    out_mult, out_shift = arith.quantize_multiplier(2.0 ** -30 / s_h)
    return RecurrentS8(kind, qx, qh, rows, int(zp_h), int(out_mult), int(out_shift), int(state_shift))


def power_of_two_shift(max_abs: float) -> int:
    """The largest s in [0, 15] with max_abs * 2^s inside int16 (the state keeps its range)."""
    if not math.isfinite(max_abs) or max_abs <= 0.0:
        return 15
    return int(max(0, min(15, math.floor(math.log2(32767.0 / max_abs)))))


def _products(p: RecurrentS8, x: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The input and recurrent products of one step, each requantized and saturated to int16."""
    r = p.rows.astype(np.int64)
    ax = r[:, 0] + p.w_ih.astype(np.int64) @ x.astype(np.int64)
    ah = r[:, 3] + p.w_hh.astype(np.int64) @ h.astype(np.int64)
    return sat16(arith.requantize(ax, r[:, 1], r[:, 2])), sat16(arith.requantize(ah, r[:, 4], r[:, 5]))


def _to_s8(v) -> np.ndarray:
    return np.clip(np.asarray(v, dtype=np.int64), -128, 127)


def lstm_s8(x: np.ndarray, p: RecurrentS8, table: np.ndarray | None = None) -> np.ndarray:
    """mcu_lstm_s8 on int8 ``x`` [N, T, I] from the zero state: the int8 hidden states [N, T, H]."""
    return _lstm_s8_run(x, p, table)[0]


def lstm_final_cell_s8(x: np.ndarray, p: RecurrentS8, table: np.ndarray | None = None) -> np.ndarray:
    """mcu_lstm_final_cell_s8: the final cell [N, H] (int16 at 2^-state_shift, nn.LSTM's c_n) of the layer
    :func:`lstm_s8` runs on ``x``, from its own recurrence (the kernel reads the hidden states the layer wrote)."""
    return _lstm_s8_run(x, p, table)[1]


def _lstm_s8_run(x: np.ndarray, p: RecurrentS8, table: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The int8 hidden states [N, T, H] and the final int16 cells [N, H]."""
    table = sigmoid_table() if table is None else table
    n_batch, steps, _ = x.shape
    hidden = p.w_hh.shape[1]
    out = np.empty((n_batch, steps, hidden), dtype=np.int8)
    cells = np.zeros((n_batch, hidden), dtype=np.int16)
    cs = p.state_shift
    for b in range(n_batch):
        h = np.full(hidden, p.hidden_zp, dtype=np.int64)
        c = np.zeros(hidden, dtype=np.int64)
        for t in range(steps):
            gx, gh = _products(p, x[b, t], h)
            pre = sat16(gx + gh)
            i = sigmoid_s16(pre[:hidden], table)
            f = sigmoid_s16(pre[hidden:2 * hidden], table)
            g = tanh_s16(pre[2 * hidden:3 * hidden], table)
            o = sigmoid_s16(pre[3 * hidden:], table)
            c = sat16(round_shift(f * c, 15) + round_shift(i * g, 30 - cs))
            ct = round_shift(c, cs - GATE_FRAC) if cs >= GATE_FRAC else sat16(c << (GATE_FRAC - cs))
            y = arith.requantize(o * tanh_s16(ct, table), p.out_mult, p.out_shift)
            h = _to_s8(arith.saturate_int32(y + p.hidden_zp))
            out[b, t] = h
        cells[b] = c
    return out, cells


def gru_s8(x: np.ndarray, p: RecurrentS8, table: np.ndarray | None = None, h0: np.ndarray | None = None) -> np.ndarray:
    """mcu_gru_s8 on int8 ``x`` [N, T, I] from the zero state (``h0`` given: mcu_gru_from_s8 from the int8 state
    [N, H] at the output's quantization): the int8 hidden states [N, T, H]."""
    table = sigmoid_table() if table is None else table
    n_batch, steps, _ = x.shape
    hidden = p.w_hh.shape[1]
    out = np.empty((n_batch, steps, hidden), dtype=np.int8)
    for b in range(n_batch):
        h = np.full(hidden, p.hidden_zp, dtype=np.int64) if h0 is None else np.asarray(h0[b], dtype=np.int64)
        for t in range(steps):
            gx, gh = _products(p, x[b, t], h)
            r = sigmoid_s16(sat16(gx[:hidden] + gh[:hidden]), table)
            z = sigmoid_s16(sat16(gx[hidden:2 * hidden] + gh[hidden:2 * hidden]), table)
            cand = round_shift(r * gh[2 * hidden:], 15 + p.state_shift - GATE_FRAC)
            n = tanh_s16(sat16(gx[2 * hidden:] + cand), table)
            y = arith.requantize((32768 - z) * n, p.out_mult, p.out_shift)
            y = arith.saturate_int32(y + p.hidden_zp + round_shift(z * (h - p.hidden_zp), 15))
            h = _to_s8(y)
            out[b, t] = h
    return out
