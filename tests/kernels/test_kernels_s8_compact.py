"""mcu_conv2d_compact_s8 and mcu_linear_compact_s8, the optimized backend's kernels under
--compact-weights (mcu/backends/optimized/compact.py), bit-exact with the Python reference.

Three builds run them: the host extension (plain C), the host library with the DSP paths emulated
(the SXTB16/SMLAD lane arithmetic, the K-word table and the on-the-fly K of single-row blocks), and
firmware on the simulated Cortex-M33 and Cortex-M4, where the two-pixel LDM/SXTB16/SMLAD loops and the
single-row assembly block run natively (a batch of random cases, a fifth at the extremes, compiled
into one firmware). The reference models run compact on mps2-an505 with zero differences, in no more
flash than the portable kernels' int8 weights took.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cbind_s8 as cb
import s8_cases as base
from c_source import c_array, harness_main
from cbind import MCU_OK
from host_builds import build_emulated_lib
from mcu.backends.optimized import compact
from mcu.device.boards import load_board
from mcu.paths import runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8, linear_s8
from repo import requires_qemu

_P = ctypes.c_void_p
_SIGNATURES = {
    "mcu_conv2d_compact_s8": ([_P, ctypes.POINTER(cb.Conv2dS8Params), _P, _P, _P], ctypes.c_int),
    "mcu_conv2d_compact_s8_get_buffer_size": ([ctypes.POINTER(cb.Conv2dS8Params)], ctypes.c_int32),
    "mcu_linear_compact_s8": ([_P, ctypes.POINTER(cb.LinearS8Params), _P, _P, _P], ctypes.c_int),
    "mcu_linear_compact_s8_get_buffer_size": ([ctypes.POINTER(cb.LinearS8Params)], ctypes.c_int32),
}


def _bind(handle: ctypes.CDLL) -> ctypes.CDLL:
    for name, (argtypes, restype) in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return handle


@pytest.fixture(scope="module", params=["host", "dsp-emulated"])
def lib(request):
    return _bind(cb.lib() if request.param == "host" else ctypes.CDLL(str(build_emulated_lib())))


def _aligned(nbytes: int, offset: int = 0) -> tuple[np.ndarray, int]:
    """A buffer of nbytes starting `offset` bytes past a 16-byte boundary (planners give words)."""
    raw = np.zeros(nbytes + 32, dtype=np.uint8)
    start = (-raw.ctypes.data) % 16 + offset
    return raw, raw.ctypes.data + start


def conv_compact(lib, x, w, bias, m, s, params: dict, stream=None, scratch_offset: int = 4):
    if stream is None:
        stream = compact.pack_compact(np.asarray(w, dtype=np.int8).reshape(w.shape[0], -1), bias, m, s)
    stream = np.ascontiguousarray(stream, dtype=np.int32)
    p = cb._fields(cb.Conv2dS8Params, params)
    size = lib.mcu_conv2d_compact_s8_get_buffer_size(ctypes.byref(p))
    keep, buf = _aligned(max(size, 0), scratch_offset)
    ctx = cb.Context(buf, size)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    st_ = lib.mcu_conv2d_compact_s8(ctypes.byref(ctx), ctypes.byref(p), cb.ptr(x), cb.ptr(stream), cb.ptr(out))
    del keep
    return st_, out


def linear_compact(lib, x, w, bias, m, s, params: dict, stream=None):
    if stream is None:
        stream = compact.pack_compact(np.asarray(w, dtype=np.int8), bias, m, s)
    stream = np.ascontiguousarray(stream, dtype=np.int32)
    p = cb._fields(cb.LinearS8Params, params)
    size = lib.mcu_linear_compact_s8_get_buffer_size(ctypes.byref(p))
    keep, buf = _aligned(max(size, 0), 4)
    ctx = cb.Context(buf, size)
    out = np.zeros((params["batch"], params["out_features"]), dtype=np.int8)
    st_ = lib.mcu_linear_compact_s8(ctypes.byref(ctx), ctypes.byref(p), cb.ptr(x), cb.ptr(stream), cb.ptr(out))
    del keep
    return st_, out


def _params(x_shape, out_shape, kh, kw, sh=1, sw=1, pt=0, pl=0, dh=1, dw=1, in_zp=0, out_zp=0, act=(-128, 127)):
    return dict(input=x_shape, output=out_shape, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=pt,
                pad_left=pl, dilation_h=dh, dilation_w=dw, groups=1, input_offset=-in_zp, output_offset=out_zp,
                act_min=act[0], act_max=act[1])


def test_pack_layout() -> None:
    """Blocks of 4 channels: biases, one word per channel per group of 4 taps (bytes in tap order, zero
    padding on both axes), then (multiplier, shift) per channel: no byte more than the int8 weights and
    the portable kernels' 12 bytes of constants per channel, beyond the padding."""
    w = np.arange(1, 5 * 6 + 1, dtype=np.int8).reshape(5, 6)  # 5 channels, 6 taps -> 8 channels, 8 taps
    w[0, 0] = -3
    stream = compact.pack_compact(w, np.arange(5) - 2, np.full(5, 2**30 + 7), np.array([-1, -2, -3, -23, 4]))
    assert stream.dtype == np.int32 and stream.size == 4 + 2 * (4 + 8 + 8)
    assert stream[:4].tolist() == [compact.MAGIC, 0, 5, 8]
    first, second = stream[4:].reshape(2, -1)
    assert first[:4].tolist() == [-2, -1, 0, 1] and second[:4].tolist() == [2, 0, 0, 0]
    words = first[4:12].reshape(2, 4).copy().view(np.int8).reshape(2, 4, 4)  # group, channel, tap
    assert words[0, 0].tolist() == [-3, 2, 3, 4] and words[1, 3].tolist() == [23, 24, 0, 0]
    assert second[4:12].copy().view(np.int8).reshape(2, 4, 4)[0, 0].tolist() == [25, 26, 27, 28]
    assert np.all(second[4:12].copy().view(np.int8).reshape(2, 4, 4)[:, 1:] == 0)  # padded channels
    assert first[12:].reshape(4, 2).tolist() == [[2**30 + 7, s] for s in (-1, -2, -3, -23)]
    assert second[12:].reshape(4, 2).tolist() == [[2**30 + 7, 4]] + [[0, 0]] * 3


@base.EXACT
@given(base.conv_cases(), st.sampled_from([0, 4]))
def test_conv_compact_matches_reference(lib, case, scratch_offset) -> None:
    """The plain kernels' convolution cases (one group), 300 per build; the scratch on either word of
    an 8-byte boundary."""
    rng = np.random.default_rng(case["seed"])
    cin, cout = case["icg"] * case["groups"], case["ocg"] * case["groups"]
    x = base.int8_data(rng, (case["n"], case["h"], case["w"], cin), case["data"])
    w = base.weights(rng, (cout, case["kh"], case["kw"], cin), case["wmode"])
    b = base.biases(rng, cout, case["bias"])
    m, s = base.per_channel(rng, cout, base.shift_for(case["shift"], case["kh"] * case["kw"] * cin),
                            case["per_channel"])
    params = _params(x.shape, (case["n"], case["out_h"], case["out_w"], cout), case["kh"], case["kw"], case["sh"],
                     case["sw"], case["pt"], case["pl"], case["dh"], case["dw"], case["in_zp"], case["out_zp"],
                     case["act"])
    status, out = conv_compact(lib, x, w, b, m, s, params, scratch_offset=scratch_offset)
    assert status == MCU_OK
    base.assert_equal(out, conv2d_s8(x, w, b, m, s, **params))


@base.EXACT
@given(batch=st.integers(1, 4), fin=st.integers(1, 70), fout=st.integers(1, 20), in_zp=base.zero_points,
       out_zp=base.zero_points, act=base.act_bounds(), bias=base.bias_kinds, shift=base.conv_shift_centres,
       pc=st.sampled_from(["same", "varied"]), data=base.data_modes, wmode=base.weight_modes,
       seed=st.integers(0, 2**32 - 1))
def test_linear_compact_matches_reference(lib, batch, fin, fout, in_zp, out_zp, act, bias, shift, pc, data, wmode,
                                          seed) -> None:
    rng = np.random.default_rng(seed)
    x = base.int8_data(rng, (batch, fin), data)
    w = base.weights(rng, (fout, fin), wmode)
    b = base.biases(rng, fout, bias)
    m, s = base.per_channel(rng, fout, base.shift_for(shift, fin), pc)
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                  act_min=act[0], act_max=act[1])
    status, out = linear_compact(lib, x, w, b, m, s, params)
    assert status == MCU_OK
    base.assert_equal(out, linear_s8(x, w, b, m, s, **params))


def test_bad_streams_and_arguments_are_refused(lib) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 3, 3, 8)).astype(np.int8)
    w = rng.integers(-127, 128, (6, 3, 3, 8)).astype(np.int8)
    m, s = np.full(6, 2**30), np.full(6, -8)
    good = _params(x.shape, (1, 1, 1, 6), 3, 3)
    stream = compact.pack_compact(w.reshape(6, -1), None, m, s)
    assert conv_compact(lib, x, w, None, m, s, good)[0] == MCU_OK
    for word, value in [(0, 0), (1, 1), (2, 7), (3, 76)]:  # magic, flags, channels, taps
        bad = stream.copy()
        bad[word] = value
        assert conv_compact(lib, x, w, None, m, s, good, stream=bad)[0] != MCU_OK, word
    bad = stream.copy()
    bad[4 + 4 + 72 + 1] = 40  # the first channel's shift: out of [-31, 30]
    assert conv_compact(lib, x, w, None, m, s, good, stream=bad)[0] != MCU_OK
    bad = stream.copy()
    bad[4 + 4 + 72] = -5  # a negative multiplier
    assert conv_compact(lib, x, w, None, m, s, good, stream=bad)[0] != MCU_OK
    assert conv_compact(lib, x, w, None, m, s, {**good, "groups": 2})[0] != MCU_OK
    # too little scratch
    p = cb._fields(cb.Conv2dS8Params, good)
    size = lib.mcu_conv2d_compact_s8_get_buffer_size(ctypes.byref(p))
    keep, buf = _aligned(size, 4)
    out = np.zeros((1, 1, 1, 6), dtype=np.int8)
    for ctx in (cb.Context(buf, size - 1), cb.Context(buf + 2, size), cb.Context(None, size)):
        assert lib.mcu_conv2d_compact_s8(ctypes.byref(ctx), ctypes.byref(p), cb.ptr(x), cb.ptr(stream),
                                         cb.ptr(out)) != MCU_OK
    assert lib.mcu_conv2d_compact_s8(None, ctypes.byref(p), cb.ptr(x), cb.ptr(stream), cb.ptr(out)) != MCU_OK
    del keep
    # linear: a stream for another width, an output over the input
    xl = rng.integers(-128, 128, (1, 10)).astype(np.int8)
    wl = rng.integers(-127, 128, (4, 10)).astype(np.int8)
    lp = dict(batch=1, in_features=10, out_features=4, input_offset=0, output_offset=0, act_min=-128, act_max=127)
    assert linear_compact(lib, xl, wl, None, np.full(4, 2**30), np.full(4, -8), lp)[0] == MCU_OK
    other = compact.pack_compact(rng.integers(-127, 128, (4, 13)).astype(np.int8), None, np.full(4, 2**30),
                                 np.full(4, -8))
    assert linear_compact(lib, xl, wl, None, np.full(4, 2**30), np.full(4, -8), lp, stream=other)[0] != MCU_OK
    assert linear_compact(lib, xl, wl, None, np.full(4, 2**30), np.full(4, -8),
                          {**lp, "in_features": 700})[0] != MCU_OK


# --- on the simulated cores ------------------------------------------------------------------------------


def _constants(rng: np.random.Generator, i: int, cout: int) -> tuple:
    """Extreme cases every fifth; shifts in the single-row block's [-24, -1] mostly, some outside."""
    if i % 5 == 4:
        b = np.full(cout, rng.choice([-(2**31), 2**31 - 1]), dtype=np.int32)
        return b, np.full(cout, 2**31 - 1), np.full(cout, int(rng.choice([-1, -23, -24, 3])))
    b = rng.integers(-5000, 5000, cout).astype(np.int32)
    m = rng.integers(2**30, 2**31 - 1, cout)
    s = rng.integers(-12, -4, cout) if i % 3 else rng.integers(-31, 31, cout)
    return b, m, s


def _firmware_cases(rng: np.random.Generator, count: int) -> list[dict]:
    cases = []
    for i in range(count):
        extreme = i % 5 == 4
        in_zp, out_zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        act = (-128, 127) if i % 4 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        if i % 2:  # a fully connected layer, one row mostly
            batch, fin, fout = int(rng.choice([1, 1, 1, 2, 3])), int(rng.integers(1, 90)), int(rng.integers(1, 14))
            x = (np.full((batch, fin), rng.choice([-128, 127])) if extreme
                 else rng.integers(-128, 128, (batch, fin))).astype(np.int8)
            wt = (np.full((fout, fin), rng.choice([-128, 127])) if extreme
                  else rng.integers(-127, 128, (fout, fin))).astype(np.int8)
            b, m, s = _constants(rng, i, fout)
            params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=-in_zp, output_offset=out_zp,
                          act_min=act[0], act_max=act[1])
            expected = linear_s8(x, wt, b, m, s, **params)
            cases.append(dict(kind="linear", x=x, w=compact.pack_compact(wt, b, m, s), params=params,
                              expected=expected, scratch=2 * compact.tuned.padded_taps(fin)))
            continue
        cin = int(rng.choice([1, 3, 4, 8, 16, 17, 32, 64]))
        k = int(rng.choice([1, 3])) if cin <= 32 else 1
        cout = int(rng.integers(1, 11))
        h, w = int(rng.integers(k, 5)), int(rng.integers(k, 5))
        pad = int(rng.integers(0, k // 2 + 1))
        x = (np.full((1, h, w, cin), rng.choice([-128, 127])) if extreme
             else rng.integers(-128, 128, (1, h, w, cin))).astype(np.int8)
        wt = (np.full((cout, k, k, cin), rng.choice([-128, 127])) if extreme
              else rng.integers(-127, 128, (cout, k, k, cin))).astype(np.int8)
        b, m, s = _constants(rng, i, cout)
        params = _params(x.shape, (1, h + 2 * pad - k + 1, w + 2 * pad - k + 1, cout), k, k, pt=pad, pl=pad,
                         in_zp=in_zp, out_zp=out_zp, act=act)
        expected = conv2d_s8(x, wt, b, m, s, **params)
        taps = compact.tuned.padded_taps(k * k * cin)
        cases.append(dict(kind="conv", x=x, w=compact.pack_compact(wt.reshape(cout, -1), b, m, s), params=params,
                          expected=expected, scratch=compact.tuned.padded_taps(cout) * compact.RQ_ENTRY_BYTES
                          + 8 * taps + 4))
    return cases


def _firmware_source(cases: list[dict]) -> str:
    src = ['#include <stdint.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/log.h"\n']
    runs = []
    shape = "{{{}, {}, {}, {}}}"
    for i, c in enumerate(cases):
        p = c["params"]
        src += [c_array(f"x{i}", "int8_t", c["x"], aligned=4), c_array(f"w{i}", "int32_t", c["w"], aligned=4),
                c_array(f"e{i}", "int8_t", c["expected"], aligned=4)]
        if c["kind"] == "conv":
            fields = [shape.format(*p["input"]), shape.format(*p["output"])] + [
                str(p[f]) for f in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left",
                                    "dilation_h", "dilation_w", "groups", "input_offset", "output_offset", "act_min",
                                    "act_max")]
            src.append(f"static const mcu_conv2d_s8_params p{i} = {{{', '.join(fields)}}};\n")
            call = f"mcu_conv2d_compact_s8(&ctx, &p{i}, x{i}, w{i}, out)"
        else:
            fields = [str(p[f]) for f in ("batch", "in_features", "out_features", "input_offset", "output_offset",
                                          "act_min", "act_max")]
            src.append(f"static const mcu_linear_s8_params p{i} = {{{', '.join(fields)}}};\n")
            call = f"mcu_linear_compact_s8(&ctx, &p{i}, x{i}, w{i}, out)"
        runs.append(f"    {{ const mcu_context ctx = {{scratch + 4, {c['scratch']}}};\n"
                    f"      bad += {call} != MCU_OK || check(e{i}, (int32_t)sizeof(e{i})); }}\n")
    src.append("""
static int8_t out[4096];
static uint8_t scratch[8192] __attribute__((aligned(8)));
static int check(const int8_t *e, int32_t n)
{
    int32_t diff = 0;
    for (int32_t i = 0; i < n; ++i) {
        diff += out[i] != e[i];
    }
    return diff != 0;
}

""" + harness_main("compact", runs))
    return "".join(src)


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
def test_compact_on_simulated_core(tmp_path: Path, board_name: str) -> None:
    """80 random layers (half fully connected, a fifth at the extremes) with the native loops and the
    single-row block's on-the-fly requantization; the scratch on the odd word of an 8-byte boundary."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    cases = _firmware_cases(np.random.default_rng(11), 80)
    assert max(c["expected"].size for c in cases) <= 4096 and max(c["scratch"] for c in cases) <= 8192 - 4
    main = tmp_path / "main.c"
    main.write_text(_firmware_source(cases))
    board = load_board(board_name)
    rt = runtime_dir()
    fw = build_firmware(board, [main, kernel_source(compact.SOURCE), kernel_source(compact.LINEAR_SOURCE)],
                        [rt / "include"], tmp_path / "out")
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "compact cases failed: 0" in result.console, result.console


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("name", ["small_cnn", "fc_autoencoder"])
def test_compact_models_are_exact_and_no_larger(name: str) -> None:
    """--compact-weights on mps2-an505: the compact kernels serve every convolution and fully connected
    layer, the outputs equal the integer reference, and the flash is at most the portable kernels'."""
    from compiled import lowered_model
    from mcu.api import backend_options

    lowered = lowered_model(name, "int8")  # one capture for both layouts
    cm = lowered.compile("mps2-an505", options=backend_options(packed_weights=False))
    kernels = {s.call.function for s in cm.library.view.steps}
    assert kernels & {compact.FUNCTION, compact.LINEAR_FUNCTION}
    assert not kernels & {"mcu_conv2d_s8", "mcu_conv2d_1x1_s8", "mcu_linear_s8", "mcu_conv2d_packed_s8"}
    sim = cm.simulate()
    assert sim.passed, sim.console[-1500:]
    portable = lowered.compile("mps2-an505", options=backend_options(backend="portable"), backend="portable")
    assert cm.build().flash_bytes <= portable.build().flash_bytes


def test_the_default_layout_follows_the_flash() -> None:
    """Packed int16 weights by default while the constants, grown by the packing, take at most 3/4 of the
    board's read-only memory; past that the compact kernels keep them int8."""
    import dataclasses

    import torch

    from mcu.api import lower
    from mcu.backends.optimized.compact import PACKED_SHARE

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(16 * 6 * 6, 10)).eval()
    example = (torch.randn(1, 3, 6, 6),)
    calib = [(torch.randn(1, 3, 6, 6),) for _ in range(4)]
    board = load_board("mps2-an505")
    lowered = lower(model, example, quantize="int8", calibration=calib)  # one capture for both boards
    roomy = lowered.compile(board)
    assert {s.call.function for s in roomy.library.view.steps} >= {"mcu_conv2d_packed_s8"}
    constants = sum(t.nbytes for t in roomy.graph.constants() if not t.name.endswith(("_packed", "_compact")))
    rom = board.region_for("rodata")
    # room for the int8 constants but not for the packed ones (weights ~ 6 KB more)
    tight = dataclasses.replace(board, flash=dataclasses.replace(rom, length=int(constants / PACKED_SHARE) + 1024))
    assert tight.region_for("rodata") is tight.flash
    small = lowered.compile(tight)
    functions = {s.call.function for s in small.library.view.steps}
    assert {"mcu_conv2d_compact_s8", "mcu_linear_compact_s8"} <= functions and "mcu_conv2d_packed_s8" not in functions
    x = torch.randn(1, 3, 6, 6)
    for g, e in zip(small.run_raw_c(x), roomy.reference_raw(x)):
        np.testing.assert_array_equal(g, e)
