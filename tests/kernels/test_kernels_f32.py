"""The portable fp32 and generic C kernels against PyTorch / numpy.

Activations are NCHW on the PyTorch side and NHWC on the C side; the tests
convert. References are computed in float64 and the C result must be within
1e-5 relative of the value plus 1e-5 of the magnitude of the terms that went
into it (float32 accumulation error grows with that magnitude, not with the
result, which may cancel to near zero).
"""

from __future__ import annotations

import ctypes
import math
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cbind  # noqa: E402
from device_objects import device_object, front_end_errors, symbols
from mcu.backends.portable.conv import LUT_CALLS, S4_CALLS
from mcu.paths import all_kernel_sources
from cbind import (  # noqa: E402
    INF,
    MCU_ERR_INVALID_ARG,
    MCU_ERR_NULL_POINTER,
    MCU_ERR_SHAPE,
    MCU_OK,
    BinaryParams,
    Conv2dParams,
    LinearParams,
    PadParams,
    PermuteParams,
    Pool2dParams,
    Shape4,
    dims,
    ptr,
)


RTOL = 1e-5
ATOL = 1e-5

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module", autouse=True)
def _single_thread_torch():
    # The reference ops here are tiny; torch's intra-op thread pool costs ~10x
    # their run time (worse under pytest -n), so run them on one thread and
    # restore the setting for whatever test module runs next.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lib():
    cbind.check_layout()
    return cbind.lib()


def L():
    return cbind.lib()


def rng_for(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def to_nhwc(x: torch.Tensor) -> np.ndarray:
    return f32(x.permute(0, 2, 3, 1).numpy())


def assert_close(actual, expected, magnitude=0.0):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape
    tol = RTOL * np.abs(expected) + ATOL * np.asarray(magnitude, dtype=np.float64)
    tol = np.maximum(tol, 1e-30)
    both_nan = np.isnan(actual) & np.isnan(expected)
    same_inf = np.isinf(expected) & (actual == expected)
    ok = both_nan | same_inf | (np.abs(actual - expected) <= tol)
    if not ok.all():
        idx = np.argwhere(~ok)[0]
        raise AssertionError(
            f"{(~ok).sum()} of {ok.size} differ; first at {tuple(idx)}: "
            f"got {actual[tuple(idx)]!r}, want {expected[tuple(idx)]!r}, tol {tol[tuple(idx)]!r}"
        )


def clamp_np(x, lo, hi):
    # torch.clamp order: lower bound first, then upper.
    return np.minimum(np.maximum(x, lo), hi)


act_bounds = st.sampled_from(
    [(-INF, INF), (0.0, INF), (0.0, 6.0), (-1.0, 1.0), (-0.5, 0.25)]
)


# --------------------------------------------------------------------------
# conv2d


@st.composite
def conv_cases(draw, depthwise=False):
    if depthwise:
        groups = draw(st.integers(1, 8))
        icg = 1
        ocg = draw(st.integers(1, 3))
    else:
        groups = draw(st.integers(1, 3))
        icg = draw(st.integers(1, 4))
        ocg = draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pt, pl = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    # Extra bottom/right padding exercises the "implied by the output size"
    # contract (TF-style asymmetric padding).
    pb = pt + draw(st.integers(0, 2)) if draw(st.booleans()) else pt
    pr = pl + draw(st.integers(0, 2)) if draw(st.booleans()) else pl
    min_h = max(1, dh * (kh - 1) + 1 - pt - pb)
    min_w = max(1, dw * (kw - 1) + 1 - pl - pr)
    h = draw(st.integers(min_h, min_h + 8))
    w = draw(st.integers(min_w, min_w + 8))
    n = draw(st.integers(1, 2))
    return dict(
        n=n, h=h, w=w, groups=groups, icg=icg, ocg=ocg, kh=kh, kw=kw, sh=sh, sw=sw,
        dh=dh, dw=dw, pt=pt, pl=pl, pb=pb, pr=pr,
        bias=draw(st.booleans()), act=draw(act_bounds), seed=draw(st.integers(0, 2**32 - 1)),
    )


def run_conv(case):
    rng = rng_for(case["seed"])
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    cin, cout = g * icg, g * ocg
    x = torch.from_numpy(rng.standard_normal((case["n"], cin, case["h"], case["w"])).astype(np.float32))
    wt = torch.from_numpy(rng.standard_normal((cout, icg, case["kh"], case["kw"])).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal(cout).astype(np.float32)) if case["bias"] else None

    def ref(xx, ww, bb):
        xp = F.pad(xx, (case["pl"], case["pr"], case["pt"], case["pb"]))
        return F.conv2d(xp, ww, bb, stride=(case["sh"], case["sw"]),
                        dilation=(case["dh"], case["dw"]), groups=g)

    expected = ref(x.double(), wt.double(), None if b is None else b.double())
    magnitude = ref(x.double().abs(), wt.double().abs(), None if b is None else b.double().abs())
    lo, hi = case["act"]
    expected = expected.clamp(lo, hi)

    x_c = to_nhwc(x)
    w_c = f32(wt.permute(0, 2, 3, 1).numpy())
    b_c = None if b is None else f32(b.numpy())
    n, _, oh, ow = expected.shape
    out = np.full((n, oh, ow, cout), np.nan, dtype=np.float32)
    p = Conv2dParams(
        input=Shape4(case["n"], case["h"], case["w"], cin), output=Shape4(n, oh, ow, cout),
        kernel_h=case["kh"], kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"],
        pad_top=case["pt"], pad_left=case["pl"], dilation_h=case["dh"], dilation_w=case["dw"],
        groups=g, act_min=lo, act_max=hi,
    )
    assert L().mcu_conv2d_f32(ctypes.byref(p), ptr(x_c), ptr(w_c), ptr(b_c), ptr(out)) == MCU_OK
    assert_close(out, to_nhwc_d(expected), to_nhwc_d(magnitude))


def to_nhwc_d(t: torch.Tensor) -> np.ndarray:
    return t.permute(0, 2, 3, 1).numpy()


@SETTINGS
@given(conv_cases())
def test_conv2d(lib, case):
    run_conv(case)


@SETTINGS
@given(conv_cases(depthwise=True))
def test_conv2d_depthwise(lib, case):
    run_conv(case)


def test_conv2d_pointwise_large(lib):
    run_conv(dict(n=1, h=7, w=5, groups=1, icg=64, ocg=48, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1,
                  pt=0, pl=0, pb=0, pr=0, bias=True, act=(0.0, 6.0), seed=1))
    run_conv(dict(n=1, h=9, w=9, groups=1, icg=16, ocg=8, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1,
                  pt=1, pl=1, pb=1, pr=1, bias=True, act=(-INF, INF), seed=2))


# --------------------------------------------------------------------------
# linear


@SETTINGS
@given(
    batch=st.integers(1, 4), fin=st.integers(1, 64), fout=st.integers(1, 16),
    bias=st.booleans(), act=act_bounds, seed=st.integers(0, 2**32 - 1),
)
def test_linear(lib, batch, fin, fout, bias, act, seed):
    rng = rng_for(seed)
    x = f32(rng.standard_normal((batch, fin)))
    w = f32(rng.standard_normal((fout, fin)))
    b = f32(rng.standard_normal(fout)) if bias else None
    tb = None if b is None else torch.from_numpy(b).double()
    expected = F.linear(torch.from_numpy(x).double(), torch.from_numpy(w).double(), tb)
    magnitude = F.linear(torch.from_numpy(x).double().abs(), torch.from_numpy(w).double().abs(),
                         None if tb is None else tb.abs())
    expected = expected.clamp(*act).numpy()
    out = np.full((batch, fout), np.nan, dtype=np.float32)
    p = LinearParams(batch, fin, fout, act[0], act[1])
    assert lib.mcu_linear_f32(ctypes.byref(p), ptr(x), ptr(w), ptr(b), ptr(out)) == MCU_OK
    assert_close(out, expected, magnitude.numpy())


# --------------------------------------------------------------------------
# pooling


@st.composite
def pool_cases(draw, avg):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = (1, 1) if avg else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    min_h = max(1, dh * (kh - 1) + 1 - 2 * ph)
    min_w = max(1, dw * (kw - 1) + 1 - 2 * pw)
    return dict(
        n=draw(st.integers(1, 2)), c=draw(st.integers(1, 5)),
        h=draw(st.integers(min_h, min_h + 8)), w=draw(st.integers(min_w, min_w + 8)),
        kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, ph=ph, pw=pw,
        ceil_mode=draw(st.booleans()),
        count_include_pad=draw(st.booleans()),
        divisor_override=draw(st.one_of(st.none(), st.integers(1, 5))) if avg else None,
        act=draw(act_bounds), seed=draw(st.integers(0, 2**32 - 1)),
    )


def pool_params(case, out_shape):
    n, c, oh, ow = out_shape
    lo, hi = case["act"]
    return Pool2dParams(
        input=Shape4(case["n"], case["h"], case["w"], case["c"]), output=Shape4(n, oh, ow, c),
        kernel_h=case["kh"], kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"],
        pad_top=case["ph"], pad_left=case["pw"], pad_bottom=case["ph"], pad_right=case["pw"],
        dilation_h=case["dh"], dilation_w=case["dw"],
        count_include_pad=int(case["count_include_pad"]),
        divisor_override=case["divisor_override"] or 0,
        act_min=lo, act_max=hi,
    )


@SETTINGS
@given(pool_cases(avg=False))
def test_max_pool2d(lib, case):
    x = torch.from_numpy(rng_for(case["seed"]).standard_normal(
        (case["n"], case["c"], case["h"], case["w"])).astype(np.float32))
    expected = F.max_pool2d(x, (case["kh"], case["kw"]), (case["sh"], case["sw"]),
                            (case["ph"], case["pw"]), (case["dh"], case["dw"]),
                            ceil_mode=case["ceil_mode"])
    expected = expected.clamp(*case["act"])
    out = np.full(to_nhwc(expected).shape, np.nan, dtype=np.float32)
    p = pool_params(case, expected.shape)
    assert lib.mcu_max_pool2d_f32(ctypes.byref(p), ptr(to_nhwc(x)), ptr(out)) == MCU_OK
    # Max pooling picks an input value: exact.
    np.testing.assert_array_equal(out, to_nhwc(expected))


@SETTINGS
@given(pool_cases(avg=True))
def test_avg_pool2d(lib, case):
    x = torch.from_numpy(rng_for(case["seed"]).standard_normal(
        (case["n"], case["c"], case["h"], case["w"])).astype(np.float32))
    kwargs = dict(kernel_size=(case["kh"], case["kw"]), stride=(case["sh"], case["sw"]),
                  padding=(case["ph"], case["pw"]), ceil_mode=case["ceil_mode"],
                  count_include_pad=case["count_include_pad"],
                  divisor_override=case["divisor_override"])
    expected = F.avg_pool2d(x.double(), **kwargs)
    # The magnitude of the summed terms, on the same divisor.
    magnitude = F.avg_pool2d(x.double().abs(), **kwargs)
    expected = expected.clamp(*case["act"])
    out = np.full(to_nhwc_d(expected).shape, np.nan, dtype=np.float32)
    p = pool_params(case, expected.shape)
    assert lib.mcu_avg_pool2d_f32(ctypes.byref(p), ptr(to_nhwc(x)), ptr(out)) == MCU_OK
    assert_close(out, to_nhwc_d(expected), to_nhwc_d(magnitude))


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("h,k,s,p", [(5, 2, 2, 0), (6, 3, 2, 1), (4, 3, 2, 1), (7, 4, 3, 2), (1, 2, 2, 1)])
def test_avg_pool2d_ceil_mode_edges(lib, count_include_pad, h, k, s, p):
    """Ceil-mode windows that overhang the bottom/right padding."""
    x = torch.arange(1, 2 * h * h + 1, dtype=torch.float32).reshape(1, 2, h, h) / 7.0
    expected = F.avg_pool2d(x.double(), k, s, p, ceil_mode=True, count_include_pad=count_include_pad)
    case = dict(n=1, c=2, h=h, w=h, kh=k, kw=k, sh=s, sw=s, dh=1, dw=1, ph=p, pw=p,
                count_include_pad=count_include_pad, divisor_override=None, act=(-INF, INF))
    out = np.full(to_nhwc_d(expected).shape, np.nan, dtype=np.float32)
    pp = pool_params(case, expected.shape)
    assert lib.mcu_avg_pool2d_f32(ctypes.byref(pp), ptr(to_nhwc(x)), ptr(out)) == MCU_OK
    assert_close(out, to_nhwc_d(expected), np.abs(to_nhwc_d(expected)))


def test_max_pool2d_padding_never_wins(lib):
    x = -torch.arange(1, 1 + 2 * 5 * 5, dtype=torch.float32).reshape(1, 2, 5, 5) - 100.0
    expected = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
    case = dict(n=1, c=2, h=5, w=5, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1, ph=1, pw=1,
                count_include_pad=False, divisor_override=None, act=(-INF, INF))
    out = np.zeros(to_nhwc(expected).shape, dtype=np.float32)
    p = pool_params(case, expected.shape)
    assert lib.mcu_max_pool2d_f32(ctypes.byref(p), ptr(to_nhwc(x)), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, to_nhwc(expected))
    assert (out < -100).all()


def test_max_pool2d_nan_propagates(lib):
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    expected = F.max_pool2d(x, 2, 2)
    out = np.zeros((1, 2, 2, 1), dtype=np.float32)
    case = dict(n=1, c=1, h=4, w=4, kh=2, kw=2, sh=2, sw=2, dh=1, dw=1, ph=0, pw=0,
                count_include_pad=False, divisor_override=None, act=(-INF, INF))
    p = pool_params(case, expected.shape)
    assert lib.mcu_max_pool2d_f32(ctypes.byref(p), ptr(to_nhwc(x)), ptr(out)) == MCU_OK
    np.testing.assert_array_equal(out, to_nhwc(expected))


# --------------------------------------------------------------------------
# mean over H and W


@SETTINGS
@given(n=st.integers(1, 3), h=st.integers(1, 12), w=st.integers(1, 12), c=st.integers(1, 8),
       seed=st.integers(0, 2**32 - 1))
def test_mean_hw(lib, n, h, w, c, seed):
    x = torch.from_numpy(rng_for(seed).standard_normal((n, c, h, w)).astype(np.float32))
    expected = x.double().mean(dim=(2, 3)).numpy()
    magnitude = x.double().abs().mean(dim=(2, 3)).numpy()
    out = np.full((n, c), np.nan, dtype=np.float32)
    s = Shape4(n, h, w, c)
    assert lib.mcu_mean_hw_f32(ctypes.byref(s), ptr(to_nhwc(x)), ptr(out)) == MCU_OK
    assert_close(out, expected, magnitude)


def test_mean_hw_constant_is_exact(lib):
    x = np.full((1, 3, 7, 5), 1.25, dtype=np.float32)
    out = np.zeros((1, 5), dtype=np.float32)
    assert lib.mcu_mean_hw_f32(ctypes.byref(Shape4(1, 3, 7, 5)), ptr(x), ptr(out)) == MCU_OK
    assert out.tolist() == torch.from_numpy(x).mean(dim=(1, 2)).tolist()


# --------------------------------------------------------------------------
# broadcasting binary ops

BINARY = {
    "add": ("mcu_add_f32", torch.add),
    "sub": ("mcu_sub_f32", torch.sub),
    "mul": ("mcu_mul_f32", torch.mul),
    "div": ("mcu_div_f32", torch.div),
}


def strided_operand(rng, op_shape, layout):
    """An array viewed with shape op_shape whose memory is laid out in the
    dimension order `layout`; returns (base array, element strides with 0 on
    broadcast dims)."""
    base = f32(rng.standard_normal([op_shape[d] for d in layout]) + 0.01)
    inverse = np.argsort(layout)
    view = base.transpose(inverse)
    assert view.shape == tuple(op_shape)
    strides = [0 if op_shape[i] == 1 else view.strides[i] // 4 for i in range(len(op_shape))]
    return base, view, strides


@st.composite
def binary_cases(draw):
    rank = draw(st.integers(1, 6))
    shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    ops = []
    for _ in range(2):
        kind = draw(st.sampled_from(["full", "broadcast", "scalar"]))
        if kind == "full":
            keep = [True] * rank
        elif kind == "scalar":
            keep = [False] * rank
        else:
            keep = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
        op_shape = [s if k else 1 for s, k in zip(shape, keep)]
        layout = draw(st.permutations(range(rank)))
        ops.append((op_shape, list(layout)))
    return dict(shape=shape, ops=ops, op=draw(st.sampled_from(sorted(BINARY))),
                act=draw(act_bounds), seed=draw(st.integers(0, 2**32 - 1)))


def binary_params(shape, a_strides, b_strides, act=(-INF, INF)):
    return BinaryParams(len(shape), dims(shape), dims(a_strides), dims(b_strides), act[0], act[1])


@SETTINGS
@given(binary_cases())
def test_binary(lib, case):
    rng = rng_for(case["seed"])
    (a_shape, a_layout), (b_shape, b_layout) = case["ops"]
    a_base, a_view, a_strides = strided_operand(rng, a_shape, a_layout)
    b_base, b_view, b_strides = strided_operand(rng, b_shape, b_layout)
    name, torch_op = BINARY[case["op"]]
    expected = torch_op(torch.from_numpy(np.ascontiguousarray(a_view)),
                        torch.from_numpy(np.ascontiguousarray(b_view)))
    expected = expected.expand(case["shape"]).clamp(*case["act"]).numpy()
    out = np.full(case["shape"], np.nan, dtype=np.float32)
    p = binary_params(case["shape"], a_strides, b_strides, case["act"])
    assert getattr(lib, name)(ctypes.byref(p), ptr(a_base), ptr(b_base), ptr(out)) == MCU_OK
    # One IEEE operation per element: bit-exact with PyTorch.
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_in_place(lib, op):
    rng = rng_for(7)
    name, torch_op = BINARY[op]
    shape = [2, 3, 4, 5]
    strides = [60, 20, 5, 1]
    a = f32(rng.standard_normal(shape) + 3.0)
    b = f32(rng.standard_normal([1, 1, 1, 5]) + 3.0)
    b_strides = [0, 0, 0, 1]
    expected = torch_op(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    # out == a
    buf = a.copy()
    p = binary_params(shape, strides, b_strides)
    assert getattr(lib, name)(ctypes.byref(p), ptr(buf), ptr(b), ptr(buf)) == MCU_OK
    np.testing.assert_array_equal(buf, expected)
    # out == b (the full-shape operand on the right)
    expected_r = torch_op(torch.from_numpy(b), torch.from_numpy(a)).numpy()
    buf = a.copy()
    p = binary_params(shape, b_strides, strides)
    assert getattr(lib, name)(ctypes.byref(p), ptr(b), ptr(buf), ptr(buf)) == MCU_OK
    np.testing.assert_array_equal(buf, expected_r)
    # out == a == b
    buf = a.copy()
    p = binary_params(shape, strides, strides)
    assert getattr(lib, name)(ctypes.byref(p), ptr(buf), ptr(buf), ptr(buf)) == MCU_OK
    np.testing.assert_array_equal(buf, torch_op(torch.from_numpy(a), torch.from_numpy(a)).numpy())


def test_binary_rejects_unsafe_alias(lib):
    a = np.ones(20, dtype=np.float32)
    b = np.ones(5, dtype=np.float32)
    # The output aliases a broadcast operand: writes would feed later reads.
    p = binary_params([4, 5], [0, 1], [5, 1])
    assert lib.mcu_add_f32(ctypes.byref(p), ptr(a), ptr(b), ptr(a)) == MCU_ERR_INVALID_ARG
    # The output overlaps an operand shifted by one element.
    p = binary_params([19], [1], [0])
    assert lib.mcu_add_f32(ctypes.byref(p), a[1:].ctypes.data, ptr(b), ptr(a)) == MCU_ERR_INVALID_ARG


# --------------------------------------------------------------------------
# elementwise unary ops


def run_unary(name, args, x, in_place):
    out = x.copy() if in_place else np.full_like(x, np.nan)
    src = out if in_place else x
    assert getattr(L(), name)(x.size, *args, ptr(src), ptr(out)) == MCU_OK
    return out


values = st.tuples(st.integers(1, 300), st.sampled_from([1.0, 4.0, 30.0, 200.0]),
                   st.integers(0, 2**32 - 1))


def make_values(v):
    size, scale, seed = v
    return f32(rng_for(seed).standard_normal(size) * scale)


@SETTINGS
@given(v=values, lo=st.floats(-5, 5, width=32), hi=st.floats(-5, 5, width=32),
       infinite=st.sampled_from(["none", "lo", "hi", "both"]), in_place=st.booleans())
def test_clamp(lib, v, lo, hi, infinite, in_place):
    if infinite in ("lo", "both"):
        lo = -INF
    if infinite in ("hi", "both"):
        hi = INF
    x = make_values(v)
    # min > max is allowed and behaves like torch.clamp (everything -> max).
    expected = torch.clamp(torch.from_numpy(x), lo, hi).numpy()
    np.testing.assert_array_equal(run_unary("mcu_clamp_f32", (lo, hi), x, in_place), expected)


@SETTINGS
@given(v=values, in_place=st.booleans())
def test_sigmoid(lib, v, in_place):
    x = make_values(v)
    expected = torch.sigmoid(torch.from_numpy(x).double()).numpy()
    assert_close(run_unary("mcu_sigmoid_f32", (), x, in_place), expected, 0.1)


@SETTINGS
@given(v=values, in_place=st.booleans())
def test_tanh(lib, v, in_place):
    x = make_values(v)
    expected = torch.tanh(torch.from_numpy(x).double()).numpy()
    assert_close(run_unary("mcu_tanh_f32", (), x, in_place), expected, 0.1)


@SETTINGS
@given(v=values, in_place=st.booleans())
def test_hardswish(lib, v, in_place):
    x = make_values(v)
    expected = F.hardswish(torch.from_numpy(x)).numpy()
    assert_close(run_unary("mcu_hardswish_f32", (), x, in_place), expected, np.abs(x) * 1e-2)


def test_unary_special_values(lib):
    x = f32([-INF, -1e30, -100.0, -3.0, -0.0, 0.0, 3.0, 100.0, 1e30, INF, np.nan])
    t = torch.from_numpy(x)
    cases = [
        ("mcu_sigmoid_f32", (), torch.sigmoid(t)),
        ("mcu_tanh_f32", (), torch.tanh(t)),
        ("mcu_hardswish_f32", (), F.hardswish(t)),
        ("mcu_clamp_f32", (0.0, 6.0), torch.clamp(t, 0.0, 6.0)),
    ]
    for name, args, expected in cases:
        got = run_unary(name, args, x, in_place=False)
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6, atol=1e-30, equal_nan=True,
                                   err_msg=name)


# --------------------------------------------------------------------------
# softmax


@SETTINGS
@given(outer=st.integers(1, 5), axis=st.integers(1, 20), inner=st.integers(1, 5),
       scale=st.sampled_from([1.0, 10.0, 200.0]), seed=st.integers(0, 2**32 - 1),
       in_place=st.booleans())
def test_softmax(lib, outer, axis, inner, scale, seed, in_place):
    x = f32(rng_for(seed).standard_normal((outer, axis, inner)) * scale)
    expected = torch.softmax(torch.from_numpy(x).double(), dim=1).numpy()
    out = x.copy() if in_place else np.full_like(x, np.nan)
    src = out if in_place else x
    assert lib.mcu_softmax_f32(outer, axis, inner, ptr(src), ptr(out)) == MCU_OK
    assert np.isfinite(out).all()
    # The inputs are rounded to float32 before the exponent, so the error
    # scales with |x| * |softmax|.
    assert_close(out, expected, 1e-1 + np.abs(x) * expected)


# --------------------------------------------------------------------------
# batch norm


@SETTINGS
@given(outer=st.integers(1, 4), channels=st.integers(1, 8), inner=st.integers(1, 20),
       seed=st.integers(0, 2**32 - 1), in_place=st.booleans())
def test_batch_norm(lib, outer, channels, inner, seed, in_place):
    rng = rng_for(seed)
    x = f32(rng.standard_normal((outer, channels, inner)))
    mean = rng.standard_normal(channels)
    var = rng.uniform(0.1, 2.0, channels)
    weight = rng.standard_normal(channels)
    bias = rng.standard_normal(channels)
    eps = 1e-5
    scale = weight / np.sqrt(var + eps)
    shift = bias - mean * scale
    expected = F.batch_norm(torch.from_numpy(x).double(), torch.from_numpy(mean),
                            torch.from_numpy(var), torch.from_numpy(weight), torch.from_numpy(bias),
                            training=False, eps=eps).numpy()
    magnitude = np.abs(x) * np.abs(scale)[None, :, None] + np.abs(shift)[None, :, None]
    out = x.copy() if in_place else np.full_like(x, np.nan)
    src = out if in_place else x
    assert lib.mcu_batch_norm_f32(outer, channels, inner, ptr(f32(scale)), ptr(f32(shift)),
                                  ptr(src), ptr(out)) == MCU_OK
    assert_close(out, expected, magnitude)


# --------------------------------------------------------------------------
# generic data movement

ELEM_DTYPES = [np.uint8, np.int16, np.float32, np.dtype("V3")]


def random_elems(rng, shape, dtype):
    dtype = np.dtype(dtype)
    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    return np.ascontiguousarray(raw).view(dtype).reshape(shape)


@SETTINGS
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=6), data=st.data(),
       dtype=st.sampled_from(ELEM_DTYPES), seed=st.integers(0, 2**32 - 1))
def test_permute(lib, shape, data, dtype, seed):
    perm = data.draw(st.permutations(range(len(shape))))
    x = random_elems(rng_for(seed), shape, dtype)
    expected = np.ascontiguousarray(np.transpose(x, perm))
    out = np.zeros_like(expected)
    p = PermuteParams(len(shape), dims(shape), dims(perm))
    assert lib.mcu_permute(ctypes.byref(p), np.dtype(dtype).itemsize, ptr(x), ptr(out)) == MCU_OK
    assert out.tobytes() == expected.tobytes()


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=5), data=st.data(),
       dtype=st.sampled_from(ELEM_DTYPES), seed=st.integers(0, 2**32 - 1))
def test_concat(lib, shape, data, dtype, seed):
    rng = rng_for(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    assume(sum(sizes) > 0)
    parts = []
    for s in sizes:
        part_shape = list(shape)
        part_shape[axis] = s
        # Zero-size parts still get a real (one-element) buffer to point at.
        parts.append(random_elems(rng, part_shape, dtype) if s else random_elems(rng, [1], dtype))
    expected = np.concatenate([p for p, s in zip(parts, sizes) if s], axis=axis)
    item = np.dtype(dtype).itemsize
    outer = math.prod(shape[:axis])
    chunk = [s * math.prod(shape[axis + 1:]) * item for s in sizes]
    out = np.zeros_like(expected)
    chunks, ptrs = cbind.concat_args(parts, chunk)
    assert lib.mcu_concat(outer, len(parts), chunks, ptrs, ptr(out)) == MCU_OK
    assert out.tobytes() == expected.tobytes()


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=5), data=st.data(),
       dtype=st.sampled_from(ELEM_DTYPES), fill_kind=st.sampled_from(["zero", "random"]),
       seed=st.integers(0, 2**32 - 1))
def test_pad(lib, shape, data, dtype, fill_kind, seed):
    rank = len(shape)
    before = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    after = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    rng = rng_for(seed)
    x = random_elems(rng, shape, dtype)
    fill = random_elems(rng, [1], dtype)
    if fill_kind == "zero":
        fill = np.zeros_like(fill)
    out_shape = [s + b + a for s, b, a in zip(shape, before, after)]
    expected = np.empty(out_shape, dtype=x.dtype)
    expected[...] = fill[0]
    expected[tuple(slice(b, b + s) for b, s in zip(before, shape))] = x
    out = np.zeros_like(expected)
    # pad_before/pad_after follow the tensor's dim order (dim 0 first), not
    # torch.nn.functional.pad's last-dim-first order.
    p = PadParams(rank, dims(shape), dims(before), dims(after))
    assert lib.mcu_pad(ctypes.byref(p), np.dtype(dtype).itemsize, ptr(fill), ptr(x), ptr(out)) == MCU_OK
    assert out.tobytes() == expected.tobytes()
    if dtype is np.float32:
        pad_arg = [v for b, a in zip(reversed(before), reversed(after)) for v in (b, a)]
        torch_ref = F.pad(torch.from_numpy(x), pad_arg, value=float(fill[0]))
        np.testing.assert_array_equal(out, torch_ref.numpy())


@pytest.mark.parametrize("nbytes", [0, 1, 3, 64, 1001])
def test_copy(lib, nbytes):
    x = random_elems(rng_for(nbytes), [max(nbytes, 1)], np.uint8)
    out = np.zeros_like(x)
    assert lib.mcu_copy(nbytes, ptr(x), ptr(out)) == MCU_OK
    assert out[:nbytes].tobytes() == x[:nbytes].tobytes()
    assert lib.mcu_copy(nbytes, ptr(x), ptr(x)) == MCU_OK


# --------------------------------------------------------------------------
# argument validation


def _conv_ok():
    return Conv2dParams(input=Shape4(1, 4, 4, 2), output=Shape4(1, 4, 4, 4), kernel_h=3,
                        kernel_w=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1, dilation_h=1,
                        dilation_w=1, groups=1, act_min=-INF, act_max=INF)


def _pool_ok():
    return Pool2dParams(input=Shape4(1, 4, 4, 2), output=Shape4(1, 2, 2, 2), kernel_h=2,
                        kernel_w=2, stride_h=2, stride_w=2, dilation_h=1, dilation_w=1,
                        act_min=-INF, act_max=INF)


def _modified(factory, **changes):
    p = factory()
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            setattr(getattr(p, outer), inner, value)
        else:
            setattr(p, key, value)
    return p


BUF = np.zeros(4096, dtype=np.float32)
BUF2 = np.zeros(4096, dtype=np.float32)
BUF3 = np.zeros(4096, dtype=np.float32)
BUF4 = np.zeros(4096, dtype=np.float32)
X, W, B, Y = (ptr(a) for a in (BUF, BUF2, BUF3, BUF4))


def _conv(p, x=X, w=W, b=B, y=Y):
    return L().mcu_conv2d_f32(None if p is None else ctypes.byref(p), x, w, b, y)


def _pool(name, p, x=X, y=Y):
    return getattr(L(), name)(None if p is None else ctypes.byref(p), x, y)


def _binary(p, a=X, b=W, y=Y):
    return L().mcu_add_f32(None if p is None else ctypes.byref(p), a, b, y)


ERROR_CASES = {
    "conv ok": (lambda: _conv(_conv_ok()), MCU_OK),
    "conv ok without bias": (lambda: _conv(_conv_ok(), b=None), MCU_OK),
    "conv null params": (lambda: _conv(None), MCU_ERR_NULL_POINTER),
    "conv null input": (lambda: _conv(_conv_ok(), x=None), MCU_ERR_NULL_POINTER),
    "conv null weight": (lambda: _conv(_conv_ok(), w=None), MCU_ERR_NULL_POINTER),
    "conv null output": (lambda: _conv(_conv_ok(), y=None), MCU_ERR_NULL_POINTER),
    "conv stride 0": (lambda: _conv(_modified(_conv_ok, stride_h=0)), MCU_ERR_INVALID_ARG),
    "conv dilation 0": (lambda: _conv(_modified(_conv_ok, dilation_w=0)), MCU_ERR_INVALID_ARG),
    "conv kernel 0": (lambda: _conv(_modified(_conv_ok, kernel_w=0)), MCU_ERR_INVALID_ARG),
    "conv negative pad": (lambda: _conv(_modified(_conv_ok, pad_top=-1)), MCU_ERR_INVALID_ARG),
    "conv groups 0": (lambda: _conv(_modified(_conv_ok, groups=0)), MCU_ERR_INVALID_ARG),
    "conv nan act": (lambda: _conv(_modified(_conv_ok, act_min=float("nan"))), MCU_ERR_INVALID_ARG),
    "conv batch mismatch": (lambda: _conv(_modified(_conv_ok, **{"output.n": 2})), MCU_ERR_SHAPE),
    "conv groups do not divide": (lambda: _conv(_modified(_conv_ok, groups=3)), MCU_ERR_SHAPE),
    "conv zero dim": (lambda: _conv(_modified(_conv_ok, **{"input.h": 0})), MCU_ERR_SHAPE),
    "conv output aliases input": (lambda: _conv(_conv_ok(), y=X), MCU_ERR_INVALID_ARG),
    "linear null": (lambda: L().mcu_linear_f32(ctypes.byref(LinearParams(1, 4, 4, -INF, INF)),
                                               X, None, None, Y), MCU_ERR_NULL_POINTER),
    "linear zero features": (lambda: L().mcu_linear_f32(ctypes.byref(LinearParams(1, 0, 4, -INF, INF)),
                                                        X, W, None, Y), MCU_ERR_SHAPE),
    "max pool ok": (lambda: _pool("mcu_max_pool2d_f32", _pool_ok()), MCU_OK),
    "avg pool ok": (lambda: _pool("mcu_avg_pool2d_f32", _pool_ok()), MCU_OK),
    "max pool null": (lambda: _pool("mcu_max_pool2d_f32", _pool_ok(), x=None), MCU_ERR_NULL_POINTER),
    "max pool stride 0": (lambda: _pool("mcu_max_pool2d_f32", _modified(_pool_ok, stride_w=0)),
                          MCU_ERR_INVALID_ARG),
    "max pool pad over half kernel": (lambda: _pool("mcu_max_pool2d_f32", _modified(_pool_ok, pad_top=2)),
                                      MCU_ERR_INVALID_ARG),
    "max pool wrong output size": (lambda: _pool("mcu_max_pool2d_f32", _modified(_pool_ok, **{"output.h": 3})),
                                   MCU_ERR_SHAPE),
    "max pool channel mismatch": (lambda: _pool("mcu_max_pool2d_f32", _modified(_pool_ok, **{"output.c": 3})),
                                  MCU_ERR_SHAPE),
    "avg pool dilation": (lambda: _pool("mcu_avg_pool2d_f32", _modified(_pool_ok, dilation_h=2,
                                                                        **{"output.h": 1})),
                          MCU_ERR_INVALID_ARG),
    "avg pool negative divisor": (lambda: _pool("mcu_avg_pool2d_f32", _modified(_pool_ok, divisor_override=-1)),
                                  MCU_ERR_INVALID_ARG),
    "avg pool kernel too big": (lambda: _pool("mcu_avg_pool2d_f32", _modified(_pool_ok, kernel_h=5)),
                                MCU_ERR_SHAPE),
    "mean null": (lambda: L().mcu_mean_hw_f32(None, X, Y), MCU_ERR_NULL_POINTER),
    "mean bad shape": (lambda: L().mcu_mean_hw_f32(ctypes.byref(Shape4(1, -1, 2, 2)), X, Y), MCU_ERR_SHAPE),
    "binary ok": (lambda: _binary(binary_params([4], [1], [0])), MCU_OK),
    "binary null": (lambda: _binary(binary_params([4], [1], [0]), b=None), MCU_ERR_NULL_POINTER),
    "binary rank 0": (lambda: _binary(binary_params([], [], [])), MCU_ERR_INVALID_ARG),
    "binary rank 7": (lambda: _binary(BinaryParams(7, dims([1] * 6), dims([0] * 6), dims([0] * 6), -INF, INF)),
                      MCU_ERR_INVALID_ARG),
    "binary zero dim": (lambda: _binary(binary_params([4, 0], [1, 1], [0, 0])), MCU_ERR_SHAPE),
    "binary negative stride": (lambda: _binary(binary_params([4], [-1], [0])), MCU_ERR_SHAPE),
    "clamp null": (lambda: L().mcu_clamp_f32(4, 0.0, 1.0, None, Y), MCU_ERR_NULL_POINTER),
    "clamp size 0": (lambda: L().mcu_clamp_f32(0, 0.0, 1.0, X, Y), MCU_ERR_SHAPE),
    "clamp nan bound": (lambda: L().mcu_clamp_f32(4, float("nan"), 1.0, X, Y), MCU_ERR_INVALID_ARG),
    "clamp shifted alias": (lambda: L().mcu_clamp_f32(8, 0.0, 1.0, X, X + 4), MCU_ERR_INVALID_ARG),
    "sigmoid null": (lambda: L().mcu_sigmoid_f32(4, X, None), MCU_ERR_NULL_POINTER),
    "tanh negative size": (lambda: L().mcu_tanh_f32(-1, X, Y), MCU_ERR_SHAPE),
    "hardswish null": (lambda: L().mcu_hardswish_f32(4, None, Y), MCU_ERR_NULL_POINTER),
    "softmax null": (lambda: L().mcu_softmax_f32(1, 4, 1, None, Y), MCU_ERR_NULL_POINTER),
    "softmax zero axis": (lambda: L().mcu_softmax_f32(1, 0, 1, X, Y), MCU_ERR_SHAPE),
    "batch norm null scale": (lambda: L().mcu_batch_norm_f32(1, 4, 1, None, W, X, Y), MCU_ERR_NULL_POINTER),
    "batch norm zero channels": (lambda: L().mcu_batch_norm_f32(1, 0, 1, B, W, X, Y), MCU_ERR_SHAPE),
    "permute bad perm": (lambda: L().mcu_permute(ctypes.byref(PermuteParams(2, dims([2, 3]), dims([0, 0]))),
                                                 4, X, Y), MCU_ERR_INVALID_ARG),
    "permute elem size 0": (lambda: L().mcu_permute(ctypes.byref(PermuteParams(2, dims([2, 3]), dims([1, 0]))),
                                                    0, X, Y), MCU_ERR_INVALID_ARG),
    "permute null": (lambda: L().mcu_permute(None, 4, X, Y), MCU_ERR_NULL_POINTER),
    "permute overlap": (lambda: L().mcu_permute(ctypes.byref(PermuteParams(2, dims([2, 3]), dims([1, 0]))),
                                                4, X, X), MCU_ERR_INVALID_ARG),
    "pad negative": (lambda: L().mcu_pad(ctypes.byref(PadParams(1, dims([4]), dims([-1]), dims([0]))),
                                         4, W, X, Y), MCU_ERR_INVALID_ARG),
    "pad null fill": (lambda: L().mcu_pad(ctypes.byref(PadParams(1, dims([4]), dims([1]), dims([0]))),
                                          4, None, X, Y), MCU_ERR_NULL_POINTER),
    "pad zero dim": (lambda: L().mcu_pad(ctypes.byref(PadParams(1, dims([0]), dims([1]), dims([0]))),
                                         4, W, X, Y), MCU_ERR_SHAPE),
    "concat null input": (lambda: L().mcu_concat(1, 2, *cbind.concat_args([BUF, None], [4, 4]), Y),
                          MCU_ERR_NULL_POINTER),
    "concat no inputs": (lambda: L().mcu_concat(1, 0, *cbind.concat_args([BUF], [4]), Y), MCU_ERR_INVALID_ARG),
    "concat negative chunk": (lambda: L().mcu_concat(1, 1, *cbind.concat_args([BUF], [-4]), Y), MCU_ERR_SHAPE),
    "concat output overlaps input": (lambda: L().mcu_concat(1, 1, *cbind.concat_args([BUF], [16]), X + 8),
                                     MCU_ERR_INVALID_ARG),
    "copy null": (lambda: L().mcu_copy(4, None, Y), MCU_ERR_NULL_POINTER),
    "copy negative": (lambda: L().mcu_copy(-1, X, Y), MCU_ERR_SHAPE),
    "copy overlap": (lambda: L().mcu_copy(16, X, X + 4), MCU_ERR_INVALID_ARG),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_status_codes(lib, name):
    call, expected = ERROR_CASES[name]
    assert call() == expected


def test_status_str():
    import mcu._native

    assert mcu._native.status_str(MCU_ERR_SHAPE) == "shape mismatch"


# --------------------------------------------------------------------------
# the same C must build for the device

ARM_GCC = shutil.which("arm-none-eabi-gcc")
ARM_NM = shutil.which("arm-none-eabi-nm")
# A core of each float kind, by a board whose firmware compiles the kernels for it (with every kernel: the
# interpreter's), so that these objects are that firmware's.
ARM_BOARDS = {"m33-hard": "mps2-an505", "m3-soft": "mps2-an385"}
# The only external symbols a kernel may use.
# rintf: dynamic quantization rounds half to even, as torch does.
# libm functions the math kernels call (mcu_unary_f32, mcu_layer_norm_f32, ...): the firmware links -lm
ALLOWED_UNDEFINED = {"memcpy", "memset", "expf", "tanhf", "rintf", "sqrtf", "erff", "expm1f", "log1pf", "logf", "powf",
                     "fminf", "fmaxf", "fabsf"}
KERNEL_SOURCES = [p.name for p in all_kernel_sources()]


@pytest.mark.skipif(ARM_GCC is None or ARM_NM is None, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("target", sorted(ARM_BOARDS))
@pytest.mark.parametrize("source", KERNEL_SOURCES)
def test_kernel_builds_for_cortex_m(tmp_path, source, target):
    board = ARM_BOARDS[target]
    assert front_end_errors(board, source, ["-Wdouble-promotion"]) == ""
    undefined, defined = symbols(device_object(board, source, tmp_path))
    # A file-local constant table (nm's "r": read-only, not linked by name) is not a global; the int16 LSTM's
    # sigmoid table is one. Anything writable, or visible outside the file, is.
    data = [name for kind, name in defined if kind in "BbDdCcR"]
    # Soft-float builds call single-precision helpers (__aeabi_f*, int <->
    # float conversions); nothing else beyond the allowed libc/libm symbols:
    # no double math, no 64-bit division helpers, no globals.
    soft_float = {s for s in undefined if s.startswith(("__aeabi_f", "__aeabi_i2f", "__aeabi_ui2f"))}
    if target == "m33-hard":
        assert not soft_float, soft_float
    # A kernel that runs another public kernel (the 4-bit and look-up-table ones run the int8 ones on widened weights)
    # names it in its backend's table, so that every build that links the one links the other.
    calls = {g for f, gs in {**S4_CALLS, **LUT_CALLS}.items() if f"{f}.c" == source for g in gs if g != f}
    calls |= {f"{g}_get_buffer_size" for g in calls}  # (in the same file: the scratch it lends that kernel)
    assert undefined - soft_float <= ALLOWED_UNDEFINED | calls, undefined
    assert not data, data
