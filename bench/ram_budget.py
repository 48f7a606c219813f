"""RAM-budget sweep (not a test: about seven minutes for mobilenet_v2): per model, each op's instructions
measured once in QEMU (whole, and fused at 1, 2, 4 and 8 rows a pass), then builds for a rising series of
budgets from the smallest arena the fused schedules reach. Prints budget, arena and instructions per build
and exits 1 when a build does not fit its budget, fails its vectors, or runs more instructions than the
build of a smaller budget.

    .venv/bin/python bench/ram_budget.py [--board mps2-an505] [--model mobilenet_v2] [--budget 40000 ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.api import CompiledModel, compile_file  # noqa: E402
from mcu.devtools.fusion_costs import measure_fusion_costs  # noqa: E402
from mcu.plan.fusion import choose  # noqa: E402


def sweep(model: str, board: str, given: list[int]) -> bool:
    path = ROOT / "examples" / f"{model}.py"

    def compile_for(**kwargs: object) -> CompiledModel:
        return compile_file(path, board=board, quantize="int8", **kwargs)  # type: ignore[arg-type]

    costs = measure_fusion_costs(compile_for)
    if costs is None:
        print(f"{board}: no simulator to measure the ops on", file=sys.stderr)
        return False
    whole = compile_for()
    smallest = choose(whole.graph).smallest
    arena = whole.memory.arena_size
    budgets = sorted(set(given) if given else {smallest, (smallest + arena) // 2, arena, 2 * arena})
    print(f"{model} int8 on {board}: whole tensors {arena:,} B; smallest fused arena {smallest:,} B")
    print(f"{'budget (B)':>12} {'arena (B)':>10} {'instructions':>14}")
    ok, last = True, None
    for budget in budgets:
        cm = compile_for(ram_budget=budget, fuse_costs=costs)
        run = cm.simulate()
        good = run.passed and cm.memory.arena_size <= budget and (last is None or run.instructions <= last)
        ok &= good
        last = run.instructions
        print(f"{budget:>12,} {cm.memory.arena_size:>10,} {run.instructions:>14,}{'' if good else '  FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--model", action="append", help="example name (default: mobilenet_v2)")
    parser.add_argument("--budget", type=int, action="append", default=[],
                        help="budget in bytes (repeat; default: the smallest arena, half way, whole, twice whole)")
    args = parser.parse_args()
    return 0 if all([sweep(m, args.board, args.budget) for m in args.model or ["mobilenet_v2"]]) else 1


if __name__ == "__main__":
    sys.exit(main())
