"""`mcu profile` on a board flashed over USB (Pico 2): the profiling UF2 goes to the BOOTSEL drive and
the per-op cycles come back as TRACE lines on the serial console.

No Pico 2 is attached here, so the board is played by a pseudo-terminal and a folder (tests/device/test_flash.py):
its console is what the same traced firmware printed on the simulated M33 (real OUT lines, so the
harness's verdict and the outputs are the model's own), with each TRACE line's cycles replaced by that
op's exact instruction count, as DWT would report them on the chip.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fake_pico import FakePico, Pty, make_drive
from compiled import lowered_model
from mcu.api import CompiledModel
from mcu.devtools.ops import OpInfo
from mcu.devtools.profile import events_json, profile_model
from mcu.devtools.trace import run_traced
from mcu.device.uf2 import decode

pytestmark = pytest.mark.filterwarnings("ignore")


def _digits(board: Any) -> CompiledModel:
    """digits_cnn at int8 for ``board``, captured and quantized once per test process."""
    return lowered_model("digits_cnn", "int8").compile(board)


def _device_console(name: str) -> tuple[list[str], list[int]]:
    """The traced firmware's console on mps2-an505 with DWT-style cycles in its TRACE lines."""
    sim = run_traced(lowered_model(name, "int8").compile("mps2-an505"))
    costs = [e.instructions for e in sim.events]
    lines, k = [], 0
    for line in sim.console.splitlines():
        if m := re.match(r"^TRACE (\d+) \d+$", line.strip()):
            cycles = costs[k] if k < len(costs) else 1  # later inferences: any count, not read
            lines.append(f"TRACE {m.group(1)} {cycles}")
            k += 1
        elif line.startswith("CYCLES"):  # QEMU's DWT reads 0; the chip's would be the traced inference's
            lines.append(f"CYCLES {sim.inference_cost}")
        else:
            lines.append(line.strip())
    return lines, costs


def test_profile_on_a_pico2_reads_cycles_per_op_over_serial(tmp_path: Path, pty: Pty) -> None:  # noqa: F811
    lines, costs = _device_console("digits_cnn")
    cm = _digits("pico2")
    drive = make_drive(tmp_path / "media")
    board = FakePico(drive, pty, lines)
    board.start()
    profile, run = profile_model(cm, timeout_s=60, port=pty.port, drive=drive)
    board.join(5)
    assert board.received is not None
    uf2 = decode((tmp_path / "media" / "received.uf2").read_bytes())
    assert {b.family for b in uf2.blocks} == {cm.board.uf2_family}
    assert run.unit == "cycles" and run.passed
    assert [e.cycles for e in run.events] == costs
    assert profile.total_cost == sum(costs) and profile.inference_cost >= sum(costs)
    table = profile.table()
    assert "cycles measured on the chip" in table and "traced build, hooks included" in table
    assert len(profile.rows) == len(cm.library.view.steps)


def test_profile_on_a_pico2_says_when_no_board_is_there(tmp_path: Path, pty: Pty) -> None:  # noqa: F811
    from mcu.errors import McuError

    cm = _digits("pico2")
    with pytest.raises(McuError) as err:
        profile_model(cm, timeout_s=0.5, port=pty.port, search_dirs=[tmp_path / "nothing-mounted"])
    assert "BOOTSEL" in err.value.message + (err.value.hint or "")


def _op(handle: int, kernel: str, macs: int) -> OpInfo:
    return OpInfo(handle=handle, name=f"op{handle}", kind="conv2d", kernel=kernel, backend="optimized",
                  input_shapes=[[1, 8, 8, 4]], output_shapes=[[1, 8, 8, 4]], dtype="int8", macs=macs, source="",
                  live_bytes=512)


# DWT cycles per op as a Pico 2 would print them (TRACE <handle> <cycles>, in execution order), and the
# timing model's estimate of the same ops from a run on the simulated twin.
RECORDED_DWT = "TRACE 0 120000\nTRACE 1 45000\nTRACE 2 9000\n"
TWIN_ESTIMATES = [132000, 40500, 9000]


def test_measured_cycles_are_printed_beside_the_prediction() -> None:
    from mcu.devtools.profile import join_prediction, make_profile
    from mcu.devtools.trace import TraceEvent, trace_events

    ops = [_op(0, "mcu_conv2d_packed_s8", 65536), _op(1, "mcu_depthwise_conv2d_s8", 4096), _op(2, "mcu_add_s8", 0)]
    measured = trace_events(RECORDED_DWT, [], len(ops))
    twin = [TraceEvent(handle=h, instructions=n // 2, cycles=0, estimated_cycles=n)
            for h, n in zip((0, 1, 2), TWIN_ESTIMATES)]
    events = join_prediction(measured, ops, list(reversed(twin)), ops)  # joined by handle, not by order
    assert [(e.handle, e.cycles, e.estimated_cycles) for e in events] == [
        (0, 120000, 132000), (1, 45000, 40500), (2, 9000, 9000)]
    profile = make_profile("m int8 on pico2 (cycles measured on the chip)", "cycles", ops, events, 180000,
                           "traced build, hooks included", clock_hz=150_000_000,
                           predicted_on="mps2-an505 with pico2's memory timing")
    table = profile.table()
    head = table.splitlines()[1]
    assert head.index("cycles") < head.index("est. cycles") < head.index("est/meas")
    row0 = next(line for line in table.splitlines() if line.strip().startswith("0 "))
    assert "120,000" in row0 and "132,000" in row0 and " 1.10 " in row0
    row1 = next(line for line in table.splitlines() if line.strip().startswith("1 "))
    assert "45,000" in row1 and "40,500" in row1 and " 0.90 " in row1
    total = next(line for line in table.splitlines() if line.strip().startswith("total"))
    assert "174,000" in total and "181,500" in total and " 1.04 " in total
    assert "QEMU on mps2-an505 with pico2's memory timing" in table and "1.210 ms at 150 MHz" in table
    d = profile.to_json()
    assert d["predicted_on"] == "mps2-an505 with pico2's memory timing"
    assert d["predicted_over_measured"] == pytest.approx(181500 / 174000)
    assert [(o["cost"], o["cycles"], o["predicted_over_measured"]) for o in d["ops"]] == [
        (120000, 132000, pytest.approx(1.1)), (45000, 40500, pytest.approx(0.9)), (9000, 9000, pytest.approx(1.0))]


def test_a_prediction_from_other_kernels_is_refused() -> None:
    from mcu.devtools.profile import join_prediction
    from mcu.devtools.trace import TraceEvent, trace_events
    from mcu.errors import McuError

    ops = [_op(0, "mcu_conv2d_packed_s8", 65536), _op(1, "mcu_depthwise_conv2d_s8", 4096), _op(2, "mcu_add_s8", 0)]
    twin_ops = [ops[0], _op(1, "mcu_depthwise_conv2d_s8_plain", 4096), ops[2]]
    twin = [TraceEvent(handle=h, instructions=1, cycles=0, estimated_cycles=n) for h, n in zip((0, 1, 2), TWIN_ESTIMATES)]
    with pytest.raises(McuError, match="op 1: mcu_depthwise_conv2d_s8 on the board, mcu_depthwise_conv2d_s8_plain"):
        join_prediction(trace_events(RECORDED_DWT, [], 3), ops, twin, twin_ops)


def test_the_twin_board_is_the_simulated_core_with_the_chips_timing() -> None:
    from mcu.device.boards import load_board
    from mcu.device.timing import twin_board

    pico2, an505 = load_board("pico2"), load_board("mps2-an505")
    twin = twin_board(pico2)
    assert twin.qemu_machine == "mps2-an505" and twin.core == pico2.core and twin.cpu_flags == pico2.cpu_flags
    assert twin.clock_hz == 150_000_000
    assert (twin.flash.origin, twin.flash.length, twin.ram.origin) == (an505.flash.origin, an505.flash.length,
                                                                      an505.ram.origin)
    assert (twin.flash.wait_states, twin.flash.cache_bytes, twin.flash.cache_line) == (84.0, 16384, 8)
    pico = twin_board(load_board("pico"))
    assert pico.qemu_machine == "mps2-an385" and pico.core == "cortex-m0plus" and pico.flash.wait_states == 112.0


def test_profile_on_a_pico2_predicts_each_op_on_its_twin(tmp_path: Path, pty: Pty) -> None:  # noqa: F811
    """The recorded console of a Pico 2 (DWT cycles per op) and, beside each op, the cycles the timing model
    predicts from the same model run on mps2-an505 with the Pico 2's XIP cache and clock."""
    from mcu.device.timing import twin_board

    lines, costs = _device_console("digits_cnn")
    cm = _digits("pico2")
    drive = make_drive(tmp_path / "media")
    board = FakePico(drive, pty, lines)
    board.start()
    profile, run = profile_model(cm, timeout_s=60, port=pty.port, drive=drive,
                                 compile_for=_digits)
    board.join(5)
    assert run.unit == "cycles" and [e.cycles for e in run.events] == costs
    twin = run_traced(_digits(twin_board(cm.board)))
    predicted = {e.handle: e.estimated_cycles for e in twin.events}
    assert all(predicted.values())
    assert {r.op.handle: r.estimated_cycles for r in profile.rows} == predicted
    assert profile.predicted_on == "mps2-an505 with pico2's memory timing"
    table = profile.table()
    assert "est/meas" in table and "cycles measured on the chip" in table
    saved = events_json(profile, run)  # what --events writes, for `mcu record show --events`
    assert saved["predicted_on"] == profile.predicted_on
    assert {e["handle"]: e["estimated_cycles"] for e in saved["events"]} == predicted
