"""Fewer fp32 islands in int8 models: the int8 kernels that replace them against their Python
references bit for bit (hypothesis, extremes included), int8 models that use them equal the integer
reference on the host (program file and generated C), and the census of the ops that still run as fp32
islands: a small int8 model with every probed ATen op, whose fallbacks must be exactly
:data:`mcu.passes.quantized.fp32_islands.ISLANDS` (so the list ``mcu ops`` prints cannot drift).
"""

from __future__ import annotations

import functools

import ctypes
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb  # noqa: E402
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr  # noqa: E402
from mcu.reference import arith  # noqa: E402
from mcu.reference.elementwise import broadcast_params, maximum_s8, minimum_s8  # noqa: E402
from repo import requires_qemu  # noqa: E402
from s8_cases import binary_cases, int8_data  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
REFERENCE = {"maximum": maximum_s8, "minimum": minimum_s8}


def _kernel(name: str):
    fn = getattr(cb.lib(), f"mcu_{name}_s8")
    fn.argtypes = [ctypes.POINTER(cb.BinaryS8Params), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def _run(name: str, a: np.ndarray, b: np.ndarray, params: dict, out: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    p = cb._fields(cb.BinaryS8Params, params)
    if out is None:
        out = np.zeros(tuple(params["out_shape"][: params["rank"]]), dtype=np.int8)
    return _kernel(name)(ctypes.byref(p), ptr(a), ptr(b), ptr(out)), out


# --- kernels against their references -----------------------------------------------------------------


@SETTINGS
@given(name=st.sampled_from(["maximum", "minimum"]), case=binary_cases("add"))
def test_maximum_minimum_s8_match_their_reference(name: str, case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    a = int8_data(rng, case["a_shape"], case["data"])
    b = int8_data(rng, case["b_shape"], "uniform")
    params = dict(case["qp"], **broadcast_params(a.shape, b.shape))
    status, out = _run(name, a, b, params)
    assert status == MCU_OK
    want = REFERENCE[name](a, b, **params)
    np.testing.assert_array_equal(out.reshape(want.shape), want)


@SETTINGS
@given(name=st.sampled_from(["maximum", "minimum"]), s_a=st.floats(1e-3, 1.0), s_b=st.floats(1e-3, 1.0),
       s_out=st.floats(1e-3, 1.0), zp_a=st.sampled_from([-128, 0, 127]), zp_b=st.sampled_from([-128, 5, 127]),
       zp_out=st.sampled_from([-128, 0, 127]), seed=st.integers(0, 2**16))
def test_maximum_minimum_s8_are_the_real_extremes(name: str, s_a: float, s_b: float, s_out: float, zp_a: int,
                                                  zp_b: int, zp_out: int, seed: int) -> None:
    """With TFLite's parameters the result is the real maximum (minimum) requantized, within one step; every
    code pair of the ends included."""
    rng = np.random.default_rng(seed)
    ends = np.array([-128, -127, 0, 126, 127], np.int8)
    a = np.concatenate([np.repeat(ends, 5), rng.integers(-128, 128, 40).astype(np.int8)])
    b = np.concatenate([np.tile(ends, 5), rng.integers(-128, 128, 40).astype(np.int8)])
    params = dict(arith.add_params(s_a, s_b, s_out, zp_a=zp_a, zp_b=zp_b, zp_out=zp_out), act_min=-128, act_max=127,
                  **broadcast_params(a.shape, b.shape))
    status, out = _run(name, a, b, params)
    assert status == MCU_OK
    np.testing.assert_array_equal(out, REFERENCE[name](a, b, **params))
    pick = np.maximum if name == "maximum" else np.minimum
    real = pick((a.astype(np.float64) - zp_a) * s_a, (b.astype(np.float64) - zp_b) * s_b)
    assert np.max(np.abs(out.astype(np.int64) - np.clip(np.rint(real / s_out) + zp_out, -128, 127))) <= 1


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_s8_check_their_inputs(name: str) -> None:
    a = np.zeros(4, np.int8)
    good = dict(arith.add_params(0.1, 0.2, 0.1), act_min=-128, act_max=127, **broadcast_params((4,), (4,)))
    assert _run(name, a, a, good)[0] == MCU_OK
    for bad in ({"left_shift": 24}, {"act_min": 5, "act_max": 4}, {"a_offset": 300}, {"rank": 0}):
        assert _run(name, a, a, {**good, **bad})[0] == MCU_ERR_INVALID_ARG or bad == {"rank": 0}
    p = cb._fields(cb.BinaryS8Params, good)
    assert _kernel(name)(ctypes.byref(p), None, ptr(a), ptr(a)) != MCU_OK  # NULL operand


# --- int8 models --------------------------------------------------------------------------------------


class Extremes(torch.nn.Module):
    """maximum and minimum of two activations with scales of their own, and of a tensor and a float constant;
    a learned position added and a per-channel constant multiplied (float constants quantized with their own
    int8 scale)."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 3, 5, 5) * 0.3)
        self.gain = torch.nn.Parameter(torch.rand(1, 3, 1, 1) + 0.5)
        self.floor = torch.nn.Parameter(torch.randn(1, 3, 1, 1) * 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.maximum(x, torch.tanh(x) * 2.0)
        y = torch.minimum(y, torch.sigmoid(x))
        y = torch.maximum(y + self.pos, self.floor)
        return y * self.gain


@pytest.fixture(scope="module")
def extremes():
    import mcu

    torch.manual_seed(0)
    model = Extremes().eval()
    calib = [(torch.randn(1, 3, 5, 5) * 2,) for _ in range(16)]
    cm = mcu.compile(model, calib[0], quantize="int8", calibration=calib, test_inputs=calib[:3], name="extremes_s8")
    return model, cm, calib[:3]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


def test_int8_model_with_extremes_and_constants_keeps_no_island_and_equals_the_reference(extremes) -> None:
    model, cm, inputs = extremes
    assert cm.graph.fallbacks == []
    assert all(op.output.dtype != "float32" for op in cm.graph.ops)
    assert cm.reference_is_exact
    kinds = [op.kind for op in cm.graph.ops]
    assert kinds.count("maximum") == 2 and kinds.count("minimum") == 1
    assert any(t.is_constant and t.dtype == "int8" for op in cm.graph.ops if op.kind in ("add", "mul", "maximum")
               for t in op.inputs)
    for x in inputs + [(torch.full((1, 3, 5, 5), 50.0),), (torch.full((1, 3, 5, 5), -50.0),)]:  # saturating too
        want = cm.reference_raw(*x)
        assert _same(cm.run_raw(*x), want) and _same(cm.run_raw_c(*x), want)
    x = inputs[0]
    scale = cm.graph.outputs[0].quant.scale[0]
    assert np.max(np.abs(cm.run(*x)[0].numpy() - model(*x).detach().numpy())) <= 6 * scale


def test_constant_operand_keeps_the_quantizers_codes_or_takes_its_own_scale() -> None:
    from mcu.ir import Op, QConst, Tensor
    from mcu.passes.quantized.elementwise import constant_operand, own_quantization

    data = np.array([[-0.5, 0.0, 1.5]], np.float32)
    t = Tensor(name="c", shape=(1, 3), data=data)
    q = constant_operand(Op("add", [t, t], [t]), t)
    assert q is not None and q.dtype == "int8" and q.quant is not None
    s, zp = own_quantization(data)
    assert (s, zp) == (q.quant.scale[0], q.quant.zero_point[0]) and s == pytest.approx(2.0 / 255)
    assert np.max(np.abs((q.data.astype(np.float64) - zp) * s - data)) <= s / 2 + 1e-9
    assert q.data[0, 1] == zp  # zero is exact
    t.qconst = QConst(np.array([[-64, 0, 127]], np.int8), np.full((1, 3), 0.01), np.zeros((1, 3), np.int64))
    kept = constant_operand(Op("mul", [t, t], [t]), t)
    assert kept is not None and kept.quant.scale == (0.01,) and kept.data.tolist() == [[-64, 0, 127]]
    assert constant_operand(Op("group_norm", [t, t], [t]), t) is None  # its kernel reads no int8 constant
    assert own_quantization(np.zeros(3)) == (1.0, 0)


# --- the census of fp32 islands -------------------------------------------------------------------------


class Census(torch.nn.Module):
    """One probe per line, each an ATen op the frontend lowers, on x [1, 4, 6, 6]: the lowering's fallbacks
    name the line (``op.source``), so each probe is known to be an island or not."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 4, 6, 6) * 0.1)
        self.slopes = torch.nn.Parameter(torch.rand(4) * 0.3)
        self.slope = torch.nn.Parameter(torch.tensor([0.2]))
        self.gn_w = torch.nn.Parameter(torch.rand(4) + 0.5)
        self.gn_b = torch.nn.Parameter(torch.randn(4) * 0.1)
        self.ln = torch.nn.LayerNorm(6)
        self.rms = torch.nn.RMSNorm(6)
        self.bn = torch.nn.BatchNorm2d(4)
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = torch.tanh(x)
        s = torch.sigmoid(x)
        o = []
        o.append(torch.maximum(x, t))  # probe aten.maximum.default
        o.append(torch.minimum(x, s))  # probe aten.minimum.default
        o.append(torch.clamp(x, min=t, max=s + 1.0))  # probe aten.clamp.Tensor
        o.append(F.log_softmax(x, dim=1))  # probe aten._log_softmax.default
        o.append(F.prelu(x, self.slopes))  # probe aten._prelu_kernel.default
        o.append(F.prelu(x, self.slope))  # probe aten._prelu_kernel.default (one slope)
        o.append(x / (s + 1.0))  # probe aten.div.Tensor
        o.append(x + self.pos)  # probe aten.add.Tensor (a float constant)
        o.append(x * self.pos)  # probe aten.mul.Tensor (a float constant)
        o.append(x - t)  # probe aten.sub.Tensor
        o.append(F.group_norm(x, 2, self.gn_w, self.gn_b))  # probe aten.native_group_norm.default
        o.append(F.instance_norm(x))  # probe aten._native_batch_norm_legit.no_stats
        o.append(x.var(dim=1, keepdim=True))  # probe aten.var.correction
        o.append(self.bn(x))  # probe aten._native_batch_norm_legit_no_training.default
        o.append(torch.softmax(x, dim=-1))  # probe aten._softmax.default
        o.append(self.ln(x))  # probe aten.native_layer_norm.default
        o.append(self.rms(x))  # probe aten.rms_norm.default
        o.append(F.gelu(x))  # probe aten.gelu.default
        o.append(F.silu(x))  # probe aten.silu.default
        o.append(F.hardsigmoid(x))  # probe aten.hardsigmoid.default
        o.append(F.hardswish(x))  # probe aten.hardswish.default
        o.append(F.leaky_relu(x, 0.1))  # probe aten.leaky_relu.default
        o.append(F.elu(x))  # probe aten.elu.default
        o.append(F.softplus(x))  # probe aten.softplus.default
        o.append(torch.exp(x))  # probe aten.exp.default
        o.append(torch.log(s))  # probe aten.log.default
        o.append(torch.sqrt(s))  # probe aten.sqrt.default
        o.append(torch.rsqrt(s + 0.5))  # probe aten.rsqrt.default
        o.append(torch.abs(x))  # probe aten.abs.default
        o.append(torch.neg(x))  # probe aten.neg.default
        o.append(torch.reciprocal(s + 1.0))  # probe aten.reciprocal.default
        o.append(torch.erf(x))  # probe aten.erf.default
        o.append(x ** 2)  # probe aten.pow.Tensor_Scalar
        o.append(F.logsigmoid(x))  # probe aten.log_sigmoid_forward.default
        o.append(1.0 - x)  # probe aten.rsub.Scalar
        o.append(x.sum(dim=(2, 3), keepdim=True))  # probe aten.sum.dim_IntList
        o.append(x.amax(dim=1, keepdim=True))  # probe aten.amax.default
        o.append(x.amin(dim=1, keepdim=True))  # probe aten.amin.default
        o.append(x.mean(dim=1, keepdim=True))  # probe aten.mean.dim
        o.append(torch.matmul(x, t))  # probe aten.bmm.default
        o.append(self.lin(x))  # probe aten.linear.default
        o.append(self.conv(x))  # probe aten.convolution.default
        o.append(F.relu(x))  # probe aten.relu.default
        o.append(F.max_pool2d(x, 2))  # probe aten.max_pool2d.default
        o.append(F.avg_pool2d(x, 2))  # probe aten.avg_pool2d.default
        o.append(F.interpolate(x, scale_factor=2, mode="bilinear"))  # probe aten.upsample_bilinear2d.vec
        o.append(F.interpolate(x, scale_factor=2, mode="nearest"))  # probe aten.upsample_nearest2d.vec
        o.append(F.pad(x, (1, 1, 1, 1)))  # probe aten.constant_pad_nd.default
        o.append(torch.cat([x, t], dim=1))  # probe aten.cat.default
        o.append(x.flip(3))  # probe aten.flip.default
        o.append(torch.where(x > 0, x, t))  # probe aten.where.self
        o.append((x > 0).float() + s)  # probe aten._to_copy.default
        return tuple(o)


_PROBE = re.compile(r"# probe (aten\.[\w.]+)(.*)$")


def _probes() -> dict[int, tuple[str, str]]:
    """Source line -> (ATen op, note) of every probe of :class:`Census`."""
    import inspect

    lines, first = inspect.getsourcelines(Census.forward)
    out = {}
    for i, line in enumerate(lines):
        m = _PROBE.search(line)
        if m:
            out[first + i] = (m.group(1), m.group(2).strip(" ()"))
    return out


@pytest.fixture
def census() -> dict[tuple[str, str], list[str]]:
    """(ATen op, note) of each probe -> the fallback reasons on its line ([] when it runs in int8)."""
    return _census()


@functools.lru_cache(maxsize=1)  # per worker: a module fixture is set up again when other modules' tests interleave
def _census() -> dict[tuple[str, str], list[str]]:
    from mcu.capture.loader import ModelSpec
    from mcu.pipeline import to_graph

    torch.manual_seed(0)
    model = Census().eval()
    calib = [(torch.randn(1, 4, 6, 6),) for _ in range(8)]
    graph = to_graph(ModelSpec(model, calib[0], calib, calib[:1], "census"), "int8")
    probes = _probes()
    found: dict[tuple[str, str], list[str]] = {p: [] for p in probes.values()}
    for what, why in graph.fallbacks:
        m = re.search(r"test_islands_s8\.py:(\d+)", what)
        assert m and int(m.group(1)) in probes, f"a fallback outside the probes: {what}: {why}"
        found[probes[int(m.group(1))]].append(why)
    return found


@pytest.mark.xdist_group("island_census")  # one worker lowers the census model once
def test_the_islands_in_int8_models_are_exactly_the_listed_ones(census) -> None:
    from mcu.passes.quantized.fp32_islands import ISLANDS

    islands = {aten for (aten, note), why in census.items() if why}
    assert islands == set(ISLANDS), {k: v for k, v in census.items() if v}
    # a probe whose op is not an island runs every one of its ops in int8
    for (aten, note), why in census.items():
        if aten not in ISLANDS:
            assert why == [], (aten, note, why)


@pytest.mark.xdist_group("island_census")  # one worker lowers the census model once
def test_the_known_islands_made_integer_are_not_islands(census) -> None:
    """maximum, minimum, add/mul with a float constant, tensor division, per-channel PReLU and the difference of
    two tensors run as int8 kernels, not fp32 islands."""
    for key in (("aten.maximum.default", ""), ("aten.minimum.default", ""), ("aten.add.Tensor", "a float constant"),
                ("aten.mul.Tensor", "a float constant"), ("aten.div.Tensor", ""), ("aten._prelu_kernel.default", ""),
                ("aten.sub.Tensor", ""), ("aten._log_softmax.default", ""), ("aten.clamp.Tensor", ""),
                ("aten.where.self", ""), ("aten._to_copy.default", "")):
        assert census[key] == [], key


@pytest.mark.xdist_group("island_census")  # one worker lowers the census model once
def test_every_listed_island_is_probed_and_the_listing_prints_it(census) -> None:
    from mcu.passes.quantized.fp32_islands import ISLANDS
    from mcu.commands.ops_listing import ISLAND, op_rows

    probed = {aten for aten, _ in census}
    assert set(ISLANDS) <= probed
    rows = {r.aten: r for r in op_rows()}
    for aten, why in ISLANDS.items():
        assert rows[aten].int8 == (ISLAND,) and rows[aten].island == why
    # an op the tables give no int8 kernel is an island in the census too (when probed)
    for aten in probed:
        if rows[aten].int8 == (ISLAND,):
            assert aten in ISLANDS, aten


# --- division and PReLU -----------------------------------------------------------------------------------


@SETTINGS
@given(case=binary_cases("mul"), s_a=st.floats(1e-3, 1.0), s_b=st.floats(1e-3, 1.0), s_out=st.floats(1e-3, 4.0),
       zero_divisors=st.booleans())
def test_div_s8_matches_its_reference(case: dict, s_a: float, s_b: float, s_out: float, zero_divisors: bool) -> None:
    from mcu.reference.elementwise import div_params, div_s8

    rng = np.random.default_rng(case["seed"])
    a = int8_data(rng, case["a_shape"], case["data"])
    b = int8_data(rng, case["b_shape"], "uniform")
    qp = case["qp"]
    zp_a, zp_b, zp_out = -qp["a_offset"], -qp["b_offset"], qp["output_offset"]
    if zero_divisors:  # every code of b at its zero-point: +-inf and 0/0
        b = np.full_like(b, zp_b)
    params = dict(div_params(s_a, s_b, s_out, zp_a=zp_a, zp_b=zp_b, zp_out=zp_out), act_min=qp["act_min"],
                  act_max=qp["act_max"], **broadcast_params(a.shape, b.shape))
    status, out = _run("div", a, b, params)
    assert status == MCU_OK
    want = div_s8(a, b, **params)
    np.testing.assert_array_equal(out.reshape(want.shape), want)
    # and it is the division: within one step where the divisor is not zero and nothing clamps
    aa, bb = np.broadcast_arrays(a.astype(np.float64) - zp_a, b.astype(np.float64) - zp_b)
    ok = bb != 0
    real = np.clip(np.rint(np.divide(aa * s_a, bb * s_b, where=ok, out=np.zeros_like(aa)) / s_out) + zp_out,
                   qp["act_min"], qp["act_max"])
    assert np.all(np.abs(want.reshape(real.shape).astype(np.int64) - real)[ok] <= 1)
    assert np.all(want.reshape(real.shape)[~ok & (aa > 0)] == qp["act_max"])
    assert np.all(want.reshape(real.shape)[~ok & (aa < 0)] == qp["act_min"])


class PreluS8Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in ("size", "channels", "inner", "input_offset", "pos_multiplier",
                                              "pos_shift", "neg_multiplier", "neg_shift", "output_offset",
                                              "act_min", "act_max")]


@SETTINGS
@given(channels=st.integers(1, 9), inner=st.integers(1, 7), outer=st.integers(1, 3), s_in=st.floats(1e-3, 1.0),
       s_out=st.floats(1e-3, 1.0), zp_in=st.sampled_from([-128, 0, 127, 17]), zp_out=st.sampled_from([-128, 0, 127]),
       extreme=st.booleans(), seed=st.integers(0, 2**16))
def test_prelu_s8_matches_its_reference(channels: int, inner: int, outer: int, s_in: float, s_out: float,
                                        zp_in: int, zp_out: int, extreme: bool, seed: int) -> None:
    from mcu.reference.elementwise import prelu_params, prelu_s8, quantize_slopes

    rng = np.random.default_rng(seed)
    slopes = rng.normal(0, 0.5, channels) if not extreme else rng.choice([-3.0, 0.0, 3.0], channels)
    alpha, s_alpha = quantize_slopes(slopes)
    size = outer * channels * inner
    x = (rng.choice([-128, 127], size) if extreme else rng.integers(-128, 128, size)).astype(np.int8)
    p = dict(prelu_params(s_in, s_alpha, s_out, zp_in=zp_in, zp_out=zp_out), act_min=-128, act_max=127)
    cp = PreluS8Params(size, channels, inner, *(p[k] for k in ("input_offset", "pos_multiplier", "pos_shift",
                                                              "neg_multiplier", "neg_shift", "output_offset",
                                                              "act_min", "act_max")))
    fn = cb.lib().mcu_prelu_s8
    fn.argtypes = [ctypes.c_void_p] * 4
    fn.restype = ctypes.c_int
    out = np.zeros(size, np.int8)
    assert fn(ctypes.addressof(cp), ptr(x), ptr(alpha), ptr(out)) == MCU_OK
    want = prelu_s8(x, alpha, channels=channels, inner=inner, **p)
    np.testing.assert_array_equal(out, want)
    c = (np.arange(size) // inner) % channels
    xr = (x.astype(np.float64) - zp_in) * s_in
    real = np.where(xr >= 0, xr, xr * alpha[c] * s_alpha)
    assert np.max(np.abs(want.astype(np.int64) - np.clip(np.rint(real / s_out) + zp_out, -128, 127))) <= 1
    big = np.zeros(size + channels, np.int8)  # the output may not overlap the slopes
    assert fn(ctypes.addressof(cp), ptr(x), ptr(big), ptr(big)) == MCU_ERR_INVALID_ARG
    bad = PreluS8Params(size, channels, inner, 300, *(p[k] for k in ("pos_multiplier", "pos_shift", "neg_multiplier",
                                                                    "neg_shift", "output_offset", "act_min", "act_max")))
    assert fn(ctypes.addressof(bad), ptr(x), ptr(alpha), ptr(out)) == MCU_ERR_INVALID_ARG


class DivPrelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.slopes = torch.nn.Parameter(torch.tensor([0.1, -0.3, 0.25, 0.0]))
        self.scale = torch.nn.Parameter(torch.rand(1, 4, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.prelu(x, self.slopes) + x / (torch.sigmoid(x) + 0.5)
        return y / self.scale


def test_int8_model_with_division_and_prelu_keeps_no_island_and_equals_the_reference() -> None:
    import mcu

    torch.manual_seed(1)
    model = DivPrelu().eval()
    calib = [(torch.randn(1, 4, 6, 6) * 2,) for _ in range(12)]
    cm = mcu.compile(model, calib[0], quantize="int8", calibration=calib, test_inputs=calib[:2], name="div_prelu_s8")
    assert cm.graph.fallbacks == [] and cm.reference_is_exact
    kinds = [op.kind for op in cm.graph.ops]
    assert kinds.count("div") == 2 and "prelu" in kinds
    for x in calib[:3] + [(torch.zeros(1, 4, 6, 6),), (torch.full((1, 4, 6, 6), -40.0),)]:
        want = cm.reference_raw(*x)
        assert _same(cm.run_raw(*x), want) and _same(cm.run_raw_c(*x), want)
    scale = cm.graph.outputs[0].quant.scale[0]
    x = calib[0]
    assert np.max(np.abs(cm.run(*x)[0].numpy() - model(*x).detach().numpy())) <= 4 * scale


# --- log_softmax ----------------------------------------------------------------------------------------


class LogSoftmaxS8Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in ("outer", "axis", "inner", "input_multiplier", "log_multiplier",
                                              "output_offset")]


@SETTINGS
@given(outer=st.integers(1, 3), axis=st.sampled_from([1, 2, 5, 10, 33, 300]), inner=st.integers(1, 4),
       s_in=st.sampled_from([1e-3, 0.02, 0.1, 0.5, 2.0]), fixed=st.booleans(), zp_out=st.sampled_from([127, 0, -128]),
       mode=st.sampled_from(["uniform", "extremes", "flat", "one"]), seed=st.integers(0, 2**16))
def test_log_softmax_s8_matches_its_reference(outer: int, axis: int, inner: int, s_in: float, fixed: bool,
                                              zp_out: int, mode: str, seed: int) -> None:
    from mcu.reference.norm import LOG_SOFTMAX_SCALE, log_softmax_s8, log_softmax_tables

    rng = np.random.default_rng(seed)
    n = outer * axis * inner
    x = {"uniform": lambda: rng.integers(-128, 128, n), "extremes": lambda: rng.choice([-128, 127], n),
         "flat": lambda: np.full(n, int(rng.integers(-128, 128))),
         "one": lambda: np.where(np.arange(n) % 7 == 0, 127, -128)}[mode]().astype(np.int8)
    s_out = LOG_SOFTMAX_SCALE if fixed else 0.02
    zp = 127 if fixed else zp_out
    table, a, c = log_softmax_tables(s_in, s_out)
    p = LogSoftmaxS8Params(outer, axis, inner, a, c, zp)
    fn = cb.lib().mcu_log_softmax_s8
    fn.argtypes = [ctypes.c_void_p] * 4
    fn.restype = ctypes.c_int
    out = np.zeros(n, np.int8)
    assert fn(ctypes.addressof(p), ptr(table), ptr(x), ptr(out)) == MCU_OK
    want = log_softmax_s8(x, table, outer=outer, axis=axis, inner=inner, input_multiplier=a, log_multiplier=c,
                          output_offset=zp)
    np.testing.assert_array_equal(out, want)
    # and it is log_softmax of the int8 values, within one output step
    real = torch.log_softmax(torch.from_numpy(x.astype(np.float64).reshape(outer, axis, inner) * s_in), dim=1)
    exact = np.clip(np.rint(real.numpy().reshape(-1) / s_out) + zp, -128, 127)
    assert np.max(np.abs(want.astype(np.int64) - exact)) <= 1
    copy = x.copy()  # exactly in place
    assert fn(ctypes.addressof(p), ptr(table), ptr(copy), ptr(copy)) == MCU_OK
    np.testing.assert_array_equal(copy, want)
    buf = np.zeros(n + 1, np.int8)  # a shifted overlap would read what it wrote
    if n > 1:
        assert fn(ctypes.addressof(p), ptr(table), ptr(buf[1:]), ptr(buf[:-1])) == MCU_ERR_INVALID_ARG


def test_int8_model_with_log_softmax_keeps_no_island_and_equals_the_reference() -> None:
    import mcu

    class LogSoftmax(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return F.log_softmax(x, dim=1), F.log_softmax(torch.tanh(x) * 3.0, dim=-1)

    torch.manual_seed(2)
    model = LogSoftmax().eval()
    calib = [(torch.randn(1, 4, 6, 6) * 2,) for _ in range(8)]
    cm = mcu.compile(model, calib[0], quantize="int8", calibration=calib, test_inputs=calib[:2], name="log_softmax_s8")
    assert cm.graph.fallbacks == [] and cm.reference_is_exact
    assert [op.kind for op in cm.graph.ops].count("log_softmax") == 2
    assert cm.graph.outputs[0].quant.scale == (16.0 / 256.0,) and cm.graph.outputs[0].quant.zero_point == (127,)
    for x in calib[:3] + [(torch.zeros(1, 4, 6, 6),), (torch.randn(1, 4, 6, 6) * 40,)]:
        want = cm.reference_raw(*x)
        assert _same(cm.run_raw(*x), want) and _same(cm.run_raw_c(*x), want)
    x = calib[0]
    with torch.no_grad():
        got, want = cm.run(*x)[0].numpy(), model(*x)[0].clamp(min=-16).numpy()
    assert np.max(np.abs(got - want)) <= 2 * 16.0 / 256.0


# --- on the simulated boards ----------------------------------------------------------------------------


class AllIslandKernels(torch.nn.Module):
    """Every int8 kernel of this file in one model: maximum and minimum (and clamp with tensor bounds), a float
    constant added and multiplied, tensor division, per-channel PReLU and log_softmax; where and mask.float()
    on int8 codes."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 4, 6, 6) * 0.3)
        self.gain = torch.nn.Parameter(torch.rand(1, 4, 1, 1) + 0.5)
        self.slopes = torch.nn.Parameter(torch.tensor([0.1, -0.3, 0.25, 0.0]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.tanh(x)
        y = torch.minimum(torch.maximum(x, t), torch.sigmoid(x) * 2.0) + self.pos
        y = torch.clamp(y * self.gain, min=t, max=t + 1.5)
        z = F.prelu(x, self.slopes) / (torch.sigmoid(x) + 0.5)
        w = torch.where(x > 0, z, t) + (x > 0.5).float()
        return F.log_softmax(y - z, dim=1), w


@pytest.fixture(scope="module")
def island_kernels():
    """The model quantized and lowered once, compiled per board (mcu.api.LoweredModel)."""
    from mcu.api import lower

    torch.manual_seed(3)
    model = AllIslandKernels().eval()
    calib = [(torch.randn(1, 4, 6, 6) * 2,) for _ in range(12)]
    inputs = calib[:2] + [(torch.full((1, 4, 6, 6), -30.0),)]
    return lower(model, calib[0], quantize="int8", calibration=calib, test_inputs=inputs, name="island_kernels")


@requires_qemu
@pytest.mark.xdist_group("island_kernels")  # one worker lowers the model once
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an385", "mps3-an547"])  # DSP, plain C, Helium
def test_the_island_kernels_on_the_simulated_boards_equal_the_reference(island_kernels, board: str) -> None:
    cm = island_kernels.compile(board)
    inputs = cm.spec.test_inputs
    assert cm.graph.fallbacks == [] and cm.reference_is_exact
    assert {"maximum", "minimum", "div", "prelu", "log_softmax", "where"} <= {op.kind for op in cm.graph.ops}
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, x in enumerate(inputs):
        want = [r.reshape(o.shape) for r, o in zip(cm.raw_outputs(cm.reference_raw(*x)), run.outputs_raw[v])]
        assert _same(run.outputs_raw[v], want)


def test_int8_where_moves_codes_and_puts_constant_branches_on_the_output_grid() -> None:
    import mcu

    class Select(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            t = torch.tanh(x)
            return torch.where(x > 0, x, t), torch.where(t < 0.25, x, 0.0), (x > 0.5).float() + torch.sigmoid(x)

    torch.manual_seed(4)
    model = Select().eval()
    calib = [(torch.randn(1, 4, 6, 6) * 2,) for _ in range(8)]
    cm = mcu.compile(model, calib[0], quantize="int8", calibration=calib, test_inputs=calib[:2], name="where_s8")
    assert cm.graph.fallbacks == [] and cm.reference_is_exact
    wheres = [op for op in cm.graph.ops if op.kind == "where"]
    assert len(wheres) == 3 and all(op.output.dtype == "int8" for op in wheres)
    for op in wheres:  # the branches are on the output's grid: the select moves codes
        assert all(t.quant == op.output.quant for t in op.inputs[1:])
    for x in calib[:3]:
        want = cm.reference_raw(*x)
        assert _same(cm.run_raw(*x), want) and _same(cm.run_raw_c(*x), want)
    with torch.no_grad():
        for got, want, out in zip(cm.run(*calib[0]), model(*calib[0]), cm.graph.outputs):
            # (a mask computed from int8 values may flip where the compared value is within a step of the bound)
            close = np.abs(got.numpy() - want.numpy()) <= 2 * out.quant.scale[0]
            assert close.mean() >= 0.95
