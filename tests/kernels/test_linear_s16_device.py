"""mcu_linear_s16 and mcu_conv2d_s16 on the simulated Cortex-M cores (M33, M4, M0+, M55), and
mcu_depthwise_conv2d_s16 and the packed-weight mcu_linear_packed_s16 and mcu_conv2d_packed_s16 on the M33: the FC autoencoder's layer shapes, extreme data, convolutions with
strides, padding and dilation, every output compared with the Python integer reference (mcu/reference/s16.py)
on the board.
The host tests (test_kernels_s16.py) cover the same C; here the Arm compilers' code and the cores' 64-bit
arithmetic (the M0+ has no SMULL) run it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from c_source import c_array
from mcu.backends.optimized.packed16 import pack_rows
from mcu.paths import kernel_source
from mcu.reference.s16 import INT16_MAX, INT16_MIN, conv2d_s16, depthwise_conv2d_s16, linear_s16
from repo import requires_qemu

# (batch, in_features, out_features, data, bias, act, shift)
CASES = [
    (1, 640, 128, "uniform", "small", (0, INT16_MAX), -11),
    (1, 128, 128, "uniform", "small", (0, INT16_MAX), -10),
    (1, 128, 8, "uniform", "large", (0, INT16_MAX), -24),
    (1, 8, 128, "uniform", "small", (0, INT16_MAX), -8),
    (1, 128, 640, "uniform", "small", (INT16_MIN, INT16_MAX), -10),
    (2, 300, 5, "extremes", "small", (INT16_MIN, INT16_MAX), -11),  # past one 256-product partial sum
    (3, 7, 3, "extremes", "none", (-1000, 2000), -12),
    (1, 513, 4, "extremes", "small", (INT16_MIN, INT16_MAX), 14),  # the largest shift: results wrap
    (1, 600, 3, "worst", "large", (INT16_MIN, INT16_MAX), -24),  # every product +2^22: a sum past int32
]


def _case(k: int, case):
    batch, fin, fout, data, bias, act, shift = case
    rng = np.random.default_rng(500 + k)
    if data == "worst":
        x = np.full((batch, fin), INT16_MIN, dtype=np.int16)
        w = np.full((fout, fin), -128, dtype=np.int8)
    elif data == "extremes":
        x = rng.choice(np.array([INT16_MIN, INT16_MAX, -1], dtype=np.int16), size=(batch, fin))
        w = rng.choice(np.array([-128, 127], dtype=np.int8), size=(fout, fin))
    else:
        x = rng.integers(INT16_MIN, INT16_MAX + 1, size=(batch, fin)).astype(np.int16)
        w = rng.integers(-127, 128, size=(fout, fin)).astype(np.int8)
    b = None if bias == "none" else rng.integers(-(2**40 if bias == "large" else 2**22),
                                                2**40 if bias == "large" else 2**22, size=fout, dtype=np.int64)
    m = rng.integers(2**30, 2**31, size=fout, dtype=np.int64).astype(np.int32)
    m[0] = 2**31 - 1
    s = np.clip(shift + rng.integers(-2, 1, size=fout), -31, 14).astype(np.int32)
    return x, w, b, m, s, act, linear_s16(x, w, b, m, s, act_min=act[0], act_max=act[1])


# (n, h, w, cin, cout, kh, kw, stride, pad, dilation, act, shift)
CONV_CASES = [
    (1, 9, 7, 8, 6, 3, 3, 1, 1, 1, (0, INT16_MAX), -14),
    (1, 10, 10, 3, 5, 5, 5, 2, 2, 1, (INT16_MIN, INT16_MAX), -12),
    (2, 6, 8, 40, 3, 3, 3, 1, 0, 2, (-3000, 3000), -15),  # 360 products a window: two partial sums
]


def _conv_case(k: int, case):
    n, h, w, cin, cout, kh, kw, st, pad, dil, act, shift = case
    rng = np.random.default_rng(900 + k)
    x = rng.integers(INT16_MIN, INT16_MAX + 1, size=(n, h, w, cin)).astype(np.int16)
    wt = rng.integers(-127, 128, size=(cout, kh, kw, cin)).astype(np.int8)
    b = rng.integers(-(2**26), 2**26, size=cout, dtype=np.int64)
    m = rng.integers(2**30, 2**31, size=cout, dtype=np.int64).astype(np.int32)
    s = np.clip(shift + rng.integers(-2, 1, size=cout), -31, 14).astype(np.int32)
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // st + 1
    ow = (w + 2 * pad - dil * (kw - 1) - 1) // st + 1
    y = conv2d_s16(x, wt, b, m, s, stride=(st, st), padding=(pad, pad), dilation=(dil, dil), out_hw=(oh, ow),
                   act_min=act[0], act_max=act[1])
    return x, wt, b, m, s, y


def _conv_program(calls: list[str], packed: bool) -> list[str]:
    out = []
    for k, case in enumerate(CONV_CASES):
        n, h, w, cin, cout, kh, kw, st, pad, dil, act, _ = case
        x, wt, b, m, s, y = _conv_case(k, case)
        out += [c_array(f"cx{k}", "int16_t", x), c_array(f"cw{k}", "int8_t", wt), c_array(f"cb{k}", "int64_t", b),
                c_array(f"cm{k}", "int32_t", m), c_array(f"cs{k}", "int32_t", s), c_array(f"ce{k}", "int16_t", y)]
        out.append(f"static int conv{k}(void)\n{{\n"
                   f"    static const mcu_conv2d_s16_params p = {{{{{n}, {h}, {w}, {cin}}}, "
                   f"{{{y.shape[0]}, {y.shape[1]}, {y.shape[2]}, {y.shape[3]}}}, {kh}, {kw}, {st}, {st}, {pad}, "
                   f"{pad}, {dil}, {dil}, {act[0]}, {act[1]}}};\n"
                   f"    const mcu_per_channel_quant q = {{cm{k}, cs{k}}};\n"
                   f"    const mcu_status st = mcu_conv2d_s16(NULL, &p, &q, cx{k}, cw{k}, cb{k}, y);\n"
                   f"    if (st != MCU_OK || memcmp(y, ce{k}, sizeof ce{k}) != 0) {{ return 0; }}\n"
                   + (f"    static int16_t col[{kh * kw * cin}];\n"
                      f"    const mcu_context ctx = {{col, (int32_t)sizeof col}};\n"
                      f"    memset(y, 0, sizeof ce{k});\n"
                      f"    return mcu_conv2d_packed_s16(&ctx, &p, &q, cx{k}, cp{k}, cb{k}, y) == MCU_OK &&\n"
                      f"           memcmp(y, ce{k}, sizeof ce{k}) == 0;\n}}\n" if packed else "    return 1;\n}\n"))
        if packed:
            out.insert(len(out) - 1, c_array(f"cp{k}", "int32_t", pack_rows(wt.reshape(cout, -1))))
        calls.append(f"    if (!conv{k}()) {{ say(\"conv {k} FAIL\\n\"); ++bad; }}\n")
    return out


# (h, w, channels, kernel, stride, pad, dilation, bias bound, act, shift): depthwise, one channel per input channel
DW_CASES = [
    (6, 5, 9, 3, 1, 1, 1, 2**26, (0, INT16_MAX), -12),  # eight channels four a step, one left over
    (7, 7, 4, 3, 2, 1, 2, 2**40, (INT16_MIN, INT16_MAX), -10),  # biases past int32: the 64-bit requantization
]


def _dw_program(calls: list[str]) -> list[str]:
    out = []
    for k, (h, w, c, kk, st, pad, dil, bound, act, shift) in enumerate(DW_CASES):
        rng = np.random.default_rng(950 + k)
        x = rng.integers(INT16_MIN, INT16_MAX + 1, size=(1, h, w, c)).astype(np.int16)
        wt = rng.integers(-128, 128, size=(kk, kk, c)).astype(np.int8)
        b = rng.integers(-bound, bound, size=c, dtype=np.int64)
        m = rng.integers(2**30, 2**31, size=c, dtype=np.int64).astype(np.int32)
        s = np.clip(shift + rng.integers(-2, 1, size=c), -31, 14).astype(np.int32)
        oh = (h + 2 * pad - dil * (kk - 1) - 1) // st + 1
        ow = (w + 2 * pad - dil * (kk - 1) - 1) // st + 1
        y = depthwise_conv2d_s16(x, wt, b, m, s, stride=(st, st), padding=(pad, pad), dilation=(dil, dil),
                                 out_hw=(oh, ow), act_min=act[0], act_max=act[1])
        out += [c_array(f"dx{k}", "int16_t", x), c_array(f"dw{k}", "int8_t", wt), c_array(f"db{k}", "int64_t", b),
                c_array(f"dm{k}", "int32_t", m), c_array(f"ds{k}", "int32_t", s), c_array(f"de{k}", "int16_t", y)]
        out.append(f"static int depthwise{k}(void)\n{{\n"
                   f"    static const mcu_depthwise_conv2d_s16_params p = {{{{1, {h}, {w}, {c}}}, "
                   f"{{1, {oh}, {ow}, {c}}}, 1, {kk}, {kk}, {st}, {st}, {pad}, {pad}, {dil}, {dil}, "
                   f"{act[0]}, {act[1]}}};\n"
                   f"    const mcu_per_channel_quant q = {{dm{k}, ds{k}}};\n"
                   f"    const mcu_status st = mcu_depthwise_conv2d_s16(NULL, &p, &q, dx{k}, dw{k}, db{k}, y);\n"
                   f"    return st == MCU_OK && memcmp(y, de{k}, sizeof de{k}) == 0;\n}}\n")
        calls.append(f"    if (!depthwise{k}()) {{ say(\"dw {k} FAIL\\n\"); ++bad; }}\n")
    return out


def _program(depthwise: bool, packed: bool) -> str:
    out = ['#include <stdint.h>\n#include <string.h>\n#include "mcu/kernels_s16.h"\n#include "mcu/platform.h"\n\n',
           "static int16_t y[2048];\n",
           "static void say(const char *s) { mcu_platform_write(s, strlen(s)); }\n"]
    calls = []
    for k, case in enumerate(CASES):
        x, w, b, m, s, act, expected = _case(k, case)
        batch, fin, fout = case[0], case[1], case[2]
        out += [c_array(f"x{k}", "int16_t", x), c_array(f"w{k}", "int8_t", w), c_array(f"m{k}", "int32_t", m),
                c_array(f"s{k}", "int32_t", s), c_array(f"e{k}", "int16_t", expected)]
        if b is not None:
            out.append(c_array(f"b{k}", "int64_t", b))
        out.append(f"static int case{k}(void)\n{{\n"
                   f"    static const mcu_linear_s16_params p = {{{batch}, {fin}, {fout}, {act[0]}, {act[1]}}};\n"
                   f"    const mcu_per_channel_quant q = {{m{k}, s{k}}};\n"
                   f"    const mcu_status st = mcu_linear_s16(NULL, &p, &q, x{k}, w{k}, "
                   f"{'NULL' if b is None else f'b{k}'}, y);\n"
                   f"    if (st != MCU_OK || memcmp(y, e{k}, sizeof e{k}) != 0) {{ return 0; }}\n"
                   + (f"    memset(y, 0, sizeof e{k});\n"
                      f"    return mcu_linear_packed_s16(NULL, &p, &q, x{k}, p{k}, {'NULL' if b is None else f'b{k}'}, "
                      f"y) == MCU_OK && memcmp(y, e{k}, sizeof e{k}) == 0;\n}}\n" if packed else "    return 1;\n}\n"))
        if packed:
            out.insert(len(out) - 1, c_array(f"p{k}", "int32_t", pack_rows(w)))
        calls.append(f"    if (!case{k}()) {{ say(\"case {k} FAIL\\n\"); ++bad; }}\n")
    out += _conv_program(calls, packed)
    if depthwise:
        out += _dw_program(calls)
    out.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
               "    say(bad ? \"LINEAR S16 FAIL\\n\" : \"LINEAR S16 PASS\\n\");\n"
               "    mcu_platform_exit(bad ? 1 : 0);\n    return 0;\n}\n")
    return "".join(out)


@requires_qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386", "mps2-an385-m0plus", "mps3-an547"])
def test_linear_s16_on_device(tmp_path: Path, board: str) -> None:
    from mcu.device.boards import load_board
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware
    from mcu.paths import runtime_dir

    src = tmp_path / "main.c"
    # the depthwise and packed kernels' DSP paths (assembly on the M4 and M33): built and run on both
    depthwise = board in ("mps2-an505", "mps2-an386")  # and the packed kernels: the same assembly on both
    src.write_text(_program(depthwise, depthwise))
    b = load_board(board)
    names = ["mcu_linear_s16", "mcu_conv2d_s16"] + (["mcu_depthwise_conv2d_s16", "mcu_linear_packed_s16",
                                                     "mcu_conv2d_packed_s16"] if depthwise else [])
    kernels = [kernel_source(f"{k}.c") for k in names]
    fw = build_firmware(b, [src, *kernels], [runtime_dir() / "include"], tmp_path / "out")
    result = run_qemu(b, fw.elf)
    assert "LINEAR S16 PASS" in result.console and result.exit_code == 0, result.console[-2000:]
