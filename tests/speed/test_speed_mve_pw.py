"""The Helium (MVE) 1x1 convolution's pair path (runtime_c/kernels/convolution/mve_pw_s8.h: four output
channels times two pixels per pass from a column packed per pair, every other pair walking the weight
rows backwards, the zero-padded copy of the last four rows when rows are not whole chunks, and the
one-pixel path for the rest) on the simulated Cortex-M55 (mps3-an547 in QEMU), bit-exact with the
Python reference.

Every case fills the whole work area with a pattern first and prints all of it back, so that a byte
written outside the output (or an input byte the contract says survives) shows up as well as a wrong
output. Hypothesis draws the layers: input channels 1..300 (multiples of 16 and their neighbours, odd
counts, up to the longest row the pair path takes and past it), outputs 1..300 (around multiples of 4),
1..60 pixels (odd counts: a last single pixel; counts that span several packed blocks; rows of up to
1024 values, one pair per block), the output
apart from, on, or ending with the input (forward and backward), and the case builder's extreme data,
zero-points at both ends, shifts over [-31, 30] (groups with a left shift take the one-pixel path),
saturating biases and clamps. The same path serves 1x1 convolutions without padding through
mcu_conv2d_s8 (any stride: ResNet's shortcuts), drawn here too.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcu.reference.conv import conv2d_s8
from mve_cases import (MODES, Builder, Case, mve_data, c_dims, mve_weights, assert_case, SHARES_KERNEL_COMPILES,
                       compile_kernel, conv_case, run_cases)
from repo import requires_qemu

BOARD = "mps3-an547"
KERNEL = "mcu_conv2d_1x1_s8.c"
CONV = "mcu_conv2d_s8.c"  # 1x1 without padding, any stride (ResNet's shortcuts): the same pair path
PATTERN = 0x5A
pytestmark = [requires_qemu, pytest.mark.qemu, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")]

# Up to 1024 values per row the pair path takes (one pair per block from 513 on: 2 * 1024-byte rows).
CIN = [1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 300, 513, 1000,
       1024]
COUT = [1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 64, 65, 100, 127, 128, 129, 255, 256, 300]


def pointwise_guarded(b: Builder, rng, *, cin: int, cout: int, pixels: int, overlap: str, mode: str,
                      wmode: str = "symmetric") -> None:
    """One 1x1 convolution in a work area filled with PATTERN; the whole area is printed back and
    compared with the pattern, the input where the output does not cover it, and the output."""
    x = mve_data(rng, (1, 1, pixels, cin), mode)
    wt = mve_weights(rng, (cout, 1, 1, cin), "small" if mode == "small" else wmode)
    m, s, zp_in, zp_out, (lo, hi), bias = b.common(rng, cout, cin, mode)
    y = conv2d_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=lo, act_max=hi)
    in_bytes, out_bytes = x.size, y.size
    base = 32
    if overlap == "apart":
        in_off, out_off = base, base + in_bytes + 16
    elif overlap == "forward":  # output at the input's start (cout <= cin)
        in_off, out_off = base, base
    else:  # output ending where the input ends (cout >= cin)
        end = base + max(in_bytes, out_bytes)
        in_off, out_off = end - in_bytes, end - out_bytes
    size = max(in_off + in_bytes, out_off + out_bytes) + 32
    want = np.full(size, PATTERN, dtype=np.int64)
    want[in_off:in_off + in_bytes] = x.reshape(-1)
    want[out_off:out_off + out_bytes] = y.reshape(-1)
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    call = f"""
    {{
        const mcu_conv2d_s8_params p = {{{c_dims(1, 1, pixels, cin)}, {c_dims(1, 1, pixels, cout)}, 1, 1, 1, 1,
            0, 0, 1, 1, 1, {-zp_in}, {zp_out}, {lo}, {hi}}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        for (int32_t i = 0; i < {size}; ++i) {{
            work[i] = (int8_t){PATTERN};
        }}
        copy(work + {in_off}, {xs}, {in_bytes});
        status = mcu_conv2d_1x1_s8(&ctx, &p, &q, work + {in_off}, {ws}, {bs}, work + {out_off});
        emit(work, {size});
    }}"""
    b.add(Case(f"conv2d_1x1/{overlap}/{cin}x{cout}x{pixels}", call, want.astype(np.int8)), size, cout)


def run_layers(layers, seed: int, tag: str) -> None:
    rng = np.random.default_rng(seed)
    b = Builder()
    for layer in layers:
        if layer[0] == "strided":
            _, cin, cout, sh, sw, h, w, n, mode, wmode = layer
            conv_case(b, rng, cin=cin, cout=cout, kh=1, kw=1, sh=sh, sw=sw, pt=0, pl=0, dh=1, dw=1, h=h, w=w, n=n,
                      mode=mode, wmode=wmode)
            continue
        cin, cout, pixels, overlap, mode, wmode = layer
        pointwise_guarded(b, rng, cin=cin, cout=cout, pixels=pixels, overlap=overlap, mode=mode, wmode=wmode)
    got = run_cases(b, [KERNEL, CONV], f"test_speed_mve_pw_{tag}")
    for i, case in enumerate(b.cases):
        assert_case(i, case, got)


WMODES = ["symmetric", "symmetric", "full", "ends"]


@st.composite
def layers(draw):
    cin = draw(st.one_of(st.sampled_from(CIN), st.integers(1, 300)))
    cout = draw(st.one_of(st.sampled_from(COUT), st.integers(1, 300)))
    while cin * cout > 24000:  # keeps the firmware's constant arrays small
        cout = max(1, cout // 2)
    pixels = draw(st.one_of(st.sampled_from([1, 2, 3, 4, 5, 8, 9, 16, 17, 36, 59, 60]), st.integers(1, 60)))
    pixels = min(pixels, max(3, 24000 // cin))
    overlaps = ["apart"] + (["forward"] if cout <= cin else []) + (["backward"] if cout >= cin else [])
    return (cin, cout, pixels, draw(st.sampled_from(overlaps)), draw(st.sampled_from(MODES)),
            draw(st.sampled_from(WMODES)))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases=st.lists(layers(), min_size=8, max_size=8), seed=st.integers(0, 2**32 - 1))
def test_pointwise_pairs_equal_reference(cases, seed) -> None:
    run_layers(cases, seed, "hyp")


def test_pointwise_model_shapes_equal_reference() -> None:
    """The reference models' 1x1 layers (MobileNetV1's, DS-CNN's), on their own input (in place) and
    apart, and the edges of the pair path: one pixel, rows of 512, 513, 1000 and 1024 values (one pair
    per block) and of 1025 (too long: the plain path), rows not whole chunks with and without the
    padded last-group copy."""
    shapes = [(8, 16, 60, "apart"), (16, 32, 36, "backward"), (32, 32, 50, "forward"), (64, 64, 125, "forward"),
              (64, 128, 36, "backward"), (128, 128, 36, "forward"), (128, 256, 9, "backward"),
              (256, 256, 9, "forward"), (256, 256, 9, "apart"), (128, 128, 1, "forward"), (512, 4, 3, "forward"),
              (513, 4, 3, "forward"), (1024, 8, 5, "forward"), (1000, 5, 3, "backward"), (1025, 4, 2, "apart"),
              (65, 8, 7, "apart"), (65, 68, 5, "backward"), (7, 4, 9, "apart"),
              (300, 60, 4, "forward")]
    rng = np.random.default_rng(20261204)
    cases = [(cin, cout, px, ov, MODES[i % len(MODES)], WMODES[i % len(WMODES)])
             for i, (cin, cout, px, ov) in enumerate(shapes)]
    run_layers(cases, int(rng.integers(0, 2**31)), "models")


@st.composite
def strided_layers(draw):
    """1x1 convolutions through mcu_conv2d_s8: strides 1..3, odd and even sizes, batches of 1 and 2."""
    cin = draw(st.one_of(st.sampled_from(CIN), st.integers(1, 300)))
    cout = draw(st.one_of(st.sampled_from(COUT), st.integers(1, 300)))
    while cin * cout > 24000:
        cout = max(1, cout // 2)
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    while h * w * cin > 6000:
        h, w = max(1, h // 2), max(1, w // 2)
    return ("strided", cin, cout, draw(st.sampled_from([1, 2, 2, 3])), draw(st.sampled_from([1, 2, 2, 3])), h, w,
            draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from(MODES)), draw(st.sampled_from(WMODES)))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases=st.lists(strided_layers(), min_size=8, max_size=8), seed=st.integers(0, 2**32 - 1))
def test_strided_pointwise_equal_reference(cases, seed) -> None:
    run_layers(cases, seed, "strided")


def test_resnet_shortcuts_equal_reference() -> None:
    """ResNet8's stride-2 shortcuts (16->32 at 32x32, 32->64 at 16x16) and 1x1 layers at and past the
    pair path's longest row (in.c 1024; 1025: the plain path)."""
    rng = np.random.default_rng(20261205)
    cases = [("strided", 16, 32, 2, 2, 32, 32, 1, "uniform", "symmetric"),
             ("strided", 32, 64, 2, 2, 16, 16, 1, "ends", "full"),
             ("strided", 1024, 4, 2, 1, 3, 3, 1, "uniform", "symmetric"),
             ("strided", 1025, 4, 2, 2, 3, 3, 1, "min", "symmetric")]
    run_layers(cases, int(rng.integers(0, 2**31)), "shortcuts")


@SHARES_KERNEL_COMPILES
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O2", "-O3"])
def test_pointwise_kernel_compiles_at_every_level(opt: str, tmp_path) -> None:
    """The pair loop names fourteen registers (r0-r12 and lr): every optimisation level must still
    leave GCC a way to set them up."""
    for kernel in (KERNEL, CONV):
        compile_kernel(kernel, opt, tmp_path)
