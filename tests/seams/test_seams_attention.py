"""Attention at int8, written the ways users write it: a tiny ViT (patch convolution, learned class token
joined with torch.cat, learned positions, two encoder blocks, classifier on the class token) with
``nn.MultiheadAttention`` (batch first, and sequence first with the default need_weights=True) and the same
network with ``F.scaled_dot_product_attention`` (qkv from one Linear, chunked, or viewed and unbound).
Every form compiles with no fp32 island at all, its int8 output is within 30 dB of fp32 on held-out
standard normal images (the calibration data's distribution), the generated C and the program file equal
the integer reference bit for bit, and one form runs bit-exact on mps2-an505.

The same with a constant mask, each way users write one (``attn_mask=`` bool and float, ``key_padding_mask=``
to nn.MultiheadAttention, also when it returns the weights; a bool ``attn_mask=`` and ``is_causal=True`` to
F.scaled_dot_product_attention): the mask is folded into the int8 softmax (mcu_softmax_masked_s8, hidden
positions minus infinity), no op of it is left in fp32, and the generated C and the program file run
bit-exact on every QEMU core.
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
from mcu.api import CompiledModel, LoweredModel, lower  # noqa: E402
from mcu.ir import QConst, QuantParams, Tensor  # noqa: E402
from mcu.passes.quantized.movement import constant_on_grid  # noqa: E402
from mcu.quantize.attention import prepare_attention  # noqa: E402
from repo import requires_qemu  # noqa: E402
from vit_models import masked_vit, vit  # noqa: E402

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


# --- masked attention ----------------------------------------------------------------------------------

MASKED = [("mha", "bool"), ("mha", "float"), ("mha", "padding"), ("mha-seq", "bool"), ("sdpa", "bool"),
          ("sdpa", "causal")]


_LOWERED: dict[tuple[str, str], LoweredModel] = {}


def compiled_masked(form: str, mask: str, board: str = "mps2-an505") -> CompiledModel:
    """Quantized and lowered once per form and mask, compiled once per board."""
    key = f"{form}/{mask}@{board}"
    if key not in _COMPILED:
        if (form, mask) not in _LOWERED:
            model, example, calibration, tests = masked_vit(form, mask)
            _LOWERED[form, mask] = lower(model, example, quantize="int8", calibration=calibration,
                                         test_inputs=tests, name=f"vit_{form.replace('-', '_')}_{mask}")
        _COMPILED[key] = _LOWERED[form, mask].compile(board)
    return _COMPILED[key]


@pytest.mark.parametrize("form,mask", MASKED)
def test_masked_vit_has_no_fp32_island(form: str, mask: str) -> None:
    cm = compiled_masked(form, mask)
    assert cm.graph.fallbacks == [], cm.graph.fallbacks
    assert [f"{op.kind} {op.name}" for op in cm.graph.ops if op.output.dtype == "float32"] == []
    assert not [op.name for op in cm.graph.ops if op.kind in ("where", "compare")]  # the mask ops are gone
    masked = [op for op in cm.graph.ops if op.kind == "softmax" and len(op.inputs) == 2]
    assert len(masked) == 2  # one per encoder block, each with its constant mask
    for op in masked:
        assert op.inputs[1].is_constant and op.inputs[1].dtype == "uint8" and op.inputs[1].data.any()
    assert cm.reference_is_exact


@pytest.mark.parametrize("form,mask", MASKED)
def test_masked_vit_int8_is_within_30_db_of_fp32(form: str, mask: str) -> None:
    cm = compiled_masked(form, mask)
    held = _held_out()
    with torch.no_grad():
        fp32 = [cm.spec.model(x).numpy() for x in held]
    int8 = [cm.decode_outputs(cm.reference_raw(x))[0] for x in held]
    assert sqnr_db(fp32, int8) >= 30.0


@pytest.mark.parametrize("form,mask", MASKED)
def test_masked_vit_host_c_and_program_equal_the_reference(form: str, mask: str) -> None:
    cm = compiled_masked(form, mask)
    for x in _held_out(2):
        expected = cm.reference_raw(x)
        for got in (cm.run_raw_c(x), cm.run_raw(x)):
            for e, g in zip(expected, got):
                assert np.array_equal(np.asarray(e).reshape(-1), np.asarray(g).reshape(-1))


@requires_qemu
@pytest.mark.parametrize("board,form,mask", [("mps2-an385-m0plus", "mha", "bool"), ("mps2-an385", "sdpa", "causal"),
                                             ("mps2-an386", "mha", "padding"), ("mps2-an505", "mha-seq", "bool"),
                                             ("mps3-an547", "sdpa", "bool")])
def test_masked_vit_runs_bit_exact_on_every_core(board: str, form: str, mask: str) -> None:
    """The generated C on the board's simulator, and the program file on the interpreter firmware, both
    against the integer reference bit for bit."""
    from mcu.device.boards import load_board
    from mcu.ir import NUMPY_DTYPES
    from mcu.program.device import build_interpreter_firmware, run_program

    cm = compiled_masked(form, mask, board)
    assert cm.tolerances() is None
    run = cm.simulate()
    assert run.passed, run.console[-2000:]
    image = cm.program_image(bundle_tests=True)
    prog = run_program(cm.board, build_interpreter_firmware(load_board(board)).elf, image.program)
    assert prog.passed, prog.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        device = [prog.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel) for i, t in enumerate(cm.graph.outputs)]
        for got, want in zip(device, cm.reference_raw(*x)):
            assert np.array_equal(np.asarray(got).reshape(-1), np.asarray(want).reshape(-1))


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 20), period=st.sampled_from([1, 2, 3]), s_in=st.floats(0.005, 0.5),
       seed=st.integers(0, 2**16), extreme=st.booleans())
def test_masked_softmax_kernel_equals_the_reference(rows: int, cols: int, period: int, s_in: float, seed: int,
                                                     extreme: bool) -> None:
    """mcu_softmax_masked_s8 (host build) equals the reference bit for bit, in place too; the reference equals
    the plain int8 softmax of each row's shown positions alone, with -128 at the hidden ones."""
    import cbind_s8 as cb
    from mcu.reference import arith
    from mcu.reference.norm import softmax_s8

    rng = np.random.default_rng(seed)
    outer = rows * period
    x = rng.integers(-128, 128, (outer, cols)).astype(np.int8)
    if extreme:
        x[:, ::2] = 127
    hidden = rng.random((period, cols)) < 0.4
    hidden[:, rng.integers(0, cols)] = False  # every row shows a position
    mult, shift, diff_min = arith.softmax_params(1.0, s_in)
    params = dict(outer=outer, axis=cols, inner=1, input_multiplier=mult, input_left_shift=shift, diff_min=diff_min,
                  mask_rows=period)
    full = np.tile(hidden, (rows, 1))
    want = softmax_s8(x, input_multiplier=mult, input_left_shift=shift, diff_min=diff_min, hidden=full)
    status, got = cb.softmax_masked(x, hidden.astype(np.uint8), params)
    assert status == 0 and np.array_equal(got, want)
    inplace = x.copy()
    status, _ = cb.softmax_masked(inplace, hidden.astype(np.uint8), params, out=inplace)
    assert status == 0 and np.array_equal(inplace, want)
    for r in range(outer):
        shown = ~full[r]
        alone = softmax_s8(x[r, shown][None, :], input_multiplier=mult, input_left_shift=shift, diff_min=diff_min)
        assert np.array_equal(want[r, shown], alone[0]) and (want[r, ~shown] == -128).all()


def test_masked_softmax_kernel_refuses_a_row_with_nothing_shown() -> None:
    import cbind_s8 as cb

    x = np.zeros((2, 3), dtype=np.int8)
    params = dict(outer=2, axis=3, inner=1, input_multiplier=1 << 30, input_left_shift=20, diff_min=-100, mask_rows=1)
    status, _ = cb.softmax_masked(x, np.ones((1, 3), dtype=np.uint8), params)
    assert status != 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["bool", "float", "causal", "add", "fill", "baddbmm", "where_kept", "where_hidden"]),
       heads=st.integers(1, 3),
       tokens=st.integers(2, 9), head_dim=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_rewritten_masked_attention_computes_the_same(kind: str, heads: int, tokens: int, head_dim: int,
                                                      seed: int) -> None:
    """A constant mask given to SDPA, or added / filled / selected (torch.where) into scores by hand before a
    softmax, is rewritten as masked_fill(scores, hidden, -inf) on one constant: the same function, and nothing of
    the mask left to run."""
    torch.manual_seed(seed)
    hidden = torch.rand(tokens, tokens) < 0.4
    hidden[torch.arange(tokens), torch.arange(tokens)] = False  # every row shows one position
    hidden[-1, 0] = True  # and one is hidden (a mask that hides nothing is left as it is)

    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("hidden", hidden)

        def forward(self, q: torch.Tensor) -> torch.Tensor:
            if kind == "bool":
                return F.scaled_dot_product_attention(q, q, q, attn_mask=~self.hidden)
            if kind == "float":
                return F.scaled_dot_product_attention(
                    q, q, q, attn_mask=torch.zeros(tokens, tokens).masked_fill(self.hidden, float("-inf")))
            if kind == "causal":
                return F.scaled_dot_product_attention(q, q, q, is_causal=True)
            if kind == "baddbmm":  # nn.MultiheadAttention's form when it returns the weights
                q3 = q.reshape(heads, tokens, head_dim)
                bias = torch.zeros(tokens, tokens).masked_fill(self.hidden, float("-inf")).expand(heads, -1, -1)
                return torch.baddbmm(bias, q3, q3.transpose(1, 2)).softmax(-1) @ q3
            scores = q @ q.transpose(-2, -1)
            if kind == "add":
                scores = scores + torch.zeros(tokens, tokens).masked_fill(self.hidden, -1e9)
            elif kind == "where_kept":
                scores = torch.where(~self.hidden, scores, float("-inf"))
            elif kind == "where_hidden":
                scores = torch.where(self.hidden, -1e9, scores)
            else:
                scores = scores.masked_fill(self.hidden, float("-inf"))
            return scores.softmax(-1) @ q

    q = torch.randn(1, heads, tokens, head_dim)
    model = Masked().eval()
    gm = torch.export.export(model, (q,)).module(check_guards=False)
    rewritten = prepare_attention(gm)
    fills = [n for n in rewritten.graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.masked_fill.Scalar]
    assert len(fills) == 1 and fills[0].args[1].op == "get_attr" and fills[0].args[2] == float("-inf")
    left = {str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"}
    assert not any(name in t for t in left for name in ("scaled_dot_product", "zeros_like", "bitwise_not", "add",
                                                         "where"))
    with torch.no_grad():
        torch.testing.assert_close(rewritten(q), model(q), rtol=1e-5, atol=1e-5)


def test_w8a16_refuses_a_masked_fill_that_is_no_attention_mask_by_name() -> None:
    """Only a constant mask before a softmax is one masked softmax at w8a16: a masked_fill elsewhere (here
    zeroing features) has no 16x8 kernel and the mode refuses it by name before quantizing."""
    from mcu.errors import McuError

    class Zeroed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("drop", torch.tensor([True, False, False, True]))
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).masked_fill(self.drop, 0.0)

    x = torch.randn(2, 4)
    with pytest.raises(McuError, match="w8a16 has no 16x8 kernel for: masked_fill"):
        mcu.compile(Zeroed().eval(), (x,), quantize="w8a16", calibration=[(x,)])
