"""The optimised (SIMD) int8 kernel paths, bit-exact with the Python reference.

The DSP paths (SXTB16/SXTAB16/SMLAD/SMLABB/SMLATT, runtime_c/kernels/common/simd_s8.h) do not
compile on x86, so the kernels are built here a second time with ``-DMCU_S8_DSP_EMULATE``: the same
C paths (their column layout, reordered lanes, 2x2 blocking, tails and stack buffers) run with
portable emulations of those instructions. Every property test of the plain kernels
(tests/kernels/test_kernels_s8.py, 300 cases each) and every overlap-contract test
(tests/plan/test_memory_contracts.py) runs again against that build, plus tests aimed at the SIMD
paths' shapes (channel counts around multiples of 4, windows at the stack-buffer limit, the
1x1 pixel pair in both directions, the in-place depthwise). On the Arm cores themselves the
native instructions run in every model test on QEMU (tests/quantize/test_int8.py, all four boards).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import s8_cases as base
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from host_builds import build_emulated_lib, load_bound
from mcu.reference import elementwise
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8
from mcu.reference.elementwise import broadcast_params
from mcu.reference.pool import mean_hw_s8
from s8_properties import (  # noqa: F401  (run here against the emulated build: the module's lib fixture)
    test_add_s8, test_binary_s8_in_place, test_conv2d_s8, test_conv2d_s8_forward_overlap, test_max_pool1d_s8_forward_overlap, test_depthwise_conv2d_s8,
    test_depthwise_s8_forward_and_inplace, test_linear_s8, test_max_pool1d_s8, test_max_pool1d_s8_refuses_taller_windows, test_max_pool2d_s8, test_mean_hw_s8, test_mul_s8,
    test_pointwise_s8_both_directions, test_sub_s8)
from mcu.paths import kernels_dir
from mcu.plan.contracts import window_max_delta

REPO = Path(__file__).resolve().parents[2]
RT = REPO / "runtime_c"
COL_MAX = 640  # MCU_S8_COL_MAX in simd_s8.h
_P = ctypes.c_void_p


@pytest.fixture(scope="module")
def emulated():
    return load_bound(build_emulated_lib())


@pytest.fixture(scope="module", autouse=True)
def _use_emulated(emulated):
    """Route the shared ctypes helpers (cbind_s8.lib()) to the emulated build for this module."""
    original = cb.lib
    cb.lib = lambda: emulated
    yield
    cb.lib = original


@pytest.fixture(scope="module")
def lib(emulated):
    return emulated


def test_emulated_build_takes_the_simd_paths(emulated) -> None:
    """The emulated library really is another build: its symbols come from a file with MCU_S8_DSP."""
    text = (kernels_dir() / "common" / "simd_s8.h").read_text()
    assert "MCU_S8_DSP_EMULATE" in text
    assert Path(build_emulated_lib()).exists()


# The plain kernels' property tests (300 cases each) and the overlap-contract tests, on this build.


# --- cases aimed at the SIMD paths ------------------------------------------------------------------------


@st.composite
def simd_conv_cases(draw):
    cin = draw(st.one_of(st.integers(1, 20), st.sampled_from([4, 8, 16, 32, 64])))
    cout = draw(st.integers(1, 9))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    dh, dw = draw(st.sampled_from([1, 1, 1, 2])), draw(st.sampled_from([1, 1, 1, 2]))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * pt), 7))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pl), 7))
    out_h = (h + 2 * pt - dh * (kh - 1) - 1) // sh + 1
    out_w = (w + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, cin=cin, cout=cout, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw,
                pt=pt, pl=pl, out_h=out_h, out_w=out_w, in_zp=draw(base.zero_points), out_zp=draw(base.zero_points),
                act=draw(base.act_bounds()), bias=draw(base.bias_kinds), shift=draw(base.conv_shift_centres),
                per_channel=draw(st.sampled_from(["same", "varied"])), data=draw(base.data_modes),
                wmode=draw(base.weight_modes), seed=draw(st.integers(0, 2**32 - 1)))


def _conv_inputs(case, kernel=None):
    rng = np.random.default_rng(case["seed"])
    kh, kw = kernel or (case["kh"], case["kw"])
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], case["cin"]), case["data"])
    w = base.weights(rng, (case["cout"], kh, kw, case["cin"]), case["wmode"])
    b = base.biases(rng, case["cout"], case["bias"])
    m, s = base.per_channel(rng, case["cout"], base.shift_for(case["shift"], kh * kw * case["cin"]),
                            case["per_channel"])
    return x, w, b, m, s


@base.EXACT
@given(simd_conv_cases())
def test_conv2d_s8_simd_shapes(case):
    x, w, b, m, s = _conv_inputs(case)
    params = dict(input=x.shape, output=(case["n"], case["out_h"], case["out_w"], case["cout"]),
                  kernel_h=case["kh"], kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"],
                  pad_top=case["pt"], pad_left=case["pl"], dilation_h=case["dh"], dilation_w=case["dw"], groups=1,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    status, out = cb.conv2d(x, w, b, cb.Quant(m, s, case["cout"]), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@pytest.mark.parametrize("cin,k", [(64, 3), (71, 3), (160, 2), (640, 1), (644, 1), (28, 3), (29, 3)])
def test_conv2d_s8_window_at_the_stack_limit(cin: int, k: int) -> None:
    """Windows just inside and just past MCU_S8_COL_MAX / MCU_S8_RAW_MAX (the plain path beyond)."""
    rng = np.random.default_rng(cin * 10 + k)
    x = rng.integers(-128, 128, (1, 4, 5, cin), dtype=np.int8)
    w = rng.integers(-127, 128, (5, k, k, cin), dtype=np.int8)
    b = rng.integers(-2**20, 2**20, 5).astype(np.int32)
    m, s = base.per_channel(rng, 5, base.shift_for(None, k * k * cin), "varied")
    params = dict(input=x.shape, output=(1, 4, 5, 5), kernel_h=k, kernel_w=k, stride_h=1, stride_w=1,
                  pad_top=(k - 1) // 2, pad_left=(k - 1) // 2, dilation_h=1, dilation_w=1, groups=1,
                  input_offset=17, output_offset=-3, act_min=-128, act_max=127)
    params["output"] = (1, 4 + 2 * ((k - 1) // 2) - k + 1, 5 + 2 * ((k - 1) // 2) - k + 1, 5)
    status, out = cb.conv2d(x, w, b, cb.Quant(m, s, 5), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


def _pointwise(emulated, x, w, b, q, params, placed_delta=None):
    cout = params["output"][3]
    scratch = np.zeros(cout, dtype=np.int8)
    ctx = cb.Context(scratch.ctypes.data, cout)
    p = cb._fields(cb.Conv2dS8Params, params)
    fn = emulated.mcu_conv2d_1x1_s8
    fn.argtypes = [_P] * 7
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    status = fn(ctypes.addressof(ctx), ctypes.addressof(p), ctypes.addressof(q.struct), _P(ptr(x)), _P(ptr(w)),
                _P(ptr(b)), _P(out.ctypes.data))
    return status, out


@base.EXACT
@given(simd_conv_cases())
def test_conv2d_1x1_s8_simd(emulated, case):
    """The pixel-pair 1x1 path against the reference (odd and even pixel counts, channel tails)."""
    case = dict(case, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pt=0, pl=0, out_h=case["h"], out_w=case["w"])
    x, w, b, m, s = _conv_inputs(case, (1, 1))
    params = dict(input=x.shape, output=(case["n"], case["h"], case["w"], case["cout"]), kernel_h=1, kernel_w=1,
                  stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1, dilation_w=1, groups=1,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    status, out = _pointwise(emulated, x, w, b, cb.Quant(m, s, case["cout"]), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@base.EXACT
@given(st.integers(1, 2), st.integers(1, 7), st.integers(1, 7), st.integers(1, 19), st.integers(1, 4),
       st.integers(1, 4), st.data())
def test_depthwise_inplace_s8_simd(emulated, n, h, w, c, kh, kw, data):
    """The in-place (ring buffer) depthwise with four-channel lanes against the reference."""
    pt, pl = data.draw(st.integers(0, kh - 1)), data.draw(st.integers(0, kw - 1))
    # same size output: bottom/right padding kh - 1 - pt, kw - 1 - pl
    in_zp, out_zp = data.draw(base.zero_points), data.draw(base.zero_points)
    act = data.draw(base.act_bounds())
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (n, h, w, c), data.draw(base.data_modes))
    wt = base.weights(rng, (kh, kw, c), data.draw(base.weight_modes))
    b = base.biases(rng, c, data.draw(base.bias_kinds))
    m, s = base.per_channel(rng, c, base.shift_for(data.draw(base.conv_shift_centres), kh * kw), "varied")
    params = dict(input=x.shape, output=x.shape, ch_mult=1, kernel_h=kh, kernel_w=kw, stride_h=1, stride_w=1,
                  pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    expected = depthwise_conv2d_s8(x, wt, b, m, s, **params)
    status, data_buf = _depthwise_inplace(emulated, x, wt, b, cb.Quant(m, s, c), params)
    assert status == MCU_OK
    base.assert_equal(data_buf, expected)


@base.EXACT
@given(st.integers(1, 3), st.one_of(st.integers(1, 40), st.sampled_from([64, 128, 256, 640, 641, 700])),
       st.integers(1, 9), st.data())
def test_linear_s8_simd_shapes(batch, fin, fout, data):
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (batch, fin), data.draw(base.data_modes))
    w = base.weights(rng, (fout, fin), data.draw(base.weight_modes))
    b = base.biases(rng, fout, data.draw(base.bias_kinds))
    m, s = base.per_channel(rng, fout, base.shift_for(data.draw(base.conv_shift_centres), fin), "varied")
    in_zp, out_zp, act = data.draw(base.zero_points), data.draw(base.zero_points), data.draw(base.act_bounds())
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = cb.linear(x, w, b, cb.Quant(m, s, fout), params)
    assert status == MCU_OK
    base.assert_equal(out, linear_s8(x, w, b, m, s, **params))


@st.composite
def dw_row_cases(draw, kernel: int | None = None):
    """Shapes for the depthwise row path (common/dw_s8_dsp.h): images of at least 16 pixels, kernels up
    to 5x5 (or kernel x kernel) with up to two columns of padding, stride 1 or 2 (with and without a
    right overhang), channel counts around multiples of four, activation clamps, shifts inside and
    outside the fast range."""
    kh, kw = (kernel, kernel) if kernel else (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = draw(st.integers(1, 2))
    pt, pl = draw(st.integers(0, min(2, kh - 1))), draw(st.integers(0, min(2, kw - 1)))
    h = draw(st.integers(max(kh, 16 // 12 + 1), 12))
    w = draw(st.integers(kw, 12))
    if h * w < 16:
        h = (16 + w - 1) // w
    c = draw(st.one_of(st.integers(4, 13), st.sampled_from([16, 32, 36])))
    return dict(h=h, w=w, c=c, kh=kh, kw=kw, s=s, pt=pt, pl=pl, in_zp=draw(base.zero_points),
                out_zp=draw(base.zero_points), act=draw(base.act_bounds()), bias=draw(base.bias_kinds),
                shift=draw(base.conv_shift_centres), data=draw(base.data_modes), wmode=draw(base.weight_modes),
                seed=draw(st.integers(0, 2**32 - 1)), inplace=draw(st.booleans()))


@base.EXACT
@given(dw_row_cases())
def test_depthwise_s8_row_path(emulated, case):
    """Both depthwise kernels through the four-channel row path (the in-place one on same-size shapes)."""
    _check_depthwise_row_case(emulated, case)


@base.EXACT
@given(dw_row_cases(kernel=5))
def test_depthwise_s8_5x5_runs(emulated, case):
    """5x5 layers through the row path's 5x5 pixel loop (mcu_dw4_run5x5), strides 1 and 2."""
    _check_depthwise_row_case(emulated, case)


@st.composite
def dw_plane_cases(draw):
    """In-place 3x3 shapes for the channel-plane path (convolution/dw_plane_s8_dsp.h): channels a
    multiple of four, images wider or taller (the planes' lines along the longer side), lines of odd and
    even length from the path's shortest up, every padding, activation clamps; the emulated build's planes
    hold few lines, so that images of more lines run in bands."""
    long_side = draw(st.integers(3, 14))  # 3: the lines of three pixels (3 x 3 images)
    short_side = draw(st.integers(1, long_side))
    h, w = (long_side, short_side) if draw(st.booleans()) else (short_side, long_side)
    case = draw(dw_row_cases(kernel=3))
    return dict(case, h=h, w=w, c=4 * draw(st.integers(1, 5)), s=1, inplace=True, pt=draw(st.integers(0, 2)),
                pl=draw(st.integers(0, 2)))


@settings(base.EXACT, max_examples=50)
@given(dw_plane_cases())
def test_depthwise_s8_inplace_planes(emulated, case):
    """The in-place kernel's channel planes (both orientations, odd line ends) against the reference."""
    _check_depthwise_row_case(emulated, case)


@settings(base.EXACT, max_examples=40)
@given(dw_row_cases(kernel=3), st.integers(1, 3), st.sampled_from([(0, 0), (1, 0), (0, 1)]), st.integers(5, 14),
       st.integers(0, 2), st.integers(1, 5))
def test_depthwise_s8_row_band_planes(emulated, case, out_h, pads, w, pl, groups):
    """A band of output rows of a taller image (a streamed prefix's row call: the rows above or below
    padding, fewer output rows than input rows) through the channel planes, against the reference."""
    pt, pb = pads
    c = 4 * groups
    rng = np.random.default_rng(case["seed"])
    in_h, ow = out_h + 2 - pt - pb, w + 2 * pl - 2
    x = base.int8_data(rng, (1, in_h, w, c), case["data"])
    wt = base.weights(rng, (3, 3, c), case["wmode"])
    b = base.biases(rng, c, case["bias"])
    m, s = base.per_channel(rng, c, base.shift_for(case["shift"], 9), "varied")
    params = dict(input=x.shape, output=(1, out_h, ow, c), ch_mult=1, kernel_h=3, kernel_w=3, stride_h=1,
                  stride_w=1, pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    status, out = cb.depthwise_conv2d(x, wt, b, cb.Quant(m, s, c), params)
    assert status == MCU_OK
    base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m, s, **params))


def _check_depthwise_row_case(emulated, case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    c, kh, kw, pt, pl = case["c"], case["kh"], case["kw"], case["pt"], case["pl"]
    x = base.int8_data(rng, (1, case["h"], case["w"], c), case["data"])
    wt = base.weights(rng, (kh, kw, c), case["wmode"])
    b = base.biases(rng, c, case["bias"])
    m, s = base.per_channel(rng, c, base.shift_for(case["shift"], kh * kw), "varied")
    inplace = case["inplace"] and case["s"] == 1
    stride = 1 if inplace else case["s"]
    oh = x.shape[1] if inplace else (x.shape[1] + 2 * pt - kh) // stride + 1
    ow = x.shape[2] if inplace else (x.shape[2] + 2 * pl - kw) // stride + 1
    params = dict(input=x.shape, output=(1, oh, ow, c), ch_mult=1, kernel_h=kh, kernel_w=kw, stride_h=stride,
                  stride_w=stride, pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    expected = depthwise_conv2d_s8(x, wt, b, m, s, **params)
    q = cb.Quant(m, s, c)
    if not inplace:
        status, out = cb.depthwise_conv2d(x, wt, b, q, params)
        assert status == MCU_OK
        base.assert_equal(out, expected)
        return
    status, data_buf = _depthwise_inplace(emulated, x, wt, b, q, params)
    assert status == MCU_OK
    base.assert_equal(data_buf, expected)


# The int8 add/sub rescale their operands through 256-entry tables from MCU_BINARY_S8_LUT_MIN elements
# on (elementwise/binary_s8.h); the property tests of the plain kernels on this build, then shapes that
# always reach the tables (broadcasts, strides, in place).


@st.composite
def large_binary_cases(draw, op):
    case = draw(base.binary_cases(op))
    rank = draw(st.integers(1, 4))
    out_shape = [draw(st.integers(1, 12)) for _ in range(rank - 1)] + [draw(st.integers(256, 300))]
    a_shape = [d if draw(st.integers(0, 3)) else 1 for d in out_shape]
    b_shape = [d if draw(st.integers(0, 3)) else 1 for d in out_shape]
    return dict(case, a_shape=a_shape, b_shape=b_shape)


@base.EXACT
@given(large_binary_cases("add"))
def test_add_s8_tables(case):
    base.run_binary("add", case)


@base.EXACT
@given(large_binary_cases("sub"))
def test_sub_s8_tables(case):
    base.run_binary("sub", case)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("act", [(-128, 127), (-100, 90)])
def test_binary_s8_tables_in_place(op, act):
    rng = np.random.default_rng(11)
    a = base.int8_data(rng, (4, 16, 16), "mixed")
    b = base.int8_data(rng, (4, 16, 16), "mixed")
    qp = base.arith.add_params(0.05, 0.02, 0.07, zp_a=-3, zp_b=10, zp_out=-128)
    params = dict(qp, act_min=act[0], act_max=act[1], **broadcast_params(a.shape, b.shape))
    expected = getattr(elementwise, f"{op}_s8")(a, b, **params)
    status, out = cb.binary(op, a, b, params, out=a)
    assert status == MCU_OK and out is a
    base.assert_equal(a, expected)


# Max pooling and the spatial mean take four channels per step (SSUB8/SEL maxima; SXTAB16 sums in
# 16-bit lanes, flushed every 256 pixels): the plain kernels' property tests on this build, then
# channel counts past one group and pixel counts around the flush.


@base.EXACT
@given(base.pool_cases(), st.integers(4, 21))
def test_max_pool2d_s8_channel_groups(case, c):
    base.run_pool("max", dict(case, c=c))


@pytest.mark.parametrize("h,w", [(1, 255), (16, 16), (1, 257), (9, 57), (25, 5)])
@pytest.mark.parametrize("c", [4, 5, 8, 11, 12, 13, 20])
@pytest.mark.parametrize("fill", ["max", "min", "random"])
def test_mean_hw_s8_lane_flush(h, w, c, fill):
    rng = np.random.default_rng(h * w + c)
    shape = (1, h, w, c)
    x = {"max": np.full(shape, 127, np.int8), "min": np.full(shape, -128, np.int8),
         "random": rng.integers(-128, 128, shape, dtype=np.int8)}[fill]
    for in_zp, out_zp, m, s in [(-128, 5, 2**30 + 12345, -8), (127, -128, 2**31 - 1, -9), (0, 0, 1 << 30, 1)]:
        params = dict(input=x.shape, input_offset=-in_zp, multiplier=m, shift=s, output_offset=out_zp,
                      act_min=-128, act_max=127)
        status, out = cb.mean_hw(x, params)
        assert status == MCU_OK
        base.assert_equal(out, mean_hw_s8(x, **params))


@pytest.mark.parametrize("shift,out_zp", [(-24, 127), (-24, -128), (-23, 100), (-1, -128), (-9, 5)])
def test_depthwise_s8_inplace_planes_at_the_bounds(emulated, shift, out_zp):
    """The channel planes' doubled accumulator and one-SMMLAR requantization (mcu_dwpl_quant_ok) at the
    edge of their range: biases at the largest magnitude the planes take and one past it (those
    layers take another path), extreme inputs and weights, the largest shift with the widest output
    offsets; against the reference."""
    c, h, w = 8, 6, 7
    rng = np.random.default_rng(-shift * 1000 + out_zp + 128)
    x = rng.choice(np.array([-128, 127], dtype=np.int8), size=(1, h, w, c))
    wt = rng.choice(np.array([-128, 127], dtype=np.int8), size=(3, 3, c))
    edge = 2**30 - 1 - 9 * 255 * 128
    for b0 in (edge, edge + 1):
        b = np.array([b0, -b0, b0, -b0, 3, -3, b0, 0], dtype=np.int32)
        m = np.array([2**31 - 1, 2**30, 2**31 - 1, 0, 2**31 - 1, 2**30 + 12345, 2**31 - 1, 2**31 - 1], dtype=np.int32)
        s = np.full(c, shift, dtype=np.int32)
        for in_zp in (-128, 127):
            case = dict(seed=0, c=c, h=h, w=w, kh=3, kw=3, pt=1, pl=1, s=1, inplace=True, in_zp=in_zp,
                        out_zp=out_zp, act=(-128, 127))
            params = dict(input=x.shape, output=x.shape, ch_mult=1, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
                          pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=-in_zp,
                          output_offset=out_zp, act_min=-128, act_max=127)
            expected = depthwise_conv2d_s8(x, wt, b, m, s, **params)
            status, data_buf = _depthwise_inplace(emulated, x, wt, b, cb.Quant(m, s, c), params)
            assert status == MCU_OK and case["c"] == c
            base.assert_equal(data_buf, expected)


@base.EXACT
@given(hw=st.tuples(st.integers(1, 5), st.integers(1, 5)), c=st.integers(1, 21), in_zp=base.zero_points,
       out_zp=base.zero_points, m=base.multipliers, s=st.sampled_from([-25, -24, -23, -12, -3, -1, 0, 1]),
       act=base.act_bounds(), data=base.data_modes, seed=st.integers(0, 2**32 - 1))
def test_mean_hw_s8_word_requantization(hw, c, in_zp, out_zp, m, s, act, data, seed):
    """The four-channel groups' one-SMLAL requantization stored as a word (shifts in [-24, -1]) and the
    generic one past those bounds: small images (mobilenet_v1's 3 x 3), groups of eight channels then
    four, odd channel tails, extreme data, offsets and activation bounds, against the reference."""
    x = base.int8_data(np.random.default_rng(seed), (1, *hw, c), data)
    params = dict(input=x.shape, input_offset=-in_zp, multiplier=m, shift=s, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = cb.mean_hw(x, params)
    assert status == MCU_OK
    base.assert_equal(out, mean_hw_s8(x, **params))


def _depthwise_inplace(emulated, x, wt, b, q, params):
    """The in-place kernel on a copy of x (a ring of pad_top + 1 rows): its status and the copy."""
    p = cb._fields(cb.DepthwiseConv2dS8Params, params)
    ring = np.zeros((params["pad_top"] + 1) * x.shape[2] * x.shape[3], dtype=np.int8)
    ctx = cb.Context(ring.ctypes.data, ring.size)
    fn = emulated.mcu_depthwise_conv2d_s8_inplace
    fn.argtypes = [_P] * 6
    out = x.copy()
    status = fn(ctypes.addressof(ctx), ctypes.addressof(p), ctypes.addressof(q.struct), _P(out.ctypes.data),
                _P(ptr(wt)), _P(ptr(b)))
    return status, out


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("field,value", [("m", -1), ("m", -(2**31)), ("s", 31), ("s", -32), (None, 0)])
def test_depthwise_s8_planes_refuse_invalid_quant(emulated, stride, field, value):
    """A layer the channel planes would take validates its requantization through their plan alone
    (no second pass over the channels): an invalid multiplier or shift in one channel is still
    refused, and the valid layer runs and matches the reference. Stride 1 in place, stride 2 forward."""
    c, h, w = 8, 12, 12
    rng = np.random.default_rng(stride)
    x = rng.integers(-128, 128, (1, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (3, 3, c), dtype=np.int8)
    b = rng.integers(-5000, 5000, c).astype(np.int32)
    m = np.full(c, 2**30 + 777, dtype=np.int64)
    s = np.full(c, -7, dtype=np.int64)
    if field is not None:
        (m if field == "m" else s)[5] = value
    oh = (h + 2 - 3) // stride + 1
    params = dict(input=x.shape, output=(1, oh, oh, c), ch_mult=1, kernel_h=3, kernel_w=3, stride_h=stride,
                  stride_w=stride, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=5,
                  output_offset=-3, act_min=-128, act_max=127)
    q = cb.Quant(m, s, c)
    if stride == 2:
        status, out = cb.depthwise_conv2d(x, wt, b, q, params)
    else:
        status, out = _depthwise_inplace(emulated, x, wt, b, q, params)
    if field is not None:
        assert status == MCU_ERR_INVALID_ARG
        return
    assert status == MCU_OK
    base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m.astype(np.int32), s.astype(np.int32), **params))


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from([(1, 6, 6, 1), (1, 7, 11, 1), (1, 3, 3, 1), (1, 5, 12, 1), (1, 13, 4, 1), (1, 12, 9, 2),
                              (1, 13, 12, 2), (1, 7, 6, 2)]),
       c=st.sampled_from([4, 8, 12]), in_zp=base.zero_points, shift=st.integers(-24, -1),
       data=base.data_modes, seed=st.integers(0, 2**32 - 1))
def test_depthwise_s8_planes_relu_finish(emulated, shape, c, in_zp, shift, data, seed):
    """A ReLU folded into the range (output offset -128, all of int8): the channel planes leave out the
    requantization's sign correction (MCU_DWPL_RELU); sums mostly below zero (negative biases), zero and
    the largest multipliers, lines of quads and tails, of sixes and their tail, of six and of three, stride 1
    in place and 2 apart;
    against the reference."""
    _, h, w, s = shape
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (1, h, w, c), data)
    wt = rng.choice(np.array([-128, -1, 0, 1, 127], dtype=np.int8), size=(3, 3, c))
    b = rng.integers(-300000, 3000, c).astype(np.int32)
    m = rng.choice(np.array([0, 1, 2**30, 2**31 - 1, 1518500250], dtype=np.int64), size=c).astype(np.int32)
    sh = np.full(c, shift, dtype=np.int32)
    oh, ow = (h + 2 - 3) // s + 1, (w + 2 - 3) // s + 1
    params = dict(input=x.shape, output=(1, oh, ow, c), ch_mult=1, kernel_h=3, kernel_w=3, stride_h=s, stride_w=s,
                  pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=-in_zp, output_offset=-128,
                  act_min=-128, act_max=127)
    expected = depthwise_conv2d_s8(x, wt, b, m, sh, **params)
    q = cb.Quant(m, sh, c)
    if s == 2:
        status, out = cb.depthwise_conv2d(x, wt, b, q, params)
    else:
        status, out = _depthwise_inplace(emulated, x, wt, b, q, params)
    assert status == MCU_OK
    base.assert_equal(out, expected)


@settings(max_examples=40, deadline=None)
@given(hw=st.sampled_from([(5, 12), (4, 13), (14, 5), (3, 15), (7, 18), (19, 2)]), c=st.sampled_from([4, 8]),
       in_zp=base.zero_points, shifts=st.lists(st.integers(-14, -6), min_size=8, max_size=8),
       edge=st.sampled_from(["in", "past", "small", "ties"]), data=base.data_modes, seed=st.integers(0, 2**32 - 1))
def test_depthwise_s8_planes_scaled_requantization(emulated, hw, c, in_zp, shifts, edge, data, seed):
    """The lines of sixes of a ReLU layer with every shift in [-13, -7] take the weights and bias times 2^e,
    e = 15 + shift, and one SMMLA and SSAT's shift (MCU_DWPL_SCALED): lines of whole sixes and of sixes and a
    pair, a pixel or both, along rows and (taller images) columns; shifts at both ends of that range and one
    past either (the layer keeps the doubled form); biases at the largest magnitude 2^e (|bias| + 9 x 255 x 128)
    < 2^31 allows and one past it (the doubled form again); extreme data; multipliers 0, 1, 2^30 and 2^31 - 1;
    sums at the ties of both roundings (zero weights, biases j 2^(R+1) + 2^R + {-1, 0, 1}, multiplier 2^30:
    fails with either rounding term of C dropped); against the reference."""
    h, w = hw
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (1, h, w, c), data)
    wt, b, m, sh = _scaled_layer(rng, c, shifts, edge)
    params = dict(input=x.shape, output=x.shape, ch_mult=1, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
                  pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=-in_zp, output_offset=-128,
                  act_min=-128, act_max=127)
    expected = depthwise_conv2d_s8(x, wt, b, m, sh, **params)
    status, out = _depthwise_inplace(emulated, x, wt, b, cb.Quant(m, sh, c), params)
    assert status == MCU_OK
    base.assert_equal(out, expected)


@settings(max_examples=30, deadline=None)
@given(out_h=st.integers(1, 2), pads=st.sampled_from([(0, 0), (1, 0), (0, 1)]), c=st.sampled_from([4, 8]),
       in_zp=base.zero_points, shifts=st.lists(st.integers(-14, -6), min_size=8, max_size=8),
       edge=st.sampled_from(["in", "past", "small", "ties"]), data=base.data_modes, seed=st.integers(0, 2**32 - 1))
def test_depthwise_s8_row_calls_scaled(emulated, out_h, pads, c, in_zp, shifts, edge, data, seed):
    """A streamed prefix's row call of a ReLU layer with rows of 12 (the emulated build's planes hold no longer
    ones) takes the whole layer's scaled lines group by group where a group's shifts and biases allow it: the same
    extremes as the in-place lines above, against the reference."""
    pt, pb = pads
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (1, out_h + 2 - pt - pb, 12, c), data)
    wt, b, m, sh = _scaled_layer(rng, c, shifts, edge)
    params = dict(input=x.shape, output=(1, out_h, 12, c), ch_mult=1, kernel_h=3, kernel_w=3, stride_h=1,
                  stride_w=1, pad_top=pt, pad_left=1, dilation_h=1, dilation_w=1, input_offset=-in_zp,
                  output_offset=-128, act_min=-128, act_max=127)
    status, out = cb.depthwise_conv2d(x, wt, b, cb.Quant(m, sh, c), params)
    assert status == MCU_OK
    base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m, sh, **params))


def _scaled_layer(rng: np.random.Generator, c: int, shifts: list[int],
                  edge: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weights, biases, multipliers and shifts at the scaled requantization's bounds (MCU_DWPL_SCALED), most
    layers inside them; edge: biases at the largest magnitude (in), one past it, small, or at the ties."""
    wt = rng.choice(np.array([-128, -1, 0, 1, 127], dtype=np.int8), size=(3, 3, c))
    sh = np.array(shifts[:c], dtype=np.int32)
    if rng.random() < 0.7:  # most layers inside the scaled range
        sh = np.clip(sh, -13, -7)
    window = 9 * 255 * 128
    room = 2 ** (31 - (15 + sh.astype(np.int64))) - 1 - window  # the largest |bias| of the scaled form
    b = {"in": room, "past": room + 1}.get(edge, rng.integers(-3000, 3000, c)).astype(np.int64)
    b = np.where(rng.random(c) < 0.5, -b, b).astype(np.int32)
    m = rng.choice(np.array([0, 1, 2**30, 2**30 + 1, 2**31 - 1], dtype=np.int64), size=c).astype(np.int32)
    if edge == "ties":  # every sum the bias: at the requantization's ties and either side
        wt[:] = 0
        r = -sh.astype(np.int64)
        b = (rng.integers(0, 250, c) * 2 ** (r + 1) + 2**r + rng.integers(-1, 2, c)).astype(np.int32)
        m[:] = 2**30
    return wt, b, m, sh


@st.composite
def dw_direct_cases(draw):
    """Small 3x3 stride-2 images for the direct path (convolution/dw_direct_s8_dsp.h): at most 36 outputs,
    rows of pairs and of odd counts, apart from the input and overlapping it (staged), every padding the
    windows allow, channels a multiple of four, extreme zero points, weights, data and biases, the ReLU
    folded into the range (the path's finish; saturation alone and clamps, and other channel counts, keep
    the other paths)."""
    s = 2
    oh, ow = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    pt, pl = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    # input rows and columns for those outputs, with or without the last window's bottom/right overhang
    h = max(1, 2 * oh + 1 - pt - draw(st.integers(0, 1)))
    w = max(1, 2 * ow + 1 - pl - draw(st.integers(0, 1)))
    relu = draw(st.booleans())
    return dict(s=s, oh=oh, ow=ow, pt=pt, pl=pl, h=h, w=w, c=draw(st.sampled_from([4, 8, 12, 13, 16])),
                in_zp=draw(base.zero_points), out_zp=-128 if relu else draw(base.zero_points),
                act=(-128, 127) if relu else draw(base.act_bounds()),
                bias=draw(st.sampled_from(["edge", "none", "small", "full"])),
                data=draw(base.data_modes), wmode=draw(base.weight_modes), overlap=draw(st.booleans()),
                seed=draw(st.integers(0, 2**32 - 1)))


@settings(base.EXACT, max_examples=120)
@given(dw_direct_cases())
def test_depthwise_s8_direct_small_images(emulated, case):
    """The direct path of small images against the reference: the folded input offset with the padding
    bytes at -input_offset, the doubled accumulator at the planes' bounds (biases at the largest
    magnitude they take), the one-SMMLAR requantization without the sign correction."""
    rng = np.random.default_rng(case["seed"])
    c, s = case["c"], case["s"]
    x = base.int8_data(rng, (1, case["h"], case["w"], c), case["data"])
    wt = base.weights(rng, (3, 3, c), case["wmode"])
    if case["bias"] == "edge":
        edge = 2**30 - 1 - 9 * 255 * 128
        b = rng.choice(np.array([edge, -edge, 0, 1], dtype=np.int32), size=c)
    else:
        b = base.biases(rng, c, case["bias"])
    m, sh = base.per_channel(rng, c, base.shift_for(0, 9), "varied")
    params = dict(input=x.shape, output=(1, case["oh"], case["ow"], c), ch_mult=1, kernel_h=3, kernel_w=3,
                  stride_h=s, stride_w=s, pad_top=case["pt"], pad_left=case["pl"], dilation_h=1, dilation_w=1,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    expected = depthwise_conv2d_s8(x, wt, b, m, sh, **params)
    q = cb.Quant(m, sh, c)
    if case["overlap"]:
        # the output overlapping the input from below it, at the window contract's limit or a byte or two
        # lower (the direct path stages it; the other paths rely on the contract)
        t = lambda shape: SimpleNamespace(shape=shape, dtype="int8")  # noqa: E731
        delta = window_max_delta(t((1, c, case["h"], case["w"])), t((1, c, case["oh"], case["ow"])), (3, 3), (s, s),
                                 (case["pt"], case["pl"]), (1, 1))
        shift = -delta + int(rng.integers(0, 3))
        buf = np.zeros(shift + x.size, dtype=np.int8)
        buf[shift:] = x.reshape(-1)
        p = cb._fields(cb.DepthwiseConv2dS8Params, params)
        fn = emulated.mcu_depthwise_conv2d_s8
        fn.argtypes = [_P] * 7
        status = fn(None, ctypes.addressof(p), ctypes.addressof(q.struct), _P(buf.ctypes.data + shift), _P(ptr(wt)),
                    _P(ptr(b)), _P(buf.ctypes.data))
        out = buf[: expected.size].reshape(expected.shape)
    else:
        status, out = cb.depthwise_conv2d(x, wt, b, q, params)
    assert status == MCU_OK
    base.assert_equal(out, expected)


@settings(base.EXACT, max_examples=120)
@given(shape=st.sampled_from([(12, 9), (13, 12), (7, 6), (9, 16), (16, 10)]), c=st.sampled_from([4, 8, 12]),
       in_zp=base.zero_points, rmode=st.sampled_from(["in", "ends", "mixed"]),
       bias=st.sampled_from(["small", "small", "edge", "none"]), data=base.data_modes, wmode=base.weight_modes,
       overlap=st.sampled_from([None, 0, 0, 2]), seed=st.integers(0, 2**32 - 1))
def test_depthwise_s8_s2_planes_scaled(emulated, shape, c, in_zp, rmode, bias, data, wmode, overlap, seed):
    """The stride-2 planes' scaled requantization (MCU_DWPL_SCALED at stride 2: weights and bias times 2^(15 - R), SMMLA
    and SSAT with ASR #14) against the reference: shifts R in [7, 13] (at both ends: the int16 lanes at -2^15
    for a weight of -128 at R = 7), groups with a channel outside that range or a bias one past the scaled
    bound (2^(15 - R) (|bias| + 9 x 255 x 128) < 2^31) beside groups inside it, which take the unscaled loop; a ReLU
    folded into the range (the form's condition), images whose lines end in quads, pairs, a pixel, or three;
    the output apart from the input or below it at the window contract's limit, a whole pixel (its channels on
    the input's: every band group by group over the emulated build's small planes) or two bytes lower (the rows
    written straight, the rest through the row buffer)."""
    h, w = shape
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (1, h, w, c), data)
    wt = base.weights(rng, (3, 3, c), wmode)
    r = {"in": rng.integers(7, 14, c), "ends": rng.choice([7, 13], c), "mixed": rng.integers(5, 16, c)}[rmode]
    m, _ = base.per_channel(rng, c, 0, "same")
    # the smallest |bias| the scaled form refuses at R: 2^(15 - R) (|bias| + 9 x 255 x 128) reaches 2^31
    bound = np.minimum(2 ** (16 + r.astype(np.int64)), 2**29) - 9 * 255 * 128
    edge = lambda: np.array([rng.choice([v - 1, -(v - 1), v, -v, 0]) for v in bound])  # noqa: E731
    b = {"small": lambda: rng.integers(-(2**17), 2**17, c), "none": lambda: None, "edge": edge}[bias]()
    b = None if b is None else np.asarray(b, dtype=np.int32)
    params = dict(input=x.shape, output=(1, (h - 1) // 2 + 1, (w - 1) // 2 + 1, c), ch_mult=1, kernel_h=3,
                  kernel_w=3, stride_h=2, stride_w=2, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1,
                  input_offset=-in_zp, output_offset=-128, act_min=-128, act_max=127)
    sh = (-r).astype(np.int32)
    expected = depthwise_conv2d_s8(x, wt, b, m, sh, **params)
    q = cb.Quant(m, sh, c)
    if overlap is not None:
        status, out = _depthwise_below_input(emulated, x, wt, b, q, params, expected.shape, overlap)
    else:
        status, out = cb.depthwise_conv2d(x, wt, b, q, params)
    assert status == MCU_OK
    base.assert_equal(out, expected)


@settings(base.EXACT, max_examples=80)
@given(rows=st.sampled_from([(2, 1, 1), (3, 0, 1), (4, 1, 2), (5, 0, 2)]), w=st.integers(7, 13),
       c=st.sampled_from([4, 8, 12]), in_zp=base.zero_points, relu=st.booleans(), data=base.data_modes,
       wmode=base.weight_modes, seed=st.integers(0, 2**32 - 1))
def test_depthwise_s8_s2_row_calls(emulated, rows, w, c, in_zp, relu, data, wmode, seed):
    """Stride-2 calls of one or two output rows (a streamed prefix's band, a fused block's rows: the input rows
    with or without the top padding row), which take the channel planes rather than the direct path, against
    the reference: odd and even widths, scaled and plain requantization (a folded ReLU or the whole range)."""
    h, pad_top, oh = rows
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (1, h, w, c), data)
    wt = base.weights(rng, (3, 3, c), wmode)
    m, _ = base.per_channel(rng, c, 0, "same")
    sh = (-rng.integers(7, 14, c)).astype(np.int32)
    b = rng.integers(-(2**17), 2**17, c).astype(np.int32)
    params = dict(input=x.shape, output=(1, oh, (w - 1) // 2 + 1, c), ch_mult=1, kernel_h=3, kernel_w=3,
                  stride_h=2, stride_w=2, pad_top=pad_top, pad_left=1, dilation_h=1, dilation_w=1,
                  input_offset=-in_zp, output_offset=-128 if relu else 3, act_min=-128, act_max=127)
    expected = depthwise_conv2d_s8(x, wt, b, m, sh, **params)
    status, out = cb.depthwise_conv2d(x, wt, b, cb.Quant(m, sh, c), params)
    assert status == MCU_OK
    base.assert_equal(out, expected)


def _depthwise_below_input(emulated, x, wt, b, q, params, out_shape, lower=0):
    """The not-in-place kernel with its output at the window contract's largest offset below its input, or
    `lower` bytes lower."""
    t = lambda shape: SimpleNamespace(shape=shape, dtype="int8")  # noqa: E731
    _, h, w, c = x.shape
    delta = window_max_delta(t((1, c, h, w)), t((1, c, out_shape[1], out_shape[2])),
                             (params["kernel_h"], params["kernel_w"]), (params["stride_h"], params["stride_w"]),
                             (params["pad_top"], params["pad_left"]), (1, 1))
    delta -= lower
    buf = np.zeros(-delta + x.size, dtype=np.int8)
    buf[-delta:] = x.reshape(-1)
    p = cb._fields(cb.DepthwiseConv2dS8Params, params)
    fn = emulated.mcu_depthwise_conv2d_s8
    fn.argtypes = [_P] * 7
    status = fn(None, ctypes.addressof(p), ctypes.addressof(q.struct), _P(buf.ctypes.data - delta), _P(ptr(wt)),
                _P(ptr(b) if b is not None else None), _P(buf.ctypes.data))
    return status, buf[: int(np.prod(out_shape))].reshape(out_shape)
