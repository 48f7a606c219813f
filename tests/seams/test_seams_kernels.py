"""Where the kernels' fast paths meet: layers of different paths in one firmware, at every optimisation level.

mcu_conv2d_packed_s8 takes a narrow path (convolution/conv_narrow_s8_dsp.h: few taps, a ReLU range) and a
wide one (convolution/gemm_s8_dsp.h's mcu_pixel_packed_wide); both are assembly that pins registers, and the
compiler allocates around it differently at each level. One firmware runs narrow layers, then wide ones,
then narrow ones again, on the same stack, with the kernel built at -Os, -O1, -O2 and -O3, on the M33 and
the M4; every output is compared with the Python reference bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mcu.backends.optimized import tuned
from mcu.device.boards import load_board
from mcu.paths import runtime_dir, kernel_source
from mcu.reference.conv import conv2d_s8
from mcu.reference.elementwise import broadcast_params, mul_s8
from packed_cases import packed_firmware_source, packed_params
from repo import requires_qemu


def _conv_case(rng: np.random.Generator, h: int, w: int, cin: int, cout: int, k: int, pad: int,
               relu: bool) -> dict:
    """One layer with right shifts (the assembly's streams); `relu`: a range from the output offset up."""
    x = rng.integers(-128, 128, (1, h, w, cin)).astype(np.int8)
    wt = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.int8)
    b = rng.integers(-(2**16), 2**16, cout).astype(np.int32)
    m = rng.integers(2**29, 2**31 - 1, cout).astype(np.int64)
    sh = rng.integers(-12, -6, cout).astype(np.int64)
    out_zp = int(rng.integers(-20, 20))
    act = (out_zp, 127) if relu else (-128, 127)
    oh, ow = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    params = packed_params(x.shape, (1, oh, ow, cout), k, k, pt=pad, pl=pad, in_zp=int(rng.integers(-10, 10)),
                     out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    return dict(params=params, x=x, w=tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp), expected=expected)


def _mixed_cases() -> list[dict]:
    rng = np.random.default_rng(27)
    narrow = [_conv_case(rng, 6, 6, 3, 8, 3, 1, True),     # a first layer: 3x3 window of RGB (27 taps)
              _conv_case(rng, 5, 5, 16, 8, 1, 0, True),    # narrow pointwise
              _conv_case(rng, 4, 4, 12, 16, 1, 0, True)]
    wide = [_conv_case(rng, 4, 4, 64, 12, 1, 0, False),    # 64 taps: the straight-line wide path
            _conv_case(rng, 4, 4, 36, 8, 1, 0, False),     # 36 taps (kp % 8 == 4: through the stub), full range
            _conv_case(rng, 5, 5, 16, 8, 3, 1, False)]     # 144 taps, a 3x3 window
    return narrow + wide + narrow + wide


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386"])
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O2", "-O3"])
def test_narrow_then_wide_layers_at_every_level(tmp_path: Path, board_name: str, opt: str) -> None:
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    main = tmp_path / "main.c"
    main.write_text(packed_firmware_source(_mixed_cases(), label="mixed"))
    kernel = tmp_path / "packed.c"  # a pragma ahead of the kernel: the rest of the build stays at -O2
    kernel.write_text(f'#pragma GCC optimize("{opt[1:]}")\n#include "{kernel_source(tuned.SOURCE)}"\n')
    board = load_board(board_name)
    fw = build_firmware(board, [main, kernel], [runtime_dir() / "include"], tmp_path / "out")
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "mixed cases failed: 0" in result.console, result.console


@requires_qemu
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-O2", "-O3"])
def test_code_taking_its_own_address_is_word_aligned(tmp_path: Path, opt: str) -> None:
    """ADR adds an offset the assembler fixed against its section's start to the PC rounded down to a
    word: a section holding one must start on a word boundary, whatever the level's function alignment
    (-Os and -O1 align functions to 2 bytes; the firmware above faults only when the linker happens to
    place such a function at 2 mod 4)."""
    import re
    import subprocess

    from mcu.device.toolchain import compile_flags, find_cross_compiler

    objdump = str(find_cross_compiler()).replace("gcc", "objdump")
    readelf = str(find_cross_compiler()).replace("gcc", "readelf")
    for board_name in ("mps2-an505", "mps2-an386"):
        flags = [f for f in compile_flags(load_board(board_name)) if not f.startswith("-O")]
        obj = tmp_path / f"{board_name}.o"
        subprocess.run([str(find_cross_compiler()), *flags, opt, "-c", "-o", str(obj),
                        str(kernel_source(tuned.SOURCE))], check=True)
        align = {m[0]: int(m[1]) for m in re.findall(r"\]\s+(\S+)\s+PROGBITS.*\s(\d+)$",
                                                     subprocess.run([readelf, "-SW", str(obj)], capture_output=True,
                                                                    text=True, check=True).stdout, re.M)}
        dump = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
        with_adr = {sec for sec, body in re.findall(r"Disassembly of section (\S+):\n(.*?)(?=Disassembly of|\Z)",
                                                    dump, re.S)
                    if re.search(r"\t(?:addw|subw|adr(?:\.w)?)\t\w+, pc", body)}
        assert with_adr, "the wide path takes its tails' addresses with ADR: none found"
        assert all(align[sec] >= 4 for sec in with_adr), {sec: align[sec] for sec in with_adr}


def test_plan_searches_only_below_a_known_arena() -> None:
    """plan_memory plans several op orders; an order's branch-and-bound search looks only for arenas below
    the best order's so far (without that cutoff, every order that could not win spent the search's whole
    budget; with it a 4-block ViT plans in about 0.1 s with the same arena)."""
    from mcu.plan.planner import MemoryPlanner, verify_plan

    def hard() -> MemoryPlanner:  # every greedy order leaves a hole; the search reaches the bound (88 B)
        p = MemoryPlanner()
        for i, (size, a, b) in enumerate([(20, 3, 6), (16, 3, 4), (40, 6, 8), (4, 0, 1), (16, 1, 3), (12, 4, 6),
                                          (12, 2, 4), (24, 2, 4)]):
            p.add_buffer(f"b{i}", size, a, b)
        return p

    assert hard().plan().method == "search" and hard().plan().arena_size == 88
    known = hard().plan(beat=88)  # another order already reached the bound: nothing to search for
    verify_plan(known)
    assert known.method != "search" and known.arena_size > 88
    assert hard().plan(beat=200).arena_size == 88  # a cutoff above the greedy arena changes nothing


class _SqueezeExcite(torch.nn.Module):
    """A MobileNetV3 block as users write it: expand, hardswish, depthwise 5x5, squeeze-excite, project."""

    def __init__(self, c: int = 16, e: int = 48) -> None:
        super().__init__()
        nn = torch.nn
        self.expand = nn.Sequential(nn.Conv2d(c, e, 1), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(e, e, 5, 1, 2, groups=e), nn.Hardswish())
        self.fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(e, e // 4, 1), nn.ReLU(), nn.Conv2d(e // 4, e, 1),
                                nn.Hardsigmoid())
        self.project = nn.Conv2d(e, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.expand(x))
        return x + self.project(y * self.fc(y))


def test_arena_figures_are_named_for_what_they_are() -> None:
    """In-place overlaps take the arena below the op order's largest live set (every buffer counted whole),
    so the live set is no lower bound (15,360 B arena, live set 24,576 B on a MobileNetV3-like model):
    lower bound <= arena <= live set, and the profile's bytes live per op
    count shared bytes once, so no op shows more than the arena."""
    from mcu.api import compile as compile_model
    from mcu.devtools.ops import live_bytes_per_step

    torch.manual_seed(0)
    cm = compile_model(torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, 1, 1), _SqueezeExcite(), _SqueezeExcite()).eval(),
                       (torch.randn(1, 3, 24, 24),))
    mem = cm.memory
    assert mem.lower_bound <= mem.arena_size < mem.live_set  # the overlaps are used here
    live = live_bytes_per_step(mem, len(cm.graph.ops))
    assert max(live) <= mem.arena_size
    summary = cm.summary()
    assert (summary["arena_lower_bound_bytes"], summary["arena_live_set_bytes"]) == (mem.lower_bound, mem.live_set)


@st.composite
def _gate_case(draw) -> dict:
    """x (N, H, W, C) times a per-channel gate (N, 1, 1, C), or the operands swapped; codes, zero-points
    and the output shift at their ends (shifts outside [-24, -1] take the general requantization)."""
    n, h, w, c = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 67))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "min", "max"]))
    x = (rng.integers(-128, 128, (n, h, w, c)) if kind == "random"
         else np.full((n, h, w, c), -128 if kind == "min" else 127)).astype(np.int8)
    g = rng.integers(-128, 128, (n, 1, 1, c)).astype(np.int8)
    zp = st.sampled_from([-128, 127, 0]) | st.integers(-128, 127)
    lo = draw(st.just(-128) | st.integers(-128, 127))  # -128 to 127: the assembly's rows
    qp = dict(a_offset=-draw(zp), b_offset=-draw(zp), output_offset=draw(zp),
              out_multiplier=draw(st.sampled_from([2**30, 2**31 - 1]) | st.integers(2**30, 2**31 - 1)),
              out_shift=draw(st.sampled_from([-1, -24, -25, 0, 1]) | st.integers(-24, -1)),
              act_min=lo, act_max=draw(st.just(127) | st.integers(lo, 127)), a_multiplier=0, a_shift=0,
              b_multiplier=0, b_shift=0,
              left_shift=0)
    return dict(a=g, b=x, qp=qp) if draw(st.booleans()) else dict(a=x, b=g, qp=qp)


@settings(max_examples=150, deadline=None)
@given(case=_gate_case())
def test_gate_multiply_bit_exact_on_the_dsp_build(case: dict) -> None:
    """mcu_mul_s8's DSP row (mcu_binary_s8_row_mul) against the Python reference, on the host build with
    the DSP paths emulated: squeeze-excite's x * gate with the gate broadcast over the pixels."""
    import cbind_s8 as cb
    from cbind import MCU_OK
    from host_builds import build_emulated_lib, load_bound, route_cbind

    params = dict(case["qp"], **broadcast_params(case["a"].shape, case["b"].shape))
    expected = mul_s8(case["a"], case["b"], **params)
    for _ in route_cbind(load_bound(build_emulated_lib())):
        status, out = cb.binary("mul", case["a"], case["b"], params)
    assert status == MCU_OK
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


@settings(max_examples=150, deadline=None)
@given(case=_gate_case())
def test_gate_multiply_bit_exact_on_the_plain_build(case: dict) -> None:
    """mcu_mul_s8's per-channel path for cores without the DSP extension (elementwise/binary_s8.h,
    mcu_binary_s8_mul_gate: the gate's product with the multiplier once per channel, the 64-bit product
    from two 32-bit multiplies) against the Python reference, on the host build of the M0+'s paths."""
    import cbind_s8 as cb
    from cbind import MCU_OK
    from host_builds import build_host_variant, load_bound, route_cbind

    params = dict(case["qp"], **broadcast_params(case["a"].shape, case["b"].shape))
    expected = mul_s8(case["a"], case["b"], **params)
    for _ in route_cbind(load_bound(build_host_variant("MCU_S8_NO_WIDE", "narrow"))):
        status, out = cb.binary("mul", case["a"], case["b"], params)
    assert status == MCU_OK
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


def _gate_firmware(cases: list[dict]) -> str:
    """A firmware running mcu_mul_s8 on each case and printing "gate cases failed: N"."""
    from c_source import c_array, harness_main

    src = ['#include <stdint.h>\n#include "mcu/kernels_s8.h"\n#include "mcu/log.h"\n']
    runs = []
    for i, c in enumerate(cases):
        p = dict(c["qp"], **broadcast_params(c["a"].shape, c["b"].shape))
        dims = lambda v: "{" + ", ".join(str(int(x)) for x in list(v) + [0] * (6 - len(v))) + "}"  # noqa: E731
        expected = mul_s8(c["a"], c["b"], **p)
        src += [c_array(f"a{i}", "int8_t", c["a"], aligned=4), c_array(f"b{i}", "int8_t", c["b"], aligned=4),
                c_array(f"e{i}", "int8_t", expected, aligned=4)]
        fields = [str(p["rank"]), dims(p["out_shape"]), dims(p["a_strides"]), dims(p["b_strides"])] + [
            str(p[f]) for f in ("a_offset", "b_offset", "a_multiplier", "a_shift", "b_multiplier", "b_shift",
                                "left_shift", "out_multiplier", "out_shift", "output_offset", "act_min", "act_max")]
        src.append(f"static const mcu_binary_s8_params p{i} = {{{', '.join(fields)}}};\n")
        runs.append(f"    bad += run(&p{i}, a{i}, b{i}, e{i}, (int32_t)sizeof(e{i}));\n")
    src.append("""
static int8_t out[8192];
static int run(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, const int8_t *e, int32_t n)
{
    if (mcu_mul_s8(p, a, b, out) != MCU_OK) {
        return 1;
    }
    int32_t diff = 0;
    for (int32_t i = 0; i < n; ++i) {
        diff += out[i] != e[i];
    }
    return diff != 0;
}

""" + harness_main("gate", runs))
    return "".join(src)


def _gate_cases(count: int) -> list[dict]:
    """Seeded cases like _gate_case's, half of them full-range (the assembly's rows), the rest clamped or
    with output shifts the fast requantization does not take."""
    rng = np.random.default_rng(22)
    cases = []
    for k in range(count):
        n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 10)), int(rng.integers(1, 10))
        c = int(rng.integers(1, 68))
        x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        if k % 6 == 1:
            x[:] = -128
        g = rng.integers(-128, 128, (n, 1, 1, c)).astype(np.int8)
        zps = [int(v) for v in rng.choice([-128, 127, 0, int(rng.integers(-128, 128))], 3)]
        lo, hi = (-128, 127) if k % 2 == 0 else sorted(int(v) for v in rng.integers(-128, 128, 2))
        qp = dict(a_offset=-zps[0], b_offset=-zps[1], output_offset=zps[2],
                  out_multiplier=int(rng.choice([2**30, 2**31 - 1, int(rng.integers(2**30, 2**31 - 1))])),
                  out_shift=int(rng.choice([-1, -24, -25, 0, int(rng.integers(-24, 0))])), act_min=lo, act_max=hi,
                  a_multiplier=0, a_shift=0, b_multiplier=0, b_shift=0, left_shift=0)
        cases.append(dict(a=x, b=g, qp=qp) if k % 3 else dict(a=g, b=x, qp=qp))
    return cases


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386", "mps2-an385-m0plus", "mps2-an385", "mps3-an547"])
def test_gate_multiply_bit_exact_on_the_core(tmp_path: Path, board_name: str) -> None:
    """Gate multiplies on QEMU: the native loop (assembly for full-range contiguous rows) on the DSP cores,
    the per-channel path on the M0+ and M3, the Helium rows on the M55."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp = tmp_path
    (tmp / "main.c").write_text(_gate_firmware(_gate_cases(24)))
    board = load_board(board_name)
    fw = build_firmware(board, [tmp / "main.c", kernel_source("mcu_mul_s8.c")],
                        [runtime_dir() / "include"], tmp / "out")
    result = run_qemu(board, fw.elf, timeout_s=120)
    assert result.exit_code == 0 and "gate cases failed: 0" in result.console, result.console


class _DownsampleSE(torch.nn.Module):
    """A MobileNetV3 downsampling block: depthwise 5x5 stride 2, then squeeze-excite's x * gate."""

    def __init__(self, c: int = 20) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(c, c, 5, 2, 2, groups=c), nn.BatchNorm2d(c), nn.ReLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, 8, 1), nn.ReLU(), nn.Conv2d(8, c, 1),
                                nn.Hardsigmoid())
        self.head = nn.Sequential(nn.Conv2d(c, 8, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.stem(x))
        return self.head(y * self.se(y))


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["mps2-an505", "mps2-an386", "mps2-an385", "mps2-an385-m0plus", "mps3-an547"])
def test_downsampling_se_block_bit_exact_as_c_and_program(board_name: str) -> None:
    """The 5x5 stride-2 depthwise paths (DSP loop, M0+ table, Helium, the M3's rows) and the per-channel gate
    multiply in a model: its generated C and its program file on the core both equal the integer reference bit
    for bit."""
    from mcu.api import compile as compile_model
    from mcu.program.run_model import run_program_model

    torch.manual_seed(3)
    model = _DownsampleSE().eval()
    with torch.no_grad():  # BatchNorm statistics away from the identity, so the folded weights vary by channel
        model.dw[1].running_mean.uniform_(-0.5, 0.5)
        model.dw[1].running_var.uniform_(0.5, 2.0)
    data = [(torch.randn(1, 3, 22, 22),) for _ in range(10)]
    cm = compile_model(model, data[0], board=board_name, quantize="int8", calibration=data[:8], test_inputs=data[8:])
    dw = [op for op in cm.graph.ops if op.kind == "depthwise_conv2d"]
    assert [(op.inputs[1].shape[2:], tuple(op.attrs["stride"])) for op in dw] == [((5, 5), (2, 2))], dw
    gate = [op for op in cm.graph.ops if op.kind == "mul"]
    assert len(gate) == 1 and {t.shape[2:] for t in gate[0].inputs} == {(11, 11), (1, 1)}, gate
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    res = run_program_model(cm)
    assert res.run.passed, res.run.console[-2000:]
