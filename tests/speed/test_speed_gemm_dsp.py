"""The wide-layer paths of mcu_conv2d_packed_s8 on DSP cores, bit-exact with the Python reference.

On the core (Cortex-M33 and M4, right-shift streams), every whole block of 4 output channels of a pixel
runs in one assembly loop: windows of at most MCU_PIXEL_WIDE_TAPS (256, or 128 when built so) taps straight-line
(mcu_pixel_packed_wide: entered at the group that leaves kp / 8 groups, through a stub when kp is 4
more than a multiple of 8; r7 saved in the state after the column; the per-layer state written by the
first pixel of each call), wider ones through the 64-tap loop (mcu_pixel_packed_loop); both with the
BIC/ADD requantization. Drawn here: window taps 1 to 300 (pointwise, fully connected and 3x3 layers,
around 128, 256 and the multiples of 8), output channels 1 to 300 (partial last blocks), 1 to 50 pixels
(batches for fully connected layers), clamp on and off, inputs, weights, biases, multipliers and
zero-points at their ends, and some streams with shifts the assembly does not take (the C blocks).
Many layers run in one firmware, in a row on the same stack, so a stale per-layer state would show.
The firmware is built at -O2 (the project's flags) on both cores and at -Os and -O3 on the M33 (the
assembly pins every register; other levels allocate around it differently); the host builds (plain
C and DSP-emulated) run the same layers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import s8_cases as base
from cbind import MCU_OK
from mcu.backends.optimized import tuned
from mcu.device.boards import load_board
from mcu.paths import runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8
from packed_cases import lib, packed_firmware_source, packed_params  # noqa: F401 (lib: the fixture)
from repo import requires_qemu

_S32 = (-(2**31), 2**31 - 1)
_OUT_MAX = 4096  # the firmware's output buffer (packed_cases.packed_firmware_source)
_WORDS_MAX = 12000  # weight words per layer, to keep the firmware's sources small


@st.composite
def _layer(draw) -> dict:
    kind = draw(st.sampled_from(["pointwise", "pointwise", "fc", "conv3"]))
    if kind == "conv3":
        cin = draw(st.integers(1, 33))  # 9 to 297 taps
        k = 3
    else:
        cin = draw(st.sampled_from([4, 8, 12, 60, 64, 68, 124, 128, 132, 136, 252, 256, 260, 300])
                   | st.integers(1, 300))
        k = 1
    kp = (k * k * cin + 3) // 4 * 4
    cout = draw(st.sampled_from([1, 3, 4, 5, 7, 8, 9, 63, 64, 65, 128, 129, 256, 300]) | st.integers(1, 300))
    while kp * cout // 2 > _WORDS_MAX:
        cout = max(1, cout // 2)
    if kind == "fc":
        n, h, w = draw(st.integers(1, 4)), 1, 1
    else:
        n = draw(st.integers(1, 2))
        h = draw(st.integers(k, 7))
        w = draw(st.integers(k, max(k, 50 // (n * h))))
    pad = draw(st.integers(0, 1)) if k == 3 else 0
    oh, ow = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    while n * oh * ow * cout > _OUT_MAX:
        cout = max(1, cout // 2)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind, w_kind = draw(st.sampled_from(["random", "min", "max"])), draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (n, h, w, cin)) if x_kind == "random"
         else np.full((n, h, w, cin), -128 if x_kind == "min" else 127)).astype(np.int8)
    wt = (rng.integers(-127, 128, (cout, k, k, cin)) if w_kind == "random"
          else np.full((cout, k, k, cin), -127 if w_kind == "min" else 127)).astype(np.int8)
    b = np.where(rng.random(cout) < 0.3, rng.choice(_S32, cout), rng.integers(-(2**20), 2**20, cout)).astype(np.int32)
    m = np.where(rng.random(cout) < 0.3, rng.choice([0, 1, 2**30, 2**31 - 1], cout),
                 rng.integers(0, 2**31 - 1, cout)).astype(np.int64)
    if draw(st.integers(0, 9)) == 0:  # a shift outside [-23, -1]: the C blocks
        sh = rng.integers(-31, 8, cout).astype(np.int64)
    else:
        sh = np.where(rng.random(cout) < 0.2, rng.choice([-1, -23], cout), rng.integers(-23, 0, cout)).astype(np.int64)
    in_zp = draw(st.sampled_from([-128, 127]) | st.integers(-128, 127))
    out_zp = draw(st.sampled_from([-128, 127]) | st.integers(-128, 127))
    if draw(st.booleans()):
        act = (-128, 127)  # the byte stores
    else:
        lo = draw(st.integers(-128, 126))
        act = (lo, draw(st.integers(lo, 127)))
    params = packed_params(x.shape, (n, oh, ow, cout), k, k, pt=pad, pl=pad, in_zp=in_zp, out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    stream = tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp)
    return dict(x=x, wt=wt, b=b, m=m, s=sh, w=stream, params=params, expected=expected)


@settings(max_examples=30, deadline=None)
@given(case=_layer())
def test_wide_layers_on_host(lib, case: dict) -> None:
    cout = case["wt"].shape[0]
    status, out = cb.conv2d_packed(case["x"], case["wt"], case["b"], cb.Quant(case["m"], case["s"], cout),
                                   case["params"], stream=case["w"])
    assert status == MCU_OK
    base.assert_equal(out, case["expected"])


def _kernel_at(opt: str, tmp: Path) -> Path:
    """The kernel's source compiled at `opt` (a pragma ahead of it: the build's -O2 stays for the rest)."""
    src = tmp / f"packed{opt.replace('-', '_')}.c"
    src.write_text(f'#pragma GCC optimize("{opt[1:]}")\n#include "{kernel_source(tuned.SOURCE)}"\n')
    return src


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name,opt,wide", [("mps2-an505", "-O2", None), ("mps2-an386", "-O2", None),
                                                 ("mps2-an505", "-Os", None), ("mps2-an505", "-O3", None),
                                                 ("mps2-an505", "-O2", 128)])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(_layer(), min_size=16, max_size=16))
def test_wide_layers_on_core(tmp_path_factory, board_name: str, opt: str, wide: int | None,
                             cases: list[dict]) -> None:
    """Batches of 16 drawn layers per firmware, bit-exact with the reference on the core (`wide`: the
    straight-line path's MCU_PIXEL_WIDE_TAPS when not the default 256)."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("gemm_dsp")
    main = tmp / "main.c"
    main.write_text(packed_firmware_source(cases))
    kernel = kernel_source(tuned.SOURCE) if opt == "-O2" else _kernel_at(opt, tmp)
    board = load_board(board_name)
    defines = {"MCU_PIXEL_WIDE_TAPS": wide} if wide else None
    fw = build_firmware(board, [main, kernel], [runtime_dir() / "include"], tmp / "out", defines=defines)
    result = run_qemu(board, fw.elf, timeout_s=300)
    assert result.exit_code == 0 and "packed cases failed: 0" in result.console, result.console


@requires_qemu
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O3"])
def test_wide_kernel_compiles_at_every_level(opt: str, tmp_path) -> None:
    """The assembly pins 13 registers (and saves r7 itself): every level must still allocate around it."""
    from mcu.device.toolchain import compile_flags, find_cross_compiler

    for board_name in ("mps2-an505", "mps2-an386"):
        flags = [f for f in compile_flags(load_board(board_name)) if not f.startswith("-O")]
        src = kernel_source(tuned.SOURCE)
        done = subprocess.run([str(find_cross_compiler()), *flags, opt, "-c", "-o", str(tmp_path / "k.o"), str(src)],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{board_name} at {opt}:\n{done.stderr[-2000:]}"
