"""The int8 kernels' plain loops of cores without a one-instruction 64-bit multiply-accumulate
(Cortex-M0+, ARMv6-M), bit-exact with the Python reference.

The host build takes the MCU_S8_WIDE paths (runtime_c/kernels/common/plain_s8.h), as the Cortex-M3
does, so the loops the M0+ runs are built here a second time with ``-DMCU_S8_NO_WIDE`` and the plain
kernels' property tests and overlap-contract tests run against that build. (On the boards, the M0+
firmware builds of tests/device/test_boards_m0plus.py run them natively.)
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import cbind_s8 as cb
import s8_cases as base
from cbind import MCU_OK, ptr
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8
from mcu.paths import kernels_dir
from host_builds import build_host_variant, load_bound
from s8_properties import (  # noqa: F401  (run here against the narrow build: the module's lib fixture)
    test_conv2d_s8, test_conv2d_s8_forward_overlap, test_depthwise_conv2d_s8, test_depthwise_s8_forward_and_inplace,
    test_linear_s8, test_pointwise_s8_both_directions)

REPO = Path(__file__).resolve().parents[2]
RT = REPO / "runtime_c"


def build_narrow_lib() -> Path:
    """The host library without the MCU_S8_WIDE paths."""
    return build_host_variant("MCU_S8_NO_WIDE", "narrow")


@pytest.fixture(scope="module")
def narrow():
    return load_bound(build_narrow_lib())


@pytest.fixture(scope="module", autouse=True)
def _use_narrow(narrow):
    """Route the shared ctypes helpers (cbind_s8.lib()) to the narrow build for this module."""
    original = cb.lib
    cb.lib = lambda: narrow
    yield
    cb.lib = original


@pytest.fixture(scope="module")
def lib(narrow):
    return narrow


def test_narrow_build_is_another_build() -> None:
    """The switch the build uses exists in the header that selects the paths."""
    text = (kernels_dir() / "common" / "plain_s8.h").read_text()
    assert "!defined(MCU_S8_NO_WIDE)" in text
    assert build_narrow_lib().exists()




@base.EXACT
@given(c=st.integers(1, 40), k=st.sampled_from([(5, 5), (3, 3), (1, 1), (1, 3), (3, 1), (2, 2), (7, 7), (1, 9)]),
       h=st.integers(1, 14), w=st.integers(1, 14), s=st.integers(1, 2), pt=st.integers(0, 4),
       pl=st.integers(0, 4), n=st.integers(1, 2), in_zp=base.zero_points, out_zp=base.zero_points,
       act=base.act_bounds(), bias=base.bias_kinds, shift=base.conv_shift_centres, data=base.data_modes,
       wmode=base.weight_modes, seed=st.integers(0, 2**32 - 1))
def test_depthwise_table_path(narrow, c, k, h, w, s, pt, pl, n, in_zp, out_zp, act, bias, shift, data, wmode, seed):
    """Depthwise layers through the M0+'s table path (convolution/dw_plain_s8.h) at the kernel sizes it takes:
    windows inside the input and crossing every border (images smaller than the kernel too), strides 1 and 2,
    shifts inside and outside the range of its requantization without a 64-bit multiply."""
    kh, kw = k
    assume(pt < kh and pl < kw)
    oh, ow = (h + 2 * pt - kh) // s + 1, (w + 2 * pl - kw) // s + 1
    assume(oh > 0 and ow > 0)
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (n, h, w, c), data)
    wt = base.weights(rng, (kh, kw, c), wmode)
    b = base.biases(rng, c, bias)
    m, sh = base.per_channel(rng, c, base.shift_for(shift, 25), "varied")
    params = dict(input=x.shape, output=(n, oh, ow, c), ch_mult=1, kernel_h=kh, kernel_w=kw, stride_h=s, stride_w=s,
                  pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = cb.depthwise_conv2d(x, wt, b, cb.Quant(m, sh, c), params)
    assert status == MCU_OK
    base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m, sh, **params))


@pytest.mark.parametrize("shifts", [(-1,), (-2,), (-1, -2, -23, -24), (-24,)])
def test_depthwise_5x5_table_path_requantization_ends(narrow, shifts: tuple[int, ...]) -> None:
    """The ends of the table path's requantization range (R = 1 has no borrow in K[1]'s words, R = 24 the
    largest K) with accumulators of both signs, multipliers that leave most outputs unsaturated (and the
    ends), output offsets at their ends."""
    rng = np.random.default_rng(len(shifts) * 100 - shifts[0])
    c = 24
    x = rng.integers(-128, 128, (1, 9, 9, c)).astype(np.int8)
    wt = rng.integers(-128, 128, (5, 5, c)).astype(np.int8)
    b = rng.integers(-(2**20), 2**20, c).astype(np.int32)
    sh = np.array([shifts[i % len(shifts)] for i in range(c)], dtype=np.int32)
    # multipliers that keep most outputs inside int8 (|acc| reaches ~2^20): the rounding shows there
    m = np.array([rng.integers(0, 2 ** min(31, 12 - s)) for s in sh], dtype=np.int64).astype(np.int32)
    m[:3] = [0, 2**30, 2**31 - 1]
    for out_zp, in_zp in ((-128, 127), (127, -128), (0, 0)):
        params = dict(input=x.shape, output=(1, 5, 5, c), ch_mult=1, kernel_h=5, kernel_w=5, stride_h=2, stride_w=2,
                      pad_top=2, pad_left=2, dilation_h=1, dilation_w=1, input_offset=-in_zp, output_offset=out_zp,
                      act_min=-128, act_max=127)
        status, out = cb.depthwise_conv2d(x, wt, b, cb.Quant(m, sh, c), params)
        assert status == MCU_OK
        base.assert_equal(out, depthwise_conv2d_s8(x, wt, b, m, sh, **params))


@base.EXACT
@given(c=st.sampled_from([1, 2, 3, 4, 5, 7, 8, 13, 16, 64, 255, 256, 257]), oc=st.integers(1, 19),
       h=st.integers(1, 4), w=st.integers(1, 4), n=st.integers(1, 2), in_zp=base.zero_points,
       out_zp=base.zero_points, act=base.act_bounds(), bias=base.bias_kinds, shift=base.conv_shift_centres,
       data=base.data_modes, wmode=base.weight_modes, seed=st.integers(0, 2**32 - 1))
def test_pointwise_two_channel_path(narrow, c, oc, h, w, n, in_zp, out_zp, act, bias, shift, data, wmode, seed):
    """The M0+'s pointwise pixels (common/plain_dot_s8.h: a 32-bit column, two output channels per column
    word, an odd last channel paired with itself) against the reference: input counts around the unrolled
    four and the column's limit (257 takes the kernel's pixel loop), zero points and shifts at their ends."""
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (n, h, w, c), data)
    wt = base.weights(rng, (oc, 1, 1, c), wmode)
    b = base.biases(rng, oc, bias)
    m, sh = base.per_channel(rng, oc, base.shift_for(shift, c), "varied")
    params = dict(input=x.shape, output=(n, h, w, oc), kernel_h=1, kernel_w=1, stride_h=1, stride_w=1, pad_top=0,
                  pad_left=0, dilation_h=1, dilation_w=1, groups=1, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    scratch = np.zeros(oc, dtype=np.int8)
    ctx = cb.Context(scratch.ctypes.data, oc)
    fields = cb._fields(cb.Conv2dS8Params, params)
    q = cb.Quant(m, sh, oc)
    y = np.zeros((n, h, w, oc), dtype=np.int8)
    lib = cb.lib()
    lib.mcu_conv2d_1x1_s8.argtypes = [ctypes.c_void_p] * 7
    status = lib.mcu_conv2d_1x1_s8(ctypes.addressof(ctx), ctypes.addressof(fields), ctypes.addressof(q.struct),
                                   ptr(x), ptr(wt), ptr(b), ptr(y))
    assert status == MCU_OK
    base.assert_equal(y, conv2d_s8(x, wt, b, m, sh, **params))
