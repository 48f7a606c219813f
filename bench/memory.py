"""Memory benchmark (not a test): int8 arenas of every reference model against the live-set bound of
the op order and ExecuTorch's planned arena, and how long planning takes.

    .venv/bin/python bench/memory.py [--svg-dir docs/]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.capture.loader import load_model_file  # noqa: E402
from mcu.plan.memory import plan_memory  # noqa: E402
from mcu.plan.drawing import plan_svg  # noqa: E402
from mcu.pipeline import to_graph  # noqa: E402

# ExecuTorch 1.5.1 Cortex-M flow, int8, measured on the same architectures: planned
# non-constant memory, and the live-set bound of that op order.
EXECUTORCH = {
    "small_cnn": (15_680, 15_680),
    "ds_cnn": (16_000, 16_000),
    "mobilenet_v1": (138_240, 55_296),
    "resnet8": (49_728, 49_152),
    "fc_autoencoder": (3_200, 768),
}
TARGETS = {"small_cnn": 13_600, "ds_cnn": 8_800, "mobilenet_v1": 40_000, "resnet8": 34_500,
           "fc_autoencoder": 1_024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg-dir", type=Path, help="also draw each plan to <dir>/<model>_memory_plan.svg")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"{'model':<15} {'arena':>8} {'bound':>8} {'ExecuTorch':>11} {'mcu/ET':>7} {'target':>8} "
          f"{'plan time':>10}  method")
    for name, (et_arena, _et_bound) in EXECUTORCH.items():
        graph = to_graph(load_model_file(ROOT / "examples" / f"{name}.py"), "int8")
        start = time.perf_counter()
        memory = plan_memory(graph)
        elapsed = time.perf_counter() - start
        ok = "ok" if memory.arena_size <= TARGETS[name] else "OVER"
        print(f"{name:<15} {memory.arena_size:>8} {memory.lower_bound:>8} {et_arena:>11} "
              f"{memory.arena_size / et_arena:>7.3f} {TARGETS[name]:>7} {ok:<3} {elapsed * 1000:>7.1f} ms  "
              f"{memory.plan.method}")
        if args.svg_dir:
            args.svg_dir.mkdir(parents=True, exist_ok=True)
            (args.svg_dir / f"{name}_memory_plan.svg").write_text(
                plan_svg(memory.plan, f"{name} (int8): memory plan", [op.name for op in graph.ops]))
    print("arena and bound include every kernel scratch buffer; bound = largest total of bytes live at one step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
