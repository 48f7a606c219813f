"""mcu_add_s8's table path on the simulated Cortex-M33 and M4: contiguous residual adds of at least
256 elements with the full int8 activation range run one assembly loop (runtime_c/kernels/elementwise/
binary_s8.h) that only the Arm cores execute. Batches of drawn adds per firmware (operands apart and
in place, extremes of data, zero-points, multipliers and output shifts over the fast range and
outside it, clamped and full activation ranges), bit-exact with the Python reference."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s8_cases as base
from c_source import c_array
from mcu.reference.elementwise import add_s8
from repo import requires_qemu
from mcu.paths import kernel_source

MAX_DIMS = 6  # MCU_MAX_DIMS


# the operands' shifts: the tables' one-step path (<= 0, its ends included) and the general loop (> 0)
shifts = st.one_of(st.sampled_from([0, -1, -31]), st.integers(-31, 0), st.integers(1, 4))


@st.composite
def add_cases(draw) -> dict:
    n = draw(st.one_of(st.sampled_from([256, 257, 1024]), st.integers(256, 1500)))
    act = draw(st.one_of(st.just((-128, 127)), st.just((-128, 127)), base.act_bounds()))
    if draw(st.booleans()):
        # Every table entry visible in the output: no left shift and an output requantization of about
        # 1 (multiplier 2^31 - 1, shift 0), so one unit off in a rescaled operand is one off in the result.
        return dict(n=n, a_zp=draw(base.zero_points), b_zp=draw(base.zero_points), out_zp=draw(base.zero_points),
                    a_mult=draw(st.integers(2**29, 2**31 - 1)), b_mult=draw(st.integers(2**29, 2**31 - 1)),
                    a_shift=draw(st.integers(-3, 0)), b_shift=draw(st.integers(-3, 0)), left_shift=0,
                    out_mult=2**31 - 1, out_shift=0, act=(-128, 127), data=draw(base.data_modes),
                    in_place=draw(st.booleans()), seed=draw(st.integers(0, 2**32 - 1)))
    return dict(n=n, a_zp=draw(base.zero_points), b_zp=draw(base.zero_points), out_zp=draw(base.zero_points),
                a_mult=draw(base.multipliers), b_mult=draw(base.multipliers), a_shift=draw(shifts),
                b_shift=draw(shifts), left_shift=draw(st.sampled_from([0, 7, 20, 23])), out_mult=draw(base.multipliers),
                out_shift=draw(st.one_of(st.sampled_from([-1, -24]), st.integers(-24, -1), st.integers(-31, 3))),
                act=act, data=draw(base.data_modes), in_place=draw(st.booleans()),
                seed=draw(st.integers(0, 2**32 - 1)))


def _case(case: dict):
    rng = np.random.default_rng(case["seed"])
    a = base.int8_data(rng, (case["n"],), case["data"])
    b = base.int8_data(rng, (case["n"],), case["data"])
    params = dict(a_offset=-case["a_zp"], b_offset=-case["b_zp"], a_multiplier=case["a_mult"],
                  a_shift=case["a_shift"], b_multiplier=case["b_mult"], b_shift=case["b_shift"], left_shift=case["left_shift"],
                  out_multiplier=case["out_mult"], out_shift=case["out_shift"], output_offset=case["out_zp"],
                  act_min=case["act"][0], act_max=case["act"][1])
    expected = np.asarray(add_s8(a, b, **params)).astype(np.int8)
    return a, b, params, expected


def _program(cases: list[dict]) -> str:
    out = ['#include <stdint.h>\n#include <string.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/platform.h"\n\n',
           "static int8_t buf[2][2048];\n",
           "static void say(const char *s) { mcu_platform_write(s, strlen(s)); }\n"]
    calls = []
    for k, case in enumerate(cases):
        a, b, p, expected = _case(case)
        out += [c_array(f"a{k}", "int8_t", a), c_array(f"b{k}", "int8_t", b), c_array(f"e{k}", "int8_t", expected)]
        zeros = ", ".join(["0"] * (MAX_DIMS - 1))
        fields = (f".rank = 1, .out_shape = {{{case['n']}, {zeros}}}, .a_strides = {{1, {zeros}}}, "
                  f".b_strides = {{1, {zeros}}}, " + ", ".join(f".{f} = {v}" for f, v in p.items()))
        y = "buf[0]" if case["in_place"] else "buf[1]"
        out.append(f"static int case{k}(void)\n{{\n"
                   f"    static const mcu_binary_s8_params p = {{{fields}}};\n"
                   f"    memcpy(buf[0], a{k}, {case['n']});\n"
                   f"    const mcu_status st = mcu_add_s8(&p, buf[0], b{k}, {y});\n"
                   f"    return st == MCU_OK && memcmp({y}, e{k}, {case['n']}) == 0;\n}}\n")
        calls.append(f"    if (!case{k}()) {{ say(\"case {k} FAIL\\n\"); ++bad; }}\n")
    out.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
               "    say(bad ? \"ADD FAIL\\n\" : \"ADD PASS\\n\");\n"
               "    mcu_platform_exit(bad ? 1 : 0);\n    return 0;\n}\n")
    return "".join(out)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(add_cases(), min_size=25, max_size=25))
def test_add_table_path_on_core(tmp_path_factory, board: str, cases: list[dict]) -> None:
    from mcu.device.boards import load_board
    from mcu.paths import runtime_dir
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("add")
    (tmp / "main.c").write_text(_program(cases))
    rt = runtime_dir()
    b = load_board(board)
    fw = build_firmware(b, [tmp / "main.c", kernel_source("mcu_add_s8.c")], [rt / "include"], tmp / "out")
    result = run_qemu(b, fw.elf)
    assert "ADD PASS" in result.console and result.exit_code == 0, result.console[-2000:]
