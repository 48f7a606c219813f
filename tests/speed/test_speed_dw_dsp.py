"""The depthwise kernels' DSP paths (runtime_c/kernels/convolution/dw_px_s8_dsp.h:
the ring of padded rows, the asm loop over a whole output row, stride-1 layers of any size),
bit-exact with the Python reference: on the host with the DSP instructions emulated (hypothesis,
every overlap mode) and on the simulated Cortex-M33 and M4 (batches of drawn layers per firmware).

Cases draw what decides between the paths and inside them: 3x3 and other kernel sizes (5x5, 3x1,
1x3: the row path and the plain loop), channel counts 4..256 with non-multiples of 4 (other
paths), images from 1x1 to 48x48 (stride-1 layers of every size take the pixel path; strided ones
up to 200 output pixels), rows as wide as the ring holds and wider (then the row path), strides 1
and 2, paddings, extremes of data, weights, biases, multipliers and activation ranges, and the
output apart from, overlapping (at the window contract's limit) and on top of the input.
"""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s8_cases as base
from dw_cases import emulated, run_on_core, run_on_host  # noqa: F401 (emulated: the fixture)
from repo import requires_qemu

MAX_BYTES = 12000  # input bytes per case: keeps the host runs and the firmware images small


@st.composite
def dw_cases(draw) -> dict:
    mode = draw(st.sampled_from(["apart", "overlap", "inplace"]))
    kh, kw = draw(st.sampled_from([(3, 3), (3, 3), (3, 3), (3, 3), (5, 5), (3, 1), (1, 3)]))
    stride = 1 if mode == "inplace" else draw(st.sampled_from([1, 1, 2]))
    pt = draw(st.integers(0, kh - 1))
    pl = draw(st.integers(0, kw - 1))
    c = draw(st.one_of(st.sampled_from([4, 8, 16, 32, 64, 128, 256]), st.integers(1, 64).map(lambda g: 4 * g),
                       st.integers(1, 70)))
    size = draw(st.sampled_from(["small", "mid", "large", "wide"]))
    if size == "small":
        h, w = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    elif size == "mid":
        h, w = draw(st.integers(9, 26)), draw(st.integers(9, 26))
    elif size == "large":
        h, w = draw(st.integers(27, 48)), draw(st.integers(27, 48))
    else:  # rows near and past the ring's width (128 padded columns of one group)
        h, w = draw(st.integers(1, 3)), draw(st.integers(100, 300))
    while h * w * c > MAX_BYTES and c > 4:
        c = max(4, c // 2)
    while h * w * c > MAX_BYTES:
        h, w = max(1, h // 2), max(1, w // 2) if size != "wide" else w
        if size == "wide" and h == 1:
            w = MAX_BYTES // c
    if mode != "inplace":
        h, w = max(h, kh - 2 * pt), max(w, kw - 2 * pl)  # at least one output pixel
    oh = h if mode == "inplace" else (h + 2 * pt - kh) // stride + 1
    ow = w if mode == "inplace" else (w + 2 * pl - kw) // stride + 1
    return dict(mode=mode, kh=kh, kw=kw, c=c, h=h, w=w, s=stride, pt=pt, pl=pl, oh=oh, ow=ow,
                in_zp=draw(base.zero_points), out_zp=draw(base.zero_points), act=draw(base.act_bounds()),
                bias=draw(base.bias_kinds), data=draw(base.data_modes), wmode=draw(base.weight_modes),
                shift=draw(st.one_of(st.sampled_from([-1, -24]), st.integers(-24, -1), st.integers(-31, 6))),
                mult=draw(st.sampled_from(["varied", "top", "zero"])), seed=draw(st.integers(0, 2**32 - 1)))


@settings(max_examples=40, deadline=None)
@given(dw_cases())
def test_depthwise_dsp_emulated(emulated, case) -> None:
    run_on_host(emulated, case)


@pytest.mark.parametrize("case", [
    # MobileNetV1-0.25's and DS-CNN's depthwise shapes (ReLU6-like clamp, same padding)
    dict(mode="inplace", kh=3, kw=3, c=8, h=48, w=48, s=1, pt=1, pl=1, oh=48, ow=48),
    dict(mode="apart", kh=3, kw=3, c=4, h=47, w=47, s=2, pt=0, pl=0, oh=23, ow=23),
    dict(mode="inplace", kh=3, kw=3, c=32, h=24, w=24, s=1, pt=1, pl=1, oh=24, ow=24),
    dict(mode="overlap", kh=3, kw=3, c=32, h=24, w=24, s=2, pt=1, pl=1, oh=12, ow=12),
    dict(mode="inplace", kh=3, kw=3, c=128, h=6, w=6, s=1, pt=1, pl=1, oh=6, ow=6),
    dict(mode="inplace", kh=3, kw=3, c=256, h=3, w=3, s=1, pt=1, pl=1, oh=3, ow=3),
    dict(mode="inplace", kh=3, kw=3, c=64, h=25, w=5, s=1, pt=1, pl=1, oh=25, ow=5),
    dict(mode="apart", kh=3, kw=3, c=4, h=1, w=250, s=1, pt=1, pl=1, oh=1, ow=250),  # 252 padded columns
    dict(mode="apart", kh=3, kw=3, c=4, h=1, w=300, s=1, pt=1, pl=1, oh=1, ow=300),  # past the ring: row path
], ids=lambda c: f"{c['mode']}-{c['h']}x{c['w']}x{c['c']}-s{c['s']}")
@pytest.mark.parametrize("extreme", ["extremes", "high"])
def test_depthwise_dsp_layers_emulated(emulated, case, extreme) -> None:
    full = dict(case, in_zp=-128, out_zp=127 if extreme == "high" else -128, act=(-128, 127) if extreme == "high"
                else (-128, 50), bias="full", data=extreme, wmode="extremes", shift=-9, mult="top", seed=7)
    run_on_host(emulated, full)


def _fits_firmware(case: dict) -> bool:
    """Small enough for the test program's arena (32 KiB at either side) and ring."""
    return case["h"] * case["w"] * case["c"] <= 8000 and (case["pt"] + 1) * case["w"] * case["c"] <= 16384


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(dw_cases().filter(_fits_firmware), min_size=24, max_size=24))
def test_depthwise_dsp_on_core(tmp_path_factory, board: str, cases: list[dict]) -> None:
    """24 drawn layers per firmware through the native assembly (ring fill, taps, requantization, clamp)."""
    run_on_core(tmp_path_factory.mktemp("dwdsp"), board, cases, "DW DSP")
