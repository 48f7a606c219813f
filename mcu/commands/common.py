"""What the ``mcu`` commands share: compiling the model file their arguments name, and printing one JSON object."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mcu.backends.cmsis_nn.core import cli_spec, resolve
from mcu.errors import McuError
from mcu.progress import quiet_torch
from mcu.quantize import modes
from mcu.quantize.modes import MixedOptions



def palette_choice(args: Any) -> modes.Palette | None:
    """``--weight-palette BITS`` with ``--palette-per``."""
    bits = getattr(args, "weight_palette", None)
    return None if bits is None else modes.PaletteOptions(bits, getattr(args, "palette_per", "channel"))

def print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=None, separators=(",", ":")))


def refuse_cmsis_nn_in_program(args: argparse.Namespace, flag: str = "--program") -> None:
    """A program file runs on the interpreter firmware, which holds mcu's own kernels only: --cmsis-nn with it
    would build and report those kernels as if CMSIS-NN ran (run, profile) or be dropped (export)."""
    if getattr(args, "cmsis_nn", None) is not None:
        raise McuError("--cmsis-nn applies to generated C (build, run, export --format c); program files "
                       "run mcu's own kernels in the interpreter", hint=f"drop --cmsis-nn, or drop {flag}")


def mixed_options(args: argparse.Namespace) -> MixedOptions | None:
    """``--accuracy-budget`` and ``--mixed-objective`` (``--quantize mixed``); None without a budget."""
    budget = getattr(args, "accuracy_budget", None)
    return None if budget is None else MixedOptions(budget, getattr(args, "mixed_objective", "flash"))


def bias_correction(args: argparse.Namespace) -> bool | None:
    """``--bias-correction on|off``; None without the flag: the quantize mode's default."""
    flag = getattr(args, "bias_correction", None)
    return None if flag is None else flag == "on"


def weight_rounding(args: argparse.Namespace) -> str | None:
    """``--weight-rounding nearest|gptq|searched``; None without the flag: the quantize mode's default."""
    return getattr(args, "weight_rounding", None)


def compile_model(args: argparse.Namespace) -> Any:
    """The compiled model (``mcu.api.CompiledModel``) of ``args.model`` for ``args.board`` with the
    command's quantize mode, backend options and ``--weights-in``; what an option changed nothing of is said
    on stderr (with --json, in the report's ``notes``)."""
    cm = _compile_model(args)
    cm.weights_in = getattr(args, "weights_in", None)
    say_notes(args, cm.notes, compact_weights_notes(args, cm.graph, cm.board))
    return cm


def compact_weights_notes(args: argparse.Namespace, graph: Any = None, board: Any = None) -> list[str]:
    """One note when ``--compact-weights`` changes nothing in this build (accepted, not refused: the same command
    line serves every mode and board): a program file, whose interpreter runs the portable kernels, or a graph
    none of whose layers it changed; ``graph`` None: a program file."""
    if not getattr(args, "compact_weights", False):
        return []
    if graph is None or getattr(args, "program", False):
        why = "a program file runs the interpreter's portable kernels, which read the weights as they are"
    else:
        # lazy: keeps numpy out of this module's import
        from mcu.backends.optimized.compact import unchanged_by_compact

        why = unchanged_by_compact(graph, board)
    return [] if why is None else [f"--compact-weights changes nothing here: {why}"]


def say_notes(args: argparse.Namespace, notes: list[str], new: list[str]) -> None:
    """Add ``new`` to a report's ``notes``; without --json, say each on stderr as it comes."""
    notes.extend(new)
    if not getattr(args, "json", False):
        for text in new:
            print(f"mcu: note: {text}", file=sys.stderr)


def _compile_model(args: argparse.Namespace) -> Any:
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.api import compile_file

    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if getattr(args, "prefill_chunk", None) is not None and Path(args.model).is_file() \
            and not is_generation_file(args.model):
        raise McuError(f"--prefill-chunk applies to text-generation model files (methods prefill and decode); "
                       f"{args.model} is not one", hint="drop --prefill-chunk")
    streamed = getattr(args, "stream_prefix", False) or getattr(args, "stream_input", False)
    spec, origin = cli_spec(getattr(args, "cmsis_nn", None))
    budget = getattr(args, "ram_budget", None)

    def from_file(**fusion: Any) -> Any:
        return compile_file(args.model, board=args.board, quantize=args.quantize,
                            cmsis_nn=resolve(spec, origin=origin),
                            packed_weights=False if getattr(args, "compact_weights", False) else None,
                            backend=getattr(args, "backend", None), qat=getattr(args, "qat", False),
                            weight_palette=palette, mixed=mixed, bias_correction=corrected,
                            weight_rounding=rounding, weights_in=getattr(args, "weights_in", None), **fusion)

    fuse = getattr(args, "fuse_blocks", "off")
    palette = palette_choice(args)
    mixed = mixed_options(args)
    corrected = bias_correction(args)
    rounding = weight_rounding(args)
    with quiet_torch(verbose=getattr(args, "verbose", False)):
        stream_input = getattr(args, "stream_input", False)
        if budget is None or getattr(args, "speed_model", "measured") != "measured" or (stream_input and fuse != "off"):
            # Unmeasured, a streamed prefix's budget takes the fewest calls that fit (mcu/plan/prefix.py).
            return from_file(fuse_blocks=fuse, ram_budget=budget, stream_prefix=getattr(args, "stream_prefix", False),
                             stream_input=getattr(args, "stream_input", False))
        # lazy: the profiler and the simulator only for a build with a RAM budget
        from mcu.api import backend_options, lower_file, lower_spec
        from mcu.devtools.fusion_costs import compile_streamed_within_budget, compile_within_budget

        # The measurement compiles the model once per schedule it runs: capture and quantize once.
        if getattr(args, "qat", False):
            # lazy: keeps torchao out of this module's import
            from mcu.capture.loader import load_model_file
            from mcu.quantize.qat import with_qat

            lowered = lower_spec(with_qat(load_model_file(args.model), args.quantize), quantize=args.quantize,
                                 weight_palette=palette, mixed=mixed, bias_correction=corrected,
                                 weight_rounding=rounding)
        else:
            lowered = lower_file(args.model, quantize=args.quantize, weight_palette=palette, mixed=mixed,
                                 bias_correction=corrected, weight_rounding=rounding)
        backend = getattr(args, "backend", None)
        options = backend_options(resolve(spec, origin=origin),
                                  False if getattr(args, "compact_weights", False) else None, backend)

        def from_lowered(**fusion: Any) -> Any:
            # every schedule the search compares, the whole-tensor one too, without speed-only scratch
            return lowered.compile(args.board, options=options, backend=backend, speed_scratch=False,
                                   weights_in=getattr(args, "weights_in", None), **fusion)

        if streamed and fuse == "off":
            return compile_streamed_within_budget(from_lowered, stream_input, budget)
        # --stream-prefix with --fuse-blocks: the prefixes followed by fused blocks or none
        return compile_within_budget(from_lowered, fuse, budget, prefixed=streamed)
