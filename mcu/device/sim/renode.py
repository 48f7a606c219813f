"""Run firmware in Renode, from platform files generated for the board.

``renode/`` holds three Jinja2 templates that turn a board file into a
Renode platform description (``<board>.repl``: CPU, memories and console UART
at the board's addresses), a monitor script (``<board>.resc``) and a Robot
Framework test (``<board>.robot``) that boots the ELF and waits for the
harness's ``RESULT PASS`` line on the UART. ``mcu run --sim renode`` renders
them next to the firmware and runs ``renode-test`` on the Robot test, or,
with only ``renode`` installed, runs the script headless and watches the
UART log. The QEMU instruction counter has no Renode counterpart, so a
Renode run reports the verdict and the console, not instruction counts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jinja2

from mcu import paths
from mcu.device.boards import Board
from mcu.errors import McuError
from mcu.device.sim.qemu import SimResult

RENODE = "renode"
RENODE_TEST = "renode-test"
RENODE_ENV = "MCU_RENODE"  # a renode or renode-test executable to use instead of PATH
RENODE_INSTALL_HINT = (
    "get it from https://renode.io or https://github.com/renode/renode/releases "
    "(a .deb for Debian/Ubuntu, a .pkg.tar.xz for Arch, a .dmg for macOS, or the portable Linux "
    "tarball), then put renode and renode-test on PATH"
)
# Renode peripheral models for our console kinds.
UART_MODELS = {"cmsdk-uart": "UART.CMSDK_APB_UART", "pl011-uart": "UART.PL011"}
# Boards whose firmware needs nothing but memories and the UART: the MPS2/MPS3
# images. The RP2350's clock, reset and pad registers are not modelled by
# Renode's generic platform, so pico2 firmware would wait forever for its crystal.
RENODE_CONSOLES = ("cmsdk-uart",)
_VERDICT = re.compile(r"^(RESULT (PASS|FAIL) \d+/\d+|FAULT .*)$", re.M)


@dataclass(frozen=True)
class RenodeFiles:
    repl: Path
    resc: Path
    robot: Path


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(paths.renode_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
    )


def check_renode_board(board: Board) -> None:
    if board.console_kind not in RENODE_CONSOLES or board.uart_base is None:
        raise McuError(f"board '{board.name}' has no Renode platform (its {board.console_kind} console and "
                       "chip set-up are not modelled)",
                       hint="Renode runs the MPS2/MPS3 boards, e.g. --board mps2-an505")


def _region_comment(board: Board, name: str) -> str:
    if name == "flash":
        holds = "vector table, code" + ("" if board.region_for("rodata") is not board.flash else ", read-only data")
        return f"flash: {holds}, .data image"
    if name == "ram":
        return f"ram: .data, .bss, tensor arena, {board.stack_bytes} B stack at the top"
    region = next(r for r in board.extra_regions if r.name == name)
    return f"{name}: holds {', '.join(region.holds) or 'nothing'}"


def render_renode_files(board: Board, out_dir: Path, repl_path: str | None = None) -> RenodeFiles:
    """Write ``<board>.repl``, ``<board>.resc`` and ``<board>.robot`` into ``out_dir``.

    ``repl_path`` is how the script refers to the platform file (default: the
    absolute path of the one written here)."""
    check_renode_board(board)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = _environment()
    regions = [
        {"name": r.name, "origin": r.origin, "length": r.length, "comment": _region_comment(board, r.name)}
        for r in board.regions
    ]
    files = RenodeFiles(repl=out_dir / f"{board.name}.repl", resc=out_dir / f"{board.name}.resc",
                        robot=out_dir / f"{board.name}.robot")
    files.repl.write_text(env.get_template("platform.repl.j2").render(
        board=board, regions=regions, uart_model=UART_MODELS[board.console_kind]))
    files.resc.write_text(env.get_template("run.resc.j2").render(
        board=board, repl_path=repl_path or str(files.repl.resolve())))
    files.robot.write_text(env.get_template("test.robot.j2").render(board=board))
    return files


def find_renode() -> tuple[str, Path]:
    """("renode-test", path) when the Robot runner is available, else ("renode", path)."""
    override = os.environ.get(RENODE_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise McuError(f"Renode not found at {path} (set by {RENODE_ENV})", hint=f"unset {RENODE_ENV}")
        return (RENODE_TEST if path.name.startswith(RENODE_TEST) else RENODE), path
    for name in (RENODE_TEST, RENODE):
        found = shutil.which(name)
        if found is not None:
            return name, Path(found)
    raise McuError("Renode is not installed (neither renode nor renode-test is on PATH)", hint=RENODE_INSTALL_HINT)


def _result(console: str, ran_ok: bool) -> SimResult:
    m = _VERDICT.search(console)
    passed = ran_ok and m is not None and m.group(2) == "PASS"
    return SimResult(exit_code=0 if passed else 1, console=console, instructions=[])


def run_renode(board: Board, elf: Path, work_dir: Path, timeout_s: float = 600) -> SimResult:
    """Boot ``elf`` in Renode on the board's generated platform and wait for the verdict line."""
    tool, exe = find_renode()
    elf = Path(elf).resolve()
    if not elf.is_file():
        raise McuError(f"firmware {elf} does not exist")
    work_dir = Path(work_dir).resolve()
    files = render_renode_files(board, work_dir / "renode")
    uart_log = files.repl.parent / "uart.log"
    uart_log.unlink(missing_ok=True)

    if tool == RENODE_TEST:
        cmd = [str(exe), str(files.robot), "--variable", f"ELF:{elf}", "--variable", f"REPL:{files.repl}",
               "--variable", f"UART_LOG:{uart_log}", "--variable", f"TIMEOUT:{timeout_s:g}",
               "--results-dir", str(files.repl.parent / "results")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 120)
        except subprocess.TimeoutExpired as exc:
            raise McuError(f"renode-test did not finish in {timeout_s + 120:g} s") from exc
        console = uart_log.read_text(errors="replace") if uart_log.exists() else ""
        if proc.returncode != 0 and not console:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise McuError(f"renode-test failed on {elf.name}:\n{tail}")
        return _result(console, proc.returncode == 0)

    # Only the monitor: run the script headless, watch the UART log, stop Renode ourselves.
    with tempfile.NamedTemporaryFile("w", suffix=".resc", dir=files.repl.parent, delete=False) as script:
        script.write(f"$elf=@{elf}\n$repl=@{files.repl}\ninclude @{files.resc}\n"
                     f"sysbus.uart0 CreateFileBackend @{uart_log} true\nstart\n")
    proc = subprocess.Popen([str(exe), "--disable-xwt", "--console", "--plain", script.name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            console = uart_log.read_text(errors="replace") if uart_log.exists() else ""
            if _VERDICT.search(console):
                return _result(console, True)
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        os.unlink(script.name)
    console = uart_log.read_text(errors="replace") if uart_log.exists() else ""
    raise McuError(f"no RESULT line from {elf.name} in Renode within {timeout_s:g} s",
                   hint=("console so far:\n" + "\n".join(console.strip().splitlines()[-20:]))
                   if console.strip() else "the UART printed nothing")
