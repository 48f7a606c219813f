"""Bit-exact Python reference of the mixed-precision linear kernels (runtime_c/include/mcu/kernels_mixed.h).

Float arithmetic is float32, one IEEE operation at a time in the C order
(sums accumulate sequentially, never pairwise), so the results equal the C
kernels' bit for bit.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def clamp_act(y: np.ndarray, act_min: float, act_max: float) -> np.ndarray:
    y = np.where(y < F32(act_min), F32(act_min), y)
    return np.where(y > F32(act_max), F32(act_max), y).astype(F32)


def quantize_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 weights and float32 scales (max |w| / 127; rows of zeros get scale 1)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=1)
    scale = np.where(amax > 0, amax / F32(127), F32(1)).astype(F32)
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def linear_w8_f32(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray, bias: np.ndarray,
                  act_min: float = -np.inf, act_max: float = np.inf) -> np.ndarray:
    x = np.asarray(x, dtype=F32).reshape(-1, w.shape[1])
    wf = w.astype(F32)
    acc = np.zeros((x.shape[0], w.shape[0]), dtype=F32)
    for i in range(w.shape[1]):
        acc = (acc + x[:, i:i + 1] * wf[None, :, i]).astype(F32)
    return clamp_act((acc * w_scale.astype(F32) + bias.astype(F32)).astype(F32), act_min, act_max)


def dynamic_qparams(x: np.ndarray) -> tuple[np.float32, int]:
    x = np.asarray(x, dtype=F32).reshape(-1)
    lo = min(F32(0), x.min())
    hi = max(F32(0), x.max())
    scale = F32(F32(hi - lo) / F32(255))
    if not scale > 0:
        scale = F32(1)
    zp = int(np.clip(np.rint(F32(F32(-128) - F32(lo / scale))), -128, 127))
    return scale, zp


def linear_dyn_s8(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray, bias: np.ndarray,
                  act_min: float = -np.inf, act_max: float = np.inf) -> np.ndarray:
    x = np.asarray(x, dtype=F32).reshape(-1, w.shape[1])
    scale, zp = dynamic_qparams(x)
    inv = F32(F32(1) / scale)
    q = np.clip(np.rint((x * inv).astype(F32)) + F32(zp), -128, 127).astype(np.int64)
    acc = (q - zp) @ w.astype(np.int64).T
    y = (acc.astype(F32) * (scale * w_scale.astype(F32)).astype(F32)).astype(F32) + bias.astype(F32)
    return clamp_act(y.astype(F32), act_min, act_max)
