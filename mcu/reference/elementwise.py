"""Bit-exact Python references of the int8 elementwise kernels (layouts and keyword parameters as
:mod:`mcu.reference.common` describes): the binary ops ``mcu_add_s8``, ``mcu_sub_s8``, ``mcu_mul_s8``,
``mcu_maximum_s8``, ``mcu_minimum_s8``, ``mcu_div_s8`` (the last three as TFLite's integer semantics
define them), ``mcu_prelu_s8``, and the pointwise ``mcu_lut_s8``, ``mcu_requantize_s8``, ``mcu_clamp_s8``;
and the elementwise functions of ``mcu_unary_f32`` as the int8 form computes them: each function in
float64 on a torch tensor (its 256-entry table at int8 is :func:`mcu.reference.arith.lut_table` of
:func:`unary_real`). The keys are the IR's function names (mcu/frontend/opcodes.py). Quantize and
dequantize live in :mod:`mcu.reference.encoding`, which the runtime shares without torch.

Broadcasting of the binary ops: by default numpy broadcasting of the two physical arrays.
Alternatively pass the C struct's ``out_shape`` and ``a_strides`` / ``b_strides`` (element strides, 0
where broadcast, as :func:`broadcast_params` produces them); ``a`` and ``b`` are then read as flat
buffers with those strides, exactly like the C kernel.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Callable

import numpy as np

from mcu.reference.arith import quantize_multiplier, requantize, saturate_int32
from mcu.reference.common import as_int8, finish

if TYPE_CHECKING:
    import torch


def _torch() -> ModuleType:
    # lazy: the tables are computed when a model is lowered; `mcu --help` and the runtime never load torch
    import torch

    return torch


def _nn() -> ModuleType:
    # lazy: as _torch
    import torch.nn.functional

    return torch.nn.functional


# Each function in float64 on a torch tensor, with its scalar parameters (alpha, beta as the IR op has them).
UNARY_TABLE_FN: dict[str, Callable[[torch.Tensor, float, float], torch.Tensor]] = {
    "gelu": lambda x, a, b: _nn().gelu(x),
    "gelu_tanh": lambda x, a, b: _nn().gelu(x, approximate="tanh"),
    "silu": lambda x, a, b: _nn().silu(x),
    "hardsigmoid": lambda x, a, b: _nn().hardsigmoid(x),
    "leaky_relu": lambda x, a, b: _nn().leaky_relu(x, a),
    "elu": lambda x, a, b: _nn().elu(x, a),
    "softplus": lambda x, a, b: _nn().softplus(x, beta=b, threshold=a),
    "exp": lambda x, a, b: _torch().exp(x),
    "log": lambda x, a, b: _torch().log(x),
    "sqrt": lambda x, a, b: _torch().sqrt(x),
    "rsqrt": lambda x, a, b: _torch().rsqrt(x),
    "abs": lambda x, a, b: _torch().abs(x),
    "neg": lambda x, a, b: -x,
    "reciprocal": lambda x, a, b: _torch().reciprocal(x),
    "erf": lambda x, a, b: _torch().erf(x),
    "pow": lambda x, a, b: _torch().pow(x, a),
    "log_sigmoid": lambda x, a, b: _nn().logsigmoid(x),
    "affine": lambda x, a, b: x * a + b,
    "rsub": lambda x, a, b: b - x * a,
    "mish": lambda x, a, b: _nn().mish(x),
}


def unary_real(fn: str, alpha: float, beta: float) -> Callable[[np.ndarray], np.ndarray]:
    """The function a table holds, on float64 values. Inputs outside its domain (log, sqrt, rsqrt, pow of a
    negative value: NaN, which no int8 code can hold) take its value at 0, the domain's edge: a calibrated
    model reaches such codes only through rounding near 0. What is still NaN becomes 0."""
    f = UNARY_TABLE_FN[fn]
    torch = _torch()

    def real(x: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.asarray(x, np.float64))
        y = f(t, float(alpha), float(beta)).numpy()
        bad = np.isnan(y)
        if bad.any():
            y = np.where(bad, f(torch.zeros_like(t), float(alpha), float(beta)).numpy(), y)
        return np.nan_to_num(y, nan=0.0, posinf=np.inf, neginf=-np.inf)

    return real


def broadcast_params(a_shape, b_shape) -> dict:
    """``rank``, ``out_shape``, ``a_strides``, ``b_strides`` of mcu_binary_s8_params for numpy broadcasting
    of contiguous arrays of these shapes (element strides, 0 along broadcast dims)."""
    out_shape = tuple(int(v) for v in np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    rank = max(len(out_shape), 1)
    if rank > 6:
        raise ValueError("rank above MCU_MAX_DIMS")

    def strides(shape):
        shape = (1,) * (rank - len(shape)) + tuple(int(v) for v in shape)
        out, step = [0] * rank, 1
        for d in range(rank - 1, -1, -1):
            out[d] = 0 if shape[d] == 1 else step
            step *= shape[d]
        return out

    return dict(rank=rank, out_shape=list(out_shape) or [1], a_strides=strides(a_shape),
                b_strides=strides(b_shape))


def _gather(flat: np.ndarray, out_shape, strides) -> np.ndarray:
    idx = np.zeros((), dtype=np.int64)
    for n, s in zip(out_shape, strides):
        idx = idx[..., None] + np.arange(int(n), dtype=np.int64) * int(s)
    return np.asarray(flat).reshape(-1)[idx]


def broadcast_operands(a, b, rank, out_shape, a_strides, b_strides):
    a, b = as_int8(a), as_int8(b)
    if out_shape is None:
        a, b = np.broadcast_arrays(a, b)
    else:
        out_shape = list(out_shape)[: int(rank) if rank is not None else len(out_shape)]
        a = _gather(a, out_shape, a_strides)
        b = _gather(b, out_shape, b_strides)
    return a.astype(np.int64), b.astype(np.int64)


def _add_sub(sign, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
             out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
             b_strides):
    a, b = broadcast_operands(a, b, rank, out_shape, a_strides, b_strides)
    a1 = requantize((a + int(a_offset)) << int(left_shift), a_multiplier, a_shift)
    b1 = requantize((b + int(b_offset)) << int(left_shift), b_multiplier, b_shift)
    s = saturate_int32(a1 + sign * b1)
    return finish(s, out_multiplier, out_shift, output_offset, act_min, act_max)


def add_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
           out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None,
           out_shape=None, a_strides=None, b_strides=None):
    """mcu_add_s8: a' = rq((a + a_offset) * 2^left_shift, a_multiplier, a_shift), likewise b';
    out = clamp(rq(saturate_int32(a' + b'), out_multiplier, out_shift) + output_offset)."""
    return _add_sub(1, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape,
                    a_strides, b_strides)


def sub_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
           out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None,
           out_shape=None, a_strides=None, b_strides=None):
    """mcu_sub_s8: as :func:`add_s8` with saturate_int32(a' - b')."""
    return _add_sub(-1, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape,
                    a_strides, b_strides)


def mul_s8(a, b, *, a_offset, b_offset, out_multiplier, out_shift, output_offset, act_min=-128,
           act_max=127, rank=None, out_shape=None, a_strides=None, b_strides=None, a_multiplier=None,
           a_shift=None, b_multiplier=None, b_shift=None, left_shift=None):
    """mcu_mul_s8: out = clamp(rq((a + a_offset) * (b + b_offset)) + output_offset); add-only fields ignored."""
    a, b = broadcast_operands(a, b, rank, out_shape, a_strides, b_strides)
    prod = (a + int(a_offset)) * (b + int(b_offset))
    return finish(prod, out_multiplier, out_shift, output_offset, act_min, act_max)


def _extreme(pick, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
             out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides, b_strides):
    a, b = broadcast_operands(a, b, rank, out_shape, a_strides, b_strides)
    a1 = requantize((a + int(a_offset)) << int(left_shift), a_multiplier, a_shift)
    b1 = requantize((b + int(b_offset)) << int(left_shift), b_multiplier, b_shift)
    return finish(pick(a1, b1), out_multiplier, out_shift, output_offset, act_min, act_max)


def maximum_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
               out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None, out_shape=None,
               a_strides=None, b_strides=None) -> np.ndarray:
    """mcu_maximum_s8 (TFLite MAXIMUM with its own output scale): a' and b' as in add_s8;
    out = clamp(rq(max(a', b'), out_multiplier, out_shift) + output_offset)."""
    return _extreme(np.maximum, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
                    b_strides)


def minimum_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
               out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None, out_shape=None,
               a_strides=None, b_strides=None) -> np.ndarray:
    """mcu_minimum_s8: as :func:`maximum_s8` with min(a', b')."""
    return _extreme(np.minimum, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
                    b_strides)


DIV_BITS = 16  # MCU_BINARY_S8_DIV_BITS


def div_params(s_a: float, s_b: float, s_out: float, *, zp_a: int = 0, zp_b: int = 0, zp_out: int = 0) -> dict:
    """Parameters of mcu_div_s8: the Q16 quotient of the offset codes times s_a / (s_b s_out 2^16)."""
    if not (s_a > 0 and s_b > 0 and s_out > 0):
        raise ValueError("scales must be positive")
    m, s = quantize_multiplier(float(s_a) / (float(s_b) * float(s_out) * 2.0**DIV_BITS))
    return dict(a_offset=-int(zp_a), b_offset=-int(zp_b), a_multiplier=0, a_shift=0, b_multiplier=0, b_shift=0,
                left_shift=0, out_multiplier=m, out_shift=s, output_offset=int(zp_out))


def div_s8(a, b, *, a_offset, b_offset, out_multiplier, out_shift, output_offset, act_min=-128, act_max=127,
           rank=None, out_shape=None, a_strides=None, b_strides=None, a_multiplier=None, a_shift=None,
           b_multiplier=None, b_shift=None, left_shift=None) -> np.ndarray:
    """mcu_div_s8: q = round((a + a_offset) 2^16 / (b + b_offset)), half away from zero; out = clamp(rq(q) +
    output_offset); a zero divisor gives act_max (act_min) for a positive (negative) numerator, 0 / 0 the
    output's zero."""
    a, b = broadcast_operands(a, b, rank, out_shape, a_strides, b_strides)
    num, den = a + int(a_offset), b + int(b_offset)
    d = np.where(den == 0, 1, np.abs(den))
    q = (np.abs(num) * (1 << DIV_BITS) + d // 2) // d
    q = np.where((num < 0) != (den < 0), -q, q)
    out = finish(q, out_multiplier, out_shift, output_offset, act_min, act_max).astype(np.int64)
    zero = int(np.clip(int(output_offset), int(act_min), int(act_max)))
    ends = np.where(num > 0, int(act_max), np.where(num < 0, int(act_min), zero))
    return np.where(den == 0, ends, out).astype(np.int8)


def prelu_params(s_in: float, s_alpha: float, s_out: float, *, zp_in: int = 0, zp_out: int = 0) -> dict:
    """Parameters of mcu_prelu_s8 (TFLite PRELU) but the shape: s_in / s_out and s_in s_alpha / s_out."""
    pm, ps = quantize_multiplier(s_in / s_out)
    nm, ns = quantize_multiplier(s_in * s_alpha / s_out)
    return dict(input_offset=-int(zp_in), pos_multiplier=pm, pos_shift=ps, neg_multiplier=nm, neg_shift=ns,
                output_offset=int(zp_out))


def quantize_slopes(slopes: np.ndarray) -> tuple[np.ndarray, float]:
    """Symmetric int8 slopes [-127, 127] and their scale (max |slope| / 127; 1 when all are zero)."""
    slopes = np.asarray(slopes, dtype=np.float64).reshape(-1)
    top = float(np.max(np.abs(slopes))) if slopes.size else 0.0
    scale = top / 127.0 if top > 0 else 1.0
    return np.clip(np.round(slopes / scale), -127, 127).astype(np.int8), scale


def prelu_s8(x, alpha, *, channels, inner, input_offset, pos_multiplier, pos_shift, neg_multiplier, neg_shift,
             output_offset, act_min=-128, act_max=127, size=None) -> np.ndarray:
    """mcu_prelu_s8 on a flat int8 array in memory order: element i has slope alpha[(i / inner) % channels]."""
    xs = np.asarray(x, dtype=np.int8).reshape(-1).astype(np.int64) + int(input_offset)
    c = (np.arange(xs.size) // int(inner)) % int(channels)
    neg = xs * np.asarray(alpha, dtype=np.int8).reshape(-1).astype(np.int64)[c]
    y = np.where(xs >= 0, requantize(xs, pos_multiplier, pos_shift), requantize(neg, neg_multiplier, neg_shift))
    return np.clip(y + int(output_offset), int(act_min), int(act_max)).astype(np.int8)


def lut_s8(x, table):
    """mcu_lut_s8: out[i] = table[x[i] + 128]."""
    table = as_int8(table)
    if table.shape != (256,):
        raise ValueError("table must hold 256 int8 entries")
    return table[as_int8(x).astype(np.int64) + 128]


def requantize_s8(x, *, input_offset, multiplier, shift, output_offset, act_min=-128, act_max=127, size=None):
    """mcu_requantize_s8: clamp(rq(q + input_offset, multiplier, shift) + output_offset, act_min, act_max)."""
    return finish(as_int8(x).astype(np.int64) + int(input_offset), multiplier, shift, output_offset,
                   act_min, act_max)


def clamp_s8(x, *, act_min, act_max, size=None):
    """mcu_clamp_s8: elementwise clamp to [act_min, act_max]."""
    return np.clip(as_int8(x), int(act_min), int(act_max)).astype(np.int8)
