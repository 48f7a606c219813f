"""Resampling and data movement: the kernels mcu_remap, mcu_index_select, mcu_gather,
mcu_resize_bilinear_f32/_s8 and mcu_adaptive_avg_pool_f32/_s8 against PyTorch (fp32) and their Python
integer references (int8, bit for bit, extremes included), over many shapes and parameters; the index
tables against PyTorch's own upsampling."""

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
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr  # noqa: E402
from mcu.reference import pool, resample  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
c_int32, P = ctypes.c_int32, ctypes.c_void_p
Dims = c_int32 * 6


class RemapParams(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("in_shape", Dims), ("out_shape", Dims)]


class IndexSelectParams(ctypes.Structure):
    _fields_ = [("outer", c_int32), ("axis", c_int32), ("inner", c_int32), ("count", c_int32)]


class GatherParams(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("in_shape", Dims), ("out_shape", Dims), ("dim", c_int32)]


class ResampleParams(ctypes.Structure):
    _fields_ = [(n, c_int32) for n in ("outer", "in_h", "in_w", "out_h", "out_w", "inner")]


def kernel(name: str, argtypes: list) -> ctypes._CFuncPtr:
    fn = getattr(cbind.lib(), name)
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return fn


def remap_c(x: np.ndarray, tables: list[list[int]], expect: int = MCU_OK) -> np.ndarray:
    out_shape = [len(t) for t in tables]
    rank = len(out_shape)
    p = RemapParams(rank, Dims(*(list(x.shape) + [1] * (6 - rank))), Dims(*(out_shape + [1] * (6 - rank))))
    flat = np.ascontiguousarray(np.concatenate([np.asarray(t, np.int32) for t in tables]))
    out = np.zeros(out_shape, x.dtype)
    fn = kernel("mcu_remap", [P, c_int32, P, P, P])
    assert fn(ctypes.byref(p), x.itemsize, ptr(flat), ptr(np.ascontiguousarray(x)), ptr(out)) == expect
    return out


def shape_strategy(min_rank: int = 1, max_rank: int = 4, hi: int = 5) -> st.SearchStrategy:
    return st.lists(st.integers(1, hi), min_size=min_rank, max_size=max_rank)


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "int8":
        x = rng.integers(-128, 128, size=shape).astype(np.int8)
        x.reshape(-1)[:2] = [-128, 127][: x.size]  # the extremes
        return x
    return rng.standard_normal(shape).astype(np.float32)


# --- mcu_remap ------------------------------------------------------------------------------------------


@SETTINGS
@given(shape=shape_strategy(), dtype=st.sampled_from(["float32", "int8"]), seed=st.integers(0, 2**16), data=st.data())
def test_remap_equals_its_reference_for_any_tables(shape: list[int], dtype: str, seed: int, data) -> None:
    rng = np.random.default_rng(seed)
    x = values(rng, tuple(shape), dtype)
    tables = [data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=7)) for n in shape]
    got = remap_c(x, tables)
    assert np.array_equal(got, resample.remap(x.reshape(-1), shape, tables))


@SETTINGS
@given(n=st.integers(1, 3), c=st.integers(1, 4), h=st.integers(1, 9), w=st.integers(1, 9),
       mode=st.sampled_from(["scale", "size"]), sh=st.sampled_from([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 1.7]),
       sw=st.sampled_from([0.6, 1.0, 1.25, 2.0, 3.0, 4.0]), seed=st.integers(0, 2**16), data=st.data())
def test_nearest_tables_equal_pytorch_upsampling(n: int, c: int, h: int, w: int, mode: str, sh: float, sw: float,
                                                seed: int, data) -> None:
    x = torch.from_numpy(values(np.random.default_rng(seed), (n, c, h, w), "float32"))
    if mode == "scale":
        if int(h * sh) < 1 or int(w * sw) < 1:
            return
        want = F.interpolate(x, scale_factor=(sh, sw), mode="nearest")
        scales = (sh, sw)
    else:
        size = (data.draw(st.integers(1, 20)), data.draw(st.integers(1, 20)))
        want = F.interpolate(x, size=size, mode="nearest")
        scales = (None, None)
    oh, ow = want.shape[2:]
    tables = [list(range(n)), list(range(c)), resample.nearest_table(h, oh, scales[0]),
              resample.nearest_table(w, ow, scales[1])]
    assert np.array_equal(remap_c(x.numpy(), tables), want.numpy())  # exact: the same indices


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_padding_tables_through_the_frontend_equal_pytorch(mode: str) -> None:
    """Reflect and replicate padding export as aten.index.Tensor with constant indices: one remap a dim."""
    import mcu

    class Pad(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return F.pad(x, (2, 1, 0, 3), mode=mode), F.pad(x[0], (3, 2), mode=mode)

    x = torch.randn(1, 2, 5, 6)
    cm = mcu.compile(Pad().eval(), (x,), name=f"pad_{mode}")
    assert {op.kind for op in cm.graph.ops} <= {"remap", "reshape", "layout", "slice"}
    for got, want in zip(cm.run(x), Pad()(x)):
        assert torch.equal(got, want)


def test_remap_refuses_an_index_outside_the_input_and_writes_nothing() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    remap_c(x, [[0, 1], [2, 3]], expect=MCU_ERR_INVALID_ARG)
    remap_c(x, [[-1], [0]], expect=MCU_ERR_INVALID_ARG)
    out = np.full((1, 2), 7, np.float32)
    p = RemapParams(2, Dims(2, 3, 1, 1, 1, 1), Dims(1, 2, 1, 1, 1, 1))
    tables = np.array([0, 0, 5], np.int32)
    assert kernel("mcu_remap", [P, c_int32, P, P, P])(ctypes.byref(p), 4, ptr(tables), ptr(x), ptr(out)) == \
        MCU_ERR_INVALID_ARG
    assert (out == 7).all()
    assert kernel("mcu_remap", [P, c_int32, P, P, P])(ctypes.byref(p), 4, ptr(np.array([0, 0, 1], np.int32)),
                                                      ptr(x), ptr(x)) == MCU_ERR_INVALID_ARG  # overlap


# --- mcu_index_select, mcu_gather --------------------------------------------------------------------------


@SETTINGS
@given(shape=shape_strategy(), dtype=st.sampled_from(["float32", "int8"]), seed=st.integers(0, 2**16), data=st.data())
def test_index_select_equals_pytorch(shape: list[int], dtype: str, seed: int, data) -> None:
    rng = np.random.default_rng(seed)
    x = values(rng, tuple(shape), dtype)
    dim = data.draw(st.integers(0, len(shape) - 1))
    idx = np.array(data.draw(st.lists(st.integers(0, shape[dim] - 1), min_size=1, max_size=8)), np.int32)
    want = torch.index_select(torch.from_numpy(x), dim, torch.from_numpy(idx).long()).numpy()
    p = IndexSelectParams(math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:]), idx.size)
    out = np.zeros(want.shape, x.dtype)
    fn = kernel("mcu_index_select", [P, c_int32, P, P, P])
    assert fn(ctypes.byref(p), x.itemsize, ptr(idx), ptr(x), ptr(out)) == MCU_OK
    assert np.array_equal(out, want)
    bad = idx.copy()
    bad[-1] = shape[dim] if seed % 2 else -1
    out[...] = 0
    assert fn(ctypes.byref(p), x.itemsize, ptr(bad), ptr(x), ptr(out)) == MCU_ERR_INVALID_ARG
    assert not out.any()  # checked before anything is written


@SETTINGS
@given(shape=shape_strategy(), dtype=st.sampled_from(["float32", "int8"]), seed=st.integers(0, 2**16), data=st.data())
def test_gather_equals_pytorch(shape: list[int], dtype: str, seed: int, data) -> None:
    rng = np.random.default_rng(seed)
    x = values(rng, tuple(shape), dtype)
    rank = len(shape)
    dim = data.draw(st.integers(0, rank - 1))
    ishape = [data.draw(st.integers(1, 6)) if d == dim else data.draw(st.integers(1, n)) for d, n in enumerate(shape)]
    idx = rng.integers(0, shape[dim], size=ishape).astype(np.int32)
    want = torch.gather(torch.from_numpy(x), dim, torch.from_numpy(idx).long()).numpy()
    pad = [1] * (6 - rank)
    p = GatherParams(rank, Dims(*(shape + pad)), Dims(*(ishape + pad)), dim)
    out = np.zeros(want.shape, x.dtype)
    fn = kernel("mcu_gather", [P, c_int32, P, P, P])
    assert fn(ctypes.byref(p), x.itemsize, ptr(idx), ptr(x), ptr(out)) == MCU_OK
    assert np.array_equal(out, want)
    assert np.array_equal(resample.gather(x.reshape(-1), shape, idx, ishape, dim), want)
    idx.reshape(-1)[-1] = shape[dim]
    assert fn(ctypes.byref(p), x.itemsize, ptr(idx), ptr(x), ptr(out)) == MCU_ERR_INVALID_ARG


# --- bilinear resize -----------------------------------------------------------------------------------------


def _nhwc(x: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(x.permute(0, 2, 3, 1).numpy())


def _resize_case(data, seed: int, dtype: str):
    n, c, h, w = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 8)),
                  data.draw(st.integers(1, 8)))
    align = data.draw(st.booleans())
    if data.draw(st.booleans()):
        sh, sw = data.draw(st.sampled_from([0.5, 1.5, 2.0, 2.5, 3.0])), data.draw(st.sampled_from([0.7, 1.0, 2.0, 4.0]))
        if int(h * sh) < 1 or int(w * sw) < 1:
            sh, sw = 2.0, 2.0
        size, scales = None, (sh, sw)
    else:
        size, scales = (data.draw(st.integers(1, 14)), data.draw(st.integers(1, 14))), None
    x = values(np.random.default_rng(seed), (n, c, h, w), dtype)
    return x, size, scales, align


def _torch_resize(x: torch.Tensor, size, scales, align: bool) -> torch.Tensor:
    if size is not None:
        return F.interpolate(x, size=size, mode="bilinear", align_corners=align)
    return F.interpolate(x, scale_factor=scales, mode="bilinear", align_corners=align)


@SETTINGS
@given(seed=st.integers(0, 2**16), data=st.data())
def test_resize_bilinear_f32_matches_pytorch(seed: int, data) -> None:
    x, size, scales, align = _resize_case(data, seed, "float32")
    want = _torch_resize(torch.from_numpy(x), size, scales, align)
    n, c, h, w = x.shape
    oh, ow = want.shape[2:]
    sh, sw = scales if scales is not None and not align else (None, None)
    index, lam = resample.bilinear_tables_f32(h, w, oh, ow, align, sh, sw)
    p = ResampleParams(n, h, w, oh, ow, c)
    xin = _nhwc(torch.from_numpy(x))
    out = np.zeros((n, oh, ow, c), np.float32)
    fn = kernel("mcu_resize_bilinear_f32", [P, P, P, P, P])
    assert fn(ctypes.byref(p), ptr(index), ptr(lam), ptr(xin), ptr(out)) == MCU_OK
    np.testing.assert_allclose(out, _nhwc(want), rtol=1e-5, atol=1e-5)
    ref = resample.resize_bilinear_f32(xin.reshape(-1), n, h, w, c, oh, ow, index, lam)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def resize_s8_c(x: np.ndarray, oh: int, ow: int, table: np.ndarray, expect: int = MCU_OK) -> np.ndarray:
    n, h, w, c = x.shape
    p = ResampleParams(n, h, w, oh, ow, c)
    out = np.zeros((n, oh, ow, c), np.int8)
    assert kernel("mcu_resize_bilinear_s8", [P, P, P, P])(ctypes.byref(p), ptr(table), ptr(x), ptr(out)) == expect
    return out


@SETTINGS
@given(seed=st.integers(0, 2**16), extreme=st.sampled_from(["none", "-128", "127", "alternate"]), data=st.data())
def test_resize_bilinear_s8_equals_its_integer_reference(seed: int, extreme: str, data) -> None:
    x, size, scales, align = _resize_case(data, seed, "int8")
    if extreme == "-128":
        x[...] = -128
    elif extreme == "127":
        x[...] = 127
    elif extreme == "alternate":  # the largest steps between neighbours
        x[...] = np.where(np.indices(x.shape).sum(axis=0) % 2, 127, -128)
    n, c, h, w = x.shape
    oh, ow = _torch_resize(torch.zeros(x.shape), size, scales, align).shape[2:]
    sh, sw = scales if scales is not None and not align else (None, None)
    table = resample.bilinear_tables_s8(h, w, oh, ow, align, sh, sw)
    xin = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    got = resize_s8_c(xin, oh, ow, table)
    assert np.array_equal(got, resample.resize_bilinear_s8(xin.reshape(-1), n, h, w, c, oh, ow, table)
                          .reshape(got.shape))
    if extreme in ("-128", "127"):
        assert (got == int(extreme)).all()  # a constant image stays constant
    # the integer result is the float interpolation of the codes, rounded, within one step
    fl = _torch_resize(torch.from_numpy(x.astype(np.float32)), size, scales, align)
    assert np.abs(got.astype(np.float32) - _nhwc(fl)).max() <= 1.0


@SETTINGS
@given(seed=st.integers(0, 2**16), extreme=st.sampled_from(["none", "-32768", "32767", "alternate"]), data=st.data())
def test_resize_bilinear_s16_equals_its_integer_reference(seed: int, extreme: str, data) -> None:
    """w8a16's mcu_resize_bilinear_s16: the int8 kernel's tables on int16 codes, the 2^20 sum in int64."""
    x, size, scales, align = _resize_case(data, seed, "float32")
    rng = np.random.default_rng(seed)
    x = rng.integers(-32768, 32768, size=x.shape).astype(np.int16)
    if extreme in ("-32768", "32767"):
        x[...] = int(extreme)
    elif extreme == "alternate":  # the largest steps between neighbours
        x[...] = np.where(np.indices(x.shape).sum(axis=0) % 2, 32767, -32768)
    n, c, h, w = x.shape
    oh, ow = _torch_resize(torch.zeros(x.shape), size, scales, align).shape[2:]
    sh, sw = scales if scales is not None and not align else (None, None)
    table = resample.bilinear_tables_s8(h, w, oh, ow, align, sh, sw)
    xin = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    p = ResampleParams(n, h, w, oh, ow, c)
    got = np.zeros((n, oh, ow, c), np.int16)
    assert kernel("mcu_resize_bilinear_s16", [P, P, P, P])(ctypes.byref(p), ptr(table), ptr(xin), ptr(got)) == MCU_OK
    assert np.array_equal(got, resample.resize_bilinear_s16(xin.reshape(-1), n, h, w, c, oh, ow, table)
                          .reshape(got.shape))
    if extreme in ("-32768", "32767"):
        assert (got == int(extreme)).all()  # a constant image stays constant
    # the float interpolation of the codes within the 1/1024 weights' error (and the rounding's half step)
    fl = _torch_resize(torch.from_numpy(x.astype(np.float64)), size, scales, align)
    assert np.abs(got.astype(np.float64) - _nhwc(fl)).max() <= 1.0 + 65535 / 1024


def test_resize_bilinear_s8_rounds_half_away_from_zero_on_raw_codes() -> None:
    """Halfway between -1 and 0 is -1 and between 0 and 1 is 1: TFLite's rounding of the 2^20 sum."""
    x = np.array([-1, 0, 1], np.int8).reshape(1, 1, 3, 1)
    # output columns at 0.5 between input columns: (x0, x1, f = 512)
    table = np.array([0, 0, 0, 0, 1, 512, 1, 2, 512], np.int32)
    got = resize_s8_c(x, 1, 2, table)
    assert got.reshape(-1).tolist() == [-1, 1]
    bad = table.copy()
    bad[5] = 1025
    resize_s8_c(x, 1, 2, bad, expect=MCU_ERR_INVALID_ARG)


# --- adaptive average pooling ------------------------------------------------------------------------------


@SETTINGS
@given(n=st.integers(1, 2), c=st.integers(1, 4), h=st.integers(1, 11), w=st.integers(1, 11), oh=st.integers(1, 7),
       ow=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_adaptive_avg_pool_f32_matches_pytorch(n: int, c: int, h: int, w: int, oh: int, ow: int, seed: int) -> None:
    x = torch.from_numpy(values(np.random.default_rng(seed), (n, c, h, w), "float32"))
    want = _nhwc(F.adaptive_avg_pool2d(x, (oh, ow)))
    out = np.zeros((n, oh, ow, c), np.float32)
    p = ResampleParams(n, h, w, oh, ow, c)
    xin = _nhwc(x)
    assert kernel("mcu_adaptive_avg_pool_f32", [P, P, P])(ctypes.byref(p), ptr(xin), ptr(out)) == MCU_OK
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert np.array_equal(out, pool.adaptive_avg_pool_f32(xin.reshape(-1), n, h, w, c, oh, ow))


@SETTINGS
@given(n=st.integers(1, 2), c=st.integers(1, 4), h=st.integers(1, 11), w=st.integers(1, 11), oh=st.integers(1, 7),
       ow=st.integers(1, 7), extreme=st.sampled_from(["none", "-128", "127"]), seed=st.integers(0, 2**16))
def test_adaptive_avg_pool_s8_equals_its_integer_reference(n: int, c: int, h: int, w: int, oh: int, ow: int,
                                                           extreme: str, seed: int) -> None:
    x = values(np.random.default_rng(seed), (n, h, w, c), "int8")
    if extreme != "none":
        x[...] = int(extreme)
    out = np.zeros((n, oh, ow, c), np.int8)
    p = ResampleParams(n, h, w, oh, ow, c)
    assert kernel("mcu_adaptive_avg_pool_s8", [P, P, P])(ctypes.byref(p), ptr(x), ptr(out)) == MCU_OK
    assert np.array_equal(out, pool.adaptive_avg_pool_s8(x.reshape(-1), n, h, w, c, oh, ow))
    if extreme != "none":
        assert (out == int(extreme)).all()
    # within half a step of the exact mean (rounded to nearest)
    exact = _nhwc(F.adaptive_avg_pool2d(torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float32)), (oh, ow)))
    assert np.abs(out - exact).max() <= 0.5 + 1e-6
