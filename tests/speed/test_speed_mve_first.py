"""The Helium (MVE) path of convolutions with 1 to 4 input channels (every model's first layer;
runtime_c/kernels/convolution/mve_conv_narrow_s8.h) on the simulated Cortex-M55 (mps3-an547 in QEMU),
bit-exact with the Python reference.

The path copies the input columns a run of output pixels reads into a column-major stripe (padded
taps as zero-points), reorders the weights to that order once per call, and computes four output
pixels per vector per output channel. Hypothesis draws layers over what that touches: 1 to 4 input
channels, 1 to 70 output channels (multiples of 4 and not; more than one chunk of channels when the
windows are large), kernels 1x1 to 10x4 (windows of 1 to 48 taps, and larger ones that take the
other path), strides 1 and 2, padding on every side including asymmetric padding, images from 1x1
to 49x10, batches, stripes of one or several runs of pixels, and partial groups of pixels; data,
weights, zero-points at both ends, shifts over [-31, 30] and clamps through the case builder of
test_kernels_s8_mve. The first layers of the benchmark models (including MobileNet's 96x96 input)
run once more at their real sizes, and the output also overlaps the input in the one way the
kernel's contract allows (output before input).
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcu.reference.conv import conv2d_s8
from mve_cases import (MODES, WMODES, Builder, Case, mve_data, c_dims, mve_weights, assert_case,
                       SHARES_KERNEL_COMPILES, compile_kernel, run_cases)
from repo import requires_qemu

BOARD = "mps3-an547"
pytestmark = [requires_qemu, pytest.mark.qemu, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")]

KERNELS = ["mcu_conv2d_s8.c"]


def narrow_case(b: Builder, rng, *, cin, cout, kh, kw, sh, sw, pt, pl, pb, pr, h, w, n=1, mode="uniform",
                wmode="symmetric", overlap=False) -> None:
    """One convolution with padding pt/pl/pb/pr (bottom/right as the output size implies them).
    `overlap`: the output starts before the input and overlaps it, as far as the window overlap
    contract allows (every pixel's output lies below the first input byte a later pixel reads)."""
    out_h = (h + pt + pb - kh) // sh + 1
    out_w = (w + pl + pr - kw) // sw + 1
    x = mve_data(rng, (n, h, w, cin), mode)
    wt = mve_weights(rng, (cout, kh, kw, cin), "small" if mode == "small" else wmode)
    m, s, zp_in, zp_out, (lo, hi), bias = b.common(rng, cout, kh * kw * cin, mode)
    y = conv2d_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=lo, act_max=hi,
                      stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl, output=(n, out_h, out_w, cout))
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    if overlap:
        # Pixel p (in memory order) writes output bytes [p * cout, (p + 1) * cout); a pixel reads no
        # input byte before the first column of the first input row of its window. The input starts
        # far enough after the output that no write reaches a byte a later pixel reads.
        first = []
        for bi in range(n):
            for oh in range(out_h):
                for ow in range(out_w):
                    row, col = max(0, oh * sh - pt), max(0, ow * sw - pl)
                    first.append(((bi * h + row) * w + col) * cin)
        gap = 0
        later = None
        for p in range(len(first) - 1, 0, -1):
            later = first[p] if later is None else min(later, first[p])
            gap = max(gap, p * cout - later)  # pixel p - 1 writes up to p * cout
        in_off = max(gap, 1)
        out_off = 0
    if not overlap or in_off >= y.size:  # (an output that cannot overlap lies apart)
        in_off, out_off = 0, x.size + 16
    call = f"""
    {{
        const mcu_conv2d_s8_params p = {{{c_dims(n, h, w, cin)}, {c_dims(n, out_h, out_w, cout)}, {kh}, {kw}, {sh},
            {sw}, {pt}, {pl}, 1, 1, 1, {-zp_in}, {zp_out}, {lo}, {hi}}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work + {in_off}, {xs}, {x.size});
        status = mcu_conv2d_s8(&ctx, &p, &q, work + {in_off}, {ws}, {bs}, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    b.add(Case("conv2d", call, y.reshape(-1)), max(in_off + x.size, out_off + y.size))


@st.composite
def narrow_layers(draw):
    cin = draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 10)), draw(st.integers(1, 4))
    if draw(st.booleans()):  # mostly windows the narrow path takes (at most 48 taps)
        while kh * kw * cin > 48:
            kh -= 1
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pt, pb = draw(st.integers(0, kh - 1)), draw(st.integers(0, kh - 1))
    pl, pr = draw(st.integers(0, kw - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, kh - pt - pb), 49 if kw <= 4 and cin == 1 else 20))
    w = draw(st.integers(max(1, kw - pl - pr), 10 if h > 20 else 40))
    cout = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 32, 33, 48, 49, 64, 70]))
    n = draw(st.sampled_from([1, 1, 1, 2]))
    return dict(cin=cin, cout=cout, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, pb=pb, pr=pr, h=h, w=w, n=n,
                mode=draw(st.sampled_from(MODES)), wmode=draw(st.sampled_from(WMODES)),
                overlap=draw(st.sampled_from([False, False, False, True])))


def run_layers(layers, seed: int, tag: str) -> None:
    rng = np.random.default_rng(seed)
    b = Builder()
    for layer in layers:
        narrow_case(b, rng, **layer)
    got = run_cases(b, KERNELS, f"test_speed_mve_first_{tag}", timeout_s=300)
    for i, case in enumerate(b.cases):
        assert_case(i, case, got, str(layers[i]) if i < len(layers) else "")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(narrow_layers(), min_size=12, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_narrow_conv_equals_reference(layers, seed) -> None:
    run_layers(layers, seed, "hyp")


# The benchmark models' first layers: small_cnn, ds_cnn, resnet8, mobilenet_v1 (96x96x3, stride 2,
# padding only at the bottom and the right), each with uniform, all -128 and two-valued data.
MODEL_LAYERS = [
    dict(cin=1, cout=16, kh=3, kw=3, sh=1, sw=1, pt=1, pl=1, pb=1, pr=1, h=28, w=28),
    dict(cin=1, cout=64, kh=10, kw=4, sh=2, sw=2, pt=4, pl=1, pb=5, pr=1, h=49, w=10),
    dict(cin=3, cout=16, kh=3, kw=3, sh=1, sw=1, pt=1, pl=1, pb=1, pr=1, h=32, w=32),
    dict(cin=3, cout=8, kh=3, kw=3, sh=2, sw=2, pt=0, pl=0, pb=1, pr=1, h=96, w=96),
]


def test_model_first_layers_equal_reference() -> None:
    layers = [dict(layer, mode=mode, wmode=wmode) for layer in MODEL_LAYERS
              for mode, wmode in (("uniform", "symmetric"), ("min", "ends"), ("ends", "full"))]
    run_layers(layers, 20261204, "models")


def test_edge_layers_equal_reference() -> None:
    """1x1 images and kernels, windows over nothing but padding, 4 channels at 48 taps, 70 output
    channels (the other path), output channel counts 1..3, overlapping buffers, stripe columns of 30
    to 48 bytes (fewer pixels per scatter), strides 3 and 5, 64 output channels of 48-tap windows
    (gather mode with its zero-padded last weight rows)."""
    layers = [
        dict(cin=1, cout=1, kh=1, kw=1, sh=1, sw=1, pt=0, pl=0, pb=0, pr=0, h=1, w=1),
        dict(cin=4, cout=3, kh=3, kw=3, sh=2, sw=2, pt=1, pl=1, pb=1, pr=1, h=1, w=1),
        dict(cin=1, cout=70, kh=10, kw=4, sh=1, sw=2, pt=9, pl=3, pb=9, pr=3, h=1, w=1),
        dict(cin=4, cout=70, kh=4, kw=3, sh=1, sw=1, pt=2, pl=0, pb=1, pr=2, h=9, w=13),
        dict(cin=2, cout=2, kh=4, kw=4, sh=2, sw=1, pt=0, pl=3, pb=3, pr=0, h=11, w=37),
        dict(cin=3, cout=33, kh=4, kw=4, sh=1, sw=2, pt=3, pl=1, pb=0, pr=2, h=20, w=40, n=2),
        dict(cin=1, cout=5, kh=10, kw=4, sh=2, sw=2, pt=4, pl=1, pb=5, pr=1, h=49, w=10, overlap=True),
        dict(cin=3, cout=16, kh=3, kw=3, sh=1, sw=1, pt=1, pl=1, pb=1, pr=1, h=12, w=40, overlap=True),
        dict(cin=1, cout=70, kh=10, kw=4, sh=2, sw=2, pt=4, pl=1, pb=5, pr=1, h=49, w=10, overlap=True),
        # tall columns: fewer pixels per scatter (8-bit offsets), and strides over 2
        dict(cin=1, cout=9, kh=30, kw=1, sh=3, sw=1, pt=10, pl=0, pb=12, pr=0, h=40, w=21),
        dict(cin=2, cout=6, kh=20, kw=1, sh=1, sw=3, pt=5, pl=0, pb=3, pr=0, h=24, w=35),
        dict(cin=4, cout=20, kh=12, kw=1, sh=2, sw=5, pt=0, pl=0, pb=11, pr=0, h=13, w=39, n=2),
        dict(cin=3, cout=64, kh=4, kw=4, sh=1, sw=1, pt=3, pl=3, pb=3, pr=3, h=5, w=40),
    ]
    for i, layer in enumerate(layers):
        layer.setdefault("mode", MODES[i % len(MODES)])
    run_layers(layers, 4, "edges")


@SHARES_KERNEL_COMPILES
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O2", "-O3"])
def test_narrow_path_compiles_at_every_level(opt: str, tmp_path) -> None:
    """The assembly loop keeps GCC registers to spare at every optimisation level, and the M55 build
    of the convolution contains it."""
    asm = compile_kernel("mcu_conv2d_s8.c", opt, tmp_path, assembly=True)
    # the channel loop's scalar requantization and the stripe's unpredicated scatter
    assert re.search(r"vqrdmulh\.s32\s+q2, q2, \w+", asm)
    assert re.search(r"vstrb\.8\s+q0, \[\w+, q\d\]", asm)
