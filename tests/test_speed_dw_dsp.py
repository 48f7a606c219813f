"""The depthwise kernels' DSP paths (runtime_c/kernels/internal/dw_px_s8_dsp.h:
the ring of padded rows, the asm loop over a whole output row, stride-1 layers of any size),
bit-exact with the Python reference: on the host with the DSP instructions emulated (hypothesis,
every overlap mode) and on the simulated Cortex-M33 and M4 (batches of drawn layers per firmware).

Cases draw what decides between the paths and inside them: 3x3 and other kernel sizes (5x5, 3x1,
1x3: the row path and the plain loop), channel counts 4..256 with non-multiples of 4 (other
paths), images from 1x1 to 48x48 (stride-1 layers of every size take the pixel path; strided ones
up to 200 output pixels), rows as wide as the ring holds and wider (then the row path), strides 1
and 2, paddings, extremes of data, weights, biases, multipliers and activation ranges, and the
output apart from, overlapping (at the window contract's limit) and on top of the input.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
import test_kernels_s8 as base
from cbind import MCU_OK, ptr
from conftest import requires_qemu
from mcu.plan.contracts import window_max_delta
from mcu.reference import kernels as ref
from mcu.paths import kernel_source
from test_kernels_s8_opt import build_emulated_lib

_P = ctypes.c_void_p
MAX_BYTES = 12000  # input bytes per case: keeps the host runs and the firmware images small


@st.composite
def dw_cases(draw) -> dict:
    mode = draw(st.sampled_from(["apart", "overlap", "inplace"]))
    kh, kw = draw(st.sampled_from([(3, 3), (3, 3), (3, 3), (3, 3), (5, 5), (3, 1), (1, 3)]))
    stride = 1 if mode == "inplace" else draw(st.sampled_from([1, 1, 2]))
    pt = draw(st.integers(0, kh - 1))
    pl = draw(st.integers(0, kw - 1))
    c = draw(st.one_of(st.sampled_from([4, 8, 16, 32, 64, 128, 256]), st.integers(1, 64).map(lambda g: 4 * g),
                       st.integers(1, 70)))
    size = draw(st.sampled_from(["small", "mid", "large", "wide"]))
    if size == "small":
        h, w = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    elif size == "mid":
        h, w = draw(st.integers(9, 26)), draw(st.integers(9, 26))
    elif size == "large":
        h, w = draw(st.integers(27, 48)), draw(st.integers(27, 48))
    else:  # rows near and past the ring's width (128 padded columns of one group)
        h, w = draw(st.integers(1, 3)), draw(st.integers(100, 300))
    while h * w * c > MAX_BYTES and c > 4:
        c = max(4, c // 2)
    while h * w * c > MAX_BYTES:
        h, w = max(1, h // 2), max(1, w // 2) if size != "wide" else w
        if size == "wide" and h == 1:
            w = MAX_BYTES // c
    if mode != "inplace":
        h, w = max(h, kh - 2 * pt), max(w, kw - 2 * pl)  # at least one output pixel
    oh = h if mode == "inplace" else (h + 2 * pt - kh) // stride + 1
    ow = w if mode == "inplace" else (w + 2 * pl - kw) // stride + 1
    return dict(mode=mode, kh=kh, kw=kw, c=c, h=h, w=w, s=stride, pt=pt, pl=pl, oh=oh, ow=ow,
                in_zp=draw(base.zero_points), out_zp=draw(base.zero_points), act=draw(base.act_bounds()),
                bias=draw(base.bias_kinds), data=draw(base.data_modes), wmode=draw(base.weight_modes),
                shift=draw(st.one_of(st.sampled_from([-1, -24]), st.integers(-24, -1), st.integers(-31, 6))),
                mult=draw(st.sampled_from(["varied", "top", "zero"])), seed=draw(st.integers(0, 2**32 - 1)))


def _layer(case: dict):
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
    expected = np.asarray(ref.depthwise_conv2d_s8(x, wt, b, m, s, **params))
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


def _run_host(lib, case: dict) -> None:
    x, wt, b, m, s, params, expected, delta = _layer(case)
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


@settings(max_examples=40, deadline=None)
@given(dw_cases())
def test_depthwise_dsp_emulated(emulated, case) -> None:
    _run_host(emulated, case)


@pytest.mark.parametrize("case", [
    # MobileNetV1-0.25's and DS-CNN's depthwise shapes (ReLU6-like clamp, same padding)
    dict(mode="inplace", kh=3, kw=3, c=8, h=48, w=48, s=1, pt=1, pl=1, oh=48, ow=48),
    dict(mode="apart", kh=3, kw=3, c=4, h=47, w=47, s=2, pt=0, pl=0, oh=23, ow=23),
    dict(mode="inplace", kh=3, kw=3, c=32, h=24, w=24, s=1, pt=1, pl=1, oh=24, ow=24),
    dict(mode="overlap", kh=3, kw=3, c=32, h=24, w=24, s=2, pt=1, pl=1, oh=12, ow=12),
    dict(mode="inplace", kh=3, kw=3, c=128, h=6, w=6, s=1, pt=1, pl=1, oh=6, ow=6),
    dict(mode="inplace", kh=3, kw=3, c=256, h=3, w=3, s=1, pt=1, pl=1, oh=3, ow=3),
    dict(mode="inplace", kh=3, kw=3, c=64, h=25, w=5, s=1, pt=1, pl=1, oh=25, ow=5),
    dict(mode="apart", kh=3, kw=3, c=4, h=1, w=250, s=1, pt=1, pl=1, oh=1, ow=250),  # 252 padded columns
    dict(mode="apart", kh=3, kw=3, c=4, h=1, w=300, s=1, pt=1, pl=1, oh=1, ow=300),  # past the ring: row path
], ids=lambda c: f"{c['mode']}-{c['h']}x{c['w']}x{c['c']}-s{c['s']}")
@pytest.mark.parametrize("extreme", ["extremes", "high"])
def test_depthwise_dsp_layers_emulated(emulated, case, extreme) -> None:
    full = dict(case, in_zp=-128, out_zp=127 if extreme == "high" else -128, act=(-128, 127) if extreme == "high"
                else (-128, 50), bias="full", data=extreme, wmode="extremes", shift=-9, mult="top", seed=7)
    _run_host(emulated, full)


def _arr(ctype: str, name: str, values) -> str:
    body = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1)) or "0"
    return f"static const {ctype} {name}[] = {{{body}}};\n"


def _program(cases: list[dict], banner: str) -> str:
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


def _fits_firmware(case: dict) -> bool:
    """Small enough for the test program's arena (32 KiB at either side) and ring."""
    return case["h"] * case["w"] * case["c"] <= 8000 and (case["pt"] + 1) * case["w"] * case["c"] <= 16384


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
@settings(max_examples=2, deadline=None, derandomize=True)
@given(cases=st.lists(dw_cases().filter(_fits_firmware), min_size=24, max_size=24))
def test_depthwise_dsp_on_core(tmp_path_factory, board: str, cases: list[dict]) -> None:
    """24 drawn layers per firmware through the native assembly (ring fill, taps, requantization, clamp)."""
    run_on_core(tmp_path_factory.mktemp("dwdsp"), board, cases, "DW DSP")
