"""The MCU_S8_WIDE int8 paths (runtime_c/kernels/common/plain_s8.h), bit-exact with the Python reference.

Cores without the DSP extension that multiply-accumulate 32 x 32 -> 64 bits in one instruction (the
Cortex-M3) and the host build take these paths, so the host library under test here runs them: two
output pixels per 64-bit multiply, split every 128 taps; four-pixel blocks (two-pixel blocks for
windows of 321 to 640 taps, the plain loops beyond); the one-multiply requantization for shifts in
[-24, -1] and the general one outside; the depthwise row path in place, apart and through its row
buffer, and in pixel pairs (raw x, the offset folded) for rows of 3-wide windows. The cases aim at
those edges: window lengths around the chunk and block limits, pixel counts
that leave one to three pixels in the last block, output feature counts around multiples of four,
every shift, zero-points and data at the int8 ends.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import overlap
import s8_cases as base
from cbind import MCU_OK, ptr
from mcu.ir import Op, Tensor
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8

REPO = Path(__file__).resolve().parents[2]
RT = REPO / "runtime_c"
_P = ctypes.c_void_p
CASES = settings(max_examples=40, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# window lengths around the 128-tap chunk, the four-pixel block (320 taps), the two-pixel block (640)
TAPS = [1, 3, 4, 5, 8, 127, 128, 129, 255, 256, 257, 320, 321, 384, 640, 641]
shifts_any = st.one_of(st.none(), st.integers(-3, 3), st.integers(-31, 30), st.sampled_from([-25, -24, -1, 0]))


@pytest.fixture(scope="module")
def lib():
    cb.check_layout()
    return cb.lib()


def _quant(rng, channels: int, taps: int, shift, kind: str = "varied"):
    return base.per_channel(rng, channels, base.shift_for(shift, taps), kind)


@st.composite
def wide_conv_cases(draw):
    taps = draw(st.sampled_from(TAPS))
    # a window of `taps` values as kh x kw x cin
    kh, kw = draw(st.sampled_from([(1, 1), (1, 1), (3, 3), (1, 3), (2, 2)]))
    if taps % (kh * kw):
        kh, kw = 1, 1
    cin = taps // (kh * kw)
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    dh, dw = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * pt), 6))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pl), 6))
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, cin=cin, cout=draw(st.integers(1, 6)), kh=kh, kw=kw, sh=sh,
                sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, in_zp=draw(base.zero_points), out_zp=draw(base.zero_points),
                act=draw(base.act_bounds()), bias=draw(base.bias_kinds), shift=draw(shifts_any),
                data=draw(base.data_modes), wmode=draw(base.weight_modes), seed=draw(st.integers(0, 2**32 - 1)))


@CASES
@given(wide_conv_cases())
def test_conv2d_s8_wide_blocks(lib, case):
    """mcu_conv2d_s8 through four- and two-pixel blocks (and the plain loops past 640 taps)."""
    rng = np.random.default_rng(case["seed"])
    kh, kw, cin, cout = case["kh"], case["kw"], case["cin"], case["cout"]
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = base.weights(rng, (cout, kh, kw, cin), case["wmode"])
    b = base.biases(rng, cout, case["bias"])
    m, s = _quant(rng, cout, kh * kw * cin, case["shift"])
    out_h = (case["h"] + 2 * case["pt"] - case["dh"] * (kh - 1) - 1) // case["sh"] + 1
    out_w = (case["w"] + 2 * case["pl"] - case["dw"] * (kw - 1) - 1) // case["sw"] + 1
    params = dict(input=x.shape, output=(case["n"], out_h, out_w, cout), kernel_h=kh, kernel_w=kw,
                  stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
                  dilation_h=case["dh"], dilation_w=case["dw"], groups=1, input_offset=-case["in_zp"],
                  output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1])
    status, out = cb.conv2d(x, w, b, cb.Quant(m, s, cout), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@pytest.mark.parametrize("taps", [128, 129, 320, 640])
@pytest.mark.parametrize("zp", [-128, 127])
def test_conv2d_s8_wide_split_at_its_bound(lib, taps: int, zp: int) -> None:
    """Every product at its largest magnitude (x + offset = +-255 against -128 or 127) over whole 128-tap
    chunks: the lanes' sums reach the split's bound, next to lanes at zero."""
    n_px = 7  # blocks of four: one full, one of three
    x = np.empty((1, 1, n_px, taps), dtype=np.int8)
    x[..., :] = 127 if zp == -128 else -128
    x[0, 0, 1::2, :] = zp  # odd pixels at the zero point: x + offset == 0
    w = np.full((3, 1, 1, taps), -128, dtype=np.int8)
    w[1] = 127
    w[2, 0, 0, ::2] = 127
    m = np.array([2**31 - 1, 2**30, 2**31 - 1], dtype=np.int32)
    s = np.array([-16, -15, -9], dtype=np.int32)
    params = dict(input=x.shape, output=(1, 1, n_px, 3), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1,
                  pad_top=0, pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=-zp, output_offset=0,
                  act_min=-128, act_max=127)
    status, out = cb.conv2d(x, w, None, cb.Quant(m, s, 3), params)
    assert status == MCU_OK
    expected = conv2d_s8(x, w, None, m, s, **params)
    base.assert_equal(out, expected)
    assert len(np.unique(expected)) > 1  # not one saturated value everywhere


def _pointwise(lib, x, w, b, q, params, out=None):
    cout = params["output"][3]
    scratch = np.zeros(cout, dtype=np.int8)
    ctx = cb.Context(scratch.ctypes.data, cout)
    p = cb._fields(cb.Conv2dS8Params, params)
    fn = lib.mcu_conv2d_1x1_s8
    fn.argtypes = [_P] * 7
    y = np.zeros(tuple(params["output"]), dtype=np.int8) if out is None else out
    status = fn(ctypes.addressof(ctx), ctypes.addressof(p), ctypes.addressof(q.struct), _P(ptr(x)), _P(ptr(w)),
                _P(ptr(b)), _P(y.ctypes.data))
    return status, y


@CASES
@given(st.integers(1, 2), st.integers(1, 4), st.integers(1, 5),
       st.one_of(st.integers(1, 20), st.sampled_from([64, 127, 128, 129, 160, 320, 321])), st.integers(1, 9),
       st.data())
def test_conv2d_1x1_s8_wide_blocks(lib, n, h, w, cin, cout, data):
    """mcu_conv2d_1x1_s8: four-pixel blocks with every tail, channel counts past the block limit."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = base.int8_data(rng, (n, h, w, cin), data.draw(base.data_modes))
    wt = base.weights(rng, (cout, 1, 1, cin), data.draw(base.weight_modes))
    b = base.biases(rng, cout, data.draw(base.bias_kinds))
    m, s = _quant(rng, cout, cin, data.draw(shifts_any))
    in_zp, out_zp, act = data.draw(base.zero_points), data.draw(base.zero_points), data.draw(base.act_bounds())
    params = dict(input=x.shape, output=(n, h, w, cout), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
                  pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = _pointwise(lib, x, wt, b, cb.Quant(m, s, cout), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, wt, b, m, s, **params))


@pytest.mark.parametrize("pixels,cin,cout", [(9, 5, 3), (10, 8, 8), (7, 16, 4), (13, 3, 7), (6, 40, 64)])
def test_conv2d_1x1_s8_wide_overlap(lib, pixels: int, cin: int, cout: int) -> None:
    """Blocks keep the pixel-buffer contract: the output placed at every extreme its contract allows
    (forward and backward) equals the output on separate buffers."""
    rng = np.random.default_rng(pixels * 100 + cin)
    x = base.int8_data(rng, (1, 1, pixels, cin), "uniform")
    wt = base.weights(rng, (cout, 1, 1, cin), "full")
    b = base.biases(rng, cout, "small")
    m, s = _quant(rng, cout, cin, None)
    q = cb.Quant(m, s, cout)
    params = cb._fields(cb.Conv2dS8Params, dict(
        input=x.shape, output=(1, 1, pixels, cout), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
        pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=5, output_offset=-3, act_min=-128,
        act_max=127))
    op = Op("conv2d", [Tensor("x", (1, cin, 1, pixels), "int8"), Tensor("w", (cout, cin, 1, 1), "int8", data=wt)],
            [Tensor("y", (1, cout, 1, pixels), "int8")],
            {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1})
    scratch = np.zeros(cout, dtype=np.int8)
    ctx = cb.Context(scratch.ctypes.data, cout)
    lib.mcu_conv2d_1x1_s8.argtypes = [_P] * 7

    def call(xp, yp):
        return lib.mcu_conv2d_1x1_s8(ctypes.addressof(ctx), ctypes.addressof(params), ctypes.addressof(q.struct),
                                     xp, ptr(wt), ptr(b), yp)
    overlap.check_overlap(call, x, op, pixels * cout, cout)


@CASES
@given(st.integers(1, 3), st.one_of(st.integers(1, 40), st.sampled_from([127, 128, 129, 640, 700])),
       st.one_of(st.integers(1, 9), st.sampled_from([12, 15, 16, 17])), st.data())
def test_linear_s8_wide_features(lib, batch, fin, fout, data):
    """Four output features per input load, and one to three left over."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = base.int8_data(rng, (batch, fin), data.draw(base.data_modes))
    w = base.weights(rng, (fout, fin), data.draw(base.weight_modes))
    b = base.biases(rng, fout, data.draw(base.bias_kinds))
    m, s = _quant(rng, fout, fin, data.draw(shifts_any))
    in_zp, out_zp, act = data.draw(base.zero_points), data.draw(base.zero_points), data.draw(base.act_bounds())
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = cb.linear(x, w, b, cb.Quant(m, s, fout), params)
    assert status == MCU_OK
    base.assert_equal(out, linear_s8(x, w, b, m, s, **params))


@st.composite
def wide_dw_cases(draw):
    kh, kw = draw(st.sampled_from([(3, 3), (3, 3), (3, 3), (1, 3), (5, 5), (3, 1), (2, 4), (1, 1), (9, 8)]))
    s = draw(st.integers(1, 2))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, kh - 2 * pt), 9))
    # rows of 3-wide windows with 8 or more whole windows run in pairs (MCU_S8_WIDE_DW_PAIRS_MIN)
    w = draw(st.one_of(st.integers(max(1, kw - 2 * pl), 12), st.integers(max(1, kw - 2 * pl), 26)))
    c = draw(st.one_of(st.integers(1, 9), st.sampled_from([16, 64])))
    return dict(h=h, w=w, c=c, kh=kh, kw=kw, s=s, pt=pt, pl=pl, in_zp=draw(base.zero_points),
                out_zp=draw(base.zero_points), act=draw(base.act_bounds()), bias=draw(base.bias_kinds),
                shift=draw(shifts_any), data=draw(base.data_modes), wmode=draw(base.weight_modes),
                seed=draw(st.integers(0, 2**32 - 1)), n=draw(st.integers(1, 2)),
                place=draw(st.sampled_from(["apart", "inplace", "overlap"])))


def _dw_inputs(case):
    rng = np.random.default_rng(case["seed"])
    c, kh, kw = case["c"], case["kh"], case["kw"]
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], c), case["data"])
    wt = base.weights(rng, (kh, kw, c), case["wmode"])
    b = base.biases(rng, c, case["bias"])
    m, s = _quant(rng, c, kh * kw, case["shift"])
    return x, wt, b, m, s


@CASES
@given(wide_dw_cases())
def test_depthwise_s8_wide_rows(lib, case):
    """Both depthwise kernels through the row path: apart, in place (same-size shapes), and with the
    output overlapping the input as far as the window contract allows (through the row buffer)."""
    x, wt, b, m, s = _dw_inputs(case)
    c, kh, kw, pt, pl = case["c"], case["kh"], case["kw"], case["pt"], case["pl"]
    inplace = case["place"] == "inplace"
    stride = 1 if inplace else case["s"]
    pb, pr = (kh - 1 - pt, kw - 1 - pl) if inplace else (pt, pl)
    oh = (x.shape[1] + pt + pb - kh) // stride + 1
    ow = (x.shape[2] + pl + pr - kw) // stride + 1
    if inplace and (oh != x.shape[1] or ow != x.shape[2]):
        inplace = False
    params = dict(input=x.shape, output=(x.shape[0], oh, ow, c), ch_mult=1, kernel_h=kh, kernel_w=kw,
                  stride_h=stride, stride_w=stride, pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    expected = depthwise_conv2d_s8(x, wt, b, m, s, **params)
    q = cb.Quant(m, s, c)
    p = cb._fields(cb.DepthwiseConv2dS8Params, params)
    if inplace:
        ring = np.zeros((pt + 1) * x.shape[2] * c, dtype=np.int8)
        ctx = cb.Context(ring.ctypes.data, ring.size)
        fn = lib.mcu_depthwise_conv2d_s8_inplace
        fn.argtypes = [_P] * 6
        data_buf = x.copy()
        status = fn(ctypes.addressof(ctx), ctypes.addressof(p), ctypes.addressof(q.struct),
                    _P(data_buf.ctypes.data), _P(ptr(wt)), _P(ptr(b)))
        assert status == MCU_OK
        base.assert_equal(data_buf, expected)
        return
    if case["place"] == "apart":
        status, out = cb.depthwise_conv2d(x, wt, b, q, params)
        assert status == MCU_OK
        base.assert_equal(out, expected)
        return
    # the output sharing the input's bytes at every extreme the window contract allows
    op = Op("depthwise_conv2d", [Tensor("x", (x.shape[0], c, x.shape[1], x.shape[2]), "int8"),
                                 Tensor("w", (c, 1, kh, kw), "int8", data=wt)],
            [Tensor("y", (x.shape[0], c, oh, ow), "int8")],
            {"stride": (stride, stride), "padding": (pt, pl), "dilation": (1, 1), "groups": c, "ch_mult": 1})
    lib.mcu_depthwise_conv2d_s8.argtypes = [_P] * 7
    lib.mcu_depthwise_conv2d_s8_inplace.argtypes = [_P] * 6
    ring = np.zeros((pt + 1) * x.shape[2] * c + 8, dtype=np.int8)
    ctx = cb.Context(ring.ctypes.data, ring.size)

    def call(xp, yp):
        if xp.value == yp.value:  # the in-place placement runs the ring-buffer variant, as the emitter does
            return lib.mcu_depthwise_conv2d_s8_inplace(ctypes.addressof(ctx), ctypes.addressof(p),
                                                       ctypes.addressof(q.struct), yp, ptr(wt), ptr(b))
        return lib.mcu_depthwise_conv2d_s8(None, ctypes.addressof(p), ctypes.addressof(q.struct), xp, ptr(wt), ptr(b),
                                           yp)
    overlap.check_overlap(call, x, op, expected.size, c)


ARM_GCC = shutil.which("arm-none-eabi-gcc")


@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc is not installed")
@pytest.mark.parametrize("cpu,wide", [("cortex-m3", 1), ("cortex-m0plus", 0), ("cortex-m4", 0), ("cortex-m33", 0),
                                      ("cortex-m55", 0)])
def test_wide_paths_are_chosen_by_core(cpu: str, wide: int, tmp_path: Path) -> None:
    """The Cortex-M3 compiles the MCU_S8_WIDE paths; the M0+ (no SMLAL) keeps its loops, and cores
    with the DSP extension or Helium take their own paths."""
    probe = tmp_path / "probe.c"
    probe.write_text('#include "common/plain_s8.h"\nint mcu_probe_wide = MCU_S8_WIDE;\n')
    flags = ["-mthumb", f"-mcpu={cpu}"]
    if cpu == "cortex-m55":
        flags += ["-mfloat-abi=hard", "-mfpu=auto"]
    out = subprocess.run([ARM_GCC, *flags, "-std=c11", "-O2", "-E", "-dM", f"-I{RT / 'include'}",
                          f"-I{RT / 'kernels'}", str(probe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    m = re.search(r"^#define MCU_S8_WIDE (\d)$", out.stdout, re.M)
    assert m is not None and int(m.group(1)) == wide


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("zp", [-128, 127, 3])
def test_depthwise_s8_wide_pairs(lib, stride: int, pad: int, zp: int) -> None:
    """Rows wide enough for the pixel pairs at both strides (odd and even counts of whole windows), with
    the input at its ends and weights at theirs: the folded offset and the raw lanes at their largest."""
    rng = np.random.default_rng(stride * 10 + pad)
    c, w_in = 5, 23 + stride
    x = base.int8_data(rng, (1, 5, w_in, c), "mixed")
    wt = base.weights(rng, (3, 3, c), "extremes")
    b = base.biases(rng, c, "small")
    m, s = _quant(rng, c, 9, None)
    oh = (5 + 2 * pad - 3) // stride + 1
    ow = (w_in + 2 * pad - 3) // stride + 1
    params = dict(input=x.shape, output=(1, oh, ow, c), ch_mult=1, kernel_h=3, kernel_w=3, stride_h=stride,
                  stride_w=stride, pad_top=pad, pad_left=pad, dilation_h=1, dilation_w=1, input_offset=-zp,
                  output_offset=-5, act_min=-128, act_max=127)
    status, out = cb.depthwise_conv2d(x, wt, b, cb.Quant(m, s, c), params)
    assert status == MCU_OK
    base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m, s, **params))
