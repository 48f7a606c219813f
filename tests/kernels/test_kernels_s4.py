"""The 4-bit weight kernels (w4a8: mcu_conv2d_s4, mcu_depthwise_conv2d_s4, mcu_linear_s4) against the
Python integer reference on the unpacked weights, over hypothesis-drawn shapes (odd channel and feature
counts, so rows and windows start mid-byte), strides, paddings, dilations, groups, zero points,
multipliers, shifts and weights at the 4-bit extremes; and the packing against its definition."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_INVALID_ARG, MCU_OK, ptr
from host_builds import build_emulated_lib
from cmsis_nn_host import Act, ConvParams, Dims, DwParams, FcParams, PerTensor, Tile, cmsis_nn_root, host_library
from mcu.ir import Op
from mcu.layouts import pack_s4
from mcu.plan.contracts import overlap_contracts
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8
from overlap import check_overlap, out_hw, random_quant, tensor, window_case
from s8_cases import (EXACT, act_bounds, assert_equal, bias_kinds, biases, conv_cases, conv_shift_centres, data_modes,
                      int8_data, per_channel, shift_for, zero_points)

_P = ctypes.c_void_p
_CP, _QP = ctypes.POINTER(cb.Context), ctypes.POINTER(cb.PerChannelQuant)
_SIGNATURES = {
    "mcu_conv2d_s4": ctypes.POINTER(cb.Conv2dS8Params),
    "mcu_depthwise_conv2d_s4": ctypes.POINTER(cb.DepthwiseConv2dS8Params),
    "mcu_linear_s4": ctypes.POINTER(cb.LinearS8Params),
}
s4_modes = st.sampled_from(["symmetric", "full", "extremes"])


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """The extension's build (the plain paths) and the DSP paths emulated on the host (the dual-MAC loop
    of Cortex-M4/M33/M55)."""
    handle = cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib()))
    for name, params in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = [_CP, params, _QP, _P, _P, _P, _P]
        fn.restype = ctypes.c_int
    return handle


def s4_weights(rng, shape, mode: str) -> np.ndarray:
    """4-bit codes: symmetric [-7, 7] (what the quantizer makes), the full [-8, 7], or only the extremes."""
    if mode == "extremes":
        return rng.choice(np.array([-8, -7, 7], dtype=np.int8), size=shape)
    low = -8 if mode == "full" else -7
    return rng.integers(low, 8, size=shape, dtype=np.int64).astype(np.int8)


def _run(lib, name: str, params_type, params: dict, x, w, b, q, out_shape, scratch: int = 0):
    """The kernel on ``w`` packed, with a context of ``scratch`` bytes (0: none)."""
    p = cb._fields(params_type, params)
    out = np.zeros(out_shape, dtype=np.int8)
    packed = np.ascontiguousarray(pack_s4(w))
    buf = np.zeros(max(scratch, 1), dtype=np.int8)
    ctx = ctypes.byref(cb.Context(buf.ctypes.data, scratch)) if scratch else None
    st_ = getattr(lib, name)(ctx, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed), ptr(b), ptr(out))
    return st_, out


@given(st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_pack_s4_is_two_codes_a_byte_low_first(count, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(-8, 8, size=count).astype(np.int8)
    packed = pack_s4(codes).view(np.uint8)
    assert packed.size == (count + 1) // 2
    low = (packed & 0xF).astype(np.int64)
    high = (packed >> 4).astype(np.int64)
    unpacked = np.stack([low, high], axis=1).reshape(-1)[:count]
    np.testing.assert_array_equal(np.where(unpacked > 7, unpacked - 16, unpacked), codes)
    if count % 2:
        assert high[-1] == 0
    with pytest.raises(ValueError):
        pack_s4(np.array([8], dtype=np.int8))


def _conv_scratch(lib, params: dict) -> int:
    """mcu_conv2d_s4_get_buffer_size: the scratch with which it widens its weights into the packed kernel's
    stream (0: the layer is not one the packed kernel takes)."""
    fn = lib.mcu_conv2d_s4_get_buffer_size
    fn.argtypes, fn.restype = [ctypes.POINTER(cb.Conv2dS8Params)], ctypes.c_int32
    return fn(params if isinstance(params, cb.Conv2dS8Params) else ctypes.byref(cb._fields(cb.Conv2dS8Params, params)))


@EXACT
@given(conv_cases(), s4_modes, st.sampled_from(["none", "stream"]))
def test_conv2d_s4(lib, case, wmode, scratch_kind):
    """Its own loops without scratch (four pixels at a time on DSP cores for windows of a multiple of 8 taps);
    with its _get_buffer_size of scratch (one group), the weights widened into the int8 packed kernel's stream
    and that kernel's paths."""
    rng = np.random.default_rng(case["seed"])
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    cin, cout = g * icg, g * ocg
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = s4_weights(rng, (cout, case["kh"], case["kw"], icg), wmode)
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"] * icg), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], groups=g, input_offset=-case["in_zp"],
        output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1],
    )
    scratch = _conv_scratch(lib, params) if scratch_kind == "stream" else 0
    assert g == 1 or _conv_scratch(lib, params) == 0
    status, out = _run(lib, "mcu_conv2d_s4", cb.Conv2dS8Params, params, x, w, b, cb.Quant(m, s, cout),
                       params["output"], scratch)
    assert status == MCU_OK
    assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@EXACT
@given(conv_cases(depthwise=True), s4_modes, st.booleans())
def test_depthwise_conv2d_s4(lib, case, wmode, widened):
    """Its own loop without scratch; with its _get_buffer_size of scratch, the weights widened to int8 and
    the int8 depthwise kernel's paths."""
    rng = np.random.default_rng(case["seed"])
    cin, cm = case["channels"], case["ch_mult"]
    cout = cin * cm
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = s4_weights(rng, (case["kh"], case["kw"], cout), wmode)
    b = biases(rng, cout, case["bias"])
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"]), case["per_channel"])
    params = dict(
        input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), ch_mult=cm, kernel_h=case["kh"],
        kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
        dilation_h=case["dh"], dilation_w=case["dw"], input_offset=-case["in_zp"], output_offset=case["out_zp"],
        act_min=case["act"][0], act_max=case["act"][1],
    )
    scratch = case["kh"] * case["kw"] * cout if widened else 0
    status, out = _run(lib, "mcu_depthwise_conv2d_s4", cb.DepthwiseConv2dS8Params, params, x, w, b,
                       cb.Quant(m, s, cout), params["output"], scratch)
    assert status == MCU_OK
    assert_equal(out, depthwise_conv2d_s8(x, w, b, m, s, **params))


@EXACT
@given(batch=st.one_of(st.just(1), st.integers(1, 4)),
       fin=st.one_of(st.integers(1, 70), st.integers(1, 80).map(lambda k: 8 * k)), fout=st.integers(1, 20),
       in_zp=zero_points,
       out_zp=zero_points, act=act_bounds(), bias=bias_kinds, shift=conv_shift_centres,
       pc=st.sampled_from(["same", "varied"]), data=data_modes, wmode=s4_modes, seed=st.integers(0, 2**32 - 1))
def test_linear_s4(lib, batch, fin, fout, in_zp, out_zp, act, bias, shift, pc, data, wmode, seed):
    """Any shape; one row of a multiple of 8 inputs (up to MCU_S8_COL_MAX) also as the DSP cores' three rows a
    pass on the weights' nibbles XOR 8."""
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (batch, fin), data)
    w = s4_weights(rng, (fout, fin), wmode)
    b = biases(rng, fout, bias)
    m, s = per_channel(rng, fout, shift_for(shift, fin), pc)
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = _run(lib, "mcu_linear_s4", cb.LinearS8Params, params, x, w, b, cb.Quant(m, s, fout),
                       (batch, fout))
    assert status == MCU_OK
    assert_equal(out, linear_s8(x, w, b, m, s, **params))


@settings(max_examples=25, deadline=None)
@given(groups=st.one_of(st.sampled_from([1, 32, 33, 64, 80]), st.integers(1, 80)),
       fout=st.one_of(st.sampled_from([3, 48, 49, 50, 51, 52, 99, 100, 101]), st.integers(3, 110)),
       in_zp=zero_points, out_zp=zero_points, act=act_bounds(), bias=bias_kinds, shift=conv_shift_centres,
       data=data_modes, wmode=s4_modes, seed=st.integers(0, 2**32 - 1))
def test_linear_s4_row_blocks(lib, groups, fout, in_zp, out_zp, act, bias, shift, data, wmode, seed):
    """One row of 8k inputs and more output channels than a block of the DSP cores' path holds (48): the
    blocks' edges (a last block of 49 or 50 channels), and rows of more than one chunk of 256 taps."""
    rng = np.random.default_rng(seed)
    fin = 8 * groups
    x = int8_data(rng, (1, fin), data)
    w = s4_weights(rng, (fout, fin), wmode)
    b = biases(rng, fout, bias)
    m, s = per_channel(rng, fout, shift_for(shift, fin), "varied")
    params = dict(batch=1, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = _run(lib, "mcu_linear_s4", cb.LinearS8Params, params, x, w, b, cb.Quant(m, s, fout), (1, fout))
    assert status == MCU_OK
    assert_equal(out, linear_s8(x, w, b, m, s, **params))


@pytest.mark.parametrize("xv, zp, wv", [(-128, 127, -8), (127, -128, -8), (-128, 127, 7), (127, -128, 7)])
def test_linear_s4_largest_chunk_sums(lib, xv, zp, wv):
    """Every product at its largest, |x + offset| = 255 and w = -8 or 7, over 640 taps: 256-tap chunks whose
    sums, 4096 times over on the DSP cores, come within 0.4 % of the int32 range."""
    fin, fout = 640, 5
    x = np.full((1, fin), xv, dtype=np.int8)
    w = np.full((fout, fin), wv, dtype=np.int8)
    w[1, ::3] = 0  # channels of other sums, one of them smaller
    b = np.arange(fout, dtype=np.int32) * 1000
    m, s = np.full(fout, 2**30, dtype=np.int32), np.full(fout, -14, dtype=np.int32)
    params = dict(batch=1, in_features=fin, out_features=fout, input_offset=-zp, output_offset=3,
                  act_min=-128, act_max=127)
    status, out = _run(lib, "mcu_linear_s4", cb.LinearS8Params, params, x, w, b, cb.Quant(m, s, fout), (1, fout))
    assert status == MCU_OK
    expected = linear_s8(x, w, b, m, s, **params)
    assert_equal(out, expected)
    assert len(set(expected.ravel().tolist())) > 1  # not every output saturated


def test_output_on_the_input_is_refused(lib):
    """Like the int8 window kernels, the s4 convolution refuses an output at or after its input's start (no
    contract allows one): an argument error, not wrong bytes."""
    x = np.arange(-20, 20, dtype=np.int8).reshape(1, 2, 4, 5)
    w = np.ones((5, 1, 1, 5), dtype=np.int8)
    q = cb.Quant(2**30, -1, 5)
    params = dict(input=x.shape, output=x.shape, kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
                  pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
                  act_max=127)
    p = cb._fields(cb.Conv2dS8Params, params)
    packed = pack_s4(w)
    bias = np.zeros(5, dtype=np.int32)
    assert lib.mcu_conv2d_s4(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(packed), ptr(bias),
                             ptr(x)) == MCU_ERR_INVALID_ARG


@settings(max_examples=40, deadline=None)
@given(window_case(), st.sampled_from(["none", "stream"]), st.integers(0, 2**31 - 1))
def test_conv2d_s4_window_overlap(lib, case, scratch_kind: str, seed: int) -> None:
    """mcu_conv2d_s4 (1x1 included: it has no pixel-buffer form), its own loops (four pixels at a time on DSP
    cores) and the packed kernel on the widened stream, with its output inside its input at every offset the planner's window contract allows
    equals the kernel on separate buffers."""
    n, c, h, w, oc, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = s4_weights(rng, (oc, k[0], k[1], c), "full")
    packed = np.ascontiguousarray(pack_s4(wt))
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    q = random_quant(oc, rng)
    params = cb._fields(cb.Conv2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, oc), kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1],
        pad_top=p[0], pad_left=p[1], dilation_h=1, dilation_w=1, groups=1, input_offset=3, output_offset=-5,
        act_min=-128, act_max=127))
    op = Op("conv2d", [tensor("x", (n, c, h, w), "int8"), tensor("w", (oc, c, k[0], k[1]), "int8", wt)],
            [tensor("y", (n, oc, oh, ow), "int8")],
            {"stride": s, "padding": p, "dilation": d, "groups": 1, "weight_bits": 4})

    size = _conv_scratch(lib, params) if scratch_kind == "stream" else 0
    buf = np.zeros(max(size, 1), dtype=np.int8)
    ctx = ctypes.byref(cb.Context(buf.ctypes.data, size)) if size else None

    def call(xp, yp):
        return lib.mcu_conv2d_s4(ctx, ctypes.byref(params), ctypes.byref(q.struct), xp, ptr(packed), ptr(bias), yp)
    check_overlap(call, x, op, n * oh * ow * oc, oc)


@settings(max_examples=40, deadline=None)
@given(window_case(depthwise=True), st.booleans(), st.integers(0, 2**31 - 1))
def test_depthwise_conv2d_s4_window_overlap(lib, case, widened: bool, seed: int) -> None:
    """mcu_depthwise_conv2d_s4, its own loop and the int8 kernel on widened weights, at every offset the
    window contract allows (no in-place form: the contract must not offer one)."""
    n, c, h, w, _, k, s, p, d = case
    rng = np.random.default_rng(seed)
    oh, ow = out_hw(h, w, k, s, p, d)
    x = rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)
    wt = s4_weights(rng, (k[0], k[1], c), "full")
    packed = np.ascontiguousarray(pack_s4(wt))
    bias = rng.integers(-5000, 5000, c).astype(np.int32)
    q = random_quant(c, rng)
    params = cb._fields(cb.DepthwiseConv2dS8Params, dict(
        input=(n, h, w, c), output=(n, oh, ow, c), ch_mult=1, kernel_h=k[0], kernel_w=k[1], stride_h=s[0],
        stride_w=s[1], pad_top=p[0], pad_left=p[1], dilation_h=1, dilation_w=1, input_offset=-7, output_offset=11,
        act_min=-100, act_max=120))
    op = Op("depthwise_conv2d", [tensor("x", (n, c, h, w), "int8"), tensor("w", (c, 1, k[0], k[1]), "int8", wt)],
            [tensor("y", (n, c, oh, ow), "int8")],
            {"stride": s, "padding": p, "dilation": d, "groups": c, "ch_mult": 1, "weight_bits": 4})
    assert all(lo is None for lo, _ in overlap_contracts(op)[0].intervals)
    scratch = np.zeros(k[0] * k[1] * c, dtype=np.int8)
    ctx = ctypes.byref(cb.Context(scratch.ctypes.data, scratch.size)) if widened else None

    def call(xp, yp):
        return lib.mcu_depthwise_conv2d_s4(ctx, ctypes.byref(params), ctypes.byref(q.struct), xp, ptr(packed),
                                           ptr(bias), yp)
    check_overlap(call, x, op, n * oh * ow * c, c)


# --------------------------------------------------------------------------
# against CMSIS-NN's s4 kernels (its real sources, their portable C paths built for the host)

CMSIS_S4_SOURCES = ("ConvolutionFunctions/arm_convolve_s4.c", "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s4.c",
                    "ConvolutionFunctions/arm_depthwise_conv_s4.c",
                    "ConvolutionFunctions/arm_nn_mat_mult_kernel_s4_s16.c",
                    "FullyConnectedFunctions/arm_fully_connected_s4.c",
                    "NNSupportFunctions/arm_q7_to_q15_with_offset.c")









@pytest.fixture(scope="module")
def cmsis():
    """CMSIS-NN's s4 kernels from the tree CMSIS_NN_PATH names, as a host library."""
    root = cmsis_nn_root(CMSIS_S4_SOURCES, "the s4 kernels (CMSIS-NN 6 or later)")
    support = sorted((root / "Source" / "NNSupportFunctions").glob("*_s4.c"))
    handle = host_library(root, [root / "Source" / s for s in CMSIS_S4_SOURCES] + support, "s4")
    for name in ("arm_convolve_s4", "arm_depthwise_conv_s4", "arm_fully_connected_s4"):
        getattr(handle, name).argtypes = [ctypes.c_void_p] * 11
        getattr(handle, name).restype = ctypes.c_int
    handle.arm_convolve_s4_get_buffer_size.argtypes = [ctypes.c_void_p] * 2
    handle.arm_convolve_s4_get_buffer_size.restype = ctypes.c_int32
    return handle


def _right_shifts(s):
    """Shifts of at most 0: with a left shift whose product leaves int32, CMSIS-NN's requantization wraps (the
    multiplication x * 2^shift unsaturated, as TFLite's reference) where ours saturates; a layer's real
    multiplier s_in s_w / s_out keeps quantized models away from that."""
    return np.minimum(s, 0)


def _quant_arrays(m, s):
    m, s = np.ascontiguousarray(m, dtype=np.int32), np.ascontiguousarray(s, dtype=np.int32)
    return m, s, cb.PerChannelQuant(m.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                    s.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)))




@settings(max_examples=80, deadline=None)
@given(conv_cases(), s4_modes, st.sampled_from(["none", "stream"]))
def test_conv2d_s4_equals_cmsis_nn(lib, cmsis, case, wmode, scratch_kind):
    """arm_convolve_s4 (one group) and mcu_conv2d_s4 on the same packed weights, its own loops and the packed
    kernel on the widened stream: the same bytes."""
    assume(case["groups"] == 1)
    rng = np.random.default_rng(case["seed"])
    cin, cout = case["icg"], case["ocg"]
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = s4_weights(rng, (cout, case["kh"], case["kw"], cin), wmode)
    b = biases(rng, cout, "small")
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"] * cin), case["per_channel"])
    s = _right_shifts(s)
    out_shape = (case["n"], case["out_h"], case["out_w"], cout)
    params = dict(input=x.shape, output=out_shape, kernel_h=case["kh"], kernel_w=case["kw"], stride_h=case["sh"],
                  stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"], dilation_h=case["dh"],
                  dilation_w=case["dw"], groups=1, input_offset=-case["in_zp"], output_offset=case["out_zp"],
                  act_min=case["act"][0], act_max=case["act"][1])
    scratch = _conv_scratch(lib, params) if scratch_kind == "stream" else 0
    status, ours = _run(lib, "mcu_conv2d_s4", cb.Conv2dS8Params, params, x, w, b, cb.Quant(m, s, cout), out_shape,
                        scratch)
    assert status == MCU_OK
    in_d, f_d = Dims(*x.shape), Dims(cout, case["kh"], case["kw"], cin)
    b_d, o_d = Dims(1, 1, 1, cout), Dims(*out_shape)
    size = cmsis.arm_convolve_s4_get_buffer_size(ctypes.byref(in_d), ctypes.byref(f_d))
    buf = np.zeros(max(size, 1), dtype=np.int8)
    ctx = cb.Context(buf.ctypes.data, size)
    conv = ConvParams(-case["in_zp"], case["out_zp"], Tile(case["sw"], case["sh"]), Tile(case["pl"], case["pt"]),
                       Tile(case["dw"], case["dh"]), Act(*case["act"]))
    keep = _quant_arrays(m, s)
    theirs = np.zeros(out_shape, dtype=np.int8)
    packed = np.ascontiguousarray(pack_s4(w))
    assert cmsis.arm_convolve_s4(ctypes.byref(ctx), ctypes.byref(conv), ctypes.byref(keep[2]), ctypes.byref(in_d),
                                 ptr(x), ctypes.byref(f_d), ptr(packed), ctypes.byref(b_d), ptr(b), ctypes.byref(o_d),
                                 ptr(theirs)) == 0
    assert_equal(ours, theirs)


@settings(max_examples=80, deadline=None)
@given(conv_cases(depthwise=True), s4_modes, st.booleans())
def test_depthwise_conv2d_s4_equals_cmsis_nn(lib, cmsis, case, wmode, widened):
    """arm_depthwise_conv_s4 and mcu_depthwise_conv2d_s4 on the same packed weights. With an odd number of
    input channels CMSIS-NN's kernel keeps its place in the weight stream by counting the taps it visits,
    so windows that the padding cuts short make it read other weights; and it steps (input_ch >> 1) * ch_mult
    bytes plus a nibble per tap, the stride of an odd number of output channels, which with a channel
    multiplier above 1 (an even number of output channels) is a byte short (arm_depthwise_conv_s4.c at
    /work/cmsis-nn, 2026). Those cases are left out; ours follow the reference there
    (test_depthwise_conv2d_s4)."""
    rng = np.random.default_rng(case["seed"])
    cin, cm = case["channels"], case["ch_mult"]
    whole = all((o - 1) * st_ + (k - 1) * d + 1 <= size and pad == 0 for o, st_, k, d, size, pad in (
        (case["out_h"], case["sh"], case["kh"], case["dh"], case["h"], case["pt"]),
        (case["out_w"], case["sw"], case["kw"], case["dw"], case["w"], case["pl"])))
    assume(cin % 2 == 0 or (whole and cm == 1))
    cout = cin * cm
    x = int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = s4_weights(rng, (case["kh"], case["kw"], cout), wmode)
    b = biases(rng, cout, "small")
    m, s = per_channel(rng, cout, shift_for(case["shift"], case["kh"] * case["kw"]), case["per_channel"])
    s = _right_shifts(s)
    out_shape = (case["n"], case["out_h"], case["out_w"], cout)
    params = dict(input=x.shape, output=out_shape, ch_mult=cm, kernel_h=case["kh"], kernel_w=case["kw"],
                  stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"], pad_left=case["pl"],
                  dilation_h=case["dh"], dilation_w=case["dw"], input_offset=-case["in_zp"],
                  output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1])
    scratch = case["kh"] * case["kw"] * cout if widened else 0
    status, ours = _run(lib, "mcu_depthwise_conv2d_s4", cb.DepthwiseConv2dS8Params, params, x, w, b,
                        cb.Quant(m, s, cout), out_shape, scratch)
    assert status == MCU_OK
    in_d, f_d = Dims(*x.shape), Dims(1, case["kh"], case["kw"], cout)
    b_d, o_d = Dims(1, 1, 1, cout), Dims(*out_shape)
    dw = DwParams(-case["in_zp"], case["out_zp"], cm, Tile(case["sw"], case["sh"]), Tile(case["pl"], case["pt"]),
                   Tile(case["dw"], case["dh"]), Act(*case["act"]))
    keep = _quant_arrays(m, s)
    theirs = np.zeros(out_shape, dtype=np.int8)
    packed = np.ascontiguousarray(pack_s4(w))
    ctx = cb.Context(None, 0)
    assert cmsis.arm_depthwise_conv_s4(ctypes.byref(ctx), ctypes.byref(dw), ctypes.byref(keep[2]), ctypes.byref(in_d),
                                       ptr(x), ctypes.byref(f_d), ptr(packed), ctypes.byref(b_d), ptr(b),
                                       ctypes.byref(o_d), ptr(theirs)) == 0
    assert_equal(ours, theirs)


@settings(max_examples=80, deadline=None)
@given(batch=st.integers(1, 4), fin=st.integers(1, 70), fout=st.integers(1, 20), in_zp=zero_points,
       out_zp=zero_points, act=act_bounds(), shift=conv_shift_centres, data=data_modes, wmode=s4_modes,
       seed=st.integers(0, 2**32 - 1))
def test_linear_s4_equals_cmsis_nn(lib, cmsis, batch, fin, fout, in_zp, out_zp, act, shift, data, wmode, seed):
    """arm_fully_connected_s4 takes one multiplier for the layer: ours with that multiplier on every channel."""
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (batch, fin), data)
    w = s4_weights(rng, (fout, fin), wmode)
    b = biases(rng, fout, "small")
    m, s = per_channel(rng, fout, shift_for(shift, fin), "same")
    m, s = np.full(fout, m[0]), _right_shifts(s)
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, ours = _run(lib, "mcu_linear_s4", cb.LinearS8Params, params, x, w, b, cb.Quant(m, s, fout), (batch, fout))
    assert status == MCU_OK
    in_d, f_d = Dims(batch, 1, 1, fin), Dims(fin, 1, 1, fout)
    b_d, o_d = Dims(1, 1, 1, fout), Dims(batch, 1, 1, fout)
    fc = FcParams(-in_zp, 0, out_zp, Act(*act))
    quant = PerTensor(int(m[0]), int(s[0]))
    theirs = np.zeros((batch, fout), dtype=np.int8)
    packed = np.ascontiguousarray(pack_s4(w))
    ctx = cb.Context(None, 0)
    assert cmsis.arm_fully_connected_s4(ctypes.byref(ctx), ctypes.byref(fc), ctypes.byref(quant), ctypes.byref(in_d),
                                        ptr(x), ctypes.byref(f_d), ptr(packed), ctypes.byref(b_d), ptr(b),
                                        ctypes.byref(o_d), ptr(theirs)) == 0
    assert_equal(ours, theirs)
