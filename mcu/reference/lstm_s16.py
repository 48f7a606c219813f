"""The 16x8 LSTM (w8a16): the arithmetic of ``mcu_lstm_s16`` (runtime_c/kernels/recurrent/mcu_lstm_s16.c), bit
for bit, and the parameters a layer derives from its float weights and its tensors' scales.

It is CMSIS-NN's ``arm_lstm_unidirectional_s16`` (TFLite Micro's integer LSTM with int16 activations): int16
input and hidden state (zero point 0), int8 weights symmetric per gate row, int64 biases, an int16 cell with a
power-of-two scale 2^-cs (cs from calibration, mcu/capture/recurrent.py). Per step and gate row r of
PyTorch's order (i, f, g, o):

    pre_r = sat16(sat16(rq64(bias_r + W_ih[r] . x_t, mx_r, sx_r)) + rq64(W_hh[r] . h, mh_r, sh_r))   Q3.12
    i, f, o = sigmoid(pre), g = tanh(pre)                                                          Q0.15
    c = sat16(rq(f c, 2^-15));  c = sat16(c + rq(i g, 2^(cs - 30)))                                2^-cs
    h = sat16(rq(o tanh(c), 2^-30 / s_h))

where rq64 is the 16x8 requantization of :mod:`mcu.reference.s16` and rq the int32 one of
:func:`mcu.reference.arith.requantize`. The first step of a sequence has no recurrent product (CMSIS-NN skips
it for a zero state; it is zero anyway: the recurrent bias is 0, PyTorch's two biases fold into the input
product's). sigmoid and tanh are ``arm_nn_activation_s16``: the input times 3 (times 2^ls, or divided by
2^-ls with rounding, ls = 12 - cs for the cell's tanh and 0 for the gates), read in CMSIS-NN's table of
sigmoid(k / 24) in 0.16 at |v| / 2^9 (tanh: at |v| / 2^8, as 2 sigmoid(2x) - 1) with linear interpolation on
the bits below, saturating from entry 255.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mcu.reference import arith, recurrent, s16

GATE_FRAC = 12  # gate pre-activations are Q3.12


def sigmoid_table() -> np.ndarray:
    """The table of TFLite's int16 LOGISTIC and TANH (CMSIS-NN's ``sigmoid_table_uint16``): sigmoid(k / 24) in
    0.16 for k = 0..254, each entry lowered by half the error of the chord to the next entry at the segment's
    midpoint (so the linear interpolation errs both ways, not always low), rounded; entry 255 is 65535, where
    the kernels saturate. tests/kernels/test_kernels_lstm_s16.py checks it against CMSIS-NN's sources and the
    C kernel's copy."""
    def sig(x: float) -> float:
        return 65536.0 / (1.0 + math.exp(-x))
    step = 1.0 / 24.0
    table = []
    for k in range(255):
        x = k * step
        chord_mid = (sig(x) + sig(x + step)) / 2.0
        table.append(math.floor(sig(x) - (chord_mid - sig(x + step / 2.0)) / 2.0 + 0.5))
    table.append(65535)
    return np.array(table, dtype=np.int64)


SIGMOID_TABLE = sigmoid_table()


def activation_s16(x, left_shift: int, kind: str) -> np.ndarray:
    """arm_nn_activation_s16 on int16 ``x``: ``kind`` "sigmoid" or "tanh", the input scaled by 3 * 2^left_shift
    (the table's 1/24 steps: Q3.12 for left_shift 0)."""
    v = np.asarray(x, dtype=np.int64)
    if left_shift < 0:
        v = (v * 3 + (1 << (-left_shift - 1))) >> -left_shift
    else:
        v = v * (3 << left_shift)
    idx_shift = 9 if kind == "sigmoid" else 8
    a = np.abs(v)
    uh = a >> idx_shift
    inside = uh < 255
    k = np.where(inside, uh, 0)
    ua, ub = SIGMOID_TABLE[k], SIGMOID_TABLE[np.minimum(k + 1, 255)]
    ut = a & ((1 << idx_shift) - 1)
    top = (0x7FFF << 10) if kind == "sigmoid" else (0xFFFF << 8)
    r = np.where(inside, (ua << idx_shift) + ut * (ub - ua), top)
    if kind == "sigmoid":
        y = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
    else:
        y = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
    return ((y + 32768) % 65536 - 32768).astype(np.int64)  # the C's (int16_t) of the unsigned result


@dataclass(frozen=True)
class LstmS16:
    """One layer's integer parameters (what mcu_lstm_s16 takes). ``quant`` is [4H, 4] int32 per gate row:
    mult_x, shift_x (input product to Q3.12), mult_h, shift_h (recurrent product to Q3.12)."""

    w_ih: np.ndarray  # int8 [4H, I]
    w_hh: np.ndarray  # int8 [4H, H]
    bias: np.ndarray  # int64 [4H], scale s_x s_w_ih[r]
    quant: np.ndarray  # int32 [4H, 4]
    cell_shift: int  # the cell's scale is 2^-cell_shift, in [0, 15]
    forget_mult: int  # f c (Q0.15 times 2^-cs) to 2^-cs: 2^-15
    forget_shift: int
    input_mult: int  # i g (Q0.30) to 2^-cs: 2^(cs - 30)
    input_shift: int
    out_mult: int  # o tanh(c) (Q0.30) to the hidden state's scale: 2^-30 / s_h
    out_shift: int


def layer_params(w_ih, w_hh, b_ih, b_hh, s_x: float, s_h: float, cell_shift: int) -> LstmS16:
    """Quantize one PyTorch layer's float weights for mcu_lstm_s16, given the input's and the hidden state's
    (the output's) int16 scales and the cell's power-of-two shift. A gate multiplier of 2^14 or more has no
    16x8 form and raises ValueError."""
    w_ih, w_hh = np.asarray(w_ih, np.float64), np.asarray(w_hh, np.float64)
    rows = w_hh.shape[0]
    b_ih = np.zeros(rows) if b_ih is None else np.asarray(b_ih, np.float64)
    b_hh = np.zeros(rows) if b_hh is None else np.asarray(b_hh, np.float64)
    qx, sx_w = recurrent.symmetric_rows(w_ih)
    qh, sh_w = recurrent.symmetric_rows(w_hh)
    mx, ex = arith.quantize_multipliers(s_x * sx_w * 2.0 ** GATE_FRAC)
    mh, eh = arith.quantize_multipliers(s_h * sh_w * 2.0 ** GATE_FRAC)
    if np.any(ex > s16.SHIFT_MAX) or np.any(eh > s16.SHIFT_MAX):
        raise ValueError("a 16x8 LSTM gate's real multiplier must stay below 2^14")
    bias = np.rint((b_ih + b_hh) / (s_x * sx_w)).astype(np.int64)
    fm, fs = arith.quantize_multiplier(2.0 ** -15)
    im, ish = arith.quantize_multiplier(2.0 ** (cell_shift - 30))
    om, osh = arith.quantize_multiplier(2.0 ** -30 / s_h)
    quant = np.stack([mx, ex, mh, eh], axis=1).astype(np.int32)
    return LstmS16(qx, qh, bias, quant, int(cell_shift), int(fm), int(fs), int(im), int(ish), int(om), int(osh))


def sat16(v) -> np.ndarray:
    return np.clip(np.asarray(v, dtype=np.int64), s16.INT16_MIN, s16.INT16_MAX)


def lstm_s16(x: np.ndarray, p: LstmS16, h0: np.ndarray | None = None, c0: np.ndarray | None = None) -> np.ndarray:
    """mcu_lstm_s16 on int16 ``x`` [N, T, I] from the hidden state ``h0`` (int16 at the hidden state's scale) and
    the cell ``c0`` (int16 at 2^-cell_shift), both [N, H] or None for zeros: the int16 hidden states [N, T, H].
    A given h0 adds the recurrent product at the first step (CMSIS-NN's hidden_state); a zero one has none."""
    return run_layer(x, p, h0, c0)[0]


def lstm_final_cell_s16(x: np.ndarray, seq: np.ndarray, p: LstmS16, h0: np.ndarray | None = None,
                        c0: np.ndarray | None = None) -> np.ndarray:
    """mcu_lstm_final_cell_s16: the final cell [N, H] (int16 at 2^-cell_shift) of the layer :func:`lstm_s16` runs
    from ``h0`` and ``c0``, each step's gates reading the hidden state before it from ``seq`` [N, T, H] (the
    hidden states that layer wrote; after h0 at the first step)."""
    return run_layer(x, p, h0, c0, np.asarray(seq, dtype=np.int64))[1]


def run_layer(x: np.ndarray, p: LstmS16, h0: np.ndarray | None = None, c0: np.ndarray | None = None,
              seq: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(hidden states [N, T, H], final cell [N, H]); with ``seq`` each step after the first reads its previous
    hidden state from it, not from the step before."""
    x = np.asarray(x, dtype=np.int64)
    n_batch, steps, _ = x.shape
    hidden = p.w_hh.shape[1]
    q = p.quant.astype(np.int64)
    w_ih, w_hh = p.w_ih.astype(np.int64), p.w_hh.astype(np.int64)
    out = np.empty((n_batch, steps, hidden), dtype=np.int16)
    cells = np.empty((n_batch, hidden), dtype=np.int16)
    for b in range(n_batch):
        c = np.zeros(hidden, dtype=np.int64) if c0 is None else np.asarray(c0[b], dtype=np.int64)
        h: np.ndarray | None = None if h0 is None else np.asarray(h0[b], dtype=np.int64)
        for t in range(steps):
            pre = sat16(s16.requantize_s64(p.bias + w_ih @ x[b, t], q[:, 0], q[:, 1]))
            if h is not None:
                pre = sat16(pre + s16.requantize_s64(w_hh @ h, q[:, 2], q[:, 3]))
            i = activation_s16(pre[:hidden], 0, "sigmoid")
            f = activation_s16(pre[hidden:2 * hidden], 0, "sigmoid")
            g = activation_s16(pre[2 * hidden:3 * hidden], 0, "tanh")
            o = activation_s16(pre[3 * hidden:], 0, "sigmoid")
            c = sat16(arith.requantize(f * c, p.forget_mult, p.forget_shift))
            c = sat16(c + arith.requantize(i * g, p.input_mult, p.input_shift))
            tc = activation_s16(c, GATE_FRAC - p.cell_shift, "tanh")
            h = sat16(arith.requantize(o * tc, p.out_mult, p.out_shift))
            out[b, t] = h
            if seq is not None:
                h = seq[b, t]
        cells[b] = c
    return out, cells
