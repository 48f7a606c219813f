"""Convolutions: conv1d (dilated, causal as users write it), grouped convolution beyond
depthwise, conv_transpose1d/2d, fp32 and int8.

* Kernels: mcu_conv_transpose2d_f32 against PyTorch, mcu_conv_transpose2d_s8 against its Python
  reference bit for bit (and that reference against PyTorch on dequantized values); 1-D shaped,
  dilated windows through every int8 convolution path of the 2-D kernels a Conv1d runs on (plain C,
  the DSP paths in the emulated build, the packed kernel).
* Models through ``mcu.compile`` on the host: fp32 against eager PyTorch, int8 against the Python
  integer reference with zero differences and no fp32 fallback; the program interpreter and the
  generated C agree bit for bit.
* One model per family on the simulated Cortex-M33 (mps2-an505).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbind  # noqa: E402
import cbind_s8 as cb  # noqa: E402
import s8_cases as base  # noqa: E402
from cbind import (  # noqa: E402
    MCU_ERR_INVALID_ARG,
    MCU_ERR_NULL_POINTER,
    MCU_ERR_SHAPE,
    MCU_OK,
    Conv2dParams,
    Shape4,
    ptr,
)
from mcu.reference import arith  # noqa: E402
from mcu.reference.conv import conv2d_s8  # noqa: E402
from mcu.reference.conv import conv_transpose2d_s8, transposed_out_size  # noqa: E402
from repo import requires_qemu  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_P = ctypes.c_void_p


def _fn(handle, name: str, n: int):
    fn = getattr(handle, name)
    fn.argtypes = [_P] * n
    fn.restype = ctypes.c_int
    return fn


# --- transposed convolution: kernels ----------------------------------------------------------------


@st.composite
def transposed_cases(draw):
    groups = draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    # PyTorch: padding at most dilation * (kernel - 1) keeps the output non-empty; output_padding below
    # max(stride, dilation)
    pt, pl = draw(st.integers(0, dh * (kh - 1))), draw(st.integers(0, dw * (kw - 1)))
    oph, opw = draw(st.integers(0, max(sh, dh) - 1)), draw(st.integers(0, max(sw, dw) - 1))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    while transposed_out_size(h, kh, sh, pt, dh, oph) < 1:
        h += 1
    while transposed_out_size(w, kw, sw, pl, dw, opw) < 1:
        w += 1
    oh, ow = transposed_out_size(h, kh, sh, pt, dh, oph), transposed_out_size(w, kw, sw, pl, dw, opw)
    return dict(n=draw(st.integers(1, 2)), groups=groups, icg=draw(st.integers(1, 5)), ocg=draw(st.integers(1, 4)),
                kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, oph=oph, opw=opw, h=h, w=w, oh=oh, ow=ow,
                seed=draw(st.integers(0, 2**32 - 1)))


def _ohwi(w_torch: np.ndarray, groups: int) -> np.ndarray:
    """PyTorch's transposed weights [in_c, out_c/g, kh, kw] -> OHWI [out_c][kh][kw][in_c/g]."""
    in_c, ocg, kh, kw = w_torch.shape
    icg = in_c // groups
    return np.ascontiguousarray(w_torch.reshape(groups, icg, ocg, kh, kw).transpose(0, 2, 3, 4, 1)
                                .reshape(groups * ocg, kh, kw, icg))


@SETTINGS
@given(case=transposed_cases(), bias=st.booleans(), act=st.sampled_from([None, (0.0, None), (-0.5, 0.5)]))
def test_conv_transpose2d_f32_matches_torch(case, bias: bool, act) -> None:
    rng = np.random.default_rng(case["seed"])
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    x = rng.standard_normal((case["n"], g * icg, case["h"], case["w"]))
    wt = rng.standard_normal((g * icg, ocg, case["kh"], case["kw"]))
    b = rng.standard_normal(g * ocg) if bias else None
    kw = dict(stride=(case["sh"], case["sw"]), padding=(case["pt"], case["pl"]),
              output_padding=(case["oph"], case["opw"]), groups=g, dilation=(case["dh"], case["dw"]))
    want = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(wt), None if b is None else torch.from_numpy(b),
                              **kw)
    size = F.conv_transpose2d(torch.from_numpy(np.abs(x)), torch.from_numpy(np.abs(wt)),
                              None if b is None else torch.from_numpy(np.abs(b)), **kw)
    lo, hi = act if act is not None else (None, None)
    want = (want if act is None else want.clamp(lo, hi)).permute(0, 2, 3, 1).numpy()
    xc = np.ascontiguousarray(x.transpose(0, 2, 3, 1), np.float32)
    wc = _ohwi(wt, g).astype(np.float32)
    bc = None if b is None else b.astype(np.float32)
    out = np.full(want.shape, np.nan, np.float32)
    p = Conv2dParams(input=Shape4(case["n"], case["h"], case["w"], g * icg),
                     output=Shape4(case["n"], case["oh"], case["ow"], g * ocg), kernel_h=case["kh"],
                     kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"],
                     pad_left=case["pl"], dilation_h=case["dh"], dilation_w=case["dw"], groups=g,
                     act_min=-np.inf if lo is None else lo, act_max=np.inf if hi is None else hi)
    assert _fn(cbind.lib(), "mcu_conv_transpose2d_f32", 5)(ctypes.byref(p), ptr(xc), ptr(wc), ptr(bc),
                                                          ptr(out)) == MCU_OK
    tol = 1e-5 * (size.permute(0, 2, 3, 1).numpy() + 1.0)
    assert np.all(np.abs(out - want) <= tol), np.max(np.abs(out - want))


def _s8_case(case, rng, data, wmode, bias_kind, shift, pc, in_zp, out_zp, act):
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    cin, cout = g * icg, g * ocg
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], cin), data)
    w = base.weights(rng, (cout, case["kh"], case["kw"], icg), wmode)
    b = base.biases(rng, cout, bias_kind)
    # every output sums about (kh/sh)*(kw/sw)*icg products
    taps = max(1, (case["kh"] // case["sh"]) * (case["kw"] // case["sw"]) * icg)
    m, s = base.per_channel(rng, cout, base.shift_for(shift, taps), pc)
    params = dict(input=x.shape, output=(case["n"], case["oh"], case["ow"], cout), kernel_h=case["kh"],
                  kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"],
                  pad_left=case["pl"], dilation_h=case["dh"], dilation_w=case["dw"], groups=g, input_offset=-in_zp,
                  output_offset=out_zp, act_min=act[0], act_max=act[1])
    return x, w, b, m, s, params


def conv_transpose2d_c(x, w, b, quant: cb.Quant, params: dict, handle=None):
    p = cb._fields(cb.Conv2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    fn = _fn(handle or cbind.lib(), "mcu_conv_transpose2d_s8", 7)
    return fn(None, ctypes.byref(p), ctypes.byref(quant.struct), ptr(x), ptr(w), ptr(b), ptr(out)), out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=transposed_cases(), data=base.data_modes, wmode=base.weight_modes, bias_kind=base.bias_kinds,
       shift=base.conv_shift_centres, pc=st.sampled_from(["same", "varied"]), in_zp=base.zero_points,
       out_zp=base.zero_points, act=base.act_bounds())
def test_conv_transpose2d_s8_equals_reference(case, data, wmode, bias_kind, shift, pc, in_zp, out_zp, act) -> None:
    rng = np.random.default_rng(case["seed"])
    x, w, b, m, s, params = _s8_case(case, rng, data, wmode, bias_kind, shift, pc, in_zp, out_zp, act)
    status, out = conv_transpose2d_c(x, w, b, cb.Quant(m, s, w.shape[0]), params)
    assert status == MCU_OK
    base.assert_equal(out, conv_transpose2d_s8(x, w, b, m, s, **params))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(case=transposed_cases(), wide=st.sampled_from([1, 1, 4, 9]), data=base.data_modes, wmode=base.weight_modes,
       bias_kind=base.bias_kinds, in_zp=base.zero_points, out_zp=base.zero_points, act=base.act_bounds())
def test_conv_transpose2d_s8_dsp_path_equals_reference(emulated, case, wide, data, wmode, bias_kind, in_zp, out_zp,
                                                       act) -> None:
    """The dual-MAC path (DSP-emulated build): widened input pixels, group by group, tails of 1-3 lanes."""
    case = {**case, "icg": case["icg"] * wide}
    rng = np.random.default_rng(case["seed"])
    x, w, b, m, s, params = _s8_case(case, rng, data, wmode, bias_kind, None, "varied", in_zp, out_zp, act)
    status, out = conv_transpose2d_c(x, w, b, cb.Quant(m, s, w.shape[0]), params, handle=emulated)
    assert status == MCU_OK
    base.assert_equal(out, conv_transpose2d_s8(x, w, b, m, s, **params))


def conv_transpose2d_phased_c(x, w_ohwi, b, quant: cb.Quant, params: dict, handle=None):
    from mcu.reference.conv import phase_pack

    packed = np.ascontiguousarray(phase_pack(w_ohwi, params["stride_h"], params["stride_w"]))
    p = cb._fields(cb.Conv2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    fn = _fn(handle or cbind.lib(), "mcu_conv_transpose2d_phased_s8", 7)
    return fn(None, ctypes.byref(p), ctypes.byref(quant.struct), ptr(x), ptr(packed), ptr(b), ptr(out)), out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(case=transposed_cases(), wide=st.sampled_from([1, 1, 4, 7]), emulate=st.booleans(), data=base.data_modes,
       wmode=base.weight_modes, bias_kind=base.bias_kinds, shift=base.conv_shift_centres, in_zp=base.zero_points,
       out_zp=base.zero_points, act=base.act_bounds())
def test_conv_transpose2d_phased_s8_equals_reference(emulated, case, wide, emulate, data, wmode, bias_kind, shift,
                                                      in_zp, out_zp, act) -> None:
    """The by-phase kernel (dilation 1, one group; strides above the kernel leave phases with no tap),
    plain C and the dual-MAC path of the DSP-emulated build, equals the reference bit for bit."""
    case = {**case, "groups": 1, "dh": 1, "dw": 1, "icg": case["icg"] * wide,
            "pt": min(case["pt"], case["kh"] - 1), "pl": min(case["pl"], case["kw"] - 1),
            "oph": min(case["oph"], case["sh"] - 1), "opw": min(case["opw"], case["sw"] - 1)}
    while transposed_out_size(case["h"], case["kh"], case["sh"], case["pt"], 1, case["oph"]) < 1:
        case["h"] += 1
    while transposed_out_size(case["w"], case["kw"], case["sw"], case["pl"], 1, case["opw"]) < 1:
        case["w"] += 1
    case["oh"] = transposed_out_size(case["h"], case["kh"], case["sh"], case["pt"], 1, case["oph"])
    case["ow"] = transposed_out_size(case["w"], case["kw"], case["sw"], case["pl"], 1, case["opw"])
    rng = np.random.default_rng(case["seed"])
    x, w, b, m, s, params = _s8_case(case, rng, data, wmode, bias_kind, shift, "varied", in_zp, out_zp, act)
    status, out = conv_transpose2d_phased_c(x, w, b, cb.Quant(m, s, w.shape[0]), params,
                                            handle=emulated if emulate else None)
    assert status == MCU_OK
    base.assert_equal(out, conv_transpose2d_s8(x, w, b, m, s, **params))


def test_phase_pack_round_trip_and_refusals() -> None:
    from mcu.reference.conv import phase_pack, phase_unpack

    w = np.arange(3 * 5 * 4 * 2, dtype=np.int64).reshape(3, 5, 4, 2).astype(np.int8)
    for sh, sw in [(1, 1), (2, 3), (3, 2), (6, 5)]:
        packed = phase_pack(w, sh, sw)
        assert packed.size == w.size and sorted(packed.tolist()) == sorted(w.reshape(-1).tolist())
        np.testing.assert_array_equal(phase_unpack(packed, w.shape, sh, sw), w)
    x = np.zeros((1, 2, 2, 2), np.int8)
    q = cb.Quant(2**30, -1, 3)
    params = dict(input=x.shape, output=(1, 5, 5, 3), kernel_h=5, kernel_w=4, stride_h=2, stride_w=2, pad_top=1,
                  pad_left=0, dilation_h=2, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
                  act_max=127)
    assert conv_transpose2d_phased_c(x, w, None, q, params)[0] == MCU_ERR_INVALID_ARG  # dilation: not by phase


@SETTINGS
@given(case=transposed_cases(), in_zp=st.sampled_from([-128, 127, 0, 5]), out_zp=st.sampled_from([-128, 127, 0, -3]))
def test_conv_transpose2d_s8_reference_is_the_float_op_requantized(case, in_zp: int, out_zp: int) -> None:
    """TRANSPOSE_CONV semantics: the reference equals PyTorch's conv_transpose2d on the dequantized
    tensors, quantized to the output scale, within the one step the fixed-point multiplier may round."""
    rng = np.random.default_rng(case["seed"])
    g, icg, ocg = case["groups"], case["icg"], case["ocg"]
    cin, cout = g * icg, g * ocg
    x = rng.integers(-128, 128, (case["n"], case["h"], case["w"], cin)).astype(np.int8)
    w = rng.integers(-127, 128, (cout, case["kh"], case["kw"], icg)).astype(np.int8)
    s_in, s_w, s_out = 0.02, rng.uniform(0.002, 0.02, cout), 0.05
    bias_real = rng.standard_normal(cout) * 0.3
    bias_q = np.round(bias_real / (s_in * s_w)).astype(np.int32)
    m, s = arith.quantize_multipliers(s_in * s_w / s_out)
    params = dict(output=(case["n"], case["oh"], case["ow"], cout), stride_h=case["sh"], stride_w=case["sw"],
                  pad_top=case["pt"], pad_left=case["pl"], dilation_h=case["dh"], dilation_w=case["dw"], groups=g,
                  input_offset=-in_zp, output_offset=out_zp)
    got = conv_transpose2d_s8(x, w, bias_q, m, s, **params).astype(np.int64)
    xr = torch.from_numpy((x.astype(np.float64) - in_zp) * s_in).permute(0, 3, 1, 2)
    wr = w.astype(np.float64) * s_w[:, None, None, None]  # OHWI, per output channel
    wt = torch.from_numpy(wr.reshape(g, ocg, case["kh"], case["kw"], icg).transpose(0, 4, 1, 2, 3)
                          .reshape(cin, ocg, case["kh"], case["kw"]).copy())
    real = F.conv_transpose2d(xr, wt, torch.from_numpy(bias_q * s_in * s_w), stride=(case["sh"], case["sw"]),
                              padding=(case["pt"], case["pl"]), output_padding=(case["oph"], case["opw"]),
                              groups=g, dilation=(case["dh"], case["dw"]))
    want = np.clip(np.round(real.permute(0, 2, 3, 1).numpy() / s_out) + out_zp, -128, 127)
    assert np.max(np.abs(got - want)) <= 1


def test_conv_transpose2d_kernels_check_their_arguments() -> None:
    lib = cbind.lib()
    x = np.ones((1, 2, 2, 2), np.int8)
    w = np.ones((2, 3, 3, 2), np.int8)
    q = cb.Quant(2**30, -1, 2)
    good = dict(input=x.shape, output=(1, 4, 4, 2), kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, pad_top=1,
                pad_left=1, dilation_h=1, dilation_w=1, groups=1, input_offset=0, output_offset=0, act_min=-128,
                act_max=127)
    assert conv_transpose2d_c(x, w, None, q, good)[0] == MCU_OK
    assert conv_transpose2d_c(x, w, None, q, {**good, "stride_h": 0})[0] == MCU_ERR_INVALID_ARG
    assert conv_transpose2d_c(x, w, None, q, {**good, "groups": 3})[0] == MCU_ERR_SHAPE
    assert conv_transpose2d_c(x, w, None, q, {**good, "output": (2, 4, 4, 2)})[0] == MCU_ERR_SHAPE
    assert conv_transpose2d_c(x, w, None, q, {**good, "input_offset": 129})[0] == MCU_ERR_INVALID_ARG
    p = cb._fields(cb.Conv2dS8Params, good)
    fn = _fn(lib, "mcu_conv_transpose2d_s8", 7)
    assert fn(None, ctypes.byref(p), ctypes.byref(q.struct), None, ptr(w), None, ptr(x)) == MCU_ERR_NULL_POINTER
    buf = np.zeros(64, np.int8)  # the output may not overlap the input, even starting before it
    assert fn(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(buf[8:]), ptr(w), None, ptr(buf)) == \
        MCU_ERR_INVALID_ARG
    xf, wf = np.ones((1, 2, 2, 2), np.float32), np.ones((2, 3, 3, 2), np.float32)
    pf = Conv2dParams(input=Shape4(1, 2, 2, 2), output=Shape4(1, 4, 4, 2), kernel_h=3, kernel_w=3, stride_h=2,
                      stride_w=2, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, groups=1, act_min=-np.inf,
                      act_max=np.nan)
    ff = _fn(lib, "mcu_conv_transpose2d_f32", 5)
    out = np.zeros((1, 4, 4, 2), np.float32)
    assert ff(ctypes.byref(pf), ptr(xf), ptr(wf), None, ptr(out)) == MCU_ERR_INVALID_ARG  # NaN clamp bound
    pf.act_max = np.inf
    assert ff(ctypes.byref(pf), ptr(xf), ptr(wf), None, ptr(out)) == MCU_OK
    assert np.all(out[0, 1::2, 1::2] == 2.0 * np.array([[4, 2], [2, 1]])[..., None])  # taps reaching each pixel


# --- conv1d: the 2-D kernels with a window one row high ---------------------------------------------


@st.composite
def conv1d_cases(draw):
    k, stride, dil = draw(st.integers(1, 7)), draw(st.integers(1, 3)), draw(st.integers(1, 8))
    pad = draw(st.integers(0, dil * (k - 1)))
    shortest = max(1, dil * (k - 1) + 1 - 2 * pad)  # one output at least (up to 49 for k 7, dilation 8)
    length = draw(st.integers(shortest, max(shortest, 40)))
    groups = draw(st.sampled_from([1, 1, 2, 4]))
    return dict(k=k, stride=stride, dil=dil, pad=pad, length=length, groups=groups,
                icg=draw(st.sampled_from([1, 3, 4, 8, 16])), ocg=draw(st.integers(1, 9)),
                out_len=(length + 2 * pad - dil * (k - 1) - 1) // stride + 1, seed=draw(st.integers(0, 2**32 - 1)))


@pytest.fixture(scope="module")
def emulated():
    """The kernels built with the DSP paths emulated on the host (tests/kernels/test_kernels_s8_opt.py)."""
    from host_builds import build_emulated_lib

    return ctypes.CDLL(str(build_emulated_lib()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(case=conv1d_cases(), data=base.data_modes, in_zp=base.zero_points, out_zp=base.zero_points,
       act=base.act_bounds())
def test_dilated_conv1d_on_every_int8_convolution_path(emulated, case, data, in_zp, out_zp, act) -> None:
    """The plain C kernel, its DSP paths and the packed kernel (groups 1) honour dilation exactly."""
    rng = np.random.default_rng(case["seed"])
    g = case["groups"]
    cin, cout = g * case["icg"], g * case["ocg"]
    x = base.int8_data(rng, (1, 1, case["length"], cin), data)
    w = base.weights(rng, (cout, 1, case["k"], case["icg"]), "symmetric")
    b = base.biases(rng, cout, "small")
    m, s = base.per_channel(rng, cout, base.shift_for(None, case["k"] * case["icg"]), "varied")
    params = dict(input=x.shape, output=(1, 1, case["out_len"], cout), kernel_h=1, kernel_w=case["k"], stride_h=1,
                  stride_w=case["stride"], pad_top=0, pad_left=case["pad"], dilation_h=1, dilation_w=case["dil"],
                  groups=g, input_offset=-in_zp, output_offset=out_zp, act_min=act[0], act_max=act[1])
    want = conv2d_s8(x, w, b, m, s, **params)
    q = cb.Quant(m, s, cout)
    p = cb._fields(cb.Conv2dS8Params, params)
    for handle in (cbind.lib(), emulated):
        out = np.zeros(want.shape, np.int8)
        fn = _fn(handle, "mcu_conv2d_s8", 7)
        assert fn(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(w), ptr(b), ptr(out)) == MCU_OK
        base.assert_equal(out, want)
    if g == 1:
        from mcu.backends.optimized.tuned import pack_layer

        stream = np.ascontiguousarray(pack_layer(w.reshape(cout, -1), b, q.m, q.s, out_zp), np.int32)
        for handle in (cbind.lib(), emulated):
            out = np.zeros(want.shape, np.int8)
            fn = _fn(handle, "mcu_conv2d_packed_s8", 5)
            assert fn(None, ctypes.byref(p), ptr(x), ptr(stream), ptr(out)) == MCU_OK
            base.assert_equal(out, want)


# --- grouped convolution: mcu_conv2d_grouped_s8 -------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(case=base.conv_cases(), groups=st.integers(2, 5), wide=st.sampled_from([1, 1, 4]), emulate=st.booleans())
def test_grouped_conv2d_s8_equals_reference(emulated, case, groups: int, wide: int, emulate: bool) -> None:
    """The grouped kernel, plain and on the DSP-emulated dual-MAC path (group windows of any width,
    strides, dilations, paddings, extremes), equals the general kernel's reference bit for bit."""
    rng = np.random.default_rng(case["seed"])
    icg, ocg = case["icg"] * wide, case["ocg"]
    cin, cout = groups * icg, groups * ocg
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = base.weights(rng, (cout, case["kh"], case["kw"], icg), case["wmode"])
    b = base.biases(rng, cout, case["bias"])
    m, s = base.per_channel(rng, cout, base.shift_for(case["shift"], case["kh"] * case["kw"] * icg),
                            case["per_channel"])
    params = dict(input=x.shape, output=(case["n"], case["out_h"], case["out_w"], cout), kernel_h=case["kh"],
                  kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"],
                  pad_left=case["pl"], dilation_h=case["dh"], dilation_w=case["dw"], groups=groups,
                  input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    q = cb.Quant(m, s, cout)
    p = cb._fields(cb.Conv2dS8Params, params)
    out = np.zeros(params["output"], np.int8)
    fn = _fn(emulated if emulate else cbind.lib(), "mcu_conv2d_grouped_s8", 7)
    assert fn(None, ctypes.byref(p), ctypes.byref(q.struct), ptr(x), ptr(w), ptr(b), ptr(out)) == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


def test_grouped_convolution_takes_the_grouped_kernel() -> None:
    from mcu.backends.portable.variants import select_variant

    _, cm, _ = compiled_model("resnext_grouped", "int8")
    grouped = [op for op in cm.graph.ops if op.kind == "conv2d" and op.attrs["groups"] > 1]
    assert grouped and all(select_variant(op, False).function == "mcu_conv2d_grouped_s8" for op in grouped)
    assert all(op.attrs.get("backend", "portable") == "portable" for op in grouped)  # packed kernels: groups 1


# --- models through the compiler (host) ------------------------------------------------------------


class Conv1dNet(torch.nn.Module):
    """conv1d as TCNs and audio models write it: causal left padding with F.pad, dilation, groups."""

    def __init__(self, c: int = 6, k: int = 3, dilation: int = 2, stride: int = 1, groups: int = 1,
                 padding: int = 0, causal: bool = True) -> None:
        super().__init__()
        self.causal = (k - 1) * dilation if causal else 0
        self.a = torch.nn.Conv1d(4, c, k, stride=stride, dilation=dilation, padding=padding)
        self.b = torch.nn.Conv1d(c, c, 3, padding=1, groups=groups)
        self.c = torch.nn.Conv1d(c, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(F.pad(x, (self.causal, 0))))
        return self.c(torch.relu(self.b(y)) + y)


class TransposedNet(torch.nn.Module):
    def __init__(self, one_d: bool, stride: int = 2, padding: int = 1, output_padding: int = 1, k: int = 3,
                 groups: int = 1, dilation: int = 1) -> None:
        super().__init__()
        conv = torch.nn.Conv1d if one_d else torch.nn.Conv2d
        convt = torch.nn.ConvTranspose1d if one_d else torch.nn.ConvTranspose2d
        self.enc = conv(3, 8, 3, stride=2, padding=1)
        self.dec = convt(8, 4, k, stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                         dilation=dilation)
        self.out = convt(4, 2, 2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.out(torch.relu(self.dec(torch.relu(self.enc(x))))))


class GroupedNet(torch.nn.Module):
    def __init__(self, groups: int = 2, dilation: int = 1) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.g = torch.nn.Conv2d(8, 12, 3, padding=dilation, dilation=dilation, groups=groups)
        self.h = torch.nn.Conv2d(12, 6, 1, groups=groups if 6 % groups == 0 else 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.h(F.relu6(self.g(torch.relu(self.a(x)))))


def with_batch_norm_stats(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial running statistics and affine parameters, so that folding them is visible."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return model


class ResidualNorm(torch.nn.Module):
    """A BatchNorm1d after a residual add: it runs on the Conv1d's [N, L, C] layout (no fold)."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.bn = torch.nn.Conv1d(4, 4, 3, padding=1), torch.nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.c(x)) + x)


HOST_MODELS = {
    "conv1d_causal_dilated": (lambda: Conv1dNet(), (1, 4, 24)),
    "conv1d_stride_pad_grouped": (lambda: Conv1dNet(c=8, k=5, dilation=1, stride=2, groups=4, padding=2,
                                                    causal=False), (2, 4, 31)),
    "conv1d_dilation_4": (lambda: Conv1dNet(c=4, k=2, dilation=4, groups=2), (1, 4, 20)),
    "conv_transpose1d": (lambda: TransposedNet(True), (1, 3, 16)),
    "conv_transpose1d_k4_s2_p1": (lambda: TransposedNet(True, k=4, padding=1, output_padding=0), (1, 3, 10)),
    "conv_transpose2d": (lambda: TransposedNet(False), (1, 3, 8, 8)),
    "conv_transpose2d_grouped_dilated": (lambda: TransposedNet(False, stride=3, padding=2, output_padding=2, k=3,
                                                               groups=2, dilation=2), (1, 3, 6, 7)),
    "conv1d_same_even_kernel": (lambda: torch.nn.Sequential(
        torch.nn.Conv1d(4, 6, 4, padding="same", dilation=3), torch.nn.ReLU(),
        torch.nn.Conv1d(6, 3, 2, padding="same")), (1, 4, 19)),
    "conv2d_same_even_kernel": (lambda: torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, (2, 4), padding="same"), torch.nn.ReLU6(),
        torch.nn.Conv2d(6, 6, 3, padding="same", groups=3)), (1, 3, 7, 9)),
    "conv1d_depthwise_separable": (lambda: torch.nn.Sequential(
        torch.nn.Conv1d(8, 8, 5, groups=8, dilation=2, padding=4), torch.nn.ReLU(),
        torch.nn.Conv1d(8, 16, 1), torch.nn.Hardtanh(0.0, 6.0)), (1, 8, 30)),
    "conv_transpose1d_batch_norm": (lambda: with_batch_norm_stats(torch.nn.Sequential(
        torch.nn.ConvTranspose1d(4, 4, 3, stride=2, bias=False), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
        torch.nn.Conv1d(4, 3, 3))), (1, 4, 9)),
    "conv_transpose2d_batch_norm": (lambda: with_batch_norm_stats(torch.nn.Sequential(
        torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(6),
        torch.nn.ReLU())), (1, 4, 5, 5)),
    "grouped_conv2d": (lambda: GroupedNet(2), (1, 3, 8, 8)),
    "grouped_conv2d_g4_dilated": (lambda: GroupedNet(4, dilation=2), (1, 3, 9, 7)),
}
_LOWERED: dict[tuple[str, str], tuple] = {}
# One xdist worker per model (tests/conftest.py): its lowering is shared by every board's tests.
GROUP_BY_EXAMPLE = True
_COMPILED: dict[tuple[str, str, str], tuple] = {}


def compiled_model(name: str, quantize: str, board: str = "mps2-an505"):
    """(model, compiled model, test inputs); captured and quantized once per model and mode, whatever the board."""
    from mcu.api import lower

    if (name, quantize) not in _LOWERED:
        make, shape = HOST_MODELS[name] if name in HOST_MODELS else DEVICE_MODELS[name]
        torch.manual_seed(0)
        model = make().eval()
        gen = torch.Generator().manual_seed(1)
        tests = [(torch.randn(*shape, generator=gen),) for _ in range(3)]
        calib = [(torch.randn(*shape, generator=gen),) for _ in range(16)] if quantize == "int8" else None
        lowered = lower(model, tests[0], quantize=quantize, calibration=calib, test_inputs=tests, name=name)
        _LOWERED[name, quantize] = (model, lowered, tests, calib)
    key = (name, quantize, board)
    if key not in _COMPILED:
        model, lowered, tests, calib = _LOWERED[name, quantize]
        _COMPILED[key] = (model, lowered.compile(board), tests, calib)
    return _COMPILED[key][:3]


def pt2e_model(name: str) -> torch.nn.Module:
    """The model quantized by pt2e with the calibration the compiled int8 model used (run by PyTorch)."""
    from mcu.quantize.flow import quantize_static

    model, _, tests, calib = _LOWERED[name, "int8"]
    return quantize_static(model, tests[0], calib)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == \
        np.ascontiguousarray(b).tobytes()


@pytest.mark.parametrize("name", sorted(HOST_MODELS))
def test_fp32_model_matches_eager_and_the_program_equals_the_c(name: str) -> None:
    model, cm, tests = compiled_model(name, "none")
    kinds = {op.kind for op in cm.graph.ops}
    assert ("conv_transpose2d" in kinds) == ("transpose" in name)
    for x in tests:
        want = model(*x).detach().numpy()
        got = cm.run(*x)[0].numpy()
        assert np.max(np.abs(got - want)) <= 1e-5 * max(1.0, float(np.max(np.abs(want))))
        for a, b in zip(cm.run_raw(*x), cm.run_raw_c(*x)):  # program interpreter vs generated C
            assert _same_bits(a, b)


@pytest.mark.parametrize("name", sorted(HOST_MODELS))
def test_int8_model_equals_the_integer_reference(name: str) -> None:
    model, cm, tests = compiled_model(name, "int8")
    assert cm.graph.fallbacks == []  # every convolution (and its ReLU) runs in int8
    for op in cm.graph.ops:  # by output phase unless dilated or grouped
        if op.kind == "conv_transpose2d":
            assert op.attrs.get("phased", False) == (op.attrs["dilation"] == (1, 1) and op.attrs["groups"] == 1)
    kinds = {op.kind for op in cm.graph.ops}
    assert "dequantize" not in kinds and "quantize" not in kinds
    for x in tests:
        reference = cm.reference_raw(*x)
        for program, c, r in zip(cm.run_raw(*x), cm.run_raw_c(*x), reference):
            assert r.dtype == np.int8
            np.testing.assert_array_equal(program, r)  # zero differences
            np.testing.assert_array_equal(c, r)
    # the int8 semantics are PyTorch's quantized model's: within one output step of it
    quantized, step = pt2e_model(name), cm.graph.outputs[0].quant.scale[0]
    for x in tests:
        got = cm.run(*x)[0].numpy()
        assert np.max(np.abs(got - quantized(*x).detach().numpy())) <= 1.01 * step


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_conv1d_runs_without_copies(quantize: str) -> None:
    """The views alias, the ReLUs fuse, the causal F.pad folds into the convolution's padding and the
    [N, L, C] layout flows from one Conv1d to the next: the only copy left is the model input's NHWC."""
    _, cm, _ = compiled_model("tcn_conv1d", quantize)
    counts = cm.graph.op_counts()
    assert all(op.attrs.get("alias") for op in cm.graph.ops if op.kind == "reshape")
    assert "clamp" not in counts and "pad" not in counts
    assert counts["conv2d"] == 5 and counts["layout"] == 1
    pads = [op.attrs["padding"] for op in cm.graph.ops if op.kind == "conv2d"]
    assert pads == [(0, 0), (0, 2), (0, 4), (0, 8), (0, 0)]  # (k - 1) * dilation on the left only


def test_batch_norm_folds_into_transposed_convolutions_and_runs_on_conv1d_layout() -> None:
    for name in ("conv_transpose1d_batch_norm", "conv_transpose2d_batch_norm"):
        for quantize in ("none", "int8"):
            assert "batch_norm" not in compiled_model(name, quantize)[1].graph.op_counts()
    import mcu

    torch.manual_seed(0)
    model = with_batch_norm_stats(ResidualNorm()).eval()
    x = torch.randn(1, 4, 11)
    cm = mcu.compile(model, (x,), board="mps2-an505")
    assert cm.graph.op_counts().get("batch_norm") == 1
    np.testing.assert_allclose(cm.run(x)[0].numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_unsupported_convolutions_fail_clearly() -> None:
    import mcu
    from mcu.errors import McuError

    class Conv3d(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = torch.nn.Conv3d(2, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c(x)

    with pytest.raises(McuError, match=r"3-D convolution is not supported .* at .*test_ops_conv.py:\d+"):
        mcu.compile(Conv3d().eval(), (torch.randn(1, 2, 3, 3, 3),), board="mps2-an505")


# --- one model per family on the simulated Cortex-M33 ----------------------------------------------


class TCN(torch.nn.Module):
    """Temporal convolution: causal dilated conv1d blocks with residuals (keyword-spotting sized)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Conv1d(10, 16, 1)
        self.blocks = torch.nn.ModuleList(torch.nn.Conv1d(16, 16, 3, dilation=d) for d in (1, 2, 4))
        self.head = torch.nn.Conv1d(16, 12, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.inp(x))
        for conv in self.blocks:
            y = torch.relu(conv(F.pad(y, ((conv.kernel_size[0] - 1) * conv.dilation[0], 0)))) + y
        return self.head(y)[:, :, -1]  # the last step: a causal network's prediction


class Autoencoder(torch.nn.Module):
    """Convolutional autoencoder: strided convolutions down, transposed convolutions up."""

    def __init__(self) -> None:
        super().__init__()
        self.e1, self.e2 = torch.nn.Conv2d(1, 8, 3, stride=2, padding=1), torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.d1 = torch.nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.d2 = torch.nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.d2(torch.relu(self.d1(torch.relu(self.e2(torch.relu(self.e1(x))))))))


class AudioDecoder(torch.nn.Module):
    """1-D decoder: conv_transpose1d upsampling of a feature sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1)
        self.b = torch.nn.ConvTranspose1d(8, 4, 5, stride=3, padding=1, output_padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.b(torch.relu(self.a(x))))


class ResNeXtBlock(torch.nn.Module):
    """Grouped (not depthwise) 3x3 convolution between pointwise layers, as in ResNeXt/RegNet."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.reduce, self.group = torch.nn.Conv2d(32, 16, 1), torch.nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.expand = torch.nn.Conv2d(16, 32, 1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.expand(torch.relu(self.group(torch.relu(self.reduce(y))))) + y)
        return self.fc(y.mean(dim=(2, 3)))


DEVICE_MODELS = {
    "tcn_conv1d": (TCN, (1, 10, 49)),
    "autoencoder_convt2d": (Autoencoder, (1, 1, 16, 16)),
    "decoder_convt1d": (AudioDecoder, (1, 16, 12)),
    "resnext_grouped": (ResNeXtBlock, (1, 3, 12, 12)),
}


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("name", sorted(DEVICE_MODELS))
def test_model_family_on_the_simulated_m33(name: str, quantize: str) -> None:
    model, cm, tests = compiled_model(name, quantize)
    assert cm.graph.fallbacks == []
    run = cm.simulate()
    assert run.passed and run.exit_code == 0, run.console[-2000:]
    for v, x in enumerate(tests):
        if quantize == "none":
            want = model(*x).detach().numpy()
            assert np.max(np.abs(run.outputs[v][0] - want)) <= 1e-4 * np.max(np.abs(want))
        else:
            for got, expected in zip(run.outputs_raw[v], cm.reference_raw(*x)):
                np.testing.assert_array_equal(got, cm.raw_outputs([expected])[0])  # zero differences
    print(f"\n{name} {quantize}: {run.instructions} instructions, flash {cm.build().flash_bytes} B, "
          f"arena {cm.memory.arena_size} B")


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("name", ["tcn_conv1d", "autoencoder_convt2d", "resnext_grouped"])
def test_int8_model_family_on_cortex_m55_helium(name: str) -> None:
    """The same int8 models on the M55 (mps3-an547): the kernels' Helium paths, zero differences."""
    _, cm, tests = compiled_model(name, "int8", board="mps3-an547")
    run = cm.simulate()
    assert run.passed and run.exit_code == 0, run.console[-2000:]
    for v, x in enumerate(tests):
        for got, expected in zip(run.outputs_raw[v], cm.reference_raw(*x)):
            np.testing.assert_array_equal(got, cm.raw_outputs([expected])[0])


@pytest.fixture(scope="module")
def interpreter_firmware():
    """The program interpreter firmware with every kernel (tests/program/test_program_qemu.py), built once."""
    from mcu.device.boards import load_board
    from mcu.program.device import build_interpreter_firmware

    return build_interpreter_firmware(load_board("mps2-an505"))


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("name", sorted(DEVICE_MODELS))
def test_program_files_on_the_interpreter_firmware(interpreter_firmware, name: str, quantize: str) -> None:
    """Program files (kernel ids 100-103) on the M33 interpreter: the generated-C firmware's bits."""
    from mcu.ir import NUMPY_DTYPES
    from mcu.layouts import to_memory_order
    from mcu.program.device import run_program

    _, cm, tests = compiled_model(name, quantize)
    run = run_program(cm.board, interpreter_firmware.elf, cm.program_image(bundle_tests=True).program)
    assert run.passed, run.console[-2000:]
    sim = cm.simulate()
    for v in range(len(tests)):
        for i, t in enumerate(cm.graph.outputs):
            got = run.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel)
            want = to_memory_order(sim.outputs_raw[v][i], t).astype(got.dtype)
            assert got.tobytes() == want.tobytes()
