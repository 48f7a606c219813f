"""``mcu export``: write the generated C library for a firmware ecosystem, or a program file.

The default target (cmake, or make: the same folder) holds the model's header, sources and weights,
exactly the runtime files and kernels the model needs (with their headers), a CMakeLists.txt and a
Makefile fragment, so it drops into a foreign project. The other targets (pico-sdk, arduino, zephyr,
cmsis-pack) wrap the same files in that ecosystem's layout; see mcu/emit/targets/. With ``--format
program`` the command writes a program file for the interpreter instead (mcu/program/).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcu.commands.common import (bias_correction, compact_weights_notes, compile_model, mixed_options, print_json,
                                 refuse_cmsis_nn_in_program, say_notes, weight_rounding)
from mcu.commands.reports import base_report
from mcu.emit.c_model import GeneratedLibrary, firmware_view
from mcu.errors import McuError
from mcu.emit.targets import DEFAULT_TARGET, TARGETS, ExportJob
from mcu.emit.targets.common import ModelStack
from mcu.emit.outputs import check_file_target, ensure_dir, write_atomic
from mcu.program.format import WEIGHTS_SUFFIX
from mcu.program.writer import program_from
from mcu.progress import quiet_torch
from mcu.device.custom_child import verify_program_in_child
from mcu.device.stack import bound, load_frames
from mcu.device.toolchain import COMMON_CFLAGS, find_cross_compiler, find_cross_objdump

if TYPE_CHECKING:
    from mcu.api import CompiledModel, FirmwareBuild


def export_library(lib: GeneratedLibrary, out_dir: Path) -> list[Path]:
    """The default target's folder, from the generated library alone."""
    return TARGETS[DEFAULT_TARGET].write(ExportJob(lib=lib, out_dir=ensure_dir(Path(out_dir))))


def model_stack(cm: CompiledModel) -> ModelStack:
    """The worst-case stack of the model's run function on its board's core: the call graph from
    ``<prefix>_run`` over the model's firmware (built with -fstack-usage, content-keyed in the cache), with
    the frames that build recorded (mcu/device/stack.py)."""
    return _stack_and_firmware(cm)[0]


def _stack_and_firmware(cm: CompiledModel) -> tuple[ModelStack, FirmwareBuild | None]:
    """:func:`model_stack` and the firmware it was bounded on (None: no bare-metal build, or it failed)."""
    board = cm.board
    if board.kind != "mcu":
        return ModelStack(bytes=None, board=board.name, core=board.core,
                          reason=f"{board.name} is not a bare-metal board: the stack is the process's, "
                                 "not bounded here"), None
    entry = f"{cm.library.prefix}_run"
    fw = None
    try:
        fw = cm.build()
        frames = load_frames(fw.elf.with_suffix(".frames.json"))
        report = bound(fw.elf, frames, find_cross_objdump(find_cross_compiler()), entry=entry)
    except McuError as e:
        return ModelStack(bytes=None, board=board.name, core=board.core, reason=e.message), fw
    flags = " ".join(f for f in COMMON_CFLAGS if f.startswith("-O"))
    return ModelStack(bytes=report.worst_case_bytes, board=board.name, core=board.core, flags=flags,
                      chain=" -> ".join(f for f, _ in report.path)), fw


def export_target(cm: CompiledModel, target: str, out_dir: Path) -> list[Path]:
    """Write ``target``'s files for a compiled model; examples run the model's bundled test vectors."""
    return _export(cm, target, out_dir)[0]


def _export(cm: CompiledModel, target: str,
            out_dir: Path) -> tuple[list[Path], ModelStack, FirmwareBuild | None]:
    """:func:`export_target`, with the model's stack and the firmware it was bounded on."""
    if target not in TARGETS:
        raise McuError(f"unknown export target '{target}'", hint=f"choose one of: {', '.join(TARGETS)}")
    t = TARGETS[target]
    vectors = None
    if t.example:
        vec_in = [cm.encode_inputs(xs) for xs in cm.spec.test_inputs]
        vectors = firmware_view(cm.library, vec_in, cm.expected_outputs, cm.tolerances())
    stack, fw = _stack_and_firmware(cm)
    job = ExportJob(lib=cm.library, out_dir=ensure_dir(Path(out_dir)), vectors=vectors, board=cm.board.name,
                    stack=stack)
    return t.write(job), stack, fw


def cmd_export(args: argparse.Namespace) -> int:
    if getattr(args, "weights_in", None) == "fast" and args.format == "program":
        raise McuError("--weights-in fast is where a firmware keeps the weights; a program file holds none of that: "
                       "the interpreter firmware decides where it reads the program from",
                       hint="drop --weights-in (`mcu run --program --weights-in fast` runs the program from RAM)")
    if getattr(args, "weights_in", None) == "fast":
        raise McuError("--weights-in fast places mcu's own firmware's weights; an exported library's go where "
                       "your linker script puts them",
                       hint="compile it with -DMCU_WEIGHTS_SECTION='\".my_weights\"' and place that section in RAM "
                            "(the export's README.md, \"Where the weights live\")")
    if args.format == "program":
        if args.target != "cmake":
            raise McuError(f"--target {args.target} applies to the C library (--format c)",
                           hint="drop --target, or drop --format program")
        return _export_program(args)
    if args.board is None:
        raise McuError("mcu export needs --board for a C library",
                       hint="add --board mps2-an505 (see `mcu boards`), or write a program file with --format program")
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if is_generation_file(args.model):
        # lazy: keeps torch and jinja2 out of this module's import
        from mcu.commands import generate as cli_generate

        return cli_generate.export(args)
    ensure_dir(args.output)  # a bad -o fails before the compile, not after it
    cm = compile_model(args)
    files, stack, fw = _export(cm, args.target, args.output)
    if args.json:
        print_json(_library_report(args, cm, files, stack, fw))
    elif args.target in ("cmake", "make"):
        print(f"wrote {len(files)} files to {args.output} (arena {cm.memory.arena_size} B); "
              f"include {cm.library.prefix}_model.h and build with {cm.library.prefix}.mk or CMakeLists.txt")
    else:
        print(f"wrote {len(files)} files for {args.target} to {args.output} (arena {cm.memory.arena_size} B)")
    if not args.json and stack.bytes is None and cm.board.kind == "mcu":
        print(f"no {cm.library.prefix.upper()}_STACK_BYTES in the header: {stack.reason}")
    return 0


def _library_report(args: argparse.Namespace, cm: CompiledModel, files: list[Path], stack: ModelStack,
                    fw: FirmwareBuild | None) -> dict[str, Any]:
    """`mcu build --json`'s keys, their flash and RAM figures those of the board's firmware around the library (the
    build the stack is bounded on; null when there is none), and what was written: the files relative to the
    output folder, ``model_stack`` the worst case of ``<prefix>_run`` (the header's ``<PREFIX>_STACK_BYTES``)."""
    report = base_report(cm, fw)
    report.update({"format": "c", "target": args.target, "output": str(args.output), "prefix": cm.library.prefix,
                   "files": sorted(str(f.relative_to(args.output)) for f in files), "model_stack": asdict(stack)})
    return report


def _export_program(args: argparse.Namespace) -> int:
    """A program file with every method of model.py (see mcu/program/methods.py), weights inline or beside it."""
    # lazy: keeps torch out of this module's import
    from mcu.program.methods import compile_methods
    # lazy: the C extension loads only when a program runs on the host
    from mcu.program.host import verify_program_files

    refuse_cmsis_nn_in_program(args, flag="--format program")
    out = check_file_target(Path(args.output), what="program file")
    weights_path = out.with_suffix(WEIGHTS_SUFFIX)
    if args.external_weights:
        check_file_target(weights_path, what="weights file", example="model.mpw")
    # The board only decides whether each method's arena fits; any interpreter firmware runs the file.
    with quiet_torch(verbose=args.verbose):
        methods = compile_methods(args.model, board=args.board or "mps2-an505", quantize=args.quantize,
                                  weight_palette=getattr(args, "weight_palette", None), mixed=mixed_options(args),
                                  bias_correction=bias_correction(args), weight_rounding=weight_rounding(args))
    notes: list[str] = []
    say_notes(args, notes, compact_weights_notes(args))
    image = program_from(methods, external_weights=args.external_weights, bundle=args.bundle_tests,
                         weights_name=weights_path.name)
    # The weights first: a reader of the program never finds it beside an older weights file.
    if image.weights is not None:
        write_atomic(weights_path, image.weights)
    write_atomic(out, image.program)
    verified = None
    if args.verify:
        weights = weights_path if image.weights is not None else None
        if any(m.model.has_custom_ops for m in methods):  # the user's kernels run in a child, not in mcu
            verified = verify_program_in_child(out, weights, Path(args.model))
        else:
            verified = verify_program_files(out, weights)
    if args.json:
        print_json({"model": methods[0].model.spec.name, "board": methods[0].model.board.name,
                    "quantize": methods[0].model.quantize, "format": "program", "output": str(out),
                    "files": [str(out)] + ([str(weights_path)] if image.weights is not None else []),
                    "program_bytes": len(image.program),
                    "weights_bytes": len(image.weights) if image.weights is not None else None,
                    "methods": [{"name": m.name, "arena_bytes": m.model.memory.arena_size} for m in methods],
                    "verified": verified, "notes": notes})
        return 0
    arenas = ", ".join(f"{m.name} {m.model.memory.arena_size} B" for m in methods)
    print(f"wrote {out} ({len(image.program)} B; methods: {arenas})")
    if image.weights is not None:
        print(f"wrote {weights_path} ({len(image.weights)} B of weights; the program accepts only this file)")
    if verified is not None:
        print(verified)
    return 0
