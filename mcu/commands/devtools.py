"""The developer-tool subcommands of ``mcu`` (``mcu profile``, ``mcu debug``); mcu/commands/cli.py adds them to its parser."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from mcu.commands.common import compile_model, refuse_cmsis_nn_in_program
from mcu.commands.types import positive_seconds
from mcu.errors import McuError
from dataclasses import asdict
from mcu.devtools.debug import debug_model


def add_parsers(sub: Any, add_model_args: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("profile", help="cost of every op on the board's simulator (or a Pico over USB), sorted",
                       description="Build a profiling firmware (the event tracer compiled in), run it on the "
                                   "board's simulator and print one row per op: debug handle, op, kernel, output "
                                   "shape, MACs, exact instructions, share, instructions per MAC, arena bytes "
                                   "live and the model's source line, sorted by cost, with totals.")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--svg", type=Path, metavar="FILE", help="draw the profile as a bar chart to an SVG file")
    p.add_argument("--events", type=Path, metavar="FILE",
                   help="save the tracer's events as JSON (with a compile record, `mcu.devtools.record` "
                        "redraws this profile without the model file)")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="simulator timeout, or on a Pico 2 / Pico each wait's, in seconds (default 600)")
    p.add_argument("--port", help="pico2/pico: the board's serial port (default: found automatically); the cycles "
                                  "measured per op are printed beside the timing model's prediction for them")
    p.add_argument("--drive", type=Path, help="pico2/pico: the mounted BOOTSEL drive (default: found automatically)")
    p.add_argument("--program", action="store_true",
                   help="profile the model as a program file on the interpreter firmware instead of generated C "
                        "(QEMU boards)")
    add_debug_parser(sub, add_model_args)
    add_record_parser(sub)


def add_record_parser(sub: Any) -> None:
    p = sub.add_parser("record", help="read a compile record written by `mcu build --record`",
                       description="Read a compile record (`mcu build --record FILE`) without the model file: "
                                   "`mcu record show FILE` prints its op table (handle, op, kernel, output shape, "
                                   "MACs, arena bytes live, source line), memory plan and sizes; with --events "
                                   "(saved by `mcu profile --events`) it redraws the profile instead.")
    actions = p.add_subparsers(dest="record_action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="print the record (or, with --events, the profile it explains)")
    show.add_argument("file", type=Path, help="the compile record")
    show.add_argument("--events", type=Path, metavar="FILE", help="the events `mcu profile --events` saved")
    show.add_argument("--json", action="store_true", help="print the record (or the profile) as JSON")


def cmd_record(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.devtools.record import describe_record, load_record, profile_from_record
    record = load_record(args.file)
    if args.events is not None:
        try:
            trace = json.loads(Path(args.events).read_text())
        except (OSError, ValueError) as exc:
            raise McuError(f"cannot read events file {args.events}: {exc}",
                           hint="write one with `mcu profile --events FILE`") from None
        profile = profile_from_record(record, trace)
        print(json.dumps(profile.to_json(), separators=(",", ":")) if args.json else profile.table())
        return 0
    print(json.dumps(record.data, separators=(",", ":")) if args.json else describe_record(record))
    return 0


def add_debug_parser(sub: Any, add_model_args: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("debug", help="compare every op on the board's simulator with the integer reference",
                       description="Build a debug firmware that prints every op's output, run it on the board's "
                                   "simulator and compare each op with the Python integer reference on the first "
                                   "test vector; name the first op that departs, with its source line. Exit 0 "
                                   "only when every op equals the reference.")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="simulator timeout in seconds (default 600)")


def cmd_debug(args: argparse.Namespace) -> int:
    report = debug_model(compile_model(args), timeout_s=args.timeout)
    first = report.first_departure
    if args.json:
        print(json.dumps({"title": report.title, "ops": [asdict(r) for r in report.rows],
                          "first_departure": asdict(first) if first else None,
                          **({"precision": report.precision.to_json()} if report.precision else {})},
                         separators=(",", ":")))
    else:
        print(report.table())
    return 0 if first is None else 1


def cmd_profile(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.devtools.profile import events_json, profile_model

    if args.program:
        refuse_cmsis_nn_in_program(args)
    cm = compile_model(args)

    def whole_for() -> Any:
        # the same model with every tensor whole: what a fused block's or a streamed prefix's ops cost unfused
        return compile_model(argparse.Namespace(**{**vars(args), "fuse_blocks": "off", "ram_budget": None,
                                                   "stream_prefix": False, "stream_input": False}))

    if args.program:
        # lazy: keeps jinja2 out of this module's import
        from mcu.devtools.program_trace import profile_program

        profile, run = profile_program(cm, timeout_s=args.timeout, whole_for=whole_for)
    else:
        def compile_for(board: Any) -> Any:
            # the same model and options for another board: a hardware board's simulated twin
            return compile_model(argparse.Namespace(**{**vars(args), "board": board}))

        profile, run = profile_model(cm, timeout_s=args.timeout, port=getattr(args, "port", None),
                                     drive=getattr(args, "drive", None), compile_for=compile_for,
                                     whole_for=whole_for)
    if args.svg:
        args.svg.write_text(profile.svg())
    if args.events:
        args.events.write_text(json.dumps(events_json(profile, run), indent=1))
    if args.json:
        print(json.dumps(profile.to_json(), separators=(",", ":")))
    else:
        print(profile.table())
        if args.svg:
            print(f"bar chart drawn to {args.svg}")
    return 0


COMMANDS = {"profile": cmd_profile, "debug": cmd_debug, "record": cmd_record}
