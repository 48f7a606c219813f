"""mcu_depthwise_conv2d_s8_planes (the stride-1 plane lines with constants packed by
mcu/backends/optimized/dwpack.py) on the emulated DSP build, bit-exact with the Python reference.

The emulated build's planes hold 512 bytes (MCU_DWPL_BYTES off the Arm cores), so its one-band images are lines
of three pixels (up to three lines) and of six (up to four lines); the Arm builds' 6 x 6 images run in QEMU
through the models (tests/quantize)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import s8_cases as base
from cbind import MCU_ERR_INVALID_ARG, MCU_ERR_UNSUPPORTED, MCU_OK
from host_builds import build_emulated_lib, load_bound
from mcu.backends.optimized import dwpack
from mcu.reference.conv import depthwise_conv2d_s8

_P = ctypes.c_void_p


@pytest.fixture(scope="module")
def emulated():
    return load_bound(build_emulated_lib())


def _run(lib, x, words, params):
    p = cb._fields(cb.DepthwiseConv2dS8Params, params)
    fn = lib.mcu_depthwise_conv2d_s8_planes
    fn.argtypes = [_P] * 3
    out = x.copy()
    packed = np.ascontiguousarray(words, dtype=np.int32)
    return fn(ctypes.addressof(p), _P(out.ctypes.data), _P(packed.ctypes.data)), out


def _params(x, pt, pl, in_zp, out_zp, act):
    return dict(input=x.shape, output=x.shape, ch_mult=1, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1,
                pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1, input_offset=-in_zp, output_offset=out_zp,
                act_min=act[0], act_max=act[1])


def _check(lib, x, wt, b, m, s, params):
    """Packed as the backend packs them (wt: (3, 3, c)), run, against the reference."""
    h, w = x.shape[1:3]
    words = dwpack.pack(wt.transpose(2, 0, 1), b.astype(np.int64), m, s, params["output_offset"],
                        dwpack.lines_of(h, w)[0], (params["act_min"], params["act_max"]))
    status, out = _run(lib, x, words, params)
    assert status == MCU_OK
    base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m, s, **params))


@st.composite
def one_band_cases(draw):
    """Lines of three (3 x 1 .. 3 x 3, either orientation) or six (6 x 1 .. 6 x 4): the one-step lines of one band;
    lines of six unclamped (a ReLU range among them), lines of three with any clamp."""
    length = draw(st.sampled_from([3, 6]))
    lines = draw(st.integers(1, 3 if length == 3 else 4))
    h, w = (length, lines) if draw(st.booleans()) else (lines, length)
    out_zp = draw(st.one_of(base.zero_points, st.just(-128)))
    act = draw(base.act_bounds()) if length == 3 else (-128, 127)
    return dict(n=draw(st.integers(1, 2)), h=h, w=w, c=4 * draw(st.integers(1, 4)), pt=draw(st.integers(0, 2)),
                pl=draw(st.integers(0, 2)), in_zp=draw(base.zero_points), out_zp=out_zp, act=act,
                bias=draw(base.bias_kinds), shift=draw(base.conv_shift_centres), data=draw(base.data_modes),
                wmode=draw(base.weight_modes), seed=draw(st.integers(0, 2**32 - 1)))


@settings(base.EXACT, max_examples=60)
@given(one_band_cases())
def test_packed_planes_match_the_reference(emulated, case):
    rng = np.random.default_rng(case["seed"])
    c = case["c"]
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], c), case["data"])
    wt = base.weights(rng, (3, 3, c), case["wmode"])
    b = base.biases(rng, c, case["bias"])
    m, s = base.per_channel(rng, c, base.shift_for(case["shift"], 9), "varied")
    b = np.zeros(c, dtype=np.int32) if b is None else b
    if not dwpack.quant_fits(b.astype(np.int64), m, s, case["out_zp"]):
        return  # the packer keeps such a layer on the portable kernel
    _check(emulated, x, wt, b, m, s, _params(x, case["pt"], case["pl"], case["in_zp"], case["out_zp"], case["act"]))


@pytest.mark.parametrize("shift,out_zp", [(-24, 127), (-24, -128), (-1, -128), (-1, 127), (-9, 5)])
@pytest.mark.parametrize("hw", [(3, 3), (4, 6), (6, 2)])
def test_packed_planes_at_the_bounds(emulated, shift, out_zp, hw):
    """The largest bias the packer takes (and one past it refused by it), extreme inputs and weights, the widest
    shifts and output offsets."""
    c = 8
    rng = np.random.default_rng(-shift * 1000 + out_zp + 128)
    x = rng.choice(np.array([-128, 127], dtype=np.int8), size=(1, *hw, c))
    wt = rng.choice(np.array([-128, 127], dtype=np.int8), size=(3, 3, c))
    m = np.array([2**31 - 1, 2**30, 2**31 - 1, 0, 2**31 - 1, 2**30 + 12345, 2**31 - 1, 2**31 - 1], dtype=np.int32)
    s = np.full(c, shift, dtype=np.int32)
    edge = min(2**30 - 1, 2**31 - 2 - (abs(2 * out_zp + 1) << (-shift - 1))) - dwpack.WINDOW_MAX
    b = np.array([edge, -edge, edge, -edge, 3, -3, edge, 0], dtype=np.int64)
    assert dwpack.quant_fits(b, m, s, out_zp) and not dwpack.quant_fits(b + 1, m, s, out_zp)
    for in_zp in (-128, 127):
        _check(emulated, x, wt, b.astype(np.int32), m, s, _params(x, 1, 1, in_zp, out_zp, (-128, 127)))


def test_packed_planes_refuse_other_layers(emulated):
    """Words packed for another layer (channels, output offset, a bad magic) and layers the one-step lines do not
    serve (lines of five, six clamped, a 5 x 5 window) are refused, the data untouched."""
    c = 8
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 3, 6, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (3, 3, c), dtype=np.int8)
    m, s = np.full(c, 2**30, dtype=np.int32), np.full(c, -7, dtype=np.int32)
    words = dwpack.pack(wt.transpose(2, 0, 1), np.zeros(c, dtype=np.int64), m, s, 3, False, (-128, 127))
    params = _params(x, 1, 1, 0, 3, (-128, 127))
    assert _run(emulated, x, words, params)[0] == MCU_OK
    bad_magic, other_c = words.copy(), words.copy()
    bad_magic[0] ^= 1
    other_c[1] = 4
    for bad, p in ((bad_magic, params), (other_c, params), (words, dict(params, output_offset=4)),
                   (words, dict(params, kernel_h=5, kernel_w=5))):
        status, out = _run(emulated, x, bad, p)
        assert status == MCU_ERR_INVALID_ARG and np.array_equal(out, x)
    x5 = x[:, :, :5].copy()
    for xs, p in ((x5, _params(x5, 1, 1, 0, 3, (-128, 127))), (x, _params(x, 1, 1, 0, 3, (-100, 127)))):
        status, out = _run(emulated, xs, words, p)
        assert status == MCU_ERR_UNSUPPORTED and np.array_equal(out, xs)


@pytest.mark.parametrize("r", [dwpack.SCALE - 8, dwpack.SCALE - 2, dwpack.SCALE - 1, dwpack.SCALE - 9])
@pytest.mark.parametrize("hw", [(3, 3), (4, 6)])
def test_packed_planes_scaled_form_at_its_bounds(emulated, r, hw):
    """The scaled form (a ReLU folded into the range) at both ends of its shifts and one past either, where the
    packer takes the doubled form instead; the largest bias it scales and one past it; extreme inputs and weights.
    Every one bit-exact, the form as the bounds say."""
    c = 8
    rng = np.random.default_rng(r * 10 + hw[0])
    x = rng.choice(np.array([-128, 127], dtype=np.int8), size=(1, *hw, c))
    wt = rng.choice(np.array([-128, 127], dtype=np.int8), size=(3, 3, c))
    m = np.array([2**31 - 1, 2**30, 2**31 - 1, 0, 2**31 - 1, 2**30 + 12345, 2**31 - 1, 2**31 - 1], dtype=np.int32)
    s = np.full(c, -r, dtype=np.int32)
    fits = dwpack.SCALE - 8 <= r <= dwpack.SCALE - 2
    edge = (2**31 >> (dwpack.SCALE - r)) - 1 - dwpack.WINDOW_MAX if fits else 2**20
    relu = (-128, 127)
    for b in (np.array([edge, -edge, edge, -edge, 3, -3, edge, 0], dtype=np.int64),
              np.array([edge + 1, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64)):
        scaled = fits and b[0] == edge
        assert dwpack.scaled_fits(b, s, -128, relu) == scaled
        assert not dwpack.scaled_fits(b, s, -127, relu) and not dwpack.scaled_fits(b, s, -128, (-128, 126))
        words = dwpack.pack(wt.transpose(2, 0, 1), b, m, s, -128, False, relu)
        assert (words[0] == np.int32(dwpack.MAGIC_SCALED)) == scaled
        for in_zp in (-128, 127):
            _check(emulated, x, wt, b.astype(np.int32), m, s, _params(x, 1, 1, in_zp, -128, relu))


def test_packed_planes_scaled_words_refused_off_a_relu(emulated):
    """Scaled words name a ReLU folded into the range: another output offset or a clamped range is refused."""
    c = 4
    x = np.arange(-60, -60 + 4 * 6 * c, dtype=np.int8).reshape(1, 4, 6, c)
    wt = np.full((3, 3, c), 3, dtype=np.int8)
    m, s = np.full(c, 2**30, dtype=np.int32), np.full(c, -8, dtype=np.int32)
    words = dwpack.pack(wt.transpose(2, 0, 1), np.zeros(c, dtype=np.int64), m, s, -128, False, (-128, 127))
    assert words[0] == np.int32(dwpack.MAGIC_SCALED)
    params = _params(x, 1, 1, 0, -128, (-128, 127))
    assert _run(emulated, x, words, params)[0] == MCU_OK
    for bad, p in ((words, dict(params, act_min=-127)), (words, dict(params, act_max=100))):
        status, out = _run(emulated, x, bad, p)
        assert status == MCU_ERR_INVALID_ARG and np.array_equal(out, x)
