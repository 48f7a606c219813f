"""``mcu flash`` and ``mcu monitor``: a real board over USB (see mcu/device/flash.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mcu.commands.common import compile_model
from mcu.device.boards import load_board
from mcu.device.flash import chip_for_family, flash_uf2, monitor
from mcu.errors import McuError


def cmd_flash(args: argparse.Namespace) -> int:
    board = load_board(args.board)
    if board.deploy_method != "uf2":
        raise McuError(f"board '{board.name}' is not flashed over USB (deploy method '{board.deploy_method}')",
                       hint=f"use `mcu run --board {board.name}` for simulated boards, or --board pico2 or pico")
    cm = compile_model(args)
    out = args.output or Path("mcu-out") / f"{cm.spec.name}-{cm.board.name}"
    fw = cm.build(out)
    print(f"built {fw.uf2} for {board.name} ({cm.quantize}): flash {fw.flash_bytes} B, static RAM {fw.ram_bytes} B",
          flush=True)

    def status(line: str) -> None:
        print(f"mcu: {line}", flush=True)

    result = flash_uf2(fw.uf2, drive=args.drive, port=args.port, timeout_s=args.timeout,
                       on_line=lambda line: print(line, flush=True), on_status=status,
                       chip=chip_for_family(board.uf2_family))
    return _print_verdict(result.console, board.clock_hz)


def cmd_monitor(args: argparse.Namespace) -> int:
    console = monitor(port=args.port, timeout_s=args.timeout, on_line=lambda line: print(line, flush=True))
    return _print_verdict(console, None)


def _print_verdict(console: Any, clock_hz: int | None) -> int:
    if console is None:
        return 0
    report = console.report
    if report.cycles:
        at = f" ({report.cycles / clock_hz * 1e3:.2f} ms at {clock_hz / 1e6:.0f} MHz)" if clock_hz else ""
        print(f"cycles per inference: {report.cycles}{at}")
    verdict = "PASS" if console.exit_code == 0 else "FAIL"
    print(f"{verdict}: {len(report.vector_passed)} bundled test vectors on {console.port}"
          + (f" ({report.failed_vectors} failed)" if report.failed_vectors else ""))
    return console.exit_code
