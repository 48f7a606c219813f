"""The depthwise kernels' pixel path for small 3x3 images (runtime_c/kernels/convolution/dw_px_s8_dsp.h),
bit-exact with the Python reference: on the host with the DSP instructions emulated (hypothesis,
every overlap mode) and on the simulated Cortex-M33 and M4 (batches of drawn layers per firmware).

The path serves 3x3 layers with channels a multiple of 4, every shift in [-24, -1] and at most
MCU_DWPX_MAX_PIXELS output pixels; the cases draw channel counts on both sides of a chunk (32
channels), images down to one pixel (every tap a border tap), strides 1 and 2, paddings 0 to 2,
extremes of data, weights, biases, multipliers and activation ranges, and the output apart from,
overlapping (at the window contract's limit) and on top of (the in-place kernel) the input.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s8_cases as base
from dw_cases import emulated, run_on_core, run_on_host  # noqa: F401 (emulated: the fixture)
from repo import requires_qemu

MAX_PIXELS = 200  # MCU_DWPX_MAX_PIXELS in dw_px_s8_dsp.h


@st.composite
def px_cases(draw) -> dict:
    mode = draw(st.sampled_from(["apart", "overlap", "inplace"]))
    stride = 1 if mode == "inplace" else draw(st.integers(1, 2))
    pt = draw(st.integers(0, 2))
    pl = draw(st.integers(0, 2))
    h, w = draw(st.integers(1, 14)), draw(st.integers(1, 14))
    if mode != "inplace":
        h, w = max(h, 3 - 2 * pt), max(w, 3 - 2 * pl)  # at least one output pixel
    c = draw(st.one_of(st.sampled_from([4, 8, 28, 32, 36, 64, 68]), st.integers(1, 18).map(lambda g: 4 * g)))
    oh = h if mode == "inplace" else (h + 2 * pt - 3) // stride + 1
    ow = w if mode == "inplace" else (w + 2 * pl - 3) // stride + 1
    if oh * ow > MAX_PIXELS:
        h, w = (8, 8) if mode == "inplace" else (h, 8)
        oh = h if mode == "inplace" else (h + 2 * pt - 3) // stride + 1
        ow = w if mode == "inplace" else (w + 2 * pl - 3) // stride + 1
    return dict(mode=mode, kh=3, kw=3, shift_range=(-24, -1),  # the path's whole shift range
                c=c, h=h, w=w, s=stride, pt=pt, pl=pl, oh=oh, ow=ow, in_zp=draw(base.zero_points),
                out_zp=draw(base.zero_points), act=draw(base.act_bounds()), bias=draw(base.bias_kinds),
                data=draw(base.data_modes), wmode=draw(base.weight_modes),
                shift=draw(st.one_of(st.sampled_from([-1, -24]), st.integers(-24, -1))),
                mult=draw(st.sampled_from(["varied", "top", "zero"])), seed=draw(st.integers(0, 2**32 - 1)))


@settings(max_examples=60, deadline=None)
@given(px_cases())
def test_pixel_path_emulated(emulated, case) -> None:
    run_on_host(emulated, case)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(px_cases(), min_size=30, max_size=30))
def test_pixel_path_on_core(tmp_path_factory, board: str, cases: list[dict]) -> None:
    """30 drawn layers per firmware through the native assembly (taps, requantization, clamp)."""
    run_on_core(tmp_path_factory.mktemp("dwpx"), board, cases, "PIXEL PATH")
