"""A fake Pico 2 for `mcu flash` and `mcu monitor`: a folder playing the BOOTSEL drive (a helper thread
removes its INFO_UF2.TXT once the UF2 lands, as the real board reboots) and a pseudo-terminal playing the
USB-serial adapter (fed with the lines the firmware prints). The `pty` fixture is in tests/conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from repo import ROOT

INFO = "UF2 Bootloader v1.0\nModel: Raspberry Pi RP2350\nBoard-ID: RP2350\n"
PASS_LINES = ["OUT 0 0 3f800000 00000000", "VECTOR 0 PASS", "CYCLES 1234567", "RESULT PASS 0/1", "EXIT 0"]
FAIL_LINES = ["OUT 0 0 3f800000 00000000", "VECTOR 0 FAIL", "CYCLES 1234567", "RESULT FAIL 1/1", "EXIT 1"]


@dataclass
class Pty:
    master: int
    slave: int
    port: str  # the slave device, what pyserial opens

    def wait_until_opened(self, timeout_s: float = 60.0) -> None:
        """Wait for a program to open the port: pyserial puts the line in raw mode (and then flushes
        its input, so bytes sent before that would be lost)."""
        deadline = time.monotonic() + timeout_s
        while termios.tcgetattr(self.slave)[3] & termios.ICANON:
            assert time.monotonic() < deadline, "nobody opened the pseudo-terminal"
            time.sleep(0.05)
        time.sleep(0.3)

    def send(self, lines: list[str], gap_s: float = 0.0) -> None:
        """The lines as fast as the reader takes them (a write blocks while the terminal's buffer is full, as
        a USB CDC device waits for the host), or ``gap_s`` apart."""
        if gap_s <= 0:
            data = "".join(line + "\r\n" for line in lines).encode()
            while data:
                data = data[os.write(self.master, data):]
            return
        for line in lines:
            os.write(self.master, (line + "\r\n").encode())
            time.sleep(gap_s)


def make_drive(root: Path, info: str = INFO) -> Path:
    drive = root / "RP2350"
    drive.mkdir(parents=True)
    (drive / "INFO_UF2.TXT").write_text(info)
    return drive


class FakePico(threading.Thread):
    """Waits for a UF2 on the drive (or a trigger file), 'reboots' (removes INFO_UF2.TXT), prints."""

    def __init__(self, drive: Path | None, pty: Pty | None, lines: list[str], disappear: bool = True,
                 trigger: Path | None = None, timeout_s: float = 60.0) -> None:
        super().__init__(daemon=True)
        self.drive, self.pty, self.lines, self.disappear = drive, pty, lines, disappear
        self.trigger, self.timeout_s = trigger, timeout_s
        self.received: Path | None = None

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.trigger is not None and self.trigger.exists():
                break
            if self.drive is not None:
                uf2s = list(self.drive.glob("*.uf2"))
                if uf2s and uf2s[0].stat().st_size > 0:
                    time.sleep(0.05)  # let the copy finish
                    self.received = uf2s[0]
                    break
            time.sleep(0.02)
        else:
            return
        if self.disappear and self.drive is not None:
            if self.received is not None:
                shutil.copy(self.received, self.drive.parent / "received.uf2")
            shutil.rmtree(self.drive)
        if self.pty is not None:
            time.sleep(0.1)
            self.pty.send(self.lines)


def mcu_process(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    env.pop("MCU_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "mcu.commands.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
