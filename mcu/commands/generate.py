"""``mcu run``, ``mcu build`` and ``mcu export`` for text-generation model files (mcu/generate.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mcu.generate import (CompiledGeneration, build_generation_firmware, compile_generation, host_tokens,
                          load_generation, reference_tokens, run_generation_firmware)
from mcu.commands.common import print_json
from mcu.emit.outputs import ensure_dir
from mcu.emit.targets import TARGETS, ExportJob
from mcu.errors import McuError
from mcu.progress import quiet_torch
from mcu.generate import build_program_generation_firmware, program_image, run_program_generation
from mcu.program.device import check_fits, program_layout


def _compile(args: argparse.Namespace) -> CompiledGeneration:
    with quiet_torch(verbose=getattr(args, "verbose", False)):
        gf = load_generation(args.model)
        return compile_generation(gf, args.board, args.quantize, getattr(args, "prefill_chunk", None))


def _sizes(cg: CompiledGeneration, fw: Any) -> dict[str, Any]:
    decode = cg.methods["decode"].memory
    prefill = cg.methods["prefill"].memory
    return {"board": cg.board.name, "quantize": cg.quantize, "flash_bytes": fw.flash_bytes, "ram_bytes": fw.ram_bytes,
            "board_flash_bytes": cg.board.flash.length, "board_ram_bytes": cg.board.ram.length,
            "arena_bytes": cg.arena_bytes(), "state_bytes": cg.state_bytes,
            "prefill_arena_bytes": prefill.arena_size, "decode_arena_bytes": decode.arena_size,
            "prefill_chunk": cg.file.chunk,
            "stack_reserved_bytes": fw.stack.reserved_bytes if fw.stack is not None else None}


def _print_sizes(s: dict[str, Any]) -> None:
    if "program_bytes" in s:
        print(f"program file {s['program_bytes']:,} B (in the interpreter firmware's program region); the firmware "
              "below holds the interpreter and the kernels the program uses, its RAM the largest arena it accepts")
    print(f"flash {s['flash_bytes']:,} B of {s['board_flash_bytes']:,} B; RAM {s['ram_bytes']:,} B of "
          f"{s['board_ram_bytes']:,} B ({s['board']}, {s['quantize']})")
    print(f"arena {s['arena_bytes']:,} B = state (KV cache) {s['state_bytes']:,} B + working memory "
          f"(prefill of {s['prefill_chunk']} token{'s' if s['prefill_chunk'] != 1 else ''} per call "
          f"{s['prefill_arena_bytes'] - s['state_bytes']:,} B, decode {s['decode_arena_bytes'] - s['state_bytes']:,} B)")


def export(args: argparse.Namespace) -> int:
    """The library both methods are rendered into (``<prefix>_prefill_run``, ``<prefix>_decode_run``, the shared
    state and arena), for the targets without an example app: those run a model's bundled test vectors."""
    target = TARGETS[args.target]
    if target.example:
        raise McuError(f"--target {args.target} writes an example app that runs a model's bundled test vectors; "
                       f"{args.model} is a text-generation file, which has none",
                       hint="export its library with --target cmake (or make, cmsis-pack); `mcu build` makes the "
                            "generation firmware")
    ensure_dir(args.output)  # a bad -o fails before the compile, not after it
    cg = _compile(args)
    files = target.write(ExportJob(lib=cg.library, out_dir=ensure_dir(Path(args.output)), board=cg.board.name))
    if args.json:
        print_json({"model": cg.file.path.stem, "board": cg.board.name, "quantize": cg.quantize, "format": "c",
                    "target": args.target, "output": str(args.output), "prefix": cg.prefix,
                    "files": sorted(str(f.relative_to(args.output)) for f in files), "arena_bytes": cg.arena_bytes(),
                    "state_bytes": cg.state_bytes, "methods": sorted(cg.methods)})
    else:
        print(f"wrote {len(files)} files to {args.output} (arena {cg.arena_bytes()} B, of which state "
              f"{cg.state_bytes} B); include {cg.prefix}_model.h: {cg.prefix}_prefill_run, {cg.prefix}_decode_run")
    return 0


def build(args: argparse.Namespace) -> int:
    cg = _compile(args)
    # The firmware compares with the Python reference's tokens; building alone does not need them.
    fw = build_generation_firmware(cg, [0] * cg.file.count, args.output)
    sizes = _sizes(cg, fw)
    if args.json:
        print(json.dumps({**sizes, "elf": str(fw.elf), "uf2": str(fw.uf2) if fw.uf2 else None}))
        return 0
    print(f"built {fw.elf} for {cg.board.name} ({cg.quantize}): prefill and decode in one library")
    if fw.uf2 is not None:
        print(f"UF2 for the BOOTSEL drive: {fw.uf2}")
    _print_sizes(sizes)
    print(f"fits {cg.board.name}: flash {fw.flash_bytes / cg.board.flash.length:.0%}, "
          f"RAM {fw.ram_bytes / cg.board.ram.length:.0%}")
    return 0


def run(args: argparse.Namespace) -> int:
    cg = _compile(args)
    gf = cg.file
    expected = reference_tokens(gf, cg.quantize)
    host = host_tokens(cg)
    if getattr(args, "program", False):
        image = program_image(cg)
        check_fits(program_layout(cg.board), image.program, image.weights, cg.board.name)  # before the build
        fw = build_program_generation_firmware(cg, expected, image)
        dev = run_program_generation(cg, expected, image, fw)
    else:
        fw = build_generation_firmware(cg, expected)
        dev = run_generation_firmware(cg, fw)
    passed = dev.passed and dev.tokens == expected and host == expected
    sizes = _sizes(cg, fw)
    if getattr(args, "program", False):
        sizes["program_bytes"] = len(image.program)
    report = {**sizes, "passed": passed, "runs": "program file on the interpreter" if getattr(args, "program", False)
              else "generated C", "prompt": gf.text(gf.prompt), "tokens": dev.tokens,
              "text": gf.text(dev.tokens), "reference_tokens": expected, "host_tokens": host,
              "prefill_instructions": dev.prefill_instructions, "prompt_call_instructions": dev.prompt_instructions,
              "decode_instructions": dev.decode_instructions,
              "sampling": {"top_k": gf.top_k, "seed": gf.seed} if gf.top_k else "greedy"}
    if args.json:
        print(json.dumps(report))
        return 0 if passed else 1
    print(f"prompt: {report['prompt']!r}")
    print(f"generated on {cg.board.name} ({len(dev.tokens)} tokens, "
          f"{'greedy' if not gf.top_k else f'top-{gf.top_k}, seed {gf.seed}'}): {report['text']!r}")
    same = lambda a: "equal" if a == dev.tokens else "DIFFERENT"  # noqa: E731
    print(f"{'PASS' if passed else 'FAIL'}: device tokens {same(expected)} to the Python reference "
          f"({cg.quantize} model in PyTorch), host build {same(host)}")
    n = len(gf.prompt)
    print(f"instructions: prompt {dev.prefill_instructions:,} ({n} tokens in {len(dev.prompt_instructions)} call{'s' if len(dev.prompt_instructions) != 1 else ''}, "
          f"chunk {gf.chunk}; {dev.prefill_instructions / n:,.0f} per token); decode {dev.per_decode_token:,.0f} "
          f"per token ({len(dev.decode_instructions)} calls)")
    _print_sizes(sizes)
    if not passed:
        print(dev.console.strip()[-2000:], file=sys.stderr)
    return 0 if passed else 1
