"""``mcu boards``: the boards mcu builds for, as a table or JSON."""

from __future__ import annotations

import argparse
from typing import Any

from mcu.commands.common import print_json
from mcu.device.boards import list_boards


def cmd_boards(args: argparse.Namespace) -> int:
    boards = list_boards()
    if args.json:
        print_json({"boards": [{"name": b.name, "core": b.core, "fpu": b.fpu, "dsp": b.dsp, "mve": b.mve,
                                 "flash_bytes": b.flash.length, "ram_bytes": b.ram.length,
                                 "clock_hz": b.clock_hz, "simulator": b.sim_kind,
                                 "deploy": b.deploy_method, "uf2_family": b.uf2_family,
                                 "memory": {r.name: {"origin": r.origin, "length": r.length, "holds": list(r.holds)}
                                            for r in b.regions},
                                 "how": _how_run(b)} for b in boards]})
        return 0
    print(f"{'board':<14} {'core':<11} {'fpu':<9} {'dsp':<4} {'mve':<4} {'flash':>9} {'ram':>9} {'clock':>8}  run by")
    for b in boards:
        how = _how_run(b)
        print(f"{b.name:<14} {b.core:<11} {b.fpu or '-':<9} {'yes' if b.dsp else 'no':<4} "
              f"{'yes' if b.mve else 'no':<4} {_kib(b.flash.length):>9} {_kib(b.ram.length):>9} "
              f"{b.clock_hz / 1e6:>5.0f}MHz  {how}")
    return 0


def _how_run(b: Any) -> str:
    if b.sim_kind == "qemu":
        extra = "".join(f", {r.name} {_kib(r.length)} for {'/'.join(r.holds)}" for r in b.extra_regions if r.holds)
        return f"qemu ({b.qemu_machine}{extra})"
    if b.deploy_method == "uf2":
        return f"mcu flash: UF2 (family {b.uf2_family:#x}) to the BOOTSEL drive or picotool, console on UART"
    return b.sim_kind or b.deploy_method


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"
