"""``mcu build``: the firmware in an output folder and its size report."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from mcu.commands.common import compile_model, print_json
from mcu.commands.reports import base_report, print_partitions, print_sizes
from mcu.device.boards import load_board
from mcu.emit.outputs import build_lock, check_file_target
from mcu.errors import McuError


def cmd_build(args: argparse.Namespace) -> int:
    if args.board and load_board(args.board).is_linux:
        raise McuError(f"mcu build makes firmware; {args.board} is a Linux board",
                       hint=f"use `mcu run --board {args.board} ...` (builds and runs the harness) or `mcu export`")
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if is_generation_file(args.model):
        # lazy: keeps torch and jinja2 out of this module's import
        from mcu.commands import generate as cli_generate

        return cli_generate.build(args)
    for option, target, example in (("--memory-svg", args.memory_svg, "plan.svg"), ("--record", args.record,
                                                                                    "model.record")):
        if target is not None:  # a bad path fails before the compile, not after it
            check_file_target(Path(target), what=f"{option} file", example=example)
    # The folder stays locked until the report is printed, so what --json says is what is on disk.
    with ExitStack() as stack:
        if args.output is not None:
            stack.enter_context(build_lock(args.output))
        cm = compile_model(args)
        out = args.output
        if out is None:
            out = Path("mcu-out") / f"{cm.spec.name}-{cm.board.name}"
            stack.enter_context(build_lock(out))
        return _build_report(args, cm, cm.build(out, lock=False))


def _build_report(args: argparse.Namespace, cm: Any, fw: Any) -> int:
    report = base_report(cm, fw)
    report["sources"] = str(fw.source_dir)
    report["memory"] = dict(getattr(fw, "region_bytes", {}))
    if getattr(fw, "uf2", None) is not None:
        report["uf2"] = str(fw.uf2)
    if fw.sizes is not None:
        report["size_breakdown"] = fw.sizes.as_dict()
    if getattr(fw, "stack", None) is not None:
        report["stack"] = fw.stack.to_json()
        report["ram_total"] = _ram_total(cm, fw)
    if args.memory_svg:
        args.memory_svg.write_text(cm.memory_svg())
        report["memory_svg"] = str(args.memory_svg)
    if args.record:
        # lazy: keeps jinja2 out of this module's import
        from mcu.devtools.record import write_record

        report["record"] = str(write_record(cm, args.record, fw))
    if args.json:
        print_json(report)
    else:
        print(f"built {fw.elf} for {cm.board.name} ({cm.quantize})")
        if "uf2" in report:
            print(f"UF2 for the BOOTSEL drive: {report['uf2']}")
        print_sizes(report)
        print_partitions(cm.partitions)
        for region in cm.board.extra_regions:
            print(f"{region.name}: {report['memory'].get(region.name, 0)} B of {region.length} B "
                  f"({', '.join(region.holds)})")
        if fw.sizes is not None:
            print(fw.sizes.table())
        if "ram_total" in report:
            t = report["ram_total"]
            print(f"RAM total {t['total']} B = arena {t['arena']} B + stack {t['stack']} B (worst case "
                  f"{fw.stack.worst_case_bytes} B + margin {fw.stack.margin_bytes} B) + "
                  + (f"weights {t['weights']} B + " if t["weights"] else "") + f"statics {t['statics']} B; "
                  f"deepest call chain: {fw.stack.chain()}")
        if args.memory_svg:
            print(f"memory plan drawn to {args.memory_svg}")
        if args.record:
            print(f"compile record written to {args.record}")
    return 0


def _ram_total(cm, fw) -> dict[str, int]:
    """Main RAM as arena + stack + statics (.data and .bss: harness buffers, the fault stack, libc)."""
    main_arena = cm.memory.arenas[0].plan.arena_size if cm.memory.arenas and cm.memory.arenas[0].region == "ram" \
        else 0
    stack = fw.stack.reserved_bytes
    weights = getattr(fw, "weights_placed", {}).get("ram", 0)  # constant tensors copied to RAM (--weights-in fast)
    return {"total": fw.ram_bytes, "arena": main_arena, "stack": stack, "weights": weights,
            "statics": fw.ram_bytes - main_arena - stack - weights}
