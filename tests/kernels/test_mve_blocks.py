"""The Helium (MVE) block paths on the simulated Cortex-M55 (mps3-an547 in QEMU), bit-exact with the
Python reference: the 1x1 convolution computed a group of four output channels over a block of pixels
(mcu_mve_matrix_block, with its assembly loop for input channel counts that are multiples of 16 and
groups without left shifts, and the copied blocks of pixels when output and input overlap, forward
and backward), the convolution's blocks of im2col'd pixels on the same path, the depthwise
requantization that narrows eight channels at once, and the fully connected row whose dot products
add the input offset times the weights in the same accumulators.

Hypothesis draws the layers (channel counts at and around multiples of 4 and 16, pixel counts that
span several copied blocks, every overlap the kernel allows, extreme data, zero-points, shifts and
clamps through the case builder of test_kernels_s8_mve); each example builds one firmware with all
of its cases and compares every output byte with the reference.
"""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mve_cases import BLOCK_KERNELS, MODES, WMODES, SHARES_KERNEL_COMPILES, compile_kernel, run_layers
from repo import requires_qemu

BOARD = "mps3-an547"
pytestmark = [requires_qemu, pytest.mark.qemu, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")]


# cin: multiples of 16 (the assembly loop; 128 and more make blocks of at most 8 pixels when the
# buffers overlap) and others (the C loop); 1000 leaves one pixel per copied block.
CIN = [16, 32, 48, 64, 96, 128, 256, 1, 7, 17, 33, 100, 1000]
COUT = [1, 3, 4, 5, 8, 12, 16, 17, 31, 64, 130]


@st.composite
def pointwise_layers(draw):
    cin = draw(st.sampled_from(CIN))
    cout = draw(st.sampled_from(COUT if cin <= 128 else COUT[:6]))  # keeps the firmware's arrays small
    overlaps = ["apart"] + (["forward"] if cout <= cin else []) + (["backward"] if cout >= cin else [])
    return ("pw", cin, cout, draw(st.integers(1, 40)), draw(st.sampled_from(overlaps)),
            draw(st.sampled_from(MODES)))


@st.composite
def depthwise_layers(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    inplace = draw(st.booleans())
    sh, sw = (1, 1) if inplace else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, kh - 2 * pt), 8))
    w = draw(st.integers(max(1, kw - 2 * pl), 8))
    c = draw(st.sampled_from([1, 4, 7, 8, 9, 15, 16, 17, 24, 32, 40, 64, 72]))
    return ("dw", c, kh, kw, sh, sw, pt, pl, h, w, inplace, draw(st.sampled_from(MODES)))


@st.composite
def conv_layers(draw):
    """Windows of 16 * k bytes (the assembly loop) and others; blocks of one to many pixels."""
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    cin = draw(st.sampled_from([16, 32, 64, 1, 3, 8, 17]))
    while kh * kw * cin > 1024:
        cin //= 2
    dh, dw = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * pt), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pl), 9))
    return ("conv", cin, draw(st.sampled_from(COUT[:9])), kh, kw, draw(st.integers(1, 2)), draw(st.integers(1, 2)),
            pt, pl, dh, dw, h, w, draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from(MODES)),
            draw(st.sampled_from(WMODES)))


@st.composite
def linear_layers(draw):
    """One row (the offset-vector dot products when the input offset fits int8, the weight-sum path
    when it is 128: the case builder draws zero-point -128 often) and batches."""
    return ("fc", draw(st.sampled_from([1, 1, 1, 2, 3])), draw(st.sampled_from([1, 5, 15, 16, 17, 64, 100, 128, 640])),
            draw(st.sampled_from(COUT)), draw(st.sampled_from(MODES)), draw(st.sampled_from(WMODES)))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(pointwise_layers(), min_size=12, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_mve_pointwise_blocks_equal_reference(layers, seed) -> None:
    run_layers(layers, seed, "pw")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(depthwise_layers(), min_size=10, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_mve_depthwise_equal_reference(layers, seed) -> None:
    run_layers(layers, seed, "dw")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(conv_layers(), min_size=10, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_mve_conv_blocks_equal_reference(layers, seed) -> None:
    run_layers(layers, seed, "conv")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(linear_layers(), min_size=12, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_mve_linear_equal_reference(layers, seed) -> None:
    run_layers(layers, seed, "fc")


@SHARES_KERNEL_COMPILES
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O3"])
def test_mve_kernels_compile_at_every_level(opt: str, tmp_path) -> None:
    """The assembly blocks keep GCC a register to spare at every optimisation level (-Os and -O1 reserve
    more registers than the default -O2; the interpreter's code size is measured at -Os)."""
    for kernel in BLOCK_KERNELS:
        compile_kernel(kernel, opt, tmp_path)
