"""The 16x8 GRU (w8a16): the arithmetic of ``mcu_gru_s16`` (runtime_c/kernels/recurrent/mcu_gru_s16.c), bit for
bit, and the parameters a layer derives from its float weights and its tensors' scales.

CMSIS-NN has no GRU. This is PyTorch's GRU cell on the conventions of the 16x8 LSTM (:mod:`mcu.reference.lstm_s16`,
CMSIS-NN's ``arm_lstm_unidirectional_s16``): int16 input and hidden state (zero point 0), int8 weights symmetric
per gate row, int64 biases, gate pre-activations in Q3.12, its sigmoid and tanh table (Q0.15 out), and the
int32 requantizations of its cell. Per step and hidden unit, with rows r, z, n in PyTorch's order:

    r = sigmoid(sat16(sat16(rq64(br + W_ir x)) + rq64(W_hr h)))         br = b_ir + b_hr; Q3.12 in, Q0.15 out
    z = sigmoid(sat16(sat16(rq64(bz + W_iz x)) + rq64(W_hz h)))
    hn = sat16(rq64(b_hn + W_hn h))                                     2^-cs (cs from calibration)
    n = tanh(sat16(sat16(rq64(b_in + W_in x)) + rq(r hn, 2^-(cs + 3))))   r hn: Q0.15 times 2^-cs, to Q3.12
    h' = sat16(rq(z h, 2^-15) + rq((2^15 - z) n, 2^-30 / s_h))           z h is in hidden steps already

rq64 is the 16x8 requantization of :mod:`mcu.reference.s16` and rq the int32 one of
:func:`mcu.reference.arith.requantize`. The recurrent candidate term keeps a calibrated power-of-two scale, as
the int8 GRU's does (mcu/reference/recurrent.py): r scales it before it joins the input's, so a Q3.12 clip
would cut values that r brings back into range. A layer starts from the zero state (an nn.GRU) or from a
given int16 state at the hidden state's scale (a GRUCell step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcu.reference import arith, s16
from mcu.reference.lstm_s16 import GATE_FRAC, activation_s16, sat16
from mcu.reference.recurrent import symmetric_rows


@dataclass(frozen=True)
class GruS16:
    """One layer's integer parameters (what mcu_gru_s16 takes). ``quant`` is [3H, 4] int32 per gate row:
    mult_x, shift_x (input product to Q3.12), mult_h, shift_h (recurrent product to Q3.12; the n rows' to
    2^-state_shift). ``bias`` is [4H]: the input products' biases of the 3H rows, then the n rows' recurrent
    biases b_hn (r multiplies them, so they stay on the recurrent side)."""

    w_ih: np.ndarray  # int8 [3H, I]
    w_hh: np.ndarray  # int8 [3H, H]
    bias: np.ndarray  # int64 [4H]
    quant: np.ndarray  # int32 [3H, 4]
    state_shift: int  # W_hn h + b_hn has the scale 2^-state_shift, in [0, 15]
    cand_mult: int  # r hn (Q0.15 times 2^-cs) to Q3.12: 2^-(cs + 3)
    cand_shift: int
    keep_mult: int  # z h (Q0.15 times the hidden scale) to the hidden scale: 2^-15
    keep_shift: int
    out_mult: int  # (1 - z) n (Q0.30) to the hidden state's scale: 2^-30 / s_h
    out_shift: int


def layer_params(w_ih, w_hh, b_ih, b_hh, s_x: float, s_h: float, state_shift: int) -> GruS16:
    """Quantize one PyTorch GRU layer's (or GRUCell's) float weights for mcu_gru_s16, given the input's and the
    hidden state's int16 scales and the candidate term's power-of-two shift. A gate multiplier of 2^14 or more
    has no 16x8 form and raises ValueError."""
    w_ih, w_hh = np.asarray(w_ih, np.float64), np.asarray(w_hh, np.float64)
    rows = w_hh.shape[0]
    hidden = rows // 3
    b_ih = np.zeros(rows) if b_ih is None else np.asarray(b_ih, np.float64)
    b_hh = np.zeros(rows) if b_hh is None else np.asarray(b_hh, np.float64)
    qx, sx_w = symmetric_rows(w_ih)
    qh, sh_w = symmetric_rows(w_hh)
    h_target = np.full(rows, 2.0 ** GATE_FRAC)
    h_target[2 * hidden:] = 2.0 ** state_shift
    mx, ex = arith.quantize_multipliers(s_x * sx_w * 2.0 ** GATE_FRAC)
    mh, eh = arith.quantize_multipliers(s_h * sh_w * h_target)
    if np.any(ex > s16.SHIFT_MAX) or np.any(eh > s16.SHIFT_MAX):
        raise ValueError("a 16x8 GRU gate's real multiplier must stay below 2^14")
    in_bias = b_ih.copy()
    in_bias[:2 * hidden] += b_hh[:2 * hidden]
    bias = np.concatenate([np.rint(in_bias / (s_x * sx_w)),
                           np.rint(b_hh[2 * hidden:] / (s_h * sh_w[2 * hidden:]))]).astype(np.int64)
    cm, cs = arith.quantize_multiplier(2.0 ** -(state_shift + 3))
    km, ks = arith.quantize_multiplier(2.0 ** -15)
    om, osh = arith.quantize_multiplier(2.0 ** -30 / s_h)
    quant = np.stack([mx, ex, mh, eh], axis=1).astype(np.int32)
    return GruS16(qx, qh, bias, quant, int(state_shift), int(cm), int(cs), int(km), int(ks), int(om), int(osh))


def gru_s16(x: np.ndarray, p: GruS16, h0: np.ndarray | None = None) -> np.ndarray:
    """mcu_gru_s16 on int16 ``x`` [N, T, I] from ``h0`` [N, H] (None: the zero state): the int16 hidden states
    [N, T, H]."""
    x = np.asarray(x, dtype=np.int64)
    n_batch, steps, _ = x.shape
    hidden = p.w_hh.shape[1]
    q = p.quant.astype(np.int64)
    w_ih, w_hh = p.w_ih.astype(np.int64), p.w_hh.astype(np.int64)
    bias_x, bias_hn = p.bias[:3 * hidden], p.bias[3 * hidden:]
    rz, n = slice(0, 2 * hidden), slice(2 * hidden, 3 * hidden)
    out = np.empty((n_batch, steps, hidden), dtype=np.int16)
    for b in range(n_batch):
        h = np.zeros(hidden, np.int64) if h0 is None else np.asarray(h0[b], dtype=np.int64)
        for t in range(steps):
            gx = sat16(s16.requantize_s64(bias_x + w_ih @ x[b, t], q[:, 0], q[:, 1]))
            acc_h = w_hh @ h
            acc_h[n] += bias_hn
            gh = s16.requantize_s64(acc_h, q[:, 2], q[:, 3])
            pre = sat16(gx[rz] + gh[rz])
            r = activation_s16(pre[:hidden], 0, "sigmoid")
            z = activation_s16(pre[hidden:], 0, "sigmoid")
            cand = arith.requantize(r * sat16(gh[n]), p.cand_mult, p.cand_shift)
            nn_ = activation_s16(sat16(gx[n] + cand), 0, "tanh")
            h = sat16(arith.requantize(z * h, p.keep_mult, p.keep_shift) +
                      arith.requantize((32768 - z) * nn_, p.out_mult, p.out_shift))
            out[b, t] = h
    return out
