"""The command line as a user runs it: `python -m mcu.commands.cli ...` in a fresh folder, and the check that a
failure is one line starting with "mcu:" and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def run_mcu(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("MCU_DEBUG", None)
    # A fresh folder by default: a command that writes mcu-out/ must not write it into the checkout.
    return subprocess.run([sys.executable, "-m", "mcu.commands.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or tempfile.mkdtemp(prefix="mcu-cli-"), timeout=900)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("mcu:")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
