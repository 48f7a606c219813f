"""The event tracer and `mcu profile` and its op table.

The tracer is compiled in only with MCU_TRACE: the normal firmware must be byte-for-byte the size of one
built from the same sources with the hooks deleted, and run the same number of instructions. The
profiling firmware must print the same outputs, and its per-op instruction counts must add up to the
normal firmware's whole inference within 2 %.
"""

from __future__ import annotations

import json
import re

import pytest

from mcu.devtools.ops import op_table
from mcu.devtools.profile import make_profile, out_lines, profile_model
from mcu.devtools.trace import TraceEvent, parse_trace_lines, trace_events
from mcu.errors import McuError
from repo import requires_qemu
from mcu.paths import kernel_source

BOARD = "mps2-an505"


def test_trace_lines_pair_with_plugin_counts_in_order() -> None:
    console = "OUT 0 0 00000001\nTRACE 0 7\nTRACE 2 9\nTRACE 0 7\nTRACE 2 9\nRESULT PASS 0/2\n"
    assert parse_trace_lines(console) == [(0, 7), (2, 9), (0, 7), (2, 9)]
    events = trace_events(console, [100, 200, 101, 201], ops_per_inference=2)
    assert events == [TraceEvent(0, 100, 7), TraceEvent(2, 200, 9)]
    assert trace_events(console, [], 2)[1].cost == 9  # hardware: cycles are the cost
    with pytest.raises(McuError, match="measured 3 op regions"):
        trace_events(console, [1, 2, 3], 2)
    with pytest.raises(McuError, match="reported 4 op events, expected 5"):
        trace_events(console, [], 5)


def test_profile_refuses_a_trace_of_another_compile(compiled) -> None:
    cm = compiled("small_cnn", BOARD, "int8")
    ops = op_table(cm.graph, cm.memory, cm.library)
    events = [TraceEvent(op.handle, 10, 0) for op in ops[:-1]] + [TraceEvent(999, 10, 0)]
    with pytest.raises(McuError, match=r"ops without an event: \[\d+\], events for unknown handles: \[999\]"):
        make_profile("x", "instructions", ops, events, None)


def _strip_hooks(text: str) -> str:
    return "\n".join(line for line in text.splitlines()
                     if "MCU_TRACE_OP_BEGIN" not in line and "MCU_TRACE_OP_END" not in line
                     and "MCU_TRACE_OP_OUTPUT" not in line
                     and '#include "mcu/trace.h"' not in line) + "\n"


@requires_qemu
def test_normal_build_has_no_trace_code_or_cost(compiled, tmp_path) -> None:
    from mcu.paths import runtime_dir
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    cm = compiled("small_cnn", BOARD, "int8")
    model_c = f"{cm.library.prefix}_model.c"
    files = cm.firmware_sources()
    assert "MCU_TRACE_OP_BEGIN(0u);" in files[model_c]  # the hooks are in the generated code...
    fw = cm.build()
    src = tmp_path / "src"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(_strip_hooks(text) if name == model_c else text)
    rt = runtime_dir()
    sources = [src / n for n in files if n.endswith(".c")]
    sources += [kernel_source(s) for s in cm.library.kernel_sources]
    sources += [rt / s for s in cm.library.runtime_sources]
    bare = build_firmware(cm.board, sources, [src, rt / "include", *cm.library.include_dirs], tmp_path,
                          defines=dict(cm.library.defines), stack_usage=True)  # the model's kernel definitions
    # ...and cost nothing without MCU_TRACE: same section sizes, no tracer symbol, same instructions.
    assert fw.sections == bare.sections
    assert fw.flash_bytes == bare.flash_bytes and fw.ram_bytes == bare.ram_bytes
    from mcu.device.elf import read_elf

    assert read_elf(fw.elf).symbol("mcu_trace_op_begin") is None and "mcu_trace_op_begin" not in bare.symbols
    normal, stripped = run_qemu(cm.board, fw.elf), run_qemu(cm.board, bare.elf)
    assert normal.exit_code == stripped.exit_code == 0
    assert normal.instructions == stripped.instructions and normal.instructions
    assert normal.trace_instructions == []


@pytest.mark.slow
@requires_qemu
@pytest.mark.parametrize("name", ["ds_cnn", "digits_cnn"])
def test_per_op_costs_add_up_to_the_inference(compiled, name: str) -> None:
    cm = compiled(name, BOARD, "int8")
    profile, run = profile_model(cm)  # also checks that both firmwares print the same outputs
    assert run.passed and out_lines(run.console)
    handles = [op.handle for op in op_table(cm.graph, cm.memory, cm.library)]
    assert [e.handle for e in run.events] == handles  # every op once, in execution order
    assert all(e.instructions and e.instructions > 0 for e in run.events)
    assert profile.inference_cost is not None
    assert abs(profile.total_cost - profile.inference_cost) <= 0.02 * profile.inference_cost
    # ops are a part of their own (traced) build's inference; the normal build's may be a few fewer than they
    # (no input copy outside the ops when the input is read where the caller keeps it)
    assert run.inference_cost is not None and profile.total_cost <= run.inference_cost
    assert [r.cost for r in profile.rows] == sorted((r.cost for r in profile.rows), reverse=True)
    assert abs(sum(r.share for r in profile.rows) - 1.0) < 1e-9
    conv = [r for r in profile.rows if r.op.kind == "conv2d"]
    assert conv and all(r.op.macs > 0 and r.cost_per_mac for r in conv)
    assert all(r.op.source.startswith(f"{name}.py:") for r in profile.rows)
    assert all(r.op.live_bytes > 0 for r in profile.rows)


@requires_qemu
def test_profile_command_table_json_svg(tmp_path, capsys) -> None:
    from repo import EXAMPLES
    from mcu.commands.cli import main

    svg, events = tmp_path / "p.svg", tmp_path / "events.json"
    model = str(EXAMPLES / "small_cnn.py")
    assert main(["profile", "--board", BOARD, "-q", "int8", model, "--svg", str(svg), "--events", str(events)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^\s+total\s+\d+ ops", text, re.M)
    assert "whole inference (normal build)" in text and "small_cnn.py:" in text
    assert svg.read_text().startswith("<svg") and "<rect" in svg.read_text()
    saved = json.loads(events.read_text())
    assert saved["unit"] == "instructions" and saved["events"]
    assert main(["profile", "--board", BOARD, "-q", "int8", model, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total_cost"] == sum(op["cost"] for op in report["ops"])
    assert {"handle", "kernel", "macs", "cost", "share", "cost_per_mac", "source", "live_bytes"} <= set(report["ops"][0])
    # the timing model's estimate per op beside the exact count, and its total in ms at the board's clock
    assert "est. cycles" in text and "an estimate, docs/cycles.md" in text
    assert report["cycles_are_estimates"] is True
    assert report["cycles"] == sum(op["cycles"] for op in report["ops"])
    assert all(op["cycles"] >= op["cost"] for op in report["ops"])  # no op retires more than one per cycle here
    assert abs(report["ms"] - report["cycles"] / 25e3) < 1e-6
    assert all(e["estimated_cycles"] for e in saved["events"]) and saved["clock_hz"] == 25_000_000


def test_profile_needs_a_simulated_board_or_a_pico(compiled) -> None:
    # A Pico 2 is profiled over USB (tests/devtools/test_devtools_profile_device.py); a Linux board has no tracer run.
    cm = compiled("small_cnn", "host", "int8")
    with pytest.raises(McuError, match="no simulator to profile on"):
        profile_model(cm)


def test_bytes_live_per_op_in_the_table_and_the_memory_svg(compiled) -> None:
    from mcu.devtools.ops import live_bytes_per_step

    cm = compiled("small_cnn", BOARD, "int8")
    live = live_bytes_per_step(cm.memory, len(cm.graph.ops))
    plan = cm.memory.arenas[0].plan
    assert live[0] == sum(b.size for b in plan.buffers if b.first_use == 0)  # input and first output
    assert max(live) <= cm.memory.arena_size  # bytes shared under an overlap contract count once
    assert [op.live_bytes for op in op_table(cm.graph, cm.memory, cm.library)] == \
        [live[s.index] for s in cm.library.view.steps]
    svg = cm.memory_svg()
    listed = re.search(r'class="live-bytes".*?<title>bytes live per step: ([\d, ]+)</title>', svg).group(1)
    assert [int(v) for v in listed.split(", ")] == live


def test_ops_inside_a_sequential_name_their_layer(compiled) -> None:
    # Every layer of small_cnn's nn.Sequential is called from one line of forward(); the module path
    # is what tells them apart in the profile and debug tables.
    cm = compiled("small_cnn", BOARD, "int8")
    sources = {op.name: op.source for op in cm.graph.ops}
    assert sources["convolution"].endswith("(features.0: nn.Conv2d)")
    assert sources["convolution_1"].endswith("(features.3: nn.Conv2d)")
    assert sources["addmm"].endswith("(classifier: nn.Linear)")
    assert sources["convolution"].startswith("small_cnn.py:19: `return self.classifier(")


@pytest.mark.slow
@requires_qemu
@pytest.mark.parametrize("name", ["ds_cnn", "digits_cnn"])
def test_program_file_profile_on_the_interpreter(compiled, name: str) -> None:
    # The interpreter brackets each instruction with the same hooks; the normal interpreter firmware
    # links no tracer, and the traced one prints the same outputs (checked inside profile_program).
    from mcu.devtools.program_trace import profile_program
    from mcu.device.elf import read_elf
    from mcu.program.device import build_interpreter_firmware

    cm = compiled(name, BOARD, "int8")
    normal = read_elf(build_interpreter_firmware(cm.board).elf)
    assert normal.symbol("mcu_trace_op_begin") is None and normal.symbol("mcu_trace_op_end") is None
    profile, run = profile_program(cm)
    names = [n for n, _ in cm.program_image(bundle_tests=True).instructions["forward"]]
    assert sorted(r.op.name for r in profile.rows) == sorted(names)
    assert run.passed and all(e.instructions and e.instructions > 0 for e in run.events)
    # What is outside the ops is the interpreter's own work per instruction (operand lookup), not a kernel.
    assert 0.9 * profile.inference_cost <= profile.total_cost <= profile.inference_cost
    kernels = {r.op.name: r.op.kernel for r in profile.rows}
    assert all(k.startswith("mcu_") for k in kernels.values())


def _fused_op_info(handle: int, fused: dict) -> "OpInfo":
    from mcu.devtools.ops import OpInfo

    return OpInfo(handle=handle, name=f"fused_op{handle}", kind="fused_block", kernel="fused_block", backend="fused",
                  input_shapes=[[1, 8, 8, 4]], output_shapes=[[1, 8, 8, 4]], dtype="int8", macs=0, source="",
                  live_bytes=512, fused=fused)


@pytest.mark.parametrize("geometry, expected", [
    # 3x3 stride 1, padding 1, 8 expanded rows, 2 output rows a pass: 4 passes, 2 rows kept between them
    (dict(e_h=8, out_h=8, k=3, s=1, pad=1, band=2, residual=True),
     dict(passes=4, rows_computed=8, rows_recomputed=0, ring_moves=3, ring_move_bytes=2 * 48, padding_rows=2,
          calls=8 + 4 * 3)),
    # 3x3 stride 2, padding 1, 8 rows -> 4, one row a pass: 1 row kept, the top padding row filled
    (dict(e_h=8, out_h=4, k=3, s=2, pad=1, band=1, residual=False),
     dict(passes=4, rows_computed=8, rows_recomputed=0, ring_moves=3, ring_move_bytes=48, padding_rows=1,
          calls=8 + 4 * 2)),
    # a 1-row window with stride 2, 2 output rows a pass: each pass computes the 3 rows of its window
    (dict(e_h=8, out_h=4, k=1, s=2, pad=0, band=2, residual=False),
     dict(passes=2, rows_computed=6, rows_recomputed=0, ring_moves=0, ring_move_bytes=0, padding_rows=0,
          calls=6 + 2 * 2)),
])
def test_a_fused_blocks_loop_is_counted_by_replaying_it(geometry: dict, expected: dict) -> None:
    from mcu.devtools.ops import fused_loop
    from mcu.plan.fused import Block

    g = {**geometry}
    block = Block(in_h=g["e_h"], in_w=4, in_c=4, e_h=g.pop("e_h"), e_w=4, e_c=12, out_w=4, out_c=4, p_kernel=1,
                  p_stride=1, p_pad=0, zero_point=0, **g)
    loop = fused_loop(block, [])
    assert {k: loop[k] for k in expected} == expected


def test_profile_prints_what_a_fused_block_runs_beyond_its_ops_whole() -> None:
    """Per fused block: passes, rows computed and recomputed, ring moves, padding rows, calls, and its
    instructions beyond its ops run whole when those were traced."""
    fused = dict(band=2, passes=4, expanded_rows=8, rows_computed=8, rows_recomputed=0, ring_moves=3,
                 ring_move_bytes=96, padding_rows=2, padding_row_bytes=48, calls=20, stages=["e", "d", "p"])
    ops = [_fused_op_info(0, fused)]
    profile = make_profile("m int8 on b", "instructions", ops, [TraceEvent(0, 10_500, 0)], 10_600)
    line = profile.table().splitlines()[-1]
    assert "fused_op0: 4 passes of 2 rows; expanded rows computed 8 of 8, 0 recomputed; ring moves 3 x 96 B" in line
    assert "padding rows 2 x 48 B; 20 kernel calls (3 whole)" in line and "over its ops" not in line
    profile.whole_costs = {"e": 5000, "d": 3000, "p": 2000}
    assert profile.table().splitlines()[-1].endswith("; +500 instructions over its ops run whole (+5.0 %)")
    assert profile.to_json()["ops"][0]["fusion_overhead"] == 500
    assert profile.to_json()["ops"][0]["fused"]["ring_moves"] == 3
