"""Mish, x * tanh(softplus(x)), end to end: the walk-through of docs/adding-an-op.md.

fp32 runs ``mcu_unary_f32`` with the function code ``MCU_UNARY_MISH``; int8 runs the 256-entry table
that ``mcu/reference/elementwise.py`` computes from torch's own mish. Checked: the C function against torch
over the whole float range; the ATen op kept whole through the Edge dialect and listed by ``mcu ops``;
small models (a linear layer and a YOLO-style convolution block) in fp32 within 1e-5 of eager, in int8
with no fp32 island and bit-exact with the Python reference, through the program interpreter and the
generated C on the host, and once each on the simulated Cortex-M33."""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import cbind  # noqa: E402
from cbind import MCU_OK, ptr  # noqa: E402
from repo import requires_qemu  # noqa: E402
from mcu.frontend.opcodes import UNARY_FN  # noqa: E402
from mcu.reference import arith  # noqa: E402
from mcu.reference.elementwise import lut_s8  # noqa: E402
from mcu.reference.elementwise import unary_real  # noqa: E402

c_int32, c_float = ctypes.c_int32, ctypes.c_float

# fp32 bound against eager: relative to the largest output of a model (one float32 rounding per op
# in C against torch's own kernel, a few ulp through two linear layers)
FP32_TOL = 1e-5


class UnaryParams(ctypes.Structure):
    _fields_ = [("size", c_int32), ("fn", c_int32), ("alpha", c_float), ("beta", c_float)]


def _unary_f32(x: np.ndarray, fn: str) -> np.ndarray:
    k = cbind.lib().mcu_unary_f32
    k.argtypes, k.restype = [ctypes.c_void_p] * 3, ctypes.c_int
    x = np.ascontiguousarray(x, np.float32)
    out = np.zeros_like(x)
    assert k(ctypes.byref(UnaryParams(x.size, UNARY_FN[fn], 0.0, 0.0)), ptr(x), ptr(out)) == MCU_OK
    return out


def test_the_c_function_is_torchs_mish_over_the_float_range() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-30, 30, 6001), rng.standard_normal(4000) * 4,
                        [0.0, -0.0, 1e-30, -1e-30, -87.0, -100.0, 87.0, 88.5, 100.0, 1e30, -1e30,
                         np.finfo(np.float32).max, -np.finfo(np.float32).max]]).astype(np.float32)
    got = _unary_f32(x, "mish").astype(np.float64)
    want = F.mish(torch.from_numpy(x)).double().numpy()
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=1e-7)
    assert np.isnan(_unary_f32(np.array([np.nan], np.float32), "mish")).all()


@pytest.mark.parametrize("s_in,zp_in,s_out,zp_out", [(0.05, 0, 0.04, -10), (0.2, -20, 0.1, -100), (1e-3, 127, 1e-3, 0)])
def test_the_int8_table_is_torchs_mish_and_runs_in_c(s_in: float, zp_in: int, s_out: float, zp_out: int) -> None:
    table = arith.lut_table(unary_real("mish", 0.0, 0.0), s_in, zp_in, s_out, zp_out)
    codes = np.arange(-128, 128, dtype=np.int8)
    k = cbind.lib().mcu_lut_s8
    k.argtypes, k.restype = [c_int32] + [ctypes.c_void_p] * 3, ctypes.c_int
    out = np.zeros_like(codes)
    assert k(256, ptr(table), ptr(codes), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, lut_s8(codes, table))
    real = F.mish(torch.from_numpy((codes.astype(np.float64) - zp_in) * s_in)).numpy()
    want = np.clip(np.rint(real / s_out) + zp_out, -128, 127)
    assert np.array_equal(table.astype(np.int64), want.astype(np.int64))


def test_mish_is_one_op_and_listed() -> None:
    from mcu.capture.edge import KEPT_WHOLE
    from mcu.commands.ops_listing import op_rows

    assert torch.ops.aten.mish.default in KEPT_WHOLE  # Core ATen would split it into softplus, tanh, mul
    row = {r.aten: r for r in op_rows()}["aten.mish.default"]
    assert row.kinds == ("unary",) and row.fp32 == ("mcu_unary_f32",) and row.int8 == ("mcu_lut_s8",)


class LinearMish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(F.mish(self.a(x)))


class ConvMish(nn.Module):
    """YOLOv4's convolution block: convolution, batch norm, mish."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 4, 3, stride=2)
        self.mish = nn.Mish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mish(self.conv2(self.mish(self.bn(self.conv(x)))))


MODELS = {"linear_mish": (LinearMish, (2, 8)), "conv_mish": (ConvMish, (1, 3, 8, 8))}


@pytest.fixture(scope="module")
def compiled():
    import mcu

    cache: dict = {}

    def get(name: str, quantize: str):
        if (name, quantize) not in cache:
            torch.manual_seed(0)
            cls, shape = MODELS[name]
            model = cls().eval()
            if isinstance(getattr(model, "bn", None), nn.BatchNorm2d):  # statistics that are not the identity
                model.bn.running_mean.uniform_(-0.5, 0.5)
                model.bn.running_var.uniform_(0.5, 2.0)
            calib = [(torch.randn(*shape) * 2,) for _ in range(24)]
            kw = {"calibration": calib} if quantize == "int8" else {}
            cm = mcu.compile(model, calib[0], quantize=quantize, test_inputs=calib[:3], name=f"{name}_{quantize}",
                             **kw)
            cache[(name, quantize)] = (model, cm, calib[:3])
        return cache[(name, quantize)]
    return get


def _same(a: list, b: list) -> bool:
    return all(np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8)) for x, y in zip(a, b))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fp32_follows_eager(compiled, name: str) -> None:
    model, cm, inputs = compiled(name, "none")
    assert any(op.kind == "unary" and op.attrs["fn"] == "mish" for op in cm.graph.ops)
    for (x,) in inputs:
        assert _same(cm.run_raw(x), cm.run_raw_c(x))
        want = model(x).detach().numpy()
        assert np.max(np.abs(cm.run(x)[0].numpy() - want)) <= FP32_TOL * max(1.0, float(np.max(np.abs(want))))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_is_a_table_and_bit_exact_with_the_reference(compiled, name: str) -> None:
    model, cm, inputs = compiled(name, "int8")
    assert cm.graph.fallbacks == [] and all(op.output.dtype != "float32" for op in cm.graph.ops)
    assert "lut" in {op.kind for op in cm.graph.ops} and cm.reference_is_exact
    for (x,) in inputs:
        want = cm.reference_raw(x)
        assert _same(cm.run_raw(x), want) and _same(cm.run_raw_c(x), want)
        scale = cm.graph.outputs[0].quant.scale[0]  # and it is the model: within a few steps of eager
        assert np.max(np.abs(cm.run(x)[0].numpy() - model(x).detach().numpy())) <= 8 * scale


@requires_qemu
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_on_the_simulated_m33(compiled, quantize: str) -> None:
    model, cm, inputs = compiled("conv_mish", quantize)
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, (x,) in enumerate(inputs):
        if quantize == "int8":
            assert _same(run.outputs_raw[v], [r.reshape(o.shape) for r, o in
                                              zip(cm.raw_outputs(cm.reference_raw(x)), run.outputs_raw[v])])
        else:
            want = model(x).detach().numpy()
            assert np.max(np.abs(run.outputs[v][0] - want)) <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
