"""The MobileNet speed paths of mcu_conv2d_packed_s8, bit-exact with the Python reference.

Two paths: the flat pixel loop of pointwise layers whose channels are whole 4-byte groups (DSP
builds), and the assembly loop over all whole blocks of one pixel (mcu_pixel_packed, native DSP
cores, right-shift streams). Drawn here: many blocks per pixel (up to 40 output channels, so the
loop runs 0 to 10 times plus a partial block), batches (the flat loop crosses images), pointwise
channel counts 4 to 32 (every entry of the dot product's TBB), the activation clamp on and off,
biases, multipliers and zero-points at their ends. The host library with the DSP paths emulated
runs the flat loop; the firmware on the simulated M33 and M4 runs both with the assembly.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import s8_cases as base
from cbind import MCU_OK
from host_builds import build_emulated_lib, load_bound, route_cbind
from mcu.backends.optimized import tuned
from mcu.device.boards import load_board
from mcu.paths import runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8
from packed_cases import packed_firmware_source, packed_params
from repo import requires_qemu

_S32 = (-(2**31), 2**31 - 1)


@st.composite
def _case(draw) -> dict:
    """One layer: pointwise (most) or 3x3, batch 1 to 3, up to 40 output channels, every shift in
    [-23, -1] (the stream the assembly requantizes)."""
    pointwise = draw(st.booleans()) or draw(st.booleans())
    cin = draw(st.sampled_from([4, 8, 12, 16, 20, 24, 32] if pointwise else [1, 3, 4, 8]))
    k = 1 if pointwise else 3
    n = draw(st.integers(1, 3))
    h, w = draw(st.integers(k, 5)), draw(st.integers(k, 5))
    cout = draw(st.integers(1, 40))
    while n * h * w * cout > 4096:  # the firmware's output buffer
        cout = max(1, cout // 2)
        n = 1
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind, w_kind = draw(st.sampled_from(["random", "min", "max"])), draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (n, h, w, cin)) if x_kind == "random"
         else np.full((n, h, w, cin), -128 if x_kind == "min" else 127)).astype(np.int8)
    wt = (rng.integers(-127, 128, (cout, k, k, cin)) if w_kind == "random"
          else np.full((cout, k, k, cin), -127 if w_kind == "min" else 127)).astype(np.int8)
    # extremes mixed in by the case's generator (drawing 40 values each would exhaust hypothesis)
    b = np.where(rng.random(cout) < 0.3, rng.choice(_S32, cout), rng.integers(-(2**20), 2**20, cout)).astype(np.int32)
    m = np.where(rng.random(cout) < 0.3, rng.choice([0, 1, 2**30, 2**31 - 1], cout),
                 rng.integers(0, 2**31 - 1, cout)).astype(np.int64)
    sh = rng.integers(-23, 0, cout).astype(np.int64)
    in_zp, out_zp = draw(st.sampled_from([-128, 127]) | st.integers(-128, 127)), draw(st.integers(-128, 127))
    if draw(st.booleans()):
        act = (-128, 127)  # no clamp: the byte stores
    else:
        lo = draw(st.integers(-128, 126))
        act = (lo, draw(st.integers(lo, 127)))
    pad = 0 if pointwise else draw(st.integers(0, 1))
    oh, ow = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    params = packed_params(x.shape, (n, oh, ow, cout), k, k, pt=pad, pl=pad, in_zp=in_zp, out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    stream = tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp)
    assert stream[1] & tuned.FLAG_RIGHT
    return dict(x=x, wt=wt, b=b, m=m, s=sh, w=stream, params=params, expected=expected)


@pytest.fixture(scope="module")
def emulated():
    """cbind_s8 routed to the host library with the DSP paths emulated."""
    yield from route_cbind(load_bound(build_emulated_lib()))


@settings(max_examples=40, deadline=None)
@given(case=_case())
def test_flat_pointwise_loop_emulated(emulated, case: dict) -> None:
    """The DSP-emulated build (flat pointwise loop, C blocks) equals the reference."""
    cout = case["wt"].shape[0]
    status, out = cb.conv2d_packed(case["x"], case["wt"], case["b"], cb.Quant(case["m"], case["s"], cout),
                                   case["params"], stream=case["w"])
    assert status == MCU_OK
    base.assert_equal(out, case["expected"])


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_case(), min_size=30, max_size=30))
def test_pixel_loop_on_core(tmp_path_factory, board_name: str, cases: list[dict]) -> None:
    """Batches of 30 drawn layers per firmware, bit-exact with the reference on the core."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("packed_px")
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases))
    board = load_board(board_name)
    rt = runtime_dir()
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [rt / "include"], tmp / "out")
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console
