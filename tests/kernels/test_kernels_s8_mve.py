"""The Helium (MVE) paths of the int8 kernels (runtime_c/kernels/common/mve_s8.h), on the simulated
Cortex-M55 (mps3-an547 in QEMU), bit-exact with the Python reference (mcu/reference/).

The host never compiles MVE code, so these paths only run on the simulated core. One firmware holds
seeded random cases of every kernel with an MVE path (convolution, 1x1 convolution, depthwise and
in-place depthwise, fully connected, max and average pooling, mean, add/sub/mul) (channel counts around multiples of 4, 8 and 16, windows
with padding and strides, all-(-128) inputs, zero-points at both ends, multipliers up to 2^31 - 1,
shifts over [-31, 30], small values with multiplier 2^30 and small right shifts so that rounding
ties occur, clamps, broadcast operands), runs every case and prints each output in hex on the UART; the test
compares every byte with the reference. The 1x1 convolution also runs on overlapping input and
output, forward and backward (the pixel-buffer contract the memory planner relies on), and the
in-place depthwise convolution on its own input (ring-buffer contract).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mcu.device.boards import load_board
from mcu.paths import kernel_source
from mve_cases import (MODES, WMODES, Builder, assert_case, binary_case, conv_case, depthwise_case, linear_case,
                       max_pool_case, mean_case, pick_mode, pointwise_case, run_cases)
from repo import requires_qemu

BOARD = "mps3-an547"
SEED = 20261203
pytestmark = [requires_qemu, pytest.mark.qemu,
              pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")]


def build_cases() -> Builder:
    rng = np.random.default_rng(SEED)
    b = Builder()
    pick = lambda seq: seq[int(rng.integers(0, len(seq)))]  # noqa: E731
    chans = [1, 3, 4, 7, 8, 12, 15, 16, 17, 24, 31, 32, 33, 48, 64]
    # The reference models' shapes first, then random ones.
    conv_case(b, rng, cin=1, cout=64, kh=10, kw=4, sh=2, sw=2, pt=4, pl=1, dh=1, dw=1, h=49, w=10)
    conv_case(b, rng, cin=3, cout=8, kh=3, kw=3, sh=2, sw=2, pt=1, pl=1, dh=1, dw=1, h=12, w=12)
    conv_case(b, rng, cin=16, cout=32, kh=3, kw=3, sh=2, sw=2, pt=1, pl=1, dh=1, dw=1, h=8, w=8)
    # The three-pixel path's weight copies: all rows at once, blocks of rows (output apart from the
    # input), and groups of windows per block when the output trails the input (ResNet-8's layers),
    # on the stack (no scratch); then the copy of all rows to the scratch the planner gives such layers.
    for cin, cout, stride, hw, trail in [(16, 16, 1, 7, False), (32, 32, 1, 7, False), (64, 64, 1, 5, False),
                                         (16, 32, 2, 9, True), (32, 32, 1, 7, True), (64, 64, 1, 6, True)]:
        conv_case(b, rng, cin=cin, cout=cout, kh=3, kw=3, sh=stride, sw=stride, pt=1, pl=1, dh=1, dw=1, h=hw, w=hw,
                  trail=trail, conv3=True, scratch="none")
    scratch_rng = np.random.default_rng(SEED + 2)  # (the cases below keep their draws)
    for cin, cout, stride, hw, trail in [(64, 64, 1, 8, True), (32, 32, 1, 7, False), (16, 32, 2, 9, True)]:
        conv_case(b, scratch_rng, cin=cin, cout=cout, kh=3, kw=3, sh=stride, sw=stride, pt=1, pl=1, dh=1, dw=1,
                  h=hw, w=hw, trail=trail, conv3=True, scratch="weights")
    # One output row a call (a streamed layer): a single group reads the weights in place, one block of
    # all rows (1 and 2 pixels, a trailing output); a few groups copy them.
    rows_rng = np.random.default_rng(SEED + 1)  # (the random cases below keep their draws)
    for cin, cout, stride, w, trail in [(64, 64, 1, 8, False), (32, 64, 2, 16, True), (16, 16, 1, 5, False),
                                        (64, 32, 1, 1, False), (64, 64, 1, 2, True), (16, 32, 1, 2, False)]:
        conv_case(b, rows_rng, cin=cin, cout=cout, kh=3, kw=3, sh=stride, sw=stride, pt=0, pl=1, dh=1, dw=1, h=3, w=w,
                  trail=trail, conv3=True)
    for _ in range(22):
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        dh, dw = pick([1, 1, 2]), pick([1, 1, 2])
        pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
        h = int(rng.integers(max(1, dh * (kh - 1) + 1 - 2 * pt), 9))
        w = int(rng.integers(max(1, dw * (kw - 1) + 1 - 2 * pl), 9))
        conv_case(b, rng, cin=pick(chans), cout=pick(chans), kh=kh, kw=kw, sh=int(rng.integers(1, 3)),
                  sw=int(rng.integers(1, 3)), pt=pt, pl=pl, dh=dh, dw=dw, h=h, w=w, n=pick([1, 1, 2]),
                  mode=pick(MODES), wmode=pick(WMODES))
    for overlap, (cin, cout) in [("apart", (64, 64)), ("forward", (64, 64)), ("backward", (64, 64)),
                                 ("forward", (33, 17)), ("backward", (16, 31)), ("apart", (8, 16)),
                                 ("forward", (48, 48)), ("backward", (7, 7))]:
        pointwise_case(b, rng, cin=cin, cout=cout, pixels=int(rng.integers(1, 12)), overlap=overlap,
                       mode=pick(MODES))
    for _ in range(10):
        cin, cout = pick(chans), pick(chans)
        overlap = pick(["apart", "forward" if cout <= cin else "backward"])
        pointwise_case(b, rng, cin=cin, cout=cout, pixels=int(rng.integers(1, 20)), overlap=overlap,
                       mode=pick(MODES))
    depthwise_case(b, rng, c=64, kh=3, kw=3, sh=1, sw=1, pt=1, pl=1, h=25, w=5)
    depthwise_case(b, rng, c=64, kh=3, kw=3, sh=1, sw=1, pt=1, pl=1, h=25, w=5, inplace=True)
    depthwise_case(b, rng, c=8, kh=3, kw=3, sh=2, sw=2, pt=1, pl=1, h=9, w=9)
    for _ in range(24):
        kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        inplace = rng.random() < 0.4
        sh, sw = (1, 1) if inplace else (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
        if inplace:  # same size: the bottom/right padding is whatever the top/left leaves
            h, w = int(rng.integers(1, 8)), int(rng.integers(1, 8))
            depthwise_case(b, rng, c=pick(chans + [40, 56, 72]), kh=kh, kw=kw, sh=1, sw=1, pt=pt, pl=pl, h=h, w=w,
                           n=pick([1, 1, 2]), inplace=True, mode=pick(MODES), wmode=pick(WMODES))
            continue
        h = int(rng.integers(max(1, kh - 2 * pt), 8))
        w = int(rng.integers(max(1, kw - 2 * pl), 8))
        depthwise_case(b, rng, c=pick(chans + [40, 56, 72]), kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, h=h, w=w,
                       n=pick([1, 1, 2]), mode=pick(MODES), wmode=pick(WMODES))
    linear_case(b, rng, batch=1, nin=640, nout=128)
    linear_case(b, rng, batch=1, nin=128, nout=640)  # more outputs than the folded-bias chunk
    for _ in range(10):
        linear_case(b, rng, batch=pick([1, 1, 2, 3]), nin=pick(chans + [100, 256]), nout=pick(chans),
                    mode=pick(MODES), wmode=pick(WMODES))
    for _ in range(12):
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
        h = int(rng.integers(max(1, kh - 2 * pt + 1), 9))
        w = int(rng.integers(max(1, kw - 2 * pl + 1), 9))
        max_pool_case(b, rng, c=pick(chans), kh=kh, kw=kw, sh=int(rng.integers(1, 3)), sw=int(rng.integers(1, 3)),
                      pt=pt, pl=pl, h=h, w=w, n=pick([1, 2]), mode=pick(MODES))
    for _ in range(12):
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        pt, pl = int(rng.integers(0, kh)), int(rng.integers(0, kw))
        h = int(rng.integers(max(1, kh - 2 * pt + 1), 9))
        w = int(rng.integers(max(1, kw - 2 * pl + 1), 9))
        max_pool_case(b, rng, c=pick(chans), kh=kh, kw=kw, sh=int(rng.integers(1, 3)), sw=int(rng.integers(1, 3)),
                      pt=pt, pl=pl, h=h, w=w, n=pick([1, 2]), mode=pick(MODES), avg=True)
    mean_case(b, rng, c=64, h=25, w=5)
    # More than 256 pixels: the 16-bit lane sums are flushed into the int32 sums in chunks.
    mean_case(b, rng, c=19, h=24, w=24, fill=-128, zp_in=-60)
    mean_case(b, rng, c=8, h=48, w=48, fill=127, zp_in=60)
    mean_case(b, rng, c=17, h=16, w=16, fill=-128, zp_in=-60)
    mean_case(b, rng, c=8, h=48, w=48, mode="ends")
    mean_case(b, rng, c=33, h=17, w=17)
    for _ in range(8):
        mean_case(b, rng, c=pick(chans), h=int(rng.integers(1, 9)), w=int(rng.integers(1, 9)), n=pick([1, 2]),
                  mode=pick(MODES))
    for op in ["add", "add", "add", "sub", "mul", "mul"]:
        for shapes in [((1, 8, 8, 16), (1, 8, 8, 16)), ((int(rng.integers(1, 40)),), (1,)),
                       ((4, 5, 7), (1, 1, 7)), ((4, 5, 7), (4, 5, 1)), ((3, 33), (3, 33))]:
            binary_case(b, rng, op=op, a_shape=shapes[0], b_shape=shapes[1], mode=pick_mode(rng))
    binary_case(b, rng, op="add", a_shape=(2, 9, 16), b_shape=(2, 9, 16), inplace=True)
    return b


@pytest.fixture(scope="module")
def device_run():
    assert load_board(BOARD).mve
    b = build_cases()
    kernels = ["mcu_conv2d_s8.c", "mcu_conv2d_1x1_s8.c", "mcu_depthwise_conv2d_s8.c",
               "mcu_depthwise_conv2d_s8_inplace.c", "mcu_linear_s8.c", "mcu_max_pool2d_s8.c", "mcu_avg_pool2d_s8.c",
               "mcu_mean_hw_s8.c", "mcu_add_s8.c", "mcu_sub_s8.c", "mcu_mul_s8.c"]
    return b, run_cases(b, kernels, "test_kernels_s8_mve")


def test_kernels_take_the_mve_path() -> None:
    """The M55 build compiles the MVE paths (the kernels' objects contain VMLADAVA)."""
    import subprocess

    from mcu.device.toolchain import compile_flags, find_cross_compiler

    board = load_board(BOARD)
    src = kernel_source("mcu_conv2d_s8.c")
    asm = subprocess.run([str(find_cross_compiler()), *compile_flags(board), "-S", "-o", "-", str(src)],
                         check=True, capture_output=True, text=True).stdout
    assert "vmladava.s8" in asm and "vqrdmulh.s32" in asm


@pytest.mark.parametrize("kernel", ["conv2d", "conv2d_1x1", "depthwise", "depthwise_inplace", "linear", "max_pool",
                                    "avg_pool", "mean_hw", "binary"])
def test_mve_kernel_equals_reference(device_run, kernel: str) -> None:
    b, got = device_run
    checked = 0
    for i, case in enumerate(b.cases):
        if case.kernel.split("/")[0] != kernel:
            continue
        assert_case(i, case, got)
        checked += 1
    assert checked >= 8
