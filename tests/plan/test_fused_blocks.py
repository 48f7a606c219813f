"""Fused inverted-residual blocks (mcu/plan/fused.py, mcu/plan/fusion.py, mcu/emit/fused.py): the generated C
of a block run row by row through its ring equals the Python integer reference of the unfused graph bit
for bit, over shapes, strides, paddings and producers; the plan holds the ring; a RAM budget picks as few
fused blocks as fit it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

from mcu.api import CompiledModel, LoweredModel, lower_spec
from mcu.capture.loader import spec_from_objects
from mcu.devtools.profile import profile_model
from mcu.errors import McuError
from mcu.plan.drawing import plan_svg
from mcu.emit.c_model import render_library
from mcu.plan.fused import KIND, Block, find_chains, fused_op
from mcu.devtools.fusion_costs import build_schedule
from mcu.plan.fusion import FusionCosts, candidates, choose_fastest, combined_candidates, frontier, to_run
from mcu.plan.prefix import KIND as PREFIX_KIND, prefix_candidates
from mcu.ir import NUMPY_DTYPES, Tensor
from mcu.plan.memory import plan_memory
from mcu.program import writer
from mcu.program.device import build_interpreter_firmware, run_program
from mcu.program.fused import Step
from mcu.program.host import Program, ProgramError
from cli_runner import assert_one_line_error, mcu_in_process
from repo import EXAMPLES, requires_qemu


class _Block(nn.Module):
    """producer (kernel p_kernel, stride p_stride) -> depthwise (kernel k, stride s, padding pad) -> 1x1,
    with the residual when shapes allow."""

    def __init__(self, cin: int, hidden: int, cout: int, p_kernel: int, p_stride: int, k: int, s: int,
                 pad: int, residual: bool) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(cin, hidden, p_kernel, p_stride, p_kernel // 2, bias=False),
                                    nn.BatchNorm2d(hidden), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(hidden, hidden, k, s, pad, groups=hidden, bias=False),
                                nn.BatchNorm2d(hidden), nn.ReLU6())
        self.project = nn.Conv2d(hidden, cout, 1, bias=True)
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.dw(self.expand(x)))
        return x + y if self.residual else y


def _lower(model: nn.Module, shape: tuple[int, ...], seed: int, quantize: str = "int8") -> LoweredModel:
    """The model with seeded batch-norm statistics and data, captured and quantized once: each test compiles
    one model under several schedules or boards from it."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5, generator=gen)
                m.running_var.uniform_(0.5, 2.0, generator=gen)
    model.eval()
    calib = [(torch.randn(shape, generator=gen),) for _ in range(4)]
    tests = [(torch.randn(shape, generator=gen) * 1.5,) for _ in range(2)]
    return lower_spec(spec_from_objects(model, calib[0], calib, tests, name="fused_block_case"), quantize)


def _compile(model: nn.Module, shape: tuple[int, ...], seed: int, board: str = "mps2-an505",
             quantize: str = "int8", **kwargs: object) -> CompiledModel:
    return _lower(model, shape, seed, quantize).compile(board, **kwargs)  # type: ignore[arg-type]


def _fused(cm: CompiledModel) -> list:
    return [op for op in cm.graph.ops if op.kind == KIND]


def _with_band(cm: CompiledModel, band: int) -> CompiledModel:
    """``cm`` with each fused block making ``band`` output rows a pass, planned and generated again."""
    graph = dataclasses.replace(cm.graph, ops=[fused_op(op.attrs["stages"], band) if op.kind == KIND else op
                                               for op in cm.graph.ops])
    memory = plan_memory(graph)
    return dataclasses.replace(cm, graph=graph, memory=memory, library=render_library(graph, memory, cm.quantize),
                               _host=None)


def _same_as_reference(cm: CompiledModel, c: bool = True) -> None:
    """The generated C (host build; unless not ``c``) and the program file (the interpreter in-process)
    each equal the reference."""
    loops = [k for _, k in cm.program_image().instructions["forward"]].count("loop")
    assert loops == len(_fused(cm)) > 0
    for x in cm.spec.test_inputs:
        ref = cm.reference_raw(*x)
        for got in ((cm.run_raw_c(*x),) if c else ()) + (cm.run_raw(*x),):
            for want, out in zip(ref, got):
                np.testing.assert_array_equal(out, want)


@st.composite
def _cases(draw: st.DrawFn) -> dict:
    k = draw(st.sampled_from([3, 5]))
    s = draw(st.sampled_from([1, 2]))
    pad = draw(st.sampled_from(sorted({0, k // 2})))
    p_kernel, p_stride = draw(st.sampled_from([(1, 1), (1, 1), (3, 1), (3, 2)]))
    cin = draw(st.sampled_from([3, 4, 8]))
    residual = s == 1 and pad == k // 2 and p_stride == 1 and draw(st.booleans())
    cout = cin if residual else draw(st.sampled_from([4, 8, 12]))
    # the expanded tensor at least one window across (the producer's stride halves it)
    h = draw(st.integers(k * p_stride + 1, 14))
    w = draw(st.integers(k * p_stride, 12))
    return {"cin": cin, "hidden": cin * draw(st.sampled_from([3, 6])), "cout": cout, "p_kernel": p_kernel,
            "p_stride": p_stride, "k": k, "s": s, "pad": pad, "residual": residual, "h": h, "w": w,
            "band": draw(st.sampled_from([1, 1, 2, 3, 5])), "seed": draw(st.integers(0, 2**16))}


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_fused_block_equals_unfused_reference(case: dict) -> None:
    h, w, band, seed = case.pop("h"), case.pop("w"), case.pop("band"), case.pop("seed")
    torch.manual_seed(seed)
    cm = _compile(_Block(**case), (1, case["cin"], h, w), seed, fuse_blocks="all")
    if band > 1:
        cm = _with_band(cm, band)
    fused = _fused(cm)
    assert len(fused) == 1, [op.kind for op in cm.graph.ops]
    block: Block = fused[0].attrs["block"]
    assert (block.k, block.s, block.pad, block.residual) == (case["k"], case["s"], case["pad"], case["residual"])
    assert block.band == min(band, block.out_h)
    _same_as_reference(cm)


_LOWERED: dict[str, LoweredModel] = {}


def _core_family_block() -> LoweredModel:
    if "core family" not in _LOWERED:
        torch.manual_seed(1)
        _LOWERED["core family"] = _lower(_Block(8, 48, 8, 1, 1, 3, 1, 1, True), (1, 8, 12, 10), 1)
    return _LOWERED["core family"]


@pytest.mark.xdist_group("fused_block_core_family")  # one worker lowers the model once
@pytest.mark.parametrize("board", ["mps2-an505", "mps3-an547", "mps2-an385-m0plus"])
def test_fused_block_on_each_core_family(board: str) -> None:
    """The optimized (DSP), MVE and plain paths of the kernels each fused stage calls, host-built."""
    cm = _core_family_block().compile(board, fuse_blocks="all")
    assert len(_fused(cm)) == 1
    _same_as_reference(cm)
    _same_as_reference(_with_band(cm, 5))  # two bands of 5 rows and a last one of 2


@pytest.mark.parametrize("config", [(8, 48, 8, 1, 1, 3, 1, 1, True), (3, 16, 8, 3, 2, 3, 1, 1, False),
                                    (8, 24, 12, 1, 1, 5, 2, 2, False)])
def test_fp32_fused_block_equals_unfused_c(config: tuple) -> None:
    """fp32: the same kernels on the same rows, so the same bits as the unfused generated C."""
    torch.manual_seed(5)
    model = _Block(*config)
    shape = (1, config[0], 13, 11)
    lowered = _lower(model, shape, 5, quantize="none")
    whole = lowered.compile()
    fused = lowered.compile(fuse_blocks="all")
    assert len(_fused(fused)) == 1 and not _fused(whole)
    assert fused.memory.arena_size < whole.memory.arena_size
    for x in fused.spec.test_inputs:
        want = whole.run_raw_c(*x)
        for got in (fused.run_raw_c(*x), fused.run_raw(*x)):  # the generated C, the program file
            for w, g in zip(want, got):
                assert w.dtype == np.float32
                np.testing.assert_array_equal(g, w)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.xdist_group("fused_blocks_device")  # one worker lowers the model once
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386", "mps3-an547", "mps2-an385", "mps2-an385-m0plus"])
def test_fused_blocks_on_the_device_equal_the_reference(board: str) -> None:
    """Four blocks (a residual one, a strided one, a ResNet basic block, a ResNet downsampling block) fused,
    in bands of 3 rows: the generated C firmware and the program file on the interpreter firmware in QEMU."""
    if "four blocks" not in _LOWERED:
        torch.manual_seed(6)
        model = nn.Sequential(_Block(8, 48, 8, 1, 1, 3, 1, 1, True), _Block(8, 48, 16, 1, 1, 3, 2, 1, False),
                              _Basic(16, 3), _Down(16, 8, 3))
        _LOWERED["four blocks"] = _lower(model, (1, 8, 14, 12), 6)
    cm = _LOWERED["four blocks"].compile(board, fuse_blocks="all")
    cm = _with_band(cm, 3)
    assert len(_fused(cm)) == 4
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)
    # the program file (four loops) on the board's interpreter firmware, against the reference
    image = cm.program_image(bundle_tests=True)
    assert [k for _, k in image.instructions["forward"]].count("loop") == 4
    prog = run_program(cm.board, build_interpreter_firmware(cm.board).elf, image.program)
    assert prog.passed and prog.exit_code == 0, prog.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        for i, (t, want) in enumerate(zip(cm.graph.outputs, cm.reference_raw(*x))):
            got = prog.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel)
            np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.asarray(want).reshape(-1))


def test_plan_holds_the_ring_and_drops_the_expanded_tensor() -> None:
    torch.manual_seed(2)
    model = _Block(8, 48, 8, 1, 1, 3, 2, 1, False)
    lowered = _lower(model, (1, 8, 16, 16), 2)
    whole = lowered.compile()
    fused = lowered.compile(fuse_blocks=True)
    (op,) = _fused(fused)
    block: Block = op.attrs["block"]
    names = [b.name for b in fused.memory.plan.buffers]
    assert f"{op.name}_ring" in names
    ring = next(b for b in fused.memory.plan.buffers if b.name == f"{op.name}_ring")
    assert ring.size >= block.k * block.e_row  # K expanded rows
    expanded = op.attrs["stages"][0].output
    assert expanded.name not in names and expanded.name in [b.name for b in whole.memory.plan.buffers]
    assert fused.memory.arena_size < whole.memory.arena_size
    svg = plan_svg(fused.memory.plan, "fused")
    assert svg.count('<g class="ring">') == 1 and "ring of expanded rows" in svg
    assert '<g class="ring">' not in plan_svg(whole.memory.plan, "whole")
    assert not _fused(whole)  # the default schedule is today's


def _three_blocks() -> LoweredModel:
    if "three blocks" not in _LOWERED:
        torch.manual_seed(3)
        model = nn.Sequential(_Block(8, 48, 8, 1, 1, 3, 1, 1, True), _Block(8, 48, 16, 1, 1, 3, 2, 1, False),
                              _Block(16, 32, 16, 1, 1, 3, 1, 1, True))
        _LOWERED["three blocks"] = _lower(model, (1, 8, 16, 16), 3)
    return _LOWERED["three blocks"]


@pytest.mark.xdist_group("fused_three_blocks")  # one worker lowers the model once
def test_ram_budget_fuses_as_few_blocks_as_fit() -> None:
    lowered = _three_blocks()
    whole = lowered.compile()
    smallest = lowered.compile(fuse_blocks=True)
    assert smallest.memory.arena_size < whole.memory.arena_size
    arenas, counts = [], []
    for budget in sorted({smallest.memory.arena_size, (smallest.memory.arena_size + whole.memory.arena_size) // 2,
                          whole.memory.arena_size, whole.memory.arena_size + 4096}):
        cm = lowered.compile(ram_budget=budget)
        assert cm.memory.arena_size <= budget
        arenas.append(cm.memory.arena_size)
        counts.append(len(_fused(cm)))
    assert counts == sorted(counts, reverse=True)  # a larger budget never fuses more
    assert counts[-1] == 0 and arenas[-1] == whole.memory.arena_size
    with pytest.raises(McuError, match=f"smallest arena is {smallest.memory.arena_size} B"):
        lowered.compile(ram_budget=smallest.memory.arena_size - 4)


def _small_fused_block() -> CompiledModel:
    if "small" not in _LOWERED:
        torch.manual_seed(4)
        _LOWERED["small"] = _lower(_Block(4, 24, 4, 1, 1, 3, 1, 1, True), (1, 4, 8, 8), 4)
    return _LOWERED["small"].compile(fuse_blocks="all")


def test_program_file_runs_fused_blocks_as_loops() -> None:
    """A fused block is one LOOP in a program file: a few instructions whatever its height, each run at
    its passes with its operands moved by their strides; bands of 1, 3 and 4 rows (one shorter last band)
    equal the reference through the interpreter."""
    cm = _small_fused_block()
    (op,) = _fused(cm)
    steps = cm.program_image().instructions["forward"]
    # the loop; the ring's move; its top padding row, first row, later rows and bottom padding row; the
    # depthwise, the projection, the residual
    kinds = [k for _, k in steps]
    assert len(kinds) == 9 and kinds[:3] == ["loop", "move", "fill"] and kinds[5] == "fill", steps
    assert kinds[6:] == ["mcu_depthwise_conv2d_s8", kinds[3], "mcu_add_s8"] and kinds[3] == kinds[4], steps
    assert {name for name, _ in steps} == {op.name}
    taller = _lower(_Block(4, 24, 4, 1, 1, 3, 1, 1, True), (1, 4, 24, 8), 4).compile(fuse_blocks="all")
    assert len(taller.program_image().instructions["forward"]) == len(steps)  # not one call per row
    for band in (1, 3, 4):  # the generated C of these is tested above
        _same_as_reference(_with_band(cm, band) if band > 1 else cm, c=False)


def _moves_past_the_arena(steps: list[Step], passes: int) -> None:
    step = next(s for s in steps if any(s.strides))
    step.strides = [d * 1000 for d in step.strides]


def _runs_past_the_loop(steps: list[Step], passes: int) -> None:
    next(s for s in steps if (s.first, s.end) != (0, passes)).end = passes + 1


def _moves_a_constant(steps: list[Step], passes: int) -> None:
    step = next(s for s in steps if any(isinstance(o, Tensor) and o.is_constant for o in s.call.operands))
    k = next(i for i, o in enumerate(step.call.operands) if isinstance(o, Tensor) and o.is_constant)
    step.strides = [4 if i == k else d for i, d in enumerate(step.strides)]


def _runs_at_no_pass(steps: list[Step], passes: int) -> None:
    step = next(s for s in steps if (s.first, s.end) != (0, passes))
    step.end = step.first


def _strides_for_another_call(steps: list[Step], passes: int) -> None:
    step = next(s for s in steps if any(s.strides))
    step.strides = [*step.strides, 0]


def _pads_a_row_past_int32(steps: list[Step], passes: int) -> None:
    """A depthwise row call whose left padding passes the window's own bounds but not the kernels' element
    offsets, (column - pad) * channels (found by the fuzzer on a fused seed)."""
    step = next(s for s in steps if s.call.function == "mcu_depthwise_conv2d_s8")
    params = list(step.call.params)
    params[14] = 1_895_825_409  # pad_left (mcu_depthwise_conv2d_s8_params)
    step.call = dataclasses.replace(step.call, params=tuple(params))


@pytest.mark.parametrize("break_loop", [_moves_past_the_arena, _runs_past_the_loop, _moves_a_constant,
                                        _runs_at_no_pass, _strides_for_another_call, _pads_a_row_past_int32])
def test_interpreter_refuses_malformed_loops(monkeypatch: pytest.MonkeyPatch, break_loop) -> None:
    """The loader checks every pass of a loop's body: each is refused at load with a status, never run."""
    cm = _small_fused_block()
    Program.load(cm.program_image().program)  # the program as written loads
    real = writer.band_loop

    def broken(passes: list) -> list[Step]:
        steps = real(passes)
        break_loop(steps, len(passes))
        return steps

    monkeypatch.setattr(writer, "band_loop", broken)
    with pytest.raises(ProgramError, match="invalid program"):
        Program.load(cm.program_image().program)


def _clobbers(b: Block, delta: int) -> bool:
    """Whether the block's output placed ``delta`` bytes after its input overwrites an input byte before
    the loop reads it, by replaying the loop's reads and writes in order (independent of
    Block.max_overlap_delta's closed form)."""
    written: list[tuple[int, int]] = []  # input-relative byte ranges written so far

    def read(lo: int, hi: int) -> bool:
        return any(a < hi and lo < z for a, z in written)

    for oy, rows in b.bands():
        first = oy * b.s - b.pad
        for ey in range(b.first_fresh(oy), first + b.window(rows)):
            if 0 <= ey < b.e_h:
                start, count, _ = b.producer_rows(ey)
                if read(start * b.in_row, (start + count) * b.in_row):
                    return True
        written.append((delta + oy * b.out_row, delta + (oy + rows) * b.out_row))  # the projection
        if b.residual and read(oy * b.in_row, (oy + rows) * b.in_row):  # the add reads its input rows
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(k=st.sampled_from([3, 5]), s=st.sampled_from([1, 2]), p=st.sampled_from([(1, 1), (3, 1), (3, 2)]),
       h=st.integers(6, 30), cin=st.integers(1, 16), cout=st.integers(1, 16), band=st.integers(1, 6),
       residual=st.booleans())
def test_overlap_bound_is_the_largest_safe_delta(k: int, s: int, p: tuple[int, int], h: int, cin: int, cout: int,
                                                 band: int, residual: bool) -> None:
    pk, ps = p
    pad = k // 2
    residual = residual and s == 1 and ps == 1
    cout = cin if residual else cout
    e_h = (h + 2 * (pk // 2) - pk) // ps + 1
    out_h = (e_h + 2 * pad - k) // s + 1
    b = Block(in_h=h, in_w=5, in_c=cin, e_h=e_h, e_w=5, e_c=cin * 4, out_h=out_h, out_w=5, out_c=cout,
              p_kernel=pk, p_stride=ps, p_pad=pk // 2, k=k, s=s, pad=pad, residual=residual, zero_point=0,
              band=min(band, out_h))
    d = b.max_overlap_delta()
    if d is None:  # nothing of the input is read after the first output bytes are written
        assert not any(_clobbers(b, delta) for delta in range(-b.out_h * b.out_row, b.in_h * b.in_row))
        return
    assert not _clobbers(b, d)
    assert _clobbers(b, d + 1)


def test_a_model_too_large_for_the_board_fuses_blocks_to_fit() -> None:
    """Without --fuse-blocks or a budget the default schedule stays, unless it does not fit the board: then
    the board's RAM is the budget; when even fused blocks cannot fit, the error names their smallest arena."""
    torch.manual_seed(7)
    model = _Block(8, 96, 8, 1, 1, 3, 1, 1, True)
    lowered = _lower(model, (1, 8, 64, 64), 7)
    fits = lowered.compile("pico")
    ram = fits.board.arena_regions()[0][1]
    assert _fused(fits) and fits.memory.arena_size <= ram
    assert not _fused(lowered.compile("mps2-an505"))  # fits whole there: today's schedule
    with pytest.raises(McuError, match=r"does not fit pico .*the smallest arena is \d+ B"):
        _compile(model, (1, 8, 192, 192), 7, "pico")


@pytest.mark.slow
def test_command_line_ram_budget_below_every_schedule_is_one_line() -> None:
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "int8", "--ram-budget", "20000",
                          str(EXAMPLES / "mobilenet_v2.py"))
    assert_one_line_error(proc, "no schedule fits a RAM budget of 20000 B", "the smallest arena is 30728 B",
                          "--ram-budget")


def _made_up_costs(graph, chains) -> FusionCosts:
    """1,000 instructions an op; the stride-2 block fused at 2 rows a pass is 300 cheaper than whole, the
    other fused schedules dearer."""
    ops = {op.name: 1000 for op in graph.ops}
    fused = {(c[0].name, band): 1000 * len(c) + (-300 if i == 1 and band == 2 else 50 * i + 200 // band)
             for i, c in enumerate(chains) for band in (1, 2, 4)}
    return FusionCosts(ops, fused)


@pytest.mark.xdist_group("fused_three_blocks")
def test_fastest_schedule_within_a_budget_takes_a_faster_fused_block() -> None:
    """With measured costs the budget takes the cheapest schedule that fits, fused blocks included when
    they are faster than whole tensors, and a larger budget never a dearer one."""
    lowered = _three_blocks()
    whole = lowered.compile()
    chains = find_chains(whole.graph)
    costs = _made_up_costs(whole.graph, chains)
    smallest = lowered.compile(fuse_blocks=True).memory.arena_size
    estimates = []
    for budget in (smallest, (smallest + whole.memory.arena_size) // 2, whole.memory.arena_size,
                   whole.memory.arena_size * 2):
        choice = choose_fastest(whole.graph, budget, costs)
        assert choice.arena <= budget
        estimates.append(sum(costs.delta(c, choice.bands[id(c[0])]) or 0 for c in choice.chains))
    assert estimates == sorted(estimates, reverse=True)
    assert estimates[-1] == -300  # with room for everything: only the faster fused block
    big = choose_fastest(whole.graph, whole.memory.arena_size * 2, costs)
    assert [c[0].name for c in big.chains] == [chains[1][0].name] and big.bands[id(chains[1][0])] == 2
    cm = lowered.compile(ram_budget=whole.memory.arena_size * 2, fuse_costs=costs)
    assert [op.attrs["stages"][0].name for op in _fused(cm)] == [chains[1][0].name]
    _same_as_reference(cm)
    with pytest.raises(McuError, match=f"smallest arena is {smallest} B"):
        choose_fastest(whole.graph, smallest - 4, costs)


@pytest.mark.xdist_group("fused_three_blocks")
def test_measured_schedules_rank_the_frontier_where_sums_mispredict() -> None:
    """Given the measured runs of the schedules to run (the frontier of the sums and those close behind), the
    budget ranks by those, not by the sums of their ops: here the runs say the largest is slower. Every
    budget from the smallest arena up picks a schedule that fits and runs no more than the one a smaller
    budget picked; below the smallest arena the error names it and what it runs."""
    lowered = _three_blocks()
    whole = lowered.compile()
    chains = find_chains(whole.graph)
    sums = _made_up_costs(whole.graph, chains)
    cands = candidates(whole.graph, sums)
    front, runs = frontier(cands), to_run(cands, sums)
    assert len(front) >= 3 and {c.schedule for c in front} <= {c.schedule for c in runs}
    assert [c.predicted for c in front] == sorted((c.predicted for c in front), reverse=True)
    # the runs: a larger arena runs less, except the largest, which runs 500 more than the one before it
    measured = {c.schedule: 90_000 - 100 * i for i, c in enumerate(runs)}
    measured[runs[-1].schedule] = measured[runs[-2].schedule] + 500
    costs = dataclasses.replace(sums, schedules=measured)
    budgets = sorted({c.arena for c in runs} | {runs[0].arena + 4, whole.memory.arena_size * 2})
    picked = []
    for budget in budgets:
        choice = choose_fastest(whole.graph, budget, costs)
        assert choice.arena <= budget
        picked.append(measured[tuple((c[0].name, choice.bands[id(c[0])]) for c in choice.chains)])
    assert picked == sorted(picked, reverse=True)
    assert picked[-1] == measured[runs[-2].schedule]  # the measured faster, not the largest
    assert choose_fastest(whole.graph, budgets[-1], sums).arena == front[-1].arena  # the sums' choice
    smallest = runs[0]
    with pytest.raises(McuError, match=f"smallest arena is {smallest.arena} B, with {len(smallest.schedule)} of "
                                       f"{len(chains)} blocks run row by row, {measured[smallest.schedule]:,} "
                                       "instructions \\(measured"):
        choose_fastest(whole.graph, smallest.arena - 1, costs)


@pytest.mark.xdist_group("fused_three_blocks")
def test_budget_weighs_a_streamed_prefix_then_fused_blocks() -> None:
    """The schedules a RAM budget weighs include a streamed prefix followed by fused blocks in the rest; with
    made-up runs (prefixes cheaper than whole tensors) the fastest that fits takes one, a larger budget never
    a dearer schedule, and the one built equals the reference in the generated C and the program file."""
    lowered = _three_blocks()
    whole = lowered.compile()
    costs = _made_up_costs(whole.graph, find_chains(whole.graph))
    prefixes = prefix_candidates(whole.graph, lambda g: plan_memory(g).arena_size)
    runs = {p.schedule.key(): 9000 + 10 * p.calls for p in prefixes}
    cands = combined_candidates(whole.graph, costs, prefixes, runs)
    assert cands == sorted(cands, key=lambda c: c.arena) and cands[0].arena < whole.memory.arena_size
    picked = [min((c for c in cands if c.arena <= budget), key=lambda c: c.predicted)
              for budget in sorted({c.arena for c in cands} | {whole.memory.arena_size * 2})]
    assert [c.predicted for c in picked] == sorted((c.predicted for c in picked), reverse=True)
    both = picked[-1]
    assert both.prefix is not None and both.fused and "then 1 of 3 blocks" in both.describe(3)
    cm = build_schedule(lambda **kw: lowered.compile(**kw), whole, costs, both)
    assert [op.kind for op in cm.graph.ops][:3] == [PREFIX_KIND, "add", KIND]
    assert cm.memory.arena_size == both.arena
    assert [k for _, k in cm.program_image().instructions["forward"]].count("rows") == 1
    _same_as_reference(cm)


class _Basic(nn.Module):
    """A ResNet basic block: conv kxk -> conv kxk -> add of the input (then ReLU)."""

    def __init__(self, c: int, k: int) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(c, c, k, 1, k // 2, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(c, c, k, 1, k // 2, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.b(self.a(x)))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=st.sampled_from([3, 4, 8, 16]), k=st.sampled_from([3, 5]), h=st.integers(5, 12), w=st.integers(5, 10),
       band=st.sampled_from([1, 2, 3]), seed=st.integers(0, 2**16))
def test_fused_basic_block_equals_unfused_reference(c: int, k: int, h: int, w: int, band: int, seed: int) -> None:
    """int8 conv -> conv -> residual add run row by row (no projection: the second convolution writes the
    block's rows) equals the reference of the unfused graph bit for bit, and its ring replaces the
    first convolution's output in the plan."""
    torch.manual_seed(seed)
    whole = _compile(_Basic(c, k), (1, c, h, w), seed)
    cm = _with_band(_compile(_Basic(c, k), (1, c, h, w), seed, fuse_blocks="all"), band)
    (op,) = _fused(cm)
    assert not op.attrs["block"].project and op.attrs["block"].residual and len(op.attrs["stages"]) == 3
    assert op.attrs["stages"][0].output.name not in [b.name for b in cm.memory.plan.buffers]
    _same_as_reference(cm)
    assert not _fused(whole)


class _Down(nn.Module):
    """A ResNet downsampling block: conv kxk stride 2 -> conv kxk -> add of a 1x1 stride-2 convolution of
    the input."""

    def __init__(self, cin: int, cout: int, k: int) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(cin, cout, k, 2, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(cout, cout, k, 1, k // 2, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Conv2d(cin, cout, 1, 2, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.short(x) + self.b(self.a(x)))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cin=st.sampled_from([3, 4, 8]), cout=st.sampled_from([4, 8, 16]), k=st.sampled_from([3, 5]),
       h=st.integers(6, 13), w=st.integers(6, 11), band=st.sampled_from([1, 2, 3]), seed=st.integers(0, 2**16))
def test_fused_downsampling_block_equals_unfused_reference(cin: int, cout: int, k: int, h: int, w: int, band: int,
                                                           seed: int) -> None:
    """int8 conv s2 -> conv -> add of a 1x1 s2 shortcut run row by row (the shortcut a band at a time into
    scratch) equals the reference of the unfused graph bit for bit."""
    torch.manual_seed(seed)
    cm = _with_band(_compile(_Down(cin, cout, k), (1, cin, h, w), seed, fuse_blocks="all"), band)
    (op,) = _fused(cm)
    assert op.attrs["block"].shortcut_stride == 2 and len(op.attrs["stages"]) == 4
    _same_as_reference(cm)


def _four_blocks() -> LoweredModel:
    """The four blocks of test_fused_blocks_on_the_device_equal_the_reference, lowered once per worker."""
    if "four blocks" not in _LOWERED:
        torch.manual_seed(6)
        model = nn.Sequential(_Block(8, 48, 8, 1, 1, 3, 1, 1, True), _Block(8, 48, 16, 1, 1, 3, 2, 1, False),
                              _Basic(16, 3), _Down(16, 8, 3))
        _LOWERED["four blocks"] = _lower(model, (1, 8, 14, 12), 6)
    return _LOWERED["four blocks"]


@requires_qemu
@pytest.mark.qemu
@pytest.mark.xdist_group("fused_blocks_device")  # one worker lowers the model once
def test_profile_says_what_each_fused_block_runs_beyond_its_ops_whole() -> None:
    """`mcu profile` of fused blocks on the M33: a line per block with its loop's counts, and its instructions
    beyond its ops as the whole-tensor build (traced too) runs them."""
    lowered = _four_blocks()
    cm = lowered.compile("mps2-an505", fuse_blocks="all")
    profile, _ = profile_model(cm, whole_for=lambda: lowered.compile("mps2-an505"))
    fused = [r for r in profile.rows if r.op.fused is not None]
    assert len(fused) == 4 and profile.whole_costs is not None
    for r in fused:
        whole = sum(profile.whole_costs[name] for name in r.op.fused["stages"])
        assert profile.fusion_overhead(r.op, r.cost) == r.cost - whole
        assert r.op.fused["rows_recomputed"] == 0
    lines = profile.table().splitlines()
    assert sum(" over its ops run whole (" in line for line in lines) == 4
