"""4-bit groupwise weights: packing, quantization and the bit-exact reference of the int4 linear kernels
(runtime_c/include/mcu/kernels_mixed.h, ``mcu_linear_w4_f32``).

A weight [out, in] is stored as signed 4-bit values in [-8, 7], two per byte (element 2k in the low
nibble, 2k+1 in the high one), row-major: [out, in / 2] bytes. Each row is cut into groups of
``group_size`` consecutive inputs with one float32 scale each ([out, in / group_size]); the zero-point is
0 (symmetric), as torchao's ``IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(g))``
produces. Float arithmetic is float32, one IEEE operation at a time in the C order (sums accumulate
sequentially), so the results equal the C kernel's bit for bit.
"""

from __future__ import annotations

import numpy as np

from mcu.reference.mixed import clamp_act, dynamic_qparams

F32 = np.float32
INT4_MIN, INT4_MAX = -8, 7


def pack_int4(values: np.ndarray) -> np.ndarray:
    """int values in [-8, 7], shape [rows, cols] with cols even -> uint8 [rows, cols / 2]."""
    v = np.asarray(values, dtype=np.int64)
    if v.ndim != 2 or v.shape[1] % 2:
        raise ValueError(f"int4 packing needs a 2-D array with an even row length, got shape {v.shape}")
    if v.size and (v.min() < INT4_MIN or v.max() > INT4_MAX):
        raise ValueError("int4 values must lie in [-8, 7]")
    nibbles = (v & 0xF).astype(np.uint8)
    return (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """uint8 [rows, cols / 2] -> int8 [rows, cols] (sign-extended nibbles, low nibble first)."""
    p = np.asarray(packed, dtype=np.uint8)
    lo = ((p & 0xF).astype(np.int16) ^ 8) - 8
    hi = ((p >> 4).astype(np.int16) ^ 8) - 8
    out = np.empty((p.shape[0], p.shape[1] * 2), dtype=np.int8)
    out[:, 0::2] = lo
    out[:, 1::2] = hi
    return out


def quantize_weights_int4(w: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric groupwise int4 as torchao's affine symmetric mapping: scale = max|w| / 7.5 per group
    (groups of zeros get a tiny positive scale), q = clamp(rint(w / scale), -8, 7).
    Returns (int8 values [out, in], float32 scales [out, in / group_size])."""
    w = np.asarray(w, dtype=np.float32)
    out_f, in_f = w.shape
    if in_f % group_size:
        raise ValueError(f"in_features {in_f} is not a multiple of the group size {group_size}")
    groups = w.reshape(out_f, in_f // group_size, group_size)
    amax = np.abs(groups).max(axis=2)
    scale = np.maximum(amax / F32((INT4_MAX - INT4_MIN) / 2), F32(np.finfo(np.float32).eps)).astype(F32)
    q = np.clip(np.rint(groups / scale[:, :, None]), INT4_MIN, INT4_MAX).astype(np.int8)
    return q.reshape(out_f, in_f), scale


def linear_w4_f32(x: np.ndarray, packed: np.ndarray, scales: np.ndarray, bias: np.ndarray | None, group_size: int,
                  act_min: float = -np.inf, act_max: float = np.inf) -> np.ndarray:
    """y[b][o] = clamp(sum_g (sum_{i in g} x[b][i] * (float)w[o][i]) * s[o][g] + bias[o]).

    The group sums and the running sum over groups accumulate in order, starting from 0."""
    w = unpack_int4(packed).astype(F32)
    out_f, in_f = w.shape
    x = np.asarray(x, dtype=F32).reshape(-1, in_f)
    s = np.asarray(scales, dtype=F32).reshape(out_f, in_f // group_size)
    acc = np.zeros((x.shape[0], out_f), dtype=F32)
    for g in range(in_f // group_size):
        part = np.zeros_like(acc)
        for i in range(g * group_size, (g + 1) * group_size):
            part = (part + (x[:, i:i + 1] * w[None, :, i]).astype(F32)).astype(F32)
        acc = (acc + (part * s[None, :, g]).astype(F32)).astype(F32)
    if bias is not None:
        acc = (acc + np.asarray(bias, dtype=F32)).astype(F32)
    return clamp_act(acc, act_min, act_max)


def linear_w4_s8(x: np.ndarray, packed: np.ndarray, scales: np.ndarray, bias: np.ndarray | None, group_size: int,
                 act_min: float = -np.inf, act_max: float = np.inf) -> np.ndarray:
    """Each input row quantized to int8 from its own range (mcu.reference.mixed.dynamic_qparams), exact int32
    group sums of (q - zp) * w, then y = clamp((sum_g (float)isum[g] * s[o][g]) * s_x + bias[o])."""
    w = unpack_int4(packed).astype(np.int64)
    out_f, in_f = w.shape
    x = np.asarray(x, dtype=F32).reshape(-1, in_f)
    s = np.asarray(scales, dtype=F32).reshape(out_f, in_f // group_size)
    rows = []
    for row in x:
        scale, zp = dynamic_qparams(row)
        inv = F32(F32(1) / scale)
        q = np.clip(np.rint((row * inv).astype(F32)) + F32(zp), -128, 127).astype(np.int64) - zp
        isum = (q.reshape(-1, group_size)[None, :, :] * w.reshape(out_f, -1, group_size)).sum(axis=2)
        acc = np.zeros(out_f, dtype=F32)
        for g in range(isum.shape[1]):
            acc = (acc + (isum[:, g].astype(F32) * s[:, g]).astype(F32)).astype(F32)
        y = (acc * scale).astype(F32)
        if bias is not None:
            y = (y + np.asarray(bias, dtype=F32)).astype(F32)
        rows.append(clamp_act(y, act_min, act_max))
    return np.stack(rows).astype(F32)
