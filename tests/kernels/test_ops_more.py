"""Elementwise, normalisation and reduction ops: the fp32 kernels mcu_unary_f32 (GELU, SiLU, ELU, exp, rsqrt, scalar
arithmetic, ...), mcu_layer_norm_f32, mcu_bmm_f32, mcu_reduce_f32, mcu_maximum/minimum_f32 against PyTorch
over many shapes and parameters; whole models that use them (an MLP with LayerNorm and GELU, an LSTM
keyword spotter, attention-style batched products) through `mcu.compile` on the simulated M33."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind  # noqa: E402
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE, MCU_OK, BinaryParams, ptr  # noqa: E402
from mcu.frontend.opcodes import REDUCE_OP, UNARY_FN  # noqa: E402
from repo import requires_qemu  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
c_int32, c_float = ctypes.c_int32, ctypes.c_float


class UnaryParams(ctypes.Structure):
    _fields_ = [("size", c_int32), ("fn", c_int32), ("alpha", c_float), ("beta", c_float)]


class LayerNormParams(ctypes.Structure):
    _fields_ = [("rows", c_int32), ("cols", c_int32), ("eps", c_float)]


class BmmParams(ctypes.Structure):
    _fields_ = [("batch", c_int32), ("m", c_int32), ("k", c_int32), ("n", c_int32), ("a_batch_stride", c_int32),
                ("b_batch_stride", c_int32)]


class ReduceParams(ctypes.Structure):
    _fields_ = [("outer", c_int32), ("reduce", c_int32), ("inner", c_int32), ("op", c_int32)]


def kernel(name: str, n_args: int):
    """A kernel of the host build with pointer arguments (ctypes would pass Python ints as C ints)."""
    fn = getattr(cbind.lib(), name)
    fn.argtypes = [ctypes.c_void_p] * n_args
    fn.restype = ctypes.c_int
    return fn


def f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def close(got: np.ndarray, want: np.ndarray, rtol: float = 2e-6, atol: float = 2e-6) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    ok = (np.abs(got - want) <= atol + rtol * np.abs(want)) | (np.isnan(got) & np.isnan(want)) | (got == want)
    assert ok.all(), (got[~ok][:5], want[~ok][:5])


# torch's own op for each function, with the scalar parameters the kernel takes
UNARY_CASES = {
    "gelu": (lambda x, a, b: F.gelu(x), 0.0, 0.0),
    "gelu_tanh": (lambda x, a, b: F.gelu(x, approximate="tanh"), 0.0, 0.0),
    "silu": (lambda x, a, b: F.silu(x), 0.0, 0.0),
    "hardsigmoid": (lambda x, a, b: F.hardsigmoid(x), 0.0, 0.0),
    "leaky_relu": (lambda x, a, b: F.leaky_relu(x, a), 0.1, 0.0),
    "elu": (lambda x, a, b: F.elu(x, a), 0.7, 0.0),
    "softplus": (lambda x, a, b: F.softplus(x, beta=b, threshold=a), 20.0, 1.5),
    "exp": (lambda x, a, b: torch.exp(x), 0.0, 0.0),
    "log": (lambda x, a, b: torch.log(x.abs() + 0.1), 0.0, 0.0),
    "sqrt": (lambda x, a, b: torch.sqrt(x.abs()), 0.0, 0.0),
    "rsqrt": (lambda x, a, b: torch.rsqrt(x.abs() + 0.1), 0.0, 0.0),
    "abs": (lambda x, a, b: x.abs(), 0.0, 0.0),
    "neg": (lambda x, a, b: -x, 0.0, 0.0),
    "reciprocal": (lambda x, a, b: torch.reciprocal(x), 0.0, 0.0),
    "erf": (lambda x, a, b: torch.erf(x), 0.0, 0.0),
    "pow": (lambda x, a, b: torch.pow(x.abs(), a), 1.5, 0.0),
    "log_sigmoid": (lambda x, a, b: F.logsigmoid(x), 0.0, 0.0),
    "affine": (lambda x, a, b: x * a + b, 0.25, -3.0),
    "rsub": (lambda x, a, b: b - x * a, 1.0, 2.0),
    "mish": (lambda x, a, b: F.mish(x), 0.0, 0.0),
}
# the input each kernel sees for the cases whose torch op above transforms it first
PRE = {"log": lambda x: x.abs() + 0.1, "sqrt": lambda x: x.abs(), "rsqrt": lambda x: x.abs() + 0.1,
       "pow": lambda x: x.abs()}


def test_every_unary_function_has_a_case() -> None:
    assert set(UNARY_CASES) == set(UNARY_FN)


@SETTINGS
@given(fn=st.sampled_from(sorted(UNARY_CASES)), size=st.integers(1, 300), scale=st.sampled_from([0.1, 1.0, 8.0]),
       seed=st.integers(0, 2**16))
def test_unary_matches_torch(fn: str, size: int, scale: float, seed: int) -> None:
    op, alpha, beta = UNARY_CASES[fn]
    x = torch.from_numpy(f32(np.random.default_rng(seed).standard_normal(size) * scale))
    x[0] = 0.0 if size > 1 else x[0]  # a zero, where several functions switch branch
    want = op(x, alpha, beta).numpy()
    kin = f32(PRE.get(fn, lambda t: t)(x).numpy())
    out = np.zeros(size, np.float32)
    p = UnaryParams(size, UNARY_FN[fn], alpha, beta)
    assert kernel("mcu_unary_f32", 3)(ctypes.byref(p), ptr(kin), ptr(out)) == MCU_OK
    close(out, want, rtol=4e-6, atol=4e-6)


def test_unary_checks_its_arguments() -> None:
    x = f32(np.ones(4))
    out = np.zeros(4, np.float32)
    assert kernel("mcu_unary_f32", 3)(ctypes.byref(UnaryParams(4, len(UNARY_FN), 0, 0)), ptr(x), ptr(out)) == \
        MCU_ERR_INVALID_ARG
    assert kernel("mcu_unary_f32", 3)(ctypes.byref(UnaryParams(0, 0, 0, 0)), ptr(x), ptr(out)) == MCU_ERR_SHAPE
    assert kernel("mcu_unary_f32", 3)(ctypes.byref(UnaryParams(4, 0, 0, 0)), ptr(x), ptr(x)) == MCU_OK  # in place


@SETTINGS
@given(rows=st.integers(1, 12), cols=st.integers(1, 70), affine=st.booleans(), eps=st.sampled_from([1e-5, 1e-3]),
       seed=st.integers(0, 2**16))
def test_layer_norm_matches_torch(rows: int, cols: int, affine: bool, eps: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = f32(rng.standard_normal((rows, cols)) * 3 + 1)
    w = f32(rng.standard_normal(cols)) if affine else None
    b = f32(rng.standard_normal(cols)) if affine else None
    want = F.layer_norm(torch.from_numpy(x), (cols,), None if w is None else torch.from_numpy(w),
                        None if b is None else torch.from_numpy(b), eps).numpy()
    out = np.zeros_like(x)
    p = LayerNormParams(rows, cols, eps)
    assert kernel("mcu_layer_norm_f32", 5)(ctypes.byref(p), ptr(x), ptr(w) if w is not None else None,
                                  ptr(b) if b is not None else None, ptr(out)) == MCU_OK
    close(out, want, rtol=2e-5, atol=2e-5)


@SETTINGS
@given(batch=st.integers(1, 4), m=st.integers(1, 9), k=st.integers(1, 17), n=st.integers(1, 9),
       broadcast=st.sampled_from(["none", "a", "b"]), seed=st.integers(0, 2**16))
def test_bmm_matches_torch(batch: int, m: int, k: int, n: int, broadcast: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = f32(rng.standard_normal((1 if broadcast == "a" else batch, m, k)))
    b = f32(rng.standard_normal((1 if broadcast == "b" else batch, k, n)))
    want = torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    want = np.broadcast_to(want, (batch, m, n))
    out = np.zeros((batch, m, n), np.float32)
    p = BmmParams(batch, m, k, n, 0 if broadcast == "a" else m * k, 0 if broadcast == "b" else k * n)
    assert kernel("mcu_bmm_f32", 4)(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    close(out, want, rtol=1e-5, atol=1e-5 * k)
    assert kernel("mcu_bmm_f32", 4)(ctypes.byref(p), ptr(a), ptr(b), ptr(a)) == MCU_ERR_INVALID_ARG  # no overlap


@SETTINGS
@given(outer=st.integers(1, 6), reduce=st.integers(1, 20), inner=st.integers(1, 6),
       op=st.sampled_from(sorted(REDUCE_OP)), seed=st.integers(0, 2**16))
def test_reduce_matches_torch(outer: int, reduce: int, inner: int, op: str, seed: int) -> None:
    x = f32(np.random.default_rng(seed).standard_normal((outer, reduce, inner)) * 4)
    t = torch.from_numpy(x)
    want = {"sum": t.sum(1), "mean": t.mean(1), "amax": t.amax(1), "amin": t.amin(1)}[op].numpy()
    out = np.zeros((outer, inner), np.float32)
    assert kernel("mcu_reduce_f32", 3)(ctypes.byref(ReduceParams(outer, reduce, inner, REDUCE_OP[op])), ptr(x), ptr(out)) \
        == MCU_OK
    close(out, want, rtol=1e-5, atol=1e-5 * reduce)


@SETTINGS
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), which=st.sampled_from(["maximum", "minimum"]),
       broadcast=st.booleans(), seed=st.integers(0, 2**16))
def test_maximum_minimum_match_torch(shape: list[int], which: str, broadcast: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = f32(rng.standard_normal(shape))
    b_shape = [1] * (len(shape) - 1) + [shape[-1]] if broadcast else shape
    b = f32(rng.standard_normal(b_shape))
    a.reshape(-1)[0] = np.nan  # NaN propagates, as in torch.maximum
    want = getattr(torch, which)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    rank = len(shape)
    strides_a = [int(np.prod(shape[d + 1:])) for d in range(rank)]
    strides_b = [0 if b_shape[d] == 1 and shape[d] != 1 else int(np.prod(b_shape[d + 1:])) for d in range(rank)]
    pad = cbind.MCU_MAX_DIMS - rank
    p = BinaryParams(rank, cbind.Dims(*(shape + [1] * pad)), cbind.Dims(*(strides_a + [0] * pad)),
                     cbind.Dims(*(strides_b + [0] * pad)), -cbind.INF, cbind.INF)
    out = np.zeros(shape, np.float32)
    assert kernel(f"mcu_{which}_f32", 4)(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    close(out, want)


# --- models -----------------------------------------------------------------------------------------


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.ln, self.b = torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.ln(self.a(x)))
        return self.b(F.silu(h) * 0.5 + torch.maximum(h, -h).sqrt() - 1.0)


class KWS(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.fc = torch.nn.LSTM(10, 24, batch_first=True), torch.nn.Linear(24, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class Attn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.bmm(self.q(x), self.k(x).transpose(1, 2)) * (1 / math.sqrt(8))
        return torch.softmax(s, dim=-1).sum(dim=-1) + s.amax(dim=-1) - torch.rsqrt(s.exp().mean(dim=1) + 1.0)


MODELS = {"mlp_gelu_ln": (MLP, (1, 16)), "kws_lstm": (KWS, (1, 20, 10)), "attention": (Attn, (2, 6, 8))}


@requires_qemu
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_with_the_new_ops_on_the_simulated_m33(name: str) -> None:
    import mcu

    torch.manual_seed(0)
    cls, shape = MODELS[name]
    model = cls().eval()
    inputs = [(torch.randn(*shape),) for _ in range(2)]
    cm = mcu.compile(model, inputs[0], board="mps2-an505", test_inputs=inputs, name=name)
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, x in enumerate(inputs):
        want = model(*x).detach().numpy()
        assert np.max(np.abs(run.outputs[v][0] - want)) <= 1e-4 * np.max(np.abs(want))
