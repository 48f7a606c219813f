"""The depthwise kernels' pixel path for small 3x3 images (runtime_c/kernels/internal/dw_px_s8_dsp.h),
bit-exact with the Python reference: on the host with the DSP instructions emulated (hypothesis,
every overlap mode) and on the simulated Cortex-M33 and M4 (batches of drawn layers per firmware).

The path serves 3x3 layers with channels a multiple of 4, every shift in [-24, -1] and at most
MCU_DWPX_MAX_PIXELS output pixels; the cases draw channel counts on both sides of a chunk (32
channels), images down to one pixel (every tap a border tap), strides 1 and 2, paddings 0 to 2,
extremes of data, weights, biases, multipliers and activation ranges, and the output apart from,
overlapping (at the window contract's limit) and on top of (the in-place kernel) the input.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import test_kernels_s8 as base
from cbind import MCU_OK, ptr
from conftest import requires_qemu
from mcu.contracts import window_max_delta
from mcu.quant import reference as ref
from test_kernels_s8_opt import build_emulated_lib

_P = ctypes.c_void_p
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
    return dict(mode=mode, c=c, h=h, w=w, s=stride, pt=pt, pl=pl, oh=oh, ow=ow, in_zp=draw(base.zero_points),
                out_zp=draw(base.zero_points), act=draw(base.act_bounds()), bias=draw(base.bias_kinds),
                data=draw(base.data_modes), wmode=draw(base.weight_modes),
                shift=draw(st.one_of(st.sampled_from([-1, -24]), st.integers(-24, -1))),
                mult=draw(st.sampled_from(["varied", "top", "zero"])), seed=draw(st.integers(0, 2**32 - 1)))


def _layer(case: dict):
    rng = np.random.default_rng(case["seed"])
    c = case["c"]
    x = base.int8_data(rng, (1, case["h"], case["w"], c), case["data"])
    wt = base.weights(rng, (3, 3, c), case["wmode"])
    b = base.biases(rng, c, case["bias"])
    m, _ = base.per_channel(rng, c, -8, "varied")
    if case["mult"] == "top":
        m[:] = 2**31 - 1
    elif case["mult"] == "zero":
        m[::2] = 0
    s = np.clip(case["shift"] + rng.integers(-3, 4, c), -24, -1).astype(np.int32)  # the path's whole range
    params = dict(input=x.shape, output=(1, case["oh"], case["ow"], c), ch_mult=1, kernel_h=3, kernel_w=3,
                  stride_h=case["s"], stride_w=case["s"], pad_top=case["pt"], pad_left=case["pl"], dilation_h=1,
                  dilation_w=1, input_offset=-case["in_zp"], output_offset=case["out_zp"], act_min=case["act"][0],
                  act_max=case["act"][1])
    expected = np.asarray(ref.depthwise_conv2d_s8(x, wt, b, m, s, **params))
    delta = 0
    if case["mode"] == "overlap":
        t = lambda shape: SimpleNamespace(shape=shape, dtype="int8")  # noqa: E731
        delta = window_max_delta(t((1, c, case["h"], case["w"])), t((1, c, case["oh"], case["ow"])), (3, 3),
                                 (case["s"], case["s"]), (case["pt"], case["pl"]), (1, 1))
    return x, wt, b, m, s, params, expected, delta


@pytest.fixture(scope="module")
def emulated():
    handle = ctypes.CDLL(str(build_emulated_lib()))
    for name in ("mcu_depthwise_conv2d_s8", "mcu_depthwise_conv2d_s8_inplace"):
        getattr(handle, name).restype = ctypes.c_int
    return handle


@settings(max_examples=60, deadline=None)
@given(px_cases())
def test_pixel_path_emulated(emulated, case) -> None:
    x, wt, b, m, s, params, expected, delta = _layer(case)
    q = cb.Quant(m, s, case["c"])
    p = cb._fields(cb.DepthwiseConv2dS8Params, params)
    b_ptr = _P(ptr(b)) if b is not None else None
    if case["mode"] == "inplace":
        ring = np.zeros((case["pt"] + 1) * x.shape[2] * case["c"], dtype=np.int8)
        ctx = cb.Context(ring.ctypes.data, ring.size)
        data = x.copy()
        status = emulated.mcu_depthwise_conv2d_s8_inplace(ctypes.byref(ctx), ctypes.byref(p),
                                                          ctypes.byref(q.struct), _P(data.ctypes.data),
                                                          _P(ptr(wt)), b_ptr)
        assert status == MCU_OK
        base.assert_equal(data, expected)
        return
    # one arena: the input at `at`, the output `delta` bytes from it (apart: after the input)
    at = max(0, -delta) + 16
    arena = np.zeros(at + x.size + expected.size + 64, dtype=np.int8)
    arena[at:at + x.size] = x.reshape(-1)
    y_at = at + x.size + 16 if case["mode"] == "apart" else at + delta
    status = emulated.mcu_depthwise_conv2d_s8(None, ctypes.byref(p), ctypes.byref(q.struct),
                                              _P(arena.ctypes.data + at), _P(ptr(wt)), b_ptr,
                                              _P(arena.ctypes.data + y_at))
    assert status == MCU_OK
    base.assert_equal(arena[y_at:y_at + expected.size].reshape(expected.shape), expected)


def _arr(ctype: str, name: str, values) -> str:
    body = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1)) or "0"
    return f"static const {ctype} {name}[] = {{{body}}};\n"


def _program(cases: list[dict]) -> str:
    out = ['#include <stdint.h>\n#include <string.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/platform.h"\n\n',
           "static int8_t arena[65536] __attribute__((aligned(4)));\nstatic int8_t ring[16384];\n",
           "static void say(const char *s) { mcu_platform_write(s, strlen(s)); }\n"]
    calls = []
    for k, case in enumerate(cases):
        x, wt, b, m, s, p, expected, delta = _layer(case)
        out += [_arr("int8_t", f"x{k}", x), _arr("int8_t", f"w{k}", wt), _arr("int32_t", f"m{k}", m),
                _arr("int32_t", f"s{k}", s), _arr("int8_t", f"e{k}", expected)]
        bias = "NULL"
        if b is not None:
            out.append(_arr("int32_t", f"b{k}", b))
            bias = f"b{k}"
        i, o = p["input"], p["output"]
        fields = (f".input = {{{i[0]}, {i[1]}, {i[2]}, {i[3]}}}, .output = {{{o[0]}, {o[1]}, {o[2]}, {o[3]}}}, "
                  f".ch_mult = 1, .kernel_h = 3, .kernel_w = 3, .stride_h = {p['stride_h']}, "
                  f".stride_w = {p['stride_w']}, .pad_top = {p['pad_top']}, .pad_left = {p['pad_left']}, "
                  f".dilation_h = 1, .dilation_w = 1, .input_offset = {p['input_offset']}, "
                  f".output_offset = {p['output_offset']}, .act_min = {p['act_min']}, .act_max = {p['act_max']}")
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
               "    say(bad ? \"PIXEL PATH FAIL\\n\" : \"PIXEL PATH PASS\\n\");\n"
               "    mcu_platform_exit(bad ? 1 : 0);\n    return 0;\n}\n")
    return "".join(out)


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(px_cases(), min_size=30, max_size=30))
def test_pixel_path_on_core(tmp_path_factory, board: str, cases: list[dict]) -> None:
    """30 drawn layers per firmware through the native assembly (taps, requantization, clamp)."""
    from mcu.boards import load_board
    from mcu.paths import runtime_dir
    from mcu.sim.qemu import run_qemu
    from mcu.toolchain import build_firmware

    tmp = tmp_path_factory.mktemp("dwpx")
    (tmp / "main.c").write_text(_program(cases))
    rt = runtime_dir()
    kernels = [rt / "kernels" / f for f in ("mcu_depthwise_conv2d_s8.c", "mcu_depthwise_conv2d_s8_inplace.c")]
    b = load_board(board)
    fw = build_firmware(b, [tmp / "main.c", *kernels], [rt / "include"], tmp / "out")
    result = run_qemu(b, fw.elf)
    assert "PIXEL PATH PASS" in result.console and result.exit_code == 0, result.console[-2000:]
