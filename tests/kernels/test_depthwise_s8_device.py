"""The int8 depthwise kernels' DSP paths on the simulated Cortex-M33 and M4 themselves (and the same cases
through the M0+'s table path for 5x5 windows, convolution/dw_plain_s8.h, and the M55's Helium paths).

tests/kernels/test_kernels_s8_opt.py runs the same C paths on the host with the DSP instructions emulated;
the row path of the depthwise kernels (runtime_c/kernels/common/dw_s8_dsp.h) also has
hand-written assembly (the 3x3 pixel loop, the requantization of four lanes) that only the Arm
cores run. Here one firmware runs a list of depthwise cases aimed at that code (borders, images as
narrow as the kernel, stride 2 with and without a right overhang, 5x5 with two columns of padding,
channel tails, activation clamps, requantization shifts outside the fast range, the output apart
from, overlapping (at the overlap contract's limit) and on top of the input) and compares every
output byte with the Python reference.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from c_source import c_array
from mcu.backends.optimized import dwpack
from mcu.plan.contracts import window_max_delta
from mcu.reference.conv import depthwise_conv2d_s8
from repo import requires_qemu
from mcu.paths import kernel_source

REPO = Path(__file__).resolve().parents[2]

# (channels, h, w, kh, kw, stride, pad_top, pad_left, mode, act, shifts)
#   act: the activation bounds, or "relu": all of int8 with the output offset -128
#   mode: "apart" (separate output), "overlap" (output at the window contract's largest offset below
#   the input; "overlap-2" two bytes lower), "inplace" (the ring-buffer kernel; stride 1, same size)
#   shifts: "fast" (all in [-24, -1]), "mixed" (some 0, positive or below -24: the generic requantization)
CASES = [
    (64, 25, 5, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),  # DS-CNN's layer
    (64, 25, 5, 3, 3, 1, 1, 1, "apart", (-128, 127), "fast"),
    (64, 25, 5, 3, 3, 1, 1, 1, "overlap", (-128, 127), "fast"),
    (8, 6, 9, 3, 3, 1, 1, 1, "inplace", (-100, 90), "fast"),
    (8, 6, 3, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),  # image as narrow as the kernel
    # the channel planes (convolution/dw_plane_s8_dsp.h): lines down the columns of a taller image, odd and
    # even line lengths, the byte clamp of a pair and of a line's last pixel, padding 2 and 0
    (12, 9, 4, 3, 3, 1, 2, 0, "inplace", (-90, 100), "fast"),
    (8, 4, 6, 3, 3, 1, 0, 2, "inplace", (-100, 90), "fast"),
    (8, 30, 24, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),  # planes in three bands of lines
    # lines of whole quads (8) and of quads, a pair and a pixel alone (11), with the clamps of all three
    (8, 6, 8, 3, 3, 1, 1, 1, "inplace", (-100, 90), "fast"),
    (12, 7, 11, 3, 3, 1, 1, 1, "inplace", (-90, 100), "fast"),
    # lines of six without the clamp: one step a line (MobileNet's 6 x 6 layers), padding 1 and 2 across
    (16, 6, 6, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),
    (8, 5, 6, 3, 3, 1, 2, 1, "inplace", (-128, 127), "fast"),
    (16, 8, 3, 3, 3, 1, 1, 1, "overlap", (-128, 127), "fast"),
    (8, 3, 3, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),  # too few pixels for the row path
    (12, 4, 4, 3, 3, 1, 1, 1, "apart", (-5, 127), "fast"),
    (13, 5, 7, 3, 3, 1, 2, 1, "inplace", (-128, 127), "mixed"),  # pad_top 2, channel tail
    (7, 5, 6, 3, 3, 1, 0, 0, "inplace", (-128, 127), "fast"),  # no padding at the top or left
    (5, 2, 2, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),  # narrower than the kernel
    (16, 12, 12, 3, 3, 2, 1, 1, "apart", (-128, 127), "fast"),  # stride 2, no right overhang
    (16, 13, 13, 3, 3, 2, 1, 1, "overlap", (-128, 127), "fast"),  # stride 2, right overhang
    (32, 12, 12, 3, 3, 2, 1, 1, "overlap", (-60, 100), "mixed"),
    (24, 9, 11, 3, 3, 2, 0, 0, "apart", (-128, 127), "fast"),
    (8, 7, 9, 5, 5, 1, 2, 2, "inplace", (-128, 127), "fast"),  # 5x5: two columns of shift each side
    (9, 7, 9, 5, 5, 1, 2, 2, "overlap", (-128, 127), "mixed"),
    (8, 6, 6, 1, 3, 1, 0, 1, "inplace", (-128, 127), "fast"),
    (8, 6, 6, 3, 1, 1, 1, 0, "apart", (-128, 127), "fast"),
    (4, 5, 5, 2, 2, 1, 1, 1, "apart", (-128, 127), "fast"),
    (64, 3, 20, 3, 3, 1, 1, 1, "overlap", (-128, 127), "fast"),  # row above the stack buffer: pixel order
    (256, 3, 3, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),  # MobileNet's last depthwise (pixel path)
    (128, 6, 6, 3, 3, 2, 1, 1, "overlap", (-128, 127), "fast"),
    (8, 7, 6, 3, 3, 2, 1, 1, "apart", (-100, 90), "fast"),  # stride-2 planes' lines of three, clamped
    # stride 2 over channel planes (more than 200 output pixels): bands through the row buffer, odd lines
    # and the clamp straight into a separate output, channels not lined up with the input's
    (8, 30, 32, 3, 3, 2, 1, 1, "overlap", (-128, 127), "fast"),
    (4, 31, 29, 3, 3, 2, 0, 1, "apart", (-100, 90), "fast"),
    (12, 33, 30, 3, 3, 2, 1, 1, "overlap-2", (-90, 127), "fast"),
    # 5x5 stride 2 (the 5x5 pixel loop): MobileNetV3's downsampling layers
    (32, 12, 12, 5, 5, 2, 2, 2, "apart", (-128, 127), "fast"),
    (40, 11, 11, 5, 5, 2, 2, 2, "overlap", (-128, 127), "fast"),  # right overhang
    (24, 14, 14, 5, 5, 2, 2, 2, "apart", (0, 127), "fast"),  # ReLU's clamp
    (20, 11, 12, 5, 5, 2, 1, 1, "overlap", (-90, 110), "fast"),  # padding 1 on top and left
    (18, 9, 9, 5, 5, 2, 2, 2, "apart", (-128, 127), "mixed"),  # a channel tail, generic requantization
    (8, 9, 13, 5, 5, 1, 2, 2, "apart", (-128, 127), "fast"),  # stride 1
    # output rows of 512 bytes (two per stack band) under a taller input: past the first bands the rows are
    # written in place, in one band, up to where the input still to be read begins
    (64, 40, 16, 5, 5, 2, 2, 2, "overlap-2", (-128, 127), "fast"),
    # a ReLU folded into the range (output offset -128, all of int8): the planes' loops without the
    # requantization's sign correction (MCU_DWPL_RELU), biases negative enough that most sums are
    # below zero; quads with a pair and a pixel alone, lines of six, of three, stride 2 apart and on the
    # input, stride 2 lines of three
    (12, 7, 11, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (16, 6, 6, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (8, 3, 3, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (8, 30, 32, 3, 3, 2, 1, 1, "overlap", "relu", "fast"),
    (12, 25, 23, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    (8, 7, 6, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    # lines longer than six without the clamp: six pixels a step (MCU_DWPL_SIXES), with and without the sign
    # correction, along rows and down columns, in bands of lines, padding 2 and 0, and the sixes' tails of
    # one, two and three pixels (DS-CNN's lines of 25 above)
    (8, 5, 13, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (8, 6, 14, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),
    (12, 5, 15, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (8, 9, 7, 3, 3, 1, 2, 0, "inplace", (-128, 127), "fast"),
    (8, 7, 12, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (12, 9, 24, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),
    (8, 18, 5, 3, 3, 1, 1, 1, "inplace", (-128, 127), "fast"),
    (8, 20, 48, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (8, 25, 7, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),  # scaled lines of sixes along columns, a pixel after
    (4, 6, 30, 3, 3, 1, 2, 0, "inplace", (-128, 127), "fast"),
    (8, 5, 18, 3, 3, 1, 0, 2, "inplace", "relu", "fast"),
    # scaled lines of 12, 24 and 48 with the plane line's bytes as immediates (MCU_DWPL_SIXES_AT): lines of 24
    # along rows in bands, of 48 and 12 down the columns
    (12, 22, 24, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (4, 48, 20, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (8, 12, 5, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    # the same with the output step an immediate (mcu_dwpl_step_at's pairs: lines of 12, 24 and 48 along rows of 64, 32
    # and 8 channels, then 96, 48 and 16); (8, 20, 48) above and the row calls of 48 and 24 below take it too
    (64, 5, 12, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (32, 7, 24, 3, 3, 1, 2, 1, "inplace", "relu", "fast"),
    (96, 3, 12, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (48, 4, 24, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (16, 5, 48, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    # lines of 12 and 24 down the columns whose step (the row's bytes, 64 and 32) is one of those immediates: the output
    # skip is not zero, so the constants-in-FPU-registers loops take the register step and the skip
    (8, 12, 8, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (4, 24, 8, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    # row calls (a streamed prefix's: fewer output rows than input rows) of ReLU rows of 48, 24 and 12 take the
    # same scaled loop
    (8, 3, 48, 3, 3, 1, 0, 1, "apart", "relu", "fast"),
    (32, 4, 24, 3, 3, 1, 0, 1, "overlap", "relu", "fast"),
    (12, 3, 12, 3, 3, 1, 0, 1, "apart", "relu", "fast"),
    # lines of six and of three, a group's four channels a call: ReLU lines of six and three, clamped lines of three
    (12, 6, 6, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (12, 3, 3, 3, 3, 1, 1, 1, "inplace", "relu", "fast"),
    (12, 3, 3, 3, 3, 1, 1, 0, "inplace", (-100, 90), "fast"),
    # small stride-2 images straight from the channels (convolution/dw_direct_s8_dsp.h, which takes the
    # relu cases below; the others keep the planes or the pixel path): rows of pairs staged under the
    # input, a row of pairs below padding 2, odd rows apart and staged
    (64, 12, 12, 3, 3, 2, 1, 1, "overlap", "relu", "fast"),
    (12, 8, 8, 3, 3, 2, 1, 1, "overlap-2", "relu", "fast"),
    (8, 4, 10, 3, 3, 2, 2, 0, "apart", "relu", "fast"),
    (20, 5, 5, 3, 3, 2, 0, 1, "apart", "relu", "fast"),
    (128, 6, 6, 3, 3, 2, 1, 1, "overlap", "relu", "fast"),
    # a 3 x 3 output in one straight block a group on the M33 (mcu_dwd_run9): the staged case above, and apart
    (12, 5, 7, 3, 3, 2, 1, 0, "apart", "relu", "fast"),
    # the channel planes of an even image's 6 x 6 and 3 x 3 outputs on the M33 (mcu_dwp_layer): the 12 x 12 x 64 and
    # 6 x 6 x 128 cases above (staged), 12 x 12 x 96 and 6 x 6 x 192 apart
    (96, 12, 12, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    (192, 6, 6, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    # scaled stride-2 lines with a channel's constants held in registers (mcu_dwpl_group_s2_held): plane lines of 50
    # int16 at 16 channels (two bands of lines, on the input), of 26 at 32 (apart, and through the row buffer)
    (16, 11, 48, 3, 3, 2, 1, 1, "overlap", "relu", "fast"),
    (32, 9, 24, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    (32, 7, 25, 3, 3, 2, 1, 0, "overlap-2", "relu", "fast"),
    # their fill with the loads at immediate offsets (mcu_dwpl_fill_s2h16, _s2h32: a pixel alone, an odd count of
    # pairs, a pixel alone) over three bands of six output lines and two of 12 and 6, every band's first line
    # filled again
    (16, 35, 48, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    (32, 35, 24, 3, 3, 2, 1, 1, "apart", "relu", "fast"),
    # the one-step lines with their constants packed (mcu_depthwise_conv2d_s8_planes, mcu/backends/optimized/dwpack.py):
    # lines of six saturated and ReLU, down the columns of a taller image, lines of three saturated, clamped and
    # ReLU; the cores without the planes (M0+, M55) compute them from the same words without the planes
    (16, 6, 6, 3, 3, 1, 1, 1, "packed", (-128, 127), "fast"),
    (12, 6, 6, 3, 3, 1, 2, 0, "packed", "relu", "fast"),
    (8, 6, 4, 3, 3, 1, 1, 2, "packed", (-128, 127), "fast"),
    (8, 3, 3, 3, 3, 1, 1, 1, "packed", (-128, 127), "fast"),
    (12, 3, 2, 3, 3, 1, 0, 1, "packed", (-100, 90), "fast"),
    (256, 3, 3, 3, 3, 1, 1, 1, "packed", "relu", "fast"),
    # the whole plane a straight block (mcu_dwpl_channels_whole): 6 x 6 x 128 scaled, padding one line across (the
    # 3 x 3 x 256 case above takes its other form)
    (128, 6, 6, 3, 3, 1, 1, 1, "packed", "relu", "fast"),
]


def _case_data(k: int, case):
    c, h, w, kh, kw, s, pt, pl, mode, act, shifts = case
    rng = np.random.default_rng(1000 + k)
    oh = (h + 2 * pt - kh) // s + 1 if mode not in ("inplace", "packed") else h
    ow = (w + 2 * pl - kw) // s + 1 if mode not in ("inplace", "packed") else w
    x = rng.integers(-128, 128, (1, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, (kh, kw, c), dtype=np.int8)
    relu = act == "relu"
    if relu:
        act = (-128, 127)
    b = rng.integers(-30000, 30000 if not relu else 2000, c).astype(np.int32)
    m = rng.integers(2**30, 2**31, c, dtype=np.int64)
    m[rng.random(c) < 0.1] = 0
    sh = rng.integers(-10, -6, c)
    if shifts == "mixed":
        pick = rng.random(c)
        sh[pick < 0.15] = 0
        sh[(pick >= 0.15) & (pick < 0.3)] = 2
        sh[(pick >= 0.3) & (pick < 0.4)] = -25
    params = dict(input=x.shape, output=(1, oh, ow, c), ch_mult=1, kernel_h=kh, kernel_w=kw, stride_h=s, stride_w=s,
                  pad_top=pt, pad_left=pl, dilation_h=1, dilation_w=1, input_offset=int(rng.integers(-127, 129)),
                  output_offset=-128 if relu else int(rng.integers(-128, 128)), act_min=act[0], act_max=act[1])
    expected = depthwise_conv2d_s8(x, wt, b, m.astype(np.int32), sh.astype(np.int32), **params)
    delta = 0
    if mode.startswith("overlap"):
        t = lambda shape: SimpleNamespace(shape=shape, dtype="int8")  # noqa: E731
        delta = window_max_delta(t((1, c, h, w)), t((1, c, oh, ow)), (kh, kw), (s, s), (pt, pl), (1, 1))
        assert delta < 0
    if mode == "overlap-2":  # two bytes lower: the output's channels no longer line up with the input's
        delta -= 2
    return x, wt, b, m.astype(np.int32), sh.astype(np.int32), params, np.asarray(expected), delta


def _program() -> str:
    out = ['#include <stdint.h>\n#include <string.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/platform.h"\n\n',
           "static int8_t arena[57344] __attribute__((aligned(4)));\nstatic int8_t ring[8192];\n",
           "static void say(const char *s) { mcu_platform_write(s, strlen(s)); }\n"]
    calls = []
    for k, case in enumerate(CASES):
        x, wt, b, m, sh, p, expected, delta = _case_data(k, case)
        mode = case[8]
        out += [c_array(f"x{k}", "int8_t", x), c_array(f"e{k}", "int8_t", expected)]
        if mode != "packed":  # (the packed words hold the weights and the requantization)
            out += [c_array(f"w{k}", "int8_t", wt), c_array(f"b{k}", "int32_t", b), c_array(f"m{k}", "int32_t", m),
                    c_array(f"s{k}", "int32_t", sh)]
        i, o = p["input"], p["output"]
        fields = (f".input = {{{i[0]}, {i[1]}, {i[2]}, {i[3]}}}, .output = {{{o[0]}, {o[1]}, {o[2]}, {o[3]}}}, "
                  f".ch_mult = 1, .kernel_h = {p['kernel_h']}, .kernel_w = {p['kernel_w']}, "
                  f".stride_h = {p['stride_h']}, .stride_w = {p['stride_w']}, .pad_top = {p['pad_top']}, "
                  f".pad_left = {p['pad_left']}, .dilation_h = 1, .dilation_w = 1, "
                  f".input_offset = {p['input_offset']}, .output_offset = {p['output_offset']}, "
                  f".act_min = {p['act_min']}, .act_max = {p['act_max']}")
        nx, ny = x.size, expected.size
        base = 8192  # input offset in the arena; an overlapping output starts delta bytes from it
        if mode == "packed":
            words = dwpack.pack(wt.transpose(2, 0, 1), b.astype(np.int64), m, sh, p["output_offset"],
                                dwpack.lines_of(x.shape[1], x.shape[2])[0], (p["act_min"], p["act_max"]))
            out.append(c_array(f"k{k}", "int32_t", words))
            call = (f"memcpy(arena, x{k}, {nx});\n"
                    f"    st = mcu_depthwise_conv2d_s8_planes(&p, arena, k{k});\n"
                    f"    y = arena;\n")
        elif mode == "inplace":
            call = (f"const mcu_context ctx = {{ring, (int32_t)sizeof ring}};\n"
                    f"    memcpy(arena, x{k}, {nx});\n"
                    f"    st = mcu_depthwise_conv2d_s8_inplace(&ctx, &p, &q, arena, w{k}, b{k});\n"
                    f"    y = arena;\n")
        else:
            y_off = base + nx + 64 if mode == "apart" else base + delta
            call = (f"memcpy(arena + {base}, x{k}, {nx});\n"
                    f"    st = mcu_depthwise_conv2d_s8(NULL, &p, &q, arena + {base}, w{k}, b{k}, arena + {y_off});\n"
                    f"    y = arena + {y_off};\n")
        out.append(f"static int case{k}(void)\n{{\n"
                   f"    static const mcu_depthwise_conv2d_s8_params p = {{{fields}}};\n"
                   + (f"    const mcu_per_channel_quant q = {{m{k}, s{k}}};\n" if mode != "packed" else "") +
                   f"    mcu_status st;\n    const int8_t *y;\n    {call}"
                   f"    return st == MCU_OK && memcmp(y, e{k}, {ny}) == 0;\n}}\n")
        calls.append(f"    if (!case{k}()) {{ say(\"case {k} FAIL\\n\"); ++bad; }}\n")
    out.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
               "    say(bad ? \"DEPTHWISE FAIL\\n\" : \"DEPTHWISE PASS\\n\");\n"
               "    mcu_platform_exit(bad ? 1 : 0);\n    return 0;\n}\n")
    return "".join(out)


@requires_qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386", "mps2-an385-m0plus", "mps3-an547"])
def test_depthwise_dsp_paths_on_device(tmp_path: Path, board: str) -> None:
    from mcu.device.boards import load_board
    from mcu.paths import runtime_dir
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    src = tmp_path / "main.c"
    src.write_text(_program())
    rt = runtime_dir()
    kernels = [kernel_source(f) for f in ("mcu_depthwise_conv2d_s8.c", "mcu_depthwise_conv2d_s8_inplace.c",
                                          "mcu_depthwise_conv2d_s8_planes.c")]
    b = load_board(board)
    fw = build_firmware(b, [src, *kernels], [rt / "include"], tmp_path / "out")
    result = run_qemu(b, fw.elf)
    assert "DEPTHWISE PASS" in result.console and result.exit_code == 0, result.console[-2000:]
