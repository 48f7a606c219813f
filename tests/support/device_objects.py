"""Kernel objects as the firmware compiles them, for the tests that read a kernel's symbols on each core.

The object comes from mcu.device.toolchain.shared_objects: the flags of every firmware for the board, so the
interpreter firmware's build and these tests compile each kernel once between them (the object cache). The
warnings the firmware does not enable are checked by the compiler's front end alone (``-fsyntax-only``), where
gcc reports them: they need no code generated."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mcu.device.boards import load_board
from mcu.device.toolchain import find_cross_compiler, shared_objects
from mcu.paths import kernel_source, runtime_dir


def device_object(board: str, source: str, work: Path) -> Path:
    """``source`` (a kernel's file name) compiled for ``board`` as its firmware compiles it."""
    [obj] = shared_objects(load_board(board), [kernel_source(source)], work)
    return obj


def front_end_errors(board: str, source: str, warnings: list[str]) -> str:
    """The compiler's complaints about ``source`` for ``board``'s core with ``warnings`` made errors ('' if none)."""
    cmd = [str(find_cross_compiler()), *load_board(board).cpu_flags, "-std=c11", "-Wall", "-Wextra", "-Werror",
           *warnings, f"-I{runtime_dir() / 'include'}", "-fsyntax-only", str(kernel_source(source))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return "" if proc.returncode == 0 else proc.stderr or f"exit {proc.returncode}"


def symbols(obj: Path) -> tuple[set[str], list[tuple[str, str]]]:
    """The object's undefined symbols, and its defined ones with nm's kind letter."""
    text = subprocess.run(["arm-none-eabi-nm", str(obj)], check=True, capture_output=True, text=True).stdout
    undefined, defined = set(), []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3:
            defined.append((parts[1], parts[2]))
    return undefined, defined
