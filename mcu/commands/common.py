"""What the ``mcu`` commands share: compiling the model file their arguments name, and printing one JSON object."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mcu.backends.cmsis_nn.core import cli_spec, resolve
from mcu.errors import McuError
from mcu.progress import quiet_torch


def print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=None, separators=(",", ":")))


def compile_model(args: argparse.Namespace) -> Any:
    """The compiled model (``mcu.api.CompiledModel``) of ``args.model`` for ``args.board`` with the
    command's quantize mode and backend options."""
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.api import compile_file

    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.generate import is_generation_file

    if getattr(args, "prefill_chunk", None) is not None and Path(args.model).is_file() \
            and not is_generation_file(args.model):
        raise McuError(f"--prefill-chunk applies to text-generation model files (methods prefill and decode); "
                       f"{args.model} is not one", hint="drop --prefill-chunk")
    spec, origin = cli_spec(getattr(args, "cmsis_nn", None))
    budget = getattr(args, "ram_budget", None)

    def compile_for(**fusion: Any) -> Any:
        return compile_file(args.model, board=args.board, quantize=args.quantize,
                            cmsis_nn=resolve(spec, origin=origin),
                            packed_weights=False if getattr(args, "compact_weights", False) else None,
                            backend=getattr(args, "backend", None), qat=getattr(args, "qat", False),
                            weight_palette=getattr(args, "weight_palette", None), **fusion)

    with quiet_torch(verbose=getattr(args, "verbose", False)):
        costs = None
        if budget is not None and getattr(args, "speed_model", "measured") == "measured":
            # lazy: the profiler and the simulator only for a build with a RAM budget
            from mcu.devtools.fusion_costs import measure_fusion_costs
            costs = measure_fusion_costs(compile_for, budget=budget)
        return compile_for(fuse_blocks=getattr(args, "fuse_blocks", "off"), ram_budget=budget, fuse_costs=costs)
