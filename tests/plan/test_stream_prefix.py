"""The streamed prefix (mcu/plan/prefix.py, mcu/emit/prefix.py): the network's first ops run row by row
through rings of rows equal the Python integer reference of the unfused graph bit for bit (int8) and the
unfused generated C (fp32) on a chain of strided, padded, depthwise, pointwise and residual layers (host
builds, and the firmware on QEMU); the row schedule's ring bookkeeping, replayed in Python, holds over
random chains of kernels, strides, paddings and residual adds; the planner puts only the prefix's
output in the arena, and with a streamed input not the input either. A program file carries the same
schedule (mcu/program/prefix.py): the interpreter's replay is bit-exact on the host and under QEMU, and
its loader refuses a malformed schedule with a status."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from mcu import paths
from mcu.api import CompiledModel, LoweredModel, lower_spec
from mcu.device.boards import Board, load_board
from mcu.capture.loader import spec_from_objects
from mcu.errors import McuError
from mcu.plan.drawing import plan_svg
from mcu.plan.memory import scratch_bytes
from mcu.ir import CHANNELS_LAST, Op, Tensor
from mcu.plan.memory import plan_memory
from mcu.plan.prefix import (INPUT, KIND, Prefix, PrefixSchedule, candidate_ends, choose_schedule, height,
                             prefix_candidates, ring_parts, schedule)
from mcu.program import format as fmt, writer
from mcu.program.device import build_interpreter_firmware, run_program
from mcu.program.host import Program, ProgramError
from mcu.program.prefix import BODY_WORDS, CONSUMER_WORDS, DESC_WORDS, OP_WORDS, RING_WORDS, rows_program
from repo import requires_qemu

MCU_ERR_PROGRAM_INVALID = 7


class _Chain(nn.Module):
    """Convolutions (kernel, stride, padding, depthwise?) with ReLUs, and a residual add around the
    layer marked so when its shapes allow."""

    def __init__(self, cin: int, layers: list[tuple[int, int, int, bool, int, bool]]) -> None:
        super().__init__()
        mods = []
        self.residual = []
        c = cin
        for k, s, pad, depthwise, cout, residual in layers:
            out = c if depthwise else cout
            mods.append(nn.Sequential(nn.Conv2d(c, out, k, s, pad, groups=c if depthwise else 1), nn.ReLU()))
            self.residual.append(residual and s == 1 and 2 * pad == k - 1 and out == c)
            c = out
        self.layers = nn.ModuleList(mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer, residual in zip(self.layers, self.residual):
            x = x + layer(x) if residual else layer(x)
        return x


def _lower(model: nn.Module, shape: tuple[int, ...], seed: int, quantize: str = "int8") -> LoweredModel:
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    calib = [(torch.randn(shape, generator=gen),) for _ in range(4)]
    tests = [(torch.randn(shape, generator=gen) * 1.5,) for _ in range(2)]
    return lower_spec(spec_from_objects(model, calib[0], calib, tests, name="prefix_case"), quantize)


def _prefixes(cm: CompiledModel) -> list:
    return [op for op in cm.graph.ops if op.kind == KIND]


def _same_as_reference(cm: CompiledModel) -> None:
    for x in cm.spec.test_inputs:
        for ref, got in zip(cm.reference_raw(*x), cm.run_raw_c(*x)):
            np.testing.assert_array_equal(got, ref)


_LOWERED: dict[str, LoweredModel] = {}

# MobileNetV1's first layers at a small size: a stem widening the input, depthwise-separable pairs (one
# strided), then a residual depthwise layer.
_V1 = [(3, 1, 1, False, 16, False), (3, 1, 1, True, 16, False), (1, 1, 0, False, 24, False),
       (3, 2, 1, True, 24, False), (1, 1, 0, False, 16, False), (3, 1, 1, True, 16, True)]


def _v1(quantize: str = "int8") -> LoweredModel:
    if quantize not in _LOWERED:
        torch.manual_seed(7)
        _LOWERED[quantize] = _lower(_Chain(3, _V1), (1, 3, 16, 12), 7, quantize)
    return _LOWERED[quantize]


@pytest.mark.xdist_group("stream_prefix_v1")  # one worker lowers the model once
def test_streamed_input_is_not_in_the_arena_and_equals_the_reference() -> None:
    lowered = _v1()
    whole = lowered.compile()
    streamed = lowered.compile(stream_input=True)
    (op,) = _prefixes(streamed)
    x = streamed.graph.inputs[0]
    names = [b.name for b in streamed.memory.plan.buffers]
    assert x.name in [b.name for b in whole.memory.plan.buffers] and x.name not in names
    assert streamed.memory.arena_size < whole.memory.arena_size
    prefix = op.attrs["prefix"]
    assert id(x) in prefix.rings and prefix.rings[id(x)].rows == 3  # the stem's 3x3 window of input rows
    assert f"{op.name}_rings" in names
    h = streamed.library.files[f"{streamed.library.prefix}_model.h"]
    assert f"mcu_status {streamed.library.prefix}_input_rows(void *context, int32_t first_row" in h
    _same_as_reference(streamed)  # _run: the rows read from the whole input through the same loop
    svg = plan_svg(streamed.memory.plan, "streamed", rings=ring_parts(streamed.graph))
    assert svg.count('<g class="ring">') == len(prefix.rings) and x.name in svg
    assert f"{x.name} (3 rows, band 1)" in svg  # each ring with its rows and its producer's band


@pytest.mark.xdist_group("stream_prefix_v1")
def test_prefix_ends_where_the_arena_is_smallest() -> None:
    lowered = _v1()
    cm = lowered.compile(stream_prefix=True)
    (op,) = _prefixes(cm)
    ends = candidate_ends(lowered.graph)
    arenas = {n: lowered.compile(stream_prefix=n).memory.arena_size for n in ends}
    assert cm.memory.arena_size == min(arenas.values()) < lowered.compile().memory.arena_size
    assert len(op.attrs["ops"]) == min(n for n, a in arenas.items() if a == cm.memory.arena_size)
    budget = max(arenas.values())
    assert lowered.compile(stream_prefix=True, ram_budget=budget).memory.arena_size <= budget
    with pytest.raises(McuError, match=f"smallest arena is {cm.memory.arena_size} B, with the first "
                                       f"{len(op.attrs['ops'])} ops streamed row by row"):
        lowered.compile(stream_prefix=True, ram_budget=cm.memory.arena_size - 4)
    # What --ram-budget weighs (whole input in the arena): the frontier of arena and calls, below whole tensors;
    # a larger budget never takes more calls.
    whole = lowered.compile()
    cands = prefix_candidates(whole.graph, lambda g: plan_memory(g).arena_size)
    assert cands and cands[0].arena == cm.memory.arena_size
    assert all(a.arena < b.arena and a.calls > b.calls for a, b in zip(cands, cands[1:]))
    assert cands[-1].arena < whole.memory.arena_size
    choices = [choose_schedule(whole.graph, False, lambda g: plan_memory(g).arena_size, c.arena) for c in cands]
    picked = [choice.calls[choice.schedule] for choice in choices]
    assert picked == sorted(picked, reverse=True) and picked[-1] < picked[0]


@pytest.mark.xdist_group("stream_prefix_v1")
def test_bands_of_rows_equal_the_reference() -> None:
    """Bands of several rows per call (the patch grid of one output row, and every op three rows a call with
    the input read four rows a call) run the same kernels on more rows: the same bits, in fewer calls, in the
    generated C and in the program file."""
    lowered = _v1()
    rows = _prefixes(lowered.compile(stream_input=True))[0].attrs["prefix"]
    end = len(rows.ops)
    heights = tuple(height(op.output) for op in rows.ops)
    for plan in (PrefixSchedule(end, (*heights[:-1], 1), height(rows.input)), PrefixSchedule(end, (3,) * end, 4)):
        cm = lowered.compile(stream_input=True, stream_prefix=plan)
        p = _prefixes(cm)[0].attrs["prefix"]
        assert p.calls < rows.calls and max(n for _, n in p.steps) > 1
        _same_as_reference(cm)
        method = _program(cm).method("forward")  # the program file's body calls make a band's rows too
        for x in cm.spec.test_inputs:
            for got, want in zip(method.run_raw(*cm.encode_inputs(x)), cm.reference_raw(*x)):
                np.testing.assert_array_equal(got, want)


@pytest.mark.xdist_group("stream_prefix_v1")
def test_a_model_too_large_for_the_board_streams_its_prefix_to_fit(tmp_path: Path) -> None:
    """Without a budget or a stream option, a model whose tensors do not fit the board's RAM (and has no
    block to fuse) streams its first layers: the board's RAM is the budget; below every schedule, the error
    names the smallest arena."""
    lowered = _v1()
    whole, streamed = lowered.compile().memory.arena_size, lowered.compile(stream_prefix=True).memory.arena_size
    assert streamed < whole
    text = (paths.boards_dir() / "mps2-an505.toml").read_text()

    def board(arena: int) -> Board:
        name = f"m33-arena-{arena}"
        changed, n = re.subn(r"(\[memory\.ram\][^\[]*?length = )0x[0-9a-fA-F]+", rf"\g<1>{8192 + arena:#x}",
                             text.replace('name = "mps2-an505"', f'name = "{name}"'))
        assert n == 1
        (tmp_path / f"{name}.toml").write_text(changed)
        return load_board(name, tmp_path)

    cm = lowered.compile(board((whole + streamed) // 2))
    assert len(_prefixes(cm)) == 1 and cm.memory.arena_size <= (whole + streamed) // 2
    _same_as_reference(cm)
    with pytest.raises(McuError, match=f"does not fit m33-arena-{streamed - 8} .*the smallest arena is {streamed} B"):
        lowered.compile(board(streamed - 8))


def test_fp32_prefix_equals_unfused_c() -> None:
    """fp32: the same kernels on the same rows, so the same bits as the unfused generated C."""
    lowered = _v1("none")
    whole = lowered.compile()
    streamed = lowered.compile(stream_input=True)
    assert len(_prefixes(streamed)) == 1
    for x in streamed.spec.test_inputs:
        for want, got in zip(whole.run_raw_c(*x), streamed.run_raw_c(*x)):
            assert want.dtype == np.float32
            np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.xdist_group("stream_prefix_v1")
def test_streamed_input_on_the_device_reads_the_firmware_callback() -> None:
    """The firmware harness implements <model>_input_rows() from its vectors: QEMU, the M33."""
    cm = _v1().compile("mps2-an505", stream_input=True)
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)


def _program(cm: CompiledModel) -> Program:
    return Program.load(cm.program_image().program)


@pytest.mark.xdist_group("stream_prefix_v1")
@pytest.mark.parametrize("stream", ["prefix", "input"])
@pytest.mark.parametrize("quantize", ["int8", "none"])
def test_program_file_replays_the_prefix_bit_exact(quantize: str, stream: str) -> None:
    """The interpreter replays the row schedule (one ROWS instruction, its row calls the body; a streamed
    input read through the host's row callback): int8 equals the reference, fp32 the whole-tensor program."""
    lowered = _v1(quantize)
    # the longest prefix: every kind of row call (a window, a pointwise written into its input's row, an add)
    end = max(candidate_ends(lowered.graph, stream == "input"))
    cm = lowered.compile(stream_prefix=end, stream_input=stream == "input")
    (op,) = _prefixes(cm)
    image = cm.program_image()
    kinds = [k for _, k in image.instructions["forward"]]
    assert kinds[0] == "rows" and kinds.count("rows") == 1 and image.traced["forward"][0] == 0
    method = Program.load(image.program).method("forward")
    assert method.arena_sizes == [cm.memory.arena_size]
    whole = None if quantize == "int8" else _program(lowered.compile()).method("forward")
    for x in cm.spec.test_inputs:
        got = method.run_raw(*cm.encode_inputs(x))
        want = cm.reference_raw(*x) if whole is None else whole.run_raw(*cm.encode_inputs(x))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def _table_parts(params: list[int]) -> dict[str, int]:
    """The first word of each part of a ROWS table (runtime_c/include/mcu/program.h, MCU_K_ROWS)."""
    n_ops, n_rings, n_consumers, n_body, n_steps, _ = params
    at = {"steps": 0, "ops": 2 * n_steps}
    at["rings"] = at["ops"] + OP_WORDS * (n_ops + 1)
    at["consumers"] = at["rings"] + RING_WORDS * n_rings
    at["body"] = at["consumers"] + CONSUMER_WORDS * n_consumers
    at["descs"] = at["body"] + BODY_WORDS * n_body
    return at


def _with_table(image: Any, change: Callable[[np.ndarray], None]) -> bytes:
    """The program with its schedule's words changed by ``change`` (the CRC left stale)."""
    seg = next(s for s in image.segments if s.name.endswith("_schedule"))
    start = fmt.read_header(image.program).data_offset + seg.offset
    words = np.frombuffer(image.program, np.int32, len(seg.data) // 4, start).copy()
    change(words)
    return image.program[:start] + words.tobytes() + image.program[start + len(seg.data):]


@pytest.mark.xdist_group("stream_prefix_v1")
def test_program_loader_refuses_a_malformed_row_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader replays the schedule: a ring a row short, a step past its op's rows, a step no row call
    makes, a row far outside the arena, a step naming no op, the streamed input without its ring or without
    its tensor: each a status (PROGRAM_INVALID), never a crash."""
    cm = _v1().compile(stream_input=True)
    (op,) = _prefixes(cm)
    p = op.attrs["prefix"]
    m = cm.memory
    rows = rows_program(op, lambda t: (m.arena_index(t), m.offset(t)),
                        (m.scratch_arena_index(op), m.scratch_offsets[id(op)], scratch_bytes(op)))
    n_ops, _, _, _, n_steps, n_descs = rows.params
    at = _table_parts(rows.params)
    x_ring = at["rings"] + RING_WORDS * list(p.rings).index(id(p.input))
    image = cm.program_image()
    changes: dict[str, Callable[[np.ndarray], None]] = {
        "ring a row short": lambda w: w.__setitem__(x_ring + 2, w[x_ring + 2] - 1),
        "step past its op's rows": lambda w: w.__setitem__(at["steps"] + 2 * (n_steps - 1), 0),
        "step of two rows": lambda w: w.__setitem__(at["steps"] + 2 * (n_steps - 1) + 1, 2),
        "row outside the arena": lambda w: w.__setitem__(at["descs"] + DESC_WORDS * (n_descs - 1) + 3, 1 << 20),
        "step naming no op": lambda w: w.__setitem__(at["steps"], n_ops + 1),
        "input without its ring": lambda w: w.__setitem__(at["ops"] + OP_WORDS * n_ops + 1, -1),
    }
    Program.load(_with_table(image, lambda w: None), verify_checksum=False)
    for what, change in changes.items():
        with pytest.raises(ProgramError) as err:
            Program.load(_with_table(image, change), verify_checksum=False)
        assert err.value.status == MCU_ERR_PROGRAM_INVALID, what
    real = writer.rows_program
    monkeypatch.setattr(writer, "rows_program", lambda *args: replace(real(*args), stream=None))
    with pytest.raises(ProgramError) as err:  # rows asked of a streamed input the instruction does not name
        _program(cm)
    assert err.value.status == MCU_ERR_PROGRAM_INVALID


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.xdist_group("stream_prefix_v1")
def test_interpreter_firmware_streams_the_input_from_its_vectors() -> None:
    """The interpreter firmware's harness implements the row callback from its bundled vectors: QEMU, M33."""
    cm = _v1().compile("mps2-an505", stream_input=True)
    firmware = build_interpreter_firmware(cm.board)
    run = run_program(cm.board, firmware.elf, cm.program_image(bundle_tests=True).program)
    assert run.passed, run.console[-2000:]
    assert len(run.instructions) == len(cm.spec.test_inputs)


def _synthetic(cin: int, h: int, w: int, layers: list[tuple[str, int, int, int, int]]) -> list[Op]:
    """int8 IR ops of a chain (no weights' values: the schedule reads only shapes and attributes):
    ("conv", k, stride, padding, channels) or ("res", k, 1, k // 2, 0) (a convolution and an add of its
    input)."""
    x = Tensor("x", (1, cin, h, w), "int8", CHANNELS_LAST, is_input=True)
    ops: list[Op] = []

    def conv(t: Tensor, k: int, s: int, pad: int, cout: int) -> Tensor:
        out_h = (t.shape[2] + 2 * pad - k) // s + 1
        out_w = (t.shape[3] + 2 * pad - k) // s + 1
        y = Tensor(f"t{len(ops)}", (1, cout, out_h, out_w), "int8", CHANNELS_LAST)
        wt = Tensor(f"w{len(ops)}", (cout, t.shape[1], k, k), "int8", data=np.zeros((cout, t.shape[1], k, k), np.int8))
        ops.append(Op("conv2d", [t, wt], [y], {"stride": (s, s), "padding": (pad, pad), "dilation": (1, 1),
                                               "groups": 1}, f"op{len(ops)}"))
        return y

    t = x
    for kind, k, s, pad, c in layers:
        if kind == "conv":
            t = conv(t, k, s, pad, c)
        else:
            y = conv(t, k, 1, k // 2, t.shape[1])
            a = Tensor(f"t{len(ops)}", y.shape, "int8", CHANNELS_LAST)
            ops.append(Op("add", [y, t], [a], {}, f"op{len(ops)}"))
            t = a
    return ops


def _replay(p: Prefix) -> None:
    """The generated loop's bookkeeping run in Python (mcu/emit/prefix.py): every ring slot a row is read
    from holds that row, and no slot lies outside its ring."""
    ops = p.ops
    ring_of = {key: j for j, key in enumerate(p.rings)}
    base = [0] * len(p.rings)
    nxt = [0] * (len(ops) + 1)
    memory: dict[tuple, tuple[int, int]] = {}

    def target(t: Tensor) -> Tensor:
        return ops[p.into[id(t)]].output if id(t) in p.into else t

    def where(t: Tensor, row: int) -> tuple:
        u = target(t)
        if id(u) not in p.rings:
            return ("whole", id(u), row)
        j = ring_of[id(u)]
        assert 0 <= row - base[j] < p.rings[id(u)].rows, (u.name, row, base[j])
        return ("ring", j, row - base[j])

    def make_room(t: Tensor, y: int, n: int) -> None:
        j = ring_of[id(t)]
        if y + n - base[j] > p.rings[id(t)].rows:
            low = y
            for c, w in p.consumers[id(t)]:
                if nxt[c] < height(ops[c].output):
                    low = min(low, max(0, nxt[c] * w.s - w.pad))
            for k in range(y - low):
                memory[("ring", j, k)] = memory.get(("ring", j, low - base[j] + k), (-1, -1))
            base[j] = low

    for step, n in p.steps:
        i = len(ops) if step == INPUT else step
        y = nxt[i]
        h = height(p.input if step == INPUT else ops[i].output)
        assert 0 < n <= min(p.band(step), h - y)
        nxt[i] += n
        if step == INPUT:
            make_room(p.input, y, n)
            for r in range(y, y + n):
                memory[where(p.input, r)] = (id(p.input), r)
            continue
        op = ops[i]
        if id(target(op.output)) in p.rings:
            make_room(target(op.output), y, n)
        for t, w in zip(op.inputs, p.windows[i]):
            if w is None:
                continue
            lo, rows, _ = w.rows(y, height(t), n)
            for r in range(lo, lo + rows):
                if id(t) in p.rings or id(t) in p.into:
                    assert memory.get(where(t, r)) == (id(t), r), (op.name, t.name, r)
        for r in range(y, y + n):
            memory[where(op.output, r)] = (id(op.output), r)
    assert nxt[len(ops) - 1] == height(p.output)


@st.composite
def _synthetic_layers(draw: st.DrawFn) -> list[tuple[str, int, int, int, int]]:
    layers = []
    for _ in range(draw(st.integers(1, 6))):
        k = draw(st.sampled_from([1, 3, 5]))
        if draw(st.integers(0, 3)) == 0:
            layers.append(("res", k, 1, k // 2, 0))
        else:
            layers.append(("conv", k, draw(st.sampled_from([1, 2, 3])), draw(st.integers(0, k // 2)),
                           draw(st.sampled_from([4, 8, 16]))))
    return layers


@settings(max_examples=120, deadline=None)
@given(layers=_synthetic_layers(), h=st.integers(1, 40), cin=st.sampled_from([3, 8]), stream=st.booleans(),
       bands=st.lists(st.sampled_from([1, 1, 2, 3, 4, 8, 64]), min_size=12, max_size=12), input_band=st.integers(1, 9))
def test_band_schedule_replayed_reads_every_row_from_its_ring(layers: list, h: int, cin: int, stream: bool,
                                                              bands: list[int], input_band: int) -> None:
    """The schedule's rings over chains of kernels, strides, paddings and residual adds, each op making
    up to its own band of rows per call (one row, a few, or all it is asked for: the patch grid): the C
    loop's bookkeeping replayed finds every row a window reads where it was written, and each ring is as
    small as that allows (one row fewer breaks the replay)."""
    t = h
    for _, k, s, pad, _ in layers:
        t = (t + 2 * pad - k) // s + 1
        if t < 1:
            return
    ops = _synthetic(cin, h, 4, layers)
    p = schedule(ops, stream, bands[:len(ops)], input_band)
    _replay(p)
    for ring in p.rings.values():
        ring.rows -= 1
        with pytest.raises(AssertionError):
            _replay(p)
        ring.rows += 1
    assert all(n == 1 for _, n in schedule(ops, stream).steps)


# The tracer's hooks for a host build: each begin and end recorded in order (an end marked in prefix_trace_end).
_TRACE_STUB = """#include "mcu/trace.h"
uint32_t prefix_trace_ids[8192];
uint8_t prefix_trace_end[8192];
uint32_t prefix_trace_n;
static void record(uint32_t handle, uint8_t end) {
    if (prefix_trace_n < 8192u) { prefix_trace_end[prefix_trace_n] = end; prefix_trace_ids[prefix_trace_n++] = handle; }
}
uint32_t mcu_trace_op_begin(uint32_t handle) { record(handle, 0); return 0; }
void mcu_trace_op_end(uint32_t handle, uint32_t t0) { (void)t0; record(handle, 1); }
void mcu_trace_op_output(uint32_t handle, void *output, uint32_t nbytes) { (void)handle; (void)output; (void)nbytes; }
"""


@pytest.mark.xdist_group("stream_prefix_v1")
def test_profile_traces_each_step_of_the_prefix() -> None:
    """A profiling build of a streamed prefix (streamed input, bands of 2 rows) brackets each step, and one
    empty event first, with the tracer's hooks, none nested, as many as the profile expects; folded, each op
    has its calls, its cost without the hooks and its cost over the op run whole (host build, the events'
    costs made up from their ids)."""
    import ctypes
    from mcu.device.hostbuild import HostModel, build_host_library
    from mcu.devtools.ops import op_table
    from mcu.devtools.prefix_trace import fold
    from mcu.devtools.profile import make_profile
    from mcu.devtools.trace import TraceEvent, events_per_inference

    lowered = _v1()
    cm = lowered.compile(stream_input=True, stream_prefix=PrefixSchedule(len(_V1), (2,) * len(_V1), 2))
    (op,) = _prefixes(cm)
    p = op.attrs["prefix"]
    lib = cm.library
    traced = replace(lib, files={**lib.files, "trace_stub.c": _TRACE_STUB}, defines={**lib.defines, "MCU_TRACE": 1})
    host = HostModel(traced, build_host_library(traced))
    host.run_physical(cm.encode_inputs(*cm.spec.test_inputs[0]))
    n = ctypes.c_uint32.in_dll(host._dll, "prefix_trace_n").value
    ids = list((ctypes.c_uint32 * 8192).in_dll(host._dll, "prefix_trace_ids")[:n])
    end = list((ctypes.c_uint8 * 8192).in_dll(host._dll, "prefix_trace_end")[:n])
    begins = ids[0::2]
    assert ids[1::2] == begins and end == [0, 1] * (n // 2) and n % 2 == 0  # paired, never nested
    assert len(begins) == events_per_inference(cm)
    hooks, unit = 7, {i: 100 * (i + 1) for i in range(len(p.ops) + 1)}  # an op's call costs its unit
    events = [TraceEvent(h, hooks + unit.get((h >> 16) - 1, 0) if h >> 16 else 50, 0) for h in begins]
    folded, traces = fold(events)
    assert [e.handle for e in folded] == [s.index for s in lib.view.steps]
    calls = {i: len(p.calls_of(i)) for i in range(len(p.ops))} | {len(p.ops): len(p.calls_of(INPUT))}
    assert {k: s.calls for k, s in traces[op_index(cm, op)].ops.items()} == calls
    profile = make_profile("t", "instructions", op_table(cm.graph, cm.memory, cm.library), folded, None)
    profile.prefixes = traces
    profile.whole_costs = {o.name: hooks + unit[i] for i, o in enumerate(p.ops)}  # one call's worth, whole
    rows = profile.prefix_ops(next(r.op for r in profile.rows if r.op.prefix is not None))
    assert [(o["calls"], o["cost"], o["overhead"]) for o in rows] == \
        [(calls[k], calls[k] * unit[k], (calls[k] - 1) * unit[k] if k < len(p.ops) else None) for k in calls]
    assert "input rows (read)" in profile.table() and profile.svg().count('class="prefix-overhead"') == len(calls)


def op_index(cm: CompiledModel, op: Op) -> int:
    return next(i for i, o in enumerate(cm.graph.ops) if o is op)
