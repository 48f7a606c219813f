"""Selection kernels: mcu_embedding, mcu_compare and mcu_where against PyTorch over
many shapes, broadcasts and dtypes, their refusals, and a model with a runtime position mask on the
simulated M33."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind  # noqa: E402
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr  # noqa: E402
from mcu.frontend.opcodes import COMPARE_OP, COMPARE_TYPE  # noqa: E402
from repo import requires_qemu  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
c_int32 = ctypes.c_int32
Dims = c_int32 * cbind.MCU_MAX_DIMS


class EmbeddingParams(ctypes.Structure):
    _fields_ = [("rows", c_int32), ("cols", c_int32), ("count", c_int32)]


class CompareParams(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("out_shape", Dims), ("a_strides", Dims), ("b_strides", Dims), ("cmp", c_int32),
                ("type", c_int32)]


class WhereParams(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("out_shape", Dims), ("c_strides", Dims), ("a_strides", Dims),
                ("b_strides", Dims)]


def kernel(name: str, n_args: int):
    fn = getattr(cbind.lib(), name)
    fn.argtypes = [ctypes.c_void_p] * n_args
    fn.restype = ctypes.c_int
    return fn


def _strides(shape: list[int], out: list[int]) -> list[int]:
    """Element strides of a row-major operand of ``shape`` (right-aligned) broadcast over ``out``."""
    shape = [1] * (len(out) - len(shape)) + list(shape)
    result = []
    for d in range(len(out)):
        result.append(0 if shape[d] == 1 and out[d] != 1 else int(np.prod(shape[d + 1:])))
    return result


def _dims(values: list[int], fill: int) -> Dims:
    return Dims(*(values + [fill] * (cbind.MCU_MAX_DIMS - len(values))))


def _broadcast_shapes(draw_shape: list[int], mask: list[bool]) -> list[int]:
    return [1 if m else s for s, m in zip(draw_shape, mask)]


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4)
masks = st.lists(st.booleans(), min_size=4, max_size=4)
DTYPES = {"float32": np.float32, "int32": np.int32, "int8": np.int8, "uint8": np.uint8}


def _values(rng: np.random.Generator, shape: list[int], dtype: str) -> np.ndarray:
    # a small range so that equal values (eq, le, ge) occur often
    if dtype == "float32":
        v = rng.integers(-3, 4, size=shape).astype(np.float32) * 0.5
        if v.size > 1:
            v.reshape(-1)[0] = np.nan
        return v
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256) if dtype == "uint8" else (-2**31, 2**31)
    extremes = rng.integers(lo, hi, size=shape, dtype=np.int64)
    small = rng.integers(max(lo, -3), min(hi, 4), size=shape, dtype=np.int64)
    return np.where(rng.random(shape) < 0.2, extremes, small).astype(DTYPES[dtype])


@SETTINGS
@given(shape=shapes, amask=masks, bmask=masks, cmp=st.sampled_from(sorted(COMPARE_OP)),
       dtype=st.sampled_from(sorted(COMPARE_TYPE)), seed=st.integers(0, 2**16))
def test_compare_matches_torch(shape, amask, bmask, cmp, dtype, seed) -> None:
    rng = np.random.default_rng(seed)
    a_shape, b_shape = _broadcast_shapes(shape, amask), _broadcast_shapes(shape, bmask)[1:]  # b: one dim fewer
    a, b = _values(rng, a_shape, dtype), _values(rng, b_shape or [1], dtype).reshape(b_shape)
    want = getattr(torch, cmp)(torch.from_numpy(a), torch.from_numpy(np.ascontiguousarray(b))).numpy()
    out_shape = list(want.shape)
    p = CompareParams(len(out_shape), _dims(out_shape, 1), _dims(_strides(a_shape, out_shape), 0),
                      _dims(_strides(b_shape, out_shape), 0), COMPARE_OP[cmp], COMPARE_TYPE[dtype])
    out = np.full(out_shape, 7, np.uint8)
    b = np.ascontiguousarray(b)
    assert kernel("mcu_compare", 4)(ctypes.byref(p), ptr(a), ptr(b), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, want.astype(np.uint8))


@SETTINGS
@given(shape=shapes, cmask=masks, amask=masks, bmask=masks, size=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16))
def test_where_matches_torch(shape, cmask, amask, bmask, size, seed) -> None:
    rng = np.random.default_rng(seed)
    dtype = {1: np.int8, 2: np.int16, 4: np.float32}[size]
    c_shape, a_shape, b_shape = (_broadcast_shapes(shape, m) for m in (cmask, amask, bmask))
    cond = rng.random(c_shape) < 0.5
    a = rng.standard_normal(a_shape).astype(np.float32).astype(dtype) if size == 4 else \
        rng.integers(-100, 100, a_shape).astype(dtype)
    b = rng.integers(-100, 100, b_shape).astype(dtype)
    want = torch.where(torch.from_numpy(cond), torch.from_numpy(a), torch.from_numpy(b)).numpy()
    out_shape = list(want.shape)
    p = WhereParams(len(out_shape), _dims(out_shape, 1), _dims(_strides(c_shape, out_shape), 0),
                    _dims(_strides(a_shape, out_shape), 0), _dims(_strides(b_shape, out_shape), 0))
    out = np.zeros(out_shape, dtype)
    c8 = cond.astype(np.uint8)
    assert kernel("mcu_where", 6)(ctypes.byref(p), ctypes.c_void_p(size), ptr(c8), ptr(a), ptr(b), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, want)


def test_where_in_place_on_its_own_operand_and_refusals() -> None:
    cond = np.array([1, 0, 1, 0], np.uint8)
    a = np.arange(4, dtype=np.float32)
    b = np.full(1, -np.inf, np.float32)
    p = WhereParams(1, _dims([4], 1), _dims([1], 0), _dims([1], 0), _dims([0], 0))
    fn = kernel("mcu_where", 6)
    assert fn(ctypes.byref(p), ctypes.c_void_p(4), ptr(cond), ptr(a), ptr(b), ptr(a)) == MCU_OK  # a -> a: exact alias
    np.testing.assert_array_equal(a, [0, -np.inf, 2, -np.inf])
    buf = np.zeros(8, np.float32)
    shifted = buf[1:5]
    assert fn(ctypes.byref(p), ctypes.c_void_p(4), ptr(cond), ptr(buf[:4]), ptr(b), ptr(shifted)) == MCU_ERR_INVALID_ARG
    assert fn(ctypes.byref(p), ctypes.c_void_p(3), ptr(cond), ptr(a), ptr(b), ptr(buf)) == MCU_ERR_INVALID_ARG
    bad = WhereParams(0, _dims([], 1), _dims([], 0), _dims([], 0), _dims([], 0))
    assert fn(ctypes.byref(bad), ctypes.c_void_p(4), ptr(cond), ptr(a), ptr(b), ptr(buf)) == MCU_ERR_INVALID_ARG


@SETTINGS
@given(rows=st.integers(1, 40), cols=st.integers(1, 20), count=st.integers(1, 12), size=st.sampled_from([1, 4]),
       seed=st.integers(0, 2**16))
def test_embedding_matches_torch(rows, cols, count, size, seed) -> None:
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows, cols)).astype(np.float32)
    if size == 1:
        table = rng.integers(-128, 128, (rows, cols)).astype(np.int8)
    idx = rng.integers(0, rows, count).astype(np.int32)
    idx[0] = rows - 1  # the last row
    want = torch.nn.functional.embedding(torch.from_numpy(idx.astype(np.int64)),
                                         torch.from_numpy(table.astype(np.float32))).numpy().astype(table.dtype)
    out = np.zeros((count, cols), table.dtype)
    p = EmbeddingParams(rows, cols, count)
    assert kernel("mcu_embedding", 5)(ctypes.byref(p), ctypes.c_void_p(size), ptr(idx), ptr(table), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("bad", [-1, 5, 2**31 - 1])
def test_embedding_refuses_an_index_outside_the_table_before_writing(bad: int) -> None:
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    idx = np.array([1, bad], np.int32)
    out = np.full((2, 2), 42.0, np.float32)
    p = EmbeddingParams(5, 2, 2)
    assert kernel("mcu_embedding", 5)(ctypes.byref(p), ctypes.c_void_p(4), ptr(idx), ptr(table), ptr(out)) == \
        MCU_ERR_INVALID_ARG
    assert (out == 42.0).all()  # nothing written


class Masked(torch.nn.Module):
    """A runtime position mask as a decoder writes it: keys <= pos -> where(.., scores, -inf) -> softmax,
    with an embedding of the position and logical_not."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = torch.nn.Embedding(8, 8)
        self.q = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        h = self.q(x + self.pos(pos))                           # [1, 8]
        keys = torch.arange(8)
        visible = keys.view(1, -1) <= pos.view(-1, 1)
        hidden = torch.logical_not(visible)
        scores = torch.where(hidden, float("-inf"), h)
        return torch.softmax(scores, dim=-1) + (h > 0).float() * 0.25 + (h == h.amax()).float()


@requires_qemu
def test_a_runtime_position_mask_on_the_simulated_m33() -> None:
    import mcu

    torch.manual_seed(0)
    model = Masked().eval()
    inputs = [(torch.randn(1, 8), torch.tensor([p])) for p in (0, 3, 7)]
    cm = mcu.compile(model, inputs[0], board="mps2-an505", test_inputs=inputs, name="masked")
    kinds = {op.kind for op in cm.graph.ops}
    assert {"compare", "where", "embedding"} <= kinds
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, x in enumerate(inputs):
        want = model(*x).detach().numpy()
        assert np.max(np.abs(run.outputs[v][0] - want)) <= 1e-4 * np.max(np.abs(want))


def test_the_position_mask_through_the_program_file_equals_the_generated_c() -> None:
    import mcu
    from programs import assert_program_equals_generated_c

    torch.manual_seed(0)
    model = Masked().eval()
    inputs = [(torch.randn(1, 8), torch.tensor([p])) for p in (0, 5, 7)]
    cm = mcu.compile(model, inputs[0], board="mps2-an505", test_inputs=inputs, name="masked_program")
    assert_program_equals_generated_c(cm)


@SETTINGS
@given(rows=st.integers(1, 40), cols=st.integers(1, 20), count=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_int8_embedding_dequantizes_rows_like_torchao(rows, cols, count, seed) -> None:
    rng = np.random.default_rng(seed)
    table = rng.integers(-128, 128, (rows, cols)).astype(np.int8)
    table[0, 0], table[-1, -1] = -128, 127
    scales = (rng.random(rows).astype(np.float32) * np.float32(0.05) + np.float32(1e-4)).astype(np.float32)
    idx = rng.integers(0, rows, count).astype(np.int32)
    want = (torch.from_numpy(table).to(torch.float32) * torch.from_numpy(scales)[:, None])[torch.from_numpy(
        idx.astype(np.int64))].numpy()
    out = np.zeros((count, cols), np.float32)
    p = EmbeddingParams(rows, cols, count)
    assert kernel("mcu_embedding_s8_f32", 5)(ctypes.byref(p), ptr(idx), ptr(table), ptr(scales), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, want)  # bit for bit: one exactly rounded product per element
    idx[-1] = rows
    assert kernel("mcu_embedding_s8_f32", 5)(ctypes.byref(p), ptr(idx), ptr(table), ptr(scales), ptr(out)) == \
        MCU_ERR_INVALID_ARG


class Attention(torch.nn.Module):
    """scaled_dot_product_attention as exported: its guard against fully masked rows is eq, logical_not,
    any.dim, full_like and where; the causal form builds its mask with logical_and."""

    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        if self.form == "causal":
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.form == "mask":
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m > 0)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


class Logic(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        both = torch.logical_and(a > 0, b > 0)
        either = torch.logical_or(a > 1, b < -1)
        rows = torch.any(both, dim=-1, keepdim=True)
        return both.float() + 2 * either.float() + 4 * rows.float() + torch.full_like(a, 0.5)


@pytest.mark.parametrize("form", ["plain", "causal", "mask"])
def test_scaled_dot_product_attention_as_exported(form: str) -> None:
    import mcu

    torch.manual_seed(1)
    x = (torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(5, 5))
    model = Attention(form).eval()
    got = mcu.compile(model, x, name=f"sdpa_{form}").run(*x)[0]
    torch.testing.assert_close(got, model(*x), rtol=1e-5, atol=1e-6)


def test_logical_and_or_any_and_full_like() -> None:
    import mcu

    torch.manual_seed(2)
    x = (torch.randn(3, 6) * 2, torch.randn(3, 6) * 2)
    got = mcu.compile(Logic(), x, name="logic").run(*x)[0]
    torch.testing.assert_close(got, Logic()(*x), rtol=0, atol=0)


@requires_qemu
def test_masked_attention_on_the_simulated_m33() -> None:
    import mcu

    torch.manual_seed(3)
    inputs = [(torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(5, 5))
              for _ in range(2)]
    model = Attention("mask").eval()
    cm = mcu.compile(model, inputs[0], board="mps2-an505", test_inputs=inputs, name="sdpa_mask")
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, x in enumerate(inputs):
        want = model(*x).detach().numpy()
        assert np.max(np.abs(run.outputs[v][0] - want)) <= 1e-4 * np.max(np.abs(want))
