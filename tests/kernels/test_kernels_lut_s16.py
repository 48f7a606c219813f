"""The look-up-table weight kernels with int16 activations (--weight-palette with --quantize w8a16:
mcu_conv2d_lut_s16, mcu_depthwise_conv2d_lut_s16, mcu_linear_lut_s16) against the Python 16x8 reference on the
decoded weights, over hypothesis-drawn shapes, int16 extremes, tables at the int8 extremes, 2, 3 and 4 bits and
a table per channel or one shared by all; and their refusals (a short scratch, a scratch on the output, a bad
palette word)."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_BUFFER_TOO_SMALL, MCU_ERR_INVALID_ARG, MCU_OK, ptr
from mcu.layouts import pack_palette
from mcu.reference.s16 import SHIFT_MAX, conv2d_s16, depthwise_conv2d_s16, linear_s16
from s8_cases import assert_equal
from test_kernels_lut import run_lut, bit_widths, palette_rows, table_modes
from test_kernels_s16 import Conv2dS16Params, LinearS16Params, acts, biases64, conv_s16_cases, int16_data, \
    multipliers, s16_shift
from test_kernels_s16_more import DwS16Params, dw_cases

# (fewer examples than the int8 LUT kernels': these decode and then run the 16x8 kernels, tested on their own)
CASES = settings(max_examples=40, deadline=None)
_P = ctypes.c_void_p
_PARAMS = {"mcu_conv2d_lut_s16": Conv2dS16Params, "mcu_depthwise_conv2d_lut_s16": DwS16Params,
           "mcu_linear_lut_s16": LinearS16Params}
data_modes = st.sampled_from(["uniform", "small", "extremes"])
biases = st.sampled_from(["none", "small", "large"])


def _lib():
    handle = cb.lib()
    for name, params in _PARAMS.items():
        fn = getattr(handle, name)
        fn.argtypes = [ctypes.POINTER(cb.Context), ctypes.POINTER(params), ctypes.POINTER(cb.PerChannelQuant),
                       ctypes.c_int32, _P, _P, _P, _P, _P]
        fn.restype = ctypes.c_int
    handle.mcu_conv2d_lut_s16_get_buffer_size.argtypes = [ctypes.POINTER(Conv2dS16Params)]
    handle.mcu_conv2d_lut_s16_get_buffer_size.restype = ctypes.c_int32
    return handle


def _quant(rng, cout: int, taps: int, centre: int):
    m = multipliers(rng, cout, False)
    s = np.clip(s16_shift(taps, centre) + rng.integers(-3, 4, size=cout), -31, SHIFT_MAX).astype(np.int32)
    return m, s


@CASES
@given(conv_s16_cases(), data_modes, biases, st.integers(-4, 4), acts, st.integers(0, 2**32 - 1), bit_widths,
       table_modes, st.booleans(), st.booleans())
def test_conv2d_lut_s16(case, data, bias, centre, act, seed, bits, mode, shared, column):
    """``column``: the scratch _get_buffer_size asks for (the decoded weights, then the 16x8 kernel's window
    column), else the decoded weights' alone."""
    rng = np.random.default_rng(seed)
    n, cin, cout, kh, kw = case["n"], case["cin"], case["cout"], case["kh"], case["kw"]
    x = int16_data(rng, (n, case["h"], case["w"], cin), data)
    rows = palette_rows(rng, cout, kh * kw * cin, bits, mode, shared)
    b = biases64(rng, cout, bias)
    m, s = _quant(rng, cout, kh * kw * cin, centre)
    out_shape = (n, case["oh"], case["ow"], cout)
    p = Conv2dS16Params(cb.Shape4(*x.shape), cb.Shape4(*out_shape), kh, kw, case["sh"], case["sw"], case["pt"],
                        case["pl"], case["dh"], case["dw"], act[0], act[1])
    lib = _lib()
    size = lib.mcu_conv2d_lut_s16_get_buffer_size(ctypes.byref(p))
    assert size == (rows.size if kh * kw == 1 else (rows.size + 3) // 4 * 4 + 2 * kh * kw * cin)
    status, out = run_lut(lib, "mcu_conv2d_lut_s16", None, p, bits, x, rows, b, cb.Quant(m, s, cout), out_shape,
                       size if column else rows.size, shared=shared, dtype=np.int16)
    assert status == MCU_OK
    assert_equal(out, conv2d_s16(x, rows.reshape(cout, kh, kw, cin), b, m, s, stride=(case["sh"], case["sw"]),
                                 padding=(case["pt"], case["pl"]), dilation=(case["dh"], case["dw"]),
                                 out_hw=(case["oh"], case["ow"]), act_min=act[0], act_max=act[1]))


@CASES
@given(dw_cases(), data_modes, biases, st.integers(-4, 4), acts, st.integers(0, 2**32 - 1), bit_widths, table_modes,
       st.booleans())
def test_depthwise_conv2d_lut_s16(case, data, bias, centre, act, seed, bits, mode, shared):
    rng = np.random.default_rng(seed)
    n, cin, kh, kw = case["n"], case["cin"], case["kh"], case["kw"]
    cout = cin * case["mult"]
    x = int16_data(rng, (n, case["h"], case["w"], cin), data)
    rows = palette_rows(rng, cout, kh * kw, bits, mode, shared)  # a row per output channel: its kh * kw taps
    b = biases64(rng, cout, bias)
    m, s = _quant(rng, cout, kh * kw, centre)
    out_shape = (n, case["oh"], case["ow"], cout)
    p = DwS16Params(cb.Shape4(*x.shape), cb.Shape4(*out_shape), case["mult"], kh, kw, case["sh"], case["sw"],
                    case["pt"], case["pl"], case["dh"], case["dw"], act[0], act[1])
    status, out = run_lut(_lib(), "mcu_depthwise_conv2d_lut_s16", None, p, bits, x, rows, b, cb.Quant(m, s, cout),
                       out_shape, rows.size, shared=shared, dtype=np.int16)
    assert status == MCU_OK
    w = np.ascontiguousarray(rows.T).reshape(kh, kw, cout)
    assert_equal(out, depthwise_conv2d_s16(x, w, b, m, s, ch_mult=case["mult"], stride=(case["sh"], case["sw"]),
                                           padding=(case["pt"], case["pl"]), dilation=(case["dh"], case["dw"]),
                                           out_hw=(case["oh"], case["ow"]), act_min=act[0], act_max=act[1]))


@CASES
@given(st.integers(1, 3), st.one_of(st.integers(1, 40), st.sampled_from([512, 513])), st.integers(1, 12), data_modes,
       biases, st.integers(-4, 4), acts, st.integers(0, 2**32 - 1), bit_widths, table_modes, st.booleans(),
       st.sampled_from(["row", "rows", "whole"]))
def test_linear_lut_s16(batch, fin, fout, data, bias, centre, act, seed, bits, mode, shared, scratch):
    """A row a pass in one row's scratch, several (the last pass shorter) in a few rows', all at once."""
    rng = np.random.default_rng(seed)
    x = int16_data(rng, (batch, fin), data)
    rows = palette_rows(rng, fout, fin, bits, mode, shared)
    b = biases64(rng, fout, bias)
    m, s = _quant(rng, fout, fin, centre)
    p = LinearS16Params(batch, fin, fout, act[0], act[1])
    size = {"row": fin, "rows": fin * min(fout, 3) + fin - 1, "whole": rows.size}[scratch]
    status, out = run_lut(_lib(), "mcu_linear_lut_s16", None, p, bits, x, rows, b, cb.Quant(m, s, fout), (batch, fout),
                       size, shared=shared, dtype=np.int16)
    assert status == MCU_OK
    assert_equal(out, linear_s16(x, rows, b, m, s, act_min=act[0], act_max=act[1]))


def test_refusals():
    """A scratch one byte short of a decoded row, a bad palette word, a scratch over the output: refused
    before any output is written."""
    lib, rng = _lib(), np.random.default_rng(3)
    x = int16_data(rng, (2, 6), "uniform")
    rows = palette_rows(rng, 4, 6, 3, "random")
    b, q = np.zeros(4, dtype=np.int64), cb.Quant(2**30, -1, 4)
    p = LinearS16Params(2, 6, 4, -32768, 32767)
    out = np.zeros((2, 4), dtype=np.int16)
    short = run_lut(lib, "mcu_linear_lut_s16", None, p, 3, x, rows, b, q, None, 5, out=out)
    assert short[0] == MCU_ERR_BUFFER_TOO_SMALL
    for word in (1, 5, 16 | 5, 32 | 3):
        assert run_lut(lib, "mcu_linear_lut_s16", None, p, word, x, rows, b, q, None, 24, out=out,
                       packed_bits=3)[0] == MCU_ERR_INVALID_ARG
    assert not out.any()
    # a scratch whose first bytes are the output's: decoding would write over it
    arena = np.zeros(72, dtype=np.int8)
    out12 = arena[:24].view(np.int16)
    indices, tables = pack_palette(palette_rows(rng, 12, 6, 2, "random"), 2)
    ctx = cb.Context(arena.ctypes.data, arena.size)
    p12, q12 = LinearS16Params(1, 6, 12, -32768, 32767), cb.Quant(2**30, -1, 12)
    assert lib.mcu_linear_lut_s16(ctypes.byref(ctx), ctypes.byref(p12), ctypes.byref(q12.struct), 2, ptr(x[:1].copy()),
                                  ptr(indices), ptr(tables), ptr(np.zeros(12, dtype=np.int64)),
                                  ptr(out12)) == MCU_ERR_INVALID_ARG
