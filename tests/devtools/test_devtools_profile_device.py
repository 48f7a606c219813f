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

import pytest

from fake_pico import FakePico, Pty, make_drive
from mcu.api import compile_file
from mcu.devtools.profile import profile_model
from mcu.devtools.trace import run_traced
from mcu.device.uf2 import decode
from repo import EXAMPLES

pytestmark = pytest.mark.filterwarnings("ignore")


def _device_console(name: str) -> tuple[list[str], list[int]]:
    """The traced firmware's console on mps2-an505 with DWT-style cycles in its TRACE lines."""
    sim = run_traced(compile_file(EXAMPLES / f"{name}.py", "mps2-an505", "int8"))
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
    cm = compile_file(EXAMPLES / "digits_cnn.py", "pico2", "int8")
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

    cm = compile_file(EXAMPLES / "digits_cnn.py", "pico2", "int8")
    with pytest.raises(McuError) as err:
        profile_model(cm, timeout_s=0.5, port=pty.port, search_dirs=[tmp_path / "nothing-mounted"])
    assert "BOOTSEL" in err.value.message + (err.value.hint or "")
