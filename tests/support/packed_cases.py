"""Cases for mcu_conv2d_packed_s8 (the tuned backend's kernel): its parameters, random layers with their
expected outputs from the Python reference, the firmware that runs them on a simulated core, and the
`lib` fixture that runs a module's host tests on the plain build and then on the DSP-emulated one."""

from __future__ import annotations

import numpy as np
import pytest

import cbind_s8 as cb
from c_source import c_array, harness_main
from host_builds import build_emulated_lib, load_bound, route_cbind
from mcu.backends.optimized import tuned
from mcu.reference.conv import conv2d_s8


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    """Route cbind_s8.lib() to the plain host build, then to the DSP-emulated build."""
    yield from route_cbind(cb.lib() if request.param == "host" else load_bound(build_emulated_lib()))


def packed_params(x_shape, out_shape, kh, kw, sh=1, sw=1, pt=0, pl=0, dh=1, dw=1, in_zp=0, out_zp=0, act=(-128, 127)):
    return dict(input=x_shape, output=out_shape, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=pt,
                pad_left=pl, dilation_h=dh, dilation_w=dw, groups=1, input_offset=-in_zp, output_offset=out_zp,
                act_min=act[0], act_max=act[1])


def firmware_cases(rng: np.random.Generator, count: int) -> list[dict]:
    cases = []
    for i in range(count):
        cin = int(rng.choice([1, 3, 4, 8, 16, 17, 32, 64]))
        k = int(rng.choice([1, 3])) if cin <= 32 else 1
        cout = int(rng.integers(1, 11))
        h, w = int(rng.integers(k, 5)), int(rng.integers(k, 5))
        pad = int(rng.integers(0, k // 2 + 1))
        extreme = i % 5 == 4
        if extreme:
            x = np.full((1, h, w, cin), rng.choice([-128, 127]), dtype=np.int8)
            wt = np.full((cout, k, k, cin), rng.choice([-128, 127]), dtype=np.int8)
            b = np.full(cout, rng.choice([-(2**31), 2**31 - 1]), dtype=np.int32)
            m = np.full(cout, 2**31 - 1)
            s = np.full(cout, int(rng.choice([-1, -23, -24, 3])))
        else:
            x = rng.integers(-128, 128, (1, h, w, cin)).astype(np.int8)
            wt = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.int8)
            b = rng.integers(-5000, 5000, cout).astype(np.int32)
            m = rng.integers(2**30, 2**31 - 1, cout)
            s = rng.integers(-12, -4, cout) if i % 3 else rng.integers(-31, 31, cout)
        in_zp, out_zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        act = (-128, 127) if i % 4 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        params = packed_params(x.shape, (1, h + 2 * pad - k + 1, w + 2 * pad - k + 1, cout), k, k, pt=pad, pl=pad,
                         in_zp=in_zp, out_zp=out_zp, act=act)
        expected = conv2d_s8(x, wt, b, m, s, **params)
        cases.append(dict(x=x, w=tuned.pack_layer(wt.reshape(cout, -1), b, m, s, out_zp), b=b, m=m, s=s, params=params,
                          expected=expected))
    return cases


def packed_firmware_source(cases: list[dict], label: str = "packed") -> str:
    """One firmware running every case (a case with `refused` set must return MCU_ERR_UNSUPPORTED instead)
    and printing "<label> cases failed: N"."""
    src = ['#include <stdint.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/log.h"\n']
    runs = []
    for i, c in enumerate(cases):
        p = c["params"]
        src += [c_array(f"x{i}", "int8_t", c["x"], aligned=4), c_array(f"w{i}", "int32_t", c["w"], aligned=4),
                c_array(f"e{i}", "int8_t", c["expected"], aligned=4)]
        shape = "{{{}, {}, {}, {}}}"
        fields = [shape.format(*p["input"]), shape.format(*p["output"])] + [
            str(p[f]) for f in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left", "dilation_h",
                                "dilation_w", "groups", "input_offset", "output_offset", "act_min", "act_max")]
        src.append(f"static const mcu_conv2d_s8_params p{i} = {{{', '.join(fields)}}};\n")
        refused = int(c.get("refused", False))
        if "out_delta" in c:  # in place: the output starts out_delta bytes after the input, in one buffer
            runs.append(f"    bad += run_in_place(&p{i}, x{i}, (int32_t)sizeof(x{i}), w{i}, e{i}, (int32_t)sizeof(e{i}), "
                        f"{int(c['out_delta'])});\n")
        else:
            runs.append(f"    bad += run(&p{i}, x{i}, w{i}, e{i}, (int32_t)sizeof(e{i}), {refused});\n")
    src.append("""
static int8_t out[4096];
static int run(const mcu_conv2d_s8_params *p, const int8_t *x, const int32_t *w, const int8_t *e, int32_t n,
               int refused)
{
    const mcu_status s = mcu_conv2d_packed_s8(NULL, p, x, w, out);
    if (refused) {
        return s != MCU_ERR_UNSUPPORTED;
    }
    if (s != MCU_OK) {
        return 1;
    }
    int32_t diff = 0;
    for (int32_t i = 0; i < n; ++i) {
        diff += out[i] != e[i];
    }
    return diff != 0;
}

""" + (IN_PLACE_RUN if any("out_delta" in c for c in cases) else "") + harness_main(label, runs))
    return "".join(src)


IN_PLACE_RUN = """
static int8_t io[16384];
static int run_in_place(const mcu_conv2d_s8_params *p, const int8_t *x, int32_t nx, const int32_t *w, const int8_t *e,
                        int32_t n, int32_t delta)
{
    for (int32_t i = 0; i < nx; ++i) {
        io[i] = x[i];
    }
    if (mcu_conv2d_packed_s8(NULL, p, io, w, io + delta) != MCU_OK) {
        return 1;
    }
    int32_t diff = 0;
    for (int32_t i = 0; i < n; ++i) {
        diff += io[delta + i] != e[i];
    }
    return diff != 0;
}

"""
