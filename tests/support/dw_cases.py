"""Depthwise layers for the DSP paths' tests (runtime_c/kernels/convolution/dw_px_s8_dsp.h): one drawn case
made into data, weights, requantization and the reference output, run on the DSP-emulated host build
(apart from, overlapping or on top of the input) or batched into one firmware for a simulated core."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

import cbind_s8 as cb
import s8_cases as base
from c_source import c_array
from cbind import MCU_OK, ptr
from host_builds import build_emulated_lib
from mcu.plan.contracts import window_max_delta
from mcu.reference.conv import depthwise_conv2d_s8

from mcu.paths import kernel_source

_P = ctypes.c_void_p


def dw_layer(case: dict):
    rng = np.random.default_rng(case["seed"])
    c = case["c"]
    x = base.int8_data(rng, (1, case["h"], case["w"], c), case["data"])
    wt = base.weights(rng, (case["kh"], case["kw"], c), case["wmode"])
    b = base.biases(rng, c, case["bias"])
    m, _ = base.per_channel(rng, c, -8, "varied")
    if case["mult"] == "top":
        m[:] = 2**31 - 1
    elif case["mult"] == "zero":
        m[::2] = 0
    s = np.clip(case["shift"] + rng.integers(-3, 4, c), *case.get("shift_range", (-31, 7))).astype(np.int32)
    params = dict(input=x.shape, output=(1, case["oh"], case["ow"], c), ch_mult=1, kernel_h=case["kh"],
                  kernel_w=case["kw"], stride_h=case["s"], stride_w=case["s"], pad_top=case["pt"],
                  pad_left=case["pl"], dilation_h=1, dilation_w=1, input_offset=-case["in_zp"],
                  output_offset=case["out_zp"], act_min=case["act"][0], act_max=case["act"][1])
    expected = np.asarray(depthwise_conv2d_s8(x, wt, b, m, s, **params))
    delta = 0
    if case["mode"] == "overlap":
        t = lambda shape: SimpleNamespace(shape=shape, dtype="int8")  # noqa: E731
        delta = window_max_delta(t((1, c, case["h"], case["w"])), t((1, c, case["oh"], case["ow"])),
                                 (case["kh"], case["kw"]), (case["s"], case["s"]), (case["pt"], case["pl"]), (1, 1))
    return x, wt, b, m, s, params, expected, delta


@pytest.fixture(scope="module")
def emulated():
    handle = ctypes.CDLL(str(build_emulated_lib()))
    for name in ("mcu_depthwise_conv2d_s8", "mcu_depthwise_conv2d_s8_inplace"):
        getattr(handle, name).restype = ctypes.c_int
    return handle


def run_on_host(lib, case: dict) -> None:
    x, wt, b, m, s, params, expected, delta = dw_layer(case)
    q = cb.Quant(m, s, case["c"])
    p = cb._fields(cb.DepthwiseConv2dS8Params, params)
    b_ptr = _P(ptr(b)) if b is not None else None
    if case["mode"] == "inplace":
        ring = np.zeros((case["pt"] + 1) * x.shape[2] * case["c"], dtype=np.int8)
        ctx = cb.Context(ring.ctypes.data, ring.size)
        data = x.copy()
        status = lib.mcu_depthwise_conv2d_s8_inplace(ctypes.byref(ctx), ctypes.byref(p), ctypes.byref(q.struct),
                                                     _P(data.ctypes.data), _P(ptr(wt)), b_ptr)
        assert status == MCU_OK
        base.assert_equal(data, expected)
        return
    at = max(0, -delta) + 16
    arena = np.zeros(at + x.size + expected.size + 64, dtype=np.int8)
    arena[at:at + x.size] = x.reshape(-1)
    y_at = at + x.size + 16 if case["mode"] == "apart" else at + delta
    status = lib.mcu_depthwise_conv2d_s8(None, ctypes.byref(p), ctypes.byref(q.struct), _P(arena.ctypes.data + at),
                                         _P(ptr(wt)), b_ptr, _P(arena.ctypes.data + y_at))
    assert status == MCU_OK
    base.assert_equal(arena[y_at:y_at + expected.size].reshape(expected.shape), expected)


def _program(cases: list[dict], banner: str) -> str:
    out = ['#include <stdint.h>\n#include <string.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/platform.h"\n\n',
           "static int8_t arena[65536] __attribute__((aligned(4)));\nstatic int8_t ring[16384];\n",
           "static void say(const char *s) { mcu_platform_write(s, strlen(s)); }\n"]
    calls = []
    for k, case in enumerate(cases):
        x, wt, b, m, s, p, expected, delta = dw_layer(case)
        out += [c_array(f"x{k}", "int8_t", x), c_array(f"w{k}", "int8_t", wt), c_array(f"m{k}", "int32_t", m),
                c_array(f"s{k}", "int32_t", s), c_array(f"e{k}", "int8_t", expected)]
        bias = "NULL"
        if b is not None:
            out.append(c_array(f"b{k}", "int32_t", b))
            bias = f"b{k}"
        i, o = p["input"], p["output"]
        fields = (f".input = {{{i[0]}, {i[1]}, {i[2]}, {i[3]}}}, .output = {{{o[0]}, {o[1]}, {o[2]}, {o[3]}}}, "
                  f".ch_mult = 1, .kernel_h = {p['kernel_h']}, .kernel_w = {p['kernel_w']}, "
                  f".stride_h = {p['stride_h']}, .stride_w = {p['stride_w']}, .pad_top = {p['pad_top']}, "
                  f".pad_left = {p['pad_left']}, .dilation_h = 1, .dilation_w = 1, "
                  f".input_offset = {p['input_offset']}, .output_offset = {p['output_offset']}, "
                  f".act_min = {p['act_min']}, .act_max = {p['act_max']}")
        base_at = 32768
        if case["mode"] == "inplace":
            call = (f"const mcu_context ctx = {{ring, (int32_t)sizeof ring}};\n"
                    f"    memcpy(arena, x{k}, {x.size});\n"
                    f"    st = mcu_depthwise_conv2d_s8_inplace(&ctx, &p, &q, arena, w{k}, {bias});\n"
                    f"    y = arena;\n")
        else:
            y_at = base_at + x.size + 64 if case["mode"] == "apart" else base_at + delta
            call = (f"memcpy(arena + {base_at}, x{k}, {x.size});\n"
                    f"    st = mcu_depthwise_conv2d_s8(NULL, &p, &q, arena + {base_at}, w{k}, {bias}, arena + {y_at});\n"
                    f"    y = arena + {y_at};\n")
        out.append(f"static int case{k}(void)\n{{\n"
                   f"    static const mcu_depthwise_conv2d_s8_params p = {{{fields}}};\n"
                   f"    const mcu_per_channel_quant q = {{m{k}, s{k}}};\n"
                   f"    mcu_status st;\n    const int8_t *y;\n    {call}"
                   f"    return st == MCU_OK && memcmp(y, e{k}, {expected.size}) == 0;\n}}\n")
        calls.append(f"    if (!case{k}()) {{ say(\"case {k} FAIL\\n\"); ++bad; }}\n")
    out.append("int main(void)\n{\n    int bad = 0;\n    (void)ring;\n" + "".join(calls) +
               f"    say(bad ? \"{banner} FAIL\\n\" : \"{banner} PASS\\n\");\n"
               "    mcu_platform_exit(bad ? 1 : 0);\n    return 0;\n}\n")
    return "".join(out)


def run_on_core(tmp, board: str, cases: list[dict], banner: str) -> None:
    """`cases` in one firmware for `board` with both depthwise kernels: every case must pass."""
    from mcu.device.boards import load_board
    from mcu.paths import runtime_dir
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    (tmp / "main.c").write_text(_program(cases, banner))
    rt = runtime_dir()
    kernels = [kernel_source(f) for f in ("mcu_depthwise_conv2d_s8.c", "mcu_depthwise_conv2d_s8_inplace.c")]
    b = load_board(board)
    fw = build_firmware(b, [tmp / "main.c", *kernels], [rt / "include"], tmp / "out")
    result = run_qemu(b, fw.elf)
    assert f"{banner} PASS" in result.console and result.exit_code == 0, result.console[-2000:]
