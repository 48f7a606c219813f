"""mcu_conv2d_packed_s8, the tuned backend's kernel (mcu/backends/optimized/tuned.py), bit-exact with the
Python reference.

Three builds run it: the host extension (plain C), the host library with the DSP paths emulated
(tests/kernels/test_kernels_s8_opt.py; the shortened right-shift requantization runs there), and the
firmware on the simulated Cortex-M33 and Cortex-M4, where the LDM/SMLAD inline assembly and the
QADD run natively (a batch of random cases compiled into one firmware). Every reference model runs
it on mps2-an505 and mps2-an386 in tests/quantize/test_int8.py.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import overlap
import s8_cases as base
from cbind import MCU_OK
from mcu.backends.optimized import tuned
from mcu.device.boards import load_board
from mcu.ir import Op
from mcu.paths import runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8
from packed_cases import firmware_cases, lib, packed_firmware_source, packed_params  # noqa: F401 (lib: the fixture)
from repo import requires_qemu

_P = ctypes.c_void_p


def test_pack_layout() -> None:
    """Block of 4 channels, tap pairs from groups reordered 0, 2, 1, 3, zero padding on both axes;
    biases before and requantization constants after each block's weights."""
    w = np.arange(1, 5 * 6 + 1, dtype=np.int8).reshape(5, 6)  # 5 channels, 6 taps -> 8 channels, 8 taps
    w[0, 0] = -3
    p = tuned.pack_weights(w)
    assert p.dtype == np.int32 and p.shape == (2, 4 * 4)
    blocks = p.view(np.int16).reshape(2, 4, 4, 2)  # block, pair, channel, lane (little-endian halves)
    assert blocks[0, 0, 0].tolist() == [w[0, 0], w[0, 2]]
    assert blocks[0, 1, 2].tolist() == [w[2, 1], w[2, 3]]
    assert blocks[0, 2, 3].tolist() == [w[3, 4], 0]  # taps 4, 5 then padding: pairs (4, 6) and (5, 7)
    assert blocks[0, 3, 3].tolist() == [w[3, 5], 0]
    assert np.all(blocks[1, :, 1:] == 0)  # channels 5..7 are padding
    stream = tuned.pack_layer(w, np.arange(5) - 2, np.full(5, 2**30 + 7), np.array([-1, -2, -3, -23, 4]), -5)
    assert stream.dtype == np.int32 and stream.size == 4 + 2 * (4 + 8 * 2 + 16)
    # shift 4 is a left shift: not the fast path; the output offset -5 in the flags' second byte
    assert stream[:4].tolist() == [tuned.MAGIC, 0xFB00, 5, 8]
    first, second = stream[4:].reshape(2, -1)
    assert first[:4].tolist() == [-2, -1, 0, 1] and second[:4].tolist() == [2, 0, 0, 0]
    assert np.array_equal(first[4:20], p[0]) and np.array_equal(second[4:20], p[1])
    assert first[20:].reshape(4, 4).tolist() == [[0, 0, 2**30 + 7, s] for s in (-1, -2, -3, -23)]
    assert second[20:].reshape(4, 4).tolist() == [[0, 0, 2**30 + 7, 4]] + [[0, 0, 0, -1]] * 3
    # every shift a right shift R: (K low, K high, multiplier, R - 1), K with the output offset folded in
    right = tuned.pack_layer(w, None, np.full(5, 2**30), np.array([-1, -2, -3, -23, -7]), 100)
    assert right[1] == tuned.FLAG_RIGHT | (100 << 8)
    rq = right[4:].reshape(2, -1)[:, 20:].reshape(8, 4).astype(np.int64)
    for ch, r in enumerate([1, 2, 3, 23, 7]):
        k = 2**30 + 2 ** (r + 30) + 100 * 2 ** (r + 31)
        assert (rq[ch, 0] & 0xFFFFFFFF, rq[ch, 1]) == (k & 0xFFFFFFFF, k >> 32) and rq[ch, 2:].tolist() == [2**30, r - 1]
    with pytest.raises(ValueError, match="zero-point"):
        tuned.pack_layer(w, None, np.full(5, 2**30), np.full(5, -7), 128)
    assert tuned.pack_layer(w, None, np.full(5, 2**30), np.full(5, -7), group=True)[1] == tuned.FLAG_RIGHT | tuned.FLAG_GROUP


def test_pack_bytes_layout() -> None:
    """The byte stream: per column word (taps 0, 2, 1, 3 per group) the words of channels (0, 1) and (2, 3),
    each int16 half 256 wB + wA; biases and requantization words as the int16 stream's; refused where the
    halves or B's sums would not be exact."""
    w = np.arange(-30, 5 * 6 - 30, dtype=np.int8).reshape(5, 6)  # 5 channels, 6 taps -> 8 channels, 8 taps
    p = tuned.pack_weights_bytes(w)
    assert p.dtype == np.int32 and p.shape == (2, 8)
    halves = p.view(np.int16).reshape(2, 4, 2, 2).astype(np.int64)  # block, column word, pair, lane
    a, b = halves & 0xFF, halves >> 8
    a = np.where(a >= 128, a - 256, a)
    b = b + (halves & 0xFF >= 128)  # the low byte's sign borrowed from the high one
    order = [0, 2, 1, 3, 4, 6, 5, 7]
    full = np.zeros((8, 8), dtype=np.int64)
    full[:5, :6] = w
    for blk in range(2):
        for j in range(4):
            for pair in range(2):
                for lane in range(2):
                    t, ca = order[2 * j + lane], 4 * blk + 2 * pair
                    assert (a[blk, j, pair, lane], b[blk, j, pair, lane]) == (full[ca, t], full[ca + 1, t])
    stream = tuned.pack_layer_bytes(w, np.arange(5) - 2, np.full(5, 2**30), np.full(5, -3), -5, group=True)
    assert stream.size == 4 + 2 * (4 + 8 + 2 + 16)
    assert stream[:4].tolist() == [tuned.MAGIC, tuned.FLAG_BYTES | tuned.FLAG_RIGHT | tuned.FLAG_GROUP | 0xFB00, 5, 8]
    first, second = stream[4:].reshape(2, -1)
    # the accumulators' start (biases 0, 0, 2, 2), the weights, biases 1 and 3, the requantization words
    assert first[:4].tolist() == [-2, -2, 0, 0] and np.array_equal(first[4:12], p[0]) and first[12:14].tolist() == [-1, 1]
    assert second[:4].tolist() == [2, 2, 0, 0] and second[12:14].tolist() == [0, 0]
    assert np.array_equal(first[14:], tuned.pack_layer(w, None, np.full(5, 2**30), np.full(5, -3), -5)[4 + 20:4 + 36])
    corner = np.array([[-1], [-128]], dtype=np.int8)  # 256 (-128) - 1 is below int16
    assert not tuned.bytes_fit(corner) and tuned.bytes_fit(corner[::-1]) and tuned.bytes_fit(-corner[::-1] - 1)
    assert tuned.bytes_fit(np.array([[0] * 257, [-128] * 257])) and not tuned.bytes_fit(np.array([[0] * 258, [-128] * 258]))
    assert tuned.pack_layer_bytes(corner, None, np.full(2, 2**30), np.full(2, -3)) is None
    # the bound at the layer's own input offset: |x| at most 128 with offset 0, 255 with 128
    wide = np.array([[0] * 500, [-128] * 500])
    assert tuned.bytes_fit(wide, 0) and not tuned.bytes_fit(wide, 128) and not tuned.bytes_fit(wide)


def test_pack_scaled_layout() -> None:
    """A scaled stream: weights and biases times 2^e (e = 1 + SCALED_SHIFT - R), the four channels' (multiplier, C)
    first in the block's 16 requantization words; None for shifts outside [SCALED_SHIFT - 7, SCALED_SHIFT - 1] or an
    accumulator times 2^e outside int32 (the bound at the layer's own input offset)."""
    w = np.array([[1, -2, 3, -4, 5, 6, 7, 8]] * 3, dtype=np.int8)
    sh = np.array([-13, -7, -10])
    stream = tuned.pack_layer_scaled(w, np.array([5, -6, 7]), np.array([2**30, 2**31 - 1, 0]), sh, -9, group=True)
    assert stream[:4].tolist() == [tuned.MAGIC, tuned.FLAG_RIGHT | tuned.FLAG_SCALED | tuned.FLAG_GROUP | (0xF7 << 8), 3,
                                   8]
    block = stream[4:]
    e = np.array([2, 8, 5])
    assert block[:4].tolist() == [5 * 4, -6 * 256, 7 * 32, 0]
    assert np.array_equal(block[4:20], tuned.pack_weights(w.astype(np.int64) * (1 << e[:, None]))[0])
    c = [2 ** (k - 2) + 2**13 - 9 * 2**14 for k in (2, 8, 5, 2)]
    assert block[20:].tolist() == [2**30, c[0], 2**31 - 1, c[1], 0, c[2], 0, c[3]] + [0] * 8
    assert tuned.pack_layer_scaled(w, None, np.full(3, 2**30), np.array([-13, -6, -7])) is None
    assert tuned.pack_layer_scaled(w, None, np.full(3, 2**30), np.array([-14, -7, -7])) is None
    # the bound: |x| sum |w| + |bias| times 2^e below 2^31, at the layer's own input offset (|x| <= 128 at offset 0)
    row = np.full((1, 64), -128, dtype=np.int8)
    edge = (2**31 - 1) // 256 - 128 * 128 * 64
    assert tuned.scaled_fit(row, np.array([edge]), np.array([-7]), 0) is not None
    assert tuned.scaled_fit(row, np.array([edge + 1]), np.array([-7]), 0) is None
    assert tuned.scaled_fit(row, np.array([edge]), np.array([-7]), 128) is None


@st.composite
def _scaled_case(draw) -> dict:
    """A flat pointwise layer for a scaled stream (pack_layer_scaled): 8 or 16 to 304 channels in, a multiple of 4
    out (up to 13 drawn: the C path serves partial blocks), 1 to 12 pixels, right shifts over the layout's range,
    multipliers at their extremes, activation ranges from the output offset or above; a third of the layers at the
    accumulator's bound (inputs at the end with the largest |x + offset|, weights of one sign, a bias filling the
    room that 2^e leaves), a third with accumulators at and around the ties of both roundings."""
    cin = draw(st.sampled_from([8, 16, 20, 36, 64, 100, 128, 256, 304]))
    cout = draw(st.integers(1, 13))
    pixels = draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    in_zp = draw(base.zero_points)
    sh = -np.array(draw(st.lists(st.sampled_from([tuned.SCALED_SHIFT - 7, tuned.SCALED_SHIFT - 1])
                                 | st.integers(tuned.SCALED_SHIFT - 7, tuned.SCALED_SHIFT - 1),
                                 min_size=cout, max_size=cout)), dtype=np.int64)
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(2**30, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    act = draw(st.sampled_from([(-128, 127), (0, 127), (-100, 50), (-20, -5), (127, 127)]))
    out_zp = draw(st.integers(-128, act[0]))
    kind = draw(st.sampled_from(["bound", "ties", "random"]))
    if kind == "ties":  # accumulators (the biases: zero weights) at and around both roundings' ties, multiplier 2^30
        x = rng.integers(-128, 128, (1, 1, pixels, cin)).astype(np.int8)
        wt = np.zeros((cout, cin), dtype=np.int64)
        r = -sh
        k = np.array(draw(st.lists(st.integers(-100, 100), min_size=cout, max_size=cout)))
        delta = np.array(draw(st.lists(st.integers(-2, 1), min_size=cout, max_size=cout)))
        b = k * np.left_shift(1, r + 1) + np.left_shift(1, r) + delta
        m[:] = 2**30
    elif kind == "bound":  # every product of one sign and its largest size
        lo = abs(-128 - in_zp) >= abs(127 - in_zp)
        x = np.full((1, 1, pixels, cin), -128 if lo else 127, dtype=np.int8)
        wt = np.full((cout, cin), draw(st.sampled_from([127, -128])), dtype=np.int64)
        room = (2**31 - 1) // (1 << (1 + tuned.SCALED_SHIFT + sh)) - tuned.x_max(-in_zp) * np.abs(wt).sum(axis=1)
        b = np.where(room >= 0, room, 0) * draw(st.sampled_from([-1, 1]))
        if np.any(room < 0):
            sh = np.full(cout, -tuned.SCALED_SHIFT + 1, dtype=np.int64)
            b = np.zeros(cout, dtype=np.int64)
    else:
        x = rng.integers(-128, 128, (1, 1, pixels, cin)).astype(np.int8)
        wt = rng.integers(-128, 128, (cout, cin))
        b = rng.integers(-(2**20), 2**20, cout)
    wt, b = wt.astype(np.int8), b.astype(np.int32)
    params = packed_params(x.shape, (1, 1, pixels, cout), 1, 1, in_zp=in_zp, out_zp=out_zp, act=act)
    stream = tuned.pack_layer_scaled(wt, b, m, sh, out_zp, group=draw(st.booleans()), input_offset=-in_zp)
    assert stream is not None and stream[1] & tuned.FLAG_SCALED
    return dict(x=x, w=stream, params=params, expected=conv2d_s8(x, wt.reshape(cout, 1, 1, cin), b, m, sh, **params))


@base.EXACT
@given(_scaled_case())
def test_scaled_stream_matches_reference(lib, case) -> None:
    """The scaled stream's requantization (SMMLA's high word plus C, shifted by SCALED_SHIFT) bit-exact with the
    reference's rounding doubling multiply and rounding shift."""
    status, out = cb.conv2d_packed(case["x"], None, None, None, case["params"], stream=case["w"])
    assert status == MCU_OK
    base.assert_equal(out, case["expected"])


def test_scaled_stream_refuses_a_range_below_the_offset(lib) -> None:
    """A scaled stream requantizes in the ReLU tails' form: a layer whose range starts below its output offset
    is refused."""
    x = np.zeros((1, 1, 2, 16), dtype=np.int8)
    stream = tuned.pack_layer_scaled(np.ones((4, 16), dtype=np.int8), None, np.full(4, 2**30), np.full(4, -9), -5)
    params = packed_params(x.shape, (1, 1, 2, 4), 1, 1, out_zp=-5, act=(-6, 127))
    assert cb.conv2d_packed(x, None, None, None, params, stream=stream)[0] != MCU_OK
    params = packed_params(x.shape, (1, 1, 2, 4), 1, 1, out_zp=-5, act=(-5, 127))
    assert cb.conv2d_packed(x, None, None, None, params, stream=stream)[0] == MCU_OK


@st.composite
def _bytes_case(draw, batch_max: int = 3) -> dict:
    """One fully connected layer (a 1x1 layer over batch rows) for the byte stream: inputs of 1 to 640
    features (the column's passes entered at every 4 taps), 1 to 13 outputs, weights random over all of
    int8 or at the layout's edges (the odd channels' sums of |w| up to 2^23 over the largest |x| the input
    offset allows, reached by inputs at that end; -128
    with an even partner of either sign the layout allows), extremes of inputs, offsets, biases,
    multipliers, any shift (the C requantization) or right shifts (the core's), the activation range."""
    cin = draw(st.one_of(st.integers(1, 12), st.sampled_from([16, 20, 60, 64, 100, 128, 255, 256, 257, 640])))
    cout = draw(st.integers(1, 13))
    batch = draw(st.integers(1, batch_max))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind = draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (batch, 1, 1, cin)) if x_kind == "random"
         else np.full((batch, 1, 1, cin), -128 if x_kind == "min" else 127)).astype(np.int8)
    in_zp, out_zp = draw(base.zero_points), draw(base.zero_points)
    w_kind = draw(st.sampled_from(["random", "random", "max", "min"]))
    if w_kind == "random":
        wt = rng.integers(-128, 128, (cout, cin))
    else:  # every odd channel at its bound: 127 (259 taps) or -128 (257 taps), the rest 0; even ones -128 or 127
        wt = np.zeros((cout, cin), dtype=np.int64)
        n = min(cin, 259 if w_kind == "max" else 257)
        wt[1::2, :n] = 127 if w_kind == "max" else -128
        wt[0::2] = 127 if w_kind == "min" else -128
    wt[0::2][(np.resize(wt[1::2], wt[0::2].shape) == -128) & (wt[0::2] < 0)] = 0  # the int16 corner
    for row in range(1, cout, 2):  # odd channels over the sum bound: taps beyond it to zero
        over = np.cumsum(np.abs(wt[row])) * tuned.x_max(-in_zp) > tuned.BYTES_DB_MAX
        wt[row][over] = 0
    wt = wt.astype(np.int8)
    b = np.array(draw(st.lists(st.sampled_from(_S32) | st.integers(-(2**20), 2**20), min_size=cout, max_size=cout)),
                 dtype=np.int32)
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(0, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    right = draw(st.booleans())
    sh = np.array(draw(st.lists(st.integers(-23, -1) if right else st.integers(-31, 30), min_size=cout,
                                max_size=cout)), dtype=np.int64)
    params = packed_params(x.shape, (batch, 1, 1, cout), 1, 1, in_zp=in_zp, out_zp=out_zp, act=draw(base.act_bounds()))
    stream = tuned.pack_layer_bytes(wt, b, m, sh, out_zp, group=draw(st.booleans()), input_offset=-in_zp)
    assert stream is not None and stream[1] & tuned.FLAG_BYTES
    return dict(x=x, w=stream, params=params, expected=conv2d_s8(x, wt.reshape(cout, 1, 1, cin), b, m, sh, **params))


@pytest.mark.slow
@base.EXACT
@given(_bytes_case())
def test_bytes_stream_matches_reference(lib, case) -> None:
    """The byte stream's C twin (host and DSP-emulated builds), 300 layers per build."""
    cout = case["params"]["output"][3]
    status, out = cb.conv2d_packed(case["x"], None, None, cb.Quant(np.zeros(cout), np.zeros(cout), cout),
                                   case["params"], stream=case["w"])
    assert status == MCU_OK
    base.assert_equal(out, case["expected"])


def test_bytes_stream_refuses_windows(lib) -> None:
    """A byte stream serves 1x1, stride-1, unpadded layers only."""
    x = np.zeros((1, 3, 3, 4), dtype=np.int8)
    stream = tuned.pack_layer_bytes(np.zeros((4, 36), dtype=np.int8), None, np.full(4, 2**30), np.full(4, -3))
    params = packed_params(x.shape, (1, 1, 1, 4), 3, 3)
    assert cb.conv2d_packed(x, None, None, cb.Quant(np.zeros(4), np.zeros(4), 4), params, stream=stream)[0] != MCU_OK


@base.EXACT
@given(base.conv_cases())
def test_packed_matches_reference(lib, case) -> None:
    """The plain kernels' convolution cases (one group), 300 per build."""
    rng = np.random.default_rng(case["seed"])
    cin, cout = case["icg"] * case["groups"], case["ocg"] * case["groups"]
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = base.weights(rng, (cout, case["kh"], case["kw"], cin), case["wmode"])
    b = base.biases(rng, cout, case["bias"])
    m, s = base.per_channel(rng, cout, base.shift_for(case["shift"], case["kh"] * case["kw"] * cin),
                            case["per_channel"])
    params = packed_params(x.shape, (case["n"], case["out_h"], case["out_w"], cout), case["kh"], case["kw"], case["sh"],
                     case["sw"], case["pt"], case["pl"], case["dh"], case["dw"], case["in_zp"], case["out_zp"],
                     case["act"])
    status, out = cb.conv2d_packed(x, w, b, cb.Quant(m, s, cout), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@pytest.mark.parametrize(("h", "pad_top", "kernel_w", "channels"), [(2, 0, 1, 9), (1, 1, 1, 9), (3, 1, 3, 3)])
def test_windows_of_nine_byte_rows_over_padding_equal_reference(lib, h: int, pad_top: int, kernel_w: int,
                                                                channels: int) -> None:
    """3-row windows whose rows are 9 bytes (3x3 of 3 channels, or 3x1 of 9) over rows of padding: the narrow
    path's 3x3x3 border patch once read a 3x1 window of 9 channels as three pixels of 3 (found by hypothesis:
    h=2, no top padding, the window's third row below the input)."""
    rng = np.random.default_rng(0)
    cout = 12
    x = base.int8_data(rng, (1, h, 3, channels), "uniform")
    w = base.weights(rng, (cout, 3, kernel_w, channels), "symmetric")
    m, s = base.per_channel(rng, cout, base.shift_for(None, 3 * kernel_w * channels), "same")
    out_w = 3 - kernel_w + 1
    params = packed_params(x.shape, (1, 1, out_w, cout), 3, kernel_w, 1, 1, pad_top, 0, 1, 1, -128, -128)
    status, out = cb.conv2d_packed(x, w, None, cb.Quant(m, s, cout), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, None, m, s, **params))


@st.composite
def wide_cases(draw):
    """Channel counts around the 4-channel blocks and 8-tap loop, windows up to the 640-tap limit,
    and right shifts over the whole fast range with accumulators that saturate the rounding add."""
    cin = draw(st.one_of(st.integers(1, 12), st.sampled_from([16, 32, 64, 71, 160, 640])))
    k = draw(st.sampled_from([1, 1, 3])) if cin <= 64 else 1
    cout = draw(st.integers(1, 13))
    h, w = draw(st.integers(k, 4)), draw(st.integers(k, 4))
    shift = draw(st.one_of(st.sampled_from([-1, -23, -24, 0]), st.integers(-23, -1), st.integers(-31, 30)))
    mult = draw(st.one_of(st.sampled_from([2**31 - 1, 2**30]), st.integers(2**30, 2**31 - 1)))
    return dict(cin=cin, k=k, cout=cout, h=h, w=w, pad=draw(st.integers(0, k // 2)), shift=shift, mult=mult,
                in_zp=draw(base.zero_points), out_zp=draw(base.zero_points), act=draw(base.act_bounds()),
                extreme=draw(st.booleans()), seed=draw(st.integers(0, 2**32 - 1)))


@base.EXACT
@given(wide_cases())
def test_packed_wide_and_extreme(lib, case) -> None:
    rng = np.random.default_rng(case["seed"])
    cin, k, cout, pad = case["cin"], case["k"], case["cout"], case["pad"]
    if case["extreme"]:  # accumulators near +-2^31: every product at the end of its range, one sign
        x = np.full((1, case["h"], case["w"], cin), rng.choice([-128, 127]), dtype=np.int8)
        w = np.full((cout, k, k, cin), rng.choice([-128, 127]), dtype=np.int8)
        b = np.full(cout, rng.choice([-(2**31), 2**31 - 1]), dtype=np.int32)
    else:
        x = rng.integers(-128, 128, (1, case["h"], case["w"], cin), dtype=np.int64).astype(np.int8)
        w = rng.integers(-127, 128, (cout, k, k, cin), dtype=np.int64).astype(np.int8)
        b = rng.integers(-(2**20), 2**20, cout, dtype=np.int64).astype(np.int32)
    m = np.full(cout, case["mult"], dtype=np.int64)
    s = np.full(cout, case["shift"], dtype=np.int64)
    oh, ow = case["h"] + 2 * pad - k + 1, case["w"] + 2 * pad - k + 1
    params = packed_params(x.shape, (1, oh, ow, cout), k, k, pt=pad, pl=pad, in_zp=case["in_zp"], out_zp=case["out_zp"],
                     act=case["act"])
    status, out = cb.conv2d_packed(x, w, b, cb.Quant(m, s, cout), params)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@pytest.mark.parametrize("case", [(1, 8, 3, 3, 4), (2, 6, 2, 2, 10), (1, 16, 4, 1, 12), (1, 5, 2, 3, 3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_packed_pointwise_both_directions(lib, case, seed: int) -> None:
    """The pixel-buffer contract of a 1x1 layer, both directions, at every delta the contract allows."""
    n, c, h, w, oc = case
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (oc, 1, 1, c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = overlap.random_quant(oc, rng)
    packed = np.ascontiguousarray(tuned.pack_layer(wt.reshape(oc, c), bias, q.m, q.s))
    params = cb._fields(cb.Conv2dS8Params, packed_params((n, h, w, c), (n, h, w, oc), 1, 1))
    op = Op("conv2d", [overlap.tensor("x", (n, c, h, w), "int8"), overlap.tensor("w", (oc, c, 1, 1), "int8", wt)],
            [overlap.tensor("y", (n, oc, h, w), "int8")], {"stride": (1, 1), "padding": (0, 0),
                                                               "dilation": (1, 1), "groups": 1})

    def call(xp, yp):
        return lib.mcu_conv2d_packed_s8(None, ctypes.byref(params), xp, packed.ctypes.data, yp)
    overlap.check_overlap(call, x, op, n * h * w * oc, oc)


def test_packed_refuses_bad_arguments(lib) -> None:
    x = np.zeros((1, 2, 2, 4), dtype=np.int8)
    w = np.zeros((4, 1, 1, 4), dtype=np.int8)
    q = cb.Quant(2**30, -1, 4)
    good = packed_params(x.shape, (1, 2, 2, 4), 1, 1)
    stream = tuned.pack_layer(w.reshape(4, 4), None, q.m, q.s)
    assert cb.conv2d_packed(x, w, None, q, good)[0] == MCU_OK
    assert cb.conv2d_packed(x, w, None, q, {**good, "groups": 2})[0] != MCU_OK
    assert cb.conv2d_packed(x, w, None, q, {**good, "input_offset": 200})[0] != MCU_OK
    big = np.zeros((1, 1, 1, 644), dtype=np.int8)  # a window over the 640-tap stack column
    assert cb.conv2d_packed(big, np.zeros((4, 1, 1, 644), dtype=np.int8), None, q,
                            packed_params(big.shape, (1, 1, 1, 4), 1, 1))[0] != MCU_OK
    # a stream for another layer, a corrupt header, constants the C paths cannot shift by
    assert cb.conv2d_packed(x, w, None, q, {**good, "output": (1, 2, 2, 3)}, stream=stream)[0] != MCU_OK
    for word, value in ((0, 0), (1, 8), (3, 8)):
        bad = stream.copy()
        bad[word] = value
        assert cb.conv2d_packed(x, w, None, q, good, stream=bad)[0] != MCU_OK, word
    bad = stream.copy()  # the C paths (every host build) check each constant they shift by
    bad[4 + 4 + 8 + 3] = 40  # the first channel's shift amount
    assert cb.conv2d_packed(x, w, None, q, good, stream=bad)[0] != MCU_OK
    bad = stream.copy()  # a K word that is not the one of its shift and output offset
    bad[4 + 4 + 8 + 1] += 1
    assert cb.conv2d_packed(x, w, None, q, good, stream=bad)[0] != MCU_OK
    # a stream packed for another output offset (it is folded into K)
    assert cb.conv2d_packed(x, w, None, q, {**good, "output_offset": 3}, stream=stream)[0] != MCU_OK


# --- on the simulated cores ------------------------------------------------------------------------------


def _window_column_cases() -> list[dict]:
    """3 x 3 layers whose window rows are whole 16-byte runs (mcu_window_column_s16 inside the input,
    padded_column over the padding): 16 and 32 channels, kernel rows 1 and 2 apart, strides 1 and 2,
    padding 0 and 1, rows of 4 to 9 outputs (pairs and a last pixel)."""
    rng = np.random.default_rng(11)
    cases = []
    for cin, dh, stride, pad in [(16, 1, 1, 1), (16, 2, 1, 1), (32, 2, 2, 1), (16, 2, 1, 0), (32, 1, 2, 0),
                                 (16, 1, 2, 1)]:
        h, w, cout = 2 * dh + 3, 9 + stride * 3, 8
        x = rng.integers(-128, 128, (1, h, w, cin)).astype(np.int8)
        wt = rng.integers(-127, 128, (cout, 3, 3, cin)).astype(np.int8)
        b = rng.integers(-(2**20), 2**20, cout).astype(np.int32)
        m = rng.integers(2**29, 2**31 - 1, cout).astype(np.int64)
        sh = rng.integers(-12, -6, cout).astype(np.int64)
        oh, ow = (h + 2 * pad - 2 * dh - 1) // stride + 1, (w + 2 * pad - 3) // stride + 1
        params = packed_params(x.shape, (1, oh, ow, cout), 3, 3, sh=stride, sw=stride, pt=pad, pl=pad, dh=dh,
                               in_zp=int(rng.integers(-128, 128)), out_zp=int(rng.integers(-128, 128)))
        expected = conv2d_s8(x, wt, b, m, sh, **params)
        cases.append(dict(x=x, w=tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, params["output_offset"]),
                          params=params, expected=expected))
    return cases


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
def test_packed_on_simulated_core(tmp_path: Path, board_name: str) -> None:
    """60 random cases (a fifth at the extremes) with the native LDM/SMLAD/QADD paths, and the window
    columns' assembly (_window_column_cases)."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    cases = firmware_cases(np.random.default_rng(7), 60) + _window_column_cases()
    assert max(c["expected"].size for c in cases) <= 4096
    main = tmp_path / "main.c"
    main.write_text(packed_firmware_source(cases))
    board = load_board(board_name)
    rt = runtime_dir()
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [rt / "include"], tmp_path / "out")
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


_S32 = (-(2**31), 2**31 - 1)


@st.composite
def _device_case(draw) -> dict:
    """One layer for the core's right-shift requantization (every shift in [-23, -1]) and the
    whole-window column paths: first-layer channel counts (1 to 3), pointwise ones, strides,
    borders, multipliers and biases at their extremes."""
    cin = draw(st.sampled_from([1, 2, 3, 4, 5, 8, 12]))
    k = draw(st.sampled_from([1, 3]))
    stride = draw(st.integers(1, 2))
    pad = draw(st.integers(0, k // 2))
    h, w = draw(st.integers(k, 6)), draw(st.integers(k, 6))
    cout = draw(st.integers(1, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind = draw(st.sampled_from(["random", "min", "max"]))
    w_kind = draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (1, h, w, cin)) if x_kind == "random"
         else np.full((1, h, w, cin), -128 if x_kind == "min" else 127)).astype(np.int8)
    wt = (rng.integers(-127, 128, (cout, k, k, cin)) if w_kind == "random"
          else np.full((cout, k, k, cin), -127 if w_kind == "min" else 127)).astype(np.int8)
    b = np.array(draw(st.lists(st.sampled_from(_S32) | st.integers(-(2**20), 2**20), min_size=cout, max_size=cout)),
                 dtype=np.int32)
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(0, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    sh = np.array(draw(st.lists(st.integers(-23, -1), min_size=cout, max_size=cout)), dtype=np.int64)
    in_zp, out_zp = draw(st.integers(-128, 127)), draw(st.integers(-128, 127))
    lo = draw(st.integers(-128, 127))
    act = (lo, draw(st.integers(lo, 127)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    params = packed_params(x.shape, (1, oh, ow, cout), k, k, sh=stride, sw=stride, pt=pad, pl=pad, in_zp=in_zp,
                     out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    stream = tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp)
    assert stream[1] & tuned.FLAG_RIGHT  # the assembly requantizes these
    return dict(x=x, w=stream, params=params, expected=expected)


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
@settings(max_examples=3, deadline=None, derandomize=True)
@given(cases=st.lists(_device_case(), min_size=40, max_size=40),
       byte_cases=st.lists(_bytes_case(batch_max=2), min_size=12, max_size=12))
def test_packed_right_shift_property_on_core(tmp_path_factory, board_name: str, cases: list[dict],
                                             byte_cases: list[dict]) -> None:
    """Batches of 40 drawn layers per firmware, bit-exact with the reference on the core: the
    assembly's merged rounding constant, SSAT and byte-wise activation clamp, and the column built
    from whole windows (1 to 12 input channels, strides 1 and 2, borders); and 12 fully connected
    layers of the byte stream (_bytes_case: its SXTB16 and SMLAD loop at the layout's edges)."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("packed_rq")
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases + byte_cases))
    board = load_board(board_name)
    rt = runtime_dir()
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [rt / "include"], tmp / "out")
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


@st.composite
def _narrow_parts_case(draw) -> dict:
    """One narrow layer (few channels in, windows of up to 48 taps, a range from the output offset up) whose stream
    has FLAG_GROUP: on the Cortex-M33 with a small MCU_PIXEL4_STREAM_MIN its pixels' columns wait in the buffer and
    the stream runs by parts over them (ds_cnn's 10x4 first layer over the U575's ICACHE); images of up to 70
    pixels (groups of 32 and a smaller last one), parts of one or more blocks, the last possibly smaller."""
    cin = draw(st.sampled_from([1, 2]))
    kh, kw = draw(st.sampled_from([(10, 4), (4, 2), (5, 3), (3, 5), (2, 2)]))
    stride, pad = draw(st.integers(1, 2)), draw(st.integers(0, 1))
    h, w = draw(st.integers(kh, kh + 9)), draw(st.integers(kw, kw + 6))
    cout = draw(st.sampled_from([4, 8, 12, 20, 32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind = draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (1, h, w, cin)) if x_kind == "random"
         else np.full((1, h, w, cin), -128 if x_kind == "min" else 127)).astype(np.int8)
    wt = rng.integers(-127, 128, (cout, kh, kw, cin)).astype(np.int8)
    if draw(st.booleans()):
        wt[:] = draw(st.sampled_from([-127, 127]))
    b = np.array(draw(st.lists(st.sampled_from(_S32) | st.integers(-(2**20), 2**20), min_size=cout, max_size=cout)),
                 dtype=np.int32)
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(0, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    sh = np.array(draw(st.lists(st.integers(-23, -1), min_size=cout, max_size=cout)), dtype=np.int64)
    act = draw(st.sampled_from([(-128, 127), (0, 127), (-20, 100)]))
    in_zp, out_zp = draw(st.integers(-128, 127)), draw(st.integers(-128, act[0]))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    params = packed_params(x.shape, (1, oh, ow, cout), kh, kw, sh=stride, sw=stride, pt=pad, pl=pad, in_zp=in_zp,
                           out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    stream = tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp, group=True)
    assert stream[1] & tuned.FLAG_RIGHT and stream[1] & tuned.FLAG_GROUP
    return dict(x=x, w=stream, params=params, expected=expected)


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("stream_min", [0, 2400])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_narrow_parts_case(), min_size=16, max_size=16))
def test_narrow_parts_on_core(tmp_path_factory, stream_min: int, cases: list[dict]) -> None:
    """Narrow layers whose pixels share each read of a part of the stream bit-exact with the reference on the
    Cortex-M33, batches of 16: parts of one block (MCU_PIXEL4_STREAM_MIN 0), of several (2,400)."""
    _batch_on_core(tmp_path_factory, "mps2-an505", cases, "narrow_parts", {"MCU_PIXEL4_STREAM_MIN": stream_min})


@st.composite
def _pixel_pair_case(draw, pw8: bool = False, regs: bool = False, small: bool = False, chain: bool = False,
                     triple: bool = False, many: bool = False, quad: bool = False) -> dict:
    """One layer for the two-pixel loops: pointwise (mcu_pixel2_packed, input channels a multiple of 4
    up to the widest the column holds, 640) or 3 x 3 (mcu_pixel2_packed_split, windows of 28 to 640
    taps, strides 1 and 2, borders; the firmware's kernel is unspecialised, so every window pairs),
    entering the loop's passes at every tap pair,
    output channels a multiple of 4, odd and even pixel counts (an odd last pixel takes the one-pixel
    loop after the pairs), extremes of inputs (neighbouring pixels at opposite ones too), weights, biases and
    multipliers, both stores and the three requantizations (activation ranges from the output offset or above,
    and others; with ReLU, half the layers with every bias inside mcu_px2_diff_ok's room, its edges and one
    bias past it included, for pixel B requantized by difference); pointwise
    layers also in place with the output after the input (the pairs run backwards, last pair first) or
    at most the forward order's distance after it (ds_cnn's 64->64 layers over their own input).
    ``pw8``: flat pointwise layers of 8 input channels only (mcu_pw8_pairs); with ``regs`` scaled streams of 8, 16
    or 24 channels out whose range is all of int8 (mcu_pw8_regs, mcu_pw8_16_regs for 16: each pair's column in
    registers). ``small``: flat
    pointwise layers of 16 or 32 input channels, scaled streams of 4 to 40 channels out whose range is all of int8
    (mcu_pw16_regs, mcu_pw32_regs). ``chain``: flat scaled streams of 64, 128 or 256 channels in, grouped, whose
    range is all of int8 (on the Cortex-M33 a group's part runs its pairs chained through the direct entry:
    MCU_PX2_CHAIN). ``triple``: flat scaled streams of 32 to 256 channels in whose range is all of int8 over 3, 6 or 9
    pixels (pw3_s8_dsp.h: three pixels by two channels, every column first); with ``many`` 64 or 128 channels in over
    7 x 7 to 9 x 9 pixels (24 to 40 pairs: groups of more than 18 where the buffer holds them). ``quad``: as
    ``triple`` over 12 to 36 pixels, most a multiple of 4 (pw4_s8_dsp.h: four pixels by two channels), 32 to 128 in."""
    triple = triple or quad
    k = 1 if pw8 or small or chain or triple else draw(st.sampled_from([1, 3]))
    cin = (8 if pw8 else draw(st.sampled_from([64, 128] if many else [64, 128, 256])) if chain
           else draw(st.sampled_from([32, 64, 96, 128])) if quad
           else draw(st.sampled_from([32, 64, 96, 256])) if triple
           else draw(st.sampled_from([16, 32])) if small
           else draw(st.sampled_from([4, 8, 12, 20, 28, 36, 64, 68, 252, 320, 640] if k == 1
                                     else [3, 4, 16, 32, 36, 64, 71])))
    cout = draw(st.sampled_from([8, 16, 24] if regs else [4, 12, 24, 40] if small else [4, 8, 12, 16, 20, 28] if chain
                                else [4, 8, 12, 16]))
    stride, pad = (1, 0) if k == 1 else (draw(st.integers(1, 2)), draw(st.integers(0, 1)))
    # 3 x 3 rows up to 11 outputs: two four-pixel units a row, in groups across rows (MCU_PIXEL4_GROUP), and
    # the units left over, pairs and pixels after them
    h, w = (draw(st.sampled_from([(3, 4), (4, 4), (2, 10), (4, 6), (4, 7), (6, 6), (5, 5)])) if quad
            else draw(st.sampled_from([(1, 3), (3, 1), (2, 3), (3, 2), (3, 3)])) if triple
            else (draw(st.integers(7, 9)), draw(st.integers(7, 9))) if many
            else (draw(st.integers(k, k + 2)), draw(st.integers(k, k + (6 if k == 1 else 8)))))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # the register loop's pixels apart (it keeps two columns), so that a crossed pixel shows
    x_kind = draw(st.sampled_from(["random", "apart"] if regs else ["random", "min", "max", "apart"]))
    w_kind = draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (1, h, w, cin)) if x_kind == "random"
         else np.full((1, h, w, cin), -128 if x_kind == "min" else 127)).astype(np.int8)
    if x_kind == "apart":  # neighbouring pixels at opposite extremes: a pair's accumulators differ the most
        low_first = draw(st.booleans())
        x[:, :, 0::2, :] = -128 if low_first else 127
        x[:, :, 1::2, :] = 127 if low_first else -128
    wt = (rng.integers(-127, 128, (cout, k, k, cin)) if w_kind == "random"
          else np.full((cout, k, k, cin), -127 if w_kind == "min" else 127)).astype(np.int8)
    b = np.array(draw(st.lists(st.sampled_from(_S32) | st.integers(-(2**20), 2**20), min_size=cout, max_size=cout)),
                 dtype=np.int32)
    if draw(st.booleans()):
        # every bias within mcu_px2_diff_ok's room (the ReLU tails requantizing pixel B by difference), its
        # edges included, or one bias just past it (those tails refused)
        room = 2**31 - 1 - (k * k * cin + 3) // 4 * 4 * 255 * 128
        edge = st.sampled_from([room, -room, 0]) | st.integers(-room, room)
        b = np.array(draw(st.lists(edge, min_size=cout, max_size=cout)), dtype=np.int32)
        if draw(st.booleans()):
            b[draw(st.integers(0, cout - 1))] = -room - 1
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(0, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    sh = np.array(draw(st.lists(st.integers(-23, -1), min_size=cout, max_size=cout)), dtype=np.int64)
    act = ((-128, 127) if regs or small or chain or triple
           else draw(st.sampled_from([(-128, 127), (0, 127), (-100, 50), (-20, -5)])))
    # two in three with the range from the output offset or above (a folded ReLU: the pair loops' requantization
    # without the sign's correction), the offset at act_min included; the others anywhere
    in_zp = draw(st.integers(-128, 127))
    out_zp = draw(st.sampled_from(["relu", "edge", "any"]).flatmap(
        lambda kind: st.integers(-128, act[0]) if kind == "relu" else st.just(act[0]) if kind == "edge"
        else st.integers(-128, 127)))
    # half the flat layers of 8 or 16 to 304 channels as scaled streams (pack_layer_scaled: ReLU, shifts brought to
    # one), where their accumulators' bound allows
    scaled = (regs or small or chain or triple
              or k == 1 and (cin == 8 or 16 <= cin <= tuned.SCALED_TAPS_MAX) and draw(st.booleans()))
    if scaled:
        sh = -np.array(draw(st.lists(st.integers(tuned.SCALED_SHIFT - 7, tuned.SCALED_SHIFT - 1), min_size=cout,
                                     max_size=cout)), dtype=np.int64)
        out_zp = draw(st.integers(-128, act[0]))
        # biases into the room 2^e leaves (the extremes drawn above land on its edges); shifts of 13 where the
        # weights alone leave none at a larger e
        sums = tuned.x_max(-in_zp) * np.abs(wt.reshape(cout, -1).astype(np.int64)).sum(axis=1)
        sh = np.where(sums << (1 + tuned.SCALED_SHIFT + sh) < 2**31, sh, 1 - tuned.SCALED_SHIFT)
        room = (2**31 - 1) // (1 << (1 + tuned.SCALED_SHIFT + sh)) - sums
        b = np.clip(b.astype(np.int64), -room, room).astype(np.int32)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    params = packed_params(x.shape, (1, oh, ow, cout), k, k, sh=stride, sw=stride, pt=pad, pl=pad, in_zp=in_zp,
                           out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    group = chain or draw(st.sampled_from([True, True, False]))
    stream = (tuned.pack_layer_scaled(wt.reshape(cout, -1), b, m, sh, out_zp, group, -in_zp) if scaled
              else tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp, group=group))
    assert stream is not None and bool(stream[1] & tuned.FLAG_SCALED) == scaled
    assert stream[1] & tuned.FLAG_RIGHT
    case = dict(x=x, w=stream, params=params, expected=expected)
    pixels = oh * ow
    # in place, backward (mcu_conv_pixel_direction): from the least distance that direction allows to
    # the end of the input, where the buffers stop overlapping
    fwd = min(cin - cout, pixels * (cin - cout))
    lo = max(fwd + 1, (pixels - 1) * (cin - cout), 0)
    place = draw(st.sampled_from(["apart", "backward", "forward"])) if k == 1 else "apart"
    if place == "backward" and lo < pixels * cin:
        case["out_delta"] = draw(st.integers(lo, pixels * cin - 1))
    elif place == "forward" and fwd >= 0:  # the output at or after the input's start, run forward
        case["out_delta"] = draw(st.integers(0, fwd))
    return case


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize(("board_name", "defines"), [("mps2-an505", {"MCU_PIXEL4_STREAM_MIN": 0,
                                                                     "MCU_PACKED_PW_GROUP_TAPS": 1216,
                                                                     "MCU_PIXEL4_GROUP": 4}),
                                                     ("mps2-an386", {})])
@settings(max_examples=3, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(), min_size=24, max_size=24))
def test_packed_pixel_pairs_on_core(tmp_path_factory, board_name: str, defines: dict, cases: list[dict]) -> None:
    """The two-pixel loops bit-exact with the reference on the core, batches of 24 layers; on the
    Cortex-M33 every windowed layer (up to 640 taps) of at least 4 pixels a row takes the four-pixel
    loop first (its stream threshold at 0; four-pixel units in groups of four across rows by parts of
    one block, the parts forward and backward in turn), the rest of the row pairs and a last pixel, and every
    flat pointwise layer whose stream has FLAG_GROUP (two in three) runs its pairs in groups of up to 18 (the
    buffer of MCU_PACKED_PW_GROUP_TAPS) by parts of one block, the parts forward and backward in turn, then the
    pairs left and a last pixel; backward (in place, the output after the input) the groups run last pair
    first, the last group possibly smaller; the others one pair at a time."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("packed_pairs")
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases))
    board = load_board(board_name)
    rt = runtime_dir()
    # the stack the call graph needs (four units' columns, over a board's fixed stack)
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [rt / "include"], tmp / "out", defines=defines,
                        stack_usage=True)
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


@requires_qemu
@pytest.mark.qemu
# parts of one block; of up to three (half of 4,500 bytes: 64 channels in, 592-byte blocks; 128, 1,104) where 5 and 7 blocks
# leave a smaller last part
@pytest.mark.parametrize("stream_min", [0, 4500])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(chain=True), min_size=12, max_size=12))
def test_packed_pair_chains_on_core(tmp_path_factory, stream_min: int, cases: list[dict]) -> None:
    """The chained pairs on the Cortex-M33 bit-exact with the reference: grouped scaled streams of 64 to 256
    channels in whose passes start at the loop's first tap pair, so each group's part runs its pairs in one
    call through tail 39 and the direct entry, and a forward group's parts all in one call (groups of up to 8
    pairs in the buffer of 1,216 int16, parts of one block or two, forward and backward; in place both ways; an
    odd last pixel alone)."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("packed_chains")
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases))
    board = load_board("mps2-an505")
    rt = runtime_dir()
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [rt / "include"], tmp / "out",
                        defines={"MCU_PIXEL4_STREAM_MIN": stream_min, "MCU_PACKED_PW_GROUP_TAPS": 1216},
                        stack_usage=True)
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
@settings(max_examples=1, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(chain=True, many=True), min_size=8, max_size=8))
def test_packed_pair_large_groups_on_core(tmp_path_factory, cases: list[dict]) -> None:
    """Groups of more than 18 pairs on the Cortex-M33, bit-exact with the reference: a buffer of 5,472 int16 holds 36
    pairs of 64 taps and 19 of 128 (MCU_PW_GROUP_MAX caps them at 36), layers of 24 to 40 pairs, forward and in place
    both ways (every grouped layer groups: parts of one block), the pairs left after the last whole group and an odd
    pixel."""
    _batch_on_core(tmp_path_factory, "mps2-an505", cases, "packed",
                   {"MCU_PIXEL4_STREAM_MIN": 0, "MCU_PACKED_PW_GROUP_TAPS": 5472})


@requires_qemu
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(pw8=True), min_size=24, max_size=24),
       regs=st.lists(_pixel_pair_case(pw8=True, regs=True), min_size=12, max_size=12))
def test_pw8_pairs_on_core(tmp_path_factory, board_name: str, cases: list[dict], regs: list[dict]) -> None:
    """Flat pointwise layers of 8 input channels, every pixel pair in one assembly (mcu_pw8_pairs), bit-exact
    with the reference on the Cortex-M33 and M4: 1 to 21 pixels (up to 10 pairs, a last odd pixel alone),
    forward, in place forward and backward (the pairs last first), all four tails (the activation range
    from the output offset or not, clamped or all of int8), extremes of inputs, weights, biases and
    multipliers; and 12 layers of scaled streams whose range is all of int8, 8 to 24 channels out (mcu_pw8_regs;
    mcu_pw8_16_regs for 16)."""
    _batch_on_core(tmp_path_factory, board_name, cases + regs, "pw8")


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", pytest.param("mps2-an386", marks=pytest.mark.slow)])
@settings(max_examples=3, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(small=True), min_size=12, max_size=12))
def test_pw_small_on_core(tmp_path_factory, board_name: str, cases: list[dict]) -> None:
    """Flat pointwise layers of 16 and 32 input channels over scaled streams, every pixel pair in one assembly
    (pw_small_s8_dsp.h), bit-exact with the reference on the Cortex-M33 and M4: 1 to 21 pixels (a last odd pixel
    alone), forward, in place forward and backward (the pairs last first; on the M33 pairs of pairs as quads, a
    pair left over), 4 to 40 channels out (one to ten blocks), extremes of inputs (neighbouring pixels at opposite
    ones too), weights, multipliers, and biases at the edges of the room the scaled layout leaves."""
    _batch_on_core(tmp_path_factory, board_name, cases, "pw_small")


@requires_qemu
@pytest.mark.qemu
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(small=True), min_size=12, max_size=12))
def test_pw_small_quads_known_count_on_core(tmp_path_factory, cases: list[dict]) -> None:
    """The M33's small-K quads with pixels B to D's bytes at immediate offsets, built for 24 output channels after
    16 taps and 40 after 32 (the layers of other counts take the pairs), bit-exact with the reference as above."""
    _batch_on_core(tmp_path_factory, "mps2-an505", cases, "pw_small", {"MCU_PWS_Q16_COUT": 24, "MCU_PWS_Q32_COUT": 40})


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", pytest.param("mps2-an386", marks=pytest.mark.slow)])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(triple=True), min_size=12, max_size=12))
def test_pw3_on_core(tmp_path_factory, board_name: str, cases: list[dict]) -> None:
    """Flat pointwise layers of 3, 6 or 9 pixels over scaled streams, three pixels by two channels a block
    (pw3_s8_dsp.h), bit-exact with the reference on the Cortex-M33 and M4: 32 to 256 channels in, 4 to 16 out, forward
    and in place both ways (every column built before any output), extremes of inputs (neighbouring pixels at
    opposite ones too), weights, multipliers, and biases at the edges of the room the scaled layout leaves."""
    _batch_on_core(tmp_path_factory, board_name, cases, "pw3", {"MCU_PACKED_PW3_TAPS": 9 * 256})


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("cout, kp_max", [(0, 0), (8, 0), (8, 128), (0, 64)])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_pixel_pair_case(quad=True), min_size=12, max_size=12))
def test_pw4_on_core(tmp_path_factory, cout: int, kp_max: int, cases: list[dict]) -> None:
    """Flat pointwise layers of 12 to 36 pixels over scaled streams, four pixels by two channels a block
    (pw4_s8_dsp.h, the Cortex-M33), bit-exact with the reference: 32 to 128 channels in (every entry of the first
    pass), 4 to 16 out, forward and in place both ways (every column built before any output), extremes as for
    the triples; pixels B to D's bytes by a register (no count named) and at immediate offsets (built for 8 output
    channels: the other counts take the pairs); 25 pixels, not a multiple of 4, the pairs. Built with no widest
    taps named (the passes in a loop, the entry tested every quad) and with 128 or 64 (one pass, the entry's test
    once a half block; at 64 the layers of 96 and 128 channels in take the pairs)."""
    _batch_on_core(tmp_path_factory, "mps2-an505", cases, f"pw4_{cout}_{kp_max}",
                   {"MCU_PACKED_PW4_TAPS": 36 * 128, "MCU_PW4_COUT": cout, "MCU_PW4_KP_MAX": kp_max})


def _batch_on_core(tmp_path_factory, board_name: str, cases: list[dict], label: str,
                   defines: dict | None = None) -> None:
    """A firmware of the packed kernel running `cases` on the board's QEMU, every output equal to the reference."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp(label)
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases, label))
    fw = build_firmware(load_board(board_name), [main, kernel_source(tuned.SOURCE)], [runtime_dir() / "include"],
                        tmp / "out", defines=defines, stack_usage=True)
    result = run_qemu(load_board(board_name), fw.elf, timeout_s=120)
    assert result.exit_code == 0 and f"{label} cases failed: 0" in result.console, result.console


@st.composite
def _first_layer_case(draw, batch: int = 1, rows: bool = False, zero_blocks: bool = False,
                      shared: bool = False, couts: tuple[int, ...] = (4, 8, 12, 16)) -> dict:
    """A 3x3 layer over 3 input channels whose range is all of int8 from the output offset -128 (an RGB
    first layer with a ReLU): the narrow path runs its pixels by threes (mcu_narrow_x3), interior and
    border windows alike, and the row's last one or two alone. Rows of 1 to 10 outputs, strides 1 and 2,
    padding 0 and 1, a right overhang, row dilation 1 and 2, extremes of inputs, weights, biases and
    multipliers. `rows`: stride 2 across (the widened rows of conv_k3c3_rows_s8_dsp.h), rows of 1 to 40
    outputs (fours and a partial one), stride 1 or 2 down, padding up to 2, 4 to 16 output channels; four in five
    with shifts and biases the scaled layout is exact for (tuned.scaled_fit), the stream then with its rows section (half the
    time; `zero_blocks`: its blocks' weights zeroed, so that a kernel reading them instead of the section fails) or
    repacked by the kernel; extreme biases or other shifts leave the layer to the threes. `shared`: such a layer
    with its section at stride 2 down, rows 1 apart, three rows of outputs or more (its slots in both orders, then a
    row that keeps the lone taps' halves of the row before), inputs at random. `couts`: the rows layers' output
    channels to draw from."""
    stride, pad, dh = draw(st.integers(1, 2)), draw(st.integers(0, 2 if rows else 1)), draw(st.integers(1, 2))
    if shared:
        stride, dh = 2, 1
    stride_w = 2 if rows else stride
    span = 2 * dh + 1
    h = draw(st.integers(max(1, span - 2 * pad, 7 - 2 * pad if shared else 1), span + (5 if shared else 3)))
    w = draw(st.integers(max(1, 3 - 2 * pad), 3 + 2 * (39 if rows else 9 // stride)))
    extra_r = draw(st.integers(0, 1))
    oh = (h + 2 * pad - span) // stride + 1
    ow = (w + 2 * pad + extra_r - 3) // stride_w + 1
    cout = draw(st.sampled_from(couts if rows else (4, 8, 12)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind = "random" if shared else draw(st.sampled_from(["random", "min", "max"]))
    w_kind = draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (batch, h, w, 3)) if x_kind == "random"
         else np.full((batch, h, w, 3), -128 if x_kind == "min" else 127)).astype(np.int8)
    wt = (rng.integers(-127, 128, (cout, 3, 3, 3)) if w_kind == "random"
          else np.full((cout, 3, 3, 3), -127 if w_kind == "min" else 127)).astype(np.int8)
    fit = rows and (shared or draw(st.integers(0, 4)) > 0)  # a layer the rows' scaled layout is exact for (tuned.scaled_fit)
    biases = st.sampled_from((-(2**20), 2**20)) if fit else st.sampled_from(_S32)
    b = np.array(draw(st.lists(biases | st.integers(-(2**20), 2**20), min_size=cout, max_size=cout)), dtype=np.int32)
    m = np.array(draw(st.lists(st.sampled_from([0, 1, 2**30, 2**31 - 1]) | st.integers(0, 2**31 - 1),
                               min_size=cout, max_size=cout)), dtype=np.int64)
    shifts = st.integers(-13, -7) if fit else st.integers(-23, -1)
    sh = np.array(draw(st.lists(shifts, min_size=cout, max_size=cout)), dtype=np.int64)
    params = packed_params(x.shape, (batch, oh, ow, cout), 3, 3, sh=stride, sw=stride_w, pt=pad, pl=pad, dh=dh,
                           in_zp=draw(st.integers(-128, 127)), out_zp=-128, act=(-128, 127))
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    stream = tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, -128)
    assert stream[1] & tuned.FLAG_RIGHT
    section = tuned.rows_section(wt.reshape(cout, -1), b, m, sh, -128, params["input_offset"]) if rows else None
    assert section is not None or not fit
    if section is not None and (shared or draw(st.booleans())):
        stream = tuned.with_rows(stream, section)
    if section is not None and zero_blocks and stream[1] & tuned.FLAG_ROWS:
        words = 4 + 2 * 28 + 16  # a block: biases, 14 tap pairs of 4 channels, requantization words
        blocks = stream[4:4 + cout // 4 * words].reshape(cout // 4, words)
        blocks[:, 4:4 + 2 * 28] = 0  # the weights only the section now holds
    return dict(x=x, wt=wt, b=b, m=m, sh=sh, w=stream, params=params, expected=expected)


@pytest.mark.parametrize("rows", [False, True], ids=["by_threes", "rows"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_first_layer_matches_reference(lib, request, rows: bool, data) -> None:
    """The narrow path's first layers (their C twins on the emulated build), batches of two images: by threes
    (mcu_narrow_x3), or from widened rows at stride 2 across (conv_k3c3_rows_s8_dsp.h; the plain build ignores a
    stream's rows section, the emulated one reads it), half of them layers whose rows of outputs share input rows."""
    emulated = request.node.callspec.params["lib"] == "dsp-emulated"
    shared = rows and data.draw(st.booleans())
    case = data.draw(_first_layer_case(batch=2, rows=rows, zero_blocks=emulated, shared=shared))
    cout = case["wt"].shape[0]
    status, out = cb.conv2d_packed(case["x"], case["wt"], case["b"], cb.Quant(case["m"], case["sh"], cout),
                                   case["params"], stream=case["w"])
    assert status == MCU_OK
    base.assert_equal(out, case["expected"])


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
@pytest.mark.parametrize("mode", ["by_threes", pytest.param("rows", marks=pytest.mark.slow),
                                  pytest.param("rows_cout8", marks=pytest.mark.slow)])
@settings(max_examples=2, deadline=None, derandomize=True)  # the simplest batch, then a random one
@given(data=st.data())
def test_first_layer_on_core(tmp_path_factory, board_name: str, mode: str, data) -> None:
    """The assembly of mcu_narrow_x3 (batches of 24 layers) or mcu_k3c3_rows_run (16, wider) bit-exact with the
    reference on the core. `rows_cout8`: a build whose rows layers all have 8 output channels (MCU_PACKED_ROWS_COUT,
    the passes' stores at fixed offsets), its last case one of 16 channels, which that build leaves to the threes
    (its blocks' weights kept)."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    rows, cout8 = mode != "by_threes", mode == "rows_cout8"
    couts = (8,) if cout8 else (4, 8, 12, 16)
    n = 16 if rows else 24
    cases = data.draw(st.lists(_first_layer_case(rows=rows, zero_blocks=True, couts=couts), min_size=n - 2,
                               max_size=n - 2))
    cases += [data.draw(_first_layer_case(rows=rows, zero_blocks=True, shared=rows, couts=couts))]
    cases += [data.draw(_first_layer_case(rows=rows, zero_blocks=not cout8, couts=(16,) if cout8 else couts))]
    tmp = tmp_path_factory.mktemp(f"packed_{mode}")
    main = tmp / "main.c"
    main.write_text(packed_firmware_source([{k: c[k] for k in ("x", "w", "params", "expected")} for c in cases]))
    board = load_board(board_name)
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [runtime_dir() / "include"], tmp / "out",
                        defines={"MCU_PACKED_ROWS_COUT": 8} if cout8 else None)
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


# --- selection -------------------------------------------------------------------------------------------


def test_tuned_backend_takes_dsp_cores_only() -> None:
    from mcu.ir import Tensor

    def conv() -> Op:
        x = Tensor("x", (1, 8, 4, 4), "int8", (0, 2, 3, 1))
        w = Tensor("w", (4, 8, 3, 3), "int8", (0, 2, 3, 1), data=np.ones((4, 3, 3, 8), dtype=np.int8))
        return Op("conv2d", [x, w], [Tensor("y", (1, 4, 4, 4), "int8", (0, 2, 3, 1))],
                  {"groups": 1, "stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)})

    from mcu.backends.base import Context
    from mcu.backends.optimized.core import OptimizedBackend
    from mcu.backends.optimized.options import OptimizedOptions

    def why(board: str, packed: bool = True) -> str | None:
        ctx = Context(load_board(board), "int8", {"optimized": OptimizedOptions(packed_weights=packed)})
        b = OptimizedBackend()
        return b.unavailable(ctx) or b.refuse(conv(), ctx)

    assert tuned.applies(conv()) is None
    assert why("mps2-an505") is None and why("mps2-an386") is None and why("pico2") is None
    assert "DSP" in why("mps2-an385")  # Cortex-M3: plain C
    assert "Helium" in why("mps3-an547")
    assert why("mps2-an505", packed=False) is None  # --compact-weights: the compact kernel (test_kernels_s8_compact)


def test_packed_weights_in_a_compiled_model() -> None:
    """On a DSP core the generated C runs the packed kernel (the program file keeps the portable
    one), both give the reference's integers on the host, and --compact-weights turns it off."""
    import torch

    import mcu

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(6, 5, 1),
                                torch.nn.Flatten(), torch.nn.Linear(5 * 6 * 6, 7)).eval()
    example = (torch.randn(1, 3, 6, 6),)
    calib = [(torch.randn(1, 3, 6, 6),) for _ in range(8)]
    packed = mcu.compile(model, example, board="mps2-an505", quantize="int8", calibration=calib)
    compact = mcu.compile(model, example, board="mps2-an505", quantize="int8", calibration=calib,
                          packed_weights=False)
    functions = [s.call.function for s in packed.library.view.steps]
    assert functions.count(tuned.FUNCTION) == 3, functions
    assert tuned.FUNCTION not in [s.call.function for s in compact.library.view.steps]
    assert "mcu_conv2d_compact_s8" in [s.call.function for s in compact.library.view.steps]
    x = torch.randn(1, 3, 6, 6)
    expected = packed.reference_raw(x)
    for got in (packed.run_raw_c(x), packed.run_raw(x), compact.run_raw_c(x)):
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
