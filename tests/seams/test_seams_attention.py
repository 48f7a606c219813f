"""Attention at int8, written the ways users write it: a tiny ViT (patch convolution, learned class token
joined with torch.cat, learned positions, two encoder blocks, classifier on the class token) with
``nn.MultiheadAttention`` (batch first, and sequence first with the default need_weights=True) and the same
network with ``F.scaled_dot_product_attention`` (qkv from one Linear, chunked, or viewed and unbound).
Every form compiles with no fp32 island at all, its int8 output is within 30 dB of fp32 on held-out
standard normal images (the calibration data's distribution), the generated C and the program file equal
the integer reference bit for bit, and one form runs bit-exact on mps2-an505.
"""

from __future__ import annotations


import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import mcu  # noqa: E402
from mcu.api import CompiledModel  # noqa: E402
from mcu.ir import QConst, QuantParams, Tensor  # noqa: E402
from mcu.passes.quantized.movement import constant_on_grid  # noqa: E402
from mcu.quantize.attention import prepare_attention  # noqa: E402
from repo import requires_qemu  # noqa: E402
from vit_models import vit  # noqa: E402

FORMS = ["mha", "mha-seq", "sdpa", "sdpa-unbind"]
_COMPILED: dict[str, CompiledModel] = {}


def compiled_vit(form: str) -> CompiledModel:
    if form not in _COMPILED:
        model, example, calibration, tests = vit(form)
        _COMPILED[form] = mcu.compile(model, example, quantize="int8", calibration=calibration,
                                      test_inputs=tests, name=f"vit_{form.replace('-', '_')}")
    return _COMPILED[form]


def _held_out(n: int = 16) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    return [torch.randn(1, 1, 16, 16, generator=gen) for _ in range(n)]


def sqnr_db(reference: list[np.ndarray], approx: list[np.ndarray]) -> float:
    ref = np.concatenate([r.reshape(-1) for r in reference]).astype(np.float64)
    got = np.concatenate([a.reshape(-1) for a in approx]).astype(np.float64)
    return float(10.0 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30)))


@pytest.mark.parametrize("form", FORMS)
def test_vit_attention_has_no_fp32_island(form: str) -> None:
    cm = compiled_vit(form)
    assert cm.graph.fallbacks == [], cm.graph.fallbacks
    assert cm.summary()["fp32_fallbacks"] == []
    floats = [f"{op.kind} {op.name}" for op in cm.graph.ops if op.output.dtype == "float32"]
    assert floats == []
    kinds = {op.kind for op in cm.graph.ops}
    assert {"bmm", "softmax", "concat"} <= kinds  # the attention core and the class token, all int8
    # the scaling of q @ k^T is the bmm's requantization, not a table pass over the scores
    assert not [op.name for op in cm.graph.ops if op.kind == "lut" and op.attrs["function"] == "affine"
                and cm.graph.producer(op.inputs[0]).kind in ("bmm", "reshape")]
    assert cm.reference_is_exact


@pytest.mark.parametrize("form", FORMS)
def test_vit_int8_is_within_30_db_of_fp32(form: str) -> None:
    cm = compiled_vit(form)
    held = _held_out()
    with torch.no_grad():
        fp32 = [cm.spec.model(x).numpy() for x in held]
    int8 = [cm.decode_outputs(cm.reference_raw(x))[0] for x in held]
    assert sqnr_db(fp32, int8) >= 30.0


@pytest.mark.parametrize("form", ["mha", "sdpa"])
def test_vit_host_c_and_program_equal_the_reference(form: str) -> None:
    cm = compiled_vit(form)
    for x in _held_out(3):
        expected = cm.reference_raw(x)
        for got in (cm.run_raw_c(x), cm.run_raw(x)):
            for e, g in zip(expected, got):
                assert np.array_equal(np.asarray(e).reshape(-1), np.asarray(g).reshape(-1))


@requires_qemu
def test_vit_sdpa_runs_bit_exact_on_mps2_an505() -> None:
    cm = compiled_vit("sdpa")
    assert cm.tolerances() is None  # the firmware compares with the integer reference bit for bit
    run = cm.simulate()
    assert run.passed, run.console[-2000:]
    assert run.instructions and run.instructions > 0


# --- the rewrites before annotation, on random shapes --------------------------------------------------


class _Split(nn.Module):
    def __init__(self, how: str, parts: int, dim: int, scale: float | None) -> None:
        super().__init__()
        self.how, self.parts, self.dim, self.scale = how, parts, dim, scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "chunk":
            q, k, v = x.chunk(3, dim=self.dim)[:3]
        elif self.how == "split":
            q, k, v = torch.split(x, x.shape[self.dim] // 3, dim=self.dim)[:3]
        else:
            q, k, v = x.unbind(self.dim)[:3]
        if self.how != "unbind" and self.dim != x.dim() - 1:
            q, k, v = (t.transpose(self.dim, -1) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, scale=self.scale)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(how=st.sampled_from(["chunk", "split", "unbind"]), heads=st.integers(1, 3), tokens=st.integers(1, 9),
       head_dim=st.integers(1, 8), scaled=st.booleans(), seed=st.integers(0, 2**16))
def test_rewritten_attention_computes_the_same(how: str, heads: int, tokens: int, head_dim: int, scaled: bool,
                                               seed: int) -> None:
    """The graph the quantizer annotates (attention written out, splits as views) computes what the user's
    does, and no scaled_dot_product_attention, chunk, split or unbind is left in it."""
    torch.manual_seed(seed)
    if how == "unbind":
        x, dim = torch.randn(3, heads, tokens, head_dim), 0
    else:
        x, dim = torch.randn(1, heads, tokens, 3 * head_dim), 3
    model = _Split(how, 3, dim, 0.3 if scaled else None).eval()
    gm = torch.export.export(model, (x,)).module(check_guards=False)
    rewritten = prepare_attention(gm)
    left = {str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"}
    assert not any(name in t for t in left for name in ("scaled_dot_product", "chunk", "split", "unbind"))
    with torch.no_grad():
        torch.testing.assert_close(rewritten(x), model(x), rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(-4.0, 4.0, allow_nan=False, width=32), min_size=1, max_size=16),
       scale=st.floats(0.005, 0.1), zero_point=st.integers(-128, 127))
def test_a_concatenated_constant_lands_on_the_shared_grid(values: list[float], scale: float, zero_point: int) -> None:
    data = np.asarray(values, dtype=np.float32)
    quant = QuantParams(scale=(scale,), zero_point=(zero_point,))
    t = Tensor(name="cls", shape=data.shape, dtype="float32", data=data)
    q = constant_on_grid(t, quant)
    assert q is not None and q.quant == quant and q.dtype == "int8"
    expected = np.clip(np.round(data.astype(np.float64) / scale) + zero_point, -128, 127)
    assert np.array_equal(q.data.astype(np.int64), expected.astype(np.int64))
    # codes the quantizer gave on the same grid are kept as they are
    codes = np.full(data.shape, 5, dtype=np.int8)
    t.qconst = QConst(codes, np.full(data.shape, scale), np.full(data.shape, zero_point))
    assert np.array_equal(constant_on_grid(t, quant).data, codes)


@requires_qemu
def test_vit_mha_program_file_runs_bit_exact_on_mps2_an505() -> None:
    """The program-file path: the interpreter firmware (every kernel, built once and cached) runs the
    batch-first nn.MultiheadAttention ViT's program with its bundled vectors and equals the host."""
    from mcu.device.boards import load_board
    from mcu.ir import NUMPY_DTYPES
    from mcu.program.device import build_interpreter_firmware, run_program

    cm = compiled_vit("mha")
    image = cm.program_image(bundle_tests=True)
    run = run_program(cm.board, build_interpreter_firmware(load_board("mps2-an505")).elf, image.program)
    assert run.passed, run.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        device = [run.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel) for i, t in enumerate(cm.graph.outputs)]
        for got, want in zip(device, cm.reference_raw(x)):
            assert np.array_equal(np.asarray(got).reshape(-1), np.asarray(want).reshape(-1))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 24), n=st.integers(1, 6), s_a=st.floats(0.005, 0.1),
       s_b=st.floats(0.005, 0.1), zp_a=st.integers(-128, 127), zp_b=st.integers(-128, 127),
       alpha=st.floats(0.05, 1.0), zp_out=st.integers(-128, 127), seed=st.integers(0, 2**16))
def test_scaling_folded_into_bmm_rounds_once(m: int, k: int, n: int, s_a: float, s_b: float, zp_a: int, zp_b: int,
                                             alpha: float, zp_out: int, seed: int) -> None:
    """bmm -> table(x * alpha) against the folded bmm on the table's output grid: the folded one is within
    half a step of the exact scaled product wherever it does not saturate, and never further from it than the
    two-step chain (both up to the TFLite requantization's own first rounding, half of 2^shift steps)."""
    from mcu.reference import arith
    from mcu.reference.conv import bmm_s8
    from mcu.reference.elementwise import lut_s8

    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (1, m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (1, k, n)).astype(np.int8)
    exact_sum = np.matmul(a.astype(np.int64) - zp_a, b.astype(np.int64) - zp_b).astype(np.float64)
    real = alpha * s_a * s_b * exact_sum
    span = max(float(np.max(np.abs(exact_sum))), 1.0) * s_a * s_b
    s_mid, s_out = span / 127.0, alpha * span / 127.0
    m1, sh1 = arith.quantize_multiplier(s_a * s_b / s_mid)
    mid = bmm_s8(a, b, -zp_a, -zp_b, m1, sh1, 0)
    table = arith.lut_table(lambda x: alpha * x, s_mid, 0, s_out, zp_out)
    chain = lut_s8(mid, table).astype(np.float64)
    m2, sh2 = arith.quantize_multiplier(s_a * s_b * alpha / s_out)
    folded = bmm_s8(a, b, -zp_a, -zp_b, m2, sh2, zp_out).astype(np.float64)
    inside = (folded > -128) & (folded < 127)
    err_folded = np.abs((folded - zp_out) * s_out - real)[inside]
    err_chain = np.abs((chain - zp_out) * s_out - real)[inside]
    slack = 0.5 * s_out * 2.0 ** min(sh2, 0) + 1e-6 * np.abs(real[inside]) + 1e-9
    assert np.all(err_folded <= 0.5 * s_out + slack)
    assert np.all(err_folded <= err_chain + slack)
