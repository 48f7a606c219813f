"""Weight layouts benchmark (not a test): per reference model at int8, instructions, instructions per MAC
and flash with the packed int16 weights (the default) and with --compact-weights (int8 weights, the
compact kernels), next to CMSIS-NN's instructions and the portable kernels' flash (the int8-weight build
before the compact kernels: the flash the compact build must not exceed).

    .venv/bin/python bench/weights.py [--boards mps2-an505,mps2-an386] [--models ds_cnn,...]
                                      [--cmsis-nn PATH] [--json out.json]

With ``--cmsis-nn PATH`` (default ``CMSIS_NN_PATH``) CMSIS-NN's column is measured in the same run (its
outputs checked identical to ours); otherwise bench/speed.py's recorded figures are used.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from mcu.api import CompiledModel, backend_options  # noqa: E402
from mcu.device.boards import load_board  # noqa: E402
from mcu.devtools.ops import op_macs  # noqa: E402
from mcu.capture.loader import load_model_file  # noqa: E402
from mcu.pipeline import compile_graph, to_graph  # noqa: E402

import speed  # noqa: E402

TARGET = 0.7  # every model at most 0.7x CMSIS-NN with --compact-weights on M33, geomean 0.65x


def build(spec, graph, board: str, backends: list[str] | None, packed: bool | None, cmsis=None) -> CompiledModel:
    g = copy.deepcopy(graph)
    b = load_board(board)
    memory, library, report = compile_graph(g, b, "int8", backends, backend_options(cmsis, packed))
    return CompiledModel(spec=spec, board=b, quantize="int8", graph=g, memory=memory, library=library,
                         partitions=report)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="mps2-an505,mps2-an386")
    parser.add_argument("--models", default=",".join(speed.MODELS))
    parser.add_argument("--cmsis-nn", type=Path, default=os.environ.get("CMSIS_NN_PATH") or None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    cmsis_root = None
    if args.cmsis_nn is not None:
        from mcu.backends.cmsis_nn.core import resolve

        cmsis_root = resolve(args.cmsis_nn)
    report: dict = {}
    for board in [b for b in args.boards.split(",") if b]:
        print(f"\n{board}: int8 instructions per inference (instructions per MAC), flash bytes; ratio to CMSIS-NN "
              f"({'measured now' if cmsis_root else 'recorded'})")
        print(f"{'model':<15} {'MACs':>10} {'packed':>24} {'compact':>24} {'CMSIS-NN':>11} "
              f"{'flash packed':>13} {'compact':>9} {'portable':>9}")
        ratios = []
        for m in [m for m in args.models.split(",") if m]:
            spec = load_model_file(ROOT / "examples" / f"{m}.py")
            graph = to_graph(spec, "int8")
            macs = sum(op_macs(op) for op in graph.ops)
            row: dict = {"macs": macs}
            for name, backends, packed in (("packed", None, True), ("compact", None, False),
                                           ("portable", ["portable"], None)):
                cm = build(spec, graph, board, backends, packed)
                row[name] = {"flash": cm.build().flash_bytes}
                if name != "portable":
                    sim = speed.simulate(cm)
                    row[name]["instructions"] = sim.instructions
                    row[name]["outputs"] = sim.outputs_raw
            if cmsis_root is not None:
                theirs = speed.simulate(build(spec, graph, board, ["cmsis-nn", "portable"], None, cmsis_root))
                if any((x != y).any() for xs, ys in zip(row["compact"]["outputs"], theirs.outputs_raw)
                       for x, y in zip(xs, ys)):
                    raise SystemExit(f"{m} on {board}: CMSIS-NN's outputs differ from ours")
                ref = theirs.instructions
            else:
                ref = speed.CMSIS_NN[m][board]
            for name in ("packed", "compact"):
                row[name].pop("outputs")
                row[name]["ratio"] = row[name]["instructions"] / ref
            row["cmsis_nn"] = ref
            ratios.append(row["compact"]["ratio"])
            report.setdefault(board, {})[m] = row
            cells = [f"{row[n]['instructions']:>10,} {row[n]['instructions'] / macs:4.2f} ({row[n]['ratio']:.2f}x)"
                     for n in ("packed", "compact")]
            print(f"{m:<15} {macs:>10,} {cells[0]:>24} {cells[1]:>24} {ref:>11,} {row['packed']['flash']:>13,} "
                  f"{row['compact']['flash']:>9,} {row['portable']['flash']:>9,}", flush=True)
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        report[board]["compact_geomean"] = geo
        print(f"compact: worst {max(ratios):.3f}x, geomean {geo:.3f}x of CMSIS-NN (target on M33: each <= {TARGET}x, "
              f"geomean <= 0.65x); flash at most the portable build's: "
              f"{all(r['compact']['flash'] <= r['portable']['flash'] for k, r in report[board].items() if k != 'compact_geomean')}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
