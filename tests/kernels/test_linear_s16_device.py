"""mcu_linear_s16 on the simulated Cortex-M cores (M33, M4, M0+, M55): the FC autoencoder's layer shapes and
extreme data, every output compared with the Python integer reference (mcu/reference/s16.py) on the board.
The host tests (test_kernels_s16.py) cover the same C; here the Arm compilers' code and the cores' 64-bit
arithmetic (the M0+ has no SMULL) run it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from c_source import c_array
from mcu.paths import kernel_source
from mcu.reference.s16 import INT16_MAX, INT16_MIN, linear_s16
from repo import requires_qemu

# (batch, in_features, out_features, data, bias, act, shift)
CASES = [
    (1, 640, 128, "uniform", "small", (0, INT16_MAX), -14),
    (1, 128, 128, "uniform", "small", (0, INT16_MAX), -12),
    (1, 128, 8, "uniform", "large", (0, INT16_MAX), -12),
    (1, 8, 128, "uniform", "small", (0, INT16_MAX), -8),
    (1, 128, 640, "uniform", "small", (INT16_MIN, INT16_MAX), -12),
    (2, 300, 5, "extremes", "large", (INT16_MIN, INT16_MAX), -16),  # past one 256-product partial sum
    (3, 7, 3, "extremes", "none", (-1000, 2000), 2),
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
    b = None if bias == "none" else rng.integers(-(2**40 if bias == "large" else 2**30),
                                                2**40 if bias == "large" else 2**30, size=fout, dtype=np.int64)
    m = rng.integers(2**30, 2**31, size=fout, dtype=np.int64).astype(np.int32)
    m[0] = 2**31 - 1
    s = np.clip(shift + rng.integers(-2, 1, size=fout), -31, 14).astype(np.int32)
    return x, w, b, m, s, act, linear_s16(x, w, b, m, s, act_min=act[0], act_max=act[1])


def _program() -> str:
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
                   f"    return st == MCU_OK && memcmp(y, e{k}, sizeof e{k}) == 0;\n}}\n")
        calls.append(f"    if (!case{k}()) {{ say(\"case {k} FAIL\\n\"); ++bad; }}\n")
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
    src.write_text(_program())
    b = load_board(board)
    fw = build_firmware(b, [src, kernel_source("mcu_linear_s16.c")], [runtime_dir() / "include"], tmp_path / "out")
    result = run_qemu(b, fw.elf)
    assert "LINEAR S16 PASS" in result.console and result.exit_code == 0, result.console[-2000:]
