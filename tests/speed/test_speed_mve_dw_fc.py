"""M55 speed: the depthwise convolution's gather path (internal/mve_dw_s8.h: one byte gather and
one VMLADAVA per channel and pixel over a zero-point-padded ring of input rows, in chunks of channels) and
the fully connected row with input offset 128 (fully_connected/mve_fc_s8.h: the row inverted so that the offset
fits int8), on the simulated Cortex-M55 (mps3-an547 in QEMU), bit-exact with the Python reference.

Depthwise layers: channel counts that are multiples of 4 (the gather path; above 128 several chunks, and
chunks that the ring's size limits on wide images) and others (the previous path), kernels of up to 16
taps (the gather path) and more, strides 1 and 2, every padding, images from 1x1 to 48 wide, in place and
not. Fully connected rows: input lengths from 1 to 700 (tiny ones included), outputs around multiples of
4. The case builder of test_kernels_s8_mve draws zero-points at the ends (-128 often), extreme data and
weights, shifts with and without left shifts (those keep the previous path), clamps and saturating biases.
"""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mve_cases import MODES, WMODES, SHARES_KERNEL_COMPILES, compile_kernel, run_cases
from mve_cases import run_layers
from repo import requires_qemu

pytestmark = [requires_qemu, pytest.mark.qemu, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")]

# multiples of 4 (the gather path: one chunk, several chunks past 128, 300 ends in a partial chunk) and not
CHANNELS = [4, 8, 12, 16, 20, 28, 64, 132, 256, 300, 1, 3, 6, 17]


@st.composite
def dw_layers(draw):
    kh, kw = draw(st.sampled_from([(3, 3), (3, 3), (1, 1), (1, 3), (3, 1), (2, 2), (4, 4), (2, 5), (5, 5)]))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    inplace = draw(st.booleans())
    sh, sw = (1, 1) if inplace else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    c = draw(st.sampled_from(CHANNELS))
    most = max(1, 6000 // c)  # pixels: keeps the firmware's arrays small
    w = draw(st.integers(max(1, kw - 2 * pl), max(kw, min(48, most))))
    h = draw(st.integers(max(1, kh - 2 * pt), max(kh, min(48, most // w))))
    return ("dw", c, kh, kw, sh, sw, pt, pl, h, w, inplace, draw(st.sampled_from(MODES)))


@st.composite
def fc_layers(draw):
    nin = draw(st.one_of(st.integers(1, 20), st.sampled_from([64, 127, 128, 129, 640, 700])))
    nout = draw(st.sampled_from([1, 3, 4, 5, 8, 16, 33, 128]))
    return ("fc", 1, nin, nout, draw(st.sampled_from(MODES)), draw(st.sampled_from(WMODES)))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(dw_layers(), min_size=8, max_size=8), seed=st.integers(0, 2**32 - 1))
def test_depthwise_gather_path_equals_reference(layers, seed) -> None:
    run_layers(layers, seed, "speed_dw")


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(fc_layers(), min_size=12, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_linear_offset_128_equals_reference(layers, seed) -> None:
    run_layers(layers, seed, "speed_fc")


def test_wide_image_takes_several_ring_chunks() -> None:
    """A 48-wide image of 300 channels: the ring holds fewer channels than a chunk's table (several
    chunks, the last partial), in place and not, with padding: the layout's edge cases in one run."""
    layers = [("dw", 300, 3, 3, 1, 1, 1, 1, 3, 48, True, "uniform"),
              ("dw", 300, 3, 3, 2, 2, 1, 1, 4, 47, False, "ends"),
              ("dw", 8, 3, 3, 1, 1, 1, 1, 48, 48, True, "uniform"),
              ("dw", 16, 3, 3, 2, 2, 0, 0, 9, 48, False, "uniform")]
    run_layers(layers, 13, "speed_dw_wide")


@SHARES_KERNEL_COMPILES
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O2", "-O3"])
def test_gather_path_compiles_at_every_level(opt: str, tmp_path) -> None:
    """The row loop's assembly block leaves GCC registers to spare at every level, and the M55 objects
    contain the byte gather."""
    for kernel in ["mcu_depthwise_conv2d_s8.c", "mcu_depthwise_conv2d_s8_inplace.c", "mcu_linear_s8.c"]:
        asm = compile_kernel(kernel, opt, tmp_path, assembly=True)
        if "depthwise" in kernel:
            assert "vmladava.s8" in asm and "vldrb.u8 q0, [" in asm, kernel
        else:
            assert "vmvn" in asm, kernel


def test_invalid_requantization_is_refused_on_the_m55() -> None:
    """The parameter check that takes four channels at a time (mcu_mve_quant_all_valid) refuses a negative
    multiplier or a shift outside [-31, 30] in any channel, the predicated last step included, and accepts
    the ends of the ranges."""
    import numpy as np

    from mve_cases import Builder, Case

    b = Builder()
    x, wt = b.arr("int8_t", np.ones(8 * 6, dtype=np.int8)), b.arr("int8_t", np.ones(8 * 6 * 9, dtype=np.int8))
    expect = []
    for channel in (0, 3, 4, 5):  # 6 channels: the second step covers 4 and 5 only
        for bad_m, bad_s, ok in ((-1, 0, False), (0, 31, False), (0, -32, False), (0, 30, True), (0, -31, True)):
            m = np.full(6, 2**30, dtype=np.int32)
            s = np.full(6, -1, dtype=np.int32)
            m[channel] = bad_m if bad_m < 0 else m[channel]
            s[channel] = bad_s
            ms, ss = b.arr("int32_t", m), b.arr("int32_t", s)
            call_fc = f"""
    {{
        const mcu_linear_s8_params p = {{1, 8, 6, 128, 0, -128, 127}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work + 64, {x}, 8);
        status = mcu_linear_s8(&ctx, &p, &q, work + 64, {x}, NULL, work);
        emit(work, 0);
    }}"""
            call_dw = f"""
    {{
        const mcu_depthwise_conv2d_s8_params p = {{{{1, 2, 4, 6}}, {{1, 2, 4, 6}}, 1, 3, 3, 1, 1, 1, 1, 1, 1, 128, 0,
            -128, 127}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        status = mcu_depthwise_conv2d_s8(&ctx, &p, &q, {x}, {wt}, NULL, work);
    }}"""
            for call in (call_fc, call_dw):
                b.add(Case("check", call, np.zeros(0, dtype=np.int8)), 128)
                expect.append(0 if ok else 2)  # MCU_OK, MCU_ERR_INVALID_ARG
    got = run_cases(b, ["mcu_linear_s8.c", "mcu_depthwise_conv2d_s8.c"], "test_speed_mve_dw_fc_check")
    assert [got[i][1] for i in range(len(expect))] == expect
