"""Cases for the Helium (MVE) paths of the int8 kernels on the simulated Cortex-M55 (mps3-an547 in QEMU):
a builder that collects seeded random layers of each kernel with their expected outputs from the Python
reference, the firmware that runs them and prints every output in hex, and the comparison byte by byte."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from c_source import c_array
from mcu.device.boards import load_board
from mcu.paths import cache_dir, runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8, depthwise_conv2d_s8, linear_s8
from mcu.reference.elementwise import add_s8, broadcast_params, mul_s8, sub_s8
from mcu.reference.pool import avg_pool2d_s8, max_pool2d_s8, mean_hw_s8
from mcu.device.sim.qemu import run_qemu
from mcu.device.toolchain import build_firmware

BOARD = "mps3-an547"
# The kernels with an MVE block path (the firmware of run_layers).
BLOCK_KERNELS = ["mcu_linear_s8.c", "mcu_conv2d_s8.c", "mcu_conv2d_1x1_s8.c", "mcu_depthwise_conv2d_s8.c",
                 "mcu_depthwise_conv2d_s8_inplace.c"]


@dataclass
class Case:
    kernel: str
    call: str  # C statements; `status` gets the kernel's status
    expected: np.ndarray  # int8 bytes the case prints


def mve_quant(rng, channels: int, taps: int, extreme: bool, ties: bool = False):
    """Multipliers in [2^30, 2^31 - 1] (some 0 and the ends) and shifts that keep outputs varied,
    or anywhere in [-31, 30] when `extreme`. `ties`: multiplier 2^30 (a halving) and small right
    shifts, so that both roundings meet exact ties often."""
    if ties:
        return (np.full(channels, 2**30, dtype=np.int32),
                rng.integers(-3, 2, size=channels).astype(np.int32))
    m = rng.integers(2**30, 2**31, size=channels, dtype=np.int64)
    m[rng.random(channels) < 0.15] = 2**31 - 1
    m[rng.random(channels) < 0.05] = 0
    centre = int(round(np.log2(50 / (74 * 74 * np.sqrt(max(taps, 1)))))) + 1
    s = np.clip(centre + rng.integers(-2, 3, size=channels), -31, 30)
    if extreme:
        s = rng.integers(-31, 31, size=channels)
        s[:2] = [-31, 30][: min(2, channels)]
    return m.astype(np.int32), s.astype(np.int32)


def mve_act(rng):
    kind = rng.integers(0, 4)
    if kind == 0:
        return -128, 127
    if kind == 1:
        return int(rng.integers(-128, 0)), 127
    lo = int(rng.integers(-128, 100))
    return lo, int(rng.integers(lo, 128))


def mve_data(rng, shape, mode: str) -> np.ndarray:
    if mode == "min":
        return np.full(shape, -128, dtype=np.int8)
    if mode == "ends":
        return rng.choice(np.array([-128, 127], dtype=np.int8), size=shape)
    if mode == "small":  # small values: with small weights the accumulators stay near 0
        return rng.integers(-3, 4, size=shape, dtype=np.int64).astype(np.int8)
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def mve_weights(rng, shape, mode: str) -> np.ndarray:
    if mode == "ends":
        return rng.choice(np.array([-128, 127, -127], dtype=np.int8), size=shape)
    if mode == "small":
        return rng.integers(-2, 3, size=shape, dtype=np.int64).astype(np.int8)
    if mode == "full":
        return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)
    return rng.integers(-127, 128, size=shape, dtype=np.int64).astype(np.int8)


class Builder:
    def __init__(self) -> None:
        self.cases: list[Case] = []
        self.decls: list[str] = []
        self.work = 0  # bytes of the shared work buffer the largest case needs
        self.scratch = 0

    def arr(self, ctype: str, values) -> str:
        name = f"a{len(self.decls)}"
        self.decls.append(c_array(name, ctype, values))
        return name

    def common(self, rng, out_c: int, taps: int, mode: str):
        extreme = mode in ("min", "ends") or rng.random() < 0.3
        ties = mode == "small"
        m, s = mve_quant(rng, out_c, taps, extreme and not ties, ties)
        zp_in = 0 if ties else int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
        zp_out = int(rng.choice([-128, 127, int(rng.integers(-128, 128))]))
        act = mve_act(rng)
        bias = None
        if rng.random() < 0.8:
            big = 2**6 if ties else 2**12 if rng.random() < 0.7 else 2**20
            bias = rng.integers(-big, big, size=out_c, dtype=np.int64).astype(np.int32)
            if rng.random() < 0.2:
                bias[: max(1, out_c // 3)] = rng.choice([2**31 - 1, -(2**31)], size=max(1, out_c // 3))
        return m, s, zp_in, zp_out, act, bias

    def add(self, case: Case, work: int, scratch: int = 0) -> None:
        self.cases.append(case)
        self.work = max(self.work, work)
        self.scratch = max(self.scratch, scratch)


def c_dims(n, h, w, c) -> str:
    return f"{{{n}, {h}, {w}, {c}}}"


def trail_lag(cin, cout, kh, kw, sh, sw, pt, pl, h, w, out_h, out_w) -> int:
    """How far before the input an output may start (one image, dilation 1) so that no output pixel
    overwrites input a later pixel's window reads: the memory planner's window contract."""
    first = [cin * (max(0, oh * sh - pt) * w + max(0, ow * sw - pl)) for oh in range(out_h) for ow in range(out_w)]
    later = [min(first[i + 1:]) for i in range(len(first) - 1)]
    return max([0] + [(i + 1) * cout - later[i] for i in range(len(later))])


def conv_case(b: Builder, rng, *, cin, cout, kh, kw, sh, sw, pt, pl, dh, dw, h, w, n=1, mode="uniform",
              wmode="symmetric", trail=False, conv3=False, scratch="shared") -> None:
    """trail: the output overlaps the input, starting as little before it as the window contract allows
    (one image, dilation 1). conv3: the full activation range and no positive shift, as the Helium
    three-pixel path (convolution/mve_conv3_s8.h) needs to take the layer. scratch: "shared" (the
    firmware's scratch, as large as other cases need), "none" (no scratch: the three-pixel path's
    stack copies) or "weights" (room for all weights: the copy there that the planner asks for on
    Helium cores, mcu/backends/portable/conv.py mve_conv3_scratch_bytes)."""
    out_h = (h + 2 * pt - dh * (kh - 1) - 1) // sh + 1
    out_w = (w + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    x = mve_data(rng, (n, h, w, cin), mode)
    wt = mve_weights(rng, (cout, kh, kw, cin), "small" if mode == "small" else wmode)
    m, s, zp_in, zp_out, (lo, hi), bias = b.common(rng, cout, kh * kw * cin, mode)
    if conv3:
        s, lo, hi = np.minimum(s, 0), -128, 127
    y = conv2d_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=lo, act_max=hi,
                      stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl, dilation_h=dh, dilation_w=dw,
                      output=(n, out_h, out_w, cout))
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    in_off, out_off = 0, x.size + 16
    if trail:
        assert n == 1 and dh == 1 and dw == 1
        in_off = trail_lag(cin, cout, kh, kw, sh, sw, pt, pl, h, w, out_h, out_w)
        out_off = 0
    call = f"""
    {{
        const mcu_conv2d_s8_params p = {{{c_dims(n, h, w, cin)}, {c_dims(n, out_h, out_w, cout)}, {kh}, {kw}, {sh},
            {sw}, {pt}, {pl}, {dh}, {dw}, 1, {-zp_in}, {zp_out}, {lo}, {hi}}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {"{NULL, 0}" if scratch == "none" else "{scratch, (int32_t)sizeof scratch}"};
        copy(work + {in_off}, {xs}, {x.size});
        status = mcu_conv2d_s8(&ctx, &p, &q, work + {in_off}, {ws}, {bs}, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    name = ("conv2d/trail" if trail else "conv2d") + ("/scratch" if scratch == "weights" else "")
    b.add(Case(name, call, y.reshape(-1)), max(in_off + x.size, out_off + y.size),
          wt.size if scratch == "weights" else 0)


def pointwise_case(b: Builder, rng, *, cin, cout, pixels, overlap: str, mode="uniform") -> None:
    """overlap: 'apart', 'forward' (output at the input's start: allowed when cout <= cin) or 'backward'
    (output ending where the input ends: allowed when cout >= cin)."""
    x = mve_data(rng, (1, 1, pixels, cin), mode)
    wt = mve_weights(rng, (cout, 1, 1, cin), "small" if mode == "small" else "symmetric")
    m, s, zp_in, zp_out, (lo, hi), bias = b.common(rng, cout, cin, mode)
    y = conv2d_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=lo, act_max=hi)
    in_bytes, out_bytes = x.size, y.size
    base = 16
    if overlap == "apart":
        in_off, out_off = base, base + in_bytes + 16
    elif overlap == "forward":
        in_off, out_off = base, base
    else:
        end = base + max(in_bytes, out_bytes)
        in_off, out_off = end - in_bytes, end - out_bytes
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    call = f"""
    {{
        const mcu_conv2d_s8_params p = {{{c_dims(1, 1, pixels, cin)}, {c_dims(1, 1, pixels, cout)}, 1, 1, 1, 1,
            0, 0, 1, 1, 1, {-zp_in}, {zp_out}, {lo}, {hi}}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work + {in_off}, {xs}, {in_bytes});
        status = mcu_conv2d_1x1_s8(&ctx, &p, &q, work + {in_off}, {ws}, {bs}, work + {out_off});
        emit(work + {out_off}, {out_bytes});
    }}"""
    b.add(Case(f"conv2d_1x1/{overlap}", call, y.reshape(-1)), max(in_off + in_bytes, out_off + out_bytes),
          cout)


def depthwise_case(b: Builder, rng, *, c, kh, kw, sh, sw, pt, pl, h, w, n=1, inplace=False, mode="uniform",
                   wmode="symmetric") -> None:
    out_h = h if inplace else (h + 2 * pt - (kh - 1) - 1) // sh + 1
    out_w = w if inplace else (w + 2 * pl - (kw - 1) - 1) // sw + 1
    x = mve_data(rng, (n, h, w, c), mode)
    wt = mve_weights(rng, (kh, kw, c), "small" if mode == "small" else wmode)
    m, s, zp_in, zp_out, (lo, hi), bias = b.common(rng, c, kh * kw, mode)
    y = depthwise_conv2d_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=lo,
                                act_max=hi, stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl,
                                output=(n, out_h, out_w, c))
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    params = f"""const mcu_depthwise_conv2d_s8_params p = {{{c_dims(n, h, w, c)}, {c_dims(n, out_h, out_w, c)}, 1,
            {kh}, {kw}, {sh}, {sw}, {pt}, {pl}, 1, 1, {-zp_in}, {zp_out}, {lo}, {hi}}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};"""
    if inplace:
        call = f"""
    {{
        {params}
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work, {xs}, {x.size});
        status = mcu_depthwise_conv2d_s8_inplace(&ctx, &p, &q, work, {ws}, {bs});
        emit(work, {y.size});
    }}"""
        b.add(Case("depthwise_inplace", call, y.reshape(-1)), x.size, (pt + 1) * w * c)
        return
    out_off = x.size + 16
    call = f"""
    {{
        {params}
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work, {xs}, {x.size});
        status = mcu_depthwise_conv2d_s8(&ctx, &p, &q, work, {ws}, {bs}, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    b.add(Case("depthwise", call, y.reshape(-1)), out_off + y.size)


def linear_call(function: str, params: tuple, xs: str, ws: str, ms: str, ss: str, bs: str, x_size: int,
                out_off: int, y_size: int) -> str:
    """The firmware block of one fully connected case: the input copied into the work buffer, ``function`` (an
    mcu_linear_s8-shaped kernel) writing ``out_off`` elements further on, its output emitted."""
    return f"""
    {{
        const mcu_linear_s8_params p = {{{", ".join(str(v) for v in params)}}};
        const mcu_per_channel_quant q = {{{ms}, {ss}}};
        const mcu_context ctx = {{scratch, (int32_t)sizeof scratch}};
        copy(work, {xs}, {x_size});
        status = {function}(&ctx, &p, &q, work, {ws}, {bs}, work + {out_off});
        emit(work + {out_off}, {y_size});
    }}"""


def linear_case(b: Builder, rng, *, batch, nin, nout, mode="uniform", wmode="symmetric") -> None:
    x = mve_data(rng, (batch, nin), mode)
    wt = mve_weights(rng, (nout, nin), "small" if mode == "small" else wmode)
    m, s, zp_in, zp_out, (lo, hi), bias = b.common(rng, nout, nin, mode)
    y = linear_s8(x, wt, bias, m, s, input_offset=-zp_in, output_offset=zp_out, act_min=lo, act_max=hi)
    xs, ws, ms, ss = b.arr("int8_t", x), b.arr("int8_t", wt), b.arr("int32_t", m), b.arr("int32_t", s)
    bs = b.arr("int32_t", bias) if bias is not None else "NULL"
    out_off = x.size + 16
    call = linear_call("mcu_linear_s8", (batch, nin, nout, -zp_in, zp_out, lo, hi), xs, ws, ms, ss, bs, x.size,
                       out_off, y.size)
    b.add(Case("linear", call, y.reshape(-1)), out_off + y.size)


def max_pool_case(b: Builder, rng, *, c, kh, kw, sh, sw, pt, pl, h, w, n=1, mode="uniform", avg=False) -> None:
    out_h = (h + 2 * pt - kh) // sh + 1
    out_w = (w + 2 * pl - kw) // sw + 1
    x = mve_data(rng, (n, h, w, c), mode)
    lo, hi = mve_act(rng)
    fn = avg_pool2d_s8 if avg else max_pool2d_s8
    y = fn(x, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl, act_min=lo, act_max=hi,
           output=(n, out_h, out_w, c))
    xs = b.arr("int8_t", x)
    out_off = x.size + 16
    call = f"""
    {{
        const mcu_pool2d_s8_params p = {{{c_dims(n, h, w, c)}, {c_dims(n, out_h, out_w, c)}, {kh}, {kw}, {sh}, {sw},
            {pt}, {pl}, {lo}, {hi}}};
        copy(work, {xs}, {x.size});
        status = mcu_{"avg" if avg else "max"}_pool2d_s8(&p, work, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    b.add(Case("avg_pool" if avg else "max_pool", call, y.reshape(-1)), out_off + y.size)


def mean_case(b: Builder, rng, *, c, h, w, n=1, mode="uniform", fill=None, zp_in=None) -> None:
    """`fill`: every input that value, with the exact mean's multiplier (1 / (h * w)) and the given
    `zp_in`, so that any wrong partial sum shows in the output instead of saturating away."""
    x = mve_data(rng, (n, h, w, c), mode) if fill is None else np.full((n, h, w, c), fill, dtype=np.int8)
    m, s = mve_quant(rng, 1, 1, rng.random() < 0.3, mode == "small")
    if fill is not None:
        frac, exp = np.frexp(1.0 / (h * w))
        m[0], s[0] = min(int(round(frac * 2**31)), 2**31 - 1), int(exp)
    elif mode != "small":
        s[0] = min(30, max(-31, int(s[0]) + int(np.log2(50 / 74 / max(1.0, np.sqrt(h * w))))))
    if zp_in is None:
        zp_in = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    zp_out = int(rng.integers(-128, 128)) if fill is None else 0
    lo, hi = mve_act(rng) if fill is None else (-128, 127)
    y = mean_hw_s8(x, input_offset=-zp_in, multiplier=int(m[0]), shift=int(s[0]), output_offset=zp_out,
                       act_min=lo, act_max=hi)
    xs = b.arr("int8_t", x)
    out_off = x.size + 16
    call = f"""
    {{
        const mcu_mean_hw_s8_params p = {{{c_dims(n, h, w, c)}, {-zp_in}, {int(m[0])}, {int(s[0])}, {zp_out}, {lo},
            {hi}}};
        copy(work, {xs}, {x.size});
        status = mcu_mean_hw_s8(&p, work, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    b.add(Case("mean_hw", call, y.reshape(-1)), out_off + y.size)


def binary_case(b: Builder, rng, *, op: str, a_shape, b_shape, mode="uniform", inplace=False) -> None:
    """add/sub/mul with numpy broadcasting of the two shapes (strides 0 where broadcast); `inplace`
    writes the output over operand a (same shape as the output)."""
    x = mve_data(rng, a_shape, mode)
    y = mve_data(rng, b_shape, pick_mode(rng))
    bp = broadcast_params(a_shape, b_shape)
    extreme = rng.random() < 0.25
    q = dict(a_offset=-int(rng.choice([-128, 127, int(rng.integers(-128, 128))])),
             b_offset=-int(rng.choice([-128, 0, int(rng.integers(-128, 128))])),
             a_multiplier=int(rng.integers(2**30, 2**31)), b_multiplier=int(rng.integers(2**30, 2**31)),
             a_shift=int(rng.integers(-31, 31) if extreme else rng.integers(-3, 1)),
             b_shift=int(rng.integers(-31, 31) if extreme else rng.integers(-3, 1)),
             left_shift=int(rng.choice([20, 20, 20, 0, 23])),
             out_multiplier=int(rng.choice([2**31 - 1, int(rng.integers(2**30, 2**31))])),
             out_shift=int(rng.integers(-31, 31) if extreme else rng.integers(-22, -16)),
             output_offset=int(rng.integers(-128, 128)))
    if op == "mul":
        q["out_shift"] = int(rng.integers(-31, 31) if extreme else rng.integers(-9, -5))
    lo, hi = (-128, 127) if rng.random() < 0.8 else mve_act(rng)
    fn = {"add": add_s8, "sub": sub_s8, "mul": mul_s8}[op]
    want = fn(x, y, **q, act_min=lo, act_max=hi, **bp)
    rank = bp["rank"]
    pad = lambda v: ", ".join(str(int(t)) for t in list(v) + [0] * (6 - rank))  # noqa: E731
    xs, ys = b.arr("int8_t", x), b.arr("int8_t", y)
    a_off = 16
    b_off = a_off + x.size + 16
    out_off = a_off if inplace else b_off + y.size + 16
    call = f"""
    {{
        const mcu_binary_s8_params p = {{{rank}, {{{pad(bp["out_shape"])}}}, {{{pad(bp["a_strides"])}}},
            {{{pad(bp["b_strides"])}}}, {q["a_offset"]}, {q["b_offset"]}, {q["a_multiplier"]}, {q["a_shift"]},
            {q["b_multiplier"]}, {q["b_shift"]}, {q["left_shift"]}, {q["out_multiplier"]}, {q["out_shift"]},
            {q["output_offset"]}, {lo}, {hi}}};
        copy(work + {a_off}, {xs}, {x.size});
        copy(work + {b_off}, {ys}, {y.size});
        status = mcu_{op}_s8(&p, work + {a_off}, work + {b_off}, work + {out_off});
        emit(work + {out_off}, {want.size});
    }}"""
    b.add(Case("binary", call, want.reshape(-1)), out_off + want.size)


def pick_mode(rng) -> str:
    return ["uniform", "uniform", "uniform", "min", "ends"][int(rng.integers(0, 5))]


MODES = ["uniform", "uniform", "uniform", "min", "ends", "small", "small"]


WMODES = ["symmetric", "symmetric", "full", "ends"]


MAIN = r"""
#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"
#include "mcu/log.h"

%(decls)s

static int8_t work[%(work)d] __attribute__((aligned(16)));
static int8_t scratch[%(scratch)d] __attribute__((aligned(16), unused)); /* (cases of some kernels only) */

static void copy(int8_t *dst, const int8_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        dst[i] = src[i];
    }
}

/* The bytes in hex, four per word (little-endian words, so the bytes read back in order). */
static void emit(const int8_t *y, int32_t n)
{
    for (int32_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (int32_t k = 0; k < 4 && i + k < n; ++k) {
            v |= (uint32_t)(uint8_t)y[i + k] << (8 * k);
        }
        mcu_log_hex32(v);
        mcu_log_str(" ");
    }
}

int main(void)
{
    mcu_status status;
%(body)s
    mcu_log_str("DONE");
    mcu_log_newline();
    return 0;
}
"""


def _render(b: Builder) -> str:
    body = []
    for i, case in enumerate(b.cases):
        body.append(f'    mcu_log_str("CASE {i} ");')
        body.append(case.call)
        body.append('    mcu_log_str(" STATUS ");\n    mcu_log_i32((int32_t)status);\n    mcu_log_newline();')
    return MAIN % {"decls": "\n".join(b.decls), "work": b.work + 64, "scratch": max(b.scratch, 16) + 64,
                   "body": "\n".join(body)}


def _parse(console: str) -> dict[int, tuple[bytes, int]]:
    got = {}
    for line in console.splitlines():
        if not line.startswith("CASE "):
            continue
        head, _, status = line.partition(" STATUS ")
        parts = head.split()
        idx = int(parts[1])
        data = b"".join(int(word, 16).to_bytes(4, "little") for word in parts[2:])
        got[idx] = (data, int(status))
    return got


def run_cases(b: Builder, kernels, tag: str, timeout_s: int = 120, extra_sources=(), extra_includes=(),
              board_name: str = BOARD) -> dict[int, tuple[bytes, int]]:
    """`b`'s cases in one firmware for the M55 (or `board_name`) with `kernels` (files under runtime_c/kernels),
    and `extra_sources` with `extra_includes` (another library's kernels to compare with), run in QEMU: each
    case's output bytes and status by index."""
    board = load_board(board_name)
    out = cache_dir() / tag
    out.mkdir(parents=True, exist_ok=True)
    src = out / "cases.c"
    src.write_text(_render(b))
    rt = runtime_dir()
    fw = build_firmware(board, [src, *(kernel_source(k) for k in kernels), *extra_sources],
                        [rt / "include", *extra_includes], out)
    result = run_qemu(board, fw.elf, timeout_s=timeout_s)
    assert result.exit_code == 0 and "DONE" in result.console, result.console[-2000:]
    return _parse(result.console)


def assert_case(i: int, case: Case, got: dict[int, tuple[bytes, int]], label: str = "") -> None:
    """Case `i` ran with status 0 and wrote exactly its expected bytes (`label` names it in a failure)."""
    label = label or f"({case.kernel})"
    assert i in got, f"case {i} {label} printed nothing"
    data, status = got[i]
    assert status == 0, f"case {i} {label}: status {status}\n{case.call}"
    want = case.expected.astype(np.int8).tobytes()
    have = data[: len(want)]
    if have != want:
        diff = np.flatnonzero(np.frombuffer(have, np.int8) != np.frombuffer(want, np.int8))
        pytest.fail(f"case {i} {label}: {diff.size} of {len(want)} bytes differ, first at {diff[:8]}; "
                    f"device {np.frombuffer(have, np.int8)[diff[:8]]} vs reference "
                    f"{np.frombuffer(want, np.int8)[diff[:8]]}\n{case.call}")


# The tests compiling kernels for the M55 at each level share one worker (xdist group) and there each
# (kernel, level) is compiled once: five modules compiled the same seven kernels 51 times between them.
SHARES_KERNEL_COMPILES = pytest.mark.xdist_group("m55_kernel_compiles")


def compile_kernel(kernel: str, opt: str, tmp_path, assembly: bool = False) -> str:
    """Compile runtime_c/kernels/`kernel` for the M55 at `opt` and assemble it (the assembly blocks must leave
    GCC registers to spare at every level); the assembly text when `assembly`."""
    text = _compiled_kernel(kernel, opt)
    return text if assembly else ""


@functools.lru_cache(maxsize=None)
def _compiled_kernel(kernel: str, opt: str) -> str:
    import subprocess
    import tempfile

    from mcu.device.toolchain import compile_flags, find_cross_compiler

    flags = [f for f in compile_flags(load_board(BOARD)) if not f.startswith("-O")]
    gcc = str(find_cross_compiler())
    with tempfile.TemporaryDirectory(prefix="mcu-m55-") as tmp:
        asm, obj = Path(tmp) / "k.s", Path(tmp) / "k.o"
        done = subprocess.run([gcc, *flags, opt, "-S", "-o", str(asm), str(kernel_source(kernel))],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{kernel} at {opt}:\n{done.stderr[-2000:]}"
        done = subprocess.run([gcc, *flags, "-c", "-o", str(obj), str(asm)], capture_output=True, text=True)
        assert done.returncode == 0, f"{kernel} at {opt} (assembling):\n{done.stderr[-2000:]}"
        return asm.read_text()


def run_layers(layers, seed: int, tag: str):
    rng = np.random.default_rng(seed)
    b = Builder()
    for layer in layers:
        if layer[0] == "fc":
            _, batch, nin, nout, mode, wmode = layer
            linear_case(b, rng, batch=batch, nin=nin, nout=nout, mode=mode, wmode=wmode)
        elif layer[0] == "conv":
            _, cin, cout, kh, kw, sh, sw, pt, pl, dh, dw, h, w, n, mode, wmode = layer
            conv_case(b, rng, cin=cin, cout=cout, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, dh=dh, dw=dw, h=h, w=w,
                      n=n, mode=mode, wmode=wmode)
        elif layer[0] == "pw":
            _, cin, cout, pixels, overlap, mode = layer
            pointwise_case(b, rng, cin=cin, cout=cout, pixels=pixels, overlap=overlap, mode=mode)
        else:
            _, c, kh, kw, sh, sw, pt, pl, h, w, inplace, mode = layer
            depthwise_case(b, rng, c=c, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, h=h, w=w, inplace=inplace,
                           mode=mode)
    got = run_cases(b, BLOCK_KERNELS, f"test_mve_blocks_{tag}")
    for i, case in enumerate(b.cases):
        assert_case(i, case, got)
