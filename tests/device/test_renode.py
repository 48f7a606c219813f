"""Renode: the platform description, script and Robot test generated from a board file, and
`mcu run --sim renode`. Renode itself is not installable here, so the generated files are checked
for the board's names, addresses and sizes, and the runner is exercised with stand-in
renode / renode-test executables that behave like the real ones on the files we hand them."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from cli_runner import assert_one_line_error, mcu_in_process
from mcu import paths
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.device.sim.renode import RENODE_ENV, find_renode, render_renode_files, run_renode
from repo import EXAMPLES


def _hex(n: int) -> str:
    return f"0x{n:08X}"


@pytest.mark.parametrize("name", ["mps2-an505", "mps3-an547", "mps2-an386"])
def test_platform_has_the_board_memory_map(tmp_path: Path, name: str) -> None:
    board = load_board(name)
    files = render_renode_files(board, tmp_path)
    repl = files.repl.read_text()
    assert name in repl and f'cpuType: "{board.core}"' in repl
    for region in board.regions:
        assert re.search(rf"^{region.name}: Memory\.MappedMemory @ sysbus {_hex(region.origin)}\n"
                         rf"    size: {_hex(region.length)}$", repl, re.M), region
    assert f"uart0: UART.CMSDK_APB_UART @ sysbus {_hex(board.uart_base or 0)}" in repl
    assert "nvic: IRQControllers.NVIC @ sysbus 0xE000E000" in repl

    resc = files.resc.read_text()
    assert f':name: {name}' in resc and f'$name?="{name}"' in resc
    assert f"$repl?=@{files.repl.resolve()}" in resc
    assert "sysbus LoadELF $elf" in resc and f"cpu VectorTableOffset {_hex(board.flash.origin)}" in resc

    robot = files.robot.read_text()
    assert "*** Test Cases ***" in robot and f'mach create "{name}"' in robot
    assert f"${{CURDIR}}/{name}.repl" in robot and "sysbus LoadELF @${ELF}" in robot
    assert f"cpu VectorTableOffset {_hex(board.flash.origin)}" in robot
    assert re.search(r"^    Wait For Line On Uart\s+RESULT PASS$", robot, re.M)


def test_an505_platform_matches_its_qemu_memory_map(tmp_path: Path) -> None:
    repl = render_renode_files(load_board("mps2-an505"), tmp_path).repl.read_text()
    assert "flash: Memory.MappedMemory @ sysbus 0x10000000\n    size: 0x00400000" in repl
    assert "ram: Memory.MappedMemory @ sysbus 0x38000000\n    size: 0x00400000" in repl
    assert "uart0: UART.CMSDK_APB_UART @ sysbus 0x50200000" in repl


def test_committed_renode_files_are_current(tmp_path: Path) -> None:
    """renode/mps2-an505.* are the templates rendered for that board, for use without mcu."""
    files = render_renode_files(load_board("mps2-an505"), tmp_path, repl_path="$ORIGIN/mps2-an505.repl")
    for f in (files.repl, files.resc, files.robot):
        assert (paths.renode_dir() / f.name).read_text() == f.read_text(), f.name


def test_pico2_has_no_renode_platform(tmp_path: Path) -> None:
    with pytest.raises(McuError, match="board 'pico2' has no Renode platform"):
        render_renode_files(load_board("pico2"), tmp_path)


def test_run_without_renode_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = mcu_in_process("run", "--sim", "renode", "--board", "mps2-an505", str(EXAMPLES / "small_cnn.py"),
                          env={"PATH": f"{empty}:{Path(sys.executable).parent}"})
    assert_one_line_error(proc, "Renode is not installed", "renode.io", "github.com/renode/renode/releases")


def test_run_help_lists_the_simulators() -> None:
    proc = mcu_in_process("run", "--help")
    assert proc.returncode == 0 and "--sim {qemu,renode}" in proc.stdout


# --- the runner, with stand-ins ---------------------------------------------------------------------

FAKE_RENODE_TEST = r"""#!{python}
# Stand-in for renode-test: checks the arguments it is given and writes the UART log the
# Robot test asks for (--variable UART_LOG:...), as Renode's file backend would.
import sys
args = sys.argv[1:]
robot = args[0]
variables = dict(a.split(":", 1) for a in args[1:] if ":" in a and not a.startswith("-"))
assert robot.endswith(".robot"), robot
assert "Wait For Line On Uart" in open(robot).read()
open(variables["UART_LOG"], "w").write("VECTOR 0 PASS\nCYCLES 0\nRESULT {verdict} 0/1\n")
open({record!r}, "w").write("\n".join(args))
sys.exit(0 if "{verdict}" == "PASS" else 1)
"""

# Stand-in for renode-test that runs the firmware for real (in QEMU, the same machine) and writes what its
# UART printed to the log the Robot test names, so mcu decodes a real harness's outputs.
FAKE_RENODE_TEST_QEMU = r"""#!{python}
import subprocess, sys
args = sys.argv[1:]
variables = dict(a.split(":", 1) for a in args[1:] if ":" in a and not a.startswith("-"))
assert args[0].endswith(".robot") and "Wait For Line On Uart" in open(args[0]).read()
run = subprocess.run(["qemu-system-arm", "-M", "mps2-an505", "-nographic", "-semihosting-config",
                      "enable=on,target=native", "-kernel", variables["ELF"]], capture_output=True, text=True,
                     timeout=300)
open(variables["UART_LOG"], "w").write(run.stdout)
open({record!r}, "w").write("\n".join(args))
sys.exit(0 if "RESULT PASS" in run.stdout else 1)
"""

FAKE_RENODE = r"""#!{python}
# Stand-in for the Renode monitor: reads the script, finds the UART file backend, writes the
# console there and keeps running until it is stopped, as the emulator would.
import re, sys, time
script = open(sys.argv[-1]).read()
assert "include @" in script and "start" in script, script
log = re.search(r"CreateFileBackend @(\S+) true", script).group(1)
open(log, "w").write("RESULT PASS 0/1\n")
time.sleep(60)
"""


def _fake(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def hello_elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mcu.device.toolchain import build_firmware

    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    d = tmp_path_factory.mktemp("renode-hello")
    src = d / "main.c"
    src.write_text('#include "mcu/log.h"\nint main(void) { mcu_log_str("RESULT PASS 0/1\\n"); return 0; }\n')
    return build_firmware(load_board("mps2-an505"), [src], [], d / "out").elf


@pytest.mark.parametrize("verdict", ["PASS", "FAIL"])
def test_renode_test_runner(tmp_path: Path, hello_elf: Path, monkeypatch: pytest.MonkeyPatch, verdict: str) -> None:
    record = tmp_path / "args.txt"
    fake = _fake(tmp_path / "renode-test",
                 FAKE_RENODE_TEST.format(python=sys.executable, record=str(record), verdict=verdict))
    monkeypatch.setenv(RENODE_ENV, str(fake))
    assert find_renode() == ("renode-test", fake)
    result = run_renode(load_board("mps2-an505"), hello_elf, tmp_path / "work", timeout_s=30)
    assert result.exit_code == (0 if verdict == "PASS" else 1)
    assert f"RESULT {verdict} 0/1" in result.console
    args = record.read_text().splitlines()
    assert args[0] == str(tmp_path / "work" / "renode" / "mps2-an505.robot")
    assert f"ELF:{hello_elf}" in args and "TIMEOUT:30" in args


def test_renode_monitor_runner_stops_renode(tmp_path: Path, hello_elf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake(tmp_path / "renode", FAKE_RENODE.format(python=sys.executable))
    monkeypatch.setenv(RENODE_ENV, str(fake))
    assert find_renode() == ("renode", fake)
    result = run_renode(load_board("mps2-an505"), hello_elf, tmp_path / "work", timeout_s=20)
    assert result.exit_code == 0 and "RESULT PASS 0/1" in result.console
    # The per-run script is gone and the emulator process was stopped (no stray children).
    assert not list((tmp_path / "work" / "renode").glob("tmp*.resc"))


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                    reason="needs arm-none-eabi-gcc and qemu-system-arm (the stand-in runs the firmware in QEMU)")
def test_mcu_run_sim_renode_with_a_stand_in(tmp_path: Path) -> None:
    record = tmp_path / "args.txt"
    fake = _fake(tmp_path / "renode-test", FAKE_RENODE_TEST_QEMU.format(python=sys.executable, record=str(record)))
    proc = mcu_in_process("run", "--sim", "renode", "--board", "mps2-an505", "--quantize", "none", "--json",
                          str(EXAMPLES / "small_cnn.py"), env={RENODE_ENV: str(fake)})
    assert proc.returncode == 0, proc.stderr
    assert '"simulator":"renode"' in proc.stdout and '"passed":true' in proc.stdout
    report = json.loads(proc.stdout)
    assert len(report["outputs"]) == len(report["outputs_raw"]) >= 1 and report["max_error_vs_expected"] < 1e-5
    assert os.path.isfile(record.read_text().splitlines()[0])  # the rendered .robot next to the firmware
