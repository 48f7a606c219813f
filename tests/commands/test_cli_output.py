"""What the command line prints: one progress line per long step on a terminal, nothing but one JSON
object with --json, and exactly one error line (torch's own output hidden unless --verbose)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from cli_runner import mcu_in_process, run_mcu
from repo import EXAMPLES, requires_qemu

STAGES = ["load", "quantize", "capture", "lower", "plan", "generate", "compile", "link", "simulate"]

LSTM_MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.rnn = nn.LSTM(8, 8, batch_first=True)
        # adaptive max pooling: mcu has no kernel for it yet
        self.pool = nn.AdaptiveMaxPool2d(2)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.rnn(self.fc(x))
        y = self.pool(y.unsqueeze(1))
        return self.head(y.flatten(1).repeat(1, 4))


model = Net().eval()
example_inputs = (torch.randn(1, 5, 8),)
"""

SHAPE_MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


model = Net().eval()
example_inputs = (torch.randn(1, 16),)
"""


def _run_on_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run mcu with stderr on a pseudo-terminal (stdout a pipe); returns (status, stdout, terminal text)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "MCU_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-m", "mcu.commands.cli", *args], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: every holder of the terminal's other end has closed it
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=900)
    return proc.returncode, stdout, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


@requires_qemu
def test_run_on_a_terminal_prints_one_line_per_stage(tmp_path: Path) -> None:
    status, stdout, terminal = _run_on_terminal(
        ["run", "--board", "mps2-an505", "--quantize", "int8", str(EXAMPLES / "small_cnn.py")], tmp_path)
    assert status == 0, terminal
    lines = terminal.strip().splitlines()
    names = [m.group(1) for ln in lines if (m := re.match(r"mcu: (\w+)\s*\.\.\. (\d+\.\d s|up to date)$", ln))]
    assert names == STAGES, terminal
    assert len(lines) == len(STAGES), terminal  # nothing else: no torch warnings, no log lines
    assert "PASS" in stdout


@requires_qemu
def test_run_json_is_one_object_and_nothing_on_stderr(tmp_path: Path) -> None:
    # A real process: what reaches its stdout and stderr, not only what main() prints.
    proc = run_mcu("run", "--board", "mps2-an505", "--quantize", "int8", "--json", str(EXAMPLES / "small_cnn.py"),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    report = json.loads(proc.stdout)  # raises if anything but one JSON object is on stdout
    assert report["passed"] is True and proc.stdout.count("\n") == 1
    # the timing model's estimate beside the exact count, at the board's 25 MHz, marked as an estimate
    assert report["cycles"] >= report["instructions"] > 0
    assert abs(report["ms"] - report["cycles"] / 25e3) < 1e-3
    assert report["timing"]["estimate"] is True and report["timing"]["core"] == "cortex-m33"


def test_quiet_terminal_prints_no_progress(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SHAPE_MODEL)
    status, _, terminal = _run_on_terminal(["build", "--board", "mps2-an505", "--quiet", str(tmp_path / "m.py"),
                                            "-o", str(tmp_path / "out")], tmp_path)
    assert status != 0
    assert terminal.strip().splitlines() == [terminal.strip()] and terminal.startswith("mcu: error:"), terminal


def test_unsupported_nn_module_is_named_as_written(tmp_path: Path) -> None:
    (tmp_path / "lstm_model.py").write_text(LSTM_MODEL)
    proc = mcu_in_process("build", "--board", "mps2-an505", str(tmp_path / "lstm_model.py"),
                          "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # the UserWarning torch.export prints about LSTM weights is hidden
    assert lines[0].startswith("mcu: error: nn.AdaptiveMaxPool2d at lstm_model.py:16 is not supported yet"), lines[0]
    assert "`y = self.pool(y.unsqueeze(1))`" in lines[0] and "aten.adaptive_max_pool2d.default" in lines[0]
    assert proc.stdout == ""

    verbose = mcu_in_process("build", "--board", "mps2-an505", "--verbose", str(tmp_path / "lstm_model.py"),
                             "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert "UserWarning" in verbose.stderr and "_flat_weights" in verbose.stderr, verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == lines[0]  # the error line stays last


def test_shape_mismatch_is_one_line_at_the_users_line(tmp_path: Path) -> None:
    (tmp_path / "bad_shapes.py").write_text(SHAPE_MODEL)
    proc = mcu_in_process("build", "--board", "mps2-an505", str(tmp_path / "bad_shapes.py"),
                          "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # torch's E... fake_tensor.py log lines are hidden
    assert lines[0].startswith("mcu: error: torch.export could not capture the model at bad_shapes.py:12:"), lines[0]
    assert "[1, 32] X [64, 4]" in lines[0]

    verbose = mcu_in_process("build", "--board", "mps2-an505", "--verbose", str(tmp_path / "bad_shapes.py"),
                             "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert "fake_tensor.py" in verbose.stderr, verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == lines[0]
