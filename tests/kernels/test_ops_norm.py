"""Normalisation, reductions and int8 activations.

Kernels against PyTorch (fp32) and against their Python references bit for bit (int8: mcu_layer_norm_s8,
the 256-entry tables of every mcu_unary_f32 function through mcu_lut_s8) over many shapes and
parameters, extremes included; the frontend's new ops in whole models compiled for the host, where the
program file and the generated C agree bit for bit and fp32 follows eager PyTorch; int8 models that keep
no fp32 island and equal the integer reference exactly; the same on the simulated M33.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cbind  # noqa: E402
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_SHAPE, MCU_OK, ptr  # noqa: E402
from mcu.errors import McuError  # noqa: E402
from mcu.frontend.opcodes import UNARY_FN  # noqa: E402
from mcu.reference import arith  # noqa: E402
from mcu.reference.norm import LayerNormS8, layer_norm_params, layer_norm_s8  # noqa: E402
from repo import requires_qemu  # noqa: E402
from mcu.reference.elementwise import UNARY_TABLE_FN, lut_s8, unary_real  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
c_int32, c_float = ctypes.c_int32, ctypes.c_float


class GroupNormParams(ctypes.Structure):
    _fields_ = [("batch", c_int32), ("channels", c_int32), ("spatial", c_int32), ("groups", c_int32),
                ("channels_last", c_int32), ("eps", c_float)]


class VarParams(ctypes.Structure):
    _fields_ = [("outer", c_int32), ("reduce", c_int32), ("inner", c_int32), ("divisor", c_float)]


class PreluParams(ctypes.Structure):
    _fields_ = [("size", c_int32), ("channels", c_int32), ("inner", c_int32)]


class LayerNormS8Params(ctypes.Structure):
    _fields_ = [("rows", c_int32), ("cols", c_int32), ("eps_lo", c_int32), ("eps_hi", c_int32),
                ("output_offset", c_int32), ("act_min", c_int32), ("act_max", c_int32), ("rms", c_int32),
                ("input_zero_point", c_int32)]


def kernel(name: str, n_args: int, scalars: int = 0):
    """A kernel of the host build: ``scalars`` int32 arguments first, then pointers."""
    fn = getattr(cbind.lib(), name)
    fn.argtypes = [c_int32] * scalars + [ctypes.c_void_p] * (n_args - scalars)
    fn.restype = ctypes.c_int
    return fn


def f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def close(got: np.ndarray, want: np.ndarray, rtol: float = 2e-5, atol: float = 2e-5) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    ok = (np.abs(got - want) <= atol + rtol * np.abs(want)) | (np.isnan(got) & np.isnan(want)) | (got == want)
    assert ok.all(), (got[~ok][:5], want[~ok][:5])


# --- fp32 kernels -------------------------------------------------------------------------------------


@SETTINGS
@example(batch=1, groups=4, per_group=1, spatial=1, affine=True, channels_last=False, eps=1e-5, seed=0)  # var 0
@example(batch=1, groups=1, per_group=1, spatial=2, affine=False, channels_last=False, eps=1e-5, seed=6678)  # near-equal pair
@given(batch=st.integers(1, 3), groups=st.integers(1, 4), per_group=st.integers(1, 4), spatial=st.integers(1, 20),
       affine=st.booleans(), channels_last=st.booleans(), eps=st.sampled_from([1e-5, 1e-2]), seed=st.integers(0, 2**16))
def test_group_norm_matches_torch(batch: int, groups: int, per_group: int, spatial: int, affine: bool,
                                  channels_last: bool, eps: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = groups * per_group
    x = f32(rng.standard_normal((batch, c, spatial)) * 3 + 2)
    w = f32(rng.standard_normal(c)) if affine else None
    b = f32(rng.standard_normal(c)) if affine else None
    # The reference in float64: torch's float32 CPU kernel folds (x - mean) * rstd * w + b into x * scale + shift,
    # which is off by ~|x w| rstd ulp where a group's variance is ~0 (rstd up to 1 / sqrt(eps)); ours is not.
    d64 = lambda a: None if a is None else torch.from_numpy(a.astype(np.float64))  # noqa: E731
    want = torch.ops.aten.native_group_norm(d64(x), d64(w), d64(b), batch, c, spatial, groups, eps)[0].numpy()
    mem = f32(x.transpose(0, 2, 1)) if channels_last else x
    out = np.zeros_like(mem)
    p = GroupNormParams(batch, c, spatial, groups, int(channels_last), eps)
    assert kernel("mcu_group_norm_f32", 5)(ctypes.byref(p), ptr(mem), ptr(w), ptr(b), ptr(out)) == MCU_OK
    close(out.transpose(0, 2, 1) if channels_last else out, want)
    assert kernel("mcu_group_norm_f32", 5)(ctypes.byref(p), ptr(mem), ptr(w), ptr(b), ptr(mem)) == MCU_OK  # in place
    close(mem.transpose(0, 2, 1) if channels_last else mem, want)


def test_group_norm_checks_its_arguments() -> None:
    x = f32(np.ones(12))
    out = np.zeros_like(x)
    run = kernel("mcu_group_norm_f32", 5)
    assert run(ctypes.byref(GroupNormParams(1, 6, 2, 4, 0, 1e-5)), ptr(x), None, None, ptr(out)) == MCU_ERR_SHAPE
    assert run(ctypes.byref(GroupNormParams(1, 6, 2, 3, 2, 1e-5)), ptr(x), None, None, ptr(out)) == MCU_ERR_INVALID_ARG
    shifted = run(ctypes.byref(GroupNormParams(1, 6, 2, 3, 0, 1e-5)), ptr(x), None, None, ptr(x[1:]))
    assert shifted == MCU_ERR_INVALID_ARG


@SETTINGS
@given(outer=st.integers(1, 5), reduce=st.integers(1, 30), inner=st.integers(1, 5),
       correction=st.sampled_from([0, 1, 2]),
       seed=st.integers(0, 2**16))
def test_var_matches_torch(outer: int, reduce: int, inner: int, correction: int, seed: int) -> None:
    x = f32(np.random.default_rng(seed).standard_normal((outer, reduce, inner)) * 5 + 3)
    want = torch.var(torch.from_numpy(x), dim=1, correction=correction).numpy()
    out = np.zeros((outer, inner), np.float32)
    p = VarParams(outer, reduce, inner, max(0.0, reduce - correction))
    assert kernel("mcu_var_f32", 3)(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    close(out, want, rtol=5e-5, atol=5e-5)


@SETTINGS
@given(outer=st.integers(1, 5), reduce=st.integers(1, 30), inner=st.integers(1, 5), ties=st.booleans(),
       nan=st.booleans(), seed=st.integers(0, 2**16))
def test_argmax_matches_torch(outer: int, reduce: int, inner: int, ties: bool, nan: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = f32(rng.integers(-3, 3, (outer, reduce, inner)) if ties else rng.standard_normal((outer, reduce, inner)))
    if nan:
        x[0, rng.integers(reduce), 0] = np.nan  # a NaN wins, as in torch.argmax
    want = torch.argmax(torch.from_numpy(x), dim=1).numpy()
    out = np.zeros((outer, inner), np.int32)
    assert kernel("mcu_argmax_f32", 5, 3)(outer, reduce, inner, ptr(x), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, want)
    codes = np.ascontiguousarray(rng.integers(-128, 128, (outer, reduce, inner)).astype(np.int8))
    assert kernel("mcu_argmax_s8", 5, 3)(outer, reduce, inner, ptr(codes), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, torch.argmax(torch.from_numpy(codes.astype(np.float32)), dim=1).numpy())


@SETTINGS
@given(outer=st.integers(1, 4), axis=st.integers(1, 40), inner=st.integers(1, 4),
       scale=st.sampled_from([0.1, 1.0, 30.0]),
       seed=st.integers(0, 2**16))
def test_log_softmax_matches_torch(outer: int, axis: int, inner: int, scale: float, seed: int) -> None:
    x = f32(np.random.default_rng(seed).standard_normal((outer, axis, inner)) * scale)
    want = F.log_softmax(torch.from_numpy(x), dim=1).numpy()
    out = np.zeros_like(x)
    assert kernel("mcu_log_softmax_f32", 5, 3)(outer, axis, inner, ptr(x), ptr(out)) == MCU_OK
    close(out, want, rtol=2e-6, atol=4e-6 * max(1.0, scale))
    assert kernel("mcu_log_softmax_f32", 5, 3)(outer, axis, inner, ptr(x), ptr(x)) == MCU_OK  # in place
    close(x, want, rtol=2e-6, atol=4e-6 * max(1.0, scale))


@SETTINGS
@given(n=st.integers(1, 3), c=st.integers(1, 6), spatial=st.integers(1, 12), shared=st.booleans(),
       channels_last=st.booleans(), seed=st.integers(0, 2**16))
def test_prelu_matches_torch(n: int, c: int, spatial: int, shared: bool, channels_last: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = f32(rng.standard_normal((n, c, spatial)))
    w = f32(rng.standard_normal(1 if shared else c))
    want = F.prelu(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    mem = f32(x.transpose(0, 2, 1)) if channels_last else x
    out = np.zeros_like(mem)
    p = PreluParams(x.size, w.size, 1 if shared or channels_last else spatial)
    assert kernel("mcu_prelu_f32", 4)(ctypes.byref(p), ptr(mem), ptr(w), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out.transpose(0, 2, 1) if channels_last else out, want)


# --- int8 layer norm ----------------------------------------------------------------------------------


def run_layer_norm_s8(x: np.ndarray, p: LayerNormS8) -> np.ndarray:
    rows, cols = x.shape
    lo, hi = p.eps_words
    params = LayerNormS8Params(rows, cols, lo, hi, p.output_offset, p.act_min, p.act_max, int(p.rms),
                               p.input_zero_point)
    out = np.zeros_like(x)
    args = [np.ascontiguousarray(a, np.int32) for a in (p.multipliers, p.shifts, p.bias)]
    status = kernel("mcu_layer_norm_s8", 6)(ctypes.byref(params), ptr(x), *(ptr(a) for a in args), ptr(out))
    assert status == MCU_OK
    return out


@SETTINGS
@given(rows=st.integers(1, 6), cols=st.sampled_from([1, 2, 3, 7, 16, 33, 64, 200, 768]),
       s_in=st.sampled_from([1e-3, 0.02, 0.1, 2.0]), s_out=st.sampled_from([0.005, 0.03, 0.5]),
       zp_out=st.sampled_from([-128, -3, 0, 127]), eps=st.sampled_from([0.0, 1e-5, 1e-2]),
       affine=st.sampled_from(["none", "random", "extreme"]),
       data=st.sampled_from(["random", "const", "extreme", "narrow"]),
       rms=st.booleans(), zp_in=st.sampled_from([-128, 0, 9, 127]), seed=st.integers(0, 2**16))
def test_layer_norm_s8_matches_its_reference(rows: int, cols: int, s_in: float, s_out: float, zp_out: int, eps: float,
                                             affine: str, data: str, rms: bool, zp_in: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = {"random": lambda: rng.integers(-128, 128, (rows, cols)),
         "const": lambda: np.full((rows, cols), rng.integers(-128, 128)),
         "extreme": lambda: rng.choice([-128, 127], (rows, cols)),
         "narrow": lambda: rng.integers(-1, 1, (rows, cols))}[data]().astype(np.int8)
    w = b = None
    if affine == "random":
        w, b = rng.standard_normal(cols), rng.standard_normal(cols)
    elif affine == "extreme":
        w = rng.choice([0.0, -3.0, 1e-9, 4.0], cols)
        b = rng.choice([0.0, 1e4, -1e4, 0.3], cols)
    b = None if rms else b  # RMS norm has no bias
    p = layer_norm_params(cols, s_in, s_out, zp_out, eps, w, b, rms=rms, zp_in=zp_in)
    got = run_layer_norm_s8(x, p)
    want = layer_norm_s8(x, p)
    np.testing.assert_array_equal(got, want)
    # and it is a layer norm (RMS norm): within two output steps of the float one on the dequantized input
    real_x = torch.from_numpy((x.astype(np.float64) - (zp_in if rms else 0)) * s_in)
    weight = None if w is None else torch.from_numpy(w)
    real = F.rms_norm(real_x, (cols,), weight, eps) if rms else \
        F.layer_norm(real_x, (cols,), weight, None if b is None else torch.from_numpy(b), eps)
    expect = np.clip(np.rint(real.numpy() / s_out) + zp_out, -128, 127)
    defined = ~np.isnan(expect)  # a constant row with eps 0 is 0/0 in float; the kernel gives the bias
    assert np.max(np.abs(want.astype(np.int64) - expect)[defined], initial=0) <= 2


@SETTINGS
@given(rows=st.integers(1, 8), cols=st.integers(1, 70), affine=st.booleans(), eps=st.sampled_from([1e-6, 1e-3]),
       seed=st.integers(0, 2**16))
def test_rms_norm_f32_matches_torch(rows: int, cols: int, affine: bool, eps: float, seed: int) -> None:
    class LayerNormParams(ctypes.Structure):
        _fields_ = [("rows", c_int32), ("cols", c_int32), ("eps", c_float)]

    rng = np.random.default_rng(seed)
    x = f32(rng.standard_normal((rows, cols)) * 3)
    w = f32(rng.standard_normal(cols)) if affine else None
    want = F.rms_norm(torch.from_numpy(x), (cols,), None if w is None else torch.from_numpy(w), eps).numpy()
    out = np.zeros_like(x)
    p = LayerNormParams(rows, cols, eps)
    assert kernel("mcu_rms_norm_f32", 4)(ctypes.byref(p), ptr(x), ptr(w), ptr(out)) == MCU_OK
    close(out, want, rtol=4e-6, atol=4e-6)


def test_layer_norm_s8_checks_its_arguments() -> None:
    p = layer_norm_params(8, 0.1, 0.1, 0, 1e-5, None, None)
    x = np.zeros((2, 8), np.int8)
    ints = [np.ascontiguousarray(a, np.int32) for a in (p.multipliers, p.shifts, p.bias)]
    run = kernel("mcu_layer_norm_s8", 6)

    def status(rows: int, cols: int, shifts: np.ndarray, out: np.ndarray) -> int:
        params = LayerNormS8Params(rows, cols, *p.eps_words, 0, -128, 127, 0, 0)
        return run(ctypes.byref(params), ptr(x), ptr(ints[0]), ptr(shifts), ptr(ints[2]), ptr(out))

    assert status(2, 8, ints[1], np.zeros_like(x)) == MCU_OK
    assert status(2, 8, ints[1], x) == MCU_OK  # in place
    assert status(1, 4097, ints[1], np.zeros_like(x)) == MCU_ERR_SHAPE
    assert status(2, 8, np.zeros(8, np.int32), np.zeros_like(x)) == MCU_ERR_INVALID_ARG
    with pytest.raises(ValueError):
        layer_norm_params(4097, 0.1, 0.1, 0, 1e-5, None, None)
    with pytest.raises(ValueError):
        layer_norm_params(1024, 1e-9, 0.1, 0, 1.0, None, None)  # the eps term past 2^61


# --- int8 tables ----------------------------------------------------------------------------------------

TABLE_PARAMS = {"leaky_relu": (0.1, 0.0), "elu": (0.7, 0.0), "softplus": (20.0, 1.5), "pow": (2.0, 0.0),
                "affine": (0.25, -3.0), "rsub": (1.0, 2.0)}


def test_every_unary_function_has_a_table() -> None:
    assert set(UNARY_TABLE_FN) == set(UNARY_FN)


@SETTINGS
@given(fn=st.sampled_from(sorted(UNARY_FN)), s_in=st.sampled_from([1e-3, 0.02, 0.1, 1.0]),
       zp_in=st.sampled_from([-128, -20, 0, 127]), s_out=st.sampled_from([1e-3, 0.01, 0.1, 2.0]),
       zp_out=st.sampled_from([-128, 0, 5, 127]))
def test_unary_tables_are_the_function_and_run_in_c(fn: str, s_in: float, zp_in: int, s_out: float,
                                                    zp_out: int) -> None:
    alpha, beta = TABLE_PARAMS.get(fn, (0.0, 0.0))
    table = arith.lut_table(unary_real(fn, alpha, beta), s_in, zp_in, s_out, zp_out)
    codes = np.arange(-128, 128, dtype=np.int8)
    # the C kernel looks up what the Python reference does, for every code
    out = np.zeros_like(codes)
    assert kernel("mcu_lut_s8", 4, 1)(256, ptr(table), ptr(codes), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, lut_s8(codes, table))
    # and the table is torch's function on the dequantized codes, requantized (float32 in torch: a tie
    # may round the other way, one step)
    x = torch.from_numpy((codes.astype(np.float64) - zp_in) * s_in).float()
    y = UNARY_TABLE_FN[fn](x, alpha, beta).double().numpy()
    valid = ~np.isnan(y)
    want = np.clip(np.rint(y[valid] / s_out) + zp_out, -128, 127)
    assert np.max(np.abs(table[valid].astype(np.int64) - want), initial=0) <= 1


# --- models ---------------------------------------------------------------------------------------------


class MLP(nn.Module):
    """An MLP with LayerNorm and GELU (the transformer block's feed-forward half)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.ln, self.b = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(F.gelu(self.ln(self.a(x))))


class Activations(nn.Module):
    """Every elementwise function of the first part, and PReLU with one slope, between two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.prelu = nn.Linear(8, 8), nn.Linear(8, 6), nn.PReLU(init=0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        r = [F.gelu(h, approximate="tanh"), F.silu(h), F.hardsigmoid(h), F.leaky_relu(h, 0.1), F.elu(h),
             F.softplus(h), torch.exp(h), torch.erf(h), -h, torch.sqrt(h.abs()), torch.log(h.abs() + 1),
             torch.rsqrt(h.abs() + 1), 1 / (h.abs() + 1), h.pow(2), F.logsigmoid(h), h * 0.5, 1.0 - h,
             self.prelu(h)]
        return self.b(torch.cat(r, 0)).amax(0, keepdim=True).argmax(-1)


class GroupNormBlock(nn.Module):
    """Convolution, group norm, SiLU; instance norm and PReLU; log_softmax head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)
        self.conv2 = nn.Conv2d(8, 4, 3)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.prelu = nn.PReLU(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.gn(self.conv(x)))
        h = self.prelu(self.inorm(self.conv2(h)))
        return F.log_softmax(self.fc(h.flatten(1)), dim=-1)


class Products(nn.Module):
    """RMSNorm (by hand and nn.RMSNorm), batched matmul on 3-D and 4-D tensors, baddbmm, var, clamp with
    tensor bounds, argmax."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)
        self.rms = nn.RMSNorm(8)
        self.register_buffer("lo", torch.full((8,), -0.5))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        k = self.rms(self.k(x))
        s = self.q(q) @ k.transpose(-1, -2)                                    # [2, 6, 6]
        s4 = s.reshape(2, 1, 6, 6) @ s.reshape(2, 1, 6, 6)                    # 4-D
        t = torch.baddbmm(s, s, s4.reshape(2, 6, 6), beta=0.5, alpha=0.25)
        v = torch.clamp(t, self.lo[:6], t.var(dim=-1, keepdim=True))
        return v, v.argmax(dim=-1)


class Reductions(nn.Module):
    """Reductions over dims that are not next to each other (a permute brings them together)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)                                    # [2, 6, 4, 4]
        a = h.sum(dim=(0, 2)) * 0.25 + h.amax(dim=(1, 3)).mean(0, keepdim=True).sum(1, keepdim=True)
        return a + h.mean(dim=(0, 3), keepdim=True).amin(dim=(1, 2)).reshape(1, 1)


class Attention(nn.Module):
    """Scores and weighted values as products of two activations (matmul and bmm), softmax between."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.softmax((self.q(x) @ self.k(x).transpose(-1, -2)) * 0.35, dim=-1)
        return self.o(torch.bmm(a, self.v(x)))


class RMS(nn.Module):
    """nn.RMSNorm and RMSNorm written by hand between linear layers, a mean over the features."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.rms, self.b = nn.Linear(8, 16), nn.RMSNorm(16), nn.Linear(16, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.rms(self.a(x))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.b(h).sum(-1, keepdim=True) + self.b(h).mean(0, keepdim=True)


FP32_MODELS = {"mlp_ln_gelu": (MLP, (4, 16)), "group_norm_block": (GroupNormBlock, (1, 3, 6, 6)),
               "products": (Products, (2, 6, 8)), "rms": (RMS, (3, 8)), "reductions": (Reductions, (2, 3, 6, 6))}
INT8_MODELS = {"mlp_ln_gelu": (MLP, (4, 16)), "activations": (Activations, (2, 8)), "rms": (RMS, (3, 8)),
               "reductions": (Reductions, (2, 3, 6, 6)), "attention": (Attention, (2, 6, 8))}


def _compiled(name: str, table: dict, quantize: str):
    import mcu

    torch.manual_seed(0)
    cls, shape = table[name]
    model = cls().eval()
    calib = [(torch.randn(*shape),) for _ in range(24)]
    kw = {"calibration": calib} if quantize == "int8" else {}
    cm = mcu.compile(model, calib[0], quantize=quantize, test_inputs=calib[:3], name=f"{name}_{quantize}", **kw)
    return model, cm, calib[:3]


@pytest.fixture(scope="module")
def compiled():
    cache: dict = {}

    def get(name: str, quantize: str):
        key = (name, quantize)
        if key not in cache:
            cache[key] = _compiled(name, FP32_MODELS if quantize == "none" else INT8_MODELS, quantize)
        return cache[key]
    return get


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8)) for x, y in zip(a, b))


@pytest.mark.parametrize("name", sorted(FP32_MODELS))
def test_fp32_models_follow_eager_and_the_program_equals_the_generated_c(compiled, name: str) -> None:
    model, cm, inputs = compiled(name, "none")
    for x in inputs:
        assert _same(cm.run_raw(*x), cm.run_raw_c(*x))
        for got, want in zip(cm.run(*x), model(*x) if isinstance(model(*x), tuple) else (model(*x),)):
            want = want.detach().numpy()
            if want.dtype == np.int64:
                np.testing.assert_array_equal(got.numpy(), want)
            else:
                assert np.max(np.abs(got.numpy() - want)) <= 1e-5 * max(1.0, float(np.max(np.abs(want))))


@pytest.mark.parametrize("name", sorted(INT8_MODELS))
def test_int8_models_keep_no_fp32_island_and_equal_the_reference(compiled, name: str) -> None:
    model, cm, inputs = compiled(name, "int8")
    assert cm.graph.fallbacks == []
    assert all(op.output.dtype != "float32" for op in cm.graph.ops)
    assert cm.reference_is_exact
    kinds = {op.kind for op in cm.graph.ops}
    assert {"lut", "reduce", "layer_norm", "argmax", "bmm"} & kinds
    for x in inputs:
        want = cm.reference_raw(*x)
        assert _same(cm.run_raw(*x), want) and _same(cm.run_raw_c(*x), want)
    if name == "mlp_ln_gelu":  # and it is the model: int8 within a few steps of eager
        x = inputs[0]
        scale = cm.graph.outputs[0].quant.scale[0]
        assert np.max(np.abs(cm.run(*x)[0].numpy() - model(*x).detach().numpy())) <= 8 * scale


def test_clear_errors() -> None:
    import mcu

    class Broadcast(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a @ b

    # operands with different batch dims: the broadcasting expand is a copy (mcu_remap), not an error
    x = (torch.randn(2, 3, 4, 5), torch.randn(1, 3, 5, 4))
    got = mcu.compile(Broadcast(), x).run(*x)[0]
    torch.testing.assert_close(got, Broadcast()(*x), rtol=1e-5, atol=1e-5)

    class BatchStatistics(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.batch_norm(x, None, None, training=True)

    with pytest.raises(McuError, match="training mode"):
        mcu.compile(BatchStatistics(), (torch.randn(2, 3, 4),))


# --- on the simulated M33 -------------------------------------------------------------------------------

QEMU_CASES = [("mlp_ln_gelu", "none"), ("mlp_ln_gelu", "int8"), ("group_norm_block", "none"), ("rms", "int8"),
              ("activations", "int8"), ("products", "none"), ("reductions", "int8"), ("attention", "int8")]


@pytest.mark.slow
@requires_qemu
@pytest.mark.parametrize("name,quantize", QEMU_CASES)
def test_models_on_the_simulated_m33(compiled, name: str, quantize: str) -> None:
    model, cm, inputs = compiled(name, quantize)
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, x in enumerate(inputs):
        if quantize == "int8":
            assert _same(run.outputs_raw[v], [r.reshape(o.shape) for r, o in
                                              zip(cm.raw_outputs(cm.reference_raw(*x)), run.outputs_raw[v])])
        else:
            wants = model(*x)
            for got, want in zip(run.outputs[v], wants if isinstance(wants, tuple) else (wants,)):
                want = want.detach().numpy()
                if want.dtype == np.int64:  # argmax: int32 on the device
                    np.testing.assert_array_equal(got, want)
                else:
                    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))
    print(f"\n{name} {quantize}: {run.instructions} instructions, arena {cm.memory.arena_size} B, "
          f"flash {cm.build().flash_bytes} B")


# --- int8 reductions ------------------------------------------------------------------------------------


class ReduceS8Params(ctypes.Structure):
    _fields_ = [("outer", c_int32), ("reduce", c_int32), ("inner", c_int32), ("op", c_int32),
                ("input_offset", c_int32), ("multiplier", c_int32), ("shift", c_int32), ("output_offset", c_int32),
                ("act_min", c_int32), ("act_max", c_int32)]


@SETTINGS
@given(outer=st.integers(1, 4), reduce=st.integers(1, 300), inner=st.integers(1, 4),
       op=st.sampled_from(["sum", "mean", "amax", "amin"]), zp_in=st.sampled_from([-128, 0, 37, 127]),
       zp_out=st.sampled_from([-128, 0, 127]), ratio=st.sampled_from([1.0, 0.37, 3.0, 1e-3, 200.0]),
       extreme=st.booleans(), seed=st.integers(0, 2**16))
def test_reduce_s8_matches_its_reference(outer: int, reduce: int, inner: int, op: str, zp_in: int, zp_out: int,
                                         ratio: float, extreme: bool, seed: int) -> None:
    from mcu.frontend.opcodes import REDUCE_OP
    from mcu.reference.norm import reduce_s8

    rng = np.random.default_rng(seed)
    shape = (outer, reduce, inner)
    x = (rng.choice([-128, 127], shape) if extreme else rng.integers(-128, 128, shape)).astype(np.int8)
    mult, shift = arith.quantize_multiplier(ratio / (reduce if op == "mean" else 1))
    p = ReduceS8Params(outer, reduce, inner, REDUCE_OP[op], -zp_in, mult, shift, zp_out, -128, 127)
    out = np.zeros((outer, inner), np.int8)
    assert kernel("mcu_reduce_s8", 3)(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    want = reduce_s8(x, op, -zp_in, mult, shift, zp_out)
    np.testing.assert_array_equal(out, want)
    # and it is the reduction: within one step of the real one
    real = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[op](x.astype(np.float64) - zp_in, axis=1)
    assert np.max(np.abs(want - np.clip(np.rint(real * ratio) + zp_out, -128, 127))) <= 1


# --- int8 batched products ------------------------------------------------------------------------------


class BmmS8Params(ctypes.Structure):
    _fields_ = [(name, c_int32) for name in ("batch", "m", "k", "n", "a_batch_stride", "b_batch_stride", "a_offset",
                                             "b_offset", "multiplier", "shift", "output_offset", "act_min",
                                             "act_max")]


@SETTINGS
@given(batch=st.integers(1, 3), m=st.integers(1, 7), k=st.integers(1, 40), n=st.integers(1, 7),
       zp_a=st.sampled_from([-128, 0, 127]), zp_b=st.sampled_from([-128, 3, 127]),
       zp_out=st.sampled_from([-128, 0, 127]),
       ratio=st.sampled_from([1e-4, 3e-3, 0.05, 1.0]), extreme=st.booleans(), seed=st.integers(0, 2**16))
def test_bmm_s8_matches_its_reference(batch: int, m: int, k: int, n: int, zp_a: int, zp_b: int, zp_out: int,
                                      ratio: float, extreme: bool, seed: int) -> None:
    from mcu.reference.conv import bmm_s8

    rng = np.random.default_rng(seed)

    def codes(shape: tuple[int, ...]) -> np.ndarray:
        return (rng.choice([-128, 127], shape) if extreme else rng.integers(-128, 128, shape)).astype(np.int8)

    a, b = codes((batch, m, k)), codes((batch, k, n))
    mult, shift = arith.quantize_multiplier(ratio)
    p = BmmS8Params(batch, m, k, n, m * k, k * n, -zp_a, -zp_b, mult, shift, zp_out, -128, 127)
    out = np.zeros((batch, m, n), np.int8)
    assert kernel("mcu_bmm_s8", 4)(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    want = bmm_s8(a, b, -zp_a, -zp_b, mult, shift, zp_out)
    np.testing.assert_array_equal(out, want)
    real = np.matmul(a.astype(np.float64) - zp_a, b.astype(np.float64) - zp_b) * ratio
    assert np.max(np.abs(want - np.clip(np.rint(real) + zp_out, -128, 127))) <= 1
    assert kernel("mcu_bmm_s8", 4)(ctypes.byref(p), ptr(a), ptr(b), ptr(a)) == MCU_ERR_INVALID_ARG  # no overlap
