"""The elementwise functions of ``mcu_unary_f32`` as the int8 form computes them: each function in float64
on a torch tensor (its 256-entry table at int8 is :func:`mcu.reference.arith.lut_table` of
:func:`unary_real`). The keys are the IR's function names (mcu/frontend/opcodes.py)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

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
    "mish": lambda x, a, b: F.mish(x),
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
