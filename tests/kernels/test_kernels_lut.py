"""The look-up-table weight kernels (--weight-palette: mcu_conv2d_lut_s8, mcu_depthwise_conv2d_lut_s8,
mcu_linear_lut_s8) against the Python integer reference on the decoded weights, over hypothesis-drawn
shapes (rows of indices that end mid-byte), strides, paddings, dilations, zero points, multipliers, shifts,
2, 3 and 4 bits and tables at the int8 extremes; the index packing against its definition; and the
kernels' refusals (overlaps, a short scratch, a bad index width)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_BUFFER_TOO_SMALL, MCU_ERR_INVALID_ARG, MCU_OK, ptr
from host_builds import build_emulated_lib
from mcu.backends.portable.conv import LUT_SHARED
from mcu.layouts import pack_palette, palette_row_bytes, unpack_palette
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8
from s8_cases import (act_bounds, assert_equal, bias_kinds, biases, conv_cases, conv_shift_centres, data_modes,
                      int8_data, per_channel, shift_for, zero_points)

CASES = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_P = ctypes.c_void_p
_CP, _QP = ctypes.POINTER(cb.Context), ctypes.POINTER(cb.PerChannelQuant)
_SIGNATURES = {
    "mcu_conv2d_lut_s8": ctypes.POINTER(cb.Conv2dS8Params),
    "mcu_depthwise_conv2d_lut_s8": ctypes.POINTER(cb.DepthwiseConv2dS8Params),
    "mcu_linear_lut_s8": ctypes.POINTER(cb.LinearS8Params),
}
bit_widths = st.sampled_from([2, 3, 4])
table_modes = st.sampled_from(["random", "extremes", "few"])


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (plain paths) and the DSP paths emulated on the host: the depthwise and linear
    LUT kernels run the int8 kernels, whose paths differ by core."""
    handle = cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib()))
    for name, params in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = [_CP, params, _QP, ctypes.c_int32, _P, _P, _P, _P, _P]
        fn.restype = ctypes.c_int
    return handle


def palette_rows(rng, channels: int, count: int, bits: int, mode: str, shared: bool = False) -> np.ndarray:
    """int8 rows with at most 2^bits distinct values each (all rows together with ``shared``): random
    tables, the int8 extremes only, or fewer values than the table holds (its padding entries then go
    unused)."""
    if shared:
        return palette_rows(rng, 1, channels * count, bits, mode).reshape(channels, count)
    size = 1 << bits
    if mode == "extremes":
        tables = rng.choice(np.array([-128, -127, 127], dtype=np.int64), size=(channels, size))
    elif mode == "few":
        tables = np.repeat(rng.integers(-128, 128, size=(channels, 1)), size, axis=1)
        tables[:, 0] = rng.integers(-128, 128, size=channels)
    else:
        tables = rng.integers(-128, 128, size=(channels, size))
    which = rng.integers(0, size, size=(channels, count))
    return np.take_along_axis(tables, which, axis=1).astype(np.int8)


def run_lut(lib, name, params_type, params, bits, x, rows, b, q, out_shape, scratch: int, out=None, packed_bits=None,
         shared: bool = False, dtype=np.int8):
    """The kernel told ``bits`` (plus LUT_SHARED with ``shared``: one table) on ``rows`` packed at
    ``packed_bits`` (default: the same)."""
    p = params if isinstance(params, ctypes.Structure) else cb._fields(params_type, params)
    indices, tables = pack_palette(rows, packed_bits or bits, shared=shared)
    result = np.zeros(out_shape, dtype=dtype) if out is None else out
    buf = np.zeros(max(scratch, 1), dtype=np.int8)
    ctx = cb.Context(buf.ctypes.data, scratch)
    word = bits | (LUT_SHARED if shared else 0)
    status = getattr(lib, name)(ctypes.byref(ctx), ctypes.byref(p), ctypes.byref(q.struct), word, ptr(x),
                                ptr(np.ascontiguousarray(indices)), ptr(np.ascontiguousarray(tables)), ptr(b),
                                ptr(result))
    return status, result


@CASES
@given(st.integers(1, 5), st.integers(1, 40), bit_widths, table_modes, st.integers(0, 2**32 - 1))
def test_pack_palette_rows_are_little_endian_and_byte_padded(channels, count, bits, mode, seed):
    rng = np.random.default_rng(seed)
    rows = palette_rows(rng, channels, count, bits, mode)
    indices, tables = pack_palette(rows, bits)
    row_bytes = palette_row_bytes(count, bits)
    assert indices.dtype == np.uint8 and indices.size == channels * row_bytes
    assert tables.dtype == np.int8 and tables.size == channels << bits
    np.testing.assert_array_equal(unpack_palette(indices, tables, bits, channels, count), rows)
    # the definition, bit by bit: index i of row c is bits [i * bits, (i + 1) * bits) of its bytes
    stream = np.unpackbits(indices.reshape(channels, row_bytes), axis=1, bitorder="little")
    table = tables.reshape(channels, 1 << bits)
    for c in range(channels):
        for i in range(count):
            index = sum(int(stream[c, i * bits + k]) << k for k in range(bits))
            assert table[c, index] == rows[c, i]
        assert not stream[c, count * bits:].any()  # the padding is zero
    with pytest.raises(ValueError):
        pack_palette(np.arange(-8, 9, dtype=np.int8).reshape(1, -1), 4)  # 17 distinct values


@CASES
@given(st.integers(1, 5), st.integers(1, 40), bit_widths, table_modes, st.integers(0, 2**32 - 1))
def test_pack_palette_shared_table(channels, count, bits, mode, seed):
    """One table for every row: 2^bits entries in all, the same index rows as a table per row would give
    when every row has the table's values."""
    rows = palette_rows(np.random.default_rng(seed), channels, count, bits, mode, shared=True)
    indices, table = pack_palette(rows, bits, shared=True)
    assert table.dtype == np.int8 and table.size == 1 << bits
    assert indices.size == channels * palette_row_bytes(count, bits)
    np.testing.assert_array_equal(unpack_palette(indices, table, bits, channels, count), rows)
    assert np.array_equal(table, np.sort(table)) and set(np.unique(rows)) == set(table.tolist())
    with pytest.raises(ValueError):
        pack_palette(np.arange(-8, 9, dtype=np.int8).reshape(-1, 1), 4, shared=True)  # 17 across rows


@CASES
@given(conv_cases(), bit_widths, table_modes, st.sampled_from(["one", "two", "whole"]), st.booleans())
def test_conv2d_lut_s8(lib, case, bits, mode, scratch, shared):
    """A channel at a time in one channel's scratch, two in two channels'; with the whole tensor's, decoded
    once and the int8 convolution's paths; a table per channel or one for all (``shared``)."""
    rng = np.random.default_rng(case["seed"])
    cin, cout = case["icg"], case["ocg"] * case["groups"]  # one group
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    taps = case["kh"] * case["kw"] * cin
    rows = palette_rows(rng, cout, taps, bits, mode, shared)
    w = rows.reshape(cout, case["kh"], case["kw"], cin)
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], taps), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], groups=1, input_offset=-case["in_zp"],
        output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1],
    )
    status, out = run_lut(lib, "mcu_conv2d_lut_s8", cb.Conv2dS8Params, params, bits, x, rows, b,
                          cb.Quant(m, s, cout), params["output"],
                          {"one": taps, "two": 2 * taps, "whole": taps * cout}[scratch], shared=shared)
    assert status == MCU_OK
    assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@CASES
@given(conv_cases(depthwise=True), bit_widths, table_modes, st.booleans())
def test_depthwise_conv2d_lut_s8(lib, case, bits, mode, shared):
    rng = np.random.default_rng(case["seed"])
    cin, cm = case["channels"], case["ch_mult"]
    cout = cin * cm
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    taps = case["kh"] * case["kw"]
    rows = palette_rows(rng, cout, taps, bits, mode, shared)  # a row per output channel: its kh * kw taps
    w = np.ascontiguousarray(rows.T).reshape(case["kh"], case["kw"], cout)
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], taps), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), ch_mult=cm, kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], input_offset=-case["in_zp"], output_offset=case["out_zp"],
        act_min=case["act"][0], act_max=case["act"][1],
    )
    status, out = run_lut(lib, "mcu_depthwise_conv2d_lut_s8", cb.DepthwiseConv2dS8Params, params, bits, x, rows, b,
                          cb.Quant(m, s, cout), params["output"], taps * cout, shared=shared)
    assert status == MCU_OK
    assert_equal(out, depthwise_conv2d_s8(x, w, b, m, s, **params))


@CASES
@given(batch=st.integers(1, 4), fin=st.integers(1, 70), fout=st.integers(1, 20), in_zp=zero_points,
       out_zp=zero_points, act=act_bounds(), bias=bias_kinds, shift=conv_shift_centres,
       pc=st.sampled_from(["same", "varied"]), data=data_modes, bits=bit_widths, mode=table_modes,
       seed=st.integers(0, 2**32 - 1), shared=st.booleans())
def test_linear_lut_s8(lib, batch, fin, fout, in_zp, out_zp, act, bias, shift, pc, data, bits, mode, seed, shared):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (batch, fin), data)
    rows = palette_rows(rng, fout, fin, bits, mode, shared)
    b = biases(rng, fout, bias)
    m, s = per_channel(rng, fout, shift_for(shift, fin), pc)
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = run_lut(lib, "mcu_linear_lut_s8", cb.LinearS8Params, params, bits, x, rows, b,
                          cb.Quant(m, s, fout), (batch, fout), fin, shared=shared)
    assert status == MCU_OK
    assert_equal(out, linear_s8(x, rows, b, m, s, **params))


def _conv_params(x_shape, oc):
    return dict(input=x_shape, output=(*x_shape[:3], oc), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
                pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
                act_max=127)


def test_refusals():
    """An output on the input (the convolution writes channel by channel, so no overlap at all), a scratch
    shorter than one channel's decoded weights, an index width outside 2-4, and more than one group: argument
    errors before any output byte is written."""
    handle = cb.lib()
    for name, params in _SIGNATURES.items():
        getattr(handle, name).argtypes = [_CP, params, _QP, ctypes.c_int32, _P, _P, _P, _P, _P]
    rng = np.random.default_rng(1)
    arena = rng.integers(-128, 128, 2 * 4 * 5 + 8, dtype=np.int64).astype(np.int8)
    x = arena[:40].reshape(1, 2, 4, 5)
    rows = palette_rows(rng, 5, 5, 2, "random")
    b = np.zeros(5, dtype=np.int32)
    q = cb.Quant(2**30, -1, 5)
    params = _conv_params(x.shape, 5)
    # the output five bytes into the input: a window contract would allow nothing here either, but the
    # LUT convolution allows no overlap at all, even one ending before the input starts reading
    inside = arena[5:45].reshape(1, 2, 4, 5)
    before = inside.copy()
    status, _ = run_lut(handle, "mcu_conv2d_lut_s8", cb.Conv2dS8Params, params, 2, x, rows, b, q, None, 5, out=inside)
    assert status == MCU_ERR_INVALID_ARG and np.array_equal(inside, before)
    out = np.zeros((1, 2, 4, 5), dtype=np.int8)
    assert run_lut(handle, "mcu_conv2d_lut_s8", cb.Conv2dS8Params, params, 2, x.copy(), rows, b, q, None, 4,
                   out=out)[0] == MCU_ERR_BUFFER_TOO_SMALL
    for bits in (1, 5, LUT_SHARED | 1, LUT_SHARED | 5, 32 | 2):  # (the shared flag with a bad width, other flags)
        assert run_lut(handle, "mcu_conv2d_lut_s8", cb.Conv2dS8Params, params, bits, x.copy(), rows, b, q, None, 5,
                       out=out, packed_bits=2)[0] == MCU_ERR_INVALID_ARG
    assert not out.any()
    grouped = dict(params, input=(1, 2, 4, 6), output=(1, 2, 4, 6), groups=2)
    x6 = np.zeros((1, 2, 4, 6), dtype=np.int8)
    assert run_lut(handle, "mcu_conv2d_lut_s8", cb.Conv2dS8Params, grouped, 2, x6, palette_rows(rng, 6, 3, 2, "random"),
                   np.zeros(6, dtype=np.int32), cb.Quant(2**30, -1, 6), (1, 2, 4, 6), 6)[0] == MCU_ERR_INVALID_ARG
    lin = dict(batch=1, in_features=5, out_features=5, input_offset=0, output_offset=0, act_min=-128, act_max=127)
    xl = np.zeros((1, 5), dtype=np.int8)
    assert run_lut(handle, "mcu_linear_lut_s8", cb.LinearS8Params, lin, 3, xl, palette_rows(rng, 5, 5, 3, "random"), b,
                   q, (1, 5), 4)[0] == MCU_ERR_BUFFER_TOO_SMALL
