"""The Helium (MVE) paths behind ResNet-8 on the simulated Cortex-M55 (mps3-an547 in QEMU), bit-exact with
the Python reference (mcu/reference/):

- the int8 add and subtract through the operands' tables, 16 elements per step
  (runtime_c/kernels/elementwise/mve_add_s8.h): contiguous rows of 1 to 5000 elements (the 16-element steps
  and the predicated rest), broadcast operands (rows that take the table loop and rows that do not),
  operands overwritten in place, every zero-point, multipliers 0 / 2^30 / 2^31 - 1, input shifts over
  [-31, 30], left shifts 0 / 20 / 23, output shifts over [-31, -1] (the table loop) and beyond (the
  other rows), saturating data and clamps, and halvings with small shifts (exact rounding ties);
- the convolution's three-pixel blocks (runtime_c/kernels/convolution/mve_conv3_s8.h): input channels
  16 / 32 / 48 / 64, output channels 1..130 (even ones up to 64 take the path), strides 1 and 2,
  padding, windows inside and at the edges, images whose pixel count is not a multiple of three,
  batches, shifts down to -31, zero-points at the ends; and the layers around it (other channel
  counts, dilation, clamps, left shifts) on the column path, whose interior windows are copied
  without per-row bounds;
- every kernel touched compiles at -Os, -O1, -O2 and -O3.

Each hypothesis example builds one firmware with a batch of drawn cases; the device compares every
output with the expected bytes and prints the failing cases.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mve_cases as mve
import s8_cases as base
from c_source import c_array
from mcu.device.boards import load_board
from mcu.paths import cache_dir, runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8
from mcu.reference.elementwise import add_s8, broadcast_params, sub_s8
from repo import requires_qemu

BOARD = "mps3-an547"
MAX_DIMS = 6  # MCU_MAX_DIMS
pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")

# Lengths around the 16-element steps, the table threshold (256 elements in all) and beyond.
LENGTHS = [1, 2, 15, 16, 17, 31, 32, 33, 255, 256, 257, 271, 1000, 4095, 4096, 4111, 5000]


@st.composite
def add_cases(draw) -> dict:
    layout = draw(st.sampled_from(["flat", "flat", "flat", "rows", "rows", "cols", "scalar", "a_rows"]))
    if layout == "flat":
        shape = (draw(st.one_of(st.sampled_from(LENGTHS), st.integers(1, 5000))),)
    else:
        shape = (draw(st.integers(1, 40)), draw(st.one_of(st.sampled_from([1, 15, 16, 17, 32, 33, 64]),
                                                           st.integers(1, 130))))
    if layout == "flat":
        a_shape, b_shape = shape, shape
    elif layout == "rows":  # b one row for all rows: contiguous rows, the table loop per row
        a_shape, b_shape = shape, (1, shape[1])
    elif layout == "a_rows":
        a_shape, b_shape = (1, shape[1]), shape
    elif layout == "cols":  # b one value per row: stride 0 along the row
        a_shape, b_shape = shape, (shape[0], 1)
    else:
        a_shape, b_shape = shape, (1,)
    extreme_in = draw(st.booleans())
    shifts = st.integers(-31, 30) if extreme_in else st.integers(-3, 0)
    if draw(st.integers(0, 3)) == 0:
        # halvings with small shifts: both roundings meet exact ties, positive and negative, often
        return dict(op=draw(st.sampled_from(["add", "sub"])), a_shape=a_shape, b_shape=b_shape,
                    a_zp=draw(base.zero_points), b_zp=draw(base.zero_points), out_zp=draw(base.zero_points),
                    a_mult=2**30, b_mult=2**30, a_shift=draw(st.integers(-2, 0)), b_shift=draw(st.integers(-2, 0)),
                    left_shift=draw(st.integers(0, 2)), out_mult=2**30, out_shift=draw(st.integers(-3, -1)),
                    act=(-128, 127), data=draw(base.data_modes), in_place=draw(st.booleans()),
                    seed=draw(st.integers(0, 2**32 - 1)))
    return dict(op=draw(st.sampled_from(["add", "add", "sub"])), a_shape=a_shape, b_shape=b_shape,
                a_zp=draw(base.zero_points), b_zp=draw(base.zero_points), out_zp=draw(base.zero_points),
                a_mult=draw(base.multipliers), b_mult=draw(base.multipliers), a_shift=draw(shifts),
                b_shift=draw(shifts), left_shift=draw(st.sampled_from([20, 20, 0, 23])),
                out_mult=draw(base.multipliers),
                out_shift=draw(st.one_of(st.sampled_from([-1, -31, -19]), st.integers(-31, -1), st.integers(-22, -15),
                                         st.integers(0, 3))),
                act=draw(st.one_of(st.just((-128, 127)), base.act_bounds())), data=draw(base.data_modes),
                in_place=draw(st.booleans()), seed=draw(st.integers(0, 2**32 - 1)))


def _add_program(cases: list[dict]) -> str:
    out = ['#include <stdint.h>\n#include <string.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/platform.h"\n\n',
           "static int8_t buf[3][5120];\n",
           "static void say(const char *s) { mcu_platform_write(s, strlen(s)); }\n"]
    calls = []
    for k, case in enumerate(cases):
        rng = np.random.default_rng(case["seed"])
        a = base.int8_data(rng, case["a_shape"], case["data"])
        b = base.int8_data(rng, case["b_shape"], case["data"])
        bp = broadcast_params(case["a_shape"], case["b_shape"])
        q = dict(a_offset=-case["a_zp"], b_offset=-case["b_zp"], a_multiplier=case["a_mult"], a_shift=case["a_shift"],
                 b_multiplier=case["b_mult"], b_shift=case["b_shift"], left_shift=case["left_shift"],
                 out_multiplier=case["out_mult"], out_shift=case["out_shift"], output_offset=case["out_zp"],
                 act_min=case["act"][0], act_max=case["act"][1])
        fn = add_s8 if case["op"] == "add" else sub_s8
        want = np.asarray(fn(a, b, **q, **bp)).astype(np.int8).reshape(-1)
        out += [c_array(f"a{k}", "int8_t", a), c_array(f"b{k}", "int8_t", b), c_array(f"e{k}", "int8_t", want)]
        rank = bp["rank"]
        pad = lambda v: ", ".join(str(int(t)) for t in list(v) + [0] * (MAX_DIMS - rank))  # noqa: E731
        fields = (f".rank = {rank}, .out_shape = {{{pad(bp['out_shape'])}}}, .a_strides = {{{pad(bp['a_strides'])}}}, "
                  f".b_strides = {{{pad(bp['b_strides'])}}}, " + ", ".join(f".{f} = {v}" for f, v in q.items()))
        # in place: the output over whichever operand has the output's shape
        y = "buf[2]"
        if case["in_place"]:
            y = "buf[0]" if a.size == want.size else "buf[1]"
        out.append(f"static int case{k}(void)\n{{\n"
                   f"    static const mcu_binary_s8_params p = {{{fields}}};\n"
                   f"    memcpy(buf[0], a{k}, {a.size});\n"
                   f"    memcpy(buf[1], b{k}, {b.size});\n"
                   f"    const mcu_status st = mcu_{case['op']}_s8(&p, buf[0], buf[1], {y});\n"
                   f"    return st == MCU_OK && memcmp({y}, e{k}, {want.size}) == 0;\n}}\n")
        calls.append(f"    if (!case{k}()) {{ say(\"case {k} FAIL\\n\"); ++bad; }}\n")
    out.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
               "    say(bad ? \"CASES FAIL\\n\" : \"CASES PASS\\n\");\n"
               "    mcu_platform_exit(bad ? 1 : 0);\n    return 0;\n}\n")
    return "".join(out)


def _run_program(text: str, kernels: list[str], tag: str) -> str:
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    out = cache_dir() / f"test_speed_mve_resnet_{tag}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "main.c").write_text(text)
    board = load_board(BOARD)
    rt = runtime_dir()
    fw = build_firmware(board, [out / "main.c", *(kernel_source(k) for k in kernels)], [rt / "include"], out)
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "CASES PASS" in result.console, result.console[-2000:]
    return result.console


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases=st.lists(add_cases(), min_size=20, max_size=20))
def test_mve_add_sub_equal_reference(cases: list[dict]) -> None:
    try:
        _run_program(_add_program(cases), ["mcu_add_s8.c", "mcu_sub_s8.c"], "add")
    except AssertionError as e:
        failed = [int(w.split()[1]) for w in str(e).splitlines() if w.strip().startswith("case ")]
        raise AssertionError(f"{e}\nfailing cases: {[cases[k] for k in failed]}") from None


@mve.SHARES_KERNEL_COMPILES
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O2", "-O3"])
def test_mve_resnet_kernels_compile_at_every_level(opt: str, tmp_path) -> None:
    """The assembly blocks of the add and the convolution leave GCC registers to spare at every level."""
    for kernel in ["mcu_add_s8.c", "mcu_sub_s8.c", "mcu_conv2d_s8.c"]:
        mve.compile_kernel(kernel, opt, tmp_path)


@st.composite
def conv_layers(draw):
    """Layers of the three-pixel path (input channels a multiple of 16, windows up to 576 bytes, an even
    number of output channels) and around it (odd output channels, other input channels, dilation)."""
    cin = draw(st.sampled_from([16, 32, 64, 16, 32, 48, 1, 3, 8, 17]))
    kh, kw = draw(st.sampled_from([(3, 3), (3, 3), (1, 1), (2, 3), (3, 1), (1, 4)]))
    while kh * kw * cin > 576:
        cin //= 2
    cout = draw(st.one_of(st.sampled_from([2, 4, 16, 32, 64]), st.integers(1, 130)))
    dh, dw = (1, 1) if draw(st.integers(0, 5)) else (2, 1)
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * pt), 9))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pl), 11))
    return ("conv", cin, cout, kh, kw, draw(st.integers(1, 2)), draw(st.integers(1, 2)), pt, pl, dh, dw, h, w,
            draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from(mve.MODES)), draw(st.sampled_from(mve.WMODES)),
            draw(st.integers(0, 3)) > 0)


def conv3_case(b, rng, *, cin, cout, kh, kw, sh, sw, pt, pl, dh, dw, h, w, n, mode, wmode, path) -> None:
    """mve.conv_case with the conditions of the three-pixel path drawn on purpose: `path` keeps the full
    int8 activation range and shifts <= 0 (the path's requantization), else mve.conv_case's draws."""
    if not path:
        mve.conv_case(b, rng, cin=cin, cout=cout, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, dh=dh, dw=dw, h=h, w=w,
                      n=n, mode=mode, wmode=wmode)
        return
    out_h = (h + 2 * pt - dh * (kh - 1) - 1) // sh + 1
    out_w = (w + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    x = mve.mve_data(rng, (n, h, w, cin), mode)
    wt = mve.mve_weights(rng, (cout, kh, kw, cin), "small" if mode == "small" else wmode)
    m, s, zp_in, zp_out, _, bias = b.common(rng, cout, kh * kw * cin, mode)
    s = np.minimum(s, 0).astype(np.int32)
    if rng.random() < 0.3:
        s[rng.random(cout) < 0.3] = -31
    y = conv2d_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=-128, act_max=127,
                      stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl, dilation_h=dh, dilation_w=dw,
                      output=(n, out_h, out_w, cout))
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    out_off = x.size + 16
    call = f"""
    {{
        const mcu_conv2d_s8_params p = {{{{{n}, {h}, {w}, {cin}}}, {{{n}, {out_h}, {out_w}, {cout}}}, {kh}, {kw},
            {sh}, {sw}, {pt}, {pl}, {dh}, {dw}, 1, {-zp_in}, {zp_out}, -128, 127}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work, {xs}, {x.size});
        status = mcu_conv2d_s8(&ctx, &p, &q, work, {ws}, {bs}, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    b.add(mve.Case("conv2d", call, y.reshape(-1)), out_off + y.size)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.lists(conv_layers(), min_size=10, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_mve_conv_three_pixel_blocks_equal_reference(layers, seed) -> None:
    rng = np.random.default_rng(seed)
    b = mve.Builder()
    for layer in layers:
        _, cin, cout, kh, kw, sh, sw, pt, pl, dh, dw, h, w, n, mode, wmode, path = layer
        conv3_case(b, rng, cin=cin, cout=cout, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, dh=dh, dw=dw, h=h, w=w,
                   n=n, mode=mode, wmode=wmode, path=path)
    got = mve.run_cases(b, ["mcu_conv2d_s8.c"], "test_speed_mve_resnet_conv")
    for i, case in enumerate(b.cases):
        mve.assert_case(i, case, got, "")
