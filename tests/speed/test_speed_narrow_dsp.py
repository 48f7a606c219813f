"""mcu_conv2d_packed_s8's path for few taps per pixel (runtime_c/kernels/convolution/conv_narrow_s8_dsp.h):
first layers and narrow pointwise layers with a ReLU-style activation range, bit-exact with the
Python reference.

The path runs when the stream's shifts are all right shifts (the stream's FLAG_RIGHT), the window
has at most 48 taps (a pointwise one fewer than 16: wider ones take the two-pixel loops), the output channels are a multiple of 4 and act_min >= the output offset. Its
requantization drops the sign correction, which is exact only under that last condition, so the
cases put act_min at, just above and far above the output offset (and below it, and output counts
that are not a multiple of 4, where the older path must still answer). The DSP-emulated
host build runs the engine's C twin (modes: one pixel, pointwise runs forward and backward, interior
3x3 windows of 3 channels); the firmware on the simulated Cortex-M33 and Cortex-M4 runs the
assembly on batches of drawn layers.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import overlap
import s8_cases as base
from cbind import MCU_OK
from host_builds import build_emulated_lib, load_bound
from mcu.backends.optimized import tuned
from mcu.device.boards import load_board
from mcu.ir import Op
from mcu.paths import runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8
from mcu.reference.arith import requantize
from packed_cases import packed_firmware_source, packed_params
from repo import requires_qemu

_S32 = (-(2**31), 2**31 - 1)
NARROW_TAPS_MAX = 48  # MCU_NARROW_TAPS_MAX
NARROW_PW_MIN = 16  # MCU_NARROW_PW_MIN: pointwise layers of this many taps or more leave the path


@pytest.fixture(scope="module")
def emulated():
    """cbind_s8.lib() routed to the host build with the DSP paths emulated (the path's C twin)."""
    handle = load_bound(build_emulated_lib())
    original = cb.lib
    cb.lib = lambda: handle
    yield handle
    cb.lib = original


def _taps(k: tuple[int, int], cin: int) -> int:
    return (k[0] * k[1] * cin + 3) & ~3


@st.composite
def narrow_case(draw, device: bool = False) -> dict:
    """One layer: first-layer and pointwise shapes (1 to 40 input channels, 1 to 64 outputs),
    kernels 1x1, 3x3 and others, strides 1 and 2, dilations 1 and 2, padding, data and weights at their ends, biases
    and multipliers at their extremes, shifts over the whole right-shift range, zero points at the
    ends, activation ranges at and around the output offset."""
    shape = draw(st.sampled_from(["first", "pointwise", "other"]))
    if shape == "first":
        cin, k = draw(st.sampled_from([1, 2, 3, 3, 3, 3, 3, 4, 5])), (3, 3)
    elif shape == "pointwise":
        cin, k = draw(st.sampled_from([4, 8, 8, 16, 16, 32, 32, 12, 20, 28, 36, 40, 44, 48, 52, 1, 3, 7, 9])), (1, 1)
    else:
        k = draw(st.sampled_from([(1, 3), (3, 1), (2, 2), (2, 3), (5, 1), (10, 4), (3, 3)]))
        cin = draw(st.integers(1, 40 if k != (10, 4) else 16))  # at most 640 taps: the packed kernel's limit
    cout = draw(st.one_of(st.sampled_from([4, 8, 16] if device else [4, 8, 16, 32, 64]),
                          st.integers(1, 13 if device else 64)))
    stride = draw(st.integers(1, 2)) if shape != "pointwise" else draw(st.sampled_from([1, 1, 2]))
    dh, dw = (1, 1) if shape == "pointwise" else (draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2])))
    eh, ew = dh * (k[0] - 1) + 1, dw * (k[1] - 1) + 1  # the window's extent
    pt, pl = draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2))
    top = 7 if device else 9
    h = draw(st.integers(max(1, eh - 2 * pt), max(top, eh - 2 * pt)))
    w = draw(st.integers(max(1, ew - 2 * pl), max(top, ew - 2 * pl)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind = draw(st.sampled_from(["random", "random", "min", "max", "ends"]))
    w_kind = draw(st.sampled_from(["random", "random", "min", "max", "zero"]))
    xs = (1, h, w, cin)
    x = {"random": lambda: rng.integers(-128, 128, xs), "min": lambda: np.full(xs, -128),
         "max": lambda: np.full(xs, 127), "ends": lambda: rng.choice([-128, 127], xs)}[x_kind]().astype(np.int8)
    ws = (cout, k[0], k[1], cin)
    wt = (rng.integers(-127, 128, ws) if w_kind == "random"
          else np.full(ws, {"min": -127, "max": 127, "zero": 0}[w_kind])).astype(np.int8)
    # biases near 0 (with zero weights: accumulators just below 0, where the sign correction matters)
    b = np.array(draw(st.lists(st.sampled_from(_S32) | st.integers(-(2**20), 2**20) | st.integers(-3, 3),
                               min_size=cout, max_size=cout)), dtype=np.int32)
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(2**30, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    sh = np.array(draw(st.lists(st.sampled_from([-1, -23]) | st.integers(-23, -1), min_size=cout, max_size=cout)),
                  dtype=np.int64)
    in_zp = draw(base.zero_points)
    out_zp = draw(base.zero_points)
    act_kind = draw(st.sampled_from(["at", "at", "above", "full_relu", "below", "just_below"]))
    if act_kind == "at":  # a ReLU folded into the range: act_min == the output offset
        act = (out_zp, draw(st.sampled_from([127, 127, max(out_zp, 100), out_zp])))
    elif act_kind == "above":
        lo = draw(st.integers(out_zp, 127))
        act = (lo, draw(st.integers(lo, 127)))
    elif act_kind == "full_relu":  # the whole int8 range with the offset at -128: the STRB stores
        out_zp, act = -128, (-128, 127)
    elif act_kind == "just_below":  # the older path, where dropping the correction would show
        out_zp = max(out_zp, -127)
        act = (out_zp - draw(st.integers(1, min(4, out_zp + 128))), 127)
    else:  # act_min below the output offset: the older path
        lo = draw(st.integers(-128, out_zp))
        act = (lo, draw(st.integers(max(lo, out_zp), 127)))
    oh, ow = (h + 2 * pt - eh) // stride + 1, (w + 2 * pl - ew) // stride + 1
    params = packed_params(xs, (1, oh, ow, cout), k[0], k[1], sh=stride, sw=stride, pt=pt, pl=pl, dh=dh, dw=dw,
                     in_zp=in_zp, out_zp=out_zp, act=act)
    stream = tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp)
    assert stream[1] & tuned.FLAG_RIGHT
    pointwise_wide = k == (1, 1) and _taps(k, cin) >= NARROW_PW_MIN  # the two-pixel loops take these
    narrow = _taps(k, cin) <= NARROW_TAPS_MAX and not pointwise_wide and cout % 4 == 0 and act[0] >= out_zp
    return dict(x=x, wt=wt, b=b, m=m, s=sh, w=stream, params=params, narrow=narrow,
                expected=conv2d_s8(x, wt, b, m, sh, **params))


@settings(parent=base.EXACT, max_examples=120)
@given(narrow_case())
def test_narrow_matches_reference_emulated(emulated, case) -> None:
    status, out = cb.conv2d_packed(case["x"], case["wt"], None, cb.Quant(case["m"], case["s"], len(case["m"])),
                                   case["params"], stream=case["w"])
    assert status == MCU_OK
    base.assert_equal(out, case["expected"])


def test_the_cases_reach_the_path() -> None:
    """Most drawn layers take the narrow path, some the older one (the condition's both sides)."""
    from hypothesis import find

    find(narrow_case(), lambda c: c["narrow"] and c["params"]["kernel_h"] == 3 and c["params"]["input"][3] == 3
         and c["params"]["output"][3] % 4 == 0 and c["params"]["pad_top"] == 1, settings=settings(database=None, max_examples=2000))
    find(narrow_case(), lambda c: c["narrow"] and c["params"]["kernel_h"] == 1 and c["params"]["input"][3] % 4 == 0
         and c["params"]["output"][3] % 4 == 0 and c["params"]["act_min"] > -128, settings=settings(database=None, max_examples=2000))
    find(narrow_case(), lambda c: not c["narrow"], settings=settings(database=None, max_examples=2000))


def test_relu_requantization_without_the_sign_correction() -> None:
    """The claim the path rests on, over the whole right-shift range: for acc >= 0 the packed
    requantization without the sign correction is the reference's; for acc < 0 both are at most
    the output offset, so an activation range with act_min >= the offset makes them equal."""
    rng = np.random.default_rng(5)
    for _ in range(4000):
        r = int(rng.integers(1, 24))
        m = int(rng.choice([0, 1, 2**30, 2**31 - 1, int(rng.integers(0, 2**31))]))
        acc = int(rng.choice([-(2**31), -1, 0, 1, 2**31 - 1, int(rng.integers(-(2**31), 2**31))]))
        off = int(rng.integers(-128, 128))
        k = 2**30 + 2 ** (r + 30) + off * 2 ** (r + 31)  # K as tuned.pack_layer folds it
        plain = (acc * m + k) >> (31 + r)
        expected = int(requantize(np.array([acc], dtype=np.int64), m, -r)[0]) + off
        if acc >= 0:
            assert max(-128, min(127, plain)) == max(-128, min(127, expected)), (acc, m, r, off)
        else:
            assert plain <= off and expected <= off, (acc, m, r, off)


@pytest.mark.parametrize("dilation", [(1, 1), (2, 1), (1, 2), (2, 2)])
@pytest.mark.parametrize("stride", [1, 2])
def test_first_layer_dilations_and_borders(emulated, dilation, stride: int) -> None:
    """3x3 windows of 3 channels (the engine's 3x3x3 column and its border patch): dilated rows
    take the row step, dilated columns the general column; every border of a padded image."""
    rng = np.random.default_rng(dilation[0] * 10 + dilation[1] + stride)
    dh, dw = dilation
    h, w, pad = 11, 10, 2
    x = rng.integers(-128, 128, (1, h, w, 3)).astype(np.int8)
    wt = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    b = rng.integers(-5000, 5000, 8).astype(np.int32)
    m, s = rng.integers(2**30, 2**31 - 1, 8), rng.integers(-10, -5, 8)
    oh, ow = (h + 2 * pad - 2 * dh - 1) // stride + 1, (w + 2 * pad - 2 * dw - 1) // stride + 1
    params = packed_params(x.shape, (1, oh, ow, 8), 3, 3, sh=stride, sw=stride, pt=pad, pl=pad, dh=dh, dw=dw, in_zp=-3,
                     out_zp=-20, act=(-20, 127))
    status, out = cb.conv2d_packed(x, wt, b, cb.Quant(m, s, 8), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, wt, b, m, s, **params))


@pytest.mark.parametrize("act_min", [-6, -5])
def test_accumulators_just_below_zero(emulated, act_min: int) -> None:
    """Zero weights and biases -1 and -2 (accumulators just below 0, multiplier 2^31 - 1, R = 1):
    the sign correction makes the requantized value -1, its absence 0. With act_min == the output
    offset (-5) both clamp to -5 and the narrow path answers; one below it the output is -6, which
    only the corrected requantization (the older path) gives."""
    x = np.full((1, 3, 3, 8), 5, dtype=np.int8)
    wt = np.zeros((4, 1, 1, 8), dtype=np.int8)
    b = np.array([-1, -2, 0, 3], dtype=np.int32)
    m, s = np.full(4, 2**31 - 1), np.full(4, -1)
    params = packed_params(x.shape, (1, 3, 3, 4), 1, 1, in_zp=5, out_zp=-5, act=(act_min, 127))
    status, out = cb.conv2d_packed(x, wt, b, cb.Quant(m, s, 4), params)
    assert status == MCU_OK
    expected = conv2d_s8(x, wt, b, m, s, **params)
    assert expected[0, 0, 0, :2].tolist() == [act_min, act_min]
    base.assert_equal(out, expected)


@pytest.mark.parametrize("case", [(1, 8, 6, 6, 16), (1, 16, 4, 5, 32), (2, 32, 3, 3, 32), (1, 8, 5, 5, 4),
                                  (1, 4, 3, 7, 8)])
@pytest.mark.parametrize("act", [(-128, 127), (-128, 100), (-50, 127)])
def test_narrow_pointwise_both_directions(emulated, case, act) -> None:
    """The pixel-buffer contract of a 1x1 layer on the narrow path (the engine's pointwise runs
    forward and backward), at every delta the contract allows, and the reference's bits."""
    n, c, h, w, oc = case
    rng = np.random.default_rng(c * 100 + oc)
    out_zp = act[0]
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (oc, 1, 1, c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = overlap.random_quant(oc, rng)
    raw = packed_params((n, h, w, c), (n, h, w, oc), 1, 1, in_zp=-7, out_zp=out_zp, act=act)
    packed = np.ascontiguousarray(tuned.pack_layer(wt.reshape(oc, c), bias, q.m, q.s, out_zp))
    status, out = cb.conv2d_packed(x, wt, None, q, raw, stream=packed)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, wt, bias, q.m, q.s, **raw))
    params = cb._fields(cb.Conv2dS8Params, raw)
    op = Op("conv2d", [overlap.tensor("x", (n, c, h, w), "int8"), overlap.tensor("w", (oc, c, 1, 1), "int8", wt)],
            [overlap.tensor("y", (n, oc, h, w), "int8")], {"stride": (1, 1), "padding": (0, 0),
                                                               "dilation": (1, 1), "groups": 1})

    def call(xp, yp):
        return emulated.mcu_conv2d_packed_s8(None, ctypes.byref(params), xp, packed.ctypes.data, yp)
    overlap.check_overlap(call, x, op, n * h * w * oc, oc)


# --- on the simulated cores ------------------------------------------------------------------------------


def _run_on_core(tmp: Path, board_name: str, cases: list[dict]) -> None:
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    assert max(c["expected"].size for c in cases) <= 4096
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases))
    board = load_board(board_name)
    rt = runtime_dir()
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [rt / "include"], tmp / "out")
    result = run_qemu(board, fw.elf, timeout_s=180)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@given(cases=st.lists(narrow_case(device=True), min_size=30, max_size=30))
def test_narrow_on_core(tmp_path_factory, board_name: str, cases: list[dict]) -> None:
    """Batches of 30 drawn layers per firmware on the core: the engine's assembly (one pixel, the
    pointwise column, the 3x3x3 column from unaligned loads, the unrolled steps entered by TBB,
    the requantization without the sign correction, the STRB and clamped stores)."""
    _run_on_core(tmp_path_factory.mktemp("narrow"), board_name, cases)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
def test_narrow_fixed_layers_on_core(tmp_path: Path, board_name: str) -> None:
    """The shapes the path was made for (MobileNetV1's first and 8/16/32-channel pointwise layers,
    ResNet-8's and DS-CNN's first), small images, every tap count from 4 to 48, at the data's ends."""
    rng = np.random.default_rng(11)
    cases = []
    shapes = [(3, (3, 3), 8, 2, 1), (3, (3, 3), 16, 1, 1), (8, (1, 1), 16, 1, 0), (16, (1, 1), 32, 1, 0),
              (32, (1, 1), 32, 1, 0), (32, (1, 1), 64, 1, 0), (1, (10, 4), 16, 2, 2)] + [
                  (t, (1, 1), 8, 1, 0) for t in range(4, 49, 4)]
    for i, (cin, k, cout, stride, pad) in enumerate(shapes):
        h = w = 7
        x = (rng.integers(-128, 128, (1, h, w, cin)) if i % 3 else rng.choice([-128, 127], (1, h, w, cin)))
        x = x.astype(np.int8)
        wt = rng.integers(-127, 128, (cout, k[0], k[1], cin)).astype(np.int8)
        b = rng.integers(-(2**16), 2**16, cout).astype(np.int32)
        m = rng.integers(2**30, 2**31 - 1, cout)
        s = rng.integers(-12, -5, cout)
        out_zp = -128 if i % 2 else int(rng.integers(-128, 0))
        act = (-128, 127) if out_zp == -128 and i % 4 == 1 else (out_zp, int(rng.integers(out_zp, 128)))
        oh, ow = (h + 2 * pad - k[0]) // stride + 1, (w + 2 * pad - k[1]) // stride + 1
        params = packed_params(x.shape, (1, oh, ow, cout), k[0], k[1], sh=stride, sw=stride, pt=pad, pl=pad,
                         in_zp=int(rng.choice([-128, 127, 0])), out_zp=out_zp, act=act)
        cases.append(dict(x=x, w=tuned.pack_layer(wt.reshape(cout, -1), b, m, s, out_zp), params=params,
                          expected=conv2d_s8(x, wt, b, m, s, **params)))
    _run_on_core(tmp_path, board_name, cases)
