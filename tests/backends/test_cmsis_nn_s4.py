"""4-bit weights (w4a8) through the CMSIS-NN backend: its s4 wrappers' scratch formulas against CMSIS-NN's own
``_get_buffer_size`` functions built for the host, and whole models through the real CMSIS-NN on four cores,
bit-exact with the Python reference. Both need ``CMSIS_NN_PATH`` (a checkout of
github.com/ARM-software/CMSIS-NN) and skip without it, saying so; the routing's refusals do not."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from cmsis_nn_host import ConvParams, Dims, DwParams, Tile, Act, cmsis_nn_root, host_library
from compiled import lowered_model
from mcu.api import backend_options
from mcu.backends.cmsis_nn import core as cmsis_nn
from repo import requires_qemu

SIZE_SOURCES = ("ConvolutionFunctions/arm_convolve_get_buffer_sizes_s4.c",
                "ConvolutionFunctions/arm_depthwise_conv_get_buffer_sizes_s4.c",
                "ConvolutionFunctions/arm_depthwise_conv_get_buffer_sizes_s8.c",
                "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s8.c")


@pytest.fixture(scope="module")
def sizes():
    root = cmsis_nn_root(SIZE_SOURCES, "the s4 buffer-size sources")
    lib = host_library(root, [root / "Source" / s for s in SIZE_SOURCES], "s4_sizes")
    for name in ("arm_convolve_wrapper_s4_get_buffer_size", "arm_convolve_wrapper_s4_get_buffer_size_mve",
                 "arm_depthwise_conv_wrapper_s4_get_buffer_size",
                 "arm_depthwise_conv_wrapper_s4_get_buffer_size_mve"):
        getattr(lib, name).restype = ctypes.c_int32
    return lib


def _dims(d: dict) -> Dims:
    return Dims(d["n"], d["h"], d["w"], d["c"])


@st.composite
def layers(draw, depthwise: bool) -> dict:
    """One convolution's CMSIS-NN values (the backend's dicts): 1x1, 1 x n rows and general windows."""
    c = draw(st.integers(1, 40))
    kh = 1 if draw(st.booleans()) else draw(st.integers(1, 5))
    kw = draw(st.integers(1, 7))
    h = 1 if kh == 1 and draw(st.booleans()) else draw(st.integers(1, 12))
    w = draw(st.integers(1, 20))  # rows narrower than the window: the padding alone makes outputs
    sy, sx = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    py, px = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    dil = draw(st.sampled_from([(1, 1), (1, 1), (2, 1)]))
    mult = draw(st.sampled_from([1, 1, 2])) if depthwise else 1
    out_c = c * mult if depthwise else draw(st.integers(1, 24))
    oh = (h + 2 * py - dil[1] * (kh - 1) - 1) // sy + 1
    ow = (w + 2 * px - dil[0] * (kw - 1) - 1) // sx + 1
    if oh < 1 or ow < 1:
        oh, ow, py, px, dil = 1, 1, 0, 0, (1, 1)
    filt = {"n": 1, "h": kh, "w": kw, "c": out_c} if depthwise else {"n": out_c, "h": kh, "w": kw, "c": c}
    return {"input": {"n": 1, "h": h, "w": w, "c": c}, "filter": filt, "bias": {"n": 1, "h": 1, "w": 1, "c": out_c},
            "output": {"n": 1, "h": oh, "w": ow, "c": out_c}, "stride": (sx, sy), "padding": (px, py),
            "dilation": dil, "ch_mult": mult}


@settings(max_examples=300, deadline=None)
@given(layers(depthwise=False))
@example({"input": {"n": 1, "h": 1, "w": 1, "c": 4}, "filter": {"n": 4, "h": 1, "w": 3, "c": 4},
          "bias": {"n": 1, "h": 1, "w": 1, "c": 4}, "output": {"n": 1, "h": 1, "w": 1, "c": 4}, "stride": (1, 1),
          "padding": (1, 0), "dilation": (1, 1), "ch_mult": 1})  # a 1 x n row its padded outputs overcount
def test_convolve_wrapper_s4_scratch_is_cmsis_nns(sizes, v: dict) -> None:
    p = ConvParams(0, 0, Tile(*v["stride"]), Tile(*v["padding"]), Tile(*v["dilation"]), Act(-128, 127))
    args = [ctypes.byref(p), ctypes.byref(_dims(v["input"])), ctypes.byref(_dims(v["filter"])),
            ctypes.byref(_dims(v["output"]))]
    # the host build is CMSIS-NN's non-Helium path, which the plain and DSP builds share
    assert cmsis_nn.convolve_wrapper_s4_buffer_size("dsp", v) == sizes.arm_convolve_wrapper_s4_get_buffer_size(*args)
    assert cmsis_nn.convolve_wrapper_s4_buffer_size("plain", v) == sizes.arm_convolve_wrapper_s4_get_buffer_size(*args)
    assert cmsis_nn.convolve_wrapper_s4_buffer_size("mve", v) == \
        sizes.arm_convolve_wrapper_s4_get_buffer_size_mve(*args)


@settings(max_examples=300, deadline=None)
@given(layers(depthwise=True))
def test_depthwise_wrapper_s4_scratch_is_cmsis_nns(sizes, v: dict) -> None:
    p = DwParams(0, 0, v["ch_mult"], Tile(*v["stride"]), Tile(*v["padding"]), Tile(*v["dilation"]), Act(-128, 127))
    args = [ctypes.byref(p), ctypes.byref(_dims(v["input"])), ctypes.byref(_dims(v["filter"])),
            ctypes.byref(_dims(v["output"]))]
    assert cmsis_nn.depthwise_wrapper_s4_buffer_size("dsp", v) == \
        sizes.arm_depthwise_conv_wrapper_s4_get_buffer_size(*args)
    assert cmsis_nn.depthwise_wrapper_s4_buffer_size("mve", v) == \
        sizes.arm_depthwise_conv_wrapper_s4_get_buffer_size_mve(*args)


# --- whole models through the real CMSIS-NN ------------------------------------------------------------------

REAL = os.environ.get("CMSIS_NN_PATH")
needs_real = pytest.mark.skipif(not REAL or not cmsis_nn.is_tree(Path(REAL or ".")),
                                reason=f"{cmsis_nn.ENV_VAR} does not name a CMSIS-NN source tree "
                                       "(a checkout of github.com/ARM-software/CMSIS-NN)")


@needs_real
@requires_qemu
@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386", "mps3-an547", "mps2-an385-m0plus"])
def test_w4a8_through_real_cmsis_nn_s4_is_bit_exact(board: str) -> None:
    """ds_cnn at w4a8 with CMSIS-NN first: its 4-bit convolution and depthwise layers run
    arm_convolve_wrapper_s4 and arm_depthwise_conv_wrapper_s4 (the per-channel fully connected layer stays
    with ours, saying why, and so does the depthwise on Helium), and the firmware equals the Python reference
    on every bundled vector."""
    cm = lowered_model("ds_cnn", "w4a8").compile(board, options=backend_options(REAL))
    functions = {op.attrs["cmsis_nn"]["function"] for op in cm.graph.ops if op.attrs.get("backend") == "cmsis-nn"}
    routed = {"arm_convolve_wrapper_s4"} | ({"arm_depthwise_conv_wrapper_s4"} if not cm.board.mve else set())
    assert routed <= functions, functions
    if cm.board.mve:
        assert any(r.backend == "cmsis-nn" and "4-bit depthwise on Helium" in r.why for r in cm.partitions.refusals)
    assert any(r.backend == "cmsis-nn" and "arm_fully_connected_s4 takes one multiplier" in r.why
               for r in cm.partitions.refusals)
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)
