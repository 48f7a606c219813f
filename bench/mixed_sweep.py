"""``--quantize mixed`` over a sweep of accuracy budgets: per budget, the measured score, the weights' bytes the
chooser counts and each layer's form, for one example lowered once (the budgets share their measurements, as
the path does not depend on the budget).

    .venv/bin/python bench/mixed_sweep.py resnet8 --budgets 0,1,3,6,10,20 [--objective flash]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example")
    parser.add_argument("--budgets", default="0,1,3,6,10,20")
    parser.add_argument("--objective", default="flash", choices=("flash", "instructions"))
    args = parser.parse_args(argv)

    # lazy: torch and the compiler load after the arguments parse
    from mcu.api import lower_file
    from mcu.ir import Graph
    from mcu.passes import mixed
    from mcu.passes.mixed_choice import Metric, choose_precision
    from mcu.quantize.sensitivity import scorer

    lowered = lower_file(ROOT / "examples" / f"{args.example}.py", quantize="int8")
    score = scorer(lowered.spec)
    seen: dict[bytes, float] = {}

    def measured(graph: Graph) -> float:
        key = b"".join(t.data.tobytes() for op in graph.ops for t in op.inputs[1:5] if t.data is not None)
        if key not in seen:
            seen[key] = score.score(graph)
        return seen[key]

    int8_bytes = sum(mixed.weight_bytes(lowered.graph.ops[i], mixed.INT8) for i in mixed.layers(lowered.graph.ops))
    unit = "dB" if score.sqnr else "%"
    print(f"{args.example}: {score.metric} on {score.samples} samples; int8 weights {int8_bytes} B "
          f"(objective {args.objective})")
    print(f"{'budget':>7} {'score':>9} {'weights B':>10} {'ratio':>6}  forms")
    for budget in (float(b) for b in args.budgets.split(",")):
        chosen = choose_precision(copy.deepcopy(lowered.graph), measured, Metric(score.metric, score.sqnr), budget,
                                  args.objective, score.samples).precision
        assert chosen is not None
        total = sum(layer.weight_bytes for layer in chosen.layers)
        forms = " ".join(layer.weights for layer in chosen.layers)
        print(f"{budget:>7g} {chosen.score:>7.2f} {unit} {total:>10} {total / int8_bytes:>6.2f}  {forms}")
    print(f"({len(seen)} configurations measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
