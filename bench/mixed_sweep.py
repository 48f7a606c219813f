"""``--quantize mixed`` over a sweep of accuracy budgets: per budget, the measured score, the flash the chooser
counts on the board (the layers' constants in the build's layout plus their kernels' code, each source once;
mcu/backends/mixed_flash.py) against all-int8 compact's, and each layer's form, for one example lowered once
(the budgets share their measurements, as the configurations do not depend on the budget).

    .venv/bin/python bench/mixed_sweep.py resnet8 --budgets 0,1,3,6,10,20 [--objective flash] [--board mps2-an505]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example", help="an example's name, or a model file (.py)")
    parser.add_argument("--budgets", default="0,1,3,6,10,20")
    parser.add_argument("--objective", default="flash", choices=("flash", "instructions"))
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--int8-activations", action="store_true", help="without the int16 candidate (to compare)")
    args = parser.parse_args(argv)

    # lazy: torch and the compiler load after the arguments parse
    from mcu.api import lower_file
    from mcu.backends.mixed_flash import BoardFlash
    from mcu.device.boards import load_board
    from mcu.passes import mixed
    from mcu.passes.mixed_choice import Metric, choose_precision
    from mcu.quantize.sensitivity import scorer

    given = Path(args.example)
    lowered = lower_file(given if given.suffix == ".py" else ROOT / "examples" / f"{args.example}.py", quantize="int8")
    score = scorer(lowered.spec)
    seen: dict[bytes, float] = {}
    measured = score.memoized(seen)

    flash = BoardFlash(load_board(args.board))
    layers = [lowered.graph.ops[i] for i in mixed.layers(lowered.graph.ops)]
    int8 = [(op, mixed.INT8) for op in layers]
    int8_bytes = sum(flash.layer_bytes(op, form) for op, form in int8) + flash.code_bytes(int8)
    unit = "dB" if score.sqnr else "%"
    print(f"{args.example}: {score.metric} on {score.samples} samples; all-int8 compact on {args.board}: "
          f"{int8_bytes} B of layer constants and kernel code (objective {args.objective})")
    print(f"{'budget':>7} {'score':>9} {'flash B':>8} {'ratio':>6} {'code B':>7}  forms")
    for budget in (float(b) for b in args.budgets.split(",")):
        chosen = choose_precision(copy.deepcopy(lowered.graph), measured, Metric(score.metric, score.sqnr), budget,
                                  args.objective, score.samples, flash, int16=not args.int8_activations).precision
        assert chosen is not None
        total = sum(layer.weight_bytes for layer in chosen.layers) + chosen.code_bytes
        forms = " ".join(layer.weights + ("/a16" if layer.activations == "int16" else "") for layer in chosen.layers)
        print(f"{budget:>7g} {chosen.score:>7.2f} {unit} {total:>8} {total / int8_bytes:>6.2f} {chosen.code_bytes:>7}"
              f"  {forms}")
    print(f"(all-int8 {chosen.int8_score:.2f} {unit}; {len(seen)} configurations measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
